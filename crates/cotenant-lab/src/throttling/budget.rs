//! Part 4 of `lab throttling`: cotenant's user-space CPU budget, no cgroup; each case's row,
//! table line and verdict as it ends.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;

use crate::runner::{run_workers_at, WorkerSpec, START_DELAY};
use crate::{Lab, Outcome};

use super::plan::{budget_case_args, budget_cases, BudgetCase};

/// Part 4: the pool's own budget, no cgroup.
pub(super) fn budget_part(
    lab: &Lab,
    n: u32,
    duration: Duration,
    outcome: &mut Outcome,
    report: &mut String,
) -> anyhow::Result<()> {
    let _ = write!(
        report,
        "## cotenant's user-space CPU budget\n\n\
         A fixed pool of {n} workers running CPU-bound items of 1 ms or 20 ms, `cpu_budget(C, 100 ms)`, no cgroup, {} s per run. \
         \"saturated\": the workers always have an item. \"open loop\": items arrive evenly spaced and offer the given \
         share of the budget in CPU time; each item runs until its thread's CPU clock has advanced the item's length, so \
         that the offer is exact (a calibrated item was off by over 10 % between processes). \
         \"CPUs used\" is the workers' CPU time (the process's minus the submitting thread's) over the run's wall time. \
         \"throttled\" counts periods in which a worker found the budget spent and parked until the refill; \
         \"short\" counts periods that began paying a debt (an overrun the slush fund could not pay). \
         Saturated at C = 1.5, the workers want {n} CPUs, so every period ends with the budget spent by design; \
         saturated at C = {n}, or open loop at C = 1.5, the budget equals what the workers use, the seed's Table II \
         setting, where a throttled period is an artefact of the accounting. \
         A running item cannot be interrupted, so a worker charges its slice only between items: with 20 ms items a \
         slice taken near the end of a period is charged, overrun included, in the next one (the user-space analogue of \
         the kernel's tick-granular accounting, seed 001 Figure 4).\n\n\
         | budget | items | load | slush fund | CPUs used | vs budget | periods | throttled | ratio | short |\n\
         |---:|---:|---|---|---:|---:|---:|---:|---:|---:|\n",
        duration.as_secs()
    );
    for case in budget_cases(n) {
        let BudgetCase { cpus, item_ms, offered } = case;
        let load = match offered {
            None => "saturated".to_owned(),
            Some(f) => format!("open loop, {:.0} % of the budget", 100.0 * f),
        };
        for slush in [true, false] {
            eprintln!(
                "lab throttling: budget {cpus} CPUs, {item_ms} ms items, {load}, slush {}",
                if slush { "on" } else { "off" }
            );
            let busy_before = lab.quiet_check();
            let spec = WorkerSpec::lab_worker(budget_case_args(&case, n, duration, slush), None)?;
            let run = run_workers_at(&[spec], SystemTime::now() + START_DELAY)?
                .pop()
                .context("no report from the worker")?;
            let budget = run.budget.context("the worker reported no budget")?;
            let used = run.workers_cpu_ns as f64 / run.wall_ns.max(1) as f64;
            // Used against the budget: the limiter's error when the workers want more, their
            // own shortfall when they cannot use it all (budget = N).
            let error = used / cpus - 1.0;
            let ratio = budget.throttled_periods as f64 / budget.periods.max(1) as f64;
            let _ = writeln!(
                report,
                "| {cpus} | {item_ms} ms | {load} | {} | {used:.3} | {:+.1}% | {} | {} | {:.1}% | {} |",
                if slush { "on" } else { "off" },
                100.0 * error,
                budget.periods,
                budget.throttled_periods,
                100.0 * ratio,
                budget.short_periods
            );
            let mut row = serde_json::Map::new();
            row.insert("part".into(), "budget".into());
            row.insert("budget_cpus".into(), cpus.into());
            row.insert("slush".into(), slush.into());
            row.insert("item_ms".into(), item_ms.into());
            row.insert("offered".into(), offered.into());
            row.insert("cpus_used".into(), used.into());
            row.insert(
                "process_cpus_used".into(),
                (run.process_cpu_ns as f64 / run.wall_ns.max(1) as f64).into(),
            );
            row.insert("vs_budget".into(), error.into());
            row.insert("periods".into(), budget.periods.into());
            row.insert("throttled_periods".into(), budget.throttled_periods.into());
            row.insert("throttled_ratio".into(), ratio.into());
            row.insert("short_periods".into(), budget.short_periods.into());
            row.insert("charged_s".into(), (budget.charged_ns as f64 / 1e9).into());
            row.insert("host_busy_cpus_before".into(), busy_before.into());
            outcome.rows.push(row);
            outcome.verdicts.push(format!(
                "budget {cpus} CPUs, {item_ms} ms items, {load}, slush {}: used {used:.3} CPUs ({:+.1}%), throttled in {:.1}% of periods",
                if slush { "on" } else { "off" },
                100.0 * error,
                100.0 * ratio
            ));
        }
    }
    report.push('\n');
    Ok(())
}

//! Part 4 of `lab throttling`: cotenant's user-space CPU budget, no cgroup; each case's row,
//! table line and verdict as it ends.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use serde::Serialize;

use crate::runner::{run_workers_at, WorkerSpec, START_DELAY};
use crate::{Lab, Outcome};

use super::plan::{budget_case_args, budget_cases, BudgetCase};

/// One run's row of part 4: one budget case, the slush fund on or off.
#[derive(Serialize)]
struct BudgetCaseRow {
    /// The part: always `budget`.
    part: &'static str,
    /// The budget (CPUs per 100 ms period).
    budget_cpus: f64,
    /// Whether the slush fund was on.
    slush: bool,
    /// The CPU-bound items' length (ms).
    item_ms: u32,
    /// Open loop: the CPU time offered, a fraction of the budget; null when saturated (the key
    /// is always there).
    offered: Option<f64>,
    /// CPUs the workers used: their CPU time over the run's wall time.
    cpus_used: f64,
    /// CPUs the whole process used, the submitting thread included.
    process_cpus_used: f64,
    /// CPUs used against the budget, relative (0 = exactly the budget).
    vs_budget: f64,
    /// Budget periods during the run (count).
    periods: u64,
    /// Periods in which a worker found the budget spent and parked until the refill (count).
    throttled_periods: u64,
    /// Throttled periods over periods (0 to 1).
    throttled_ratio: f64,
    /// Periods that began paying a debt the slush fund could not pay (count).
    short_periods: u64,
    /// CPU time the workers charged to the budget (s).
    charged_s: f64,
    /// CPUs other processes kept busy just before the run (the quiet-host check).
    host_busy_cpus_before: f64,
}

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
         saturated at C = {n}, or open loop at C = 1.5, the budget equals what the workers use, \
         the CFS throttling paper's Table II setting, where a throttled period is an artefact of the \
         accounting. \
         A running item cannot be interrupted, so a worker charges its slice only between items: with 20 ms items a \
         slice taken near the end of a period is charged, overrun included, in the next one (the user-space analogue of \
         the kernel's tick-granular accounting, the CFS throttling paper's Figure 4).\n\n\
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
            outcome.rows.push(crate::row_of(&BudgetCaseRow {
                part: "budget",
                budget_cpus: cpus,
                slush,
                item_ms,
                offered,
                cpus_used: used,
                process_cpus_used: run.process_cpu_ns as f64 / run.wall_ns.max(1) as f64,
                vs_budget: error,
                periods: budget.periods,
                throttled_periods: budget.throttled_periods,
                throttled_ratio: ratio,
                short_periods: budget.short_periods,
                charged_s: budget.charged_ns as f64 / 1e9,
                host_busy_cpus_before: busy_before,
            }));
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

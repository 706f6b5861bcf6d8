//! Parts 1 to 3 of `lab throttling`, in real cgroups: Table II, latency inside the quota, and
//! rewrites of an unchanged quota; each run's row and table line as it ends.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;

use crate::runner::fixed_pool_args;
use crate::{Lab, Outcome};
use cotenant_ops::cgroup::Layout;

use super::cgroup_run::run_in_cgroup;
use super::plan::{saturating_args, table_limits, Limit, Rewrite};
use super::report::{
    limit_row, rewrite_verdict, table_verdicts, LatencyFigures, RewriteFigures, Table2Figures, Throttling,
    SEED_TABLE_II,
};

pub(super) fn cgroup_parts(
    lab: &Lab,
    layout: &Layout,
    args: &crate::args::LabArgs,
    n: u32,
    duration: Duration,
    outcome: &mut Outcome,
    report: &mut String,
) -> anyhow::Result<()> {
    let secs = duration.as_secs();
    // Part 1: Table II.
    let _ = write!(
        report,
        "## Table II on this kernel\n\n\
         {n} CPU-bound threads (a fixed pool saturated with 1 ms items) in a cgroup of their own, {secs} s per run. \
         Quota N = {n} CPUs: the threads never need more, so every throttled period is an artefact of the accounting. \
         \"CPU vs unlimited\" is the CPU time the threads got against the unlimited run. \
         The CFS throttling paper: Linux 5.12, 3 threads on 3 CPUs, quota = 3 CPUs (its Table II).\n\n\
         | limit | periods | throttled | ratio | throttled time | throttled time / run | CPU vs unlimited \
         | paper's ratio | paper's throttled / run |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    let mut unlimited_cpu = f64::NAN;
    let mut table: Vec<(Limit, Throttling, f64)> = Vec::new();
    for limit in table_limits(args.quick) {
        eprintln!("lab throttling: table II, {}", limit.label());
        let busy_before = lab.quiet_check();
        let run =
            run_in_cgroup(lab, layout, limit, Rewrite::None, saturating_args(n, duration, 1), duration)?;
        let Some(run) = run else {
            let _ = writeln!(
                report,
                "| {} | — | — | — | — | — | — | | | (no burst file on this kernel: Linux 5.14+)",
                limit.label()
            );
            continue;
        };
        let cpu_s = run.report.workers_cpu_ns as f64 / 1e9;
        if limit.quota_of_n.is_none() {
            unlimited_cpu = cpu_s;
        }
        let t = run.throttling;
        let seed = SEED_TABLE_II
            .iter()
            .find(|s| s.0 == limit.period_ms && limit.quota_of_n == Some(1.0) && !limit.burst);
        let _ = writeln!(
            report,
            "| {} | {} | {} | {:.1}% | {:.0} ms | {:.1}% | {:.1}% | {} | {} |",
            limit.label(),
            t.periods,
            t.throttled,
            100.0 * t.ratio(),
            t.throttled_ns as f64 / 1e6,
            100.0 * t.throttled_ns as f64 / duration.as_nanos() as f64,
            100.0 * cpu_s / unlimited_cpu,
            seed.map_or(String::new(), |s| format!("{:.1}%", 100.0 * s.1)),
            seed.map_or(String::new(), |s| format!("{:.1}%", 100.0 * s.2)),
        );
        let figures = Table2Figures { workers_cpu_s: cpu_s, cpu_vs_unlimited: cpu_s / unlimited_cpu };
        outcome.rows.push(limit_row("table2", limit, &t, busy_before, &figures));
        table.push((limit, t, cpu_s / unlimited_cpu));
    }
    report.push_str(
        "\nThe paper's throttled time is the sum over its CPUs' run queues divided by the run's wall time, \
         as the kernel reports it; ours is computed the same way.\n\n",
    );
    outcome.verdicts.extend(table_verdicts(&table));

    // Part 2: latency.
    let _ = write!(
        report,
        "## Latency inside the quota\n\n\
         The lab's fib service (items of {} ms, Poisson arrivals) at 70% of {n} CPUs on a fixed pool of {n} workers, {secs} s per run.\n\n\
         | limit | throttled ratio | throttled time / run | service p99 ms | end-to-end p99 ms | throughput /s |\n\
         |---|---:|---:|---:|---:|---:|\n",
        args.service_ms
    );
    let latency_limits: Vec<Limit> =
        std::iter::once(Limit { quota_of_n: None, period_ms: 100, burst: false })
            .chain(table_limits(args.quick).into_iter().filter(|l| l.quota_of_n == Some(1.0) && !l.burst))
            .collect();
    for limit in latency_limits {
        eprintln!("lab throttling: latency, {}", limit.label());
        let busy_before = lab.quiet_check();
        let worker_args = fixed_pool_args(n, f64::from(n), 0.7, args.service_ms, duration);
        let run =
            run_in_cgroup(lab, layout, limit, Rewrite::None, worker_args, duration)?.context("no run")?;
        let s = &run.report.summary;
        let t = run.throttling;
        let _ = writeln!(
            report,
            "| {} | {:.1}% | {:.1}% | {:.1} | {:.1} | {:.1} |",
            limit.label(),
            100.0 * t.ratio(),
            100.0 * t.throttled_ns as f64 / duration.as_nanos() as f64,
            s.service_p99_us / 1000.0,
            s.e2e_p99_us / 1000.0,
            s.throughput_per_s
        );
        let figures = LatencyFigures {
            service_p99_us: s.service_p99_us,
            e2e_p99_us: s.e2e_p99_us,
            throughput_per_s: s.throughput_per_s,
        };
        outcome.rows.push(limit_row("latency", limit, &t, busy_before, &figures));
    }

    // Part 3: rewrites.
    let _ = write!(
        report,
        "\n## Rewriting an unchanged quota\n\n\
         Quota N = {n} CPUs at a 100 ms period, {n} CPU-bound threads, {secs} s per run; a thread of the lab touches the \
         cgroup every 100 ms.\n\n\
         | rewrites | done | wrote something | periods | throttled | ratio | throttled time / run |\n\
         |---|---:|---:|---:|---:|---:|---:|\n"
    );
    let limit = Limit { quota_of_n: Some(1.0), period_ms: 100, burst: false };
    let mut rewrite_ratios = Vec::new();
    for rewrite in [Rewrite::None, Rewrite::Plain, Rewrite::CgroupSet] {
        eprintln!("lab throttling: rewrite, {}", rewrite.label());
        let busy_before = lab.quiet_check();
        let run = run_in_cgroup(lab, layout, limit, rewrite, saturating_args(n, duration, 1), duration)?
            .context("no run")?;
        let t = run.throttling;
        let _ = writeln!(
            report,
            "| {} | {} | {} | {} | {} | {:.1}% | {:.2}% |",
            rewrite.label(),
            run.rewrites,
            run.rewrites_written,
            t.periods,
            t.throttled,
            100.0 * t.ratio(),
            100.0 * t.throttled_ns as f64 / duration.as_nanos() as f64
        );
        let figures = RewriteFigures {
            rewrite: rewrite.label(),
            rewrites: run.rewrites,
            rewrites_written: run.rewrites_written,
        };
        outcome.rows.push(limit_row("rewrite", limit, &t, busy_before, &figures));
        rewrite_ratios.push((rewrite, t));
    }
    outcome.verdicts.push(rewrite_verdict(&rewrite_ratios));
    report.push('\n');
    Ok(())
}

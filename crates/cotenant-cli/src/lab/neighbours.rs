//! Seed 000 Figure 7: P identical processes at once, each serving its own open-loop load, for
//! each pool kind (`ignorant`, `optimal`, `share`, `adaptive`); all processes in the lab's
//! cgroup, so their threads compete one by one. (The one-cgroup-per-process setting of issue 4
//! is not written yet.)
//!
//! The children are real processes (`cotenant lab-worker`) that start their schedules at one
//! common instant. Each run's rows are aggregated by the pure functions at the bottom, which
//! are unit-tested on recorded rows.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use serde::Serialize;

use super::worker::WorkerReport;
use crate::args::PoolKind;

/// Every pool kind, in table order.
pub const KINDS: [PoolKind; 4] = [PoolKind::Ignorant, PoolKind::Optimal, PoolKind::Share, PoolKind::Adaptive];

/// How far in the future the common start is: time for every child to start, calibrate and
/// build its pool.
const START_DELAY: Duration = Duration::from_millis(700);

/// One run's parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunConfig {
    /// Processes at once.
    pub processes: u32,
    /// Pool kind of every process.
    pub kind: PoolKind,
    /// Offered load per process (fraction of its fair share).
    pub load: f64,
    /// Service time per item (ms).
    pub service_ms: f64,
    /// Run length.
    pub duration_ms: u64,
    /// Which repeat this is (also the seed).
    pub repeat: u32,
}

/// Children killed and reaped however the run ends (error, panic); SIGINT and SIGTERM kill the
/// lab, and then the kernel kills the children (`PR_SET_PDEATHSIG` in the worker).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `config.processes` workers at once and returns their reports.
pub fn run_once(config: &RunConfig) -> anyhow::Result<Vec<WorkerReport>> {
    let exe = std::env::current_exe().context("locating the cotenant binary")?;
    let start_at = SystemTime::now() + START_DELAY;
    let start_at_ns = start_at.duration_since(UNIX_EPOCH).context("clock before 1970")?.as_nanos() as u64;
    let mut children = Children(Vec::new());
    for _ in 0..config.processes {
        let child = Command::new(&exe)
            .arg("lab-worker")
            .args(["--pool", kind_name(config.kind)])
            .args(["--processes", &config.processes.to_string()])
            .args(["--load", &config.load.to_string()])
            .args(["--service-ms", &config.service_ms.to_string()])
            .args(["--duration-ms", &config.duration_ms.to_string()])
            .args(["--seed", &config.repeat.to_string()])
            .args(["--start-at-ns", &start_at_ns.to_string()])
            .args(["--parent", &std::process::id().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        children.0.push(child);
    }
    let mut reports = Vec::new();
    for child in &mut children.0 {
        let mut out = String::new();
        child.stdout.take().expect("piped").read_to_string(&mut out)?;
        let mut err = String::new();
        child.stderr.take().expect("piped").read_to_string(&mut err)?;
        let status = child.wait()?;
        if !status.success() {
            bail!("a lab worker failed ({status}): {}", err.trim());
        }
        let line = out.lines().last().unwrap_or("");
        reports.push(serde_json::from_str(line).with_context(|| format!("a lab worker printed {line:?}"))?);
    }
    Ok(reports)
}

pub fn kind_name(kind: PoolKind) -> &'static str {
    match kind {
        PoolKind::Ignorant => "ignorant",
        PoolKind::Optimal => "optimal",
        PoolKind::Share => "share",
        PoolKind::Adaptive => "adaptive",
    }
}

/// One run, reduced to the figures the tables use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunFigures {
    /// Median over processes of each one's service p99 (µs).
    pub service_p99_us: f64,
    /// Worst service time of any process (µs).
    pub service_max_us: f64,
    /// Median over processes of each one's end-to-end p99 (µs).
    pub e2e_p99_us: f64,
    /// Completed items per second, all processes together.
    pub throughput_per_s: f64,
    /// Fraction of offered items completed.
    pub completed_fraction: f64,
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Reduces one run's reports.
pub fn figures(reports: &[WorkerReport]) -> RunFigures {
    let mut p99: Vec<f64> = reports.iter().map(|r| r.summary.service_p99_us).collect();
    let mut e2e: Vec<f64> = reports.iter().map(|r| r.summary.e2e_p99_us).collect();
    let offered: usize = reports.iter().map(|r| r.summary.offered).sum();
    let completed: usize = reports.iter().map(|r| r.summary.completed).sum();
    RunFigures {
        service_p99_us: median(&mut p99),
        service_max_us: reports.iter().map(|r| r.summary.service_max_us).fold(0.0, f64::max),
        e2e_p99_us: median(&mut e2e),
        throughput_per_s: reports.iter().map(|r| r.summary.throughput_per_s).sum(),
        completed_fraction: if offered == 0 { 1.0 } else { completed as f64 / offered as f64 },
    }
}

/// A configuration's figures over its repeats: median, min and max of each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Aggregate {
    /// Processes.
    pub processes: u32,
    /// Pool kind.
    pub kind: PoolKind,
    /// Repeats aggregated.
    pub repeats: usize,
    /// Medians over repeats.
    pub median: RunFigures,
    /// Smallest of each figure over repeats.
    pub min: RunFigures,
    /// Largest of each figure over repeats.
    pub max: RunFigures,
}

/// Aggregates the runs of one configuration (at least one).
pub fn aggregate(processes: u32, kind: PoolKind, runs: &[RunFigures]) -> Aggregate {
    let pick = |f: fn(&RunFigures) -> f64| -> (f64, f64, f64) {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        let m = median(&mut v);
        (m, v.first().copied().unwrap_or(f64::NAN), v.last().copied().unwrap_or(f64::NAN))
    };
    let fields: [fn(&RunFigures) -> f64; 5] = [
        |r| r.service_p99_us,
        |r| r.service_max_us,
        |r| r.e2e_p99_us,
        |r| r.throughput_per_s,
        |r| r.completed_fraction,
    ];
    let picked: Vec<(f64, f64, f64)> = fields.iter().map(|f| pick(*f)).collect();
    let build = |i: usize| RunFigures {
        service_p99_us: [picked[0].0, picked[0].1, picked[0].2][i],
        service_max_us: [picked[1].0, picked[1].1, picked[1].2][i],
        e2e_p99_us: [picked[2].0, picked[2].1, picked[2].2][i],
        throughput_per_s: [picked[3].0, picked[3].1, picked[3].2][i],
        completed_fraction: [picked[4].0, picked[4].1, picked[4].2][i],
    };
    Aggregate { processes, kind, repeats: runs.len(), median: build(0), min: build(1), max: build(2) }
}

/// The verdict line for `processes`: adaptive against ignorant and optimal, from the medians.
pub fn verdict(aggregates: &[Aggregate], processes: u32) -> Option<String> {
    let find = |kind| aggregates.iter().find(|a| a.processes == processes && a.kind == kind);
    let (adaptive, ignorant, optimal) =
        (find(PoolKind::Adaptive)?, find(PoolKind::Ignorant)?, find(PoolKind::Optimal)?);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    Some(format!(
        "P={processes}: adaptive service p99 {:.2}x ignorant's and {:.2}x optimal's; max {:.2}x ignorant's and \
         {:.2}x optimal's; throughput {:.2}x ignorant's",
        ratio(adaptive.median.service_p99_us, ignorant.median.service_p99_us),
        ratio(adaptive.median.service_p99_us, optimal.median.service_p99_us),
        ratio(adaptive.median.service_max_us, ignorant.median.service_max_us),
        ratio(adaptive.median.service_max_us, optimal.median.service_max_us),
        ratio(adaptive.median.throughput_per_s, ignorant.median.throughput_per_s),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::worker::SummaryRow;

    fn report(p99: f64, max: f64, tput: f64) -> WorkerReport {
        WorkerReport {
            pid: 1,
            rate_per_s: 100.0,
            threads: 2,
            final_target: 1,
            decisions: 10,
            chunks: 100,
            chunk_ns: 50_000.0,
            summary: SummaryRow {
                offered: 100,
                completed: 100,
                throughput_per_s: tput,
                service_p50_us: 5000.0,
                service_p99_us: p99,
                service_max_us: max,
                e2e_p50_us: 5000.0,
                e2e_p99_us: p99 * 2.0,
                e2e_max_us: max * 2.0,
            },
        }
    }

    #[test]
    fn a_run_takes_the_median_process_p99_the_worst_max_and_the_total_throughput() {
        let f = figures(&[
            report(7000.0, 9000.0, 100.0),
            report(9000.0, 20_000.0, 90.0),
            report(8000.0, 8000.0, 95.0),
        ]);
        assert_eq!((f.service_p99_us, f.service_max_us, f.throughput_per_s), (8000.0, 20_000.0, 285.0));
        assert_eq!(f.e2e_p99_us, 16_000.0);
        assert_eq!(f.completed_fraction, 1.0);
    }

    #[test]
    fn repeats_aggregate_to_median_and_spread() {
        let runs: Vec<RunFigures> = [10.0, 30.0, 20.0].iter().map(|&p| figures(&[report(p, p, p)])).collect();
        let a = aggregate(2, PoolKind::Adaptive, &runs);
        assert_eq!((a.median.service_p99_us, a.min.service_p99_us, a.max.service_p99_us), (20.0, 10.0, 30.0));
        assert_eq!(a.repeats, 3);
    }

    #[test]
    fn the_verdict_is_computed_from_the_medians() {
        let one = |kind, p99, max, tput| aggregate(2, kind, &[figures(&[report(p99, max, tput)])]);
        let aggs = [
            one(PoolKind::Ignorant, 17_000.0, 40_000.0, 200.0),
            one(PoolKind::Optimal, 7_000.0, 10_000.0, 190.0),
            one(PoolKind::Adaptive, 7_700.0, 12_000.0, 194.0),
        ];
        let v = verdict(&aggs, 2).unwrap();
        assert!(v.contains("service p99 0.45x ignorant's and 1.10x optimal's"), "{v}");
        assert!(v.contains("max 0.30x ignorant's and 1.20x optimal's; throughput 0.97x"), "{v}");
        assert_eq!(verdict(&aggs, 3), None);
    }
}

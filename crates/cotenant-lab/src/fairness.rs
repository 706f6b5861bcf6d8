//! Fairness over time: process A runs alone for 2 s, then B starts; both keep their pools
//! saturated. Every 50 ms each records its CPU time and its pool's target; the lab turns that
//! into CPU shares per 100 ms window and Jain's index (1 = equal, 0.5 = one process has all),
//! for `share` (the seed's formula, which can lock B out: docs/policy.md) against `adaptive`.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::runner::{run_length, run_workers, schedule_args, WorkerSpec};
use super::worker::SeriesPoint;
use super::{Chart, Lab, Outcome, Series};
use crate::args::{LabArgs, PoolKind};

/// How long A runs alone.
pub const ALONE: Duration = Duration::from_secs(2);
/// The width of a window for CPU shares.
pub const WINDOW_MS: f64 = 100.0;
/// Jain's index that counts as fair.
pub const FAIR: f64 = 0.95;

/// One window after B started.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Window {
    /// End of the window, ms after B started.
    pub t_ms: f64,
    /// CPUs A used in the window.
    pub a_cpus: f64,
    /// CPUs B used in the window.
    pub b_cpus: f64,
    /// Targets at the window's end.
    pub a_target: usize,
    /// Targets at the window's end.
    pub b_target: usize,
    /// Jain's index of the two.
    pub jain: f64,
}

/// The CPU-time series point at or just before `t_ms` (None before the first).
fn at(series: &[SeriesPoint], t_ms: f64) -> Option<&SeriesPoint> {
    series.iter().take_while(|p| p.t_ms <= t_ms).last()
}

/// Windows of `WINDOW_MS` from B's start (B's series is relative to its own start, `b_offset_ms`
/// after A's) to the end of the shorter series.
pub fn windows(a: &[SeriesPoint], b: &[SeriesPoint], b_offset_ms: f64) -> Vec<Window> {
    let end = match (a.last(), b.last()) {
        (Some(a), Some(b)) => (a.t_ms - b_offset_ms).min(b.t_ms),
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    let mut t = WINDOW_MS;
    while t <= end {
        let (Some(a0), Some(a1), Some(b0), Some(b1)) =
            (at(a, b_offset_ms + t - WINDOW_MS), at(a, b_offset_ms + t), at(b, t - WINDOW_MS), at(b, t))
        else {
            t += WINDOW_MS;
            continue;
        };
        let rate = |p0: &SeriesPoint, p1: &SeriesPoint| {
            if p1.t_ms > p0.t_ms {
                (p1.cpu_ms - p0.cpu_ms) / (p1.t_ms - p0.t_ms)
            } else {
                f64::NAN
            }
        };
        let (a_cpus, b_cpus) = (rate(a0, a1), rate(b0, b1));
        if a_cpus.is_finite() && b_cpus.is_finite() {
            out.push(Window {
                t_ms: t,
                a_cpus,
                b_cpus,
                a_target: a1.target,
                b_target: b1.target,
                jain: cotenant::internal::policy_sim::jain(&[a_cpus, b_cpus]),
            });
        }
        t += WINDOW_MS;
    }
    out
}

/// When Jain's index first reached [`FAIR`] (ms after B started), and the share of the
/// windows from then on that stayed there.
pub fn time_to_fair(windows: &[Window]) -> Option<(f64, f64)> {
    let first = windows.iter().position(|w| w.jain >= FAIR)?;
    let rest = &windows[first..];
    let held = rest.iter().filter(|w| w.jain >= FAIR).count() as f64 / rest.len() as f64;
    Some((windows[first].t_ms, held))
}

/// One window's row of `results.csv`: a [`Window`] of one pool's run, one repeat.
#[derive(Serialize)]
struct WindowRow<'a> {
    /// The pool kind both processes ran.
    pool: &'a str,
    /// Which repeat of the configuration (from 0).
    repeat: u32,
    /// CPUs other processes kept busy just before the run (the quiet-host check).
    host_busy_cpus_before: f64,
    /// End of the window (ms after B started).
    t_ms_after_b_started: f64,
    /// CPUs A used in the window.
    a_cpus: f64,
    /// CPUs B used in the window.
    b_cpus: f64,
    /// A's pool target at the window's end (threads).
    a_target: usize,
    /// B's pool target at the window's end (threads).
    b_target: usize,
    /// Jain's index of the two CPU shares (0.5 to 1).
    jain: f64,
}

/// Runs the experiment.
pub fn run(lab: &Lab, args: &LabArgs) -> anyhow::Result<Outcome> {
    // `--seconds` is how long B runs next to A.
    let (seconds_together, repeats) = run_length(args, (2, 4), (1, 3));
    let together = Duration::from_secs(seconds_together);
    let mut outcome = Outcome::default();
    let mut summary = Vec::new();
    let mut report = format!(
        "A runs alone for {} s, then B starts; both saturated, all in one cgroup, {} ms items; CPU shares per {WINDOW_MS} ms window.\n\n\
         | pool | repeat | Jain ≥ {FAIR} after (ms) | windows fair from then on | mean Jain | A CPUs | B CPUs | final targets |\n\
         |---|---:|---:|---:|---:|---:|---:|---|\n",
        ALONE.as_secs(),
        args.service_ms
    );
    let mut charts = Vec::new();
    for kind in [PoolKind::Share, PoolKind::Adaptive] {
        let name = super::neighbours::kind_name(kind);
        let mut times = Vec::new();
        for repeat in 0..repeats {
            let busy_before = lab.quiet_check();
            eprintln!("lab fairness: {name}, repeat {}/{repeats}", repeat + 1);
            let cgroup = match &lab.layout {
                Ok(layout) => Some(cotenant_ops::cgroup::Cgroup::create(
                    layout,
                    cotenant_ops::cgroup::LAB_PREFIX,
                    "fairness",
                    false,
                    None,
                )?),
                Err(_) => None,
            };
            let spec = |duration: Duration, offset: Duration| -> anyhow::Result<WorkerSpec> {
                let mut worker_args = vec!["--pool".to_owned(), name.to_owned()];
                worker_args.extend(schedule_args(2, 1.0, None, args.service_ms, duration));
                worker_args.extend(["--seed".to_owned(), repeat.to_string(), "--saturate".to_owned()]);
                worker_args.extend(["--series-ms".to_owned(), "50".to_owned()]);
                let mut spec = WorkerSpec::lab_worker(worker_args, cgroup.as_ref())?;
                spec.start_offset = offset;
                Ok(spec)
            };
            let reports = run_workers(&[spec(ALONE + together, Duration::ZERO)?, spec(together, ALONE)?])?;
            let w = windows(&reports[0].series, &reports[1].series, ALONE.as_secs_f64() * 1000.0);
            for win in &w {
                outcome.rows.push(crate::row_of(&WindowRow {
                    pool: name,
                    repeat,
                    host_busy_cpus_before: busy_before,
                    t_ms_after_b_started: win.t_ms,
                    a_cpus: win.a_cpus,
                    b_cpus: win.b_cpus,
                    a_target: win.a_target,
                    b_target: win.b_target,
                    jain: win.jain,
                }));
            }
            let fair = time_to_fair(&w);
            let mean = |f: fn(&Window) -> f64| w.iter().map(f).sum::<f64>() / w.len().max(1) as f64;
            let _ = writeln!(
                report,
                "| {name} | {} | {} | {} | {:.3} | {:.2} | {:.2} | {} |",
                repeat + 1,
                fair.map_or("never".to_owned(), |(t, _)| format!("{t:.0}")),
                fair.map_or("-".to_owned(), |(_, held)| format!("{:.0}%", held * 100.0)),
                mean(|w| w.jain),
                mean(|w| w.a_cpus),
                mean(|w| w.b_cpus),
                w.last().map_or("-".to_owned(), |l| format!("{}, {}", l.a_target, l.b_target)),
            );
            times.push(fair.map_or(f64::INFINITY, |(t, _)| t));
            if repeat == 0 {
                let line = |label: &str, f: fn(&Window) -> f64| Series {
                    name: label.into(),
                    points: w.iter().map(|x| (x.t_ms, f(x))).collect(),
                };
                charts.push(Chart {
                    file_stem: format!("shares-{name}"),
                    title: format!("{name}: CPUs used after B starts"),
                    x_label: "ms after B started".into(),
                    y_label: "CPUs".into(),
                    log_y: false,
                    beside: Vec::new(),
                    series: vec![line("A", |x| x.a_cpus), line("B", |x| x.b_cpus), line("Jain", |x| x.jain)],
                });
            }
        }
        let median = cotenant_ops::stats::median(&mut times.clone());
        summary.push(serde_json::json!({"pool": name, "ms_to_fair": times, "median_ms_to_fair": median}));
        outcome.verdicts.push(if median.is_finite() {
            format!(
                "{name}: Jain's index reached {FAIR} {median:.0} ms after B started (median of {repeats})"
            )
        } else {
            format!("{name}: Jain's index did not reach {FAIR} in most runs ({repeats} repeats)")
        });
    }
    outcome.report = report;
    outcome.charts = charts;
    outcome.summary = serde_json::Value::Array(summary);
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(rate_cpus: &[(f64, f64, usize)]) -> Vec<SeriesPoint> {
        // (t_ms, cpus used since the previous point, target)
        let mut cpu = 0.0;
        let mut prev = 0.0;
        rate_cpus
            .iter()
            .map(|&(t, cpus, target)| {
                cpu += cpus * (t - prev);
                prev = t;
                SeriesPoint { t_ms: t, cpu_ms: cpu, target }
            })
            .collect()
    }

    #[test]
    fn windows_align_b_to_a_and_find_when_it_became_fair() {
        // A: 2 CPUs until 2.2 s after its start, then 1. B starts 2 s after A with 1 CPU.
        let a: Vec<(f64, f64, usize)> =
            (1..=30).map(|i| (f64::from(i) * 100.0, if i <= 22 { 2.0 } else { 1.0 }, 2)).collect();
        let b: Vec<(f64, f64, usize)> = (0..=10).map(|i| (f64::from(i) * 100.0, 1.0, 1)).collect();
        let w = windows(&series(&a), &series(&b), 2000.0);
        assert_eq!(w.len(), 10);
        assert_eq!((w[0].a_cpus, w[0].b_cpus), (2.0, 1.0));
        assert!((w[0].jain - 0.9).abs() < 1e-9, "{}", w[0].jain);
        assert_eq!(w[2].a_cpus, 1.0);
        assert_eq!(time_to_fair(&w), Some((300.0, 1.0)));
    }

    #[test]
    fn never_fair_is_none() {
        let w = [Window { t_ms: 100.0, a_cpus: 2.0, b_cpus: 0.0, a_target: 2, b_target: 1, jain: 0.5 }];
        assert_eq!(time_to_fair(&w), None);
        assert!(windows(&[], &[], 0.0).is_empty());
    }
}

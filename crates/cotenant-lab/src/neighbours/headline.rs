//! `lab headline`, what `make demo` runs: P processes (2) in one cgroup at several loads, the
//! four pools a user compares, and the whole curve in one picture (service p99 and end-to-end
//! p99 against the load, one line per pool) with one verdict line per pool: at each load, the
//! service-time gain against the ignorant pool, and the load at which its end-to-end p99 first
//! exceeds the ignorant pool's. Pure: the plan's defaults, the verdicts and the chart are
//! computed from aggregates, so tests feed them recorded figures.
//!
//! Why a curve: one load point says little. At 100 % of the fair share, end-to-end latency
//! measures the queue that any pool builds when offered all it can do, and a pool that gives
//! up the last per cent of throughput for a shorter service time shows a longer end-to-end
//! tail there; at the loads services run at, the service time is the tail.

use std::fmt::Write as _;

use super::aggregate::{Aggregate, RunFigures};
use super::plan::{kind_name, Plan, Setting};
use super::verdict::{find_kind, ratio};
use crate::args::PoolKind;
use crate::{Chart, Series};

/// The loads of a full run (fractions of each process's fair share of the CPUs).
pub const LOADS: [f64; 4] = [0.5, 0.7, 0.9, 1.0];
/// The loads of a `--quick` run (a smoke test: two points still make a curve).
pub const QUICK_LOADS: [f64; 2] = [0.7, 1.0];
/// The pools compared, in the legend's order.
pub const KINDS: [PoolKind; 4] = [PoolKind::Ignorant, PoolKind::Optimal, PoolKind::Adaptive, PoolKind::Plain];
/// The chart's file name (`headline.svg`, `headline.png`).
pub const FILE_STEM: &str = "headline";

/// What a pool is called in the picture and the verdict: the lab's kind names are terse.
pub fn label(kind: PoolKind) -> String {
    match kind {
        PoolKind::Ignorant => "ignorant (a thread per CPU)".to_owned(),
        PoolKind::Optimal => "optimal (CPUs / P, fixed)".to_owned(),
        PoolKind::Adaptive => "cotenant default (adaptive, host tokens)".to_owned(),
        PoolKind::Plain => "adaptive alone (no host tokens)".to_owned(),
        other => kind_name(other).to_owned(),
    }
}

/// The aggregate of `kind` at this setting, P and load (`verdict.rs`'s lookup).
fn find(
    aggregates: &[Aggregate],
    setting: Setting,
    processes: u32,
    load: f64,
    kind: PoolKind,
) -> Option<&Aggregate> {
    find_kind(aggregates, setting, load, processes, kind)
}

/// The loads of `plan`, lowest first.
fn sorted_loads(plan: &Plan) -> Vec<f64> {
    let mut loads = plan.loads.clone();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    loads
}

/// One line per pool other than ignorant (and per setting and P, when a run has several):
/// its service p99 and its end-to-end p99 against ignorant's at each load, the load at which
/// its end-to-end p99 first exceeds ignorant's, and its throughput against ignorant's at the
/// highest load.
pub fn verdicts(aggregates: &[Aggregate], plan: &Plan) -> Vec<String> {
    let loads = sorted_loads(plan);
    let several = plan.settings.len() * plan.processes.len() > 1;
    let mut lines = Vec::new();
    for &setting in &plan.settings {
        for &processes in &plan.processes {
            for &(kind, _) in plan.pools.iter().filter(|(kind, _)| *kind != PoolKind::Ignorant) {
                let pairs: Vec<(f64, &Aggregate, &Aggregate)> = loads
                    .iter()
                    .filter_map(|&load| {
                        let ours = find(aggregates, setting, processes, load, kind)?;
                        let ignorant = find(aggregates, setting, processes, load, PoolKind::Ignorant)?;
                        Some((load, ours, ignorant))
                    })
                    .collect();
                let Some(&(top_load, top_ours, top_ignorant)) = pairs.last() else { continue };
                let mut line = String::new();
                if several {
                    let _ = write!(line, "{}, P={processes}: ", setting.name());
                }
                // "0.45x at 50%, 0.41x at 70%, ..." of one figure against ignorant's.
                let ratios = |figure: fn(&RunFigures) -> f64| -> String {
                    pairs
                        .iter()
                        .map(|(load, ours, ignorant)| {
                            format!(
                                "{:.2}x at {:.0}%",
                                ratio(figure(&ours.median), figure(&ignorant.median)),
                                load * 100.0
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let _ = write!(
                    line,
                    "{}: service p99 {} of ignorant's; ",
                    label(kind),
                    ratios(|f| f.service_p99_us)
                );
                let end_to_end = ratios(|f| f.e2e_p99_us);
                let _ = write!(line, "end-to-end p99 {end_to_end}");
                let first_above = pairs
                    .iter()
                    .find(|(_, ours, ignorant)| ours.median.e2e_p99_us > ignorant.median.e2e_p99_us);
                match first_above {
                    Some((load, _, _)) => {
                        let _ = write!(line, ", first above ignorant's at {:.0}%", load * 100.0);
                    }
                    None => {
                        let _ = write!(line, ", never above ignorant's up to {:.0}%", top_load * 100.0);
                    }
                }
                let _ = write!(
                    line,
                    "; throughput at {:.0}% {:.2}x ignorant's",
                    top_load * 100.0,
                    ratio(top_ours.median.throughput_per_s, top_ignorant.median.throughput_per_s)
                );
                lines.push(line);
            }
        }
    }
    lines
}

/// The picture: service p99 (left) and end-to-end p99 (right) against the load, one line per
/// pool, log scale; for the first setting and P of the plan (the demo has one of each).
pub fn chart(aggregates: &[Aggregate], plan: &Plan) -> Option<Chart> {
    let (&setting, &processes) = (plan.settings.first()?, plan.processes.first()?);
    let loads = sorted_loads(plan);
    let series = |value: fn(&RunFigures) -> f64| -> Vec<Series> {
        plan.pools
            .iter()
            .map(|&(kind, _)| Series {
                name: label(kind),
                points: loads
                    .iter()
                    .filter_map(|&load| find(aggregates, setting, processes, load, kind))
                    .map(|a| (a.key.load * 100.0, value(&a.median) / 1000.0))
                    .collect(),
            })
            .collect()
    };
    let x_label = "offered load (% of each process's fair share of the CPUs)".to_owned();
    let end_to_end = Chart {
        file_stem: String::new(),
        title: "end-to-end p99 (queue wait + service)".to_owned(),
        x_label: x_label.clone(),
        y_label: "end-to-end p99 (ms)".to_owned(),
        log_y: true,
        beside: Vec::new(),
        series: series(|r| r.e2e_p99_us),
    };
    Some(Chart {
        file_stem: FILE_STEM.to_owned(),
        title: format!("service p99, {}, P = {processes}", setting.name()),
        x_label,
        y_label: "service p99 (ms)".to_owned(),
        log_y: true,
        beside: vec![end_to_end],
        series: series(|r| r.service_p99_us),
    })
}

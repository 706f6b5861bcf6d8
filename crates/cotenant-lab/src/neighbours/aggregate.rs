//! One run's reports reduced to its figures ([`RunFigures`]), and a configuration's runs to
//! their median, min and max ([`Aggregate`]). Pure: shared with `cotenant sim neighbours`.

use serde::Serialize;

use super::plan::Key;
use crate::worker::{SummaryRow, WorkerReport};
use cotenant_ops::stats::median;

/// One run, reduced to the figures the tables use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
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

/// Reduces one run's reports.
pub fn figures(reports: &[WorkerReport]) -> RunFigures {
    let summaries: Vec<&SummaryRow> = reports.iter().map(|r| &r.summary).collect();
    figures_of(&summaries)
}

/// Reduces one run's per-process summaries (real processes, or simulated ones in `cotenant sim
/// neighbours`, which must reduce alike to be compared).
pub fn figures_of(summaries: &[&SummaryRow]) -> RunFigures {
    let mut p99: Vec<f64> = summaries.iter().map(|s| s.service_p99_us).collect();
    let mut e2e: Vec<f64> = summaries.iter().map(|s| s.e2e_p99_us).collect();
    let offered: usize = summaries.iter().map(|s| s.offered).sum();
    let completed: usize = summaries.iter().map(|s| s.completed).sum();
    RunFigures {
        service_p99_us: median(&mut p99),
        service_max_us: summaries.iter().map(|s| s.service_max_us).fold(0.0, f64::max),
        e2e_p99_us: median(&mut e2e),
        throughput_per_s: summaries.iter().map(|s| s.throughput_per_s).sum(),
        completed_fraction: if offered == 0 { 1.0 } else { completed as f64 / offered as f64 },
    }
}

/// A configuration's figures over its repeats: median, min and max of each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Aggregate {
    /// The configuration.
    pub key: Key,
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
pub fn aggregate(key: Key, runs: &[RunFigures]) -> Aggregate {
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
    let build = |i: usize| {
        let at = |j: usize| [picked[j].0, picked[j].1, picked[j].2][i];
        RunFigures {
            service_p99_us: at(0),
            service_max_us: at(1),
            e2e_p99_us: at(2),
            throughput_per_s: at(3),
            completed_fraction: at(4),
        }
    };
    Aggregate { key, repeats: runs.len(), median: build(0), min: build(1), max: build(2) }
}

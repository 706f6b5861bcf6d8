//! Pure aggregation: each run's figures gathered per scenario and strategy (a `Cell`), per
//! sessions count and per strategy, and each run's raw row; medians and relative increases.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::model::{RunResult, Strategy};
use super::plan::Scenario;

/// `after` over `before` minus one (the seed's "P99.9 increase"); NaN without a baseline.
pub fn increase(before: f64, after: f64) -> f64 {
    if before > 0.0 && before.is_finite() && after.is_finite() {
        after / before - 1.0
    } else {
        f64::NAN
    }
}

/// The median of the finite values (NaN if none): a run without a value (an empty nice
/// window) does not count.
pub(super) fn median(values: Vec<f64>) -> f64 {
    cotenant_ops::stats::median_of_finite(values)
}

/// Nanoseconds in milliseconds.
pub(super) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// One scenario and strategy of part 1: each repeat's figures (latencies in ms).
#[derive(Default)]
pub(super) struct Cell {
    pub(super) throughput: Vec<f64>,
    pub(super) cpus_used: Vec<f64>,
    pub(super) mean: Vec<f64>,
    pub(super) p50: Vec<f64>,
    pub(super) p99: Vec<f64>,
    pub(super) p999: Vec<f64>,
    pub(super) max: Vec<f64>,
    /// The p99.9 of the transactions that began in the nice window (inverted scenario only).
    pub(super) window_p999: Vec<f64>,
    /// The p99.9 of the transactions alone, without the round trip.
    pub(super) server_p999: Vec<f64>,
}

/// Part 2, per (sessions per CPU, strategy index): throughputs and p99.9s (ms).
pub(super) type Sweep = BTreeMap<(usize, usize), (Vec<f64>, Vec<f64>)>;

/// What every run of `lab spin` measured, gathered for the report.
#[derive(Default)]
pub(super) struct Measured {
    /// Part 1, per (scenario, strategy) index.
    pub(super) cells: BTreeMap<(usize, usize), Cell>,
    /// The inverted scenario's latencies per second, per strategy, of the first repeat.
    pub(super) timelines: Vec<(Strategy, Vec<Histogram<u64>>)>,
    /// Part 2, per (sessions per CPU, strategy index): throughputs and p99.9s (ms).
    pub(super) sweep: Sweep,
    /// Part 3, per strategy index: throughputs.
    pub(super) uncontended: BTreeMap<usize, Vec<f64>>,
    /// Why the nice -20 boost was refused, the first time it was.
    pub(super) refused: Option<String>,
}

impl Measured {
    /// Adds a part 1 run of scenario `si` with strategy `ki` to its cell (and, on the first
    /// repeat of the inverted scenario, its timeline).
    pub(super) fn record_scenario(
        &mut self,
        si: usize,
        ki: usize,
        scenario: Scenario,
        strategy: Strategy,
        repeat: usize,
        result: RunResult,
    ) {
        if let Some(why) = &result.boost_refused {
            self.refused.get_or_insert_with(|| why.clone());
        }
        let cell = self.cells.entry((si, ki)).or_default();
        cell.throughput.push(result.throughput());
        cell.cpus_used.push(result.cpus_used);
        cell.mean.push(result.latencies.total.mean() / 1e6);
        cell.p50.push(ms(result.latencies.total.value_at_quantile(0.5)));
        cell.p99.push(ms(result.latencies.total.value_at_quantile(0.99)));
        cell.p999.push(ms(result.latencies.total.value_at_quantile(0.999)));
        cell.max.push(ms(result.latencies.total.max()));
        cell.server_p999.push(ms(result.latencies.server.value_at_quantile(0.999)));
        if scenario == Scenario::Inverted {
            cell.window_p999.push(if result.latencies.in_window.is_empty() {
                f64::NAN
            } else {
                ms(result.latencies.in_window.value_at_quantile(0.999))
            });
            if repeat == 0 {
                self.timelines.push((strategy, result.latencies.per_second));
            }
        }
    }

    /// Adds a part 2 run: `k` sessions per CPU with `strategy`.
    pub(super) fn record_sweep(&mut self, k: usize, strategy: Strategy, result: &RunResult) {
        let entry = self.sweep.entry((k, strategy as usize)).or_default();
        entry.0.push(result.throughput());
        entry.1.push(ms(result.latencies.total.value_at_quantile(0.999)));
    }

    /// Adds a part 3 (uncontended) run.
    pub(super) fn record_uncontended(&mut self, strategy: Strategy, result: &RunResult) {
        self.uncontended.entry(strategy as usize).or_default().push(result.throughput());
    }
}

/// The raw row of one run of `lab spin`.
#[derive(Debug, Serialize)]
struct RunRow<'a> {
    /// Which part of the experiment the run belongs to (`scenario`, `sessions`, `uncontended`).
    part: &'a str,
    /// Which run of its part it was (the scenario's name, `4 per CPU`, `uncontended`).
    config: &'a str,
    /// The waiting strategy's name.
    strategy: &'static str,
    /// Sessions (threads).
    sessions: usize,
    /// CPUs the sessions were allowed.
    cpus: usize,
    /// Which repeat this is, from 1.
    repeat: usize,
    /// Transactions committed before the run stopped (count).
    transactions: u64,
    /// Transactions committed per second of the run.
    throughput: f64,
    /// CPUs the process used on average over the run: its CPU time over the wall time (CPUs).
    cpus_used: f64,
    /// Mean end-to-end latency (ms).
    mean_ms: f64,
    /// Median end-to-end latency (ms).
    p50_ms: f64,
    /// 99th percentile end-to-end latency (ms).
    p99_ms: f64,
    /// 99.9th percentile latency of the transactions alone, without the round trip (ms).
    transaction_p999_ms: f64,
    /// 99.9th percentile end-to-end latency (ms).
    p999_ms: f64,
    /// Longest end-to-end latency (ms).
    max_ms: f64,
    /// 99.9th percentile end-to-end latency of the transactions that began in the nice window
    /// (ms; null when none did).
    window_p999_ms: Option<f64>,
}

/// The raw row of one run: `part` and `config` say which run it was.
pub(super) fn row_of(
    result: &RunResult,
    part: &str,
    config: &str,
    strategy: Strategy,
    sessions: usize,
    cpus: usize,
    repeat: usize,
) -> crate::Row {
    let latencies = &result.latencies;
    crate::row_of(&RunRow {
        part,
        config,
        strategy: strategy.name(),
        sessions,
        cpus,
        repeat: repeat + 1,
        transactions: latencies.transactions,
        throughput: result.throughput(),
        cpus_used: result.cpus_used,
        mean_ms: latencies.total.mean() / 1e6,
        p50_ms: ms(latencies.total.value_at_quantile(0.5)),
        p99_ms: ms(latencies.total.value_at_quantile(0.99)),
        transaction_p999_ms: ms(latencies.server.value_at_quantile(0.999)),
        p999_ms: ms(latencies.total.value_at_quantile(0.999)),
        max_ms: ms(latencies.total.max()),
        window_p999_ms: (!latencies.in_window.is_empty())
            .then(|| ms(latencies.in_window.value_at_quantile(0.999))),
    })
}

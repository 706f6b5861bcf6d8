//! The reduction of parts 1 to 3 of `lab throttling`, pure: what the cgroup's counters said over
//! a run, each run's row, and the verdicts, beside the seed's Table II.

use cotenant::internal::procfs::cgroupfs::CpuStat;
use serde::Serialize;

use super::plan::{Limit, Rewrite};
use crate::Row;

/// Seed 001 Table II (Linux 5.12, sysbench, 3 threads on 3 CPUs, quota = 3 CPUs): period (ms),
/// throttled ratio, throttled time as a share of the run.
pub const SEED_TABLE_II: [(u64, f64, f64); 3] = [(100, 0.068, 0.0013), (50, 0.45, 0.033), (10, 0.49, 0.186)];

/// What the cgroup's counters said over one run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Throttling {
    /// Periods elapsed.
    pub periods: u64,
    /// Periods in which the cgroup was throttled.
    pub throttled: u64,
    /// Time throttled (ns, as the kernel sums it).
    pub throttled_ns: u64,
}

impl Throttling {
    /// The difference of two `cpu.stat` readings.
    pub fn between(before: &CpuStat, after: &CpuStat) -> Self {
        Throttling {
            periods: after.nr_periods.saturating_sub(before.nr_periods),
            throttled: after.nr_throttled.saturating_sub(before.nr_throttled),
            throttled_ns: after.throttled_ns.saturating_sub(before.throttled_ns),
        }
    }

    /// Throttled periods over periods (0 when no period elapsed).
    pub fn ratio(&self) -> f64 {
        if self.periods == 0 {
            0.0
        } else {
            self.throttled as f64 / self.periods as f64
        }
    }
}

/// The keys every row of parts 1 to 3 has: the cgroup's limit and what its counters said.
#[derive(Serialize)]
struct LimitRow<'a> {
    /// The part: `table2`, `latency` or `rewrite`.
    part: &'a str,
    /// The limit as the tables name it ([`Limit::label`]).
    limit: String,
    /// The quota as a fraction of N CPUs; null when unlimited (the key is always there).
    quota_of_n: Option<f64>,
    /// The period (ms).
    period_ms: u64,
    /// Whether the cgroup had a burst equal to its quota.
    burst: bool,
    /// Periods elapsed during the run (count).
    periods: u64,
    /// Periods in which the cgroup was throttled (count).
    throttled_periods: u64,
    /// Throttled periods over periods (0 to 1).
    throttled_ratio: f64,
    /// Time throttled, as the kernel sums it over the CPUs (ms).
    throttled_ms: f64,
    /// CPUs other processes kept busy just before the run (the quiet-host check).
    host_busy_cpus_before: f64,
}

/// A Table II run's own figures (part 1).
#[derive(Serialize)]
pub(super) struct Table2Figures {
    /// CPU time the worker's threads got (s).
    pub(super) workers_cpu_s: f64,
    /// That CPU time over the unlimited run's (1 = as much).
    pub(super) cpu_vs_unlimited: f64,
}

/// A latency run's own figures (part 2).
#[derive(Serialize)]
pub(super) struct LatencyFigures {
    /// Service time, 99th percentile (µs).
    pub(super) service_p99_us: f64,
    /// End-to-end time (from the intended arrival), 99th percentile (µs).
    pub(super) e2e_p99_us: f64,
    /// Items completed per second.
    pub(super) throughput_per_s: f64,
}

/// A rewrite run's own figures (part 3).
#[derive(Serialize)]
pub(super) struct RewriteFigures {
    /// How the cgroup was rewritten ([`Rewrite::label`]).
    pub(super) rewrite: &'static str,
    /// Rewrites done during the run (count).
    pub(super) rewrites: u64,
    /// Rewrites that wrote something (count).
    pub(super) rewrites_written: u64,
}

/// The row of one run of parts 1 to 3: the keys of its limit and counters, then its part's own
/// `figures` ([`Table2Figures`], [`LatencyFigures`] or [`RewriteFigures`]).
pub(super) fn limit_row(
    part: &str,
    limit: Limit,
    t: &Throttling,
    busy_before: f64,
    figures: &impl Serialize,
) -> Row {
    let mut row = crate::row_of(&LimitRow {
        part,
        limit: limit.label(),
        quota_of_n: limit.quota_of_n,
        period_ms: limit.period_ms,
        burst: limit.burst,
        periods: t.periods,
        throttled_periods: t.throttled,
        throttled_ratio: t.ratio(),
        throttled_ms: t.throttled_ns as f64 / 1e6,
        host_busy_cpus_before: busy_before,
    });
    row.extend(crate::row_of(figures));
    row
}

/// Which of the seed's effects this kernel still shows, from Table II's rows.
pub fn table_verdicts(table: &[(Limit, Throttling, f64)]) -> Vec<String> {
    let find = |q: f64, p: u64, burst: bool| {
        table.iter().find(|(l, _, _)| l.quota_of_n == Some(q) && l.period_ms == p && l.burst == burst)
    };
    let mut out = Vec::new();
    let periods: Vec<u64> =
        SEED_TABLE_II.iter().map(|s| s.0).filter(|p| find(1.0, *p, false).is_some()).collect();
    if !periods.is_empty() {
        let shown: Vec<String> = periods
            .iter()
            .map(|p| {
                let (_, t, _) = find(1.0, *p, false).unwrap();
                format!("{:.0}% at {p} ms", 100.0 * t.ratio())
            })
            .collect();
        let still = periods.iter().any(|p| find(1.0, *p, false).unwrap().1.ratio() > 0.01);
        out.push(format!(
            "quota = demand: throttled in {} of periods (the CFS throttling paper, Linux 5.12: \
             6.8%/45%/49% at 100/50/10 ms); the paper's spurious throttling {}",
            shown.join(", "),
            if still { "is still there on this kernel" } else { "is gone on this kernel" }
        ));
    }
    let with_burst: Vec<String> = periods
        .iter()
        .filter_map(|p| find(1.0, *p, true).map(|(_, t, _)| format!("{:.0}% at {p} ms", 100.0 * t.ratio())))
        .collect();
    if !with_burst.is_empty() {
        out.push(format!("with a burst equal to the quota: throttled in {}", with_burst.join(", ")));
    }
    out
}

pub(super) fn rewrite_verdict(runs: &[(Rewrite, Throttling)]) -> String {
    let get = |r: Rewrite| runs.iter().find(|x| x.0 == r).map(|x| x.1).unwrap_or_default();
    let (none, plain, set) = (get(Rewrite::None), get(Rewrite::Plain), get(Rewrite::CgroupSet));
    let describe = if plain.ratio() > none.ratio() + 0.02 {
        "plain rewrites throttle on this kernel"
    } else {
        "this kernel does not throttle more on rewrites"
    };
    format!(
        "rewrite: throttled {:.1}% of periods with plain rewrites, {:.1}% with `cgroup set`, {:.1}% without rewrites: {describe}",
        100.0 * plain.ratio(),
        100.0 * set.ratio(),
        100.0 * none.ratio()
    )
}

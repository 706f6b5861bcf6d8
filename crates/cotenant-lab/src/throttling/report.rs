//! The reduction of parts 1 to 3 of `lab throttling`, pure: what the cgroup's counters said over
//! a run, each run's row, and the verdicts, beside the seed's Table II.

use cotenant::internal::procfs::cgroupfs::CpuStat;

use super::plan::{Limit, Rewrite};

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

pub(super) fn limit_row(
    part: &str,
    limit: Limit,
    t: &Throttling,
    busy_before: f64,
) -> serde_json::Map<String, serde_json::Value> {
    let mut row = serde_json::Map::new();
    row.insert("part".into(), part.into());
    row.insert("limit".into(), limit.label().into());
    row.insert("quota_of_n".into(), limit.quota_of_n.map_or(serde_json::Value::Null, Into::into));
    row.insert("period_ms".into(), limit.period_ms.into());
    row.insert("burst".into(), limit.burst.into());
    row.insert("periods".into(), t.periods.into());
    row.insert("throttled_periods".into(), t.throttled.into());
    row.insert("throttled_ratio".into(), t.ratio().into());
    row.insert("throttled_ms".into(), (t.throttled_ns as f64 / 1e6).into());
    row.insert("host_busy_cpus_before".into(), busy_before.into());
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
            "quota = demand: throttled in {} of periods (seed, Linux 5.12: 6.8%/45%/49% at 100/50/10 ms); the seed's spurious throttling {}",
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

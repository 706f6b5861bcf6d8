//! Unit tests of `lab throttling`'s pure parts: Table II's limits, the budget cases and their
//! arguments, the counters' difference, the rows, and the verdicts.

use std::time::Duration;

use cotenant::internal::procfs::cgroupfs::CpuStat;

use super::plan::budget_case_args;
use super::report::{limit_row, rewrite_verdict, RewriteFigures};
use super::*;

#[test]
fn table_ii_runs_unlimited_then_every_quota_period_and_burst() {
    let full = table_limits(false);
    assert_eq!(full.len(), 1 + 2 * 3 * 2);
    assert_eq!(full[0].quota_of_n, None);
    assert_eq!(full[1].label(), "1 N, 100 ms");
    assert_eq!(full[2].label(), "1 N, 100 ms, burst");
    assert_eq!(full[7].label(), "0.95 N, 100 ms");
    assert_eq!(table_limits(true).len(), 5);
}

#[test]
fn the_budget_runs_are_saturated_then_open_loop_at_the_budget() {
    let cases = budget_cases(2);
    assert_eq!(cases.iter().filter(|c| c.offered.is_none()).count(), 4);
    let open: Vec<_> = cases.iter().filter(|c| c.offered.is_some()).collect();
    assert_eq!(open.len(), 2);
    assert!(open.iter().all(|c| c.cpus == 1.5));
    let args = budget_case_args(open[0], 2, Duration::from_secs(10), false);
    let joined = args.join(" ");
    assert!(
        joined.contains(
            "--load 1 --fair-cpus 1.5 --service-ms 20 --duration-ms 10000 --arrivals uniform --exact-cpu"
        ),
        "{joined}"
    );
    assert!(joined.ends_with("--cpu-budget 1.5 --budget-period-ms 100 --no-slush"), "{joined}");
    let saturated = budget_case_args(&cases[0], 2, Duration::from_secs(10), true).join(" ");
    assert!(saturated.contains("--saturate") && !saturated.contains("--no-slush"), "{saturated}");
}

#[test]
fn throttling_is_the_difference_of_two_readings() {
    let before = CpuStat { nr_periods: 10, nr_throttled: 2, throttled_ns: 5, usage_ns: None };
    let after = CpuStat { nr_periods: 110, nr_throttled: 12, throttled_ns: 1_000_005, usage_ns: None };
    let t = Throttling::between(&before, &after);
    assert_eq!(t, Throttling { periods: 100, throttled: 10, throttled_ns: 1_000_000 });
    assert!((t.ratio() - 0.1).abs() < 1e-12);
    assert_eq!(Throttling::default().ratio(), 0.0);
}

#[test]
fn a_limit_row_has_the_limit_the_counters_and_the_part_s_figures() {
    let t = Throttling { periods: 100, throttled: 10, throttled_ns: 2_000_000 };
    let unlimited = Limit { quota_of_n: None, period_ms: 100, burst: false };
    let figures = RewriteFigures { rewrite: Rewrite::None.label(), rewrites: 0, rewrites_written: 0 };
    let row = limit_row("rewrite", unlimited, &t, 0.25, &figures);
    // Every key always there (an unlimited quota is null), the counters as integers.
    assert_eq!(
        serde_json::Value::Object(row),
        serde_json::json!({
            "part": "rewrite", "limit": "unlimited", "quota_of_n": null, "period_ms": 100, "burst": false,
            "periods": 100, "throttled_periods": 10, "throttled_ratio": 0.1, "throttled_ms": 2.0,
            "host_busy_cpus_before": 0.25, "rewrite": "no rewrites", "rewrites": 0, "rewrites_written": 0
        })
    );
}

#[test]
fn verdicts_say_whether_the_kernel_still_throttles() {
    let l = |p, burst| Limit { quota_of_n: Some(1.0), period_ms: p, burst };
    let t = |periods, throttled| Throttling { periods, throttled, throttled_ns: 0 };
    let table =
        [(l(100, false), t(100, 5), 0.99), (l(10, false), t(1000, 500), 0.9), (l(10, true), t(1000, 0), 1.0)];
    assert_eq!(
        table_verdicts(&table),
        [
            "quota = demand: throttled in 5% at 100 ms, 50% at 10 ms of periods (the CFS throttling paper, \
             Linux 5.12: 6.8%/45%/49% at 100/50/10 ms); the paper's spurious throttling is still there \
             on this kernel",
            "with a burst equal to the quota: throttled in 0% at 10 ms",
        ]
    );
    let quiet = [(l(100, false), t(100, 0), 1.0)];
    assert!(table_verdicts(&quiet)[0].ends_with("is gone on this kernel"));
}

#[test]
fn the_rewrite_verdict_compares_plain_writes_with_cgroup_set() {
    let t = |throttled| Throttling { periods: 100, throttled, throttled_ns: 0 };
    let v = rewrite_verdict(&[(Rewrite::None, t(5)), (Rewrite::Plain, t(40)), (Rewrite::CgroupSet, t(5))]);
    assert_eq!(
        v,
        "rewrite: throttled 40.0% of periods with plain rewrites, 5.0% with `cgroup set`, 5.0% without rewrites: plain rewrites throttle on this kernel"
    );
}

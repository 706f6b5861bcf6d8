//! The plan of `lab throttling`, pure: the cgroup limits of parts 1 to 3 and how a run rewrites
//! them, part 4's budget cases, and the worker's arguments for each.

use std::time::Duration;

use crate::runner::fixed_pool_args;

/// One cgroup configuration of parts 1 to 3.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// The quota as a fraction of N CPUs (`None`: unlimited).
    pub quota_of_n: Option<f64>,
    /// The period (ms).
    pub period_ms: u64,
    /// A burst equal to the quota.
    pub burst: bool,
}

impl Limit {
    pub(super) fn label(&self) -> String {
        match self.quota_of_n {
            None => "unlimited".into(),
            Some(f) => format!(
                "{} N, {} ms{}",
                if f == 1.0 { "1".to_owned() } else { format!("{f}") },
                self.period_ms,
                if self.burst { ", burst" } else { "" }
            ),
        }
    }
}

/// The configurations of Table II, in table order: unlimited, then per quota, per period,
/// without and with burst.
pub fn table_limits(quick: bool) -> Vec<Limit> {
    let periods: &[u64] = if quick { &[100, 10] } else { &[100, 50, 10] };
    let quotas: &[f64] = if quick { &[1.0] } else { &[1.0, 0.95] };
    let mut limits = vec![Limit { quota_of_n: None, period_ms: 100, burst: false }];
    for &q in quotas {
        for &period_ms in periods {
            for burst in [false, true] {
                limits.push(Limit { quota_of_n: Some(q), period_ms, burst });
            }
        }
    }
    limits
}

/// How a rewrite scenario touches the cgroup during the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewrite {
    /// Nobody writes.
    None,
    /// The same period and quota written every 100 ms, as container runtimes do.
    Plain,
    /// `cotenant cgroup set <dir> --cpus N --period 100ms` every 100 ms.
    CgroupSet,
}

impl Rewrite {
    pub(super) fn label(self) -> &'static str {
        match self {
            Rewrite::None => "no rewrites",
            Rewrite::Plain => "plain writes every 100 ms",
            Rewrite::CgroupSet => "`cotenant cgroup set` every 100 ms",
        }
    }
}

/// A fixed pool of `n` workers kept saturated with CPU-bound items of `item_ms`.
pub(super) fn saturating_args(n: u32, duration: Duration, item_ms: u32) -> Vec<String> {
    let mut args = fixed_pool_args(n, f64::from(n), 1.0, f64::from(item_ms), duration);
    args.push("--saturate".into());
    args
}

/// One run of part 4: a budget, an item size, and how the pool is loaded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetCase {
    /// The budget, in CPUs per 100 ms.
    pub cpus: f64,
    /// CPU-bound items of this many ms.
    pub item_ms: u32,
    /// `None`: saturated (the workers always have an item). `Some(f)`: open loop, uniform
    /// arrivals offering `f` × the budget in CPU time, items of exact CPU time.
    pub offered: Option<f64>,
}

/// Part 4's runs for `n` CPUs (each with the slush fund on, then off): saturated at 1.5 CPUs
/// and at `n`, then open loop at 1.5 CPUs, offering all of it with 20 ms items and 97 % with
/// 1 ms items (where each item's own cost in the pool, a few per cent, would otherwise push
/// the demand past the budget).
pub fn budget_cases(n: u32) -> Vec<BudgetCase> {
    let saturated = |cpus, item_ms| BudgetCase { cpus, item_ms, offered: None };
    vec![
        saturated(1.5, 1),
        saturated(f64::from(n), 1),
        saturated(1.5, 20),
        saturated(f64::from(n), 20),
        BudgetCase { cpus: 1.5, item_ms: 20, offered: Some(1.0) },
        BudgetCase { cpus: 1.5, item_ms: 1, offered: Some(0.97) },
    ]
}

/// The worker's arguments for `case` on `n` CPUs.
pub(super) fn budget_case_args(case: &BudgetCase, n: u32, duration: Duration, slush: bool) -> Vec<String> {
    let mut args = match case.offered {
        None => saturating_args(n, duration, case.item_ms),
        Some(fraction) => {
            let mut args = fixed_pool_args(n, case.cpus, fraction, f64::from(case.item_ms), duration);
            args.extend(["--arrivals".to_owned(), "uniform".into(), "--exact-cpu".into()]);
            args
        }
    };
    args.extend([
        "--cpu-budget".to_owned(),
        case.cpus.to_string(),
        "--budget-period-ms".into(),
        "100".into(),
    ]);
    if !slush {
        args.push("--no-slush".into());
    }
    args
}

//! loom models of the user-space CPU budget's refill (`crate::bandwidth`, which
//! `pool/budget.rs` drives): in every interleaving, within the preemption bound, of a refill
//! (the first take or charge of a new period brings the pool up to date) with another thread's
//! take or charge, the period gets exactly one quota (no refill lost or counted twice), never
//! more than its cap, and every charge is paid exactly once, from the slush fund first when it
//! is on. Time is an input of `Bandwidth`, so the models fix it; what they explore is the
//! lock-free refill (a CAS of the packed state, then the slush fund and the period number)
//! racing the other CASes of the state. Run with `make loom`.

use crate::bandwidth::{Bandwidth, Exhausted, Slice};
use crate::sync::Arc;

/// Preemptions explored per execution: two threads of a few CAS loops each, so 3 reaches every
/// thread stopping between any two steps of a refill and still runs in seconds.
const PREEMPTIONS: usize = 3;

/// The shortest period a budget accepts (1 ms).
const PERIOD_NS: u64 = 1_000_000;
/// The slice, and the smallest quota a budget accepts (10 µs).
const SLICE_NS: u64 = 10_000;
/// What a task that overran its slice used (the overrun is 15 µs).
const OVERRUN_USED_NS: u64 = 25_000;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS);
    builder.check(f);
}

/// A budget of `slices` slices per period.
fn bandwidth(slices: u32, slush: bool) -> Arc<Bandwidth> {
    let cpus = f64::from(slices) * SLICE_NS as f64 / PERIOD_NS as f64;
    Arc::new(Bandwidth::new(cpus, PERIOD_NS, SLICE_NS, slush).unwrap())
}

/// Two takes at the start of period 1, after period 0's only slice was taken: both race to
/// refill (one CAS wins, the other retries or finishes the winner's second step). Exactly one
/// slice is granted: two would be a refill counted twice, none a refill lost.
#[test]
fn a_refill_racing_a_take_hands_out_exactly_one_quota() {
    model(|| {
        let budget = bandwidth(1, true);
        assert_eq!(budget.take(0), Ok(Slice { ns: SLICE_NS, period: 0 }), "period 0's only slice");
        let other = {
            let budget = budget.clone();
            loom::thread::spawn(move || budget.take(PERIOD_NS))
        };
        let mine = budget.take(PERIOD_NS);
        let theirs = other.join().unwrap();
        let granted: Vec<Slice> = [mine, theirs].into_iter().filter_map(Result::ok).collect();
        assert_eq!(granted, [Slice { ns: SLICE_NS, period: 1 }], "period 1's quota: {mine:?}, {theirs:?}");
        let refused = Err(Exhausted { until_ns: 2 * PERIOD_NS });
        assert!(
            mine == refused || theirs == refused,
            "the other take waits for period 2: {mine:?}, {theirs:?}"
        );
        assert_eq!(budget.balance_ns(PERIOD_NS), 0);
        assert_eq!(budget.throttled_periods(), 1, "period 1 refused a take once");
        assert_eq!(budget.short_periods(), 0, "period 0 left no debt");
    });
}

/// Period 0 (quota 20 µs) hands out one slice of 10 µs, whose task overruns it by 15 µs. Its
/// charge, at the start of period 1, races a take of period 1 that refills the pool (or finds
/// the charge's own refill half done). Returns that take's slice and the balance after both.
fn an_overrun_charged_while_the_period_refills(slush: bool) -> (Slice, i64) {
    let budget = bandwidth(2, slush);
    let held = budget.take(0).unwrap();
    assert_eq!(held, Slice { ns: SLICE_NS, period: 0 });
    let charger = {
        let budget = budget.clone();
        loom::thread::spawn(move || budget.charge(held, OVERRUN_USED_NS, PERIOD_NS))
    };
    let taken = budget.take(PERIOD_NS).expect("period 1 has room for a slice whatever the order");
    charger.join().unwrap();
    assert_eq!(taken.period, 1);
    assert_eq!(budget.charged_ns(), OVERRUN_USED_NS, "the charge was counted once");
    let balance = budget.balance_ns(PERIOD_NS);
    assert!(balance <= 2 * SLICE_NS as i64, "the pool holds more than its quota: {balance}");
    (taken, balance)
}

/// Without the slush fund (the kernel's way), the overrun is a debt of period 1: whatever the
/// order, period 1's full quota (period 0's unused 10 µs does not carry over) pays the overrun
/// and the slice, exactly once each.
#[test]
fn an_overrun_racing_the_refill_is_charged_once_without_the_slush_fund() {
    model(|| {
        let (taken, balance) = an_overrun_charged_while_the_period_refills(false);
        let overrun = (OVERRUN_USED_NS - SLICE_NS) as i64;
        assert_eq!(
            balance + taken.ns as i64,
            2 * SLICE_NS as i64 - overrun,
            "period 1's quota minus the overrun and the slice (slice {taken:?}, balance {balance})"
        );
    });
}

/// With the slush fund, the overrun is paid first from what period 0 left unused (10 µs), and
/// only the rest (5 µs) from period 1, whatever the order of the charge and the refill.
///
/// The race this checks: the take's refill swaps in period 1's state and, before it stores the
/// slush fund, the charger finds the refill half done, finishes its period store (`roll`'s
/// `fetch_max`), reads the slush fund still empty and charges the whole overrun to period 1;
/// the refill then stores the 10 µs the overrun should have used, and period 1 is 10 µs short.
/// (Had the previous period left a slush fund, the charger would instead have spent that stale
/// one, and the budget would have granted more than its quota.) A helper must not charge a
/// period before that period's slush fund is published.
#[test]
fn an_overrun_racing_the_refill_is_paid_from_the_slush_fund_first() {
    model(|| {
        let (taken, balance) = an_overrun_charged_while_the_period_refills(true);
        let overrun = (OVERRUN_USED_NS - SLICE_NS) as i64;
        let leftover = SLICE_NS as i64;
        assert_eq!(
            balance + taken.ns as i64,
            2 * SLICE_NS as i64 - (overrun - leftover),
            "period 1 paid the part of the overrun the slush fund should have paid (slice {taken:?}, balance {balance})"
        );
    });
}

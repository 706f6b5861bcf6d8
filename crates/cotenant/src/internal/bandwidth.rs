//! The accounting of a user-space CPU budget: a quota of CPU time per period shared by many
//! threads, without cgroups or root (issue 7, item 3; seed 001 §IV "done right").
//!
//! The kernel's CFS bandwidth control (seed 001 §II) keeps a global pool per cgroup, refilled
//! every period; each CPU takes a local slice from it and charges its run time against the
//! slice at every tick. Runtime overrun at a tick is paid back from the *next* period, so a
//! process that never exceeded its quota on average can still be throttled (seed 001 Figure 4).
//! Here, as the seed proposes:
//! - **Global pool with atomics, no lock** (seed 001 §IV-B): the period number and the pool's
//!   balance share one `AtomicU64` (16 bits of period, 48 bits of signed nanoseconds), so a
//!   refill and a take can never interleave half-way.
//! - **Local slices**: a thread takes [`Bandwidth::take`] a slice before running work and
//!   [`Bandwidth::charge`]s what it really used (its thread CPU clock) afterwards; an unused
//!   remainder goes back to the pool.
//! - **Slush fund** (seed 001 §IV-A1): an overrun is paid first from what the previous period
//!   left unused, and only then from the current period's quota; without it (the kernel's way,
//!   kept as a switch for the lab) every overrun is a debt of the next period.
//!
//! Time is an input (nanoseconds since the budget's epoch), so the accounting is deterministic
//! and unit-tested; the pool reads the clock and parks threads that are refused (`until`).
//!
//! One wait remains: a refill swaps in the new period's balance first and publishes the slush
//! fund right after; a [`Bandwidth::charge`] that comes between the two waits (yielding) for
//! the publication, since what it pays or returns depends on that fund (a loom model,
//! `pool/tests/loom_budget.rs`, found overruns paid from the old fund or charged to the new
//! period while the leftover was still unpublished). Takes never wait.
//!
//! Long work cannot be preempted in user space: one slice can overrun by as much as the work
//! between two charges. The overrun is bounded by the longest task (or the longest stretch
//! between two calls of a cooperative checkpoint), and it is paid, not forgiven.

use crate::sync::{lock, thread, AtomicI64, AtomicU64, Mutex, Ordering};

/// The most yields a charge waits for a refill to publish its slush fund (far more than two
/// stores take, even for a preempted refiller on a loaded host: each yield lets it run).
const MAX_SLUSH_WAIT_YIELDS: u32 = 100_000;

/// Bits of the packed state that hold the period number (the rest is the balance).
const PERIOD_BITS: u32 = 16;
const BALANCE_BITS: u32 = 64 - PERIOD_BITS;
const PERIOD_MASK: u64 = (1 << PERIOD_BITS) - 1;
/// The largest balance the packed state holds (2^47 ns, about 39 hours of CPU time).
const BALANCE_MAX: i64 = (1 << (BALANCE_BITS - 1)) - 1;

fn pack(period: u64, balance: i64) -> u64 {
    let balance = balance.clamp(-BALANCE_MAX, BALANCE_MAX);
    ((period & PERIOD_MASK) << BALANCE_BITS) | ((balance as u64) & ((1 << BALANCE_BITS) - 1))
}

/// The full period number of a packed period, given the full number `near` of a period at
/// most 2^16 - 1 periods before it (the stored `period`, which a refill brings up to date right
/// after its CAS of the state).
fn full_period(near: u64, packed: u64) -> u64 {
    near + (packed.wrapping_sub(near) & PERIOD_MASK)
}

/// The smallest quota per period a budget accepts: below this a slice would cost more to take
/// and charge than it runs.
const MIN_QUOTA_NS: f64 = 10_000.0;

fn unpack(state: u64) -> (u64, i64) {
    let period = state >> BALANCE_BITS;
    // Sign-extend the low 48 bits.
    let balance = ((state << PERIOD_BITS) as i64) >> PERIOD_BITS;
    (period, balance)
}

/// Why a budget cannot be built.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidBudget(pub String);

impl std::fmt::Display for InvalidBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidBudget {}

/// A slice of CPU time taken from the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// Nanoseconds granted.
    pub ns: u64,
    /// The period it was taken in.
    pub period: u64,
}

/// The pool is empty until `until_ns` (the next refill).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    /// When the next period starts (ns since the budget's epoch).
    pub until_ns: u64,
}

/// A quota of CPU time per period, shared by threads. See the module documentation.
#[derive(Debug)]
pub struct Bandwidth {
    quota_ns: i64,
    period_ns: u64,
    slice_ns: u64,
    slush_enabled: bool,
    /// Packed (period number mod 2^16, balance ns).
    state: AtomicU64,
    /// The full period number of `state` (the packed one wraps).
    period: AtomicU64,
    /// What the previous period left unused (ns), paying overruns first.
    slush: AtomicI64,
    /// The period whose slush fund `slush` holds (published after `slush`, under
    /// `slush_publish`, so that two refills racing cannot leave the older one's fund).
    slush_period: AtomicU64,
    slush_publish: Mutex<()>,
    /// The last period in which a take was refused, and how many periods were.
    last_throttled: AtomicU64,
    throttled_periods: AtomicU64,
    /// Periods that began with less than a full quota because the previous one left a debt.
    short_periods: AtomicU64,
    /// Nanoseconds charged in all.
    charged_ns: AtomicU64,
}

impl Bandwidth {
    /// `cpus` CPUs' worth of time per `period_ns`, handed out in slices of `slice_ns`.
    pub fn new(cpus: f64, period_ns: u64, slice_ns: u64, slush: bool) -> Result<Self, InvalidBudget> {
        if !cpus.is_finite() || cpus <= 0.0 {
            return Err(InvalidBudget(format!("cpus must be a positive number, got {cpus}")));
        }
        if !(1_000_000..=1_000_000_000).contains(&period_ns) {
            return Err(InvalidBudget(format!("period must be between 1 ms and 1 s, got {period_ns} ns")));
        }
        let quota = (cpus * period_ns as f64).round();
        if quota < MIN_QUOTA_NS {
            return Err(InvalidBudget(format!(
                "{cpus} CPUs per {period_ns} ns is less than the smallest quota, 10 µs per period"
            )));
        }
        if quota > BALANCE_MAX as f64 / 2.0 {
            return Err(InvalidBudget(format!(
                "{cpus} CPUs per {period_ns} ns is more than this budget holds"
            )));
        }
        if slice_ns == 0 {
            return Err(InvalidBudget("slice must be at least 1 ns".into()));
        }
        let quota_ns = quota as i64;
        Ok(Bandwidth {
            quota_ns,
            period_ns,
            slice_ns,
            slush_enabled: slush,
            state: AtomicU64::new(pack(0, quota_ns)),
            period: AtomicU64::new(0),
            slush: AtomicI64::new(0),
            slush_period: AtomicU64::new(0),
            slush_publish: Mutex::new(()),
            last_throttled: AtomicU64::new(u64::MAX),
            throttled_periods: AtomicU64::new(0),
            short_periods: AtomicU64::new(0),
            charged_ns: AtomicU64::new(0),
        })
    }

    /// The quota per period (ns).
    pub fn quota_ns(&self) -> u64 {
        self.quota_ns as u64
    }

    /// The period (ns).
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Periods in which a take was refused.
    pub fn throttled_periods(&self) -> u64 {
        self.throttled_periods.load(Ordering::Relaxed)
    }

    /// Periods that began with less than a full quota because the one before ended in debt
    /// (an overrun not paid by the slush fund): the seed's "throttled although it did not use
    /// its quota" in the making.
    pub fn short_periods(&self) -> u64 {
        self.short_periods.load(Ordering::Relaxed)
    }

    /// Nanoseconds charged in all.
    pub fn charged_ns(&self) -> u64 {
        self.charged_ns.load(Ordering::Relaxed)
    }

    /// The current balance of the pool (ns; negative while the period pays a debt).
    pub fn balance_ns(&self, now_ns: u64) -> i64 {
        self.roll(now_ns);
        unpack(self.state.load(Ordering::Acquire)).1
    }

    /// Brings the pool to the period of `now_ns`: each elapsed period adds a quota (paying a
    /// debt first) and the slush fund becomes what the last elapsed period left unused.
    ///
    /// Lock-free: a refill is a CAS of the packed state followed by a store of the full period
    /// number; a thread that finds the two out of step finishes the refill's second step itself
    /// (`fetch_max`) instead of waiting for the refilling thread, which may be preempted. (A jump
    /// of 2^16 periods or more, 65 s idle at a 1 ms period, can make a helper count one refill
    /// twice; harmless, a refill never fills past one quota.)
    fn roll(&self, now_ns: u64) -> u64 {
        let now_period = now_ns / self.period_ns;
        loop {
            let current = self.period.load(Ordering::Acquire);
            let state = self.state.load(Ordering::Acquire);
            let (packed_period, balance) = unpack(state);
            let state_period = full_period(current, packed_period);
            if state_period != current {
                // Another thread swapped in a refill and has not stored its period yet.
                self.period.fetch_max(state_period, Ordering::AcqRel);
                continue;
            }
            if now_period <= current {
                return current;
            }
            let elapsed = now_period - current;
            // The debt is paid by the refills of the elapsed periods; a balance left over stays
            // in the pool only up to one quota (an idle budget does not save up for a burst).
            let elapsed_quota = self.quota_ns.saturating_mul(i64::try_from(elapsed).unwrap_or(i64::MAX));
            let refilled = balance.saturating_add(elapsed_quota).min(self.quota_ns);
            let leftover = if elapsed == 1 { balance.max(0) } else { self.quota_ns };
            if self
                .state
                .compare_exchange(state, pack(now_period, refilled), Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if refilled < self.quota_ns {
                    self.short_periods.fetch_add(1, Ordering::Relaxed);
                }
                if self.slush_enabled {
                    let _publishing = lock(&self.slush_publish);
                    if self.slush_period.load(Ordering::Acquire) < now_period {
                        self.slush.store(leftover.min(self.quota_ns), Ordering::Release);
                        self.slush_period.store(now_period, Ordering::Release);
                    }
                }
                self.period.fetch_max(now_period, Ordering::AcqRel);
                return now_period;
            }
        }
    }

    /// Takes a slice (at most the balance) to run work, or says when the pool refills.
    pub fn take(&self, now_ns: u64) -> Result<Slice, Exhausted> {
        loop {
            let period = self.roll(now_ns);
            let state = self.state.load(Ordering::Acquire);
            let (packed_period, balance) = unpack(state);
            if packed_period != period & PERIOD_MASK {
                // A refill happened since `roll` (its next call brings us up to date).
                continue;
            }
            if balance <= 0 {
                if self.last_throttled.swap(period, Ordering::AcqRel) != period {
                    self.throttled_periods.fetch_add(1, Ordering::Relaxed);
                }
                return Err(Exhausted { until_ns: (period + 1) * self.period_ns });
            }
            let ns = self.slice_ns.min(balance as u64);
            if self
                .state
                .compare_exchange(
                    state,
                    pack(packed_period, balance - ns as i64),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                return Ok(Slice { ns, period });
            }
        }
    }

    /// Charges `used_ns` of real CPU time against `slice`: an unused remainder returns to the
    /// pool (to the slush fund when the slice's period has ended); an overrun is paid from the
    /// slush fund first, then from the pool, which may go negative (a debt of the next period).
    pub fn charge(&self, slice: Slice, used_ns: u64, now_ns: u64) {
        self.charged_ns.fetch_add(used_ns, Ordering::Relaxed);
        let period = self.roll(now_ns);
        let diff = slice.ns as i64 - used_ns.min(i64::MAX as u64) as i64;
        if self.slush_enabled {
            // The refill to `period` may have swapped the balance in and not yet published
            // the fund: its thread is between two stores, so this wait is short. Bounded all
            // the same: after a jump of 2^16 periods a helper can finish a period that no
            // refill publishes (see `roll`); the charge then goes ahead with the old fund.
            let mut yields = 0u32;
            while self.slush_period.load(Ordering::Acquire) < period && yields < MAX_SLUSH_WAIT_YIELDS {
                thread::yield_now();
                // Under loom a yield lets the refilling thread run, so the bound never binds.
                if cfg!(not(loom)) {
                    yields += 1;
                }
            }
        }
        if diff >= 0 {
            if slice.period == period {
                self.add_to_pool(diff);
            } else if self.slush_enabled && slice.period + 1 == period {
                self.slush.fetch_add(diff, Ordering::AcqRel);
            }
            return;
        }
        let mut overrun = -diff;
        if self.slush_enabled {
            let mut slush = self.slush.load(Ordering::Acquire);
            while slush > 0 {
                let paid = slush.min(overrun);
                match self.slush.compare_exchange_weak(
                    slush,
                    slush - paid,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        overrun -= paid;
                        break;
                    }
                    Err(seen) => slush = seen,
                }
            }
        }
        if overrun > 0 {
            self.add_to_pool(-overrun);
        }
    }

    fn add_to_pool(&self, delta: i64) {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let (period, balance) = unpack(state);
            match self.state.compare_exchange_weak(
                state,
                pack(period, balance.saturating_add(delta)),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(seen) => state = seen,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_packed_period_is_completed_from_a_nearby_full_one() {
        assert_eq!(full_period(7, 7), 7);
        assert_eq!(full_period(7, 9), 9);
        assert_eq!(full_period(65_535, 2), 65_538);
        assert_eq!(full_period(65_536 * 3 + 10, 12), 65_536 * 3 + 12);
    }

    /// A refill whose period store has not happened yet does not stop other threads: they
    /// finish it (the lock-free property the pool relies on).
    #[test]
    fn a_half_done_refill_is_finished_by_the_next_caller() {
        let b = Bandwidth::new(1.0, 100 * MS, 10 * MS, true).unwrap();
        // Simulate a refiller preempted between its CAS and its period store.
        b.state.store(pack(1, 100 * MS as i64), Ordering::Release);
        assert_eq!(b.period.load(Ordering::Acquire), 0);
        assert_eq!(b.take(100 * MS).unwrap(), Slice { ns: 10 * MS, period: 1 });
        assert_eq!(b.period.load(Ordering::Acquire), 1);
    }

    #[test]
    fn the_packed_state_keeps_the_sign_and_the_period() {
        for (p, b) in [(0, 0), (1, -1), (65_535, BALANCE_MAX), (7, -BALANCE_MAX), (65_536 + 3, 42)] {
            assert_eq!(unpack(pack(p, b)), (p & PERIOD_MASK, b));
        }
    }

    #[test]
    fn bad_budgets_are_refused_with_the_reason() {
        assert!(Bandwidth::new(0.0, 100 * MS, MS, true).unwrap_err().0.contains("positive"));
        assert!(Bandwidth::new(-1.0, 100 * MS, MS, true).is_err());
        assert!(Bandwidth::new(f64::NAN, 100 * MS, MS, true).is_err());
        assert!(Bandwidth::new(1.0, 1_000, MS, true).unwrap_err().0.contains("between 1 ms and 1 s"));
        assert!(Bandwidth::new(1.0, 2_000 * MS, MS, true).is_err());
        assert!(Bandwidth::new(1.0, 100 * MS, 0, true).is_err());
        assert!(Bandwidth::new(1e-7, MS, MS, true).unwrap_err().0.contains("smallest quota"));
    }

    #[test]
    fn slices_are_handed_out_until_the_quota_is_gone_then_refused_until_the_refill() {
        let b = Bandwidth::new(1.5, 100 * MS, 5 * MS, true).unwrap();
        assert_eq!(b.quota_ns(), 150 * MS);
        let mut granted = 0;
        while let Ok(s) = b.take(10 * MS) {
            granted += s.ns;
            b.charge(s, s.ns, 10 * MS);
        }
        assert_eq!(granted, 150 * MS);
        assert_eq!(b.take(99 * MS), Err(Exhausted { until_ns: 100 * MS }));
        assert_eq!(b.throttled_periods(), 1, "one period, however many refusals");
        assert_eq!(b.take(100 * MS).unwrap(), Slice { ns: 5 * MS, period: 1 });
    }

    #[test]
    fn an_unused_remainder_goes_back_to_the_pool() {
        let b = Bandwidth::new(0.01, 100 * MS, 5 * MS, true).unwrap(); // 1 ms per period
        let s = b.take(0).unwrap();
        assert_eq!(s.ns, MS);
        assert_eq!(b.balance_ns(0), 0);
        b.charge(s, MS / 4, 0);
        assert_eq!(b.balance_ns(0), 3 * MS as i64 / 4);
    }

    /// Seed 001 Figure 4 in spirit: a worker that uses exactly its quota on average but
    /// overruns a slice near the end of a period. Without the slush fund the overrun is a debt
    /// of the next period, which is throttled before its end; with it, the previous period's
    /// unused time pays and the next period is whole.
    #[test]
    fn the_slush_fund_pays_an_overrun_from_the_previous_periods_leftover() {
        for (slush, next_period_balance) in [(true, 100 * MS as i64), (false, 98 * MS as i64)] {
            let b = Bandwidth::new(1.0, 100 * MS, 10 * MS, slush).unwrap();
            // Period 0 uses 95 ms of its 100: 5 ms left over.
            for _ in 0..9 {
                let s = b.take(0).unwrap();
                b.charge(s, s.ns, 0);
            }
            let s = b.take(90 * MS).unwrap();
            b.charge(s, 5 * MS, 95 * MS);
            // Period 1: a slice taken at its start overruns by 2 ms.
            let s = b.take(100 * MS).unwrap();
            b.charge(s, 12 * MS, 112 * MS);
            // What period 1 has left for everyone else: the full quota minus the slice's 10 ms
            // with the slush fund (the 2 ms came from period 0's 5 ms); 2 ms less without.
            assert_eq!(b.balance_ns(112 * MS) + 10 * MS as i64, next_period_balance, "slush {slush}");
        }
    }

    #[test]
    fn a_debt_is_paid_by_the_next_refill_and_idle_periods_do_not_save_up() {
        let b = Bandwidth::new(1.0, 100 * MS, 10 * MS, false).unwrap();
        let s = b.take(0).unwrap();
        b.charge(s, 130 * MS, 50 * MS); // a long task: 120 ms over
        assert_eq!(b.balance_ns(50 * MS), -30 * MS as i64);
        assert!(b.take(60 * MS).is_err());
        assert_eq!(b.balance_ns(100 * MS), 70 * MS as i64, "period 1 pays the 30 ms debt");
        assert_eq!(b.short_periods(), 1);
        assert_eq!(b.balance_ns(1_000 * MS), 100 * MS as i64, "ten idle periods still leave one quota");
        // A debt of many quotas is paid by as many elapsed periods, however long the gap.
        let s = b.take(1_000 * MS).unwrap();
        b.charge(s, 2_010 * MS, 1_050 * MS); // a 10 ms slice used 2 010 ms: 19.1 quotas of debt
        assert_eq!(b.balance_ns(1_050 * MS), -1_910 * MS as i64);
        assert!(b.balance_ns(1_500 * MS) < 0, "5 refills pay 500 ms of the 1 910");
        assert_eq!(b.balance_ns(10_000 * MS), 100 * MS as i64, "90 refills pay it all");
    }

    /// Threads taking and charging concurrently never get more than the quota per period
    /// between them (nothing here depends on timing: time is the loop counter).
    #[test]
    fn concurrent_takes_never_exceed_the_quota_of_a_period() {
        let b = std::sync::Arc::new(Bandwidth::new(2.0, 10 * MS, 100_000, true).unwrap());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    let mut granted = 0;
                    while let Ok(s) = b.take(5 * MS) {
                        granted += s.ns;
                    }
                    granted
                })
            })
            .collect();
        let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total, 20 * MS);
    }
}

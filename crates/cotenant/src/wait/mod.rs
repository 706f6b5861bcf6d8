//! Adaptive waiting: how a thread waits for a condition another thread will make true, without
//! the unsafe pure spinning that made WiredTiger's P99.9 rise 2168 % once its sessions
//! outnumbered the cores and some ran at a higher priority (the MongoDB tail-latency paper,
//! "Inducing Huge Tail Latency on a MongoDB deployment", Andreoli and Cucinotta).
//!
//! | file | what it owns |
//! |---|---|
//! | `backoff.rs` | [`Backoff`], the pure schedule: spin, yield, sleep or park (and presets) |
//! | `signal.rs` | [`Signal`] (an event count) and [`Event`] (a flag): parking that never loses a wake-up |
//!
//! Pick a strategy by what the thread you wait for can suffer:
//! - [`Backoff::spin`]: only when every thread involved has a CPU of its own (pinned, no
//!   overcommitment, equal priorities); otherwise the spinner burns its time slice while the
//!   thread it waits for cannot run (what the paper measured). `cotenant lab spin` shows the
//!   damage.
//! - [`Backoff::wiredtiger`] or [`Backoff::default`]: spin briefly, yield, then sleep with
//!   growing, capped sleeps: safe for any condition, no notifier needed.
//! - [`Backoff::parking`] with a [`Signal`] or an [`Event`]: parks until notified; the notifier
//!   pays a fence and a load per notification.
//!
//! The pool's idle workers and [`crate::pool::Task::join`] use the busy part of a schedule
//! before parking on their own protocol.
//!
//! Everything here is the standard library (`std::hint::spin_loop`, `yield_now`, `sleep`, and
//! `Mutex` with `Condvar` for parking, which are futex-backed on Linux), so it works the same on
//! every system cotenant builds for, the fallback for systems other than Linux included.

mod backoff;
#[cfg(all(test, loom))]
mod loom_event;
mod signal;

pub use backoff::{Backoff, Growth, Hints, Step};
pub use signal::{Event, Signal};

/// What a wait did: how often it checked its condition and how it spent the time between.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waited {
    /// Failed checks of the condition (the step index the schedule reached).
    pub checks: u32,
    /// `spin_loop` hints issued.
    pub spin_hints: u64,
    /// Yields.
    pub yields: u32,
    /// Sleeps (in [`wait_until`]).
    pub sleeps: u32,
    /// Parks (on a [`Signal`]).
    pub parks: u32,
}

/// Waits until `ready` returns true, following `backoff` between checks. Without a notifier a
/// park step sleeps the schedule's longest sleep (use [`Signal::wait_until`] to be woken).
///
/// ```
/// use cotenant::wait::{wait_until, Backoff};
/// use std::sync::atomic::{AtomicBool, Ordering};
/// let flag = AtomicBool::new(true);
/// let waited = wait_until(|| flag.load(Ordering::Acquire), &Backoff::wiredtiger());
/// assert_eq!(waited.checks, 0);
/// ```
pub fn wait_until(mut ready: impl FnMut() -> bool, backoff: &Backoff) -> Waited {
    let mut waited = Waited::default();
    while !ready() {
        let step = backoff.step(waited.checks);
        waited.checks = waited.checks.saturating_add(1);
        if !busy_step(step, &mut waited) {
            let pause = match step {
                Step::Sleep(d) => d,
                _ => backoff.max_sleep(),
            };
            waited.sleeps = waited.sleeps.saturating_add(1);
            std::thread::sleep(pause);
        }
    }
    waited
}

/// Takes `step` if it is a spin or a yield (counting it) and says so; false for a sleep or a
/// park, which the caller takes its own way.
pub(crate) fn busy_step(step: Step, waited: &mut Waited) -> bool {
    match step {
        Step::Spin(hints) => {
            for _ in 0..hints {
                std::hint::spin_loop();
            }
            waited.spin_hints = waited.spin_hints.saturating_add(u64::from(hints));
            true
        }
        Step::Yield => {
            std::thread::yield_now();
            waited.yields = waited.yields.saturating_add(1);
            true
        }
        Step::Sleep(_) | Step::Park => false,
    }
}

/// The busy part of `backoff` only: checks `ready` between its spins and yields and returns
/// whether it became true; the caller then sleeps its own way (the pool's workers park on the
/// protocol of `pool/README.md`). Under loom it checks once: spinning would multiply the
/// interleavings to explore, and the protocols must be correct without it.
pub(crate) fn spin_then_yield(backoff: &Backoff, mut ready: impl FnMut() -> bool) -> bool {
    #[cfg(not(loom))]
    {
        let mut waited = Waited::default();
        let mut checks = 0;
        while backoff.is_busy(checks) {
            if ready() {
                return true;
            }
            busy_step(backoff.step(checks), &mut waited);
            checks = checks.saturating_add(1);
        }
    }
    #[cfg(loom)]
    let _ = backoff;
    ready()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    /// The counts follow the schedule (no timing involved: the condition flips after a number
    /// of checks, not after a time).
    #[test]
    fn wait_until_takes_the_schedules_steps_in_order() {
        let backoff = Backoff::default().spins(3).yields(2).sleeps(
            Duration::from_micros(1),
            Growth::Double,
            Duration::from_micros(4),
        );
        let calls = AtomicU32::new(0);
        let waited = wait_until(|| calls.fetch_add(1, Ordering::Relaxed) == 8, &backoff);
        assert_eq!(waited, Waited { checks: 8, spin_hints: 1 + 2 + 4, yields: 2, sleeps: 3, parks: 0 });
    }

    #[test]
    fn spin_then_yield_stops_where_the_schedule_would_sleep() {
        let backoff = Backoff::default().spins(2).yields(3);
        let calls = AtomicU32::new(0);
        assert!(!spin_then_yield(&backoff, || {
            calls.fetch_add(1, Ordering::Relaxed);
            false
        }));
        assert_eq!(calls.load(Ordering::Relaxed), 2 + 3 + 1, "a check before each busy step, one after");
        assert!(spin_then_yield(&backoff, || true));
    }

    #[test]
    fn a_park_step_without_a_signal_sleeps_the_longest_sleep() {
        let backoff = Backoff::parking().spins(0);
        let calls = AtomicU32::new(0);
        let waited = wait_until(|| calls.fetch_add(1, Ordering::Relaxed) == 1, &backoff);
        assert_eq!((waited.sleeps, waited.parks), (1, 0));
    }

    #[test]
    fn an_event_set_before_the_wait_returns_at_once() {
        let event = Event::new();
        event.set();
        assert_eq!(event.wait_with(&Backoff::parking()), Waited::default());
        event.reset();
        assert!(!event.is_set());
        assert!(!event.wait_timeout(Duration::ZERO), "not set, no time: false at once");
    }
}

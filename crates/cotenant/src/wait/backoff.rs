//! The schedule of a waiting thread: spin, then yield, then sleep or park with growing, capped
//! timeouts (the MongoDB tail-latency paper's remedy, "Inducing Huge Tail Latency on a MongoDB
//! deployment": "spin for a fixed amount of time, then yield for a while, and then back off to
//! sleep"). Pure: [`Backoff::step`] maps the number of checks so far to what to do
//! before the next one, so the schedule is unit-tested without a clock.

use std::time::Duration;

/// The most `spin_loop` hints one spin step issues (`2^MAX_SPIN_SHIFT`): past this, doubling
/// again only delays noticing the condition (crossbeam's `Backoff` caps at a similar point).
const MAX_SPIN_SHIFT: u32 = 7;

/// What a waiting thread does before it checks its condition again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Busy-wait this many `std::hint::spin_loop` hints (a pause instruction each).
    Spin(u32),
    /// Give the CPU to another runnable thread (`sched_yield`), if there is one.
    Yield,
    /// Sleep this long, or park on a [`super::Signal`] for at most this long.
    Sleep(Duration),
    /// Park on a [`super::Signal`] until notified. Without a signal there is nobody to wake the
    /// thread, so [`super::wait_until`] sleeps the schedule's longest sleep instead.
    Park,
}

/// How many pause hints each spin step issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hints {
    /// 1, 2, 4, ... doubling with every spin step, capped at 128 (the default).
    Doubling,
    /// The same number every step (1: check, pause, check again).
    Fixed(u32),
}

/// How sleeps grow from one to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Growth {
    /// Add this much each time (WiredTiger's `__wt_spin_backoff`: +100 µs).
    Add(Duration),
    /// Double each time.
    Double,
}

/// A waiting schedule: `spins` spin steps with exponentially more pause hints (1, 2, 4, ...
/// capped at 128; or a fixed number, [`Hints`]), then `yields` yields, then sleeps from `first_sleep` growing by `growth` up
/// to `max_sleep`, or, for a parking schedule, a park until notified.
///
/// ```
/// use cotenant::wait::{Backoff, Step};
/// use std::time::Duration;
/// let wt = Backoff::wiredtiger();
/// assert_eq!(wt.step(0), Step::Spin(1));
/// assert_eq!(wt.step(10), Step::Yield);
/// assert_eq!(wt.step(1000), Step::Sleep(Duration::from_micros(100)));
/// assert_eq!(wt.step(1001), Step::Sleep(Duration::from_micros(200)));
/// assert_eq!(wt.step(5000), Step::Sleep(Duration::from_millis(1)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    spins: u32,
    hints: Hints,
    yields: u32,
    first_sleep: Duration,
    growth: Growth,
    max_sleep: Duration,
    park: bool,
}

impl Default for Backoff {
    /// A short spin (about 250 pause hints in all), a few yields, then sleeps from 50 µs,
    /// doubling, capped at 1 ms: safe when the thread waited for is preempted (it costs the
    /// waiter at most about a millisecond of extra delay) and cheap when it is not.
    fn default() -> Self {
        Backoff {
            spins: MAX_SPIN_SHIFT + 1,
            hints: Hints::Doubling,
            yields: 8,
            first_sleep: Duration::from_micros(50),
            growth: Growth::Double,
            max_sleep: Duration::from_millis(1),
            park: false,
        }
    }
}

impl Backoff {
    /// WiredTiger's `__wt_spin_backoff`, which the MongoDB tail-latency paper applied to
    /// snapshot creation: 10
    /// checks in a row (WiredTiger re-checks at once; here with one pause hint between), then
    /// yields up to the 1000th check, then sleeps of 100 µs, 200 µs, ... capped at 1 ms.
    pub fn wiredtiger() -> Self {
        Backoff {
            spins: 10,
            hints: Hints::Fixed(1),
            yields: 990,
            first_sleep: Duration::from_micros(100),
            growth: Growth::Add(Duration::from_micros(100)),
            max_sleep: Duration::from_millis(1),
            park: false,
        }
    }

    /// Pure spinning, never giving the CPU back. **Unsafe in user space** whenever the thread
    /// waited for can be preempted (more runnable threads than CPUs, or threads of different
    /// priorities): the spinner burns its whole time slice while the thread it waits for
    /// cannot run (the MongoDB tail-latency paper). Kept to show that in `cotenant lab spin`.
    pub fn spin() -> Self {
        Backoff { spins: u32::MAX, hints: Hints::Fixed(1), yields: 0, ..Backoff::default() }
    }

    /// Yield between checks, forever: gives the CPU away, but a yielding thread stays runnable
    /// and the scheduler may pick it again at once (the MongoDB tail-latency paper).
    pub fn yielding() -> Self {
        Backoff { spins: 0, yields: u32::MAX, ..Backoff::default() }
    }

    /// A short spin, then park on a [`super::Signal`] until notified: no CPU spent waiting,
    /// one wake-up per notification.
    pub fn parking() -> Self {
        Backoff { yields: 0, park: true, ..Backoff::default() }
    }

    /// The number of spin steps; `u32::MAX` spins forever.
    pub fn spins(mut self, spins: u32) -> Self {
        self.spins = spins;
        self
    }

    /// The pause hints of each spin step (default: doubling).
    pub fn hints(mut self, hints: Hints) -> Self {
        self.hints = hints;
        self
    }

    /// The number of yield steps after the spins; `u32::MAX` yields forever.
    pub fn yields(mut self, yields: u32) -> Self {
        self.yields = yields;
        self
    }

    /// Sleeps after the yields: `first`, growing by `growth`, never longer than `max`. A zero
    /// `first` is taken as 1 µs (a zero sleep is a yield), and `max` is at least `first`.
    pub fn sleeps(mut self, first: Duration, growth: Growth, max: Duration) -> Self {
        self.first_sleep = first.max(Duration::from_micros(1));
        self.max_sleep = max.max(self.first_sleep);
        self.growth = growth;
        self.park = false;
        self
    }

    /// After the spins and yields, park until notified instead of sleeping (only a wait on a
    /// [`super::Signal`] can be notified).
    pub fn then_park(mut self) -> Self {
        self.park = true;
        self
    }

    /// The longest sleep of the schedule.
    pub fn max_sleep(&self) -> Duration {
        self.max_sleep
    }

    /// What to do after `checks` failed checks of the condition (0 after the first).
    pub fn step(&self, checks: u32) -> Step {
        // u32::MAX spins or yields mean forever: the check counter saturates there.
        if self.spins == u32::MAX || checks < self.spins {
            return Step::Spin(match self.hints {
                Hints::Doubling => 1 << checks.min(MAX_SPIN_SHIFT),
                Hints::Fixed(n) => n,
            });
        }
        let after_spins = checks - self.spins;
        if self.yields == u32::MAX || after_spins < self.yields {
            return Step::Yield;
        }
        if self.park {
            return Step::Park;
        }
        let sleeps_before = after_spins - self.yields;
        Step::Sleep(self.sleep_after(sleeps_before))
    }

    /// The sleep that follows `n` earlier sleeps.
    fn sleep_after(&self, n: u32) -> Duration {
        let grown = match self.growth {
            Growth::Add(step) => step.checked_mul(n).and_then(|extra| self.first_sleep.checked_add(extra)),
            Growth::Double => 2u32.checked_pow(n).and_then(|factor| self.first_sleep.checked_mul(factor)),
        };
        grown.map_or(self.max_sleep, |d| d.min(self.max_sleep))
    }

    /// Whether step `checks` is a spin or a yield (the steps a caller can take without a way
    /// to be woken).
    pub fn is_busy(&self, checks: u32) -> bool {
        matches!(self.step(checks), Step::Spin(_) | Step::Yield)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn spins_double_their_pause_hints_up_to_the_cap() {
        let b = Backoff::default().spins(10);
        let spins: Vec<_> = (0..10).map(|k| b.step(k)).collect();
        assert_eq!(
            spins,
            [1, 2, 4, 8, 16, 32, 64, 128, 128, 128].map(Step::Spin).to_vec(),
            "exponential, capped at 2^{MAX_SPIN_SHIFT}"
        );
    }

    #[test]
    fn the_wiredtiger_preset_follows_wt_spin_backoff() {
        let wt = Backoff::wiredtiger();
        assert!((0..10).all(|k| wt.step(k) == Step::Spin(1)), "10 quick re-checks, one pause each");
        assert!((10..1000).all(|k| wt.step(k) == Step::Yield), "yields up to the 1000th check");
        let sleeps: Vec<_> = (1000..1012).map(|k| wt.step(k)).collect();
        let expected: Vec<_> = [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1000, 1000]
            .map(|us| Step::Sleep(us * US))
            .to_vec();
        assert_eq!(sleeps, expected, "+100 µs each, capped at 1 ms");
        assert_eq!(wt.step(u32::MAX), Step::Sleep(1000 * US));
    }

    #[test]
    fn doubling_sleeps_are_capped_and_never_overflow() {
        let b = Backoff::default().spins(0).yields(0).sleeps(50 * US, Growth::Double, 1000 * US);
        let sleeps: Vec<_> = (0..7).map(|k| b.step(k)).collect();
        assert_eq!(sleeps, [50, 100, 200, 400, 800, 1000, 1000].map(|us| Step::Sleep(us * US)).to_vec());
        assert_eq!(b.step(40), Step::Sleep(1000 * US), "2^40 overflows u32: capped, not wrapped");
        assert_eq!(b.step(u32::MAX), Step::Sleep(1000 * US));
        let huge = Backoff::default().spins(0).yields(0).sleeps(
            Duration::MAX,
            Growth::Add(Duration::MAX),
            Duration::MAX,
        );
        assert_eq!(huge.step(3), Step::Sleep(Duration::MAX), "adding overflows Duration: capped");
    }

    #[test]
    fn degenerate_sleeps_are_made_sensible() {
        let b = Backoff::default().spins(0).yields(0).sleeps(Duration::ZERO, Growth::Double, Duration::ZERO);
        assert_eq!(b.step(0), Step::Sleep(US), "a zero sleep is a yield: 1 µs instead");
        assert_eq!(b.step(5), Step::Sleep(US), "max raised to first");
    }

    #[test]
    fn the_presets_have_the_shape_their_names_say() {
        assert!((0..100_000).step_by(997).all(|k| matches!(Backoff::spin().step(k), Step::Spin(_))));
        assert_eq!(Backoff::spin().step(0), Step::Spin(1), "a tight loop: check, pause, check");
        assert_eq!(Backoff::spin().step(u32::MAX), Step::Spin(1), "spins forever, past the counter's end");
        assert_eq!(Backoff::yielding().step(u32::MAX), Step::Yield, "yields forever");
        assert_eq!(Backoff::default().spins(2).hints(Hints::Fixed(3)).step(1), Step::Spin(3));
        assert_eq!(Backoff::yielding().step(0), Step::Yield);
        assert_eq!(Backoff::yielding().step(u32::MAX - 1), Step::Yield);
        let parking = Backoff::parking();
        assert!(matches!(parking.step(0), Step::Spin(_)));
        assert_eq!(parking.step(MAX_SPIN_SHIFT + 1), Step::Park);
        assert!(parking.is_busy(0) && !parking.is_busy(MAX_SPIN_SHIFT + 1));
        let d = Backoff::default();
        assert!(matches!(d.step(0), Step::Spin(1)));
        assert_eq!(d.step(MAX_SPIN_SHIFT + 1), Step::Yield);
        assert_eq!(d.step(MAX_SPIN_SHIFT + 9), Step::Sleep(50 * US));
        assert_eq!(Backoff::default().then_park().step(100), Step::Park);
        assert_eq!(
            Backoff::parking().sleeps(US, Growth::Double, US).step(100),
            Step::Sleep(US),
            "sleeps() unparks"
        );
    }
}

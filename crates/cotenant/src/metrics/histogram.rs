//! [`Histogram`]: durations counted in fixed log-scale buckets (1 µs, 2 µs, 4 µs, ... about
//! 8.4 s, then everything above), for a pool's queue wait and run time per task.
//!
//! Why fixed buckets: recording a value is a few instructions (a division by 1000, a
//! leading-zero count) and two stores into memory allocated once, so a pool can record every
//! task without allocating or locking on the task path; merging the workers' histograms is a
//! sum, and the Prometheus exposition of one is its running sums. The price is resolution: a
//! quantile is known to within a factor of two (the bucket's bounds), enough to tell a 50 µs
//! p99 from a 5 ms one.
//!
//! Inside the crate: `AtomicHistogram` is the same counts in atomics (a worker records its own
//! tasks with plain loads and stores, one writer per histogram, so no locked instruction;
//! threads that share one, submitters running a task themselves, add with `fetch_add`);
//! `TaskHistograms` is a pool's pair of them, queue wait and run time; and `TaskClock` is
//! how a worker feeds the pair from at most one clock reading per task, sharing each reading
//! between the end of one measure and the start of the next.

use std::sync::atomic::{AtomicU64, Ordering};

/// The number of finite bucket bounds: bucket `i < BOUNDS` ends at `1 µs << i` (1 µs up to
/// 8 388 608 µs, about 8.4 s); one more bucket counts everything above.
pub const BOUNDS: usize = 24;

/// Counts of durations in fixed log-scale buckets, with their sum.
///
/// Bucket `i < BOUNDS` holds the values in `(bound(i - 1), bound(i)]` where
/// `bound(i) = 1000 << i` nanoseconds (bucket 0: `[0, 1 µs]`); bucket `BOUNDS` holds the values
/// above the last bound (Prometheus's `+Inf`).
///
/// ```
/// use cotenant::metrics::histogram::Histogram;
/// let mut h = Histogram::default();
/// for ns in [500, 1_500, 1_800, 3_000_000] {
///     h.record(ns);
/// }
/// assert_eq!(h.count(), 4);
/// assert_eq!(h.sum_ns, 3_003_800);
/// assert_eq!(h.cumulative()[1], 3, "three values at or below 2 µs");
/// assert_eq!(h.quantile_ns(0.5), Some(2_000), "the median lies in (1 µs, 2 µs]");
/// assert_eq!(h.quantile_ns(1.0), Some(4_096_000), "the largest in (2.048 ms, 4.096 ms]");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Histogram {
    /// Non-cumulative counts: `buckets[i]` for `i < BOUNDS` counts values in
    /// `(bound(i - 1), bound(i)]` (bucket 0: `[0, 1 µs]`); `buckets[BOUNDS]` counts values
    /// above the last bound.
    pub buckets: [u64; BOUNDS + 1],
    /// Sum of the recorded values, nanoseconds.
    pub sum_ns: u64,
}

impl Histogram {
    /// The upper bound of bucket `i` in nanoseconds: `Some(1000 << i)` for `i < BOUNDS`,
    /// `None` for the last bucket (no bound: `+Inf`) and beyond.
    ///
    /// ```
    /// use cotenant::metrics::histogram::{Histogram, BOUNDS};
    /// assert_eq!(Histogram::upper_bound_ns(0), Some(1_000));
    /// assert_eq!(Histogram::upper_bound_ns(BOUNDS - 1), Some(8_388_608_000));
    /// assert_eq!(Histogram::upper_bound_ns(BOUNDS), None);
    /// ```
    pub fn upper_bound_ns(i: usize) -> Option<u64> {
        if i < BOUNDS {
            Some(1_000u64 << i)
        } else {
            None
        }
    }

    /// How many values were recorded: the sum of the buckets.
    pub fn count(&self) -> u64 {
        self.buckets.iter().fold(0u64, |sum, &n| sum.saturating_add(n))
    }

    /// The running sums of the buckets (what Prometheus calls the buckets: values at or below
    /// each bound); the last equals [`count`](Histogram::count).
    pub fn cumulative(&self) -> [u64; BOUNDS + 1] {
        let mut out = [0u64; BOUNDS + 1];
        let mut running = 0u64;
        for (slot, &n) in out.iter_mut().zip(self.buckets.iter()) {
            running = running.saturating_add(n);
            *slot = running;
        }
        out
    }

    /// The upper bound (ns) of the bucket that holds the `q`-quantile: the smallest bound at
    /// or below which at least `q` of the values lie (at least one value for `q` = 0).
    /// `None` when nothing was recorded; `u64::MAX` when it lies above the last bound. `q` is
    /// clamped to `[0, 1]` (NaN counts as 1).
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        // The rank of the quantile's value, 1-based; `as` saturates, and the clamp keeps it
        // within the values recorded even where `q * count` rounds up past `count`.
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        let mut running = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            running = running.saturating_add(n);
            if running >= rank {
                return Some(Self::upper_bound_ns(i).unwrap_or(u64::MAX));
            }
        }
        // Unreachable: the running sum ends at `count` >= `rank`. Say "above every bound".
        Some(u64::MAX)
    }

    /// Adds `other`'s counts and sum to this one's (saturating: a sum never wraps).
    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine = mine.saturating_add(*theirs);
        }
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
    }

    /// Records one value of `ns` nanoseconds (plain, not atomic: for tests, simulators, and
    /// whoever builds a histogram of their own).
    pub fn record(&mut self, ns: u64) {
        let bucket = &mut self.buckets[bucket_of(ns)];
        *bucket = bucket.saturating_add(1);
        self.sum_ns = self.sum_ns.saturating_add(ns);
    }
}

/// The bucket of a value of `ns` nanoseconds: the smallest `i` with `ns <= 1000 << i`, or
/// `BOUNDS` above the last bound. `ceil(ns / 1000) <= 2^i` is `(ns - 1) / 1000 < 2^i` (for
/// `ns >= 1`; 0 goes to bucket 0 too), so `i` is the bit length of `(ns - 1) / 1000`.
pub(crate) fn bucket_of(ns: u64) -> usize {
    let q = ns.saturating_sub(1) / 1_000;
    let i = (u64::BITS - q.leading_zeros()) as usize;
    i.min(BOUNDS)
}

/// A [`Histogram`] in atomics, recorded on the pool's task path and read by `metrics()`.
///
/// Not `crate::sync`'s atomics: these are statistics, not part of the pool's protocol, so the
/// loom models need not explore them (and the task path does not record under loom).
#[derive(Default)]
pub(crate) struct AtomicHistogram {
    buckets: [AtomicU64; BOUNDS + 1],
    sum_ns: AtomicU64,
}

impl AtomicHistogram {
    /// An empty histogram.
    #[allow(dead_code)] // `Default` builds them inside `WorkerStats`; kept for the contract
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records `ns` from the one thread that writes this histogram (a worker into its own
    /// counters): a relaxed load and a store, no locked instruction. Readers may see the
    /// bucket before the sum, or a count one behind: a snapshot, never a torn value.
    pub(crate) fn record_owned(&self, ns: u64) {
        let bucket = &self.buckets[bucket_of(ns)];
        bucket.store(bucket.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        self.sum_ns.store(self.sum_ns.load(Ordering::Relaxed).wrapping_add(ns), Ordering::Relaxed);
    }

    /// Records `ns` from any thread (`fetch_add`): for a histogram several threads write.
    pub(crate) fn record_shared(&self, ns: u64) {
        self.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Adds this histogram's counts and sum to `out` (saturating).
    pub(crate) fn add_to(&self, out: &mut Histogram) {
        for (mine, theirs) in self.buckets.iter().zip(out.buckets.iter_mut()) {
            *theirs = theirs.saturating_add(mine.load(Ordering::Relaxed));
        }
        out.sum_ns = out.sum_ns.saturating_add(self.sum_ns.load(Ordering::Relaxed));
    }
}

/// The histograms a pool keeps of its tasks (per worker, and one for the tasks run by the
/// threads that submitted them): what each measures is [`TaskClock`]'s documentation.
#[derive(Default)]
pub(crate) struct TaskHistograms {
    pub(crate) queue_wait: AtomicHistogram,
    pub(crate) run_time: AtomicHistogram,
}

impl TaskHistograms {
    /// Adds both to `queue_wait` and `run_time` (`Pool::metrics`: every worker's, merged).
    pub(crate) fn add_to(&self, queue_wait: &mut Histogram, run_time: &mut Histogram) {
        self.queue_wait.add_to(queue_wait);
        self.run_time.add_to(run_time);
    }
}

/// The readings behind a worker's task histograms (`Builder::task_histograms`): at most one
/// clock reading per task while the worker runs tasks back to back, each serving two ends.
///
/// - **Queue wait**: from the submit's stamp (`Shared::push`; for a submitter blocked on a
///   full queue, its first try) to the reading the worker takes once it has taken the task off
///   the queue. A task its submitter ran because the queue was full waited 0.
/// - **Run time**: from that same reading to the worker's next: the pop of its next task when
///   it goes straight on, or, when the queue looks empty after the task, a reading taken then. So it is the task plus what the worker does around it: before it, in a pool with
///   host CPU tokens or a CPU budget, the wait for a token or for the budget's slice; after it,
///   giving the token back, the counters and the next pop (a few ns). A task that joins a
///   task of its own pool, running queued tasks meanwhile, includes their time (each of them
///   is also counted on its own, from its pop to its end). A task its submitter ran: from the
///   submit's stamp to its end.
///
/// Readings come from `clock.rs` (the time-stamp counter where the kernel trusts it), not from
/// the busy stretches' clock, so they are never shared with `mark_busy`/`mark_idle`.
///
/// Both count a task once it has run (a value or a panic), as `Metrics::completed` does; tasks
/// that `shutdown_now` drops unrun count in neither. When the queue looked empty after a task,
/// its run time is recorded before the task counts as finished, so after `wait_idle` a pool of
/// one worker has them all; while a worker runs tasks back to back, each one's run time is
/// recorded at the next pop, up to one task per worker behind `completed`.
pub(crate) struct TaskClock {
    on: bool,
    /// The reading at the pop of the task whose run time is not recorded yet.
    running_since: Option<u64>,
}

impl TaskClock {
    /// A clock for a worker of a pool whose histograms are `on`.
    pub(crate) fn new(on: bool) -> Self {
        TaskClock { on, running_since: None }
    }

    /// Whether the pool times its tasks (if not, every method is a no-op and reads no clock).
    pub(crate) fn is_on(&self) -> bool {
        self.on
    }

    /// A task was taken off the queue to be run: the reading that ends the previous task's
    /// run (recorded now) and this one's queue wait (recorded by `started`, once the task is
    /// sure to run). `None`, and no reading, when the histograms are off.
    pub(crate) fn popped(&mut self, histograms: &TaskHistograms) -> Option<u64> {
        if !self.on {
            return None;
        }
        let now = super::clock::now_ns();
        if let Some(since) = self.running_since.take() {
            histograms.run_time.record_owned(now.saturating_sub(since));
        }
        Some(now)
    }

    /// The task popped at `popped` (submitted at `enqueued_ns`) runs now, nothing having
    /// cancelled it since: records its queue wait and starts its run.
    pub(crate) fn started(&mut self, histograms: &TaskHistograms, popped: Option<u64>, enqueued_ns: u64) {
        if let Some(now) = popped {
            histograms.queue_wait.record_owned(now.saturating_sub(enqueued_ns));
            self.running_since = Some(now);
        }
    }

    /// Ends the run in progress at a reading of its own: no pop follows at once (the queue
    /// looked empty), and the run is recorded before the task counts as finished.
    pub(crate) fn ended(&mut self, histograms: &TaskHistograms) {
        if let Some(since) = self.running_since.take() {
            histograms.run_time.record_owned(super::clock::now_ns().saturating_sub(since));
        }
    }

    /// The worker stops running tasks: a run still in progress ends now.
    pub(crate) fn stopped(&mut self, histograms: &TaskHistograms) {
        self.ended(histograms);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn values_land_in_the_bucket_whose_bound_is_the_first_at_or_above_them() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(1_000), 0, "a bound belongs to its own bucket (le)");
        assert_eq!(bucket_of(1_001), 1);
        assert_eq!(bucket_of(2_000), 1);
        assert_eq!(bucket_of(2_001), 2);
        assert_eq!(bucket_of(4_000), 2);
        assert_eq!(bucket_of(4_001), 3);
        assert_eq!(bucket_of(8_388_608_000), BOUNDS - 1, "the last finite bound");
        assert_eq!(bucket_of(8_388_608_001), BOUNDS, "above it: +Inf");
        assert_eq!(bucket_of(u64::MAX), BOUNDS);
        // Every value sits between the bucket's lower and upper bounds.
        for ns in [0, 1, 999, 1_000, 1_001, 65_535_999, 65_536_000, 65_536_001, 1 << 40, u64::MAX] {
            let i = bucket_of(ns);
            if let Some(upper) = Histogram::upper_bound_ns(i) {
                assert!(ns <= upper, "{ns} above bucket {i}'s bound {upper}");
            }
            if i > 0 {
                let lower = Histogram::upper_bound_ns(i - 1).unwrap();
                assert!(ns > lower, "{ns} at or below bucket {}'s bound {lower}", i - 1);
            }
        }
    }

    #[test]
    fn cumulative_counts_are_running_sums_ending_at_the_count() {
        let mut h = Histogram::default();
        for ns in [0, 1_000, 1_001, 2_000, 2_001, u64::MAX] {
            h.record(ns);
        }
        assert_eq!(h.buckets[0], 2);
        assert_eq!(h.buckets[1], 2);
        assert_eq!(h.buckets[2], 1);
        assert_eq!(h.buckets[BOUNDS], 1);
        let cumulative = h.cumulative();
        assert_eq!(&cumulative[..4], &[2, 4, 5, 5]);
        assert_eq!(cumulative[BOUNDS - 1], 5);
        assert_eq!(cumulative[BOUNDS], 6);
        assert_eq!(h.count(), 6);
        assert_eq!(h.sum_ns, u64::MAX, "the sum saturates");
    }

    #[test]
    fn quantiles_are_the_bounds_of_the_buckets_holding_them() {
        assert_eq!(Histogram::default().quantile_ns(0.99), None, "nothing recorded");
        let mut h = Histogram::default();
        for _ in 0..98 {
            h.record(700); // bucket 0
        }
        h.record(3_000); // bucket 2
        h.record(20_000_000); // 20 ms: bucket 15 (16.384 ms < 20 ms <= 32.768 ms)
        assert_eq!(h.quantile_ns(0.0), Some(1_000));
        assert_eq!(h.quantile_ns(0.5), Some(1_000));
        assert_eq!(h.quantile_ns(0.98), Some(1_000));
        assert_eq!(h.quantile_ns(0.99), Some(4_000));
        assert_eq!(h.quantile_ns(1.0), Some(32_768_000));
        assert_eq!(h.quantile_ns(7.0), Some(32_768_000), "clamped to 1");
        assert_eq!(h.quantile_ns(-1.0), Some(1_000), "clamped to 0");
        assert_eq!(h.quantile_ns(f64::NAN), Some(32_768_000), "NaN counts as 1");
        h.record(u64::MAX);
        assert_eq!(h.quantile_ns(1.0), Some(u64::MAX), "above the last bound");
    }

    #[test]
    fn merging_adds_counts_and_sums_and_saturates() {
        let mut a = Histogram::default();
        let mut b = Histogram::default();
        a.record(500);
        b.record(500);
        b.record(5_000);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.buckets[0], 2);
        assert_eq!(a.buckets[3], 1);
        assert_eq!(a.sum_ns, 6_000);
        let mut full = Histogram::default();
        full.buckets[0] = u64::MAX;
        full.sum_ns = u64::MAX;
        a.merge(&full);
        assert_eq!(a.buckets[0], u64::MAX);
        assert_eq!(a.sum_ns, u64::MAX);
        assert_eq!(a.count(), u64::MAX, "the count saturates too");
    }

    #[test]
    fn the_atomic_histogram_reads_back_what_both_writers_recorded() {
        let atomic = AtomicHistogram::new();
        let mut plain = Histogram::default();
        for ns in [0, 999, 1_001, 70_000, 9_000_000_000] {
            atomic.record_owned(ns);
            atomic.record_shared(ns);
            plain.record(ns);
            plain.record(ns);
        }
        let mut out = Histogram::default();
        atomic.add_to(&mut out);
        assert_eq!(out, plain);
        atomic.add_to(&mut out);
        assert_eq!(out.count(), 2 * plain.count(), "add_to adds to what is there");
    }

    /// Counts only (the values are clock readings): every task started is counted once in
    /// each histogram, however its run ends.
    #[test]
    fn the_task_clock_counts_each_task_once_in_each_histogram() {
        let h = TaskHistograms::default();
        let counts = |h: &TaskHistograms| {
            let (mut wait, mut run) = (Histogram::default(), Histogram::default());
            h.add_to(&mut wait, &mut run);
            (wait.count(), run.count())
        };
        let mut clock = TaskClock::new(true);
        // Three tasks back to back: each run ends at the next pop.
        for _ in 0..3 {
            let popped = clock.popped(&h);
            assert!(popped.is_some());
            clock.started(&h, popped, 1);
        }
        assert_eq!(counts(&h), (3, 2), "the third task's run is still in progress");
        // The queue looked empty: the run ends at once.
        clock.ended(&h);
        assert_eq!(counts(&h), (3, 3));
        // A task popped but cancelled before it ran (no `started`): counted in neither.
        let _ = clock.popped(&h);
        assert_eq!(counts(&h), (3, 3));
        // A task whose run ends when the worker stops.
        let popped = clock.popped(&h);
        clock.started(&h, popped, 0);
        clock.stopped(&h);
        clock.stopped(&h);
        assert_eq!(counts(&h), (4, 4), "stopping twice records once");
        // Off: nothing recorded, no reading.
        let mut off = TaskClock::new(false);
        let popped = off.popped(&h);
        assert_eq!(popped, None);
        off.started(&h, popped, 0);
        off.ended(&h);
        off.stopped(&h);
        assert!(!off.is_on());
        assert_eq!(counts(&h), (4, 4));
    }

    proptest! {
        #[test]
        fn the_count_is_the_number_recorded_and_cumulative_never_falls(
            values in proptest::collection::vec(any::<u64>(), 0..300),
            small in proptest::collection::vec(0u64..50_000_000, 0..300),
        ) {
            let mut h = Histogram::default();
            for &ns in values.iter().chain(small.iter()) {
                h.record(ns);
            }
            prop_assert_eq!(h.count(), (values.len() + small.len()) as u64);
            let cumulative = h.cumulative();
            prop_assert!(cumulative.windows(2).all(|pair| pair[0] <= pair[1]));
            prop_assert_eq!(cumulative[BOUNDS], h.count());
            if let Some(p99) = h.quantile_ns(0.99) {
                prop_assert!(h.quantile_ns(0.5).unwrap() <= p99, "quantiles never fall with q");
            }
        }
    }
}

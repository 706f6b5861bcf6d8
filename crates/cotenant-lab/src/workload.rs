//! The lab's workload (issue 4, seed 000 §4): CPU-bound items of a calibrated service time,
//! offered open-loop at a target rate, each with its intended arrival, start and end times, and
//! the latency histograms that follow from them.
//!
//! Open loop without coordinated omission: item `i`'s latency is measured from its *intended*
//! arrival time (from the schedule), not from when the generator got round to submitting it, so
//! a stalled generator or a full queue shows up as latency instead of hiding it.
//!
//! Pure parts (the schedule, the repetitions of a calibrated chunk, the summary) are unit
//! tested; the timing parts (`calibrate`, `run`) are exercised by the lab's smoke tests.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cotenant_sim::rng::SplitMix64;
use hdrhistogram::Histogram;
use serde::Serialize;

/// Naive Fibonacci: the seed's CPU-bound "fib" work item.
pub fn fib(n: u32) -> u64 {
    if n < 2 {
        u64::from(n)
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

/// The fib argument of one chunk of work: a few tens of microseconds on current CPUs, short
/// enough that an item is many chunks and its service time can be tuned finely.
pub const CHUNK_FIB: u32 = 20;
/// The unit of work between two clock reads of an exact-CPU item
/// ([`Calibration::exact_cpu`]): about a hundredth of a chunk's time, so an item overshoots
/// by a few µs at most.
pub const EXACT_UNIT_FIB: u32 = 10;

/// How many chunks of `chunk_ns` make an item of `target_ns` (at least 1).
pub fn chunks_for(chunk_ns: f64, target_ns: f64) -> u32 {
    if chunk_ns.is_nan() || chunk_ns <= 0.0 || !target_ns.is_finite() {
        return 1;
    }
    ((target_ns / chunk_ns).round().clamp(1.0, f64::from(u32::MAX))) as u32
}

/// A calibrated item: `chunks` × fib(`CHUNK_FIB`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Calibration {
    /// Chunks per item.
    pub chunks: u32,
    /// Measured nanoseconds of one chunk (median of the calibration runs).
    pub chunk_ns: f64,
    /// The service time asked for.
    pub target_ns: u64,
    /// Run chunks until the thread's CPU clock has advanced `target_ns` instead of a fixed
    /// number of them ([`Calibration::exact_cpu`]).
    pub exact_cpu: bool,
}

impl Calibration {
    /// Items of `target` of CPU time each, read on the thread's CPU clock, whatever the
    /// calibration would say: for offering a load in CPU time, which a calibrated item misses
    /// by the calibration's error (over 10 % between processes for 20 ms items here). An item
    /// runs small units of fib(`EXACT_UNIT_FIB`) between clock reads, so it overshoots by less
    /// than one unit and a clock read (a few µs) and never falls short. Refused where the
    /// clock cannot be read.
    pub fn exact_cpu(target: Duration) -> anyhow::Result<Calibration> {
        anyhow::ensure!(
            cotenant::internal::sampler::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).is_some(),
            "--exact-cpu: this thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) cannot be read"
        );
        Ok(Calibration { chunks: 0, chunk_ns: 0.0, target_ns: target.as_nanos() as u64, exact_cpu: true })
    }

    /// Runs one item's work.
    pub fn work(&self) -> u64 {
        if self.exact_cpu {
            let clock = || cotenant::internal::sampler::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
            let mut acc = 0u64;
            // A clock that stops reading ends the item rather than spinning for ever.
            let Some(start) = clock() else { return acc };
            while let Some(now) = clock() {
                if now.saturating_sub(start) >= self.target_ns {
                    break;
                }
                acc = acc.wrapping_add(fib(black_box(EXACT_UNIT_FIB)));
            }
            return acc;
        }
        (0..self.chunks).fold(0u64, |acc, _| acc.wrapping_add(fib(black_box(CHUNK_FIB))))
    }
}

/// The calling thread's CPU time (ns), 0 if unreadable.
pub fn thread_cpu_ns() -> u64 {
    cotenant::internal::sampler::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

impl Calibration {
    /// Items of `chunks` chunks, sized by a calibration made elsewhere (the lab's, once per
    /// experiment); `chunk_ns` is then what the chunks of a `target` item would take.
    pub fn of_chunks(chunks: u32, target: Duration) -> Calibration {
        let chunks = chunks.max(1);
        Calibration {
            chunks,
            chunk_ns: target.as_nanos() as f64 / f64::from(chunks),
            target_ns: target.as_nanos() as u64,
            exact_cpu: false,
        }
    }
}

/// How many calibrations [`calibrate_fastest`] takes the fastest of.
pub const CALIBRATIONS: usize = 7;

/// The chunks of a `target` item at this host's full speed: the largest count of
/// [`CALIBRATIONS`] calibrations, 50 ms apart. Work costs up to 1.5x more CPU time in some
/// phases on this repository's VM (a calibration measured 30.7 µs per chunk against 19.2 µs a
/// second earlier, items then ran at 3.9 ms of CPU instead of 5), and a slow phase can outlast
/// one calibration; slowness only ever adds time, so the fastest is the host's own speed.
/// Items sized once per experiment make every process and every run do the same work, so that
/// throughputs compare.
pub fn calibrate_fastest(target: Duration) -> u32 {
    (0..CALIBRATIONS)
        .map(|i| {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            calibrate(target).chunks
        })
        .max()
        .unwrap_or(1)
}

/// How long [`calibrate`] works before it measures: long enough for a CPU that idled to reach
/// its working clock speed (a calibration after 20 chunks of warm-up, about 0.5 ms, measured
/// chunks 1.5x slower than the items later ran here when the lab started on an idle host).
const CALIBRATION_WARM_UP: Duration = Duration::from_millis(100);
/// Chunks per calibration sample: timed through [`Calibration::work`] itself, so the sample
/// runs the items' own loop.
const SAMPLE_CHUNKS: u32 = 8;

/// Measures one chunk (median of 31 samples of [`SAMPLE_CHUNKS`], after a warm-up of
/// [`CALIBRATION_WARM_UP`]) and sizes items to `target`. Samples are read on the thread's CPU
/// clock where it can be read (wall time otherwise), so a preemption does not count as work.
pub fn calibrate(target: Duration) -> Calibration {
    let sample = Calibration { chunks: SAMPLE_CHUNKS, chunk_ns: 0.0, target_ns: 0, exact_cpu: false };
    let warm_up = Instant::now();
    while warm_up.elapsed() < CALIBRATION_WARM_UP {
        black_box(sample.work());
    }
    let cpu_clock = cotenant::internal::sampler::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).is_some();
    let mut times: Vec<f64> = (0..31)
        .map(|_| {
            let (cpu_start, start) = (thread_cpu_ns(), Instant::now());
            black_box(sample.work());
            let ns = if cpu_clock {
                thread_cpu_ns().saturating_sub(cpu_start) as f64
            } else {
                start.elapsed().as_nanos() as f64
            };
            ns / f64::from(SAMPLE_CHUNKS)
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let chunk_ns = times[times.len() / 2].max(1.0);
    let target_ns = target.as_nanos() as f64;
    Calibration {
        chunks: chunks_for(chunk_ns, target_ns),
        chunk_ns,
        target_ns: target.as_nanos() as u64,
        exact_cpu: false,
    }
}

/// How arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Evenly spaced.
    Uniform,
    /// Exponentially distributed gaps (a Poisson process), from a seeded generator.
    Poisson,
    /// Idle, then a burst (as in the friendly-pool paper): cycles of [`BURST_OFF`] without arrivals and
    /// [`BURST_ON`] of Poisson arrivals at the rate that gives the same average.
    Bursty,
}

/// The quiet part of a bursty cycle.
pub const BURST_OFF: Duration = Duration::from_millis(400);
/// The busy part of a bursty cycle.
pub const BURST_ON: Duration = Duration::from_millis(100);

/// Whether `t` (from the start) falls in a burst of a bursty schedule.
#[cfg(test)]
fn in_burst(t: Duration) -> bool {
    let cycle = (BURST_OFF + BURST_ON).as_nanos();
    t.as_nanos() % cycle >= BURST_OFF.as_nanos()
}

/// Intended arrival offsets from the start for `rate` items per second over `duration`.
/// Deterministic for a given seed.
pub fn schedule(arrivals: Arrivals, rate: f64, duration: Duration, seed: u64) -> Vec<Duration> {
    if rate.is_nan() || rate <= 0.0 || !rate.is_finite() {
        return Vec::new();
    }
    if arrivals == Arrivals::Bursty {
        // Poisson arrivals on the "burst time" axis, each burst placed after its quiet part.
        let (off, on) = (BURST_OFF.as_secs_f64(), BURST_ON.as_secs_f64());
        let cycles = duration.as_secs_f64() / (off + on);
        let burst_time = Duration::from_secs_f64(cycles * on);
        return schedule(Arrivals::Poisson, rate * (off + on) / on, burst_time, seed)
            .into_iter()
            .map(|t| {
                let t = t.as_secs_f64();
                let cycle = (t / on).floor();
                Duration::from_secs_f64(cycle * (off + on) + off + (t - cycle * on))
            })
            .filter(|&t| t < duration)
            .collect();
    }
    let end = duration.as_secs_f64();
    let mut out = Vec::new();
    let mut t = 0.0;
    let mut rng = SplitMix64::new(seed);
    loop {
        let gap = match arrivals {
            Arrivals::Uniform => 1.0 / rate,
            // Inverse transform: -ln(U)/rate with U in (0, 1].
            Arrivals::Poisson | Arrivals::Bursty => -(1.0 - rng.next_f64()).ln() / rate,
        };
        if out.is_empty() && arrivals == Arrivals::Uniform {
            // The first item arrives at 0.
        } else {
            t += gap;
        }
        if t >= end {
            return out;
        }
        out.push(Duration::from_secs_f64(t));
    }
}

/// One item's times, in nanoseconds from the run's start; `started == 0` means never started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ItemTimes {
    /// When it should have arrived (from the schedule).
    pub intended: u64,
    /// When a worker started it.
    pub started: u64,
    /// When it finished.
    pub ended: u64,
}

/// Percentiles of one latency, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Percentiles {
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
}

fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    Percentiles {
        p50_us: us(h.value_at_quantile(0.50)),
        p90_us: us(h.value_at_quantile(0.90)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        max_us: us(h.max()),
    }
}

/// What one run of the workload measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Items offered (scheduled).
    pub offered: usize,
    /// Items that finished.
    pub completed: usize,
    /// Completed items per second, over the scheduled duration or until the last item ended,
    /// whichever is longer.
    pub throughput_per_s: f64,
    /// Service time: end − start (the work itself, including preemptions during it).
    pub service: Percentiles,
    /// Queue time: start − intended arrival.
    pub queue: Percentiles,
    /// End to end: end − intended arrival.
    pub end_to_end: Percentiles,
}

/// Summarises `items` run over a schedule of length `duration`.
pub fn summarize(items: &[ItemTimes], duration: Duration) -> Summary {
    let new = || Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds");
    let (mut service, mut queue, mut e2e) = (new(), new(), new());
    let mut completed = 0;
    let mut last_end = 0u64;
    for item in items.iter().filter(|i| i.started != 0 && i.ended >= i.started) {
        completed += 1;
        last_end = last_end.max(item.ended);
        // Saturate into the histogram's range rather than fail on a pathological value.
        let record = |h: &mut Histogram<u64>, v: u64| h.saturating_record(v.max(1));
        record(&mut service, item.ended - item.started);
        record(&mut queue, item.started.saturating_sub(item.intended));
        record(&mut e2e, item.ended.saturating_sub(item.intended));
    }
    let span = (duration.as_nanos() as u64).max(last_end).max(1) as f64 / 1e9;
    Summary {
        offered: items.len(),
        completed,
        throughput_per_s: completed as f64 / span,
        service: percentiles(&service),
        queue: percentiles(&queue),
        end_to_end: percentiles(&e2e),
    }
}

/// Where the items of a run record their start and end: `[started, ended]` per item, ns from
/// the run's start, 0 until recorded.
pub type ItemSlots = Arc<Vec<[AtomicU64; 2]>>;

/// Slots for `count` items, none recorded.
pub fn item_slots(count: usize) -> ItemSlots {
    Arc::new((0..count).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect())
}

/// One item: its work, timed from the run's `start`, with its start and end recorded in
/// `slot`. The one body every item runs, on a pool's worker (thread items) or inside the poll
/// of a future (`async_items.rs`), so that both measure the same service time. With `lock`,
/// the work runs inside that mutex (seed 000 Figure 3's contention).
pub fn run_item(calibration: &Calibration, lock: Option<&Mutex<()>>, start: Instant, slot: &[AtomicU64; 2]) {
    let began = ns_since(start).max(1);
    match lock {
        // A poisoned lock only means another item panicked; the work is still valid.
        Some(lock) => {
            let _held = lock.lock().unwrap_or_else(|p| p.into_inner());
            black_box(calibration.work());
        }
        None => {
            black_box(calibration.work());
        }
    }
    slot[0].store(began, Ordering::Relaxed);
    slot[1].store(ns_since(start).max(began), Ordering::Relaxed);
}

/// The times of the items of `schedule` as `slots` recorded them (read after every item was
/// joined, which orders their stores before these loads).
pub fn item_times(schedule: &[Duration], slots: &[[AtomicU64; 2]]) -> Vec<ItemTimes> {
    schedule
        .iter()
        .zip(slots)
        .map(|(at, slot)| ItemTimes {
            intended: at.as_nanos() as u64,
            started: slot[0].load(Ordering::Relaxed),
            ended: slot[1].load(Ordering::Relaxed),
        })
        .collect()
}

/// Runs `schedule` against `pool`: a generator (the calling thread) submits item `i` at its
/// intended time; workers record start and end. Returns when every item has finished. With
/// `lock`, each item's work runs inside that mutex (seed 000 Figure 3's contention).
pub fn run(
    pool: &cotenant::Pool,
    calibration: Calibration,
    schedule: &[Duration],
    lock: Option<&Arc<Mutex<()>>>,
) -> Vec<ItemTimes> {
    let slots = item_slots(schedule.len());
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(schedule.len());
    for (i, &at) in schedule.iter().enumerate() {
        sleep_until(start + at);
        let slots = slots.clone();
        let lock = lock.cloned();
        tasks.push(pool.spawn(move || run_item(&calibration, lock.as_deref(), start, &slots[i])));
    }
    for task in tasks {
        // A panic or a rejection leaves the slot at 0: counted as not completed.
        let _ = task.join();
    }
    item_times(schedule, &slots)
}

/// Keeps `pool` saturated for `duration`: `outstanding` items in flight at all times (closed
/// loop), each resubmitted as one finishes. Returns the items that finished in time (their
/// `intended` is when they were submitted). For experiments about CPU shares, not latency.
pub fn run_saturated(
    pool: &cotenant::Pool,
    calibration: Calibration,
    duration: Duration,
    outstanding: usize,
) -> Vec<ItemTimes> {
    let start = Instant::now();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<ItemTimes>();
    let submit = |done_tx: std::sync::mpsc::Sender<ItemTimes>| {
        let intended = ns_since(start);
        pool.execute(move || {
            let began = ns_since(start).max(1);
            black_box(calibration.work());
            let _ = done_tx.send(ItemTimes { intended, started: began, ended: ns_since(start).max(began) });
        });
    };
    for _ in 0..outstanding.max(1) {
        submit(done_tx.clone());
    }
    let mut items = Vec::new();
    let end = start + duration;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match done_rx.recv_timeout(left) {
            Ok(item) => {
                items.push(item);
                submit(done_tx.clone());
            }
            Err(_) => break,
        }
    }
    items
}

fn ns_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Sleeps until `deadline`; the last 200 µs are spent yielding, because a sleep overshoots by
/// tens of microseconds and the schedule's precision is the latency's floor.
pub fn sleep_until(deadline: Instant) {
    const SPIN: Duration = Duration::from_micros(200);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fib_is_fib() {
        assert_eq!((0..10).map(fib).collect::<Vec<_>>(), [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]);
    }

    #[test]
    fn items_are_sized_in_whole_chunks() {
        assert_eq!(chunks_for(50_000.0, 5_000_000.0), 100);
        assert_eq!(chunks_for(50_000.0, 10_000.0), 1, "at least one chunk");
        assert_eq!(chunks_for(0.0, 5_000_000.0), 1, "a zero measurement cannot divide");
        assert_eq!(chunks_for(f64::NAN, 5_000_000.0), 1);
    }

    #[test]
    fn a_uniform_schedule_is_evenly_spaced_from_zero() {
        let s = schedule(Arrivals::Uniform, 100.0, Duration::from_millis(50), 1);
        assert_eq!(s, (0..5).map(|i| Duration::from_millis(10 * i)).collect::<Vec<_>>());
    }

    #[test]
    fn a_poisson_schedule_has_the_rate_and_is_reproducible() {
        let a = schedule(Arrivals::Poisson, 1000.0, Duration::from_secs(10), 42);
        let b = schedule(Arrivals::Poisson, 1000.0, Duration::from_secs(10), 42);
        assert_eq!(a, b);
        // 10 000 expected; a Poisson count has a standard deviation of 100.
        assert!((9_500..=10_500).contains(&a.len()), "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert_ne!(a, schedule(Arrivals::Poisson, 1000.0, Duration::from_secs(10), 43));
    }

    #[test]
    fn a_bursty_schedule_arrives_only_in_bursts_at_the_average_rate() {
        let s = schedule(Arrivals::Bursty, 200.0, Duration::from_secs(20), 7);
        assert!(s.iter().all(|&t| in_burst(t)), "an arrival outside a burst");
        assert!(s.windows(2).all(|w| w[0] <= w[1]));
        // 4000 expected on average (200/s for 20 s).
        assert!((3_700..=4_300).contains(&s.len()), "{}", s.len());
        assert!(!in_burst(Duration::from_millis(399)) && in_burst(Duration::from_millis(400)));
        assert!(in_burst(Duration::from_millis(499)) && !in_burst(Duration::from_millis(500)));
    }

    #[test]
    fn a_bad_rate_schedules_nothing() {
        assert!(schedule(Arrivals::Uniform, 0.0, Duration::from_secs(1), 0).is_empty());
        assert!(schedule(Arrivals::Poisson, f64::NAN, Duration::from_secs(1), 0).is_empty());
    }

    #[test]
    fn the_summary_measures_from_the_intended_arrival() {
        // Two items: the second started 3 ms late (queueing) and both took 5 ms of service.
        let items = [
            ItemTimes { intended: 0, started: 1_000, ended: 5_001_000 },
            ItemTimes { intended: 10_000_000, started: 13_000_000, ended: 18_000_000 },
            ItemTimes { intended: 20_000_000, started: 0, ended: 0 }, // never ran
        ];
        let s = summarize(&items, Duration::from_millis(30));
        assert_eq!((s.offered, s.completed), (3, 2));
        assert!((s.service.max_us - 5000.0).abs() < 10.0, "{:?}", s.service);
        assert!((s.queue.max_us - 3000.0).abs() < 5.0, "{:?}", s.queue);
        assert!((s.end_to_end.max_us - 8000.0).abs() < 10.0, "{:?}", s.end_to_end);
        assert!((s.throughput_per_s - 2.0 / 0.03).abs() < 1e-6);
    }

    #[test]
    fn every_scheduled_item_runs_and_is_timed() {
        let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(2)).build().unwrap();
        let calibration = Calibration { chunks: 1, chunk_ns: 1.0, target_ns: 1, exact_cpu: false };
        let plan = schedule(Arrivals::Uniform, 2000.0, Duration::from_millis(20), 0);
        let items = run(&pool, calibration, &plan, None);
        assert_eq!(items.len(), plan.len());
        assert!(items.iter().all(|i| i.started >= 1 && i.ended >= i.started));
    }
}

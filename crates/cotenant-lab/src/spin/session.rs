//! One run of the model: the session threads (begin, snapshot, update, commit), how a snapshot
//! waits, the boost window, and the OS calls a session makes (affinity, nice).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cotenant::wait::{wait_until, Signal};

use super::model::{Boost, Latencies, RunResult, RunSpec, Strategy};
use super::BOOSTED_NICE;

/// A slot nobody is using.
const IDLE: u64 = 0;
/// A slot whose session is between taking an ID and publishing it.
const ALLOCATING: u64 = u64::MAX;
/// Iterations of the update's CPU work (about 40 µs on the test VM: 1.5 ns per iteration).
const UPDATE_WORK: u32 = 26_500;
/// Iterations of work between "allocating" and "published" (about 10 µs). WiredTiger's window
/// is far shorter; its length sets how often a preemption lands inside it, i.e. how often the
/// race happens, not what a waiter does when it does. The seed ran 6 million operations per
/// experiment to see its peaks; a 10 µs window makes them frequent enough to measure in a few
/// seconds (with 1 µs, a 3 s window saw 1 to 3 stalls, and the P99.9 depended on their count).
const ALLOCATE_WORK: u32 = 6_500;

/// A slot on its own cache lines, so that sessions writing their slots do not slow each
/// other down through false sharing (WiredTiger pads its per-session state too).
#[repr(align(128))]
struct Padded(AtomicU64);

impl std::ops::Deref for Padded {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

struct Shared {
    slots: Vec<Padded>,
    next_id: AtomicU64,
    signal: Signal,
    stop: AtomicBool,
    boosted_now: AtomicBool,
    boost_refused: std::sync::Mutex<Option<String>>,
}

/// Runs one configuration: S session threads in this process, for `duration`.
pub fn run_once(spec: &RunSpec) -> anyhow::Result<RunResult> {
    anyhow::ensure!(spec.sessions >= 1, "spin: at least one session");
    anyhow::ensure!(!spec.cpus.is_empty(), "spin: no CPU to run on");
    let shared = Arc::new(Shared {
        slots: (0..spec.sessions).map(|_| Padded(AtomicU64::new(IDLE))).collect(),
        next_id: AtomicU64::new(1),
        signal: Signal::new(),
        stop: AtomicBool::new(false),
        boosted_now: AtomicBool::new(spec.boost == Boost::Always),
        boost_refused: std::sync::Mutex::new(None),
    });
    let start = Instant::now() + Duration::from_millis(50);
    let window = match spec.boost {
        Boost::Window { start: from, end } => Some((start + from, start + end)),
        Boost::Always => Some((start, start + spec.duration)),
        Boost::Never => None,
    };
    // Stops the sessions on every way out of this function, errors included.
    struct StopOnDrop(Arc<Shared>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.stop.store(true, Ordering::SeqCst);
            self.0.signal.notify_all();
        }
    }
    let _stop_on_drop = StopOnDrop(shared.clone());
    let mut threads = Vec::with_capacity(spec.sessions);
    for index in 0..spec.sessions {
        let shared = shared.clone();
        let me = SessionSpec {
            index,
            cpus: spec.cpus.clone(),
            strategy: spec.strategy,
            boosted: index < spec.boosted,
            round_trip: spec.round_trip,
            start,
            window,
        };
        threads.push(
            std::thread::Builder::new()
                .name(format!("session-{index}"))
                .spawn(move || session(me, &shared))
                .context("spawning a session thread")?,
        );
    }
    // The boost window is switched by this (unrestricted) thread; sessions apply it themselves.
    sleep_until(start);
    let cpu_at_start = cotenant::internal::sampler::process_cpu_ns().ok();
    if let Boost::Window { start: from, end } = spec.boost {
        sleep_until(start + from);
        shared.boosted_now.store(true, Ordering::SeqCst);
        sleep_until(start + end);
        shared.boosted_now.store(false, Ordering::SeqCst);
    }
    sleep_until(start + spec.duration);
    shared.stop.store(true, Ordering::SeqCst);
    shared.signal.notify_all();
    let elapsed = start.elapsed();
    let cpus_used = match (cpu_at_start, cotenant::internal::sampler::process_cpu_ns().ok()) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 / elapsed.as_nanos().max(1) as f64,
        _ => f64::NAN,
    };
    let mut result =
        RunResult { latencies: Latencies::new(), elapsed: spec.duration, cpus_used, boost_refused: None };
    for thread in threads {
        let session = thread.join().map_err(|_| anyhow::anyhow!("a session thread panicked"))??;
        result.latencies.add(&session)?;
    }
    // Transactions were counted up to the stop; the last ones finished just after it.
    result.elapsed = elapsed.min(spec.duration + Duration::from_millis(500)).max(spec.duration);
    result.boost_refused = shared.boost_refused.lock().map(|r| r.clone()).unwrap_or(None);
    Ok(result)
}

fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

/// What one session thread is told.
struct SessionSpec {
    index: usize,
    cpus: Vec<usize>,
    strategy: Strategy,
    boosted: bool,
    round_trip: Duration,
    start: Instant,
    window: Option<(Instant, Instant)>,
}

fn session(spec: SessionSpec, shared: &Shared) -> anyhow::Result<Latencies> {
    let SessionSpec { index, cpus, strategy, boosted, round_trip, start, window } = spec;
    set_affinity(&cpus).with_context(|| format!("pinning session {index} to CPUs {cpus:?}"))?;
    let original_nice = current_nice();
    let mut nice_now = original_nice;
    let backoff = strategy.backoff();
    let mut out = Latencies::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ index as u64;
    sleep_until(start);
    while !shared.stop.load(Ordering::Relaxed) {
        if boosted {
            let want = if shared.boosted_now.load(Ordering::Relaxed) { BOOSTED_NICE } else { original_nice };
            if want != nice_now {
                if let Err(e) = set_nice(want) {
                    *shared.boost_refused.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(format!("setpriority({want}): {e}"));
                }
                nice_now = want;
            }
        }
        let sent = Instant::now();
        if !round_trip.is_zero() {
            std::thread::sleep(round_trip);
        }
        let began = Instant::now();
        // Begin: allocate an ID.
        let slot = &shared.slots[index];
        slot.store(ALLOCATING, Ordering::SeqCst);
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        seed = work(seed, ALLOCATE_WORK);
        slot.store(id, Ordering::SeqCst);
        if strategy == Strategy::Park {
            shared.signal.notify_all();
        }
        // Snapshot: every other session's ID, waiting for those still allocating.
        let mut oldest = id;
        for (other, other_slot) in shared.slots.iter().enumerate() {
            if other == index {
                continue;
            }
            let mut seen = other_slot.load(Ordering::SeqCst);
            if seen == ALLOCATING {
                let ready = || {
                    seen = other_slot.load(Ordering::SeqCst);
                    seen != ALLOCATING || shared.stop.load(Ordering::Relaxed)
                };
                if strategy == Strategy::Park {
                    shared.signal.wait_until(ready, &backoff);
                } else {
                    wait_until(ready, &backoff);
                }
            }
            if seen != IDLE && seen != ALLOCATING {
                oldest = oldest.min(seen);
            }
        }
        // Update: a little CPU work that depends on the snapshot.
        seed = work(seed ^ oldest, UPDATE_WORK);
        // Commit.
        slot.store(IDLE, Ordering::SeqCst);
        if shared.stop.load(Ordering::SeqCst) {
            // Ran past the end (its wait may have been cut short by the stop): not counted.
            break;
        }
        let committed = Instant::now();
        let latency = nanos(committed - sent);
        out.server.saturating_record(nanos(committed - began));
        let second = began.saturating_duration_since(start).as_secs() as usize;
        out.second(second).saturating_record(latency);
        out.total.saturating_record(latency);
        if window.is_some_and(|(from, to)| began >= from && began < to) {
            out.in_window.saturating_record(latency);
        }
        out.transactions += 1;
    }
    if nice_now != original_nice {
        let _ = set_nice(original_nice);
    }
    Ok(out)
}

/// `iterations` rounds of xorshift: CPU work the compiler cannot remove.
fn work(mut x: u64, iterations: u32) -> u64 {
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().clamp(1, 100_000_000_000) as u64
}

fn current_nice() -> i32 {
    // SAFETY: getpriority only reads its arguments; PRIO_PROCESS with 0 is this thread on Linux.
    // (It can return -1 legitimately; errno is not needed: -1 is a valid nice value to restore.)
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

fn set_nice(nice: i32) -> std::io::Result<()> {
    // SAFETY: setpriority only reads its arguments; PRIO_PROCESS with 0 is this thread on Linux.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn set_affinity(cpus: &[usize]) -> std::io::Result<()> {
    // A cpu_set_t holds 1024 CPUs: a CPU beyond is an error here, never silently dropped (the
    // experiment would run on other CPUs than it says).
    if let Some(&cpu) = cpus.iter().find(|&&cpu| cpu >= libc::CPU_SETSIZE as usize) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("CPU {cpu}: the lab pins to CPUs below {} only", libc::CPU_SETSIZE),
        ));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it for the indices below
    // CPU_SETSIZE (checked above); sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPUs this process may run on (online ∩ cpuset ∩ affinity, from `cotenant cpus`).
pub fn allowed_cpus() -> anyhow::Result<Vec<usize>> {
    let budget = cotenant::cpus::detect().context("finding the CPUs this process may use")?;
    Ok(budget.allowed_set().iter().map(|cpu| cpu as usize).collect())
}

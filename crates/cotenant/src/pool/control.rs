//! The process-wide control thread: one [`HostSampler`] serves every dynamic pool of the
//! process; each period it reads the host counters once, adds each due pool's own worker
//! counters, asks the pool's policy ([`crate::policy`], pure) and applies the target.
//!
//! 1. A pool with a dynamic policy registers at build; the first registration starts the
//!    thread (`cotenant-ctl`), and the thread exits when the last pool has unregistered.
//! 2. Each tick, under the registry lock, the due pools are sampled. A pool unregisters under
//!    the same lock before its workers exit, so the controller never reads the CPU clock of a
//!    thread that is gone.
//! 3. When sampling fails, the pool falls back to all its workers (what a plain pool does),
//!    counts a sample error and the first failure in the process is logged as a warning.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::Shared;
use crate::policy::{fallback_target, Policy, PolicyState, Sample};
use crate::sampler::{clock_ns, read_at_zero, HostCounters, HostDelta, HostSampler};

/// The control thread's name (visible in `top -H`, and to the benchmark that measures its cost).
pub const THREAD_NAME: &str = "cotenant-ctl";

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { entries: Vec::new(), running: false, next_id: 0 });
static WARNED: AtomicBool = AtomicBool::new(false);

struct Registry {
    entries: Vec<Entry>,
    running: bool,
    next_id: u64,
}

struct Entry {
    id: u64,
    pool: Weak<Shared>,
    policy: Policy,
    state: PolicyState,
    period: Duration,
    threads: u32,
    next_due: Instant,
    last: Option<Snapshot>,
    /// `/proc/self/task/<tid>/schedstat` per worker; `None` once any is unavailable.
    schedstat: Option<Vec<(PathBuf, File)>>,
    buf: Vec<u8>,
}

/// Cumulative counters of one pool at one reading.
struct Snapshot {
    host: HostCounters,
    workers_busy_ns: u64,
    workers_cpu_ns: Option<u64>,
    workers_runq_wait_ns: Option<u64>,
}

/// A pool's registration; [`unregister`](Registration::unregister) before its workers exit.
pub(crate) struct Registration {
    id: u64,
}

impl Registration {
    /// Removes the pool; once this returns the controller no longer touches it. Idempotent.
    pub(crate) fn unregister(&self) {
        lock_registry().entries.retain(|entry| entry.id != self.id);
    }
}

fn lock_registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Step 1: registers `pool` and starts the control thread if it is not running.
pub(crate) fn register(pool: &Arc<Shared>, policy: Policy, period: Duration, threads: usize) -> Registration {
    let mut registry = lock_registry();
    let id = registry.next_id;
    registry.next_id += 1;
    let threads = u32::try_from(threads).unwrap_or(u32::MAX);
    registry.entries.push(Entry {
        id,
        pool: Arc::downgrade(pool),
        policy,
        state: PolicyState::new(threads),
        period,
        threads,
        next_due: Instant::now() + period,
        last: None,
        schedstat: Some(Vec::new()),
        buf: Vec::new(),
    });
    if !registry.running {
        match std::thread::Builder::new().name(THREAD_NAME.into()).spawn(control_loop) {
            Ok(_) => registry.running = true,
            Err(error) => {
                warn_once(&format!("cannot start the control thread ({error}); pools keep all workers"))
            }
        }
    }
    Registration { id }
}

fn warn_once(message: &str) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!("cotenant: {message}");
    }
}

fn control_loop() {
    let mut sampler: Option<HostSampler> = None;
    loop {
        let wake_at = {
            let mut registry = lock_registry();
            match registry.entries.iter().map(|entry| entry.next_due).min() {
                Some(at) => at,
                None => {
                    registry.running = false;
                    return;
                }
            }
        };
        let now = Instant::now();
        if wake_at > now {
            std::thread::sleep(wake_at - now);
        }
        let mut registry = lock_registry();
        let now = Instant::now();
        if !registry.entries.iter().any(|entry| entry.next_due <= now) {
            continue;
        }
        // Step 2: one host reading for every due pool.
        let host = match sampler.as_mut() {
            Some(sampler) => sampler.read(),
            None => HostSampler::system().and_then(|mut s| {
                let reading = s.read();
                sampler = Some(s);
                reading
            }),
        };
        registry.entries.retain_mut(|entry| {
            if entry.next_due > now {
                return true;
            }
            let Some(pool) = entry.pool.upgrade() else { return false };
            entry.next_due += entry.period;
            if entry.next_due <= now {
                entry.next_due = now + entry.period; // we fell behind (suspended?): do not catch up
            }
            tick(entry, &pool, &host);
            true
        });
    }
}

fn tick(entry: &mut Entry, pool: &Shared, host: &Result<HostCounters, crate::sampler::SampleError>) {
    let host = match host {
        Ok(host) => host.clone(),
        Err(error) => {
            // Step 3: fall back to every worker.
            pool.sample_errors.fetch_add(1, Ordering::Relaxed);
            warn_once(&format!("sampling failed ({error}); pools fall back to all their workers"));
            let target = fallback_target(entry.threads, None);
            entry.state = PolicyState::new(target);
            entry.last = None;
            pool.sleep.set_target(target as usize, || pool.queued());
            return;
        }
    };
    let now = super::worker::nanos_since(pool.epoch);
    let workers_busy_ns = pool.workers.iter().map(|w| w.busy_ns(now)).sum();
    let workers_cpu_ns = pool
        .workers
        .iter()
        .map(|w| match w.cpu_clock.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            clock => clock_ns((clock - 1) as u32 as libc::clockid_t),
        })
        .sum::<Option<u64>>();
    let workers_runq_wait_ns = read_runq_wait(entry, pool);
    let snapshot = Snapshot { host, workers_busy_ns, workers_cpu_ns, workers_runq_wait_ns };
    let Some(last) = entry.last.replace(snapshot) else { return };
    let current = entry.last.as_ref().expect("just stored");
    let Some(delta) = HostDelta::between(&last.host, &current.host) else { return };
    let sample = Sample {
        elapsed_ns: delta.elapsed_ns,
        threads: entry.threads,
        cpus: delta.cpus,
        quota_cpus: delta.quota_cpus,
        self_ns: delta.self_ns,
        busy_ns: delta.busy_ns,
        idle_ns: delta.idle_ns,
        procs_running: delta.procs_running,
        throttled_ns: delta.throttled_ns,
        workers_busy_ns: current.workers_busy_ns.saturating_sub(last.workers_busy_ns),
        workers_cpu_ns: current.workers_cpu_ns.zip(last.workers_cpu_ns).map(|(b, a)| b.saturating_sub(a)),
        workers_runq_wait_ns: current
            .workers_runq_wait_ns
            .zip(last.workers_runq_wait_ns)
            .map(|(b, a)| b.saturating_sub(a)),
        queued: u32::try_from(pool.queued()).unwrap_or(u32::MAX),
    };
    let before = entry.state.target;
    let decision = entry.policy.decide(&sample, &mut entry.state);
    pool.decisions.fetch_add(1, Ordering::Relaxed);
    if decision.target != before {
        tracing::debug!(
            target = decision.target,
            before,
            reason = decision.reason.as_str(),
            own_cpus = sample.own_cpus(),
            neighbour_cpus = sample.neighbour_cpus(),
            idle_cpus = sample.idle_cpus(),
            waiting = sample.waiting_workers(),
            "cotenant pool target changed"
        );
    }
    if decision.target as usize != pool.sleep.target() {
        pool.sleep.set_target(decision.target as usize, || pool.queued());
    }
}

/// Sum of the workers' run-queue wait from schedstat, or `None` when the kernel does not
/// report it (no `CONFIG_SCHED_INFO`) or a worker has not started yet.
fn read_runq_wait(entry: &mut Entry, pool: &Shared) -> Option<u64> {
    let files = entry.schedstat.as_mut()?;
    if files.is_empty() {
        for worker in pool.workers.iter() {
            let tid = worker.tid.load(std::sync::atomic::Ordering::Acquire);
            if tid == 0 {
                return None; // not started yet: try next period
            }
            let path = PathBuf::from(format!("/proc/self/task/{tid}/schedstat"));
            match File::open(&path) {
                Ok(file) => files.push((path, file)),
                Err(_) => {
                    entry.schedstat = None;
                    return None;
                }
            }
        }
    }
    let mut total = 0u64;
    for (path, file) in files.iter() {
        let text = read_at_zero(file, path, &mut entry.buf).ok()?;
        let stat = crate::procfs::schedstat::parse_task(text).ok()?;
        total = total.saturating_add(stat.run_delay_ns);
    }
    Some(total)
}

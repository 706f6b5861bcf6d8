//! The process-wide control thread: one [`HostSampler`] serves every dynamic pool of the
//! process; each period it reads the host counters once, adds each due pool's own worker
//! counters, asks the pool's policy ([`crate::policy`], pure) and applies the target.
//!
//! 1. A pool with a dynamic policy, or with host tokens, registers at build; the first
//!    registration starts the thread (`cotenant-ctl`), and the thread exits when the last pool
//!    has unregistered. It clears `running` under the same lock in which it found the registry
//!    empty, so a registration is never left without a thread. A fixed pool with tokens gets
//!    only the tokens' upkeep (blocked holders' tokens taken back, a default set engaged or
//!    not), and so does a pool while `shutdown` drains its queue (`Registration::drain`).
//! 2. Each tick, under the registry lock, the due pools are sampled. A pool marks itself
//!    draining under the same lock before its workers may exit, and is then no longer sampled
//!    (no schedstat read); its upkeep still reads the workers' CPU clocks, which each worker
//!    clears before it exits: a reading that races with an exit finds the clock gone (an
//!    error, nothing taken back) or the hold already cleared. It unregisters once its workers
//!    have exited. A plain pool that coasts (it runs every worker, alone, nobody waits for its
//!    host tokens, and its policy saw nothing to change; or it has been idle for a nap's
//!    periods) is sampled every two, then four periods (`policy::coast`), on a grid shared
//!    by the coasting pools so that they wake the thread together: waking up costs a busy host
//!    more than the work of a tick. The first period that is not calm brings the pool back to
//!    every period, and a submit to a pool that coasts idle asks for a sample at once
//!    (`work_arrived`).
//! 3. When every pool has been idle (nothing queued, no worker busy) for `NAP_AFTER_PERIODS`,
//!    the thread naps until a submit to one of them wakes it: an idle process should not pay a
//!    timer wake-up per clock tick (about 60 µs of CPU each on the VM of RESULTS.md). A submit
//!    checks one flag, after the fence it issues anyway. Every `NAP_MAX` the nap checks the
//!    pools without a tick (a backstop against a missed wake-up); it ends if one has work, is
//!    elastic or is gone.
//! 4. When sampling fails, the pool falls back to all its workers (what a plain pool does),
//!    counts a sample error and the first failure in the process is logged as a warning.
//! 5. At most every `status_record::PUBLISH_EVERY`, at a tick it makes anyway (never waking a
//!    napping thread for it), the thread writes the process's status record for `cotenant top`
//!    and the doctor, and removes it with the last pool (`control/status.rs`).
//!
//! `control/tick.rs` holds a pool's period (sample, decide, apply; plain and elastic pools),
//! `control/schedstat.rs` the reading of the workers' run-queue waits, `control/status.rs` the
//! status record.

mod schedstat;
mod status;
#[cfg(test)]
mod tests;
mod tick;

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use self::status::Publisher;
use self::tick::{tick, tick_elastic, tokens_upkeep};
use super::elastic::Totals;
use super::Shared;
// Idle periods of every pool before the control thread naps (shared with the simulator).
use crate::policy::coast::NAP_AFTER_PERIODS;
use crate::policy::elastic_size::ElasticState;
use crate::policy::{Policy, PolicyState};
use crate::sampler::{HostCounters, HostSampler};

/// The control thread's name (visible in `top -H`, and to the benchmark that measures its cost).
pub const THREAD_NAME: &str = "cotenant-ctl";

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { entries: Vec::new(), running: false, next_id: 0 });
static WARNED: AtomicBool = AtomicBool::new(false);

/// How often a napping thread looks at its pools without a tick (a backstop against a missed
/// wake-up: a pool with work, gone, added or elastic ends the nap).
const NAP_MAX: Duration = Duration::from_secs(1);
/// Set while the control thread naps (or is about to); submits wake it.
static NAPPING: AtomicBool = AtomicBool::new(false);
static NAP: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());

/// Called by a dynamic pool's submit after its `SeqCst` fence: wakes a napping controller.
pub(crate) fn nudge() {
    if NAPPING.load(Ordering::SeqCst) {
        let _guard = NAP.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        NAPPING.store(false, Ordering::SeqCst);
        NAP.1.notify_one();
    }
}

/// When a pool just ticked (due at `due`, ticked at `now`) is due again: `stride` periods
/// later. A pool sampled every period keeps its own phase (`due + period`). A coasting pool
/// (stride above one) is due at the first multiple of its interval since `epoch`, the control
/// thread's start, at least one period after `now`: pools that coast with the same period and stride are then sampled at the
/// same instants and wake the thread once, not once each (two pools out of phase woke it 50
/// times a second instead of 25). Either way a thread that fell behind (suspended?) does not
/// catch up: the next due time is after `now`.
fn next_due(due: Instant, now: Instant, period: Duration, stride: u32, epoch: Instant) -> Instant {
    let interval = period.saturating_mul(stride.max(1));
    if stride <= 1 || interval.is_zero() {
        let next = due + interval;
        return if next <= now { now + interval } else { next };
    }
    // At least one period ahead: a grid point just after `now` would make a sample of a
    // fraction of a period, in which a few microseconds of run-queue wait or one clock tick of
    // `/proc/stat` read as contention.
    let earliest = now.saturating_duration_since(epoch).as_nanos() + period.as_nanos();
    let step = interval.as_nanos();
    let grid = earliest.div_ceil(step) * step;
    epoch + Duration::from_nanos(u64::try_from(grid).unwrap_or(u64::MAX))
}

/// A submit to `pool` while it coasts idle: it is sampled now rather than up to `MAX_STRIDE`
/// periods later, so that a target lowered before it went idle grows back in a period, as
/// when it did not coast. One flag swap per submit while it coasts idle; nothing otherwise.
pub(crate) fn work_arrived(pool: &Shared) {
    if pool.idle_coasting.swap(false, Ordering::Relaxed) {
        WORK_ARRIVED.store(true, Ordering::SeqCst);
        let mut registered = REGISTERED.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *registered = true;
        REGISTERED.1.notify_all();
    }
}

/// Set by `work_arrived`: the loop brings the idle-coasting pools that have work forward.
static WORK_ARRIVED: AtomicBool = AtomicBool::new(false);

/// Step 3: naps while no registered pool has work. Called without the registry lock.
fn nap(pools: &[Weak<Shared>]) {
    let guard = NAP.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    NAPPING.store(true, Ordering::SeqCst);
    // Pairs with the fence of `Shared::push`: either the submitter sees NAPPING, or we see
    // its task here.
    std::sync::atomic::fence(Ordering::SeqCst);
    // A pool registered or gone since the list was taken (its nudge may have come before
    // NAPPING was set) ends the nap at once, as does work.
    let busy = lock_registry().entries.len() != pools.len()
        || pools.iter().filter_map(Weak::upgrade).any(|pool| pool.has_work());
    if !busy {
        let mut deadline = Instant::now() + NAP_MAX;
        let mut guard = guard;
        while NAPPING.load(Ordering::SeqCst) {
            let now = Instant::now();
            if now >= deadline {
                // The backstop: a task that a missed wake-up left queued ends the nap here, and
                // so does a pool that is gone (the thread may have to exit) or an elastic one
                // (its ticks retire idle threads). Otherwise the process naps on without a tick:
                // ten ticks after every `NAP_MAX` cost an idle process 0.13-0.18 % of a CPU.
                let mut live = 0;
                let nap_on = pools.iter().filter_map(Weak::upgrade).all(|pool| {
                    live += 1;
                    !pool.is_elastic() && !pool.has_work()
                });
                if !nap_on || live != pools.len() || lock_registry().entries.len() != pools.len() {
                    break;
                }
                deadline = now + NAP_MAX;
                continue;
            }
            guard =
                NAP.1.wait_timeout(guard, deadline - now).unwrap_or_else(|poisoned| poisoned.into_inner()).0;
        }
    }
    NAPPING.store(false, Ordering::SeqCst);
}

struct Registry {
    entries: Vec<Entry>,
    running: bool,
    next_id: u64,
}

struct Entry {
    id: u64,
    pool: Weak<Shared>,
    policy: Policy,
    /// For a pool whose policy was changed by `Policy::sharing_host_tokens`: the policy as
    /// given, used in a period in which a task ran without a host token.
    unshared_policy: Option<Policy>,
    /// The pool's count of tasks run without a host token at the last tick.
    ran_without_token: u64,
    state: PolicyState,
    period: Duration,
    threads: u32,
    next_due: Instant,
    last: Option<Snapshot>,
    /// The cap of the last good sample: what the fallback keeps to when sampling fails.
    last_cap: Option<u32>,
    /// Consecutive periods without work (nothing queued, no busy worker).
    idle_periods: u32,
    /// Periods until the pool's next sample (`policy::coast`: more than one while it coasts).
    stride: u32,
    /// `/proc/self/task/<tid>/schedstat` per worker (empty: to be opened once every worker
    /// has started); `None` after one could not be opened or read, until they are opened
    /// again at `schedstat_retry_at`.
    schedstat: Option<Vec<(PathBuf, File)>>,
    /// When to open the workers' schedstat files again after a failure (`None`: at once).
    schedstat_retry_at: Option<Instant>,
    /// The last reading of them failed: a failure now continues that stretch and is not
    /// counted again (`Metrics::degradations`).
    schedstat_failing: bool,
    /// Per worker, the largest wait while holding host tokens read so far: a reading taken
    /// as a hold ends can be lower than the last (`WorkerStats::token_wait_ns`).
    token_wait_seen: Vec<u64>,
    /// Per worker, the host-token hold and thread CPU time read at the last tick
    /// (`PoolTokens::take_back_blocked`).
    token_holds_seen: Vec<(u64, u64)>,
    /// The pool is draining in `shutdown`: only the tokens' upkeep, no sampling.
    draining: bool,
    buf: Vec<u8>,
    /// An elastic pool's sizer state and its last task totals.
    elastic: Option<(ElasticState, Option<(Totals, Instant)>)>,
}

impl Entry {
    /// A newly registered pool's entry: due one period from now, its workers' schedstat files
    /// to be opened once they have all started, nothing read yet.
    fn new(
        id: u64,
        pool: &Arc<Shared>,
        policy: Policy,
        unshared_policy: Option<Policy>,
        period: Duration,
        threads: usize,
    ) -> Entry {
        let threads = u32::try_from(threads).unwrap_or(u32::MAX);
        Entry {
            id,
            pool: Arc::downgrade(pool),
            policy,
            unshared_policy,
            ran_without_token: 0,
            state: PolicyState::new(threads),
            period,
            threads,
            next_due: Instant::now() + period,
            last: None,
            last_cap: None,
            idle_periods: 0,
            stride: 1,
            schedstat: Some(Vec::new()),
            schedstat_retry_at: None,
            schedstat_failing: false,
            token_wait_seen: Vec::new(),
            token_holds_seen: Vec::new(),
            draining: false,
            buf: Vec::new(),
            elastic: pool.elastic.as_ref().map(|elastic| (ElasticState::new(elastic.config.min), None)),
        }
    }

    /// A pool the controller only keeps the tokens of: draining in `shutdown`, or fixed (an
    /// elastic pool with a fixed CPU policy still sizes its threads).
    fn upkeep_only(&self) -> bool {
        self.draining || (self.policy.fixed_target().is_some() && self.elastic.is_none())
    }
}

/// Cumulative counters of one pool at one reading.
struct Snapshot {
    host: HostCounters,
    workers_busy_ns: u64,
    workers_cpu_ns: Option<u64>,
    workers_runq_wait_ns: Option<u64>,
    /// The part of it spent holding host tokens (`WorkerStats::token_wait_ns`).
    workers_token_wait_ns: Option<u64>,
}

/// A pool's registration; [`unregister`](Registration::unregister) before its workers exit.
pub(crate) struct Registration {
    id: u64,
}

impl Registration {
    /// The pool is about to drain its queue and let its workers exit: from now on the
    /// controller only takes back blocked holders' tokens (reading a worker's clock, which the
    /// worker clears before it exits), and reads no worker's schedstat.
    pub(crate) fn drain(&self) {
        if let Some(entry) = lock_registry().entries.iter_mut().find(|entry| entry.id == self.id) {
            entry.draining = true;
            // The tokens' upkeep of a draining pool runs every period, coasting or not before,
            // from the next period on.
            entry.stride = 1;
            entry.next_due = entry.next_due.min(Instant::now() + entry.period);
        }
    }

    /// Removes the pool; once this returns the controller no longer touches it. Idempotent.
    pub(crate) fn unregister(&self) {
        lock_registry().entries.retain(|entry| entry.id != self.id);
        // A napping thread looks at the registry again (it exits with the last pool, and
        // removes the process's status record); called without the registry lock.
        nudge();
    }
}

fn lock_registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Step 1: registers `pool` and starts the control thread if it is not running.
/// `unshared_policy`: see [`Entry::unshared_policy`].
pub(crate) fn register(
    pool: &Arc<Shared>,
    policy: Policy,
    unshared_policy: Option<Policy>,
    period: Duration,
    threads: usize,
) -> Registration {
    let mut registry = lock_registry();
    let id = registry.next_id;
    registry.next_id += 1;
    registry.entries.push(Entry::new(id, pool, policy, unshared_policy, period, threads));
    drop(registry);
    {
        let mut registered = REGISTERED.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *registered = true;
        REGISTERED.1.notify_all();
    }
    nudge(); // a napping controller too

    let mut registry = lock_registry();
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

/// Environment variable naming a file to which the controller appends every sample and
/// decision as a JSON line (for recording `testdata/policy/` vectors and for diagnosis).
pub const RECORD_ENV: &str = "COTENANT_RECORD_SAMPLES";

/// Resets `running` if the control loop dies (a panic), so that the next registration starts
/// a new thread. A loop that ends normally clears it itself, under the lock in which it saw the
/// registry empty, and disarms this: clearing it later would race with a registration that
/// came in between (it would see `running` and start no thread) or with the new thread.
struct RunningGuard {
    armed: bool,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        if self.armed {
            lock_registry().running = false;
        }
    }
}

/// Wakes the control thread early when a pool registers (its period may be shorter than the
/// current sleep).
static REGISTERED: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// How long to wait before building the sampler again after it failed to build.
pub(crate) const SAMPLER_RETRY: Duration = Duration::from_secs(1);
/// Consecutive failed readings after which the sampler is rebuilt (the process may have moved
/// to another cgroup, which a sampler's opened files do not follow).
pub(crate) const SAMPLER_REBUILD_AFTER: u32 = 100;

fn control_loop() {
    // The origin of the grid on which coasting pools are sampled (`next_due`).
    let epoch = Instant::now();
    let mut running = RunningGuard { armed: true };
    let mut sampler: Option<HostSampler> = None;
    let mut sampler_error: Option<(crate::sampler::SampleError, Instant)> = None;
    let mut failed_reads = 0u32;
    let mut publisher = Publisher::new();
    let mut recorder = std::env::var_os(RECORD_ENV).and_then(|path| {
        match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            Ok(file) => Some(std::io::BufWriter::new(file)),
            Err(error) => {
                warn_once(&format!("cannot open {} for {RECORD_ENV}: {error}", path.to_string_lossy()));
                None
            }
        }
    });
    loop {
        let wake_at = {
            let mut registry = lock_registry();
            match registry.entries.iter().map(|entry| entry.next_due).min() {
                Some(at) => at,
                None => {
                    // Step 5: the record goes with the last pool, before a new thread can
                    // write its own.
                    publisher.remove();
                    // Under the lock that saw the registry empty: a `register` after this
                    // starts a new thread; one before it is in `entries`.
                    registry.running = false;
                    running.armed = false;
                    return;
                }
            }
        };
        {
            let mut registered = REGISTERED.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            loop {
                let now = Instant::now();
                if *registered || wake_at <= now {
                    break;
                }
                registered = REGISTERED
                    .1
                    .wait_timeout(registered, wake_at - now)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
            *registered = false;
        }
        let mut registry = lock_registry();
        let now = Instant::now();
        if WORK_ARRIVED.swap(false, Ordering::SeqCst) {
            for entry in registry.entries.iter_mut().filter(|entry| entry.stride > 1) {
                let busy = entry.pool.upgrade().is_some_and(|pool| pool.has_work());
                if busy {
                    (entry.stride, entry.next_due) = (1, now);
                }
            }
        }
        if !registry.entries.iter().any(|entry| entry.next_due <= now) {
            continue;
        }
        // Step 2: one host reading for every due pool.
        let host = match (sampler.as_mut(), &sampler_error) {
            (Some(s), _) => s.read(),
            (None, Some((error, at))) if now.duration_since(*at) < SAMPLER_RETRY => Err(error.clone()),
            (None, _) => HostSampler::system().and_then(|mut s| {
                let reading = s.read();
                sampler = Some(s);
                reading
            }),
        };
        match &host {
            Ok(_) => (failed_reads, sampler_error) = (0, None),
            Err(error) => {
                failed_reads = failed_reads.saturating_add(1);
                if sampler.is_none()
                    && sampler_error.as_ref().is_none_or(|(_, at)| now.duration_since(*at) >= SAMPLER_RETRY)
                {
                    sampler_error = Some((error.clone(), now));
                }
                if failed_reads >= SAMPLER_REBUILD_AFTER {
                    (sampler, failed_reads) = (None, 0);
                }
            }
        }
        registry.entries.retain_mut(|entry| {
            if entry.next_due > now {
                return true;
            }
            let Some(pool) = entry.pool.upgrade() else { return false };
            // A bug in a tick must not leave every pool without a controller.
            let ticked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if entry.upkeep_only() {
                    tokens_upkeep(entry, &pool);
                } else if entry.elastic.is_some() {
                    tick_elastic(entry, &pool, &host, recorder.as_mut())
                } else {
                    tick(entry, &pool, &host, recorder.as_mut())
                }
            }));
            if ticked.is_err() {
                entry.stride = 1;
                warn_once(&format!(
                    "a controller tick of pool {:?} panicked; it keeps its target this period",
                    &*pool.name
                ));
            }
            // Due again after `stride` periods: one, or more while the pool coasts
            // (`policy::coast`), as the tick just decided.
            entry.next_due = next_due(entry.next_due, now, entry.period, entry.stride, epoch);
            pool.health_tick();
            true
        });
        // Step 5: the pools' counters read under the lock, the file written after it.
        let napping = !registry.entries.is_empty()
            && registry.entries.iter().all(|entry| entry.idle_periods >= NAP_AFTER_PERIODS);
        // A process about to nap writes its record now, whenever the last was: what it leaves
        // for `top` until the next submit says its pools are idle.
        let record = (publisher.due(now) || napping).then(|| Publisher::collect(&registry.entries));
        let pools: Vec<Weak<Shared>> = if napping {
            registry.entries.iter().map(|entry| entry.pool.clone()).collect()
        } else {
            Vec::new()
        };
        drop(registry);
        if let Some(record) = record {
            publisher.publish(record, now);
        }
        if napping {
            nap(&pools);
            let mut registry = lock_registry();
            let now = Instant::now();
            for entry in registry.entries.iter_mut() {
                // Start afresh: the nap is not a period to decide from.
                entry.last = None;
                if let Some((_, last_totals)) = entry.elastic.as_mut() {
                    *last_totals = None;
                }
                entry.idle_periods = 0;
                entry.stride = 1;
                entry.next_due = now;
            }
        }
    }
}

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
//!    have exited.
//! 3. When every pool has been idle (nothing queued, no worker busy) for `NAP_AFTER_PERIODS`,
//!    the thread naps until a submit to one of them wakes it (or `NAP_MAX` passes): an idle
//!    process should not pay a timer wake-up per clock tick (about 60 µs of CPU each on the
//!    VM of RESULTS.md). A submit checks one flag, after the fence it issues anyway.
//! 4. When sampling fails, the pool falls back to all its workers (what a plain pool does),
//!    counts a sample error and the first failure in the process is logged as a warning.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use super::elastic::{spawn_missing, Totals};
use super::Shared;
use crate::metrics::Degradation;
use crate::policy::elastic::{ElasticSample, ElasticState};
use crate::policy::{fallback_target, Policy, PolicyState};
use crate::sampler::{clock_ns, read_at_zero, HostCounters, HostDelta, HostSampler};

/// The control thread's name (visible in `top -H`, and to the benchmark that measures its cost).
pub const THREAD_NAME: &str = "cotenant-ctl";

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { entries: Vec::new(), running: false, next_id: 0 });
static WARNED: AtomicBool = AtomicBool::new(false);

/// Idle periods of every pool before the control thread naps.
const NAP_AFTER_PERIODS: u32 = 10;
/// The longest nap; bounds how stale a target can get if a wake-up were ever missed.
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

/// Step 3: naps while no registered pool has work. Called without the registry lock.
fn nap(pools: &[Weak<Shared>]) {
    let guard = NAP.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    NAPPING.store(true, Ordering::SeqCst);
    // Pairs with the fence of `Shared::push`: either the submitter sees NAPPING, or we see
    // its task here.
    std::sync::atomic::fence(Ordering::SeqCst);
    let busy = pools.iter().filter_map(Weak::upgrade).any(|pool| pool.queued() > 0 || pool.running() > 0);
    if !busy {
        let deadline = Instant::now() + NAP_MAX;
        let mut guard = guard;
        while NAPPING.load(Ordering::SeqCst) {
            let now = Instant::now();
            if now >= deadline {
                break;
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
        }
    }

    /// Removes the pool; once this returns the controller no longer touches it. Idempotent.
    pub(crate) fn unregister(&self) {
        lock_registry().entries.retain(|entry| entry.id != self.id);
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
    let threads = u32::try_from(threads).unwrap_or(u32::MAX);
    registry.entries.push(Entry {
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
        schedstat: Some(Vec::new()),
        schedstat_retry_at: None,
        schedstat_failing: false,
        token_wait_seen: Vec::new(),
        token_holds_seen: Vec::new(),
        draining: false,
        buf: Vec::new(),
        elastic: pool.elastic.as_ref().map(|elastic| (ElasticState::new(elastic.config.min), None)),
    });
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
    let mut running = RunningGuard { armed: true };
    let mut sampler: Option<HostSampler> = None;
    let mut sampler_error: Option<(crate::sampler::SampleError, Instant)> = None;
    let mut failed_reads = 0u32;
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
            entry.next_due += entry.period;
            if entry.next_due <= now {
                entry.next_due = now + entry.period; // we fell behind (suspended?): do not catch up
            }
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
                warn_once("a controller tick panicked; that pool keeps its target this period");
            }
            pool.health_tick();
            true
        });
        if registry.entries.iter().all(|entry| entry.idle_periods >= NAP_AFTER_PERIODS) {
            let pools: Vec<Weak<Shared>> = registry.entries.iter().map(|entry| entry.pool.clone()).collect();
            drop(registry);
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
                entry.next_due = now;
            }
        }
    }
}

fn tick(
    entry: &mut Entry,
    pool: &Shared,
    host: &Result<HostCounters, crate::sampler::SampleError>,
    recorder: Option<&mut std::io::BufWriter<std::fs::File>>,
) {
    // A task that ran without a host token (the set was removed, or none came within the
    // wait) competed for CPUs like a pool without tokens, and so may the neighbours' tasks:
    // for this period the policy sizes the pool against its neighbours again. Read at every
    // tick, decided or not, so that a task of a skipped period is not blamed on a later one.
    let tokens = pool.host_tokens.as_ref();
    // First, a token a blocked task holds goes back to the cooperating pools (counted as a
    // task without one, so it also makes this a period of the plain policy); a default set
    // engages or disengages.
    tokens_upkeep(entry, pool);
    // Not engaged (alone on a default set): the neighbours are sized against as without tokens.
    let engaged = tokens.is_some_and(|t| t.is_engaged());
    let ran_without_token = tokens.map_or(0, |t| t.ran_without.load(Ordering::Relaxed));
    let tokens_failed =
        ran_without_token != std::mem::replace(&mut entry.ran_without_token, ran_without_token);
    let host = match host {
        Ok(host) => host.clone(),
        Err(error) => {
            // Step 3: fall back to every worker.
            pool.sample_errors.fetch_add(1, Ordering::Relaxed);
            warn_once(&format!("sampling failed ({error}); pools fall back to all their workers"));
            let target = fallback_target(entry.threads, entry.last_cap);
            pool.borrow.set(0, 0);
            entry.state = PolicyState::new(target);
            entry.last = None;
            let had_work = pool.queued() > 0 || pool.running() > 0;
            entry.idle_periods = if had_work { 0 } else { entry.idle_periods.saturating_add(1) };
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
    let waits = read_runq_waits(entry, pool);
    let workers_runq_wait_ns = waits.as_ref().map(|w| w.all);
    let workers_token_wait_ns = waits.and_then(|w| w.holding);
    let had_work = entry.last.as_ref().is_none_or(|last| workers_busy_ns != last.workers_busy_ns)
        || pool.queued() > 0
        || pool.running() > 0;
    entry.idle_periods = if had_work { 0 } else { entry.idle_periods.saturating_add(1) };
    let snapshot =
        Snapshot { host, workers_busy_ns, workers_cpu_ns, workers_runq_wait_ns, workers_token_wait_ns };
    let Some(last) = entry.last.replace(snapshot) else { return };
    let current = entry.last.as_ref().expect("just stored");
    let Some(delta) = HostDelta::between(&last.host, &current.host) else { return };
    let grew = |now: Option<u64>, before: Option<u64>| now.zip(before).map(|(b, a)| b.saturating_sub(a));
    // The tokens are trusted this period (`Policy::sharing_host_tokens` applies): only the
    // holders' wait is contention; the rest is workers queued for a token (`host_tokens.rs`).
    let sharing_tokens = entry.unshared_policy.is_some() && !tokens_failed && engaged;
    let runq_wait = if sharing_tokens {
        grew(current.workers_token_wait_ns, last.workers_token_wait_ns)
    } else {
        grew(current.workers_runq_wait_ns, last.workers_runq_wait_ns)
    };
    let sample = delta.sample(
        entry.threads,
        current.workers_busy_ns.saturating_sub(last.workers_busy_ns),
        grew(current.workers_cpu_ns, last.workers_cpu_ns),
        runq_wait,
        u32::try_from(pool.queued()).unwrap_or(u32::MAX),
    );
    let policy = match &entry.unshared_policy {
        Some(unshared) if !sharing_tokens => {
            if let Some(tokens) = tokens.filter(|_| engaged) {
                tokens.fallback_periods.fetch_add(1, Ordering::Relaxed);
            }
            unshared
        }
        _ => &entry.policy,
    };
    let fields = (entry.id, policy, &mut entry.state, &mut entry.last_cap);
    let (before, decision) = decide(fields, pool, &sample, recorder);
    pool.borrow
        .set(policy.borrow_limit(&sample, &entry.state, delta.online_cpus) as usize, delta.online_cpus);
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

/// The host tokens' part of a tick: blocked holders' tokens taken back, a default set engaged
/// or not. All a fixed pool with tokens, or a draining pool, gets.
fn tokens_upkeep(entry: &mut Entry, pool: &Shared) {
    let Some(tokens) = pool.host_tokens.as_ref() else { return };
    tokens.take_back_blocked(pool.workers.iter().map(|w| &**w), &mut entry.token_holds_seen);
    tokens.refresh_engaged();
    if entry.upkeep_only() {
        let had_work = pool.queued() > 0 || pool.running() > 0;
        entry.idle_periods = if had_work { 0 } else { entry.idle_periods.saturating_add(1) };
    }
}

/// Asks the pool's policy for the next target from `sample`, counts the decision, and appends
/// it to the `COTENANT_RECORD_SAMPLES` file if one is open. Returns the target before it and
/// the decision.
/// (Takes the entry's fields rather than the entry: an elastic tick holds its sizer meanwhile.)
fn decide(
    (id, policy, state, last_cap): (u64, &Policy, &mut PolicyState, &mut Option<u32>),
    pool: &Shared,
    sample: &crate::policy::Sample,
    recorder: Option<&mut std::io::BufWriter<std::fs::File>>,
) -> (u32, crate::policy::Decision) {
    *last_cap = Some(sample.cap());
    let before = state.target;
    let decision = policy.decide(sample, state);
    pool.decisions.fetch_add(1, Ordering::Relaxed);
    if let Some(out) = recorder {
        use std::io::Write as _;
        let _ = writeln!(
            out,
            "{{\"pid\": {}, \"pool\": {}, \"policy\": \"{}\", \"before\": {before}, \"sample\": {}, \"target\": {}, \"reason\": \"{}\"}}",
            std::process::id(),
            id,
            policy,
            sample.to_json(),
            decision.target,
            decision.reason.as_str()
        );
        let _ = out.flush();
    }
    (before, decision)
}

/// The neighbours' CPU use (in CPUs) below which an elastic pool treats its tasks' run-queue
/// wait as its own (see `tick_elastic`); the adaptive policy's own "alone" threshold.
const ELASTIC_NEIGHBOUR_FLOOR: f64 = 0.5;

/// An elastic pool's period (`pool/elastic.rs`, `policy/elastic.rs`): the CPU policy decides
/// the CPUs the pool may use from a sample in which the pool's tasks stand in for workers
/// (their CPU time plus run-queue wait is the demand, the part of that wait the neighbours'
/// CPU use explains the contention);
/// then the sizer turns CPUs into threads and the pool starts or retires threads.
fn tick_elastic(
    entry: &mut Entry,
    pool: &Arc<Shared>,
    host: &Result<HostCounters, crate::sampler::SampleError>,
    recorder: Option<&mut std::io::BufWriter<std::fs::File>>,
) {
    let Some(elastic) = pool.elastic.as_ref() else { return };
    let Some((sizer, last_totals)) = entry.elastic.as_mut() else { return };
    let totals = Totals::read(pool, elastic);
    let at = Instant::now();
    let queued = u32::try_from(pool.queued()).unwrap_or(u32::MAX);
    let previous = last_totals.replace((totals, at));
    // An elastic pool above its minimum keeps the controller awake until it has shrunk.
    let had_work = previous.is_none_or(|(before, _)| before != totals)
        || queued > 0
        || pool.running() > 0
        || sizer.size > elastic.config.min;
    entry.idle_periods = if had_work { 0 } else { entry.idle_periods.saturating_add(1) };

    // 1. The CPUs the pool may use.
    let mut idle_ns = 0;
    let cpus = match host {
        Err(error) => {
            pool.sample_errors.fetch_add(1, Ordering::Relaxed);
            warn_once(&format!("sampling failed ({error}); pools fall back to all their workers"));
            entry.last = None;
            fallback_target(entry.threads, entry.last_cap)
        }
        Ok(host) => {
            // The tasks' counters are kept in `entry.elastic`; only the host part is used here.
            let snapshot = Snapshot {
                host: host.clone(),
                workers_busy_ns: 0,
                workers_cpu_ns: None,
                workers_runq_wait_ns: None,
                workers_token_wait_ns: None,
            };
            match entry
                .last
                .replace(snapshot)
                .and_then(|last| HostDelta::between(&last.host, host).map(|delta| (delta, last)))
            {
                None => entry.state.target,
                Some((delta, _)) => {
                    idle_ns = delta.idle_ns;
                    let (cpu, runq) = previous.map_or((0, 0), |(before, _)| {
                        totals.all_tasks_since(&before, sizer.compute_ns.unwrap_or(0.0), sizer.runq_ns)
                    });
                    // An elastic pool runs more threads than CPUs on purpose, so its tasks
                    // wait for CPUs behind each other: that wait is not contention to give way
                    // to. What the neighbours take is: their CPU time, when they use at least
                    // half a CPU (below that, the counters' noise), counts as our tasks' wait,
                    // up to the wait measured.
                    let neighbours = delta.busy_ns.saturating_sub(delta.self_ns);
                    let contention = if neighbours as f64 >= ELASTIC_NEIGHBOUR_FLOOR * delta.elapsed_ns as f64
                    {
                        runq.min(neighbours)
                    } else {
                        0
                    };
                    let sample = delta.sample(
                        entry.threads,
                        cpu.saturating_add(runq),
                        Some(cpu),
                        Some(contention),
                        queued,
                    );
                    let fields = (entry.id, &entry.policy, &mut entry.state, &mut entry.last_cap);
                    decide(fields, pool, &sample, recorder).1.target
                }
            }
        }
    };

    // 2. Threads for those CPUs.
    let Some((before_totals, before_at)) = previous else { return };
    let sample = ElasticSample {
        elapsed_ns: u64::try_from(at.duration_since(before_at).as_nanos()).unwrap_or(u64::MAX),
        cpus,
        tasks: totals.tasks.saturating_sub(before_totals.tasks),
        sampled: totals.sampled.saturating_sub(before_totals.sampled),
        wall_ns: totals.wall_ns.saturating_sub(before_totals.wall_ns),
        cpu_ns: totals.cpu_ns.saturating_sub(before_totals.cpu_ns),
        runq_ns: totals.runq_ns.saturating_sub(before_totals.runq_ns),
        arrivals: totals.arrivals.saturating_sub(before_totals.arrivals),
        queued,
        idle_ns,
    };
    let decision = crate::policy::elastic::decide(&elastic.config, &sample, sizer);
    elastic.cpus.store(u64::from(cpus), Ordering::Relaxed);
    elastic.compute_ns.store(sizer.compute_ns.unwrap_or(0.0) as u64, Ordering::Relaxed);
    elastic.wait_ns.store(sizer.wait_ns as u64, Ordering::Relaxed);

    // 3. Apply: raise the target before starting threads (a new thread must see itself
    // below it); after lowering it, wake the sleepers above it so that they retire.
    let size = decision.size as usize;
    let current = pool.sleep.target();
    if size != current {
        tracing::debug!(
            size,
            before = current,
            wanted = decision.wanted,
            reason = decision.reason.as_str(),
            cpus,
            wait_compute = sizer.wait_compute_ratio().unwrap_or(f64::NAN),
            "cotenant elastic pool size changed"
        );
        pool.sleep.set_target(size, || pool.queued());
        if size < current {
            pool.sleep.wake_above_target();
        }
    }
    let _ = spawn_missing(pool, pool.sleep.target());
}

/// The workers' run-queue wait so far (schedstat), summed.
struct RunqWaits {
    all: u64,
    /// The part spent holding host tokens (0 without tokens); `None` when a worker could not
    /// read its own wait.
    holding: Option<u64>,
}

/// How long after a failed reading the workers' schedstat files are opened again.
const SCHEDSTAT_RETRY: Duration = Duration::from_secs(1);

/// The workers' run-queue waits, or `None` when a worker has not started yet or its schedstat
/// cannot be opened or read (no `CONFIG_SCHED_INFO`, say): the files are then closed and
/// opened again after `SCHEDSTAT_RETRY`, and a stretch of failures is counted once in
/// `Metrics::degradations` (the first in the process also logged).
fn read_runq_waits(entry: &mut Entry, pool: &Shared) -> Option<RunqWaits> {
    if entry.schedstat.is_none() {
        if entry.schedstat_retry_at.is_some_and(|at| Instant::now() < at) {
            return None;
        }
        entry.schedstat = Some(Vec::new());
    }
    if entry.schedstat.as_ref().is_some_and(Vec::is_empty) {
        // Open every worker's file or none: a partial list would under-count.
        let mut files = Vec::with_capacity(pool.workers.len());
        for worker in pool.workers.iter() {
            let tid = worker.tid.load(std::sync::atomic::Ordering::Acquire);
            if tid == 0 {
                return None; // not started yet: try next period
            }
            let path = PathBuf::from(format!("/proc/self/task/{tid}/schedstat"));
            match File::open(&path) {
                Ok(file) => files.push((path, file)),
                Err(error) => {
                    schedstat_failed(entry, pool, &format!("cannot open {}: {error}", path.display()));
                    return None;
                }
            }
        }
        entry.schedstat = Some(files);
    }
    let files = entry.schedstat.as_ref()?;
    debug_assert_eq!(files.len(), pool.workers.len(), "one schedstat file per worker, in order");
    entry.token_wait_seen.resize(pool.workers.len(), 0);
    let mut waits = RunqWaits { all: 0, holding: Some(0) };
    let mut failure = None;
    for (((path, file), worker), seen) in
        files.iter().zip(pool.workers.iter()).zip(&mut entry.token_wait_seen)
    {
        let stat = read_at_zero(file, path, &mut entry.buf).map_err(|e| e.to_string()).and_then(|text| {
            crate::procfs::schedstat::parse_task(text).map_err(|e| format!("{}: {e}", path.display()))
        });
        let stat = match stat {
            Ok(stat) => stat,
            Err(why) => {
                failure = Some(why);
                break;
            }
        };
        waits.all = waits.all.saturating_add(stat.run_delay_ns);
        let holding = worker.token_wait_ns(stat.run_delay_ns).map(|now| {
            *seen = (*seen).max(now);
            *seen
        });
        waits.holding = waits.holding.zip(holding).map(|(sum, one)| sum.saturating_add(one));
    }
    if let Some(why) = failure {
        schedstat_failed(entry, pool, &why);
        return None;
    }
    entry.schedstat_failing = false;
    Some(waits)
}

/// The workers' schedstat files failed (`why`): closed, opened again after `SCHEDSTAT_RETRY`;
/// the first failure of a stretch is counted for the pool and, first in the process, logged.
fn schedstat_failed(entry: &mut Entry, pool: &Shared, why: &str) {
    entry.schedstat = None;
    entry.schedstat_retry_at = Some(Instant::now() + SCHEDSTAT_RETRY);
    if !std::mem::replace(&mut entry.schedstat_failing, true) {
        Degradation::WorkerSchedstat.record(&pool.degradations, &why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::SampleError;
    use crate::Pool;

    fn entry_for(pool: &Pool) -> Entry {
        Entry {
            id: u64::MAX,
            pool: Arc::downgrade(&pool.shared),
            policy: Policy::adaptive(),
            unshared_policy: None,
            ran_without_token: 0,
            state: PolicyState::new(1),
            period: Duration::from_millis(10),
            threads: pool.threads() as u32,
            next_due: Instant::now(),
            last: None,
            last_cap: None,
            idle_periods: 0,
            schedstat: None,
            schedstat_retry_at: None,
            schedstat_failing: false,
            token_wait_seen: Vec::new(),
            token_holds_seen: Vec::new(),
            draining: false,
            buf: Vec::new(),
            elastic: None,
        }
    }

    #[test]
    fn a_failed_sample_falls_back_to_every_worker_and_is_counted() {
        let pool = Pool::builder().policy(Policy::fixed(1)).threads(3).build().unwrap();
        assert_eq!(pool.target(), 1);
        let mut entry = entry_for(&pool);
        let failure = Err(SampleError("cannot read /proc/loadavg: gone".into()));
        tick(&mut entry, &pool.shared, &failure, None);
        tick(&mut entry, &pool.shared, &failure, None);
        assert_eq!(pool.target(), 3, "fallback: every worker");
        let metrics = pool.metrics();
        assert_eq!((metrics.sample_errors, metrics.decisions), (2, 0));
        assert!(WARNED.load(Ordering::Relaxed), "the first failure is logged");
        // The pool still works.
        assert_eq!(pool.spawn(|| 5).join().unwrap(), 5);
    }

    /// The samples `tick` records (`COTENANT_RECORD_SAMPLES`) into `file`, in order.
    fn recorded_waits(file: &std::path::Path) -> Vec<Option<u64>> {
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .map(|line| {
                let field = line.split("\"workers_runq_wait_ns\": ").nth(1).expect("the field");
                field.split([',', '}']).next().unwrap().trim().parse().ok()
            })
            .collect()
    }

    #[test]
    fn with_shared_tokens_only_the_holders_wait_is_contention() {
        let mut sampler = HostSampler::system().expect("this Linux host's /proc can be sampled");
        if !std::path::Path::new("/proc/thread-self/schedstat").exists() {
            eprintln!("skipped: a kernel without schedstat (the wait is estimated otherwise)");
            return;
        }
        let name = format!("cotenant-test-control-holders-{}", std::process::id());
        /// Removes the recording however the test ends.
        struct RemoveFile(std::path::PathBuf);
        impl Drop for RemoveFile {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
        let path = std::env::temp_dir().join(format!("{name}.jsonl"));
        let _cleanup = (crate::tokens::RemoveNamed(name.clone()), RemoveFile(path.clone()));
        let set = Arc::new(crate::tokens::HostTokens::open(&name, 2).unwrap());
        // A fixed policy: the process's controller leaves the pool alone (it would count
        // fallback periods of its own); the entry below gets the adaptive policies.
        let pool = Pool::builder().policy(Policy::fixed(2)).host_tokens(set).build().unwrap();
        // The schedstat files are opened once every worker has said who it is.
        let started = Instant::now();
        while pool.shared.workers.iter().any(|w| w.tid.load(std::sync::atomic::Ordering::Acquire) == 0) {
            assert!(started.elapsed() < Duration::from_secs(10), "the workers did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut entry = entry_for(&pool);
        entry.policy = Policy::adaptive().sharing_host_tokens();
        entry.unshared_policy = Some(Policy::adaptive());
        entry.schedstat = Some(Vec::new());
        // create_new (O_EXCL): a file or link planted at the name fails the test, never
        // written through.
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).unwrap()
        };
        let mut recorder = std::io::BufWriter::new(file);
        let mut tick_now = |entry: &mut Entry, recorder: &mut std::io::BufWriter<std::fs::File>| {
            std::thread::sleep(Duration::from_millis(2));
            tick(entry, &pool.shared, &sampler.read(), Some(recorder));
        };
        tick_now(&mut entry, &mut recorder); // baseline (and the workers' schedstat files)
        tick_now(&mut entry, &mut recorder);
        // 3 ms of wait while holding tokens: what the policy sees while the tokens are trusted.
        pool.shared.workers[0].token_wait_total.fetch_add(3_000_000, Ordering::Relaxed);
        tick_now(&mut entry, &mut recorder);
        // A task ran without a token: this period the wait of every worker counts again.
        pool.shared.host_tokens.as_ref().unwrap().ran_without.fetch_add(1, Ordering::Relaxed);
        pool.shared.workers[0].token_wait_total.fetch_add(3_000_000, Ordering::Relaxed);
        tick_now(&mut entry, &mut recorder);
        drop(recorder);
        let waits = recorded_waits(&path);
        assert_eq!(waits.len(), 3, "{waits:?}");
        assert!(waits.iter().all(Option::is_some), "{waits:?}");
        assert_eq!(waits[1], Some(3_000_000), "the holders' wait, and nothing else");
        assert_ne!(waits[2], Some(3_000_000), "the fallback period counts every worker's wait");
        assert_eq!(pool.metrics().token_fallback_periods, 1);
    }

    #[test]
    fn an_unreadable_worker_schedstat_is_counted_once_and_opened_again_later() {
        if !std::path::Path::new("/proc/thread-self/schedstat").exists() {
            eprintln!("skipped: this kernel keeps no per-thread schedstat (CONFIG_SCHED_INFO)");
            return;
        }
        let pool = Pool::builder().policy(Policy::fixed(1)).threads(1).host_tokens_off().build().unwrap();
        let worker = &pool.shared.workers[0];
        let started = Instant::now();
        while worker.tid.load(Ordering::Acquire) == 0 {
            assert!(started.elapsed() < Duration::from_secs(60), "the worker did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        let tid = worker.tid.load(Ordering::Acquire);
        let mut entry = entry_for(&pool);
        // A thread id no thread has (beyond any pid_max): its schedstat cannot be opened.
        worker.tid.store(u64::from(u32::MAX), Ordering::Release);
        assert!(read_runq_waits(&mut entry, &pool.shared).is_none());
        assert_eq!(pool.metrics().degradations, 1, "the failure is counted");
        assert!(Degradation::WorkerSchedstat.logged(), "and logged");
        // Tried again when due, failing still: the same stretch, not counted again.
        entry.schedstat_retry_at = Some(Instant::now());
        assert!(read_runq_waits(&mut entry, &pool.shared).is_none());
        assert_eq!(pool.metrics().degradations, 1, "a stretch of failures counts once");
        // The file can be opened again: read again, not turned off for good.
        worker.tid.store(tid, Ordering::Release);
        entry.schedstat_retry_at = Some(Instant::now());
        assert!(read_runq_waits(&mut entry, &pool.shared).is_some(), "read again after the failures");
        assert!(read_runq_waits(&mut entry, &pool.shared).is_some());
        assert_eq!(pool.metrics().degradations, 1);
    }

    #[test]
    fn the_first_reading_only_sets_the_baseline() {
        let mut sampler = HostSampler::system().expect("this Linux host's /proc can be sampled");
        let pool = Pool::builder().policy(Policy::fixed(2)).threads(2).build().unwrap();
        let mut entry = entry_for(&pool);
        tick(&mut entry, &pool.shared, &sampler.read(), None);
        assert_eq!(pool.metrics().decisions, 0);
        std::thread::sleep(Duration::from_millis(5));
        tick(&mut entry, &pool.shared, &sampler.read(), None);
        assert_eq!(pool.metrics().decisions, 1);
        assert!((1..=2).contains(&pool.target()));
    }
}

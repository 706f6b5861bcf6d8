//! The worker loop and each worker's counters: run tasks while allowed, spin briefly, then sleep.
//!
//! 1. Read the target. A worker whose index is at or above it runs nothing: it finishes the task
//!    it had, then sleeps (step S of `pool/README.md`), costing no CPU until the target rises.
//!    In an elastic pool it exits instead (retires, `elastic.rs`), and tasks are measured.
//! 2. An allowed worker pops a task and runs it; a panic is caught inside the job (the worker
//!    survives) and counted here. A pool sharing host CPU tokens runs it holding one, kept for
//!    the next task only while that follows at once and nobody waits (`host_tokens.rs`).
//! 3. Finding the queue empty, it spins with back-off for a few microseconds (seed 004: bounded
//!    spinning only), then sleeps until a submit or a target change wakes it.
//! 4. A worker at or above the target that a submit woke as a borrower (`borrow.rs`) runs
//!    tasks like an allowed one, but goes back to sleep as soon as the queue is empty or,
//!    checked every `WORKER_CHECK_INTERVAL`, another task waits for a CPU. An allowed worker
//!    that finishes a task with more queued looks for a CPU to borrow (step B).
//! 5. Once the pool is closed it drains the queue (graceful) or drops what it pops (`shutdown_now`)
//!    and exits when the queue is empty and no submit is in flight.

use std::time::Instant;

use super::borrow::WORKER_CHECK_INTERVAL;
use super::builder::ThreadHook;
use super::Shared;
use crate::metrics::histogram::{TaskClock, TaskHistograms};
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};
use crate::wait::{spin_then_yield, Backoff};

/// Spin rounds before sleeping: round `k < SPIN_ROUNDS` busy-waits `2^k` `spin_loop` hints
/// (about 2^SPIN_ROUNDS hints in all, a few microseconds), then `YIELD_ROUNDS` rounds yield the
/// CPU. Long enough to catch the next task of a steady stream, short enough that an idle worker
/// costs nothing measurable (crossbeam's `Backoff` uses the same shape).
const SPIN_ROUNDS: u32 = 7;
const YIELD_ROUNDS: u32 = 6;

/// Counters one worker writes and the controller and `metrics()` read. Padded per worker so
/// that counting completed tasks does not bounce a shared cache line between workers.
// Under loom there is no controller to read the clocks and busy times.
#[cfg_attr(loom, allow(dead_code))]
#[derive(Default)]
pub(crate) struct WorkerStats {
    pub(crate) completed: AtomicU64,
    pub(crate) panicked: AtomicU64,
    /// Tasks this worker took from the queue and finished (run, panicked or dropped unrun),
    /// counted after `completed` and `panicked`: `wait_idle`'s side of the count (`idle.rs`).
    pub(crate) finished: std::sync::atomic::AtomicU64,
    /// Nanoseconds since the pool's epoch at which the current busy stretch began; 0 when idle.
    busy_since_ns: AtomicU64,
    /// Nanoseconds of finished busy stretches.
    busy_total_ns: AtomicU64,
    /// The worker's CPU-time clock id plus one (0 until the worker has started), for the
    /// controller's per-worker CPU time (`clock_gettime` on `pthread_getcpuclockid`).
    pub(crate) cpu_clock: AtomicU64,
    /// The worker's kernel thread id (0 until started), for `/proc/self/task/<tid>/schedstat`.
    pub(crate) tid: AtomicU64,
    /// Set by a submit that woke this worker beyond the target (step 4); cleared by the
    /// worker when it gives the CPU back.
    pub(crate) borrowed: AtomicBool,
    /// Host tokens (`host_tokens.rs`): the worker's run-queue wait (schedstat) when it took
    /// the token it holds, plus one (0: it holds none or cannot read its wait), and the wait it
    /// accumulated while holding earlier tokens. With shared tokens the controller counts only
    /// this wait as contention (`control.rs`).
    pub(crate) token_wait_since: std::sync::atomic::AtomicU64,
    pub(crate) token_wait_total: std::sync::atomic::AtomicU64,
    /// The worker could not read its own schedstat when it took its last token (cleared when a
    /// later token's reading succeeds).
    pub(crate) token_wait_unknown: std::sync::atomic::AtomicBool,
    /// Host tokens: the hold the worker publishes while it holds a token (0: none), so that
    /// the controller can take back the token of a worker blocked in its task
    /// (`host_tokens.rs`, "Blocked holders").
    pub(crate) token_hold: std::sync::atomic::AtomicU64,
    /// Elastic pools: whether a thread runs in this slot (set by whoever starts it, cleared by
    /// the thread as it exits), and the slot's per-task counters (`elastic.rs`).
    pub(crate) occupied: std::sync::atomic::AtomicBool,
    #[cfg(not(loom))]
    pub(crate) tasks: super::elastic::TaskCounters,
    /// Readings this worker went without because the kernel refused them (its own schedstat,
    /// for host tokens and elastic meters): part of `Metrics::degradations`
    /// (`crate::metrics::Degradation`).
    pub(crate) degradations: std::sync::atomic::AtomicU64,
    /// The queue wait and run time of the tasks this worker ran (`Builder::task_histograms`;
    /// what each measures: `TaskClock`), written by this worker only.
    pub(crate) histograms: TaskHistograms,
}

impl WorkerStats {
    /// Starts a busy stretch unless one is in progress (one clock reading per stretch).
    fn mark_busy(&self, epoch: Instant) {
        if self.busy_since_ns.load(Ordering::Relaxed) == 0 {
            self.busy_since_ns.store(nanos_since(epoch).max(1), Ordering::Relaxed);
        }
    }

    /// Ends the busy stretch in progress, if any.
    fn mark_idle(&self, epoch: Instant) {
        let since = self.busy_since_ns.swap(0, Ordering::Relaxed);
        if since != 0 {
            self.busy_total_ns.fetch_add(nanos_since(epoch).saturating_sub(since), Ordering::Relaxed);
        }
    }

    /// The run-queue wait this worker accumulated while holding host tokens, given its total
    /// run-queue wait `run_delay_ns` read now (see `holding_wait`); `None` when the worker
    /// could not read its own wait.
    #[cfg(not(loom))]
    pub(crate) fn token_wait_ns(&self, run_delay_ns: u64) -> Option<u64> {
        use std::sync::atomic::Ordering::Acquire;
        if self.token_wait_unknown.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        // The total first (the worker clears `since` before it adds to the total): a hold that
        // ends between the two loads is counted in neither, never twice. That reading is lower
        // than one taken during the hold; the controller keeps each worker's largest.
        let total = self.token_wait_total.load(Acquire);
        Some(holding_wait(total, self.token_wait_since.load(Acquire), run_delay_ns))
    }

    /// Whether the worker is in a busy stretch (running tasks back to back) now.
    pub(crate) fn is_busy(&self) -> bool {
        self.busy_since_ns.load(Ordering::Relaxed) != 0
    }

    /// Wall-clock nanoseconds spent busy since the epoch, up to `now_ns`.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn busy_ns(&self, now_ns: u64) -> u64 {
        // Read total, since, total, and read again if a stretch ended in between. This narrows
        // but does not close the race with `mark_idle` (one period may under-count a stretch
        // that the next then counts): good enough for a per-period estimate.
        let (since, total) = loop {
            let total = self.busy_total_ns.load(Ordering::Acquire);
            let since = self.busy_since_ns.load(Ordering::Acquire);
            if self.busy_total_ns.load(Ordering::Acquire) == total {
                break (since, total);
            }
        };
        if since == 0 {
            total
        } else {
            total + now_ns.saturating_sub(since)
        }
    }

    /// Records the calling thread's CPU clock and thread id (called by the worker itself).
    fn register_thread(&self) {
        #[cfg(all(not(loom), target_os = "linux"))]
        {
            let mut clock: libc::clockid_t = 0;
            // SAFETY: pthread_self() is the calling thread, alive for this call; `clock` is a
            // valid out-pointer.
            if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0 {
                self.cpu_clock.store(clock as u32 as u64 + 1, Ordering::Release);
            }
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            if tid > 0 {
                self.tid.store(tid as u64, Ordering::Release);
            }
        }
    }
}

/// The span a worker thread of the pool named `pool` runs in for its whole life, so that every
/// event logged on it names its pool (a root span: a worker belongs to no caller's span).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn pool_span(pool: &str) -> tracing::Span {
    tracing::info_span!(parent: None, "cotenant_pool", pool = %pool)
}

#[cfg(not(loom))]
thread_local! {
    /// The `Shared` this thread is a worker of (its address), or 0: lets the pool recognise
    /// its own workers calling `shutdown` or submitting to a full queue.
    pub(crate) static CURRENT_POOL: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// This worker's index in `CURRENT_POOL`'s workers (meaningful while that is not 0).
    static CURRENT_INDEX: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// This worker's index in its pool (`CURRENT_INDEX`): meaningful only on a worker thread.
#[cfg(not(loom))]
pub(crate) fn current_index() -> usize {
    CURRENT_INDEX.with(|index| index.get())
}

/// How deep joins that run queued tasks may nest on one worker (each level is a task run
/// inside another's join, a few frames of stack); deeper, a join just waits.
#[cfg_attr(loom, allow(dead_code))]
const MAX_HELP_DEPTH: u32 = 64;

/// How long a thread that waits on a worker of the pool it helps (`Task::join`, `Pool::scope`,
/// `Pool::join`) blocks before it looks at the queue again: a push wakes sleeping workers, not
/// a worker blocked in a wait, so tasks queued meanwhile (by the task it waits for, say) would
/// otherwise wait for a worker that may never come.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const HELP_RECHECK: std::time::Duration = std::time::Duration::from_millis(10);

/// Whether `run_queued_while_waiting(task_pool, ..)` would help on this thread now: a worker
/// of that pool, neither budgeted nor elastic, below `MAX_HELP_DEPTH`.
#[cfg(not(loom))]
pub(crate) fn helps_while_waiting(task_pool: usize) -> bool {
    let pool = CURRENT_POOL.with(|current| current.get());
    if pool == 0 || pool != task_pool {
        return false;
    }
    // SAFETY: as in `run_queued_while_waiting`: this thread is a worker of the live `Shared`.
    let shared = unsafe { &*(pool as *const Shared) };
    !(shared.budget.is_some() || shared.is_elastic()) && HELP_DEPTH.with(|depth| depth.get()) < MAX_HELP_DEPTH
}

/// Whether a waiter on this thread should block at most `HELP_RECHECK` at a time and help
/// again in between: it helps (`helps_while_waiting`), and its pool takes no host tokens now.
/// A worker of an engaged pool blocks for good instead, as before: waking every 10 ms would
/// move its CPU clock and so keep the controller from taking back the token it holds
/// (`host_tokens.rs`, "Blocked holders"), and the tasks it helped with after a take-back would
/// run without one. Such a pool keeps the older limit: a task that a waited-for task queues
/// after the wait began runs only when another worker comes free.
#[cfg(not(loom))]
pub(crate) fn rechecks_while_waiting(task_pool: usize) -> bool {
    if !helps_while_waiting(task_pool) {
        return false;
    }
    // SAFETY: as in `run_queued_while_waiting`: this thread is a worker of the live `Shared`.
    let shared = unsafe { &*(task_pool as *const Shared) };
    !shared.host_tokens.as_ref().is_some_and(|tokens| tokens.is_engaged())
}

/// Called by `Task::join` before it blocks, for a task of the pool whose `Shared` is at
/// `task_pool`: on a worker thread of that same pool, runs tasks queued in it until `done`
/// holds or the queue is empty. A task that joins a task of its own pool would otherwise wait
/// for a worker that may never come (the pool's target at 1, or every allowed worker joining):
/// the task it waits for is either still queued, and this runs it (or what is ahead of it), or
/// taken by another worker, and then it will resolve. The caller keeps its host token (if it
/// holds one) while it runs these tasks: it uses its CPU. Not in budgeted or elastic pools
/// (their workers charge and meter each task in the worker loop), not for a task of another
/// pool (helping here would not bring it closer), and not beyond `MAX_HELP_DEPTH` nested joins.
#[cfg(not(loom))]
pub(crate) fn run_queued_while_waiting(task_pool: usize, done: &dyn Fn() -> bool) {
    if !helps_while_waiting(task_pool) {
        return;
    }
    let pool = CURRENT_POOL.with(|current| current.get());
    // SAFETY: `CURRENT_POOL` is set by `run` to the address of the `Shared` it holds an `Arc`
    // of for as long as the thread is a worker, and cleared before that `Arc` is dropped; this
    // runs on that thread, inside one of its tasks, so the `Shared` is alive.
    let shared = unsafe { &*(pool as *const Shared) };
    let depth = HELP_DEPTH.with(|depth| depth.get());
    HELP_DEPTH.with(|d| d.set(depth + 1));
    // Restores the depth however this ends (a job's panic is caught inside `guarded`).
    struct Leave(u32);
    impl Drop for Leave {
        fn drop(&mut self) {
            HELP_DEPTH.with(|d| d.set(self.0));
        }
    }
    let _leave = Leave(depth);
    let stats = &shared.workers[CURRENT_INDEX.with(|index| index.get())];
    // The histograms time each task run here from its pop to its own end (two readings: a
    // join's wait, not the pool's hot path), recorded before it counts as finished.
    let mut clock = TaskClock::new(shared.task_histograms);
    let timed = &stats.histograms;
    while !done() {
        let Some(job) = shared.queue.pop() else { return };
        shared.after_pop();
        if shared.is_cancelling() {
            cancel(shared, job, stats);
            continue;
        }
        let popped = clock.popped(timed);
        clock.started(timed, popped, job.enqueued_ns());
        if guarded(|| shared.run_job(job)) {
            stats.panicked.fetch_add(1, Ordering::Relaxed);
        }
        clock.ended(timed);
        stats.completed.fetch_add(1, Ordering::Relaxed);
        shared.task_finished(stats);
    }
}

#[cfg(not(loom))]
thread_local! {
    /// Joins on this worker that are running queued tasks now (`run_queued_while_waiting`).
    static HELP_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Tells the pool this worker has exited, however the loop ends.
struct ExitGuard<'a>(&'a Shared, usize);

impl Drop for ExitGuard<'_> {
    fn drop(&mut self) {
        // Charge the worker's slice and stop metering (a no-op without a budget).
        #[cfg(not(loom))]
        super::budget::leave();
        #[cfg(not(loom))]
        CURRENT_POOL.with(|current| current.set(0));
        // Before the thread counts as gone, so that `shutdown` returns only after every stop
        // hook has run; not a worker any more, so the hook's joins and waits help no pool.
        call_hook(self.0, self.0.hooks.stop.as_deref(), "on_thread_stop");
        // The controller must not read this thread's clock or take back its hold once it is
        // gone (a draining pool stays registered until every worker has exited).
        let stats = &self.0.workers[self.1];
        stats.cpu_clock.store(0, std::sync::atomic::Ordering::Release);
        stats.tid.store(0, std::sync::atomic::Ordering::Release);
        // The slot is free for a new thread (elastic pools): this one touches it no more.
        self.0.workers[self.1].occupied.store(false, std::sync::atomic::Ordering::Release);
        self.0.worker_exited();
    }
}

/// Runs user code that may panic outside a task's own `catch_unwind`: dropping a task's value
/// nobody joined, a panic payload, or a cancelled job. True if it panicked. A worker thread
/// must survive all of them, or the tasks behind it would be stranded.
fn guarded(f: impl FnOnce() -> bool) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(true)
}

/// Drops a job `shutdown_now` cancelled, which resolves its Task as Cancelled (dropping the
/// closure runs user Drops, which may panic: counted, survived).
fn cancel(shared: &Shared, job: super::task::Job, stats: &WorkerStats) {
    if guarded(move || {
        drop(job);
        false
    }) {
        stats.panicked.fetch_add(1, Ordering::Relaxed);
    }
    shared.task_finished(stats);
}

/// Runs a thread hook (`Builder::on_thread_start`, `on_thread_stop`) on this worker thread. A
/// panic in it goes to the pool's panic handler, or is logged: a worker that died of its hook
/// would strand the tasks behind it.
fn call_hook(shared: &Shared, hook: Option<&ThreadHook>, which: &str) {
    let Some(hook) = hook else { return };
    let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(hook)) else { return };
    let message = super::Panic::new(payload);
    tracing::warn!(
        hook = which,
        panic = message.message().unwrap_or("<non-string payload>"),
        "cotenant: a worker thread hook panicked"
    );
    if let Some(handler) = &shared.hooks.panic {
        let payload = message.into_payload();
        // The handler's own panic, and dropping its payload, must not end the thread either.
        let _ = guarded(move || {
            handler(payload);
            false
        });
    }
}

/// Tasks of `shared`'s pool that run on the calling thread now: none on a thread that is not
/// one of its workers; on one, the task that called (which must be running on it) and one per
/// join, scope or `wait_idle` below it that is running a queued task (`HELP_DEPTH`).
#[cfg(not(loom))]
pub(crate) fn tasks_running_here(shared: &Shared) -> usize {
    if !shared.is_own_worker() {
        return 0;
    }
    1 + HELP_DEPTH.with(|depth| depth.get()) as usize
}

/// Starts a worker thread named `name` with `stack_size` bytes of stack (the standard
/// library's default when `None`), for `build` and for an elastic pool's controller alike.
#[cfg(not(loom))]
pub(crate) fn spawn_thread<F>(
    name: String,
    stack_size: Option<usize>,
    f: F,
) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let mut builder = std::thread::Builder::new().name(name);
    if let Some(bytes) = stack_size {
        builder = builder.stack_size(bytes);
    }
    builder.spawn(f)
}

/// Run-queue wait while holding tokens: `accumulated` over finished holds, plus, when a hold
/// is in progress (`since_plus_one` != 0), what the total `run_delay_ns` grew since it began.
/// A reading older than the hold's start (a race with the worker) adds nothing.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn holding_wait(accumulated: u64, since_plus_one: u64, run_delay_ns: u64) -> u64 {
    match since_plus_one {
        0 => accumulated,
        since => accumulated.saturating_add(run_delay_ns.saturating_sub(since - 1)),
    }
}

pub(crate) fn nanos_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The body of worker `index`'s thread.
pub(crate) fn run(shared: Arc<Shared>, index: usize) {
    let stats = &shared.workers[index];
    let _exit = ExitGuard(&shared, index);
    // Before the thread is marked as a worker: the hook's joins and waits help no pool.
    call_hook(&shared, shared.hooks.start.as_deref(), "on_thread_start");
    // Elastic pools measure tasks and retire the workers above the target (`elastic.rs`).
    let elastic = shared.is_elastic();
    #[cfg(not(loom))]
    let mut meter = elastic.then(super::elastic::TaskMeter::for_current_thread);
    #[cfg(not(loom))]
    CURRENT_POOL.with(|current| current.set(Arc::as_ptr(&shared) as usize));
    #[cfg(not(loom))]
    CURRENT_INDEX.with(|current| current.set(index));
    stats.register_thread();
    // Pools without a budget skip its thread-local bookkeeping on the task path entirely.
    #[cfg(not(loom))]
    let budgeted = shared.budget.is_some();
    #[cfg(not(loom))]
    if let Some(budget) = &shared.budget {
        super::budget::enter(budget.clone());
    }
    let mut last_borrow_check = Instant::now();
    // A host token kept from the task before for the next one (`host_tokens.rs`, "Kept"):
    // only ever carried to a pop that follows at once; every other path gives it back first.
    #[cfg(not(loom))]
    let mut kept: Option<super::host_tokens::Held<'_>> = None;
    // The readings of the task histograms (`TaskClock`; a clock of their own, not the busy
    // stretch's).
    let mut clock = TaskClock::new(shared.task_histograms);
    let timed = &stats.histograms;
    // What a worker does whenever it runs out of tasks it may run: it keeps no host token
    // while idle, its busy stretch ends, and a budgeted pool's CPU slice is charged.
    macro_rules! stop_working {
        () => {{
            #[cfg(not(loom))]
            drop(kept.take());
            stats.mark_idle(shared.epoch);
            clock.stopped(timed);
            #[cfg(not(loom))]
            if budgeted {
                super::budget::release();
            }
        }};
    }
    loop {
        let borrowed = stats.borrowed.load(Ordering::SeqCst);
        if borrowed && index < shared.roster.target() {
            // The target rose past us: an allowed worker now, not a borrower.
            stats.borrowed.store(false, Ordering::SeqCst);
        }
        let allowed = index < shared.roster.target() || borrowed;
        if allowed {
            if let Some(job) = shared.queue.pop() {
                shared.after_pop();
                // With a park hook: a worker that starts a task while nobody is in the hook
                // (it just left it, or was woken to take it and found a task) wakes an idle
                // allowed worker to take it, so the reactor is driven while the task runs.
                if let Some(driver) = &shared.idle_driver {
                    shared.roster.hand_over_driving(driver);
                }
                if shared.is_cancelling() {
                    #[cfg(not(loom))]
                    drop(kept.take());
                    cancel(&shared, job, stats);
                    continue;
                }
                // This task's one clock reading (histograms on): the end of its queue wait and
                // of the previous task's run, the start of its own.
                let popped = clock.popped(timed);
                // A budgeted pool's worker needs a slice of CPU time first (`budget.rs`); it
                // may park here until the refill, and a `shutdown_now` meanwhile cancels the job.
                #[cfg(not(loom))]
                if budgeted && !super::budget::acquire() {
                    cancel(&shared, job, stats);
                    continue;
                }
                // A pool sharing the host's CPU tokens runs a task only while holding one
                // (`host_tokens.rs`): kept from the task before, or taken now.
                #[cfg(not(loom))]
                let token = match kept.take() {
                    Some(mut held) => {
                        held.move_to_lease();
                        Some(held)
                    }
                    None => {
                        match shared
                            .host_tokens
                            .as_ref()
                            .filter(|t| t.is_engaged())
                            .map(|t| t.take(stats, || shared.is_cancelling()))
                        {
                            Some(super::host_tokens::Take::Cancelled) => {
                                cancel(&shared, job, stats);
                                continue;
                            }
                            Some(super::host_tokens::Take::Held(held)) => Some(held),
                            Some(super::host_tokens::Take::Without) | None => None,
                        }
                    }
                };
                clock.started(timed, popped, job.enqueued_ns());
                stats.mark_busy(shared.epoch);
                #[cfg(not(loom))]
                let mark = meter.as_mut().and_then(|meter| meter.start());
                if guarded(|| shared.run_job(job)) {
                    stats.panicked.fetch_add(1, Ordering::Relaxed);
                }
                // Given back after the task, so that a waiting worker of any pool gets it next,
                // unless nobody waits and this worker has another task to run at once: then
                // it keeps the token (and its CPU lease) for that task.
                #[cfg(not(loom))]
                {
                    kept = token.filter(|held| {
                        !borrowed
                            && index < shared.roster.target()
                            && !shared.queue.is_empty()
                            && !shared.is_cancelling()
                            && held.nobody_waits()
                    });
                }
                #[cfg(not(loom))]
                if let Some(meter) = meter.as_mut() {
                    meter.finish(mark, stats);
                }
                #[cfg(not(loom))]
                if budgeted {
                    super::budget::after_task();
                }
                // No pop follows at once when the queue looks empty: the run ends now, counted
                // before the task counts as finished (`wait_idle`); the reading also ends the
                // busy stretch if the worker stops. (With histograms off, no check, no reading.)
                if clock.is_on() && shared.queue.is_empty() {
                    clock.ended(timed);
                }
                stats.completed.fetch_add(1, Ordering::Relaxed);
                shared.task_finished(stats);
                if borrowed {
                    if last_borrow_check.elapsed() >= WORKER_CHECK_INTERVAL {
                        last_borrow_check = Instant::now();
                        if !shared.borrow.cpu_idle_now(false) {
                            // Someone else waits for a CPU: give ours back (step 4).
                            stats.borrowed.store(false, Ordering::SeqCst);
                        }
                    }
                } else if !shared.queue.is_empty() {
                    // Tasks queued while no CPU was idle: one may be idle now (step 4).
                    shared.maybe_borrow();
                }
                continue;
            }
            // The queue ran dry under us (another worker took the task): no token while idle.
            stop_working!();
            if shared.is_closed() {
                // Every push finished before `closed` was set (see `Shared::is_closed`), so
                // this check of the queue sees them all: empty means done.
                if shared.queue.is_empty() {
                    break;
                }
                continue;
            }
            if borrowed {
                // The queue is empty: give the CPU back without spinning on it.
                stats.borrowed.store(false, Ordering::SeqCst);
                if index < shared.roster.target() {
                    continue;
                }
            } else if spin_for_work(&shared, index) {
                continue;
            }
        } else {
            // The target fell below us since the task the token was kept for.
            stop_working!();
            if shared.is_closed() {
                break;
            }
            if elastic {
                // Above the size: retire rather than sleep (`elastic.rs` step 4).
                shared.worker_retired();
                if let Some(driver) = &shared.idle_driver {
                    shared.roster.hand_over_driving(driver);
                }
                break;
            }
        }
        shared.roster.sleep(
            index,
            |target| {
                shared.is_closed()
                    || (index < target && !shared.queue.is_empty())
                    || (elastic && index >= target)
            },
            shared.idle_driver.as_ref(),
        );
        last_borrow_check = Instant::now();
    }
    // Every way out of the loop stopped working first: this ends nothing, but says so.
    stats.mark_idle(shared.epoch);
    clock.stopped(timed);
}

/// Step 3: bounded spinning with exponential back-off. True when work appeared for us.
fn spin_for_work(shared: &Shared, index: usize) -> bool {
    let has_work = || !shared.queue.is_empty() && index < shared.roster.target();
    let backoff = Backoff::default().spins(SPIN_ROUNDS).yields(YIELD_ROUNDS);
    spin_then_yield(&backoff, || has_work() || shared.is_closed()) && has_work()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::holding_wait;

    #[test]
    fn the_wait_while_holding_is_the_finished_holds_plus_the_one_in_progress() {
        assert_eq!(holding_wait(5, 0, 1_000), 5, "no hold in progress: the finished ones only");
        // A hold that began at a total wait of 900 (stored as 901), read at 1000.
        assert_eq!(holding_wait(5, 901, 1_000), 105);
        assert_eq!(holding_wait(5, 1_001, 1_000), 5, "a reading older than the hold adds nothing");
        assert_eq!(holding_wait(u64::MAX, 1, u64::MAX), u64::MAX, "saturates");
    }
}

//! [`Shared`]: the state the pool handle, its workers and the controller share, and the
//! submission protocol on it (push, the [`Full`] policies, close); `snapshot.rs` reads it
//! into `Metrics`.

use std::time::{Duration, Instant};

use super::borrow::Borrow;
use super::builder::Hooks;
use super::queue::Queue;
use super::roster::Roster;
use super::task::{Job, Outcome};
use super::worker::{self, WorkerStats};
#[cfg(not(loom))]
use super::{budget, control, elastic, host_tokens};
use super::{Full, JoinError};
use crate::metrics::histogram::TaskHistograms;
#[cfg(not(loom))]
use crate::sync::Arc;
use crate::sync::Ordering;
use crate::sync::{
    fence, lock, thread, wait, wait_timeout, AtomicBool, AtomicU64, AtomicUsize, CachePadded, Condvar, Mutex,
};

/// How long a submitter blocked on a full queue waits before it tries again even if no worker
/// woke it (`Shared::push_blocking`).
const BLOCKED_RETRY: Duration = Duration::from_millis(10);

/// The highest bit of `Shared::gate`: set once the pool stops accepting tasks. The other bits
/// count submits in progress, so that shutdown can wait until no push is in flight.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// State shared by the pool handle, its workers and the controller.
pub(crate) struct Shared {
    /// The pool's name (`Builder::name`, the workers' name prefix): the `pool` field of the
    /// events logged about it off its workers, whose own events carry it in their span.
    /// `std`'s `Arc` even under loom: a plain shared string, no part of any model.
    pub(crate) name: std::sync::Arc<str>,
    /// Whether tasks are timed into the queue-wait and run-time histograms
    /// (`Builder::task_histograms`; always off under loom). Off, no clock is read for them.
    pub(crate) task_histograms: bool,
    /// The histograms of the tasks run by the threads that submitted them (`run_on_caller`):
    /// several threads write them, with `fetch_add`.
    pub(super) caller_histograms: TaskHistograms,
    pub(super) queue: Queue<Job>,
    pub(crate) roster: Roster,
    /// Written by every submit (twice): on a cache line of its own, so that the workers'
    /// reads of the fields around it do not take the line from the submitter at every task.
    pub(super) gate: CachePadded<AtomicUsize>,
    pub(super) stopped: AtomicBool,
    pub(super) cancelling: AtomicBool,
    pub(super) on_full: Full,
    /// Whether a controller decides the target (a submit then wakes a napping controller).
    #[cfg_attr(loom, allow(dead_code))]
    pub(super) dynamic: bool,
    /// The controller samples this pool only every few periods because it has been idle
    /// (`policy::coast::may_coast`): a submit then asks for a sample now
    /// (`control::work_arrived`). Written by the controller only when it changes.
    #[cfg(not(loom))]
    pub(crate) idle_coasting: std::sync::atomic::AtomicBool,
    /// The spawned futures that have not finished (`future_task.rs`): a shutdown cancels
    /// those still waiting for a wake-up.
    #[cfg(not(loom))]
    pub(super) futures: super::future_task::LiveFutures,
    pub(crate) borrow: Borrow,
    /// Workers woken beyond the target (see `borrow.rs`).
    pub(super) borrows: AtomicU64,
    /// Submitters waiting for room (`Full::Block`), and what they wait on.
    pub(super) blocked: AtomicUsize,
    pub(super) blocked_lock: Mutex<()>,
    pub(super) not_full: Condvar,
    pub(crate) workers: Box<[CachePadded<WorkerStats>]>,
    /// Worker threads that have not exited yet, and what `stop` waits on: whoever calls
    /// `shutdown` second (or from a task) still returns only once every worker is gone.
    pub(super) live: Mutex<usize>,
    pub(super) exited: Condvar,
    pub(super) rejected: AtomicU64,
    pub(super) caller_ran: AtomicU64,
    /// Polls of spawned futures that ran, and wake-ups of them that queued another poll
    /// (`future_task.rs`; `Metrics::future_polls`, `Metrics::future_wakeups`). Written at
    /// every poll by whichever thread runs it: each on a cache line of its own, so that those
    /// writes do not take from the workers the line of a field they read at every task. Not
    /// under loom: the executor is not built there.
    /// (An `Arc` that each spawned future keeps a clone of, so that a poll counts itself
    /// without reaching the pool through the future's weak handle: an upgrade and a drop
    /// would be two more writes to the pool's shared reference count per poll.)
    #[cfg(not(loom))]
    pub(super) future_polls: std::sync::Arc<CachePadded<std::sync::atomic::AtomicU64>>,
    #[cfg(not(loom))]
    pub(super) future_wakeups: CachePadded<std::sync::atomic::AtomicU64>,
    pub(crate) decisions: AtomicU64,
    pub(crate) sample_errors: AtomicU64,
    /// Features turned off or readings missed because the kernel refused a read, counted by
    /// `build` and the controller (the workers count theirs in `WorkerStats::degradations`):
    /// `Metrics::degradations`, `crate::metrics::Degradation`.
    pub(crate) degradations: std::sync::atomic::AtomicU64,
    pub(crate) epoch: Instant,
    /// The user-space CPU budget, if the pool has one (`budget.rs`).
    #[cfg(not(loom))]
    pub(crate) budget: Option<Arc<budget::Budget>>,
    /// The host's CPU tokens, if the pool shares them (`host_tokens.rs`).
    #[cfg(not(loom))]
    pub(crate) host_tokens: Option<host_tokens::PoolTokens>,
    /// Why the pool has no tokens, or (with tokens) the state at build (`Metrics::host_tokens`).
    #[cfg(not(loom))]
    pub(super) tokens_state: crate::metrics::TokenState,
    /// An elastic pool's settings and counters (`elastic.rs`).
    #[cfg(not(loom))]
    pub(crate) elastic: Option<elastic::Elastic>,
    /// Under loom: whether the pool is elastic (its retirement is modelled without the meter).
    #[cfg(loom)]
    pub(super) elastic: bool,
    /// The health alerts' sliding window (`crate::health`), and when it last got a point
    /// (ns since `epoch`).
    #[cfg(not(loom))]
    pub(super) health: std::sync::Mutex<crate::health::Health>,
    #[cfg(not(loom))]
    pub(super) health_at_ns: AtomicU64,
    /// The thread hooks and the panic handler (`Builder::on_thread_start`, ...).
    pub(crate) hooks: Hooks,
    /// `Builder::park_with`: how an allowed worker with nothing to run waits (`park_with.rs`).
    pub(crate) idle_driver: Option<super::park_with::IdleDriver>,
    /// The worker threads' stack size (`Builder::stack_size`), for the threads an elastic pool
    /// starts after `build` too.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) stack_size: Option<usize>,
    /// Idle accounting (`idle.rs`): tasks accepted into the queue (counted before the push, so
    /// that the count never lags a task a worker could already finish), and tasks that
    /// `close` dropped unrun; each worker counts the ones it finished in `WorkerStats::finished`.
    #[cfg(not(loom))]
    pub(super) accepted: CachePadded<std::sync::atomic::AtomicU64>,
    #[cfg(not(loom))]
    pub(super) dropped: std::sync::atomic::AtomicU64,
    /// Threads in `wait_idle` now, and what they wait on: a worker that finishes a task
    /// notifies only while this is not 0, so that a pool nobody waits on pays one load per task.
    #[cfg(not(loom))]
    pub(super) idle_waiters: std::sync::atomic::AtomicUsize,
    #[cfg(not(loom))]
    pub(super) idle_lock: std::sync::Mutex<()>,
    #[cfg(not(loom))]
    pub(super) idle_changed: std::sync::Condvar,
}

pub(super) enum Refused {
    Full(Job),
    ShutDown(Job),
}

impl Shared {
    /// The pool accepts nothing more and no submit is in flight: workers drain and exit.
    /// Set by `close` only after the last in-flight push finished, so a worker that sees it
    /// and then an empty queue can exit without stranding a task.
    pub(crate) fn is_closed(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Closed, and no submit is between its gate check and its push.
    fn is_quiet(&self) -> bool {
        self.gate.load(Ordering::SeqCst) == CLOSED
    }

    pub(super) fn is_cancelling(&self) -> bool {
        self.cancelling.load(Ordering::Relaxed)
    }

    /// Whether the calling thread is one of this pool's workers.
    pub(crate) fn is_own_worker(&self) -> bool {
        #[cfg(not(loom))]
        {
            worker::CURRENT_POOL.with(|current| current.get() == self as *const Shared as usize)
        }
        #[cfg(loom)]
        {
            false
        }
    }

    /// With a park hook (`park_with.rs`): the index of the calling thread if it is a worker of
    /// this pool (it pushes from inside the hook, or from a task); else `None`, without a
    /// thread-local read. `Roster::wake_one_allowed` prefers that worker if it is asleep.
    #[inline]
    fn worker_index_here(&self) -> Option<usize> {
        #[cfg(not(loom))]
        if self.idle_driver.is_some() && self.is_own_worker() {
            return Some(worker::current_index());
        }
        None
    }

    /// Step T (`Roster::set_target`), then, with a park hook, keeps it driven by an allowed
    /// worker (`Roster::after_target_change`).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn set_target(&self, target: usize) {
        self.roster.set_target(target, || self.queued());
        if let Some(driver) = &self.idle_driver {
            self.roster.after_target_change(driver);
        }
    }

    /// Whether this is an elastic pool (its workers above the target retire).
    pub(crate) fn is_elastic(&self) -> bool {
        #[cfg(not(loom))]
        {
            self.elastic.is_some()
        }
        #[cfg(loom)]
        {
            self.elastic
        }
    }

    /// Called by an elastic pool's worker that exits because it is above the size.
    pub(crate) fn worker_retired(&self) {
        #[cfg(not(loom))]
        if let Some(elastic) = &self.elastic {
            elastic.retired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Called by each worker thread as it exits.
    pub(crate) fn worker_exited(&self) {
        *lock(&self.live) -= 1;
        self.exited.notify_all();
    }

    /// Waits until every worker thread has exited but the calling one (a task of this pool
    /// that shuts it down cannot wait for its own worker), or until `deadline` (none: for
    /// good); `Err` with the workers still running at the deadline.
    pub(super) fn wait_workers_exited(&self, deadline: Option<Instant>) -> Result<(), usize> {
        let own = usize::from(self.is_own_worker());
        let mut live = lock(&self.live);
        while *live > own {
            live = match deadline {
                None => wait(&self.exited, live),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(*live - own);
                    }
                    wait_timeout(&self.exited, live, left)
                }
            };
        }
        Ok(())
    }

    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Step P (README): one attempt to enqueue; on success wakes an allowed sleeper if any.
    pub(super) fn push(&self, job: Job) -> Result<(), Refused> {
        self.push_with(job, false)
    }

    /// Step P for a woken future's poll (`future_task.rs`): queued even when the queue is full
    /// (its overflow list, `queue.rs`), so never refused but by a shutdown, which gives the
    /// job back.
    #[cfg_attr(loom, allow(dead_code))]
    pub(super) fn push_woken(&self, job: Job) -> Result<(), Job> {
        self.push_with(job, true).map_err(|refused| match refused {
            Refused::ShutDown(job) | Refused::Full(job) => job,
        })
    }

    /// Step P, into the ring only or (`overflow`) into its overflow list when it is full.
    #[inline]
    fn push_with(&self, mut job: Job, overflow: bool) -> Result<(), Refused> {
        // The submit's one clock reading for the histograms: the start of the task's queue
        // wait (kept from a first try that found the queue full), and of its run if the
        // submitter ends up running it (`run_on_caller`).
        if self.task_histograms {
            job.stamp(crate::metrics::clock::now_ns);
        }
        if self.gate.fetch_add(1, Ordering::SeqCst) & CLOSED != 0 {
            self.gate.fetch_sub(1, Ordering::SeqCst);
            return Err(Refused::ShutDown(job));
        }
        // Counted before the push: a worker may pop and finish the task at once (`idle.rs`).
        #[cfg(not(loom))]
        self.accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let pushed = if overflow {
            self.queue.push_or_overflow(job);
            Ok(())
        } else {
            self.queue.push(job)
        };
        let result = match pushed {
            Ok(()) => {
                // Pairs with the fences in `Roster::sleep` and `Roster::set_target`.
                fence(Ordering::SeqCst);
                if !self.roster.wake_one_allowed(|| self.worker_index_here()) {
                    self.maybe_borrow();
                }
                #[cfg(not(loom))]
                if self.dynamic {
                    control::nudge();
                    if self.idle_coasting.load(std::sync::atomic::Ordering::Relaxed) {
                        control::work_arrived(self);
                    }
                }
                #[cfg(not(loom))]
                if let Some(elastic) = &self.elastic {
                    elastic.arrivals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(())
            }
            Err(job) => {
                #[cfg(not(loom))]
                self.accepted.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                Err(Refused::Full(job))
            }
        };
        self.gate.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Enqueues under the pool's [`Full`] policy. `Err` gives back a job that must not run.
    pub(super) fn submit(&self, job: Job) -> Result<(), JoinError> {
        let job = match self.push(job) {
            Ok(()) => return Ok(()),
            Err(Refused::ShutDown(job)) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                drop(job);
                return Err(JoinError::Rejected);
            }
            Err(Refused::Full(job)) => job,
        };
        match self.on_full {
            // A worker of this pool waiting for room in its own queue could wait forever (it
            // may be the only allowed worker): it runs the task itself instead.
            Full::Block if self.is_own_worker() => {
                self.run_on_caller(job);
                Ok(())
            }
            Full::Block => self.push_blocking(job),
            Full::CallerRuns => {
                self.run_on_caller(job);
                Ok(())
            }
            Full::Reject => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                drop(job);
                Err(JoinError::Rejected)
            }
        }
    }

    /// Runs a job the queue had no room for on the submitting thread, counted as the pool's
    /// (`Metrics::caller_ran`). The job resolves its own Task; a panic is caught inside it.
    ///
    /// Histograms: such a task never waited in the queue (a queue wait of 0), and its run
    /// starts at the submit's stamp, taken just before the push that found no room: one more
    /// clock reading, at its end.
    pub(super) fn run_on_caller(&self, job: Job) {
        let submitted_ns = job.enqueued_ns();
        if self.run_job(job) {
            self.workers[0].panicked.fetch_add(1, Ordering::Relaxed);
        }
        if self.task_histograms && submitted_ns != 0 {
            let histograms = &self.caller_histograms;
            histograms.queue_wait.record_shared(0);
            histograms.run_time.record_shared(crate::metrics::clock::now_ns().saturating_sub(submitted_ns));
        }
        // Counted once it ran (it is part of `completed`), after its histograms: a snapshot
        // never shows it completed and not yet timed.
        self.caller_ran.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs `job`; true if it panicked. The panic of a detached task (`execute`), which nobody
    /// holds a handle to, goes to the pool's panic handler, if any. A handler that panics in
    /// turn is logged and survived: the thread running it may be a submitter under
    /// `Full::CallerRuns`, whose `execute` must not unwind for a task's sake.
    pub(crate) fn run_job(&self, job: Job) -> bool {
        match job.run() {
            Outcome::Completed => false,
            Outcome::Panicked => true,
            Outcome::Unhandled(payload) => {
                if let Some(handler) = &self.hooks.panic {
                    let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(payload)));
                    if let Err(again) = handled {
                        tracing::warn!(
                            pool = %self.name,
                            "cotenant: a pool's panic handler panicked; that panic is dropped"
                        );
                        // Dropping a payload runs user code too; a worker catches what that does.
                        drop(again);
                    }
                }
                true
            }
        }
    }

    /// Called after each task a worker took from the queue has ended (run, panicked or dropped
    /// unrun), after its counters: counts it for `wait_idle` and wakes the threads there.
    pub(crate) fn task_finished(&self, stats: &WorkerStats) {
        #[cfg(not(loom))]
        {
            use std::sync::atomic::Ordering::SeqCst;
            // SeqCst on both sides (here, and `idle_waiters` then the counters in `idle.rs`):
            // either this load sees the waiter, or the waiter's read of the counters sees
            // this task finished.
            stats.finished.fetch_add(1, SeqCst);
            if self.idle_waiters.load(SeqCst) != 0 {
                self.notify_idle_waiters();
            }
        }
        #[cfg(loom)]
        let _ = stats;
    }

    /// Wakes every thread in `wait_idle` to check again (under the lock each holds from its
    /// check to its wait, so none misses it).
    #[cfg(not(loom))]
    pub(super) fn notify_idle_waiters(&self) {
        let _guard = lock(&self.idle_lock);
        self.idle_changed.notify_all();
    }

    /// Waits for room in the queue (`Full::Block`); rejected if the pool closes meanwhile.
    pub(super) fn push_blocking(&self, mut job: Job) -> Result<(), JoinError> {
        loop {
            self.blocked.fetch_add(1, Ordering::SeqCst);
            let guard = lock(&self.blocked_lock);
            // Retry after registering: a worker that pops from now on will see `blocked` and
            // notify under `blocked_lock`, which we hold until `wait` releases it.
            match self.push(job) {
                Ok(()) => {
                    drop(guard);
                    self.blocked.fetch_sub(1, Ordering::SeqCst);
                    return Ok(());
                }
                Err(Refused::ShutDown(refused)) => {
                    drop(guard);
                    self.blocked.fetch_sub(1, Ordering::SeqCst);
                    self.rejected.fetch_add(1, Ordering::Relaxed);
                    drop(refused);
                    return Err(JoinError::Rejected);
                }
                Err(Refused::Full(back)) => job = back,
            }
            // The timeout is a backstop, not the protocol: producers that never block
            // (`try_spawn`, tasks of this pool) can keep the queue above half full, and a
            // blocked submitter must still get its turn.
            drop(wait_timeout(&self.not_full, guard, BLOCKED_RETRY));
            self.blocked.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A worker took a task: if submitters wait for room and the queue is at most half full,
    /// wake them all (they also retry every `BLOCKED_RETRY`).
    ///
    /// Why half: waking a blocked submitter at every pop costs a wake-up and a context switch
    /// per task, and on a shared host those wake-ups land on the neighbours' CPUs (a background
    /// pool's feeder woken at every pop gave a neighbour's p99 tens of milliseconds; RESULTS.md,
    /// "isolation"). Waking at half lets a submitter refill half the queue per wake-up while
    /// the workers still have half of it to run. No wake-up is lost: a submitter registers in
    /// `blocked` before its last try, so while it waits the queue was full after it registered,
    /// and the workers pop until the queue is empty; one of those pops leaves it at most half
    /// full and sees `blocked` (the fence pairs with `push_blocking`'s registration).
    pub(super) fn after_pop(&self) {
        // Only `Full::Block` blocks anyone (a woken future's poll never waits: `queue.rs`).
        if self.on_full != Full::Block {
            return;
        }
        fence(Ordering::SeqCst);
        if self.blocked.load(Ordering::SeqCst) > 0 && self.queue.len() <= self.queue.capacity() / 2 {
            let _guard = lock(&self.blocked_lock);
            self.not_full.notify_all();
        }
    }

    /// Stops accepting; waits out in-flight submits; cancels the queue if `cancel`; wakes
    /// everyone. Idempotent.
    pub(super) fn close(&self, cancel: bool) {
        if cancel {
            self.cancelling.store(true, Ordering::SeqCst);
            #[cfg(not(loom))]
            if let Some(budget) = &self.budget {
                budget.cancel();
            }
        }
        self.gate.fetch_or(CLOSED, Ordering::SeqCst);
        while !self.is_quiet() {
            thread::yield_now();
        }
        self.stopped.store(true, Ordering::SeqCst);
        if cancel {
            while let Some(job) = self.queue.pop() {
                drop(job); // resolves its Task as Cancelled
                #[cfg(not(loom))]
                self.dropped.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            #[cfg(not(loom))]
            if self.idle_waiters.load(std::sync::atomic::Ordering::SeqCst) != 0 {
                self.notify_idle_waiters();
            }
        }
        {
            let _guard = lock(&self.blocked_lock);
            self.not_full.notify_all();
        }
        self.roster.wake_all();
    }

    pub(crate) fn running(&self) -> usize {
        self.workers.iter().filter(|worker| worker.is_busy()).count()
    }

    /// Work queued or running now: what the controller calls a pool that is not idle.
    #[cfg(not(loom))]
    pub(crate) fn has_work(&self) -> bool {
        self.queued() > 0 || self.running() > 0
    }

    /// Step B (`borrow.rs`): a task waits, no allowed worker sleeps; if every allowed worker
    /// is busy and a CPU is idle now, wake one worker beyond the target for it. Called by a
    /// submit that woke nobody and by an allowed worker that finished a task with more
    /// queued. Purely additive: the allowed workers still take the task if nobody is borrowed.
    pub(crate) fn maybe_borrow(&self) {
        let limit = self.borrow.limit().min(self.workers.len());
        let target = self.roster.target();
        if limit <= target || self.queue.is_empty() {
            return;
        }
        // An allowed worker that is not busy is spinning or about to pop: it will take it.
        if self.workers[..target].iter().any(|worker| !worker.is_busy()) {
            return;
        }
        if !self.borrow.submit_may_borrow(worker::nanos_since(self.epoch), self.is_own_worker()) {
            return;
        }
        if self
            .roster
            .wake_borrower(limit, |index| self.workers[index].borrowed.store(true, Ordering::SeqCst))
        {
            self.borrows.fetch_add(1, Ordering::Relaxed);
        }
    }
}

//! The friendly pool (the friendlypool paper's pool, made production-grade): a fixed set of OS
//! threads of which only the first `target` run tasks; a process-wide controller re-decides the
//! target every period from what the neighbours and the quota leave us (see [`Policy`]).
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | [`Pool`]: submission, metrics, shutdown |
//! | `error.rs` | the rejection policies ([`Full`]), [`BuildError`], [`TrySpawnError`], [`JoinTimeoutError`], [`ShutdownTimeout`] |
//! | `builder.rs` | [`Builder`]: the settings, their defaults and limits |
//! | `build.rs` | [`Builder::build`]: checking the settings, starting the workers, registering |
//! | `shared.rs` | the state shared by the pool, its workers and the controller; push, [`Full`], close |
//! | `snapshot.rs` | that state read into [`Metrics`], and the health alerts' window |
//! | `task.rs` | [`Task`] (joined, polled with `try_join`, awaited as a future) and [`JoinError`]: a task's result, panic or cancellation |
//! | `future_task.rs`, `future_task/` | [`Pool::spawn_future`]: a spawned future, its waker, where each poll runs; `state.rs`: its run state (no lost, no doubled wake-up) |
//! | `scope.rs` | [`Pool::scope`] and [`Scope`]: tasks that borrow from the stack; [`Pool::join`] |
//! | `idle.rs` | [`Pool::wait_idle`] (idle accounting) and [`Pool::shutdown_timeout`] |
//! | `queue.rs` | the bounded MPMC queue |
//! | `roster.rs` | the target, sleeping workers and wake-ups (protocol in `pool/README.md`) |
//! | `worker.rs` | the worker loop and per-worker counters |
//! | `borrow.rs` | borrowing an idle CPU between decisions (`policy/borrow.rs`) |
//! | `budget.rs` | the user-space CPU budget: slices, charging, parking at exhaustion, [`checkpoint`] |
//! | `host_tokens.rs` | the pool's side of the host CPU tokens (`crate::tokens`): take, give back, skip |
//! | `control.rs`, `control/` | the process-wide control thread: sampler → policy → `set_target` |
//! | `elastic.rs` | elastic pools: per-task measurement, creating and retiring threads |

mod borrow;
#[cfg(not(loom))]
mod budget;
mod build;
mod builder;
#[cfg(not(loom))]
pub(crate) mod control;
#[cfg(not(loom))]
mod elastic;
mod error;
#[cfg(not(loom))]
mod future_task;
#[cfg(not(loom))]
mod host_tokens;
#[cfg(not(loom))]
mod idle;
mod job;
mod park_with;
mod placement;
mod queue;
mod roster;
#[cfg(not(loom))]
mod scope;
mod shared;
mod snapshot;
mod task;
mod worker;

#[cfg(all(test, loom))]
#[path = "tests/loom_borrow.rs"]
mod loom_borrow;
#[cfg(all(test, loom))]
#[path = "tests/loom_budget.rs"]
mod loom_budget;
#[cfg(all(test, loom))]
#[path = "tests/loom_elastic.rs"]
mod loom_elastic;
// The executor is not compiled under loom; its run state is, for its model.
#[cfg(all(test, loom))]
#[path = "future_task/state.rs"]
mod future_state;
#[cfg(all(test, loom))]
#[path = "tests/loom_future.rs"]
mod loom_future;
#[cfg(all(test, loom))]
#[path = "tests/loom_protocol.rs"]
mod loom_protocol;
#[cfg(all(test, loom))]
#[path = "tests/loom_task.rs"]
mod loom_task;

use std::fmt;
use std::time::Duration;

use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::sync::{lock, thread, Mutex};
use crate::sync::{Arc, Ordering};
use shared::{Refused, Shared};
use task::{failed_task, task_pair_in, Job};

#[cfg(not(loom))]
pub use budget::checkpoint;
#[cfg(not(loom))]
pub(crate) use build::affinity_cpus;
pub use builder::{
    default_period, Builder, DEFAULT_QUEUE_CAPACITY, MAX_PERIOD, MIN_PERIOD, TASK_HISTOGRAMS_ENV,
};
pub use error::{BuildError, Full, JoinTimeoutError, ShutdownTimeout, TrySpawnError};
pub use park_with::Woken;
pub use placement::{background_current_thread, Background, Placement};
#[cfg(not(loom))]
pub use scope::Scope;
pub use task::{JoinError, Panic, Task};

/// A thread pool that runs only as many workers as its neighbours and its quota leave room for.
///
/// `Pool` is `Send + Sync`: share it behind an `Arc`. Dropping it is a graceful
/// [`shutdown`](Pool::shutdown): queued tasks run, then the threads are joined
/// ([`shutdown_timeout`](Pool::shutdown_timeout) waits at most a given time).
///
/// Besides `'static` tasks ([`spawn`](Pool::spawn), [`execute`](Pool::execute)), a pool runs
/// tasks that borrow from the caller's stack ([`scope`](Pool::scope), [`join`](Pool::join)),
/// futures ([`spawn_future`](Pool::spawn_future)), and [`wait_idle`](Pool::wait_idle) waits
/// for its tasks without shutting it down.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// let pool = cotenant::Pool::builder().build().unwrap();
/// let sum = Arc::new(AtomicU64::new(0));
/// for i in 1..=100u64 {
///     let sum = sum.clone();
///     pool.execute(move || {
///         sum.fetch_add(i, Ordering::Relaxed);
///     });
/// }
/// let fib = pool.spawn(|| (1..=20u64).product::<u64>());
/// assert_eq!(fib.join().unwrap(), 2_432_902_008_176_640_000);
/// pool.shutdown(); // runs what is queued, joins the threads
/// assert_eq!(sum.load(Ordering::Relaxed), 5050);
/// assert_eq!(pool.metrics().completed, 101);
/// ```
pub struct Pool {
    shared: Arc<Shared>,
    handles: Mutex<Vec<thread::JoinHandle<()>>>,
    threads: usize,
    policy: Policy,
    period: Duration,
    name: String,
    placement: Placement,
    #[cfg(not(loom))]
    control: Option<control::Registration>,
}

impl Pool {
    /// A builder with the defaults: adaptive policy, one thread per allowed CPU, one clock tick.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The address of the pool's state, which its tasks carry so that a join on one of its
    /// workers can run its queued tasks (`Task::join`); 0 under loom, which needs none.
    fn address(&self) -> usize {
        #[cfg(not(loom))]
        {
            Arc::as_ptr(&self.shared) as usize
        }
        #[cfg(loom)]
        {
            0
        }
    }

    /// Where the workers run: the CPU each is pinned to (`Builder::pin_workers`) and, for a
    /// background pool (`Builder::background`), whether they got `SCHED_IDLE`, nice 19, or
    /// neither.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Queues `f` and returns the handle to its result. When the queue is full, what happens
    /// follows the pool's [`Full`] policy; a task refused (full under `Reject`, or pool shut
    /// down) fails with [`JoinError::Rejected`].
    pub fn spawn<F, T>(&self, f: F) -> Task<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (task, completer) = task_pair_in(self.address());
        match self.shared.submit(Job::with_result(f, completer)) {
            Ok(()) => task,
            // The refused job was dropped, which resolved `task` as Cancelled; say Rejected.
            Err(error) => {
                drop(task);
                failed_task(error)
            }
        }
    }

    /// Runs `future` on the pool's workers and returns the handle to its output: a [`Task`],
    /// joined, or awaited from any executor (another future of this pool, say, or
    /// [`block_on`](fn@crate::block_on)).
    ///
    /// The pool's allowed workers poll it, so the target, the cooperation with the
    /// neighbours, the quota and the host CPU tokens apply to it exactly as to a closure (as
    /// for a closure, a full queue under [`Full::CallerRuns`] makes the submitter run its first
    /// poll). Each poll of a future counts as one task in [`metrics`](Pool::metrics)
    /// (`completed`, and the queue-wait and run-time histograms of a pool that times its
    /// tasks): a future that waits three times counts four. Its waker queues the next poll: woken while it is being polled, the future is polled again
    /// once that poll returns `Pending`; woken several times before its next poll, it is
    /// polled once; it is never polled by two threads at once.
    ///
    /// The first poll is queued under the pool's [`Full`] policy, as [`spawn`](Pool::spawn)
    /// queues a closure (refused: [`JoinError::Rejected`]). A poll after a wake-up is never
    /// refused for lack of room and never waits for it: the queue takes it past its capacity
    /// (a future has at most one poll queued, so this holds at most one poll per live future).
    /// A wake-up only queues a poll and returns, whichever thread it comes from (a tokio I/O
    /// thread, a timer, a task of this pool): it never blocks that thread and never polls there.
    ///
    /// A panic in the future fails its `Task` with [`JoinError::Panicked`] and is counted in
    /// [`Metrics::panicked`]. A future blocks its worker for as long as one poll runs: await,
    /// do not block (no `std::thread::sleep`, no [`block_on`](fn@crate::block_on) inside it).
    /// Futures that use tokio's sockets or timers need tokio's runtime entered while they are
    /// polled (the crate's README shows the pattern).
    ///
    /// Shutting down: [`shutdown`](Pool::shutdown) lets the polls already queued run; a future
    /// still waiting for a wake-up once the workers have exited is cancelled then, whoever
    /// holds its waker (a wake-up that might never come); [`shutdown_now`](Pool::shutdown_now)
    /// cancels the queued polls too. A cancelled future is dropped, and its `Task` fails with
    /// [`JoinError::Cancelled`]. A future whose every waker is dropped while the pool runs is
    /// dropped and cancelled the same way. [`wait_idle`](Pool::wait_idle) waits for the polls
    /// queued or running, not for futures waiting for a wake-up.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let pool = Arc::new(cotenant::Pool::builder().policy(cotenant::Policy::fixed(2)).build().unwrap());
    /// let answer = pool.spawn_future(async { 6 * 7 });
    /// assert_eq!(cotenant::block_on(answer).unwrap(), 42);
    /// // A future awaits other tasks of the pool without holding a worker while it waits.
    /// let inner = pool.clone();
    /// let total = pool.spawn_future(async move {
    ///     let sum = inner.spawn(|| (1..=10u64).sum::<u64>()).await?;
    ///     let more = inner.spawn_future(async { 45u64 }).await?;
    ///     Ok::<u64, cotenant::JoinError>(sum + more)
    /// });
    /// assert_eq!(cotenant::block_on(total).unwrap().unwrap(), 100);
    /// ```
    ///
    /// [`Metrics::panicked`]: crate::Metrics::panicked
    #[cfg(not(loom))]
    pub fn spawn_future<F>(&self, future: F) -> Task<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        future_task::spawn_future(&self.shared, self.address(), future)
    }

    /// Queues `f` without a handle. A panic in `f` is caught, counted in
    /// [`Metrics::panicked`] and handed to the pool's
    /// [`panic_handler`](Builder::panic_handler) if it has one; a refused task is counted in
    /// [`Metrics::rejected`].
    pub fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        let _ = self.shared.submit(Job::detached(f));
    }

    /// Queues `f` only if there is room now, whatever the [`Full`] policy says.
    ///
    /// ```
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).queue_capacity(1).build().unwrap();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// let blocker = pool.spawn(move || gate.recv().unwrap());
    /// // Wait until the worker holds the blocker, so the queue's one slot is free.
    /// while pool.metrics().running == 0 { std::thread::yield_now(); }
    /// let queued = pool.try_spawn(|| 1).unwrap();
    /// assert_eq!(pool.try_spawn(|| 2).unwrap_err(), cotenant::TrySpawnError::Full);
    /// release.send(()).unwrap();
    /// blocker.join().unwrap();
    /// assert_eq!(queued.join().unwrap(), 1);
    /// ```
    pub fn try_spawn<F, T>(&self, f: F) -> Result<Task<T>, TrySpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (task, completer) = task_pair_in(self.address());
        match self.shared.push(Job::with_result(f, completer)) {
            Ok(()) => Ok(task),
            Err(Refused::Full(_)) => {
                self.shared.rejected.fetch_add(1, Ordering::Relaxed);
                Err(TrySpawnError::Full)
            }
            Err(Refused::ShutDown(_)) => {
                self.shared.rejected.fetch_add(1, Ordering::Relaxed);
                Err(TrySpawnError::ShutDown)
            }
        }
    }

    /// Workers currently allowed to run (`1 <= target <= threads`).
    pub fn target(&self) -> usize {
        self.shared.roster.target()
    }

    /// The OS threads this pool started (for an elastic pool: its maximum; how many run now is
    /// in [`Metrics::elastic`]).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The policy deciding the target.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The controller's period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The worker name prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A snapshot of the pool's counters and gauges, with the health alerts in force
    /// ([`Metrics::alerts`]; each call is also a point of the alerts' sliding window).
    pub fn metrics(&self) -> Metrics {
        metrics_of(&self.shared)
    }

    /// A weak reference to the pool's state for a metrics registry
    /// ([`crate::metrics::Registry`]), which must not keep a dropped pool alive.
    #[cfg(not(loom))]
    pub(crate) fn downgrade(&self) -> WeakPool {
        WeakPool(Arc::downgrade(&self.shared))
    }

    /// Stops accepting tasks, lets the workers run everything already queued, and waits until
    /// every worker thread has exited (for the threads an elastic pool started after `build`:
    /// until each has left the pool; the OS thread may finish exiting just after). Idempotent, and safe to call from several threads.
    /// Called from one of this pool's own tasks, it waits for every worker but the calling
    /// one, which exits after that task returns (so tasks still queued behind it may run after
    /// `shutdown` returns).
    pub fn shutdown(&self) {
        self.stop(false);
    }

    /// Stops accepting tasks, cancels every task that has not started (their [`Task`]s fail
    /// with [`JoinError::Cancelled`]), lets running tasks finish, and joins the threads.
    pub fn shutdown_now(&self) {
        self.stop(true);
    }

    fn stop(&self, cancel: bool) {
        // While the queue drains the controller still takes back blocked holders' tokens, but
        // samples nothing (`Registration::drain`); it lets go of the pool once the workers are
        // gone (each clears its clock before it exits).
        #[cfg(not(loom))]
        if let Some(control) = &self.control {
            control.drain();
        }
        self.shared.close(cancel);
        let handles = std::mem::take(&mut *lock(&self.handles));
        let me = thread::current_id();
        for handle in handles {
            #[cfg(not(loom))]
            if handle.thread().id() == me {
                continue; // a task of this pool called shutdown: a thread cannot join itself
            }
            let _ = me;
            // A worker thread catches every panic of user code; nothing to report.
            let _ = handle.join();
        }
        // A concurrent or earlier caller may hold the handles: wait for every worker to exit
        // anyway (all but the calling one, if a task of this pool called us).
        let _ = self.shared.wait_workers_exited(None); // no deadline: never an `Err`
                                                       // Futures that still wait for a wake-up would wait for ever: cancelled (their polls
                                                       // that were queued have run, or were cancelled by `shutdown_now`).
        #[cfg(not(loom))]
        self.shared.futures.cancel_waiting();
        #[cfg(not(loom))]
        if let Some(control) = &self.control {
            control.unregister();
        }
    }
}

/// A pool's counters and gauges now, with the health alerts in force: what [`Pool::metrics`]
/// returns, and what a metrics registry reads through a [`WeakPool`] (each call is a point of
/// the alerts' window either way: a scrape is a look at the pool like any other).
fn metrics_of(shared: &Shared) -> Metrics {
    #[allow(unused_mut)]
    let mut metrics = shared.snapshot();
    #[cfg(not(loom))]
    {
        metrics.alerts = shared.observe_health(&metrics);
    }
    metrics
}

/// What a metrics registry ([`crate::metrics::Registry`]) keeps of a pool: a weak reference
/// to its state, so that registering a pool does not keep it alive. The state outlives the
/// [`Pool`] only while a worker thread is still exiting (an elastic pool's last threads) or
/// the controller is in the middle of a period; after that [`read`](Self::read) says `None`
/// and the registry forgets the pool.
#[cfg(not(loom))]
#[derive(Clone)]
pub(crate) struct WeakPool(std::sync::Weak<Shared>);

#[cfg(not(loom))]
impl WeakPool {
    /// The pool's metrics now (as [`Pool::metrics`]) and the host-token set it shares, if any;
    /// `None` once the pool is gone.
    pub(crate) fn read(&self) -> Option<(Metrics, Option<Arc<crate::tokens::HostTokens>>)> {
        let shared = self.0.upgrade()?;
        let metrics = metrics_of(&shared);
        let set = shared.host_tokens.as_ref().map(|tokens| Arc::clone(tokens.set()));
        Some((metrics, set))
    }

    /// Whether this is a reference to `pool`.
    pub(crate) fn is(&self, pool: &Pool) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&pool.shared))
    }

    /// Whether the pool is gone (its state dropped).
    pub(crate) fn is_gone(&self) -> bool {
        self.0.strong_count() == 0
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop(false);
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("threads", &self.threads)
            .field("target", &self.target())
            .field("policy", &self.policy)
            .finish()
    }
}

//! Waiting without shutting down ([`Pool::wait_idle`]) and shutting down within a limit
//! ([`Pool::shutdown_timeout`]).
//!
//! **Idle accounting.** `Shared::push` counts a task in `accepted` *before* it enters the queue;
//! each worker counts in its own `WorkerStats::finished` every task it took from the queue and
//! finished (ran, or dropped unrun under `shutdown_now`), after its other counters; `close`
//! counts in `dropped` the tasks it drops from the queue. The pool is idle when the two sides
//! match. The per-worker counters keep the finishing side off a shared cache line; the
//! accepting side shares one with the queue's own pushes anyway.
//!
//! A reader adds up the finished counts first and reads `accepted` after: every task counted
//! finished was counted accepted before it could be popped, so the difference never shows a
//! busy pool as idle (a task accepted in between only makes it look busier).
//!
//! **Waking.** A waiter registers in `idle_waiters`, then checks under `idle_lock` and waits on
//! `idle_changed`; a worker counts a finished task, then reads `idle_waiters` and, if it is not
//! 0, notifies under the lock. Both sides are `SeqCst`, so either the worker sees the waiter or
//! the waiter's check sees the task finished: no lost wake-up. A pool nobody waits on pays one
//! load per task. Waiters also look again every `IDLE_RECHECK`, which matters only to a waiter
//! on a worker of the pool, which must help with tasks queued while it waits.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::worker::{run_queued_while_waiting, tasks_running_here};
use super::{Pool, Shared, ShutdownTimeout};
use crate::sync::{lock, wait_timeout};

/// The longest a thread in `wait_idle` sleeps before it looks again unwoken: a backstop (every
/// finished task wakes it), which lets a waiter on a worker run tasks queued meanwhile.
const IDLE_RECHECK: Duration = Duration::from_millis(10);

impl Shared {
    /// Tasks accepted into the queue and not finished yet: queued or running.
    fn unfinished(&self) -> u64 {
        // The finished side first (see the module's comment).
        let finished = self.workers.iter().map(|worker| worker.finished.load(SeqCst)).sum::<u64>()
            + self.dropped.load(SeqCst);
        self.accepted.load(SeqCst).saturating_sub(finished)
    }
}

impl Pool {
    /// Blocks until the pool is idle: its queue empty and none of its tasks running. The pool
    /// keeps running and accepting tasks (unlike [`shutdown`](Pool::shutdown)); threads that
    /// keep submitting can keep it from ever being idle.
    ///
    /// Counts the tasks the pool took in ([`spawn`](Pool::spawn), [`execute`](Pool::execute),
    /// scoped tasks...), not those run on a submitting thread because the queue was full. Once
    /// it returns, everything those tasks did is visible to the caller, and so are their counts
    /// in [`metrics`](Pool::metrics) (`completed`, `panicked`; `running` may still count a
    /// worker for a moment, until it notices the queue is empty).
    ///
    /// Called from a task of this pool, it waits for every task but the ones running on its own
    /// thread (the caller, and any it is helping under), and runs queued tasks meanwhile, so that
    /// the pool's only allowed worker waiting for idleness does not wait for itself; as with
    /// [`Task::join`], not in budgeted or elastic pools, where it waits for the other workers.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(2)).build().unwrap();
    /// let done = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..100 {
    ///     let done = done.clone();
    ///     pool.execute(move || {
    ///         done.fetch_add(1, Ordering::Relaxed);
    ///     });
    /// }
    /// pool.wait_idle(); // every task has run, and the pool still takes more
    /// assert_eq!(done.load(Ordering::Relaxed), 100);
    /// assert_eq!(pool.metrics().completed, 100);
    /// pool.execute(|| {});
    /// pool.wait_idle();
    /// assert_eq!(pool.metrics().completed, 101);
    /// ```
    ///
    /// [`Task::join`]: super::Task::join
    pub fn wait_idle(&self) {
        let _ = self.wait_idle_until(None);
    }

    /// [`wait_idle`](Pool::wait_idle) for at most `timeout`: true if the pool was idle in time.
    /// On a worker of this pool it starts no queued task after the deadline, but one it started
    /// before runs to its end.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).build().unwrap();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// pool.execute(move || {
    ///     let _ = gate.recv();
    /// });
    /// assert!(!pool.wait_idle_timeout(Duration::from_millis(10)), "the task waits for the gate");
    /// release.send(()).unwrap();
    /// assert!(pool.wait_idle_timeout(Duration::from_secs(600)));
    /// ```
    #[must_use = "false means the pool was still busy when the time ran out"]
    pub fn wait_idle_timeout(&self, timeout: Duration) -> bool {
        // A deadline past what `Instant` can represent is no deadline.
        self.wait_idle_until(Instant::now().checked_add(timeout))
    }

    fn wait_idle_until(&self, deadline: Option<Instant>) -> bool {
        let shared = &*self.shared;
        // The tasks running on this thread, which cannot finish while it waits.
        let here = tasks_running_here(shared) as u64;
        let idle = || shared.unfinished() <= here;
        if idle() {
            return true;
        }
        let past_deadline = || deadline.is_some_and(|deadline| Instant::now() >= deadline);
        let help = || {
            if here > 0 {
                run_queued_while_waiting(self.address(), &|| idle() || past_deadline());
            }
        };
        help();
        shared.idle_waiters.fetch_add(1, SeqCst);
        let mut guard = lock(&shared.idle_lock);
        let idle_in_time = loop {
            if idle() {
                break true;
            }
            let pause = match deadline {
                None => IDLE_RECHECK,
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break false;
                    }
                    left.min(IDLE_RECHECK)
                }
            };
            guard = wait_timeout(&shared.idle_changed, guard, pause);
            if here > 0 && !shared.queue.is_empty() {
                // Not under the lock: the tasks run here finish and notify like any other.
                drop(guard);
                help();
                guard = lock(&shared.idle_lock);
            }
        };
        drop(guard);
        shared.idle_waiters.fetch_sub(1, SeqCst);
        idle_in_time
    }

    /// A graceful [`shutdown`](Pool::shutdown) that waits at most `timeout` for the workers:
    /// stops accepting tasks, lets the workers run what is queued, and returns `Ok` once every
    /// worker has exited (its stop hook run, its thread joined).
    ///
    /// When the time runs out first, [`ShutdownTimeout`] says how many workers were still
    /// running and how many tasks were still queued. Nothing is killed and nothing queued is
    /// dropped: a running task cannot be interrupted (its thread goes on), and the queued tasks
    /// still run. Dropping the error **detaches** the pool: the workers finish the queue in the
    /// background and a thread of the pool's own (`<name>-shutdown`) then joins them and
    /// releases the pool. Or take the pool back with [`ShutdownTimeout::into_pool`] to wait
    /// again, or to cancel what is still queued with [`shutdown_now`](Pool::shutdown_now).
    ///
    /// ```
    /// use std::sync::mpsc::channel;
    /// use std::time::Duration;
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).build().unwrap();
    /// let (started, has_started) = channel::<()>();
    /// let (release, gate) = channel::<()>();
    /// pool.execute(move || {
    ///     started.send(()).unwrap();
    ///     let _ = gate.recv();
    /// });
    /// let queued = pool.spawn(|| 42); // behind the blocked task on the only worker
    /// has_started.recv().unwrap();
    /// let late = pool.shutdown_timeout(Duration::from_millis(10)).unwrap_err();
    /// assert_eq!((late.running_workers(), late.queued_tasks()), (1, 1));
    /// let pool = late.into_pool(); // to wait again (dropping `late` would detach the pool)
    /// release.send(()).unwrap();
    /// pool.shutdown_timeout(Duration::from_secs(600)).unwrap();
    /// assert_eq!(queued.join().unwrap(), 42, "the queued task still ran");
    /// ```
    pub fn shutdown_timeout(self, timeout: Duration) -> Result<(), ShutdownTimeout> {
        let deadline = Instant::now().checked_add(timeout);
        // As `stop` does: the controller stops sampling the pool before its workers may exit.
        if let Some(control) = &self.control {
            control.drain();
        }
        self.shared.close(false);
        if let Err(running) = self.shared.wait_workers_exited(deadline) {
            let queued = self.shared.queued();
            return Err(ShutdownTimeout::new(self, running, queued));
        }
        // Every worker has left the pool: this joins their threads and unregisters at once.
        self.stop(false);
        Ok(())
    }

    /// Finishes a graceful shutdown in the background (`ShutdownTimeout`'s drop): a thread of
    /// the pool's own drops it, which waits for the workers and releases the pool.
    pub(super) fn detach(self) {
        let name = format!("{}-shutdown", self.name);
        let pool_name = self.shared.name.clone();
        // Shared with the thread so that, if it cannot start, the pool is not dropped (and
        // waited for) here along with the closure.
        let slot = Arc::new(Mutex::new(Some(self)));
        let theirs = slot.clone();
        let started = std::thread::Builder::new().name(name).spawn(move || {
            let pool = lock(&theirs).take();
            drop(pool);
        });
        if let Err(error) = started {
            tracing::warn!(
                pool = %pool_name,
                %error,
                "cotenant: cannot start a thread to finish a pool's shutdown; its workers finish the queue on their own"
            );
            // The workers hold the pool's state and exit once the queue is empty; only the
            // controller's registration of the pool stays, until the process exits.
            if let Some(pool) = lock(&slot).take() {
                std::mem::forget(pool);
            }
        }
    }
}

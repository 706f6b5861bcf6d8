//! Futures on the pool's workers ([`Pool::spawn_future`](super::Pool::spawn_future)): a
//! spawned future, its run state and its waker; a poll is one job of the pool's queue.
//!
//! A spawned future lives in a `FutureTask` behind an `Arc`: its [`RunState`] (the protocol of
//! `future_task/state.rs`, checked by the loom model `pool/tests/loom_future.rs`), the future
//! itself with the completer of its [`Task`], and a weak handle to the pool. The task's waker
//! is that `Arc` (`std::task::Wake`): a wake-up that finds the task idle queues one job that
//! polls it once; a wake-up during a poll makes the poller queue it again when the poll returns
//! `Pending`; any other wake-up is already covered by the poll to come. So a woken future is
//! polled again, never twice at once, and never lost.
//!
//! **Where a poll goes.** The first poll is submitted like a closure (`Shared::submit`: the
//! pool's [`Full`](super::Full) policy). A poll after a wake-up is never refused for lack of
//! room and never waits for it, since the future was already accepted: `Shared::push_woken`
//! queues it in the queue's overflow list when the queue is full (`queue.rs`). So a wake-up
//! from any thread (a tokio I/O driver, a timer, a task of this pool or another) only queues a
//! job and returns: it never blocks its caller and never polls inline, so polls never nest by
//! way of a wake-up.
//!
//! **Cancellation.** The job carries a `Scheduled` guard, the right to poll the task once;
//! dropped unrun (the pool shut down before the poll was queued, or `shutdown_now` drained the
//! queue), it marks the task done and drops the future, whose completer then resolves the
//! `Task` as [`JoinError::Cancelled`](super::JoinError::Cancelled). A future nobody can wake any more (its last waker
//! dropped) is dropped with its `FutureTask`, with the same result. The pool keeps a list of
//! its unfinished futures (`LiveFutures`): its shutdown, once the workers have exited, cancels
//! those still waiting for a wake-up, whoever holds their wakers (one might never come).
//!
//! **Metrics.** A poll is a job like any other, so the pool's task counters count it and its
//! histograms (when the pool times its tasks) time it; on top, `Shared::future_polls` counts
//! the polls that started (each future holds a handle to that counter) and
//! `Shared::future_wakeups` the wake-ups that queued one (`requeue`).
//!
//! **Why a weak handle to the pool.** A waker can outlive the pool (kept by a timer, a socket,
//! another runtime); a strong one would keep the pool's state, and its entry in a metrics
//! registry, alive after the pool was dropped. A wake-up after that cancels the task.

mod state;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};

use super::shared::Shared;
use super::task::{failed_task, task_pair_in, Completer, Job, Outcome};
use super::Task;
use crate::sync::{CachePadded, Ordering};
use state::{AfterPoll, RunState, WakeAction};

/// A spawned future and what it needs to be polled, woken and finished.
struct FutureTask<F: Future> {
    state: RunState,
    /// The pool that polls it (weak: see the module's comment).
    pool: Weak<Shared>,
    /// The pool's count of futures' polls (`Shared::future_polls`), kept here so that a poll
    /// need not upgrade `pool` to count itself.
    polls: Arc<CachePadded<std::sync::atomic::AtomicU64>>,
    /// The future and its `Task`'s completer, until it completes, panics or is cancelled.
    /// Locked only by the thread that owns the task's poll (RUNNING) or its cancellation
    /// (SCHEDULED), so never contended.
    running: Mutex<Option<Running<F>>>,
}

/// A future that has not finished, and the completer of its `Task`.
struct Running<F: Future> {
    /// Boxed so that it stays pinned without unsafe code (the `Arc` would pin it too, but
    /// reaching it through the lock would need `Pin::new_unchecked`). Declared first: dropped
    /// before the completer, so a cancelled `Task` resolves after the future's own drop ran.
    future: Pin<Box<F>>,
    completer: Completer<F::Output>,
}

/// Queues `future` on the pool whose state is `shared` (at `address`, for `Task::join`'s help)
/// under the pool's [`Full`](super::Full) policy, as `Pool::spawn` does a closure.
pub(super) fn spawn_future<F>(shared: &Arc<Shared>, address: usize, future: F) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (task, completer) = task_pair_in(address);
    let spawned = Arc::new(FutureTask {
        state: RunState::scheduled(),
        pool: Arc::downgrade(shared),
        polls: Arc::clone(&shared.future_polls),
        running: Mutex::new(Some(Running { future: Box::pin(future), completer })),
    });
    shared.futures.insert(&spawned);
    match shared.submit(Scheduled::into_job(spawned)) {
        Ok(()) => task,
        // The refused job was dropped, which resolved `task` as Cancelled; say Rejected.
        Err(error) => {
            drop(task);
            failed_task(error)
        }
    }
}

impl<F: Future> FutureTask<F> {
    /// Marks the task done and drops the future (outside the lock: its drop may wake or drop
    /// wakers of this very task), then the completer, which resolves the `Task` as
    /// `Cancelled`. Called only by the owner of the task's next poll (a `Scheduled` dropped
    /// unrun, or a waker that found the pool gone).
    fn cancel(&self) {
        self.state.finish();
        self.leave();
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner).take();
        // A future whose drop panics: the completer, a later field, is dropped all the same
        // while unwinding, so the Task still resolves. The panic goes no further: this runs
        // where a job is dropped (a shutdown, a refused wake-up), not inside a task.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(running)));
    }
}

impl<F: Future> FutureTask<F> {
    /// Leaves the pool's list of live futures (`LiveFutures`): it is done.
    fn leave(&self) {
        if let Some(shared) = self.pool.upgrade() {
            shared.futures.remove(self as *const Self as *const () as usize);
        }
    }
}

impl<F: Future> Drop for FutureTask<F> {
    /// The last handle went (no waker left, no poll queued) with the future unfinished: it is
    /// dropped, and its completer resolves the `Task` as cancelled. A panic in the future's
    /// drop goes no further, as in `cancel`: this runs wherever the last waker is dropped
    /// (inside a poll of another future, or in another runtime).
    fn drop(&mut self) {
        self.leave();
        let running = self.running.get_mut().unwrap_or_else(PoisonError::into_inner).take();
        let _ = catch_unwind(AssertUnwindSafe(move || drop(running)));
    }
}

impl<F> Wake for FutureTask<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn wake(self: Arc<Self>) {
        if self.state.wake() == WakeAction::Enqueue {
            requeue(self);
        }
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.wake() == WakeAction::Enqueue {
            requeue(Arc::clone(self));
        }
    }
}

/// The right to poll a task once, held by whoever moved it to SCHEDULED and carried by the
/// job that polls it. Dropped without being run, it cancels the task (see the module's comment).
/// (An `Option` only so that `run` can take the task out; it is `Some` until then.)
struct Scheduled<F: Future>(Option<Arc<FutureTask<F>>>);

impl<F> Scheduled<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// The job that polls `task` once (one word of closure: stored in the queue's slot).
    fn into_job(task: Arc<FutureTask<F>>) -> Job {
        let scheduled = Scheduled(Some(task));
        Job::from_fn(move || scheduled.run())
    }

    fn run(mut self) -> Outcome {
        match self.0.take() {
            Some(task) => poll_once(&task),
            None => Outcome::Completed,
        }
    }
}

impl<F: Future> Drop for Scheduled<F> {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.cancel();
        }
    }
}

/// Polls `task` once with its own waker, and finishes it if it completed or panicked.
fn poll_once<F>(task: &Arc<FutureTask<F>>) -> Outcome
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if !task.state.start() {
        return Outcome::Completed; // not produced by the protocol: only a SCHEDULED task is polled
    }
    // Counted as it starts (`Metrics::future_polls`), through the counter's own handle.
    task.polls.fetch_add(1, Ordering::Relaxed);
    let waker = Waker::from(Arc::clone(task));
    let mut cx = Context::from_waker(&waker);
    // The future's panics are caught inside the lock, so none poisons it; taken over anyway if
    // it is (what it guards is only ever replaced whole).
    let mut running = task.running.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(current) = running.as_mut() else {
        task.state.finish();
        return Outcome::Completed; // not produced by the protocol: a task leaves only when done
    };
    let polled = catch_unwind(AssertUnwindSafe(|| current.future.as_mut().poll(&mut cx)));
    let result = match polled {
        Ok(Poll::Pending) => {
            // Released first: once the state says IDLE, a waker may queue a poll at once.
            drop(running);
            if task.state.after_pending() == AfterPoll::Requeue {
                requeue(Arc::clone(task)); // woken during the poll: polled again, once
            }
            return Outcome::Completed;
        }
        Ok(Poll::Ready(value)) => Ok(value),
        Err(payload) => Err(payload),
    };
    let finished = running.take();
    drop(running);
    task.state.finish(); // before the future's drop: a wake-up from that drop does nothing
    task.leave();
    let Some(Running { future, completer }) = finished else {
        return Outcome::Completed; // unreachable: `current` was there
    };
    // The future is dropped before its Task resolves, as a closure's captures are gone when
    // its Task resolves; a panic in that drop is the task's panic, as it would be a closure's.
    let result = match (result, catch_unwind(AssertUnwindSafe(move || drop(future)))) {
        (Ok(value), Ok(())) => Ok(value),
        (Ok(value), Err(payload)) => {
            drop(value);
            Err(payload)
        }
        // The poll's panic is the one reported; a second one, from the drop, is dropped.
        (Err(payload), _) => Err(payload),
    };
    completer.resolve_run(result)
}

/// Queues the poll of a woken task (the caller owns that poll: it moved the task to
/// SCHEDULED); cancels it if its pool is gone.
///
/// Both wake-ups that queue a poll come here, and nothing else does: a wake-up of an idle task
/// (`WakeAction::Enqueue`) and one during a poll (`AfterPoll::Requeue`). So this is where they
/// are counted (`Metrics::future_wakeups`), before the poll is handed on, so that whoever sees
/// that poll finished (`wait_idle`, `Task::join`) sees the wake-up counted too. Not once the
/// pool is gone: there is nothing left to count in.
fn requeue<F>(task: Arc<FutureTask<F>>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match task.pool.upgrade() {
        Some(shared) => {
            shared.future_wakeups.fetch_add(1, Ordering::Relaxed);
            route(&shared, Scheduled::into_job(task));
        }
        // The pool was dropped and its workers have exited: nothing will poll the task again.
        None => task.cancel(),
    }
}

/// Queues a woken task's poll (see the module's comment); drops it (which cancels the task)
/// if the pool has shut down.
fn route(shared: &Shared, job: Job) {
    if let Err(job) = shared.push_woken(job) {
        shared.rejected.fetch_add(1, Ordering::Relaxed);
        drop(job);
    }
}

/// A live future's side that the pool's shutdown sees (`LiveFutures::cancel_waiting`),
/// whatever its type.
trait LiveFuture: Send + Sync {
    /// If the future waits for a wake-up (IDLE), cancels it now: its `Task` resolves as
    /// `Cancelled`. Any other state already has an owner that will poll or cancel it.
    fn cancel_waiting(&self);
}

impl<F> LiveFuture for FutureTask<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn cancel_waiting(&self) {
        // The transition of a wake-up: whoever moves an idle task to SCHEDULED owns its next
        // poll, which here is its cancellation (a wake-up racing with this finds it taken).
        if self.state.wake() == WakeAction::Enqueue {
            self.cancel();
        }
    }
}

/// The futures of a pool that have not finished, so that its shutdown can cancel those that
/// wait for a wake-up that may never come (a waker kept by a long-lived object, or by the
/// future itself): without it, their `Task`s would never resolve. Keyed by the address of
/// their `FutureTask`; one lock at a future's spawn and at its end (futures only).
pub(crate) struct LiveFutures(Mutex<std::collections::HashMap<usize, Weak<dyn LiveFuture>>>);

impl LiveFutures {
    pub(crate) fn new() -> LiveFutures {
        LiveFutures(Mutex::new(std::collections::HashMap::new()))
    }

    fn insert<F>(&self, task: &Arc<FutureTask<F>>)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let key = Arc::as_ptr(task) as *const () as usize;
        let weak: Weak<dyn LiveFuture> = Arc::downgrade(task) as Weak<FutureTask<F>>;
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(key, weak);
    }

    fn remove(&self, key: usize) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
    }

    /// Called by the pool's shutdown once its workers have exited: every future still waiting
    /// for a wake-up is cancelled (outside the lock: a future's drop may wake or drop wakers).
    pub(crate) fn cancel_waiting(&self) {
        let live: Vec<Weak<dyn LiveFuture>> =
            self.0.lock().unwrap_or_else(PoisonError::into_inner).drain().map(|(_, weak)| weak).collect();
        for future in live.iter().filter_map(Weak::upgrade) {
            future.cancel_waiting();
        }
    }
}

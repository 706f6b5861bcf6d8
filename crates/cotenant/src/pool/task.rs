//! A task's result slot: [`Task`] (the caller's end) and the completer the job carries (the
//! worker's end). Every accepted task resolves its `Task` exactly once: with its value, with its
//! panic, or with [`JoinError::Cancelled`] when the job is dropped without running (queue
//! drained by `shutdown_now`), because the completer reports that from `Drop`. The result is
//! handed over once: a `Task` polled to `Ready` as a future and then joined (or polled again)
//! gets [`JoinError::AlreadyTaken`], never a panic.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

pub(crate) use super::job::Job;
use super::JoinTimeoutError;
use crate::sync::{lock, wait, wait_timeout, Arc, AtomicBool, Condvar, Mutex, Ordering};
use crate::wait::{spin_then_yield, Backoff};

/// Why a [`Task`] has no value.
///
/// `Send + Sync`, so `?` turns it into an `anyhow::Error` or a
/// `Box<dyn Error + Send + Sync>`: a panic's payload, which is only `Send`, is kept behind a
/// lock ([`Panic`]).
#[non_exhaustive]
pub enum JoinError {
    /// The task panicked.
    Panicked(Panic),
    /// The task was accepted but did not finish: `shutdown_now` removed it from the queue, or a
    /// spawned future was dropped before it completed (its pool shut down while it waited for a
    /// wake-up). (Dropping a pool is a graceful shutdown: queued tasks run.)
    Cancelled,
    /// The pool refused the task: its queue was full and its [`Full`](crate::Full) policy is
    /// `Reject`, or the pool was shutting down.
    Rejected,
    /// The result was already handed over: the `Task` was polled as a future until it returned
    /// `Ready` (which gives the result away), and then joined or polled again.
    AlreadyTaken,
}

/// A task's panic: its message, when the payload was a string (as `panic!`'s is), and the
/// payload itself (what `std::panic::catch_unwind` returned), to resume the panic with
/// `std::panic::resume_unwind(panic.into_payload())`.
pub struct Panic {
    message: Option<String>,
    // A `Mutex` only to make `Panic` `Sync` (the payload is `Send`, not `Sync`); it is never
    // locked but through `into_payload`, which owns it.
    payload: std::sync::Mutex<Box<dyn Any + Send + 'static>>,
}

impl Panic {
    pub(crate) fn new(payload: Box<dyn Any + Send + 'static>) -> Panic {
        let message = payload
            .downcast_ref::<&'static str>()
            .map(|message| (*message).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned());
        Panic { message, payload: std::sync::Mutex::new(payload) }
    }

    /// The panic message, when the payload was a string.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The payload, as `std::panic::catch_unwind` returned it.
    pub fn into_payload(self) -> Box<dyn Any + Send + 'static> {
        // A poisoned lock still holds the payload (nothing runs while it is held).
        self.payload.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What `Debug` shows for a panic whose payload is not a string.
const NON_STRING_PAYLOAD: &str = "<non-string payload>";

impl fmt::Debug for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Panic").field(&self.message().unwrap_or(NON_STRING_PAYLOAD)).finish()
    }
}

impl JoinError {
    /// The panic message, when the task panicked with a string (as `panic!` does).
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(panic) => panic.message(),
            _ => None,
        }
    }

    /// The panic's payload, when the task panicked (to resume it with
    /// `std::panic::resume_unwind`).
    pub fn into_panic(self) -> Option<Box<dyn Any + Send + 'static>> {
        match self {
            JoinError::Panicked(panic) => Some(panic.into_payload()),
            _ => None,
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => {
                f.debug_tuple("Panicked").field(&self.panic_message().unwrap_or(NON_STRING_PAYLOAD)).finish()
            }
            JoinError::Cancelled => f.write_str("Cancelled"),
            JoinError::Rejected => f.write_str("Rejected"),
            JoinError::AlreadyTaken => f.write_str("AlreadyTaken"),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => match self.panic_message() {
                Some(message) => write!(f, "the task panicked: {message}"),
                None => f.write_str("the task panicked"),
            },
            JoinError::Cancelled => f.write_str("the task was cancelled before it ran"),
            JoinError::Rejected => f.write_str("the pool rejected the task (queue full or shutting down)"),
            JoinError::AlreadyTaken => f.write_str(
                "the task's result was already taken: it was awaited or polled to completion before this join or poll",
            ),
        }
    }
}

impl std::error::Error for JoinError {}

enum State<T> {
    /// `joiner_waiting`: `join` sleeps on the condition variable; `waker`: the task was polled
    /// as a future, and this wakes its executor.
    Pending {
        joiner_waiting: bool,
        waker: Option<Waker>,
    },
    Done(Result<T, JoinError>),
    Taken,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    /// The address of the pool's `Shared` the task was queued on (0: none), so that a join on
    /// one of that pool's workers can run its queued tasks meanwhile (`Task::join`).
    #[cfg_attr(loom, allow(dead_code))]
    pool: usize,
    done: Condvar,
    /// Set (after `state`) when the task is resolved: lets `join` spin on one atomic before it
    /// pays for sleeping on the condition variable.
    resolved: AtomicBool,
}

/// Spin rounds `join` tries before sleeping: round `k` busy-waits `2^k` hints, then a few
/// yields. A short task resolves within them, and sleeping on a futex and being woken costs
/// several microseconds, more than the task itself (measured by `pool-bench roundtrip`).
pub(super) const JOIN_SPIN_ROUNDS: u32 = 8;
pub(super) const JOIN_YIELD_ROUNDS: u32 = 8;

/// The handle to a spawned task's result.
///
/// `join` blocks until the task has run (or was cancelled). Dropping a `Task` detaches it: the
/// task still runs.
///
/// ```
/// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(2)).build().unwrap();
/// let task = pool.spawn(|| 6 * 7);
/// assert_eq!(task.join().unwrap(), 42);
/// let failed = pool.spawn(|| -> u32 { panic!("boom") });
/// assert_eq!(failed.join().unwrap_err().panic_message(), Some("boom"));
/// pool.shutdown();
/// ```
#[must_use = "a Task does nothing unless joined; drop it to detach"]
pub struct Task<T> {
    slot: Arc<Slot<T>>,
}

impl<T> Task<T> {
    /// Waits for the task and returns its value, or why there is none.
    ///
    /// Called from a task running on a worker of the pool this task was spawned on, it first
    /// runs tasks queued in that pool while this one is not done (as rayon's `join` helps), so
    /// that a task joining another of its own pool does not wait for a worker that may not come
    /// (the pool's target at 1, say). The calling task is then delayed by the tasks it runs
    /// meanwhile, and they run on its thread: a task that holds a lock across `join` may find
    /// a queued task that wants the same lock running under it (as with rayon), so release
    /// locks before joining. Not in budgeted or elastic pools, and at most 64 such joins deep
    /// on one worker; beyond, a join waits for another worker.
    ///
    /// The result is handed over once: after the `Task` was polled as a future until it
    /// returned `Ready`, `join` returns [`JoinError::AlreadyTaken`] at once.
    pub fn join(self) -> Result<T, JoinError> {
        let backoff = Backoff::default().spins(JOIN_SPIN_ROUNDS).yields(JOIN_YIELD_ROUNDS);
        spin_then_yield(&backoff, || self.slot.resolved.load(Ordering::Acquire));
        match self.wait_until(None) {
            Ok(value) => Ok(value),
            Err(JoinTimeoutError::Failed(error)) => Err(error),
            Err(JoinTimeoutError::Timeout(_)) => unreachable!("no deadline, no timeout"),
        }
    }

    /// Whether the task has finished (run, panicked or been cancelled), so `join` will not block.
    pub fn is_finished(&self) -> bool {
        !matches!(*lock(&self.slot.state), State::Pending { .. })
    }

    /// The result if the task has finished, without waiting: `None` while it is queued or
    /// running (the `Task` stays usable: try again, [`join`](Task::join) or await it).
    ///
    /// `Some` hands the result over, as a [`join`](Task::join) or a poll to `Ready` would: a
    /// later `try_join`, `join` or poll gets [`JoinError::AlreadyTaken`], and so does a
    /// `try_join` after the task was polled to `Ready` as a future. (The idiom of
    /// `std::thread::JoinHandle::is_finished` followed by `join`, in one call that cannot race.)
    ///
    /// ```
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).build().unwrap();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// let mut task = pool.spawn(move || gate.recv().map(|()| 7));
    /// assert!(task.try_join().is_none(), "still waiting for the gate");
    /// release.send(()).unwrap();
    /// let value = loop {
    ///     match task.try_join() {
    ///         Some(result) => break result.unwrap().unwrap(),
    ///         None => std::thread::yield_now(), // a real caller does other work here
    ///     }
    /// };
    /// assert_eq!(value, 7);
    /// assert!(matches!(task.try_join(), Some(Err(cotenant::JoinError::AlreadyTaken))));
    /// ```
    #[must_use = "Some(result) hands the result over: a later try_join or join gets AlreadyTaken"]
    pub fn try_join(&mut self) -> Option<Result<T, JoinError>> {
        // One atomic load while the task runs: callers poll this in a loop.
        if !self.slot.resolved.load(Ordering::Acquire) {
            return None;
        }
        let mut state = lock(&self.slot.state);
        match &*state {
            State::Pending { .. } => None,
            State::Done(_) => match std::mem::replace(&mut *state, State::Taken) {
                State::Done(result) => Some(result),
                _ => unreachable!("matched Done just above"),
            },
            State::Taken => Some(Err(JoinError::AlreadyTaken)),
        }
    }

    /// Waits at most `timeout` for the task, and gives the `Task` back if it has not finished
    /// by then ([`JoinTimeoutError::Timeout`]), so that nothing is lost: wait again, await it,
    /// or drop it to detach the task (it still runs). A task that finished without a value
    /// gives [`JoinTimeoutError::Failed`] with the [`JoinError`]. A zero `timeout` only looks.
    ///
    /// Called from a task of the same pool, it runs queued tasks meanwhile, as
    /// [`join`](Task::join) does; it starts no new one after the deadline, but one it started
    /// before runs to its end, so the call may return later than `timeout` by up to that
    /// task's length.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cotenant::pool::JoinTimeoutError;
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).build().unwrap();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// let task = pool.spawn(move || gate.recv().map(|()| "done"));
    /// let task = match task.join_timeout(Duration::from_millis(1)) {
    ///     Err(JoinTimeoutError::Timeout(task)) => task, // not finished: the handle comes back
    ///     other => panic!("the task cannot have finished: {other:?}"),
    /// };
    /// release.send(()).unwrap();
    /// assert_eq!(task.join_timeout(Duration::from_secs(600)).unwrap().unwrap(), "done");
    /// ```
    pub fn join_timeout(self, timeout: Duration) -> Result<T, JoinTimeoutError<T>> {
        // No deadline when `now + timeout` cannot be represented: that is waiting for good.
        self.wait_until(Instant::now().checked_add(timeout))
    }

    /// `join` (no deadline) and `join_timeout`: helps the pool when called on one of its
    /// workers, then waits for the result or the deadline.
    fn wait_until(self, deadline: Option<Instant>) -> Result<T, JoinTimeoutError<T>> {
        #[cfg(not(loom))]
        let help = || {
            super::worker::run_queued_while_waiting(self.slot.pool, &|| {
                self.slot.resolved.load(Ordering::Acquire)
                    || deadline.is_some_and(|deadline| Instant::now() >= deadline)
            })
        };
        #[cfg(not(loom))]
        help();
        // On a worker of the task's pool, the wait is cut into `HELP_RECHECK` steps with help in
        // between: nothing else would run tasks queued meanwhile by the one this waits for.
        #[cfg(not(loom))]
        let step =
            super::worker::rechecks_while_waiting(self.slot.pool).then_some(super::worker::HELP_RECHECK);
        #[cfg(loom)]
        let step: Option<std::time::Duration> = None;
        let mut state = lock(&self.slot.state);
        loop {
            match &mut *state {
                State::Pending { joiner_waiting, .. } => {
                    let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
                    if left.is_some_and(|left| left.is_zero()) {
                        // Nobody waits any more: spare the resolver a needless notify.
                        *joiner_waiting = false;
                        drop(state);
                        return Err(JoinTimeoutError::Timeout(self));
                    }
                    *joiner_waiting = true;
                    state = match (left, step) {
                        (None, None) => wait(&self.slot.done, state),
                        (Some(left), None) => wait_timeout(&self.slot.done, state, left),
                        (left, Some(step)) => {
                            let waited = wait_timeout(
                                &self.slot.done,
                                state,
                                left.map_or(step, |left| left.min(step)),
                            );
                            drop(waited);
                            #[cfg(not(loom))]
                            help();
                            lock(&self.slot.state)
                        }
                    };
                }
                State::Done(_) => {
                    return match std::mem::replace(&mut *state, State::Taken) {
                        State::Done(result) => result.map_err(JoinTimeoutError::Failed),
                        _ => unreachable!("matched Done just above"),
                    };
                }
                State::Taken => return Err(JoinTimeoutError::Failed(JoinError::AlreadyTaken)),
            }
        }
    }
}

/// A `Task` is also a future, for async code: `pool.spawn(f).await` runs `f` on the pool's
/// threads and wakes the awaiting task when it is done, with any executor (what tokio's
/// `spawn_blocking(f).await` does, on a pool that leaves room for its neighbours).
/// Dropping the future detaches the task: it still runs. The result is handed over once:
/// polling it again after it returned `Ready`, or joining it then, gives
/// [`JoinError::AlreadyTaken`] (no panic).
///
/// ```
/// # async fn example(pool: &cotenant::Pool) -> Result<u64, cotenant::JoinError> {
/// let sum = pool.spawn(|| (1..=10u64).sum::<u64>()).await?;
/// # Ok(sum)
/// # }
/// ```
impl<T> Future for Task<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = lock(&self.slot.state);
        match &mut *state {
            State::Pending { waker, .. } => {
                match waker {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Done(_) => match std::mem::replace(&mut *state, State::Taken) {
                State::Done(result) => Poll::Ready(result),
                _ => unreachable!("matched Done just above"),
            },
            State::Taken => Poll::Ready(Err(JoinError::AlreadyTaken)),
        }
    }
}

impl<T> fmt::Debug for Task<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task").field("finished", &self.is_finished()).finish()
    }
}

/// The worker's end of a [`Task`]: resolves it once; resolves it `Cancelled` if dropped unused.
pub(crate) struct Completer<T> {
    slot: Option<Arc<Slot<T>>>,
}

impl<T> Completer<T> {
    /// Resolves with what a run of the task gave: its value, or the payload of its panic;
    /// says which for the worker's counters.
    pub(crate) fn resolve_run(self, run: Result<T, Box<dyn Any + Send + 'static>>) -> Outcome {
        match run {
            Ok(value) => {
                self.resolve(Ok(value));
                Outcome::Completed
            }
            Err(payload) => {
                self.resolve(Err(JoinError::Panicked(Panic::new(payload))));
                Outcome::Panicked
            }
        }
    }

    pub(crate) fn resolve(mut self, result: Result<T, JoinError>) {
        if let Some(slot) = self.slot.take() {
            resolve(&slot, result);
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            resolve(&slot, Err(JoinError::Cancelled));
        }
    }
}

fn resolve<T>(slot: &Slot<T>, result: Result<T, JoinError>) {
    let mut state = lock(&slot.state);
    let (joiner_waiting, waker) = match std::mem::replace(&mut *state, State::Done(result)) {
        State::Pending { joiner_waiting, waker } => (joiner_waiting, waker),
        State::Done(_) | State::Taken => unreachable!("a task resolves once"),
    };
    slot.resolved.store(true, Ordering::Release);
    drop(state);
    // Waking costs a system call; skip it when nobody waits yet (join sets the flag, and poll
    // stores its waker, under the same lock before waiting, so neither can miss this store).
    if joiner_waiting {
        slot.done.notify_one();
    }
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// A new result slot: the `Task` for the caller, the `Completer` for the job.
pub(crate) fn task_pair<T>() -> (Task<T>, Completer<T>) {
    task_pair_in(0)
}

/// [`task_pair`] for a task queued on the pool whose `Shared` is at `pool`.
pub(crate) fn task_pair_in<T>(pool: usize) -> (Task<T>, Completer<T>) {
    let slot = Arc::new(Slot {
        pool,
        state: Mutex::new(State::Pending { joiner_waiting: false, waker: None }),
        done: Condvar::new(),
        resolved: AtomicBool::new(false),
    });
    (Task { slot: slot.clone() }, Completer { slot: Some(slot) })
}

/// What a job reports to the worker that ran it, for the pool's counters.
#[derive(Debug)]
pub(crate) enum Outcome {
    Completed,
    /// It panicked, and the payload went where its owner looks for it (its `Task`, its scope).
    Panicked,
    /// A detached task (`Pool::execute`) panicked: nobody holds a handle to it, so the payload
    /// goes to the pool's panic handler if it has one (`Shared::run_job`), else it is dropped.
    Unhandled(Box<dyn Any + Send + 'static>),
}

// The constructors of the jobs that carry a `Task`'s completer or a detached closure; `Job`
// itself, and how it stores its closure, is `job.rs`.
impl Job {
    /// A job that runs `f` and resolves `completer` with its value or panic.
    pub(crate) fn with_result<F, T>(f: F, completer: Completer<T>) -> Job
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        Job::from_fn(move || completer.resolve_run(catch_unwind(AssertUnwindSafe(f))))
    }

    /// A fire-and-forget job: a panic is counted by the pool, and its payload handed to the
    /// pool's panic handler (`Builder::panic_handler`) or dropped.
    pub(crate) fn detached<F>(f: F) -> Job
    where
        F: FnOnce() + Send + 'static,
    {
        Job::from_fn(move || match catch_unwind(AssertUnwindSafe(f)) {
            Ok(()) => Outcome::Completed,
            Err(payload) => Outcome::Unhandled(payload),
        })
    }
}

/// A `Task` that has already failed with `error` (a rejected spawn).
pub(crate) fn failed_task<T>(error: JoinError) -> Task<T> {
    let (task, completer) = task_pair();
    completer.resolve(Err(error));
    task
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_completer_cancels_its_task() {
        let (task, completer) = task_pair::<u8>();
        drop(completer);
        assert!(matches!(task.join(), Err(JoinError::Cancelled)));
    }

    #[test]
    fn a_job_dropped_without_running_cancels_its_task() {
        let (task, completer) = task_pair::<u8>();
        let job = Job::with_result(|| 1, completer);
        drop(job);
        assert!(task.is_finished());
        assert!(matches!(task.join(), Err(JoinError::Cancelled)));
    }

    #[test]
    fn a_panicking_job_reports_its_message() {
        let (task, completer) = task_pair::<u8>();
        let outcome = Job::with_result(|| -> u8 { panic!("bad {}", 7) }, completer).run();
        assert!(matches!(outcome, Outcome::Panicked), "{outcome:?}");
        let error = task.join().unwrap_err();
        assert_eq!(error.panic_message(), Some("bad 7"));
        assert_eq!(error.to_string(), "the task panicked: bad 7");
    }

    /// A waker that counts its wake-ups (no executor needed: the test polls by hand).
    struct CountingWaker(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for CountingWaker {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_polled_task_is_woken_once_when_it_resolves_and_then_ready() {
        let (mut task, completer) = task_pair::<u32>();
        let counter = std::sync::Arc::new(CountingWaker(Default::default()));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut task).poll(&mut cx).is_pending(), "not resolved yet");
        assert!(Pin::new(&mut task).poll(&mut cx).is_pending(), "polled again: still pending");
        let woken = || counter.0.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(woken(), 0);
        std::thread::spawn(move || completer.resolve(Ok(9))).join().unwrap();
        assert_eq!(woken(), 1, "the resolve woke the executor once");
        assert!(matches!(Pin::new(&mut task).poll(&mut cx), Poll::Ready(Ok(9))));
        // Resolved before any poll: ready at once, no wake-up.
        let (mut task, completer) = task_pair::<u32>();
        completer.resolve(Err(JoinError::Cancelled));
        assert!(matches!(Pin::new(&mut task).poll(&mut cx), Poll::Ready(Err(JoinError::Cancelled))));
        assert_eq!(woken(), 1);
    }

    #[test]
    fn a_result_taken_by_a_poll_is_not_handed_over_again() {
        let (mut task, completer) = task_pair::<u32>();
        completer.resolve(Ok(3));
        let waker = Waker::from(std::sync::Arc::new(CountingWaker(Default::default())));
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(Pin::new(&mut task).poll(&mut cx), Poll::Ready(Ok(3))));
        // Polled again, then joined: an error each time, no panic.
        assert!(matches!(Pin::new(&mut task).poll(&mut cx), Poll::Ready(Err(JoinError::AlreadyTaken))));
        assert!(task.is_finished(), "join will not block");
        let error = task.join().unwrap_err();
        assert!(matches!(error, JoinError::AlreadyTaken));
        assert_eq!(format!("{error:?}"), "AlreadyTaken");
        assert!(error.to_string().starts_with("the task's result was already taken"), "{error}");
    }

    #[test]
    fn join_waits_for_a_value_resolved_on_another_thread() {
        let (task, completer) = task_pair::<u32>();
        let resolver = std::thread::spawn(move || completer.resolve(Ok(5)));
        assert_eq!(task.join().unwrap(), 5);
        resolver.join().unwrap();
    }
}

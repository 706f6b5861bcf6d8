//! Tasks that borrow from the caller's stack: [`Pool::scope`] (as `std::thread::scope` and
//! `rayon::scope`) and [`Pool::join`] (as `rayon::join`).
//!
//! A queued job must be `'static`; a scoped task borrows for `'scope`. What makes queuing it
//! sound is one invariant: **nothing a task borrows is freed before the task has ended.**
//!
//! 1. **Counting.** [`Scope::spawn`] counts the task in `pending` before it queues it; the
//!    count goes down only once the task's closure has run and been dropped (`ScopeJob`).
//! 2. **Waiting.** `Pool::scope` neither returns nor unwinds until `pending` is 0: the closure
//!    given to it runs under `catch_unwind`, the wait itself does not panic, and a guard aborts
//!    the process should it ever unwind anyway. So no task outlives the stack frame it borrows.
//! 3. **Nothing lost.** A task the pool refuses (queue full, pool shut down) runs at once on the
//!    thread that spawns it; a task `shutdown_now` drops unrun is handed back to the scope's
//!    thread, which runs it. Every task spawned runs exactly once, so the count reaches 0.
//! 4. **Helping.** The waiting thread, if it is a worker of this pool, runs queued tasks while
//!    it waits, as `Task::join` does, so a scope opened in a task never waits for a worker that
//!    cannot come. It is unparked whenever a task of the scope ends or is handed back, and then
//!    looks at the queue again (a running task may have spawned more).
//!
//! `Pool::join` does not wait for a task that has not started: after `a`, the caller claims `b`
//! back if no worker has (one atomic exchange decides), and runs it itself. It waits only for
//! a `b` that runs on another worker, which ends whatever the queue holds.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;

use super::shared::Refused;
use super::task::{Job, Outcome, JOIN_SPIN_ROUNDS, JOIN_YIELD_ROUNDS};
use super::worker::run_queued_while_waiting;
use super::Pool;
use crate::sync::lock;
use crate::wait::{spin_then_yield, Backoff};

/// A scoped task's closure with its lifetime erased, as the queue needs (`Scope::spawn`).
type Body = Box<dyn FnOnce() + Send + 'static>;

/// What a scope's tasks share with the thread waiting for them.
struct ScopeState {
    /// Tasks spawned and not yet ended (run and dropped).
    pending: AtomicUsize,
    /// The first panic to reach the scope (of a task, or of the scope's closure), raised again
    /// once every task has ended.
    panic: Mutex<Option<Box<dyn Any + Send + 'static>>>,
    /// Tasks `shutdown_now` dropped before they ran, for the scope's thread to run.
    returned: Mutex<Vec<Body>>,
    /// The thread waiting in `Pool::scope`, unparked whenever a task ends or comes back.
    owner: Thread,
}

impl ScopeState {
    /// Runs a task's closure, keeping its panic for the end of the scope. True if it panicked.
    fn run_body(&self, body: Body) -> bool {
        match catch_unwind(AssertUnwindSafe(body)) {
            Ok(()) => false,
            Err(payload) => {
                self.record_panic(payload);
                true
            }
        }
    }

    /// Keeps `payload` if it is the scope's first panic; a later one is dropped (outside the
    /// lock, and a panic of its own `Drop` is swallowed: recording must never unwind).
    fn record_panic(&self, payload: Box<dyn Any + Send + 'static>) {
        let later = {
            let mut first = lock(&self.panic);
            if first.is_none() {
                *first = Some(payload);
                None
            } else {
                Some(payload)
            }
        };
        if let Some(later) = later {
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(later))) {
                // A payload whose drop panics with a payload whose drop panics: leak it.
                std::mem::forget(again);
            }
        }
    }

    /// A task has ended: count it and wake the scope's thread. A scope that has already
    /// returned may get this wake-up as a spurious return of a later `std::thread::park` on
    /// that thread, which `park` allows for.
    fn task_done(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
        self.owner.unpark();
    }
}

/// A queued scoped task. Dropped after running, it counts the task as ended; dropped without
/// running (`shutdown_now`), it hands the closure back to the scope's thread instead.
struct ScopeJob {
    /// `Some` until the task runs or is handed back.
    body: Option<Body>,
    state: Arc<ScopeState>,
}

impl ScopeJob {
    fn run(mut self) -> Outcome {
        let Some(body) = self.body.take() else { return Outcome::Completed };
        let panicked = self.state.run_body(body);
        // The closure and everything it captured are gone: only now may the scope end.
        drop(self);
        if panicked {
            Outcome::Panicked
        } else {
            Outcome::Completed
        }
    }
}

impl Drop for ScopeJob {
    fn drop(&mut self) {
        match self.body.take() {
            Some(body) => {
                // Never ran: still counted in `pending`, until the scope's thread has run it.
                lock(&self.state.returned).push(body);
                self.state.owner.unpark();
            }
            None => self.state.task_done(),
        }
    }
}

/// A pointer to the `Scope` on `Pool::scope`'s stack, for the tasks that spawn more.
struct ScopePtr<'scope>(*const Scope<'scope>);

// SAFETY: a `Scope` is `Sync` (a shared reference to the pool, an `Arc` of `Sync` state), so
// handing a pointer to it to another thread is sending a `&Scope`; it stays valid for as long
// as any task runs (the module's invariant).
unsafe impl Send for ScopePtr<'_> {}

impl<'scope> ScopePtr<'scope> {
    /// # Safety
    ///
    /// The `Scope` must still be alive: true inside a task of that scope, since
    /// `Pool::scope` does not return before every task has ended.
    unsafe fn get(&self) -> &Scope<'scope> {
        // SAFETY: the caller's contract.
        unsafe { &*self.0 }
    }
}

/// Aborts the process if dropped: held across the wait for a scope's tasks, where unwinding
/// would free the stack that running tasks borrow. Never reached in practice (nothing there
/// panics); `mem::forget` disarms it on the normal path.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        // Printed before aborting: the process is going down, and this says why.
        eprintln!("cotenant: unwinding out of a scope whose tasks still run; aborting");
        std::process::abort();
    }
}

/// The handle a [`Pool::scope`] closure and each of its tasks get, to spawn tasks that may
/// borrow anything that outlives the scope (`'scope`).
///
/// Invariant in `'scope`, as rayon's and std's scopes are: a `Scope<'long>` cannot pass for a
/// `Scope<'short>`, so a task can never be given a borrow shorter than the scope's wait.
pub struct Scope<'scope> {
    pool: &'scope Pool,
    state: Arc<ScopeState>,
    _invariant: PhantomData<&'scope mut &'scope ()>,
}

impl<'scope> Scope<'scope> {
    /// Queues `task` on the scope's pool. It may borrow anything that outlives the scope, and
    /// gets the scope to spawn more tasks; [`Pool::scope`] returns only after it (and every
    /// task it spawned) has ended.
    ///
    /// When the pool cannot queue it (the queue is full, whatever the pool's [`Full`] policy,
    /// or the pool is shutting down), the task runs at once on the calling thread, counted in
    /// [`Metrics::caller_ran`]: a scoped task is never refused. A panic in it is caught, counted
    /// in [`Metrics::panicked`], and raised again by `Pool::scope` once every task has ended.
    ///
    /// [`Full`]: super::Full
    /// [`Metrics::caller_ran`]: crate::metrics::Metrics::caller_ran
    /// [`Metrics::panicked`]: crate::metrics::Metrics::panicked
    pub fn spawn<F>(&self, task: F)
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        let scope = ScopePtr(self as *const Scope<'scope>);
        let body: Box<dyn FnOnce() + Send + 'scope> = Box::new(move || {
            // SAFETY: this runs as a task of the scope, which is alive until every task ended.
            task(unsafe { scope.get() })
        });
        // SAFETY: this only erases the lifetime bound `'scope` (same type otherwise, same
        // layout). The closure may borrow data that lives for `'scope`, which outlives the call
        // to `Pool::scope` that made `self`. It is counted in `pending` below before anyone can
        // see it, and the count goes down only after the closure has been called (which
        // consumes and drops it and its captures) or, if it never runs, after the scope's own
        // thread has run it (`ScopeJob::drop` hands it back, `wait_all` runs it): nothing ever
        // drops or calls it otherwise. `Pool::scope` neither returns nor unwinds before the
        // count is 0 (`wait_all`, under `AbortOnUnwind`). So the erased closure is never used
        // after `'scope` ends, which is all that the `'static` promised the queue.
        let body = unsafe {
            std::mem::transmute::<Box<dyn FnOnce() + Send + 'scope>, Box<dyn FnOnce() + Send + 'static>>(body)
        };
        self.state.pending.fetch_add(1, Ordering::AcqRel);
        let job = ScopeJob { body: Some(body), state: self.state.clone() };
        let shared = &self.pool.shared;
        match shared.push(Job::from_fn(move || job.run())) {
            Ok(()) => {}
            Err(Refused::Full(job) | Refused::ShutDown(job)) => shared.run_on_caller(job),
        }
    }

    /// Waits until every task of the scope has ended: runs the tasks handed back, helps the
    /// pool on one of its workers, and parks until a task ends or comes back.
    fn wait_all(&self) {
        let state = &*self.state;
        let ended = || state.pending.load(Ordering::Acquire) == 0;
        loop {
            let returned = std::mem::take(&mut *lock(&state.returned));
            for body in returned {
                state.run_body(body);
                state.task_done();
            }
            if ended() {
                return;
            }
            run_queued_while_waiting(self.pool.address(), &ended);
            if ended() {
                return;
            }
            if !lock(&state.returned).is_empty() {
                continue;
            }
            // A task that ends after the check above unparks us after its count, so this park
            // returns at once: no wake-up is lost, and a spurious one only loops. A helping
            // worker looks at the queue again every `HELP_RECHECK` (nothing else wakes it).
            park_waiting(self.pool.address());
        }
    }
}

impl fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").field("pending", &self.state.pending.load(Ordering::Relaxed)).finish()
    }
}

/// `Pool::join`'s claim on `b`: who runs it.
const UNCLAIMED: u8 = 0;
const BY_POOL: u8 = 1;
const BY_CALLER: u8 = 2;
/// The pool ran `b` and its result is in the slot.
const DONE: u8 = 3;

/// What `Pool::join`'s queued job shares with the caller (on the heap: the job may run, and
/// find it has lost the claim, after `join` has returned).
struct JoinState {
    claim: AtomicU8,
    owner: Thread,
}

/// `b` and its result, on `join`'s stack; touched only by whoever wins the claim.
struct JoinSlot<B, RB> {
    b: UnsafeCell<Option<B>>,
    result: UnsafeCell<Option<std::thread::Result<RB>>>,
}

/// A type-erased pointer to a `JoinSlot`, for the queued job.
struct SlotPtr(*const ());

// SAFETY: the slot is dereferenced only by the thread that wins the claim (`run_claimed`), and
// `join` requires `B: Send` and `RB: Send`, the values that cross threads through it.
unsafe impl Send for SlotPtr {}

impl SlotPtr {
    fn get(&self) -> *const () {
        self.0
    }
}

/// Runs the `b` of the `JoinSlot<B, RB>` at `slot` and keeps its value or panic there. True if
/// it panicked.
///
/// # Safety
///
/// `slot` points to a live `JoinSlot<B, RB>`, and the caller won the claim on it (`BY_POOL`):
/// nobody else touches the slot until the caller publishes `DONE`.
unsafe fn run_claimed<B, RB>(slot: *const ()) -> bool
where
    B: FnOnce() -> RB,
{
    // SAFETY: the caller's contract.
    let slot = unsafe { &*(slot as *const JoinSlot<B, RB>) };
    // SAFETY: the caller alone touches the slot now.
    let Some(b) = (unsafe { (*slot.b.get()).take() }) else { return false };
    let result = catch_unwind(AssertUnwindSafe(b));
    let panicked = result.is_err();
    // SAFETY: as above; `join` reads it only after `DONE`.
    unsafe { *slot.result.get() = Some(result) };
    panicked
}

impl Pool {
    /// Runs `op` with a [`Scope`] whose tasks may borrow from the caller's stack, and returns
    /// what `op` returns once `op` **and every task spawned in the scope** (nested ones too)
    /// have ended, as `std::thread::scope` and `rayon::scope` do, with the pool's workers.
    ///
    /// A panic in `op` or in a task does not cut the wait short: `scope` waits for every task,
    /// then raises the first panic it saw again (its payload, as `std::panic::resume_unwind`
    /// does). Each task's panic is also counted in [`Metrics::panicked`].
    ///
    /// Called from a task of this pool, it runs queued tasks while it waits (as
    /// [`Task::join`] does, with the same limits: not in budgeted or elastic pools, at most 64
    /// waits deep on one worker), so that a scope opened on the only worker allowed to run
    /// still finishes. Tasks `shutdown_now` cancels are run by the scope's thread, and tasks
    /// the pool refuses by the thread that spawns them: every task spawned runs.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(2)).build().unwrap();
    /// let words = ["a", "bb", "ccc"];
    /// let mut lengths = [0; 3];
    /// let total = AtomicUsize::new(0);
    /// let total = &total;
    /// pool.scope(|s| {
    ///     for (word, length) in words.iter().zip(lengths.iter_mut()) {
    ///         s.spawn(move |s| {
    ///             *length = word.len(); // writes into the caller's array
    ///             s.spawn(move |_| {
    ///                 total.fetch_add(word.len(), Ordering::Relaxed); // a nested task
    ///             });
    ///         });
    ///     }
    /// });
    /// assert_eq!(lengths, [1, 2, 3]);
    /// assert_eq!(total.load(Ordering::Relaxed), 6);
    /// ```
    ///
    /// [`Metrics::panicked`]: crate::metrics::Metrics::panicked
    /// [`Task::join`]: super::Task::join
    pub fn scope<'scope, OP, R>(&'scope self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R,
    {
        let scope = Scope {
            pool: self,
            state: Arc::new(ScopeState {
                pending: AtomicUsize::new(0),
                panic: Mutex::new(None),
                returned: Mutex::new(Vec::new()),
                owner: std::thread::current(),
            }),
            _invariant: PhantomData,
        };
        let value = match catch_unwind(AssertUnwindSafe(|| op(&scope))) {
            Ok(value) => Some(value),
            Err(payload) => {
                scope.state.record_panic(payload);
                None
            }
        };
        let abort = AbortOnUnwind;
        scope.wait_all();
        std::mem::forget(abort);
        let panic = lock(&scope.state.panic).take();
        match (value, panic) {
            (_, Some(payload)) => resume_unwind(payload),
            (Some(value), None) => value,
            (None, None) => unreachable!("a panic of the scope's closure is always recorded"),
        }
    }

    /// Runs `a` on the calling thread and `b` on the pool, and returns both results, as
    /// `rayon::join` does: for divide and conquer, where `b` is the half that another worker
    /// may take. Both closures may borrow from the caller's stack.
    ///
    /// `b` is queued first; after `a`, if no worker has started `b`, the caller takes it back
    /// and runs it itself (so a `join` never waits for a task that is still queued, however
    /// deep the recursion, and the queued job finds nothing to do). If a worker runs `b`, the
    /// caller waits for it, running queued tasks meanwhile when it is a worker of this pool.
    ///
    /// A panic in `a` or `b` is raised again once both have ended: `a`'s if both panicked.
    /// A `b` that the pool refuses (full, shutting down) or cancels runs on the caller.
    ///
    /// ```
    /// fn sum(pool: &cotenant::Pool, numbers: &[u64]) -> u64 {
    ///     if numbers.len() <= 1024 {
    ///         return numbers.iter().sum();
    ///     }
    ///     let (left, right) = numbers.split_at(numbers.len() / 2);
    ///     let (l, r) = pool.join(|| sum(pool, left), || sum(pool, right));
    ///     l + r
    /// }
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(2)).build().unwrap();
    /// let numbers: Vec<u64> = (1..=100_000).collect();
    /// assert_eq!(sum(&pool, &numbers), 5_000_050_000);
    /// ```
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA,
        B: FnOnce() -> RB + Send,
        RB: Send,
    {
        let slot: JoinSlot<B, RB> = JoinSlot { b: UnsafeCell::new(Some(b)), result: UnsafeCell::new(None) };
        let state = Arc::new(JoinState { claim: AtomicU8::new(UNCLAIMED), owner: std::thread::current() });
        let job = {
            let state = state.clone();
            let slot = SlotPtr(&slot as *const JoinSlot<B, RB> as *const ());
            // A plain function pointer knows `B` and `RB` without the job's type naming them,
            // so the job is `'static` whatever `b` borrows.
            let run: unsafe fn(*const ()) -> bool = run_claimed::<B, RB>;
            Job::from_fn(move || {
                if state
                    .claim
                    .compare_exchange(UNCLAIMED, BY_POOL, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    // The caller took `b` back (and may have returned): touch nothing of it.
                    return Outcome::Completed;
                }
                // SAFETY: we won the claim, and `join` does not return before it sees `DONE`,
                // so the slot on its stack is alive and ours until the store below.
                let panicked = unsafe { run(slot.get()) };
                state.claim.store(DONE, Ordering::Release);
                state.owner.unpark();
                if panicked {
                    Outcome::Panicked
                } else {
                    Outcome::Completed
                }
            })
        };
        // Refused, the job is dropped unrun (it captured nothing of the slot but a pointer),
        // and the claim below is the caller's.
        if let Err(Refused::Full(job) | Refused::ShutDown(job)) = self.shared.push(job) {
            drop(job);
        }
        let a_result = catch_unwind(AssertUnwindSafe(a));
        // From here until `b` has ended, the slot must stay where it is.
        let abort = AbortOnUnwind;
        let b_result = if state
            .claim
            .compare_exchange(UNCLAIMED, BY_CALLER, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // SAFETY: the claim is ours: no job touches the slot any more.
            let b = unsafe { (*slot.b.get()).take() };
            match b {
                Some(b) => catch_unwind(AssertUnwindSafe(b)),
                None => unreachable!("b is taken only by whoever wins the claim"),
            }
        } else {
            self.wait_for_join(&state);
            // SAFETY: `DONE` was published after the worker's last touch of the slot.
            let result = unsafe { (*slot.result.get()).take() };
            match result {
                Some(result) => result,
                None => unreachable!("the worker stores b's result before DONE"),
            }
        };
        std::mem::forget(abort);
        match (a_result, b_result) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(payload), _) | (Ok(_), Err(payload)) => resume_unwind(payload),
        }
    }

    /// Waits for a `b` a worker is running: spins briefly (a short `b` ends within it), runs
    /// queued tasks when called on a worker of this pool, then parks until the worker's unpark.
    fn wait_for_join(&self, state: &JoinState) {
        let done = || state.claim.load(Ordering::Acquire) == DONE;
        let backoff = Backoff::default().spins(JOIN_SPIN_ROUNDS).yields(JOIN_YIELD_ROUNDS);
        if spin_then_yield(&backoff, &done) {
            return;
        }
        loop {
            run_queued_while_waiting(self.address(), &done);
            if done() {
                return;
            }
            // The worker stores `DONE` and then unparks us: this returns at once if that
            // happened after the check.
            park_waiting(self.address());
        }
    }
}

/// Parks the waiting thread until it is unparked; a worker that helps the pool it waits on
/// (`rechecks_while_waiting`) wakes every `HELP_RECHECK` too, to run tasks queued meanwhile.
fn park_waiting(pool: usize) {
    #[cfg(not(loom))]
    if super::worker::rechecks_while_waiting(pool) {
        std::thread::park_timeout(super::worker::HELP_RECHECK);
        return;
    }
    let _ = pool;
    std::thread::park();
}

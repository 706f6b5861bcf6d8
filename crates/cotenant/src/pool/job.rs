//! [`Job`]: a queued unit of work, and where its closure lives.
//!
//! A closure of at most [`INLINE_WORDS`] machine words (and an alignment no stricter than a
//! word's) is stored in the job itself, hence in the queue's slot: submitting it allocates
//! nothing. A larger one is boxed, and the box stored in its place. Why: a pool's tasks are
//! allocated by the submitting thread and freed by a worker, the pattern that defeats the
//! allocator's per-thread caches (glibc's tcache refills from the locked arena on every
//! submit); on a million tiny tasks the box's `malloc` and `free` were a fifth of the pool's
//! time (perf, `pool-bench`). Most closures capture a handle or two (an `Arc`, an index, a
//! `Task`'s completer), and fit.
//!
//! The job knows its closure's type through one function pointer, monomorphised for that type
//! ([`act`]): it either runs the closure or drops it unrun (a cancelled task), and either way
//! moves it out of the slot exactly once.

use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};
use std::ptr;

use super::task::Outcome;

/// Words of closure a job holds without allocating: three covers a closure that captures a
/// task's completer and two more handles.
pub(crate) const INLINE_WORDS: usize = 3;

/// The storage of a closure inside a job (word-aligned).
type Slot = MaybeUninit<[usize; INLINE_WORDS]>;

/// What [`act`] does with the closure it moves out of a slot.
#[derive(Clone, Copy)]
enum Act {
    Run,
    Drop,
}

/// A queued unit of work: a closure that never unwinds (it catches its own panic), stored in
/// place when it fits, and when it was submitted, for the queue-wait histogram
/// (`Builder::task_histograms`).
///
/// The stamp is a reading of the histograms' clock (`metrics/clock.rs`, nanoseconds; a `u64`:
/// an `Instant` is twice the size). It is 0 until a pool with histograms on stamps it at the
/// submit (`Shared::push`); a pool with them off never reads the clock for it.
pub(crate) struct Job {
    /// Runs or drops the closure in `slot`; monomorphised for its type (see [`act`]).
    act: unsafe fn(*mut Slot, Act) -> Outcome,
    /// The closure (or its box), moved out by `act` exactly once: by `run`, or by `drop`.
    slot: Slot,
    enqueued_ns: u64,
    /// The slot's words say nothing of the closure in them: this marker makes a job neither
    /// `Send` nor `Sync` by itself, so that only the `unsafe impl Send` below (which rests on
    /// every constructor requiring a `Send` closure) makes it `Send`, and nothing makes it
    /// `Sync` (the closure may not be: a job is moved between threads, never shared).
    _unknown_closure: PhantomData<*mut ()>,
}

// SAFETY: every constructor requires the closure to be `Send` (`from_fn`), and a job hands its
// closure to exactly one thread, the one that runs or drops it.
unsafe impl Send for Job {}

/// Moves the closure of type `F` out of `slot` and runs it or drops it.
///
/// # Safety
/// `slot` holds an `F` written by [`Job::store`] that nothing has moved out yet, and the
/// caller never uses that value again.
unsafe fn act<F: FnOnce() -> Outcome>(slot: *mut Slot, act: Act) -> Outcome {
    // SAFETY: the caller's contract; `store` checked that `F` fits the slot's size and alignment.
    let f = unsafe { ptr::read(slot.cast::<F>()) };
    match act {
        Act::Run => f(),
        Act::Drop => {
            drop(f);
            Outcome::Completed
        }
    }
}

/// Whether a closure of type `F` is stored in place (else it is boxed).
pub(crate) const fn fits<F>() -> bool {
    size_of::<F>() <= size_of::<Slot>() && align_of::<F>() <= align_of::<Slot>()
}

impl Job {
    /// A job made of a closure that catches its own panics and reports them (the constructors
    /// in `task.rs`, scoped tasks in `scope.rs`), not stamped yet.
    pub(crate) fn from_fn<F>(f: F) -> Job
    where
        F: FnOnce() -> Outcome + Send + 'static,
    {
        if fits::<F>() {
            Job::store(f)
        } else {
            // A box is one word and a closure too (`Box<F>: FnOnce`).
            Job::store(Box::new(f))
        }
    }

    /// Writes `f` into a new job's slot; `F` must fit (checked: a misuse panics here rather
    /// than writing past the slot).
    fn store<F>(f: F) -> Job
    where
        F: FnOnce() -> Outcome + Send + 'static,
    {
        assert!(fits::<F>(), "a job's closure must fit its slot");
        let mut slot = Slot::uninit();
        // SAFETY: the slot is large and aligned enough for `F` (asserted above) and uninitialised.
        unsafe { ptr::write(slot.as_mut_ptr().cast::<F>(), f) };
        Job { act: act::<F>, slot, enqueued_ns: 0, _unknown_closure: PhantomData }
    }

    /// Runs the closure, consuming the job (its closure is not dropped again).
    pub(crate) fn run(self) -> Outcome {
        let mut job = ManuallyDrop::new(self);
        // SAFETY: the slot holds the closure `act` was made for, not moved out yet (only `run`
        // and `drop` move it, and `ManuallyDrop` keeps `drop` from running after this).
        unsafe { (job.act)(&mut job.slot, Act::Run) }
    }

    /// When the job was submitted (a reading of `metrics/clock.rs`), or 0 if it was not stamped.
    pub(crate) fn enqueued_ns(&self) -> u64 {
        self.enqueued_ns
    }

    /// Stamps the job with the submit's reading `now_ns` unless it has one already (a
    /// submitter blocked on a full queue pushes the same job again: its wait counts from the
    /// first try). Never 0 once stamped.
    pub(crate) fn stamp(&mut self, now_ns: impl FnOnce() -> u64) {
        if self.enqueued_ns == 0 {
            self.enqueued_ns = now_ns().max(1);
        }
    }
}

impl Drop for Job {
    /// A job dropped unrun (a cancelled or refused task) drops its closure, which resolves the
    /// task's handle as cancelled.
    fn drop(&mut self) {
        // SAFETY: `run` forgets the job, so a job being dropped still holds its closure.
        unsafe { (self.act)(&mut self.slot, Act::Drop) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_job_is_its_closure_and_its_stamp_and_one_pointer() {
        // Every queue slot holds one: the function pointer, the slot's words and the stamp
        // (a `u64`, two words on a 32-bit target).
        assert_eq!(size_of::<Job>(), (INLINE_WORDS + 1) * size_of::<usize>() + size_of::<u64>());
        let mut job = Job::from_fn(|| Outcome::Completed);
        assert_eq!(job.enqueued_ns(), 0, "not stamped until a timed pool's submit");
        job.stamp(|| 0);
        assert_eq!(job.enqueued_ns(), 1, "a stamp is never 0, which means none");
        job.stamp(|| 99);
        assert_eq!(job.enqueued_ns(), 1, "the first stamp stays");
        assert!(matches!(job.run(), Outcome::Completed));
    }

    /// Counts the drops of its captures.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Whether `from_fn` stores a closure like `_f` in place (the type is inferred).
    fn in_place<F>(_f: &F) -> bool {
        fits::<F>()
    }

    /// Runs (or drops unrun) a job whose closure captures `padding`, a `Counted` and a counter,
    /// and checks that it is stored in place or boxed as `expect_in_place` says, that the
    /// closure ran at most once and that its captures were dropped exactly once.
    fn check<P: Send + 'static>(padding: P, run: bool, expect_in_place: bool) {
        let drops = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = Counted(drops.clone());
        let ran = runs.clone();
        let closure = move || {
            let _keep = (&padding, &counted);
            ran.fetch_add(1, Ordering::SeqCst);
            Outcome::Completed
        };
        assert_eq!(
            in_place(&closure),
            expect_in_place,
            "placement of a closure with {}",
            std::any::type_name::<P>()
        );
        let job = Job::from_fn(closure);
        if run {
            assert!(matches!(job.run(), Outcome::Completed));
        } else {
            drop(job);
        }
        assert_eq!(runs.load(Ordering::SeqCst), usize::from(run));
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the captures are dropped exactly once");
    }

    #[test]
    fn small_closures_live_in_the_job_and_large_or_overaligned_ones_in_a_box() {
        // Two words of capture besides the `Arc`s: in place.
        #[allow(clippy::type_complexity)]
        let fits_in_place = fits::<Box<dyn FnOnce() -> Outcome>>();
        assert!(fits_in_place);
        assert!(fits::<[usize; INLINE_WORDS]>());
        assert!(!fits::<[usize; INLINE_WORDS + 1]>());
        #[repr(align(32))]
        struct Wide(#[allow(dead_code)] u8);
        assert!(!fits::<Wide>(), "an alignment above a word's is boxed");
        // Each closure also captures two `Arc`s (two words).
        for run in [true, false] {
            check((), run, true);
            check(7_u8, run, true);
            check([1_usize; INLINE_WORDS + 4], run, false);
            check(Wide(1), run, false);
            check(String::from("owned"), run, false);
        }
    }

    #[test]
    fn a_job_moves_to_another_thread_and_runs_there() {
        let job = Job::from_fn(|| Outcome::Panicked);
        let outcome = std::thread::spawn(move || job.run()).join().unwrap();
        assert!(matches!(outcome, Outcome::Panicked));
    }
}

//! [`RunState`]: the run state of a future spawned on the pool (`Pool::spawn_future`), one
//! atomic word, and the transitions that make a wake-up never lost and never doubled.
//!
//! ```text
//!            wake: Enqueue                 start
//!   IDLE ─────────────────────► SCHEDULED ──────► RUNNING ──── after_pending: Idle ───► IDLE
//!                                   ▲                │ wake
//!                                   │                ▼
//!                                   └── Requeue ── NOTIFIED
//!   any state ── finish ──► DONE (completed, panicked or cancelled; wakes do nothing)
//! ```
//!
//! Whoever moves the task into SCHEDULED (a wake that found it IDLE, or the poller that found
//! it NOTIFIED) owns the one job that will poll it next, so a task is queued at most once and
//! polled by one thread at a time; a wake while it is SCHEDULED or NOTIFIED is already covered
//! by the poll to come. Every operation is a read-modify-write, also when the state does not
//! change: a waker's writes before its wake are then visible to the next poll (the poller's
//! `start` reads the waker's write, or a later one in the same chain of read-modify-writes).
//!
//! The atomics come from `crate::sync`, so the loom model `pool/tests/loom_future.rs` checks
//! these transitions alone (the rest of the executor is not compiled under loom).

use crate::sync::{AtomicUsize, Ordering};

/// Pending, and nobody will poll it until a wake-up.
const IDLE: usize = 0;
/// A job that will poll it is queued (or about to be; or, for a first poll under
/// `Full::CallerRuns` with the queue full, about to run on the submitting thread).
const SCHEDULED: usize = 1;
/// Being polled.
const RUNNING: usize = 2;
/// Woken while being polled: the poller queues it again when the poll returns `Pending`.
const NOTIFIED: usize = 3;
/// Completed, panicked or cancelled: nothing polls it again.
const DONE: usize = 4;

/// What a wake-up asks of the waker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakeAction {
    /// The task was idle: the waker now owns its next poll and must queue it.
    Enqueue,
    /// A poll is already coming (or the task is done): nothing to do.
    Nothing,
}

/// What the poller does after a poll that returned `Pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterPoll {
    /// Nobody woke it during the poll: it waits for a wake-up.
    Idle,
    /// It was woken during the poll: the poller owns its next poll and must queue it.
    Requeue,
}

/// The run state of one spawned future (see the module's diagram).
pub(crate) struct RunState(AtomicUsize);

impl RunState {
    /// A task about to be queued for its first poll (`spawn_future` owns that poll).
    pub(crate) fn scheduled() -> RunState {
        RunState(AtomicUsize::new(SCHEDULED))
    }

    /// Moves the state by `next` (given the current state) in one read-modify-write, even
    /// when `next` leaves it unchanged (see the module's comment); returns the state it left.
    fn transition(&self, next: impl Fn(usize) -> usize) -> usize {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            match self.0.compare_exchange(current, next(current), Ordering::AcqRel, Ordering::Acquire) {
                Ok(previous) => return previous,
                Err(actual) => current = actual,
            }
        }
    }

    /// A wake-up: IDLE → SCHEDULED asks the waker to queue the task; RUNNING → NOTIFIED leaves
    /// the requeue to the poller; SCHEDULED, NOTIFIED and DONE stay as they are.
    pub(crate) fn wake(&self) -> WakeAction {
        let previous = self.transition(|state| match state {
            IDLE => SCHEDULED,
            RUNNING => NOTIFIED,
            other => other,
        });
        if previous == IDLE {
            WakeAction::Enqueue
        } else {
            WakeAction::Nothing
        }
    }

    /// A poll begins: SCHEDULED → RUNNING. False (and no change) in any other state, which
    /// the protocol never produces: the caller then does not poll.
    pub(crate) fn start(&self) -> bool {
        let previous = self.transition(|state| if state == SCHEDULED { RUNNING } else { state });
        previous == SCHEDULED
    }

    /// A poll returned `Pending`: RUNNING → IDLE, or NOTIFIED → SCHEDULED (woken meanwhile:
    /// the caller queues it again). Any other state (not produced by the protocol) is left
    /// alone and answered `Idle`: nothing is queued twice.
    pub(crate) fn after_pending(&self) -> AfterPoll {
        let previous = self.transition(|state| match state {
            RUNNING => IDLE,
            NOTIFIED => SCHEDULED,
            other => other,
        });
        if previous == NOTIFIED {
            AfterPoll::Requeue
        } else {
            AfterPoll::Idle
        }
    }

    /// The task completed, panicked or was cancelled: → DONE, for good.
    pub(crate) fn finish(&self) {
        self.0.swap(DONE, Ordering::AcqRel);
    }

    /// Whether the task is done (tests and models).
    #[cfg(test)]
    pub(crate) fn is_done(&self) -> bool {
        self.0.load(Ordering::Acquire) == DONE
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_wake_while_idle_enqueues_once_and_later_wakes_do_nothing() {
        let state = RunState::scheduled();
        assert_eq!(state.wake(), WakeAction::Nothing, "already scheduled for its first poll");
        assert!(state.start());
        assert_eq!(state.after_pending(), AfterPoll::Idle);
        assert_eq!(state.wake(), WakeAction::Enqueue, "idle: the waker queues it");
        assert_eq!(state.wake(), WakeAction::Nothing, "queued once, not twice");
        assert!(state.start());
    }

    #[test]
    fn a_wake_during_the_poll_is_the_poller_s_requeue() {
        let state = RunState::scheduled();
        assert!(state.start());
        assert_eq!(state.wake(), WakeAction::Nothing, "running: the poller requeues");
        assert_eq!(state.wake(), WakeAction::Nothing, "notified twice is one requeue");
        assert_eq!(state.after_pending(), AfterPoll::Requeue);
        assert_eq!(state.wake(), WakeAction::Nothing, "scheduled again by the poller");
        assert!(state.start());
        assert_eq!(state.after_pending(), AfterPoll::Idle);
    }

    #[test]
    fn a_done_task_is_never_queued_or_polled_again() {
        let state = RunState::scheduled();
        assert!(state.start());
        state.finish();
        assert!(state.is_done());
        assert_eq!(state.wake(), WakeAction::Nothing);
        assert!(!state.start(), "a done task is not polled");
        assert_eq!(state.after_pending(), AfterPoll::Idle);
        assert!(state.is_done());
        // Cancelled while queued (a refused requeue): done as well.
        let state = RunState::scheduled();
        state.finish();
        assert_eq!(state.wake(), WakeAction::Nothing);
        assert!(!state.start());
    }
}

//! loom models of a spawned future's run state (`pool/future_task/state.rs`): in every
//! interleaving, within the preemption bound, of a poller and wakers, a wake-up leads to
//! exactly one further poll (queued once by a waker, or requeued once by the poller; never
//! both, never neither), and what the waker wrote before its wake-up is visible to that poll.
//! The queue is faked by a counter of enqueues: the models check the state word alone (the
//! executor around it is not compiled under loom). Run with `make loom`.

use loom::cell::UnsafeCell;

use super::future_state::{AfterPoll, RunState, WakeAction};
use crate::sync::{Arc, AtomicUsize, Ordering};

/// Preemptions explored per execution: the state is one word and each model has two or three
/// threads making one or two read-modify-writes each, so 3 covers every ordering.
const PREEMPTIONS: usize = 3;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS);
    builder.check(f);
}

/// A waker on its own thread: wakes the task and counts an enqueue if the wake-up asks for one.
fn spawn_waker(state: &Arc<RunState>, enqueued: &Arc<AtomicUsize>) -> loom::thread::JoinHandle<()> {
    let state = state.clone();
    let enqueued = enqueued.clone();
    loom::thread::spawn(move || {
        if state.wake() == WakeAction::Enqueue {
            enqueued.fetch_add(1, Ordering::SeqCst);
        }
    })
}

/// (a) A wake-up from another thread while the poller is between `start` and `after_pending`
/// (or just after it): one further poll is scheduled, by the waker (the poll was over: the task
/// was idle) or by the poller (woken during the poll), never both, never neither.
#[test]
fn a_wake_during_a_poll_schedules_exactly_one_more_poll() {
    model(|| {
        let state = Arc::new(RunState::scheduled());
        let enqueued = Arc::new(AtomicUsize::new(0));
        assert!(state.start());
        let waker = spawn_waker(&state, &enqueued);
        let requeued = usize::from(state.after_pending() == AfterPoll::Requeue);
        waker.join().unwrap();
        assert_eq!(enqueued.load(Ordering::SeqCst) + requeued, 1, "one more poll, from one side");
        // That poll can start, and nothing else is scheduled behind it.
        assert!(state.start());
        assert_eq!(state.after_pending(), AfterPoll::Idle);
    });
}

/// (b) Two concurrent wake-ups of an idle task queue it exactly once.
#[test]
fn two_wakes_of_an_idle_task_enqueue_it_once() {
    model(|| {
        let state = Arc::new(RunState::scheduled());
        let enqueued = Arc::new(AtomicUsize::new(0));
        assert!(state.start());
        assert_eq!(state.after_pending(), AfterPoll::Idle);
        let first = spawn_waker(&state, &enqueued);
        let second = spawn_waker(&state, &enqueued);
        first.join().unwrap();
        second.join().unwrap();
        assert_eq!(enqueued.load(Ordering::SeqCst), 1, "queued once for two wake-ups");
        assert!(state.start(), "the queued poll runs");
    });
}

/// What a waker wrote before waking the task mid-poll is visible to the poll the poller then
/// queues, with no other synchronisation than the state word (loom reports a data race on the
/// cell otherwise). A task finished meanwhile ignores the wake-up.
#[test]
fn the_requeued_poll_sees_what_the_waker_wrote() {
    model(|| {
        let state = Arc::new(RunState::scheduled());
        let message = Arc::new(UnsafeCell::new(0_usize));
        assert!(state.start());
        let waker = {
            let state = state.clone();
            let message = message.clone();
            loom::thread::spawn(move || {
                // SAFETY: the poller reads the cell only in a poll this wake-up schedules.
                message.with_mut(|value| unsafe { *value = 7 });
                state.wake() == WakeAction::Enqueue
            })
        };
        match state.after_pending() {
            AfterPoll::Requeue => {
                // The next poll, before the waker's thread is joined.
                assert!(state.start());
                // SAFETY: the waker wrote before its wake-up, which this poll follows.
                assert_eq!(message.with(|value| unsafe { *value }), 7);
                assert!(!waker.join().unwrap(), "requeued by the poller, not queued by the waker");
            }
            AfterPoll::Idle => assert!(waker.join().unwrap(), "the poll was over: the waker queues it"),
        }
        state.finish();
        assert_eq!(state.wake(), WakeAction::Nothing);
        assert!(state.is_done());
    });
}

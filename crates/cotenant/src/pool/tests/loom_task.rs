//! loom models of a [`Task`]'s result slot (`task.rs`) awaited as a future and joined: in every
//! interleaving, within the preemption bound, of the worker resolving the task with the caller
//! polling it (storing or replacing its waker) or joining it, the result is handed over exactly
//! once and no wake-up is lost. A lost wake-up shows as a loom deadlock (the executor of
//! [`block_on`] parks until its waker is woken, `join` waits until the condition variable is
//! notified) or as a wrong count of wake-ups. Run with `make loom`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use super::task::task_pair;
use super::{JoinError, Task};
use crate::sync::{AtomicUsize, Ordering};

/// Preemptions explored per execution: the slot is one mutex, one condition variable and one
/// flag, and each model has two threads, so 3 covers every ordering of a poll's, a join's and a
/// resolve's few steps and still runs in seconds.
const PREEMPTIONS: usize = 3;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS);
    builder.check(f);
}

/// A waker that counts its wake-ups in a loom atomic, so that the count is part of the model.
struct CountingWaker {
    woken: AtomicUsize,
}

impl Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.woken.fetch_add(1, Ordering::SeqCst);
    }
}

/// A fresh waker and the counter behind it (a `std` `Arc`, which is what `Waker::from` takes).
fn counting_waker() -> (std::sync::Arc<CountingWaker>, Waker) {
    let counter = std::sync::Arc::new(CountingWaker { woken: AtomicUsize::new(0) });
    let waker = Waker::from(counter.clone());
    (counter, waker)
}

fn woken(counter: &CountingWaker) -> usize {
    counter.woken.load(Ordering::SeqCst)
}

/// One poll of `task` by an executor whose waker is `waker`.
fn poll_once(task: &mut Task<u32>, waker: &Waker) -> Poll<Result<u32, JoinError>> {
    Pin::new(task).poll(&mut Context::from_waker(waker))
}

/// A waker that unparks the executor thread of [`block_on`].
struct Unparker(loom::thread::Thread);

impl Wake for Unparker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives `task` to completion on the calling thread, parking between polls until its waker
/// is woken, as an executor does: a lost wake-up leaves the thread parked, which loom reports
/// as a deadlock. (loom's own `block_on` needs its `futures` feature, which this crate does not
/// enable.)
fn block_on(mut task: Task<u32>) -> Result<u32, JoinError> {
    let waker = Waker::from(std::sync::Arc::new(Unparker(loom::thread::current())));
    loop {
        match poll_once(&mut task, &waker) {
            Poll::Ready(result) => return result,
            Poll::Pending => loom::thread::park(),
        }
    }
}

/// The resolve racing the first poll (before it looks, between its look and the storing of the
/// waker, after): the awaiting executor is woken, or the poll saw the result. [`block_on`]
/// parks the executor until its waker is woken, so a lost wake-up is a deadlock.
#[test]
fn a_resolve_racing_the_first_poll_wakes_the_awaiting_executor() {
    model(|| {
        let (task, completer) = task_pair::<u32>();
        let resolver = loom::thread::spawn(move || completer.resolve(Ok(7)));
        assert_eq!(block_on(task).unwrap(), 7);
        resolver.join().unwrap();
    });
}

/// A task polled by one executor and then by another (a future moved between tasks): the
/// resolve wakes the waker of the latest poll and only that one, whichever poll it races.
#[test]
fn only_the_waker_of_the_latest_poll_is_woken() {
    model(|| {
        let (mut task, completer) = task_pair::<u32>();
        let resolver = loom::thread::spawn(move || completer.resolve(Ok(7)));
        let (first, first_waker) = counting_waker();
        let (second, second_waker) = counting_waker();
        let result = match poll_once(&mut task, &first_waker) {
            Poll::Ready(result) => {
                // Resolved before the first poll looked: nobody was registered to wake.
                resolver.join().unwrap();
                assert_eq!((woken(&first), woken(&second)), (0, 0));
                result
            }
            Poll::Pending => match poll_once(&mut task, &second_waker) {
                Poll::Ready(result) => {
                    // Resolved between the polls: the first waker was the registered one.
                    resolver.join().unwrap();
                    assert_eq!((woken(&first), woken(&second)), (1, 0));
                    result
                }
                Poll::Pending => {
                    // Resolved after the second poll replaced the waker.
                    resolver.join().unwrap();
                    assert_eq!(
                        (woken(&first), woken(&second)),
                        (0, 1),
                        "the replaced waker was woken, or the latest one was not"
                    );
                    match poll_once(&mut task, &second_waker) {
                        Poll::Ready(result) => result,
                        Poll::Pending => panic!("resolved and woken, yet the next poll is still pending"),
                    }
                }
            },
        };
        assert_eq!(result.unwrap(), 7);
    });
}

/// Join after a poll (issue 34): after a pending poll, `join` racing the resolve returns the
/// value (the slot wakes both the registered waker and the joiner, or `join` finds the result);
/// after a ready poll the value is gone and `join` says so with an error instead of panicking.
#[test]
fn a_join_after_a_poll_gets_the_value_or_an_error_and_never_hangs() {
    model(|| {
        let (mut task, completer) = task_pair::<u32>();
        let resolver = loom::thread::spawn(move || completer.resolve(Ok(7)));
        let (counter, waker) = counting_waker();
        match poll_once(&mut task, &waker) {
            Poll::Ready(result) => {
                assert_eq!(result.unwrap(), 7);
                assert!(
                    matches!(task.join(), Err(JoinError::AlreadyTaken)),
                    "a join after the poll took the value must say so, not panic"
                );
                resolver.join().unwrap();
                assert_eq!(woken(&counter), 0, "nobody was waiting when the task resolved");
            }
            Poll::Pending => {
                assert_eq!(task.join().unwrap(), 7);
                resolver.join().unwrap();
                // Waking the executor whose poll was overtaken by the join is allowed, not required;
                // waking it twice is not.
                assert!(woken(&counter) <= 1, "the waker was woken {} times", woken(&counter));
            }
        }
    });
}

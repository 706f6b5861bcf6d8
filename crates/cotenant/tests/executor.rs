//! Futures on the pool (`Pool::spawn_future`) and `cotenant::block_on`, checked without timing:
//! values, panics, wake-ups (from the future itself, from another thread while it is polled
//! or queued: one more poll each, never lost), a full queue, nested futures, shutdown. Every
//! wait is on an event (a channel, a counter); the one deadline is a generous guard against
//! a hang, never a measurement.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cotenant::{block_on, Full, JoinError, JoinTimeoutError, Policy, Pool};

fn fixed(n: usize) -> cotenant::Builder {
    Pool::builder().policy(Policy::fixed(n))
}

/// Blocks the pool's only worker until the returned sender is dropped; returns once it runs.
fn occupy_one(pool: &Pool) -> (cotenant::Task<()>, mpsc::Sender<()>) {
    let (started, running) = mpsc::channel::<()>();
    let (release, gate) = mpsc::channel::<()>();
    let task = pool.spawn(move || {
        started.send(()).unwrap();
        let _ = gate.recv();
    });
    running.recv().unwrap();
    (task, release)
}

/// A waker kept where another thread can take it.
type WakerSlot = Arc<Mutex<Option<Waker>>>;

/// Pending the first `pending` polls, waking itself each time (`yield_now`'s idiom); counts
/// its polls in `polls` and returns how many it had.
struct WakesItself {
    pending: usize,
    mine: usize,
    polls: Arc<AtomicUsize>,
}

impl WakesItself {
    fn new(pending: usize, polls: &Arc<AtomicUsize>) -> WakesItself {
        WakesItself { pending, mine: 0, polls: polls.clone() }
    }
}

impl Future for WakesItself {
    type Output = usize;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.mine += 1;
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.mine > self.pending {
            return Poll::Ready(self.mine);
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn a_future_returns_its_value_through_join_and_await() {
    let pool = fixed(2).build().unwrap();
    assert_eq!(pool.spawn_future(async { 6 * 7 }).join().unwrap(), 42);
    assert_eq!(block_on(pool.spawn_future(async { "awaited" })).unwrap(), "awaited");
    pool.shutdown();
    assert_eq!(pool.metrics().completed, 2, "one poll each");
}

fn failing() -> u8 {
    panic!("future failed on purpose")
}

#[test]
fn a_panicking_future_fails_its_task_with_the_message_and_the_worker_survives() {
    let pool = fixed(1).build().unwrap();
    let error = pool.spawn_future(async { failing() }).join().unwrap_err();
    assert!(matches!(error, JoinError::Panicked(_)), "{error:?}");
    assert_eq!(error.panic_message(), Some("future failed on purpose"));
    // The only worker is still there.
    assert_eq!(pool.spawn_future(async { 7 }).join().unwrap(), 7);
    pool.shutdown();
    let metrics = pool.metrics();
    assert_eq!(metrics.panicked, 1);
    assert_eq!(metrics.completed, 2);
}

#[test]
fn a_future_that_wakes_itself_while_polled_is_polled_once_more_per_wake() {
    let pool = fixed(2).build().unwrap();
    for pending in [0, 1, 5, 50] {
        let polls = Arc::new(AtomicUsize::new(0));
        let task = pool.spawn_future(WakesItself::new(pending, &polls));
        assert_eq!(task.join().unwrap(), pending + 1);
        assert_eq!(polls.load(Ordering::SeqCst), pending + 1, "never lost, never doubled");
    }
    pool.shutdown();
    // Each poll counts as one task.
    assert_eq!(pool.metrics().completed, 1 + 2 + 6 + 51);
}

/// Its first poll leaves its waker in `slot`, says so on `polling`, and waits inside the poll
/// until `woken` says another thread has woken it; the second poll completes.
struct WokenDuringPoll {
    slot: WakerSlot,
    polling: mpsc::Sender<()>,
    woken: mpsc::Receiver<()>,
    polls: Arc<AtomicUsize>,
}

impl Future for WokenDuringPoll {
    type Output = usize;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        let polls = self.polls.fetch_add(1, Ordering::SeqCst) + 1;
        if polls > 1 {
            return Poll::Ready(polls);
        }
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        self.polling.send(()).unwrap();
        // Blocking in a poll holds the worker: done here only to hold the poll open while the
        // other thread wakes the future.
        self.woken.recv().unwrap();
        Poll::Pending
    }
}

#[test]
fn wakes_from_another_thread_during_a_poll_lead_to_exactly_one_more_poll() {
    let pool = fixed(1).build().unwrap();
    let slot = WakerSlot::default();
    let polls = Arc::new(AtomicUsize::new(0));
    let (polling, is_polling) = mpsc::channel();
    let (woken, was_woken) = mpsc::channel();
    let task = pool.spawn_future(WokenDuringPoll {
        slot: slot.clone(),
        polling,
        woken: was_woken,
        polls: polls.clone(),
    });
    let waker = std::thread::spawn(move || {
        is_polling.recv().unwrap();
        let waker = slot.lock().unwrap().take().expect("the first poll left its waker");
        waker.wake_by_ref();
        waker.wake_by_ref();
        waker.wake();
        woken.send(()).unwrap();
    });
    assert_eq!(task.join().unwrap(), 2, "three wake-ups during the poll are one more poll");
    waker.join().unwrap();
    assert_eq!(polls.load(Ordering::SeqCst), 2);
}

/// Pending until `flag` is set; each pending poll leaves its waker in `slot` and says so on
/// `stored`. Returns how many polls it had.
struct Flagged {
    flag: Arc<AtomicBool>,
    slot: WakerSlot,
    stored: mpsc::Sender<()>,
    polls: Arc<AtomicUsize>,
}

impl Future for Flagged {
    type Output = usize;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        let polls = self.polls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.flag.load(Ordering::SeqCst) {
            return Poll::Ready(polls);
        }
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        let _ = self.stored.send(());
        Poll::Pending
    }
}

/// The pool `builder` builds (one worker) with one `Flagged` future that has been polled once
/// (its waker is in the slot): the pool, the task, its flag, its waker slot and its poll count.
fn flagged_future(
    builder: cotenant::Builder,
) -> (Pool, cotenant::Task<usize>, Arc<AtomicBool>, WakerSlot, Arc<AtomicUsize>) {
    let pool = builder.build().unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let slot = WakerSlot::default();
    let polls = Arc::new(AtomicUsize::new(0));
    let (stored, was_stored) = mpsc::channel();
    let task =
        pool.spawn_future(Flagged { flag: flag.clone(), slot: slot.clone(), stored, polls: polls.clone() });
    was_stored.recv().unwrap();
    (pool, task, flag, slot, polls)
}

#[test]
fn wakes_from_another_thread_while_queued_lead_to_one_poll() {
    let (pool, task, flag, slot, polls) = flagged_future(fixed(1));
    // The only worker runs the blocker once the first poll is over: the future is idle.
    let (blocker, release) = occupy_one(&pool);
    let waker = std::thread::spawn(move || {
        flag.store(true, Ordering::SeqCst);
        let waker = slot.lock().unwrap().take().expect("the first poll left its waker");
        // The first wake-up queues the poll; the worker is busy, so the others find it queued.
        for _ in 0..5 {
            waker.wake_by_ref();
        }
    });
    waker.join().unwrap();
    assert_eq!(polls.load(Ordering::SeqCst), 1, "queued behind the blocker, not polled yet");
    drop(release);
    blocker.join().unwrap();
    assert_eq!(task.join().unwrap(), 2, "five wake-ups while queued are one poll");
    pool.shutdown();
    assert_eq!(polls.load(Ordering::SeqCst), 2);
}

#[test]
fn a_wake_up_from_another_thread_while_the_queue_is_full_returns_at_once_and_is_polled_later() {
    // The waker's thread stands for a tokio I/O driver: waiting there for room would stall
    // every socket it serves. The poll goes to the queue's overflow list instead.
    let (pool, task, flag, slot, polls) = flagged_future(fixed(1).queue_capacity(1).on_full(Full::Block));
    let (blocker, release) = occupy_one(&pool);
    let filler = pool.spawn(|| 3);
    assert_eq!(pool.metrics().queued, 1, "the queue's one place is taken");
    let (woke, returned) = mpsc::channel();
    let waker = std::thread::spawn(move || {
        flag.store(true, Ordering::SeqCst);
        slot.lock().unwrap().take().expect("the first poll left its waker").wake();
        woke.send(()).unwrap();
    });
    // A guard against a hang only: the wake-up returns at once, or never (the only worker is
    // held until `release`).
    returned.recv_timeout(Duration::from_secs(60)).expect("the wake-up returned with the queue full");
    waker.join().unwrap();
    assert_eq!(polls.load(Ordering::SeqCst), 1, "not polled on the waker's thread");
    assert_eq!(pool.metrics().queued, 2, "the filler in the queue, the poll in its overflow");
    drop(release);
    blocker.join().unwrap();
    assert_eq!(task.join().unwrap(), 2, "polled once more, by the worker");
    assert_eq!(filler.join().unwrap(), 3);
    pool.shutdown();
    assert_eq!(pool.metrics().caller_ran, 0, "nothing ran on a caller's thread");
}

#[test]
fn a_future_woken_by_a_closure_while_the_queue_is_full_is_not_polled_inside_it() {
    let (pool, task, flag, slot, polls) = flagged_future(fixed(1).queue_capacity(1).on_full(Full::Block));
    let (go, wait_go) = mpsc::channel::<()>();
    let seen = polls.clone();
    // Runs on the only worker: it fills the queue, then wakes the future; the poll must not
    // run inside this closure (the count is unchanged when the wake-up returns).
    let waking = pool.spawn(move || {
        wait_go.recv().unwrap();
        flag.store(true, Ordering::SeqCst);
        slot.lock().unwrap().take().expect("the first poll left its waker").wake();
        seen.load(Ordering::SeqCst)
    });
    // Queued once the worker has taken `waking` (the queue has one place): the queue is full.
    let filler = pool.spawn(|| 3);
    go.send(()).unwrap();
    assert_eq!(waking.join().unwrap(), 1, "not polled inside the waking closure");
    assert_eq!(task.join().unwrap(), 2);
    assert_eq!(filler.join().unwrap(), 3);
    pool.shutdown();
    assert_eq!(pool.metrics().caller_ran, 0);
}

/// Pending once per poll until `flag` is set (waking itself each time: `yield_now`'s idiom), at
/// most `limit` times; returns how many times it yielded.
struct YieldUntil {
    flag: Arc<AtomicBool>,
    limit: usize,
    yielded: usize,
}

impl Future for YieldUntil {
    type Output = usize;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        if self.flag.load(Ordering::SeqCst) || self.yielded == self.limit {
            return Poll::Ready(self.yielded);
        }
        self.yielded += 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn a_future_that_keeps_waking_itself_past_a_full_queue_does_not_starve_the_queued_tasks() {
    // One worker, a queue of two: [the future, a closure that sets the flag]. The future's
    // first poll queues one more closure (the queue is full again) and yields: its next poll
    // goes past the full queue, behind the closure, which runs first.
    let pool = Arc::new(fixed(1).queue_capacity(2).on_full(Full::Block).build().unwrap());
    let (blocker, release) = occupy_one(&pool);
    let flag = Arc::new(AtomicBool::new(false));
    let inner = pool.clone();
    let yielding = YieldUntil { flag: flag.clone(), limit: 1000, yielded: 0 };
    let task = pool.spawn_future(async move {
        inner.execute(|| {});
        yielding.await
    });
    let setter = flag.clone();
    let closure = pool.spawn(move || setter.store(true, Ordering::SeqCst));
    drop(release);
    blocker.join().unwrap();
    closure.join().unwrap();
    assert_eq!(task.join().unwrap(), 1, "the queued closure ran after one yield, not after the limit");
    pool.wait_idle();
}

#[test]
fn a_thousand_self_waking_futures_complete_through_a_queue_of_four() {
    // Requeues from the workers find the queue full most of the time: they go to its overflow
    // list, never refused, never blocking the worker, never polled inline.
    let pool = fixed(2).queue_capacity(4).on_full(Full::Block).build().unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..1000).map(|_| pool.spawn_future(WakesItself::new(3, &polls))).collect();
    for task in tasks {
        assert_eq!(task.join().unwrap(), 4);
    }
    pool.shutdown();
    assert_eq!(polls.load(Ordering::SeqCst), 4000);
    let metrics = pool.metrics();
    assert_eq!(metrics.completed, 4000, "each poll is one task");
    assert_eq!(metrics.rejected, 0);
    assert_eq!(metrics.caller_ran, 0, "every poll was queued");
}

#[test]
fn under_reject_a_spawn_may_be_refused_but_a_wake_up_never_is() {
    let pool = fixed(1).queue_capacity(2).on_full(Full::Reject).build().unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..200).map(|_| pool.spawn_future(WakesItself::new(3, &polls))).collect();
    let mut ran = 0;
    for task in tasks {
        match task.join() {
            Ok(mine) => {
                assert_eq!(mine, 4);
                ran += 1;
            }
            Err(JoinError::Rejected) => {}
            Err(other) => panic!("an accepted future must complete, got {other:?}"),
        }
    }
    assert!(ran >= 1, "the first spawn found the queue empty");
    pool.shutdown();
    assert_eq!(polls.load(Ordering::SeqCst), 4 * ran, "a refused future is never polled");
}

#[test]
fn a_future_awaits_futures_and_closures_it_spawns_on_its_own_single_worker_pool() {
    // One worker: the outer future waits by returning Pending, not by holding the worker.
    let pool = Arc::new(fixed(1).build().unwrap());
    let inner = pool.clone();
    let outer = pool.spawn_future(async move {
        let nested = inner.clone();
        let from_future = inner
            .spawn_future(async move {
                let squared = nested.spawn(|| 12 * 12).await?;
                Ok::<u32, JoinError>(squared + 1)
            })
            .await??;
        let from_closure = inner.spawn(|| 55).await?;
        Ok::<u32, JoinError>(from_future + from_closure)
    });
    assert_eq!(block_on(outer).unwrap().unwrap(), 200);
    pool.wait_idle();
}

/// Pending for good: its first poll leaves its waker in `slot` and says so on `stored`.
struct Parked {
    slot: WakerSlot,
    stored: mpsc::Sender<()>,
}

impl Future for Parked {
    type Output = u8;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u8> {
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        let _ = self.stored.send(());
        Poll::Pending
    }
}

/// A pool with one `Parked` future that has been polled once: the pool, the task, the slot.
fn parked_future() -> (Pool, cotenant::Task<u8>, WakerSlot) {
    let pool = fixed(1).build().unwrap();
    let slot = WakerSlot::default();
    let (stored, was_stored) = mpsc::channel();
    let task = pool.spawn_future(Parked { slot: slot.clone(), stored });
    was_stored.recv().unwrap();
    (pool, task, slot)
}

/// The task's result, with a deadline that only guards against a hang.
fn cancelled(task: cotenant::Task<u8>) -> bool {
    matches!(task.join_timeout(Duration::from_secs(10)), Err(JoinTimeoutError::Failed(JoinError::Cancelled)))
}

#[test]
fn a_future_pending_at_shutdown_is_cancelled_by_the_shutdown() {
    let (pool, task, slot) = parked_future();
    pool.shutdown();
    assert!(task.is_finished(), "waiting for a wake-up that may never come: cancelled by the shutdown");
    // The slot held the only waker (the future held the slot): dropping it now changes nothing.
    drop(slot.lock().unwrap().take());
    assert!(cancelled(task));
}

#[test]
fn a_future_pending_at_shutdown_is_cancelled_when_it_is_woken() {
    let (pool, task, slot) = parked_future();
    pool.shutdown();
    let waker = slot.lock().unwrap().take().expect("the first poll left its waker");
    waker.wake();
    assert!(cancelled(task));
    drop(pool);
}

#[test]
fn a_future_woken_after_its_pool_was_dropped_is_cancelled() {
    let (pool, task, slot) = parked_future();
    drop(pool);
    let waker = slot.lock().unwrap().take().expect("the first poll left its waker");
    waker.wake_by_ref();
    assert!(cancelled(task));
    waker.wake(); // a done task ignores wake-ups
}

#[test]
fn spawning_on_a_shut_down_pool_is_rejected() {
    let pool = fixed(1).build().unwrap();
    pool.shutdown();
    assert!(matches!(pool.spawn_future(async { 1 }).join(), Err(JoinError::Rejected)));
}

#[test]
fn the_metrics_count_each_poll_and_each_wake_up_that_queued_one() {
    let pool = fixed(1).build().unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    // Pending twice, waking itself during each of those polls: three polls, two wake-ups.
    assert_eq!(pool.spawn_future(WakesItself::new(2, &polls)).join().unwrap(), 3);
    // The Task resolves inside the last poll; its worker counts it completed just after.
    pool.wait_idle();
    let metrics = pool.metrics();
    assert_eq!(metrics.future_polls, 3, "{metrics}");
    assert_eq!(metrics.future_wakeups, 2, "{metrics}");
    assert_eq!(metrics.completed, 3, "each poll is one task: {metrics}");
    pool.shutdown();

    let closures = fixed(1).build().unwrap();
    closures.spawn(|| ()).join().unwrap();
    closures.execute(|| ());
    closures.wait_idle();
    let metrics = closures.metrics();
    assert_eq!((metrics.future_polls, metrics.future_wakeups), (0, 0), "closures only: {metrics}");
    assert_eq!(metrics.completed, 2, "{metrics}");
}

#[test]
fn wake_ups_that_find_the_poll_already_queued_are_not_counted() {
    let (pool, task, flag, slot, _polls) = flagged_future(fixed(1));
    // Once the blocker runs, the first poll is over: the future is idle, waiting for a wake-up.
    let (blocker, release) = occupy_one(&pool);
    flag.store(true, Ordering::SeqCst); // the next poll completes
    let waker = slot.lock().unwrap().take().expect("the first poll left its waker");
    // The first wake-up queues the poll (the worker is busy); the others find it queued.
    for _ in 0..5 {
        waker.wake_by_ref();
    }
    drop(release);
    blocker.join().unwrap();
    assert_eq!(task.join().unwrap(), 2);
    pool.wait_idle();
    let metrics = pool.metrics();
    assert_eq!(metrics.future_polls, 2, "{metrics}");
    assert_eq!(metrics.future_wakeups, 1, "five wake-ups, one poll queued: {metrics}");
    assert_eq!(metrics.completed, 3, "two polls and the blocker: {metrics}");
}

/// A future whose drop panics, dropped with its last waker while pending: the panic stays
/// inside the pool, the `Task` resolves as cancelled, and the pool keeps working.
#[test]
fn a_future_whose_drop_panics_when_its_last_waker_goes_is_cancelled_quietly() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("drop of a pending future");
        }
    }
    struct Pending(PanicsOnDrop);
    impl std::future::Future for Pending {
        type Output = ();
        fn poll(self: std::pin::Pin<&mut Self>, _cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
            let _keep = &self.0;
            std::task::Poll::Pending // keeps no waker: nothing can wake it again
        }
    }
    let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).build().unwrap();
    let task = pool.spawn_future(Pending(PanicsOnDrop));
    // The only handle to the future goes when its poll ends: the join cannot hang.
    match task.join_timeout(std::time::Duration::from_secs(10)) {
        Err(cotenant::JoinTimeoutError::Failed(cotenant::JoinError::Cancelled)) => {}
        Err(cotenant::JoinTimeoutError::Timeout(_)) => panic!("the task never resolved"),
        other => panic!("expected a cancelled task, got {:?}", other.map_err(|e| e.to_string())),
    }
    assert_eq!(pool.spawn(|| 7).join().unwrap(), 7, "the worker survived");
}

/// A future that waits for a wake-up nobody will send, while its waker stays alive elsewhere:
/// the pool's shutdown cancels it, so its `Task` resolves instead of waiting for ever.
#[test]
fn shutdown_cancels_a_future_whose_waker_is_kept_alive_elsewhere() {
    use std::sync::{Arc, Mutex};
    use std::task::{Poll, Waker};
    let kept: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&kept);
    let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).build().unwrap();
    let task = pool.spawn_future(std::future::poll_fn(move |cx| {
        *slot.lock().unwrap() = Some(cx.waker().clone());
        Poll::<()>::Pending
    }));
    // Wait (without a timing assumption) until the first poll has stored the waker.
    while kept.lock().unwrap().is_none() {
        std::thread::yield_now();
    }
    pool.shutdown();
    match task.join_timeout(std::time::Duration::from_secs(10)) {
        Err(cotenant::JoinTimeoutError::Failed(cotenant::JoinError::Cancelled)) => {}
        Err(cotenant::JoinTimeoutError::Timeout(_)) => panic!("the task never resolved"),
        other => panic!("expected a cancelled task, got {:?}", other.map_err(|e| e.to_string())),
    }
    // The waker is still alive: waking it now does nothing harmful.
    kept.lock().unwrap().take().unwrap().wake();
}

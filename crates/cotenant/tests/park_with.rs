//! `Builder::park_with`: idle workers wait inside a hook (another runtime's `block_on`), one at
//! a time and only while the target allows them to run; a future woken from inside the hook is
//! polled by the worker that was in it; a hook that returns early or panics costs nothing but
//! the hook.
//!
//! The "reactor" here is a channel of wakers that the hook's own `block_on` wakes while it
//! waits, which is what a runtime's reactor does with readiness events.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, ThreadId};
use std::time::Duration;

use cotenant::{Policy, Pool, Woken};

/// Only a guard against a hang: every wait here ends long before it.
const GUARD: Duration = Duration::from_secs(60);

/// Waits until `done` holds (a state, whatever the timing), failing with `what` after `GUARD`.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + GUARD;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        thread::sleep(Duration::from_millis(1));
    }
}

fn builder(workers: usize) -> cotenant::Builder {
    Pool::builder().name("park-with").policy(Policy::fixed(workers)).host_tokens_off()
}

/// A `block_on` for the hook that also plays a reactor: while `woken` is pending it wakes, on
/// its own thread, the wakers sent to `events`.
struct FakeReactor {
    events: Mutex<Receiver<Waker>>,
    /// While set, the reactor delivers nothing (events wait in the channel).
    paused: AtomicBool,
    /// Threads that were in the hook, as the hook saw them.
    drivers: Mutex<Vec<ThreadId>>,
}

struct ThreadWaker(thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

impl FakeReactor {
    fn new() -> (Arc<FakeReactor>, Sender<Waker>) {
        let (send, events) = channel();
        let reactor = FakeReactor {
            events: Mutex::new(events),
            paused: AtomicBool::new(false),
            drivers: Mutex::new(Vec::new()),
        };
        (Arc::new(reactor), send)
    }

    fn block_on(&self, woken: &mut Woken<'_>) {
        self.drivers.lock().unwrap().push(thread::current().id());
        let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
        let mut cx = Context::from_waker(&waker);
        let events = self.events.lock().unwrap();
        loop {
            if Pin::new(&mut *woken).poll(&mut cx).is_ready() {
                return;
            }
            // The reactor's turn: readiness events wake their futures from this thread. A
            // wake-up of `woken` from another thread unparks this one, which the short timeout
            // stands in for (a real reactor is woken through its own file descriptor).
            if self.paused.load(Ordering::SeqCst) {
                thread::park_timeout(Duration::from_millis(1));
                continue;
            }
            match events.recv_timeout(Duration::from_millis(1)) {
                Ok(event) => event.wake(),
                Err(RecvTimeoutError::Timeout) => thread::park_timeout(Duration::from_millis(1)),
                Err(RecvTimeoutError::Disconnected) => thread::park_timeout(Duration::from_millis(1)),
            }
        }
    }
}

/// A future that registers with the fake reactor once, then reports the thread that polled it
/// after the reactor woke it.
struct WaitForEvent {
    events: Sender<Waker>,
    registered: bool,
    /// Told once the future has registered.
    on_register: Option<Sender<()>>,
}

impl Future for WaitForEvent {
    type Output = ThreadId;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ThreadId> {
        if self.registered {
            return Poll::Ready(thread::current().id());
        }
        self.registered = true;
        self.events.send(cx.waker().clone()).expect("the reactor is alive");
        if let Some(told) = self.on_register.take() {
            let _ = told.send(());
        }
        Poll::Pending
    }
}

#[test]
fn a_future_woken_from_inside_the_hook_is_polled_once_the_hook_returns() {
    let (reactor, events) = FakeReactor::new();
    let hook = reactor.clone();
    let pool = builder(1).park_with(move |woken| hook.block_on(woken)).build().unwrap();
    for _ in 0..20 {
        let task =
            pool.spawn_future(WaitForEvent { events: events.clone(), registered: false, on_register: None });
        let polled_on = task.join_timeout(GUARD).expect("the reactor woke the future");
        // The only worker registered the future, then drove the reactor that woke it.
        assert!(reactor.drivers.lock().unwrap().contains(&polled_on));
    }
    assert!(pool.metrics().future_wakeups >= 20);
    pool.shutdown();
}

#[test]
fn the_reactor_is_driven_while_the_worker_that_drove_it_runs_a_long_task() {
    let (reactor, events) = FakeReactor::new();
    let hook = reactor.clone();
    let pool = builder(2).park_with(move |woken| hook.block_on(woken)).build().unwrap();
    // Both futures register before the reactor delivers anything: the first event then goes
    // to the worker driving it, which takes the long task, while the second waits.
    reactor.paused.store(true, Ordering::SeqCst);
    let (open, gate) = channel::<()>();
    let (registered, has_registered) = channel::<()>();
    // Once its event comes, computes until the gate opens: the long handler.
    let long = pool.spawn_future({
        let first =
            WaitForEvent { events: events.clone(), registered: false, on_register: Some(registered.clone()) };
        async move {
            first.await;
            gate.recv_timeout(GUARD).expect("the gate opens once the short future has run");
        }
    });
    has_registered.recv_timeout(GUARD).expect("the long future registered");
    let short = pool.spawn_future(WaitForEvent {
        events: events.clone(),
        registered: false,
        on_register: Some(registered),
    });
    has_registered.recv_timeout(GUARD).expect("the short future registered");
    // Coverage, not correctness: time for the worker that polled the short future to go back
    // to sleep, so that the driver's own wake-up is what takes the long task.
    thread::sleep(Duration::from_millis(20));
    reactor.paused.store(false, Ordering::SeqCst);
    // The worker that took the long task handed the hook to the other, idle one.
    short.join_timeout(GUARD).expect("the second event was delivered while the long task ran");
    open.send(()).unwrap();
    long.join_timeout(GUARD).expect("the long task finished");
    pool.shutdown();
}

#[test]
fn only_one_allowed_worker_is_in_the_hook_at_a_time() {
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let names = Arc::new(Mutex::new(Vec::<String>::new()));
    let (i, m, n) = (inside.clone(), most.clone(), names.clone());
    // Four threads, two allowed to run: workers 2 and 3 must never enter the hook.
    let pool = builder(2)
        .threads(4)
        .park_with(move |woken| {
            let now = i.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            n.lock().unwrap().push(thread::current().name().unwrap_or("").to_owned());
            cotenant::block_on(woken);
            i.fetch_sub(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    assert_eq!(pool.metrics().target, 2);
    for round in 0..20 {
        let tasks: Vec<_> = (0..8).map(|k| pool.spawn(move || round * k)).collect();
        for (k, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.join_timeout(GUARD).unwrap(), round * k);
        }
        // Idle again, an allowed worker is in the hook once it has spun (a wait for a state,
        // not a timing assertion).
        wait_for("no idle worker entered the hook", || inside.load(Ordering::SeqCst) != 0);
    }
    pool.shutdown();
    assert_eq!(most.load(Ordering::SeqCst), 1, "at most one worker in the hook at once");
    assert_eq!(inside.load(Ordering::SeqCst), 0, "every worker left the hook by shutdown");
    let names = names.lock().unwrap();
    assert!(!names.is_empty(), "an idle allowed worker waits in the hook");
    for name in names.iter() {
        assert!(name == "park-with-0" || name == "park-with-1", "a parked worker entered the hook: {name}");
    }
}

#[test]
fn a_hook_that_returns_early_is_called_again_and_one_that_panics_is_not() {
    let early_calls = Arc::new(AtomicUsize::new(0));
    let panicked_calls = Arc::new(AtomicUsize::new(0));
    let (e, p) = (early_calls.clone(), panicked_calls.clone());
    let early = builder(1)
        .park_with(move |_woken| {
            e.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let panicking = builder(1)
        .park_with(move |_woken| {
            p.fetch_add(1, Ordering::SeqCst);
            panic!("a broken park hook")
        })
        .build()
        .unwrap();
    let mut previous_early = 0;
    for round in 0..10 {
        for pool in [&early, &panicking] {
            assert_eq!(pool.spawn(move || round + 1).join_timeout(GUARD).unwrap(), round + 1);
            let future = pool.spawn_future(async move { round * 2 });
            assert_eq!(future.join_timeout(GUARD).unwrap(), round * 2);
        }
        // The early hook's worker goes to sleep through it again each time it is idle (a wait
        // for a state), and the next task still wakes it.
        wait_for("the idle worker never called the hook", || {
            early_calls.load(Ordering::SeqCst) != previous_early
        });
        previous_early = early_calls.load(Ordering::SeqCst);
    }
    // The panicking hook ran once, when its worker first went idle, and never again; its
    // worker still ran every task, sleeping without it.
    wait_for("the idle worker never called the hook", || panicked_calls.load(Ordering::SeqCst) != 0);
    early.shutdown();
    panicking.shutdown();
    assert_eq!(panicked_calls.load(Ordering::SeqCst), 1);
}

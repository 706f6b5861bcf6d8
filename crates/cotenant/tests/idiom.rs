//! The pool in rayon's and std's idiom: scoped tasks, `join(a, b)`, the builder's stack size,
//! thread hooks and panic handler, `Task::try_join` and `join_timeout`, `wait_idle`,
//! `shutdown_timeout`, and `cpus::get`. Every wait is on an event (a channel, a flag another
//! thread sets); the only timeouts are generous guards that turn a deadlock into a failure.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cotenant::pool::{JoinTimeoutError, Scope};
use cotenant::{Builder, Full, JoinError, Policy, Pool};

/// How long a guard waits before it calls a wait a deadlock. Nothing here takes more than a
/// fraction of a second on an idle machine; the margin is for a loaded CI host.
const GUARD: Duration = Duration::from_secs(120);

/// A fixed pool of `n` workers without host tokens (other test processes must not be able to
/// delay these tasks).
fn fixed(n: usize) -> Builder {
    Pool::builder().policy(Policy::fixed(n)).host_tokens_off()
}

/// Two threads of which only worker 0 may run: a task that waits for another task of the pool
/// finishes only if the wait runs that task itself.
fn one_allowed_of_two() -> Builder {
    Pool::builder().threads(2).policy(Policy::fixed(1)).host_tokens_off()
}

/// Runs `f` on a thread of its own and returns its value (or raises its panic), failing the
/// test if it has not finished within `GUARD`: a deadlock fails instead of hanging.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, is_done) = mpsc::channel::<()>();
    let handle = std::thread::spawn(move || {
        let _done = done; // dropped when `f` returns or unwinds: either way, `is_done` hears it
        f()
    });
    if let Err(RecvTimeoutError::Timeout) = is_done.recv_timeout(GUARD) {
        panic!("{what}: not done within {GUARD:?}, a deadlock");
    }
    match handle.join() {
        Ok(value) => value,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Waits until `condition` holds, failing the test after `GUARD`.
fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < GUARD, "{what}: not within {GUARD:?}");
        std::thread::yield_now();
    }
}

/// The text of a panic payload (`panic!` gives a `&str` or a `String`).
fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<not a string>".to_owned())
}

/// Panics with `text`, typed as whatever the caller needs (no closure's type then depends on
/// how the compiler types a bare `panic!`).
fn boom<T>(text: &str) -> T {
    panic!("{text}")
}

/// Occupies the only worker of a one-worker pool until the returned sender is dropped or sent
/// to, and returns once the worker holds the task (the queue is then empty).
fn occupy_the_worker(pool: &Pool) -> (cotenant::Task<()>, mpsc::Sender<()>) {
    let (release, gate) = mpsc::channel::<()>();
    let (started, has_started) = mpsc::channel::<()>();
    let task = pool.spawn(move || {
        started.send(()).unwrap();
        let _ = gate.recv();
    });
    has_started.recv_timeout(GUARD).expect("the blocker never started");
    (task, release)
}

// ---------------------------------------------------------------------------------------------
// Pool::scope

#[test]
fn scoped_tasks_borrow_the_stack_and_all_end_before_scope_returns() {
    let pool = fixed(2).build().unwrap();
    let inputs: Vec<u64> = (0..100).collect();
    let mut squares = vec![0u64; 100];
    let nested = AtomicUsize::new(0);
    let returned = pool.scope(|s| {
        for (input, square) in inputs.iter().zip(squares.iter_mut()) {
            let nested = &nested;
            s.spawn(move |s| {
                *square = input * input;
                s.spawn(move |_| {
                    nested.fetch_add(1, Ordering::Relaxed);
                });
            });
        }
        "the closure's value"
    });
    assert_eq!(returned, "the closure's value");
    assert_eq!(squares, inputs.iter().map(|i| i * i).collect::<Vec<_>>());
    assert_eq!(nested.load(Ordering::Relaxed), 100, "nested tasks ended before scope returned");
    pool.wait_idle();
    assert_eq!(pool.metrics().completed, 200);
}

#[test]
fn a_scoped_task_panic_is_raised_after_every_other_task_ended() {
    let pool = fixed(2).build().unwrap();
    let panicked = AtomicBool::new(false);
    let other_ended = AtomicBool::new(false);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|_| {
                panicked.store(true, Ordering::SeqCst);
                boom::<()>("scoped boom");
            });
            s.spawn(|_| {
                // Ends only after the panic: the scope must still wait for it.
                while !panicked.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                other_ended.store(true, Ordering::SeqCst);
            });
        })
    }));
    let payload = outcome.expect_err("the task's panic reaches the scope's caller");
    assert_eq!(message(&*payload), "scoped boom");
    assert!(other_ended.load(Ordering::SeqCst), "scope waited for the other task");
    pool.wait_idle();
    assert_eq!(pool.metrics().panicked, 1);
}

#[test]
fn a_panic_of_the_scope_closure_waits_for_its_tasks_too() {
    let pool = fixed(2).build().unwrap();
    let task_ended = AtomicBool::new(false);
    let (release, gate) = mpsc::channel::<()>();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            let task_ended = &task_ended;
            s.spawn(move |_| {
                // Returns when the closure's unwinding drops `release`.
                let _ = gate.recv();
                task_ended.store(true, Ordering::SeqCst);
            });
            let _release = release;
            boom::<u8>("closure boom")
        })
    }));
    assert_eq!(message(&*outcome.expect_err("the closure's panic")), "closure boom");
    assert!(task_ended.load(Ordering::SeqCst), "scope waited for the task");
}

#[test]
fn a_scope_on_the_only_allowed_worker_runs_its_tasks_while_it_waits() {
    let pool = Arc::new(one_allowed_of_two().build().unwrap());
    let sum = within("a scope inside a task", {
        let pool = pool.clone();
        move || {
            pool.clone()
                .spawn(move || {
                    let pool: &Pool = &pool;
                    let mut parts = [0u64; 10];
                    pool.scope(|s| {
                        for (i, part) in parts.iter_mut().enumerate() {
                            s.spawn(move |_| {
                                // A join inside a scoped task, on the same single worker.
                                let i = i as u64;
                                let (a, b) = pool.join(|| i, || 10 * i);
                                *part = a + b;
                            });
                        }
                    });
                    parts.iter().sum::<u64>()
                })
                .join()
                .unwrap()
        }
    });
    assert_eq!(sum, (0..10u64).map(|i| 11 * i).sum::<u64>());
    assert_eq!(pool.metrics().target, 1);
}

#[test]
fn scoped_tasks_the_pool_refuses_run_on_the_spawning_thread() {
    let pool = fixed(1).queue_capacity(1).on_full(Full::Reject).build().unwrap();
    let (blocker, release) = occupy_the_worker(&pool);
    let me = std::thread::current().id();
    let on_caller = AtomicUsize::new(0);
    let ran = AtomicUsize::new(0);
    pool.scope(|s| {
        for _ in 0..5 {
            s.spawn(|_| {
                ran.fetch_add(1, Ordering::SeqCst);
                if std::thread::current().id() == me {
                    on_caller.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        // One task fits in the queue, behind the blocker; let the worker go on to it.
        release.send(()).unwrap();
    });
    blocker.join().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 5, "none refused");
    assert_eq!(on_caller.load(Ordering::SeqCst), 4, "the queue had room for one");
    let metrics = pool.metrics();
    assert_eq!((metrics.caller_ran, metrics.rejected), (4, 0), "{metrics}");
}

#[test]
fn a_scope_on_a_shut_down_pool_runs_every_task_on_the_caller() {
    let pool = fixed(2).build().unwrap();
    pool.shutdown();
    let mut values = [0u32; 4];
    pool.scope(|s| {
        for (i, value) in values.iter_mut().enumerate() {
            s.spawn(move |_| *value = i as u32 + 1);
        }
    });
    assert_eq!(values, [1, 2, 3, 4]);
}

#[test]
fn scoped_tasks_cancelled_by_shutdown_now_run_on_the_scope_thread() {
    let pool = Arc::new(fixed(1).build().unwrap());
    let (blocker, release) = occupy_the_worker(&pool);
    let me = std::thread::current().id();
    let ran_here = AtomicUsize::new(0);
    let mut stopper = None;
    pool.scope(|s| {
        for _ in 0..3 {
            s.spawn(|_| {
                if std::thread::current().id() == me {
                    ran_here.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        assert_eq!(pool.metrics().queued, 3, "queued behind the blocker");
        let stopping = pool.clone();
        stopper = Some(std::thread::spawn(move || stopping.shutdown_now()));
        // shutdown_now empties the queue first, then waits for the blocker.
        wait_until("shutdown_now empties the queue", || pool.metrics().queued == 0);
        release.send(()).unwrap();
    });
    assert_eq!(ran_here.load(Ordering::SeqCst), 3, "every cancelled task ran on this thread");
    stopper.expect("started in the scope").join().unwrap();
    blocker.join().unwrap();
}

#[test]
fn scope_is_send_and_sync_and_debug() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Scope<'static>>();
    let pool = fixed(1).build().unwrap();
    let shown = pool.scope(|s| format!("{s:?}"));
    assert!(shown.starts_with("Scope"), "{shown}");
}

// ---------------------------------------------------------------------------------------------
// Pool::join

/// Sums `numbers` by halves, one half on the pool, down to 64 numbers.
fn sum(pool: &Pool, numbers: &[u64]) -> u64 {
    if numbers.len() <= 64 {
        return numbers.iter().sum();
    }
    let (left, right) = numbers.split_at(numbers.len() / 2);
    let (l, r) = pool.join(|| sum(pool, left), || sum(pool, right));
    l + r
}

#[test]
fn join_returns_both_results_of_closures_that_borrow() {
    let pool = fixed(2).build().unwrap();
    let numbers: Vec<u64> = (1..=10_000).collect();
    assert_eq!(sum(&pool, &numbers), 50_005_000);
    let mut left = Vec::new();
    let mut right = String::new();
    let (a, b) = pool.join(
        || {
            left.push(1);
            "a"
        },
        || {
            right.push('b');
            2
        },
    );
    assert_eq!((a, b, left, right.as_str()), ("a", 2, vec![1], "b"));
}

#[test]
fn recursive_joins_on_the_only_allowed_worker_finish() {
    let pool = Arc::new(one_allowed_of_two().build().unwrap());
    let total = within("recursive joins inside a task", {
        let pool = pool.clone();
        move || {
            let numbers: Vec<u64> = (1..=100_000).collect();
            pool.clone().spawn(move || sum(&pool, &numbers)).join().unwrap()
        }
    });
    assert_eq!(total, 5_000_050_000);
}

#[test]
fn a_panic_in_b_is_raised_after_a_ended() {
    let pool = fixed(2).build().unwrap();
    let a_ended = AtomicBool::new(false);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        pool.join(|| a_ended.store(true, Ordering::SeqCst), || boom::<u8>("b failed"))
    }));
    assert_eq!(message(&*outcome.expect_err("b's panic")), "b failed");
    assert!(a_ended.load(Ordering::SeqCst));
}

#[test]
fn a_panic_in_a_is_raised_after_b_ended_and_wins_over_b() {
    let pool = fixed(2).build().unwrap();
    let b_ended = AtomicBool::new(false);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        pool.join(|| boom::<u8>("a failed"), || b_ended.store(true, Ordering::SeqCst))
    }));
    assert_eq!(message(&*outcome.expect_err("a's panic")), "a failed");
    assert!(b_ended.load(Ordering::SeqCst), "b ran before the panic went on");
    let both =
        catch_unwind(AssertUnwindSafe(|| pool.join(|| boom::<u8>("a first"), || boom::<u8>("b second"))));
    assert_eq!(message(&*both.expect_err("a panic")), "a first");
}

#[test]
fn join_on_a_shut_down_or_full_pool_runs_b_on_the_caller() {
    let pool = fixed(1).queue_capacity(1).on_full(Full::Reject).build().unwrap();
    let (blocker, release) = occupy_the_worker(&pool);
    pool.execute(|| {}); // the queue's one slot
    let me = std::thread::current().id();
    let (a, b) = pool.join(|| 1, || std::thread::current().id() == me);
    assert_eq!((a, b), (1, true), "b ran here: the queue was full");
    release.send(()).unwrap();
    blocker.join().unwrap();
    pool.shutdown();
    assert_eq!(pool.join(|| 'a', || 'b'), ('a', 'b'));
    assert_eq!(pool.metrics().rejected, 0, "join's b is never refused");
}

// ---------------------------------------------------------------------------------------------
// Builder: stack size, thread hooks, panic handler

/// Counts calls, and remembers the names of the threads it was called on.
#[derive(Default)]
struct Calls {
    names: Mutex<Vec<String>>,
}

impl Calls {
    fn record(&self) {
        let name = std::thread::current().name().unwrap_or("<unnamed>").to_owned();
        self.names.lock().unwrap().push(name);
    }

    fn names(&self) -> Vec<String> {
        let mut names = self.names.lock().unwrap().clone();
        names.sort();
        names
    }
}

fn hooked(builder: Builder, started: &Arc<Calls>, stopped: &Arc<Calls>) -> Builder {
    let (started, stopped) = (started.clone(), stopped.clone());
    builder.on_thread_start(move || started.record()).on_thread_stop(move || stopped.record())
}

#[test]
fn thread_hooks_run_once_on_each_worker_and_shutdown_waits_for_the_stop_hooks() {
    let (started, stopped) = (Arc::new(Calls::default()), Arc::new(Calls::default()));
    let pool = hooked(fixed(3).name("hooked"), &started, &stopped).build().unwrap();
    assert_eq!(pool.spawn(|| 1).join().unwrap(), 1);
    pool.shutdown();
    let expected = vec!["hooked-0".to_owned(), "hooked-1".to_owned(), "hooked-2".to_owned()];
    assert_eq!(started.names(), expected, "on each worker thread, once");
    assert_eq!(stopped.names(), expected, "before shutdown returned");
}

#[test]
fn an_elastic_pool_calls_the_hooks_on_every_thread_it_starts() {
    let (started, stopped) = (Arc::new(Calls::default()), Arc::new(Calls::default()));
    let pool = hooked(Pool::builder().elastic(2, 8).name("stretchy"), &started, &stopped)
        .stack_size(1 << 20)
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..20u64).map(|i| pool.spawn(move || i)).collect();
    let total: u64 = tasks.into_iter().map(|task| task.join().unwrap()).sum();
    assert_eq!(total, 190);
    pool.shutdown();
    let (started, stopped) = (started.names(), stopped.names());
    assert!(started.len() >= 2, "at least the minimum: {started:?}");
    assert_eq!(started, stopped, "every thread that started also stopped before shutdown returned");
    assert!(started.iter().all(|name| name.starts_with("stretchy-")), "{started:?}");
}

#[test]
fn the_panic_handler_gets_every_execute_panic_and_the_metrics_still_count_it() {
    let (report, reports) = mpsc::channel::<(String, std::thread::ThreadId)>();
    let report = Mutex::new(report);
    let pool = fixed(2)
        .panic_handler(move |payload| {
            let _ = report.lock().unwrap().send((message(&*payload), std::thread::current().id()));
        })
        .build()
        .unwrap();
    for i in 0..3 {
        pool.execute(move || panic!("detached {i}"));
    }
    pool.execute(|| {});
    // A panic that reaches a `Task` is not the handler's.
    let error = pool.spawn(|| -> u8 { panic!("mine") }).join().unwrap_err();
    assert_eq!(error.panic_message(), Some("mine"));
    pool.wait_idle();
    let mut seen: Vec<String> = reports.try_iter().map(|(text, _)| text).collect();
    seen.sort();
    assert_eq!(seen, ["detached 0", "detached 1", "detached 2"]);
    let metrics = pool.metrics();
    assert_eq!((metrics.panicked, metrics.completed), (4, 5), "{metrics}");
}

#[test]
fn a_panic_run_by_the_caller_reaches_the_handler_on_the_caller_without_unwinding() {
    let (report, reports) = mpsc::channel::<std::thread::ThreadId>();
    let report = Mutex::new(report);
    let pool = fixed(1)
        .queue_capacity(1)
        .on_full(Full::CallerRuns)
        .panic_handler(move |_| {
            let _ = report.lock().unwrap().send(std::thread::current().id());
        })
        .build()
        .unwrap();
    let (blocker, release) = occupy_the_worker(&pool);
    pool.execute(|| {}); // fills the queue
    pool.execute(|| panic!("run by the caller")); // must not unwind here
    assert_eq!(reports.try_recv().unwrap(), std::thread::current().id());
    release.send(()).unwrap();
    blocker.join().unwrap();
    pool.wait_idle();
    assert_eq!(pool.metrics().caller_ran, 1);
}

#[test]
fn panicking_hooks_and_handlers_do_not_stop_the_workers() {
    let (report, reports) = mpsc::channel::<String>();
    let report = Mutex::new(report);
    let pool = fixed(2)
        .on_thread_start(|| panic!("start hook"))
        .panic_handler(move |payload| {
            let text = message(&*payload);
            let _ = report.lock().unwrap().send(text.clone());
            if text == "task" {
                panic!("the handler too");
            }
        })
        .build()
        .unwrap();
    assert_eq!(pool.spawn(|| 6 * 7).join().unwrap(), 42);
    pool.execute(|| panic!("task"));
    pool.wait_idle();
    assert_eq!(pool.spawn(|| 1).join().unwrap(), 1, "the workers survived");
    pool.shutdown();
    let mut seen: Vec<String> = reports.try_iter().collect();
    seen.sort();
    assert_eq!(seen, ["start hook", "start hook", "task"]);
}

#[test]
fn stack_size_is_used_and_zero_is_refused() {
    let pool = fixed(1).stack_size(64 << 20).build().unwrap();
    fn depth(n: u64) -> u64 {
        let frame = [n; 128]; // 1 KiB of array a level: 8 MiB for 8 000 levels
        if n == 0 {
            0
        } else {
            1 + depth(std::hint::black_box(frame)[0] - 1)
        }
    }
    assert_eq!(pool.spawn(|| depth(8_000)).join().unwrap(), 8_000);
    let error = fixed(1).stack_size(0).build().unwrap_err();
    assert!(matches!(error, cotenant::BuildError::InvalidArgument(_)));
    assert!(error.to_string().contains("stack_size must be at least 1 byte, got 0"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// Task::try_join and Task::join_timeout

/// The smallest waker: counts nothing, wakes nobody (the tests poll by hand).
struct NoWake;

impl std::task::Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn try_join_is_none_while_running_then_hands_the_result_over_once() {
    let pool = fixed(1).build().unwrap();
    let (release, gate) = mpsc::channel::<u32>();
    let mut task = pool.spawn(move || gate.recv().unwrap() * 2);
    assert!(task.try_join().is_none());
    assert!(task.try_join().is_none(), "still usable after a None");
    release.send(21).unwrap();
    let start = Instant::now();
    let result = loop {
        if let Some(result) = task.try_join() {
            break result;
        }
        assert!(start.elapsed() < GUARD, "the task never finished");
        std::thread::yield_now();
    };
    assert_eq!(result.unwrap(), 42);
    assert!(matches!(task.try_join(), Some(Err(JoinError::AlreadyTaken))));
    assert!(matches!(task.join(), Err(JoinError::AlreadyTaken)));
    // Taken by a poll first: try_join says so too.
    let mut polled = pool.spawn(|| 5);
    let waker = std::task::Waker::from(Arc::new(NoWake));
    let mut cx = std::task::Context::from_waker(&waker);
    let value = loop {
        if let std::task::Poll::Ready(value) = std::pin::Pin::new(&mut polled).poll(&mut cx) {
            break value;
        }
        std::thread::yield_now();
    };
    assert_eq!(value.unwrap(), 5);
    assert!(matches!(polled.try_join(), Some(Err(JoinError::AlreadyTaken))));
    // A rejected task has its answer at once.
    pool.shutdown();
    assert!(matches!(pool.spawn(|| 1).try_join(), Some(Err(JoinError::Rejected))));
}

#[test]
fn join_timeout_gives_the_task_back_on_timeout_and_its_result_later() {
    let pool = fixed(1).build().unwrap();
    let (release, gate) = mpsc::channel::<()>();
    let task = pool.spawn(move || gate.recv().map(|()| "done"));
    let error = task.join_timeout(Duration::from_millis(5)).unwrap_err();
    assert!(error.is_timeout());
    assert_eq!(error.to_string(), "the task did not finish within the timeout");
    let task = error.into_task().expect("the handle comes back");
    let task = match task.join_timeout(Duration::ZERO) {
        Err(JoinTimeoutError::Timeout(task)) => task,
        other => panic!("a zero timeout only looks: {other:?}"),
    };
    release.send(()).unwrap();
    assert_eq!(task.join_timeout(GUARD).unwrap().unwrap(), "done");
    // Finished before the call: a zero timeout is enough.
    let done = pool.spawn(|| 3);
    pool.wait_idle();
    assert_eq!(done.join_timeout(Duration::ZERO).unwrap(), 3);
}

#[test]
fn join_timeout_reports_a_failed_task_as_an_error_with_its_source() {
    fn send_sync_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    let pool = fixed(1).build().unwrap();
    let error = pool.spawn(|| -> u8 { panic!("timed boom") }).join_timeout(GUARD).unwrap_err();
    send_sync_error(&error);
    assert!(!error.is_timeout());
    assert_eq!(error.to_string(), "the task panicked: timed boom");
    let source = std::error::Error::source(&error).expect("the JoinError");
    assert_eq!(source.to_string(), "the task panicked: timed boom");
    assert!(matches!(error, JoinTimeoutError::Failed(JoinError::Panicked(_))));
    assert!(error.into_task().is_none());
    // `?` into a boxed error, as callers of anyhow-style code write.
    let joined = || -> Result<u8, Box<dyn std::error::Error + Send + Sync>> {
        Ok(pool.spawn(|| 9u8).join_timeout(GUARD)?)
    };
    assert_eq!(joined().unwrap(), 9);
}

#[test]
fn join_timeout_on_the_only_allowed_worker_runs_the_task_it_waits_for() {
    let pool = Arc::new(one_allowed_of_two().build().unwrap());
    let value = within("join_timeout inside a task", {
        let pool = pool.clone();
        move || pool.clone().spawn(move || pool.spawn(|| 7).join_timeout(GUARD).unwrap()).join().unwrap()
    });
    assert_eq!(value, 7);
}

// ---------------------------------------------------------------------------------------------
// Pool::wait_idle

#[test]
fn wait_idle_returns_once_every_task_ran_and_the_pool_goes_on() {
    let pool = fixed(2).build().unwrap();
    pool.wait_idle(); // a new pool is idle
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..500 {
        let done = done.clone();
        pool.execute(move || {
            done.fetch_add(1, Ordering::Relaxed);
        });
    }
    pool.wait_idle();
    assert_eq!(done.load(Ordering::Relaxed), 500);
    let metrics = pool.metrics();
    assert_eq!((metrics.completed, metrics.queued), (500, 0), "{metrics}");
    assert_eq!(pool.spawn(|| 1).join().unwrap(), 1, "still accepting");
    pool.shutdown();
    pool.wait_idle(); // and a shut-down one
}

#[test]
fn wait_idle_timeout_is_false_while_a_task_runs_and_true_after() {
    let pool = fixed(1).build().unwrap();
    let (blocker, release) = occupy_the_worker(&pool);
    let queued = pool.spawn(|| 2);
    assert!(!pool.wait_idle_timeout(Duration::from_millis(5)), "the blocker still runs");
    assert!(!pool.wait_idle_timeout(Duration::ZERO));
    release.send(()).unwrap();
    assert!(pool.wait_idle_timeout(GUARD));
    assert!(queued.is_finished() && blocker.is_finished());
    assert_eq!(queued.join().unwrap(), 2);
}

#[test]
fn wait_idle_from_a_task_on_the_only_allowed_worker_runs_the_queue_and_skips_itself() {
    let pool = Arc::new(one_allowed_of_two().build().unwrap());
    let children = within("wait_idle inside a task", {
        let pool = pool.clone();
        move || {
            pool.clone()
                .spawn(move || {
                    let done = Arc::new(AtomicUsize::new(0));
                    for _ in 0..10 {
                        let done = done.clone();
                        pool.execute(move || {
                            done.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                    pool.wait_idle(); // every task but this one
                    done.load(Ordering::SeqCst)
                })
                .join()
                .unwrap()
        }
    });
    assert_eq!(children, 10);
}

#[test]
fn wait_idle_counts_tasks_shutdown_now_cancelled_as_ended() {
    let pool = Arc::new(fixed(1).build().unwrap());
    let (blocker, release) = occupy_the_worker(&pool);
    let queued: Vec<_> = (0..5).map(|i| pool.spawn(move || i)).collect();
    let stopper = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.shutdown_now())
    };
    for task in queued {
        assert!(matches!(task.join(), Err(JoinError::Cancelled)));
    }
    release.send(()).unwrap();
    stopper.join().unwrap();
    blocker.join().unwrap();
    assert!(pool.wait_idle_timeout(GUARD));
}

// ---------------------------------------------------------------------------------------------
// Pool::shutdown_timeout

#[test]
fn shutdown_timeout_in_time_runs_the_queue_and_the_stop_hooks() {
    let (started, stopped) = (Arc::new(Calls::default()), Arc::new(Calls::default()));
    let pool = hooked(fixed(2), &started, &stopped).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        let done = done.clone();
        pool.execute(move || {
            done.fetch_add(1, Ordering::Relaxed);
        });
    }
    pool.shutdown_timeout(GUARD).unwrap();
    assert_eq!(done.load(Ordering::Relaxed), 100);
    assert_eq!(stopped.names().len(), 2);
}

#[test]
fn shutdown_timeout_late_reports_and_detaches_and_the_queue_still_runs() {
    let (stop, stops) = mpsc::channel::<()>();
    let stop = Mutex::new(stop);
    let pool = fixed(1)
        .name("late")
        .on_thread_stop(move || {
            let _ = stop.lock().unwrap().send(());
        })
        .build()
        .unwrap();
    let (blocker, release) = occupy_the_worker(&pool);
    let queued: Vec<_> = (0..2).map(|i| pool.spawn(move || i * 10)).collect();
    let late = pool.shutdown_timeout(Duration::from_millis(5)).unwrap_err();
    assert_eq!((late.running_workers(), late.queued_tasks()), (1, 2));
    assert!(late.to_string().contains("1 worker(s) still running, 2 task(s) still queued"), "{late}");
    drop(late); // detaches: returns at once although the worker is still blocked
    release.send(()).unwrap();
    blocker.join().unwrap();
    let values: Vec<i32> = queued.into_iter().map(|task| task.join().unwrap()).collect();
    assert_eq!(values, [0, 10], "nothing queued was lost");
    stops.recv_timeout(GUARD).expect("the detached pool finished its shutdown in the background");
}

#[test]
fn a_pool_taken_back_from_shutdown_timeout_can_cancel_its_queue() {
    let pool = fixed(1).build().unwrap();
    let (blocker, release) = occupy_the_worker(&pool);
    let queued: Vec<_> = (0..3).map(|i| pool.spawn(move || i)).collect();
    let pool = Arc::new(pool.shutdown_timeout(Duration::ZERO).unwrap_err().into_pool());
    assert!(matches!(pool.spawn(|| 9).join(), Err(JoinError::Rejected)), "closed to new tasks");
    let stopper = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.shutdown_now())
    };
    for task in queued {
        assert!(matches!(task.join(), Err(JoinError::Cancelled)));
    }
    release.send(()).unwrap();
    stopper.join().unwrap();
    blocker.join().unwrap();
}

// ---------------------------------------------------------------------------------------------
// cpus::get

#[test]
fn cpus_get_is_the_detected_limit_rounded_down_and_at_least_one() {
    let threads = cotenant::cpus::get();
    assert!(threads >= 1);
    match cotenant::cpus::detect() {
        Ok(limit) => assert_eq!(threads, limit.threads(cotenant::Rounding::Floor) as usize),
        Err(_) => assert_eq!(threads, std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

// ---------------------------------------------------------------------------------------------
// A worker waiting on its own pool keeps helping: tasks queued after it began to wait run.

/// What the waited-for task does on the other worker: says it started, waits until the waiter
/// has surely begun to wait (50 ms; only the failure this guards against depends on it), then
/// queues a task and blocks until that task ran. Nothing but the waiting worker can run it:
/// the other worker is the one blocked here.
fn queue_one_and_wait_for_it(pool: &Arc<Pool>, started: mpsc::Sender<()>) {
    started.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let (ran, has_run) = mpsc::channel::<()>();
    pool.execute(move || ran.send(()).unwrap());
    has_run.recv_timeout(GUARD).expect("the task queued while a worker waited never ran");
}

#[test]
fn a_worker_joining_a_task_runs_what_that_task_queues_while_it_waits() {
    let pool = Arc::new(fixed(2).build().unwrap());
    let inner = pool.clone();
    within("join on a worker", move || {
        let outer = inner.clone();
        inner
            .spawn(move || {
                let (started, has_started) = mpsc::channel();
                let pool = outer.clone();
                let b = outer.spawn(move || queue_one_and_wait_for_it(&pool, started));
                has_started.recv_timeout(GUARD).unwrap(); // b runs on the other worker
                b.join().unwrap();
            })
            .join()
            .unwrap()
    });
}

#[test]
fn a_worker_in_a_scope_runs_what_its_tasks_queue_while_it_waits() {
    let pool = Arc::new(fixed(2).build().unwrap());
    let inner = pool.clone();
    within("scope on a worker", move || {
        let outer = inner.clone();
        inner
            .spawn(move || {
                let (started, has_started) = mpsc::channel();
                let pool = outer.clone();
                outer.scope(|scope| {
                    scope.spawn(move |_| queue_one_and_wait_for_it(&pool, started));
                    has_started.recv_timeout(GUARD).unwrap(); // on the other worker
                });
            })
            .join()
            .unwrap()
    });
}

#[test]
fn a_worker_in_pool_join_runs_what_b_queues_while_it_waits() {
    let pool = Arc::new(fixed(2).build().unwrap());
    let inner = pool.clone();
    within("Pool::join on a worker", move || {
        let outer = inner.clone();
        inner
            .spawn(move || {
                let (started, has_started) = mpsc::channel();
                let pool = outer.clone();
                // `a` returns once `b` runs on the other worker; the caller then waits for `b`.
                outer.join(
                    || has_started.recv_timeout(GUARD).unwrap(),
                    move || queue_one_and_wait_for_it(&pool, started),
                );
            })
            .join()
            .unwrap()
    });
}

//! The elastic pool (`Builder::elastic`, issue 9 item 3) on real threads. These tests check
//! what the pool does (grows under a backlog of blocking tasks, retires threads when the load
//! is gone, loses nothing, leaves no thread), with generous deadlines; how well it sizes is
//! the sizing lab's job (`cotenant lab sizing`), and the sizing arithmetic is unit-tested on
//! recorded samples in `policy/elastic.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cotenant::{BuildError, Pool};

/// Polls `condition` until it holds or `limit` passes; true if it held.
fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    condition()
}

fn live_threads(pool: &Pool) -> usize {
    pool.metrics().elastic.expect("an elastic pool reports elastic metrics").live
}

#[test]
fn grows_under_blocking_work_then_retires_threads_and_loses_nothing() {
    let pool = Pool::builder().name("elastic-test").elastic(1, 64).build().unwrap();
    assert_eq!((pool.threads(), pool.target(), live_threads(&pool)), (64, 1, 1));
    let done = Arc::new(AtomicU64::new(0));
    // 400 tasks that block for 20 ms and barely compute: one thread would need 8 s.
    let tasks: Vec<_> = (0..400)
        .map(|_| {
            let done = done.clone();
            pool.spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                done.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    let mut most = 0;
    assert!(
        eventually(Duration::from_secs(20), || {
            most = most.max(live_threads(&pool));
            most > 4
        }),
        "the pool never grew past 4 threads under a backlog of blocking tasks"
    );
    for task in tasks {
        task.join().unwrap();
    }
    assert_eq!(done.load(Ordering::Relaxed), 400);
    let metrics = pool.metrics();
    let elastic = metrics.elastic.unwrap();
    assert!(elastic.started > 4, "{metrics}");
    assert!(elastic.task_wait_ns > 10 * elastic.task_cpu_ns, "blocked time dominates: {metrics}");
    // The load is gone: the pool shrinks back to its minimum (after half a second of hysteresis).
    assert!(
        eventually(Duration::from_secs(30), || pool.target() == 1 && live_threads(&pool) == 1),
        "still {} threads, size {}: {}",
        live_threads(&pool),
        pool.target(),
        pool.metrics()
    );
    let elastic = pool.metrics().elastic.unwrap();
    assert_eq!(elastic.started - elastic.retired, 1, "every thread but one retired");
    // It still works, and grows again.
    assert_eq!(pool.spawn(|| 7).join().unwrap(), 7);
    pool.shutdown();
    assert_eq!(live_threads(&pool), 0, "shutdown leaves no thread");
}

#[test]
#[cfg_attr(cotenant_force_fallback, ignore = "needs Linux's run-queue wait")]
fn cpu_bound_work_gets_no_more_threads_than_cpus() {
    let cpus = cotenant::cpus::detect().map(|b| b.allowed_cpus() as usize).unwrap_or(1);
    let pool = Pool::builder().elastic(1, 64).build().unwrap();
    let tasks: Vec<_> = (0..300)
        .map(|_| {
            pool.spawn(|| {
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(2) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let mut most = 0;
    for task in tasks {
        most = most.max(live_threads(&pool));
        task.join().unwrap();
    }
    // Before the first task finishes the pool probes by doubling; once W/C is known (about 0:
    // these tasks never block) the formula gives one thread per CPU, and with every CPU busy
    // feedback adds none. Generous bounds: the probe may double a few times first, and on a
    // loaded host the run-queue wait the kernel reports falls short of the real one, so part of
    // it reads as blocking (RESULTS.md "sizing"; beside two busy threads and a second `make
    // test`, 22 threads on 2 CPUs were seen right after the burst). What must hold whatever the
    // load: the pool does not run away to its maximum (64) ...
    assert!(most <= 16 * cpus.max(1) + 8, "{most} threads at most for CPU-bound work on {cpus} CPUs");
    // ... and it does not stay oversized: extra threads retire (shrink-late hysteresis), waited
    // for as a condition with a generous deadline rather than read at one instant.
    let bound = 4 * cpus.max(1) + 4;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut settled = live_threads(&pool);
    while settled > bound && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        settled = live_threads(&pool);
    }
    assert!(settled <= bound, "{settled} threads for CPU-bound work on {cpus} CPUs, 60 s after the burst");
}

#[test]
fn a_task_can_shut_down_its_own_elastic_pool() {
    let pool = Arc::new(Pool::builder().elastic(2, 8).build().unwrap());
    let inner = pool.clone();
    pool.spawn(move || inner.shutdown()).join().unwrap();
    assert!(matches!(pool.spawn(|| 1).join(), Err(cotenant::JoinError::Rejected)));
}

#[test]
fn conflicting_or_bad_elastic_settings_are_refused_with_a_reason() {
    let refused = |builder: cotenant::Builder| match builder.build() {
        Err(BuildError::InvalidArgument(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert!(refused(Pool::builder().elastic(0, 4)).contains("min must be at least 1"));
    assert!(refused(Pool::builder().elastic(5, 4)).contains("max (4) must be at least min (5)"));
    assert!(refused(Pool::builder().elastic(1, usize::MAX)).contains("max must be at most 65536"));
    assert!(refused(Pool::builder().elastic(1, 4).threads(3)).contains("threads"));
    assert!(refused(Pool::builder().elastic(1, 4).pin_workers(true)).contains("pin_workers"));
    assert!(refused(Pool::builder().elastic(1, 4).cpu_budget(1.0, Duration::from_millis(10)))
        .contains("cpu_budget"));
}

#[test]
fn an_elastic_pool_with_a_fixed_cpu_count_still_sizes_itself() {
    let pool = Pool::builder().policy(cotenant::Policy::fixed(1)).elastic(1, 16).build().unwrap();
    let tasks: Vec<_> =
        (0..100).map(|_| pool.spawn(|| std::thread::sleep(Duration::from_millis(10)))).collect();
    for task in tasks {
        task.join().unwrap();
    }
    let elastic = pool.metrics().elastic.unwrap();
    assert_eq!(elastic.cpus, 1);
    assert!(elastic.started > 1, "{}", pool.metrics());
}

#[test]
fn metrics_carry_the_health_alerts_for_prometheus() {
    let pool = Pool::builder()
        .policy(cotenant::Policy::fixed(1))
        .queue_capacity(1)
        .on_full(cotenant::Full::Reject)
        .build()
        .unwrap();
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let blocker = pool.spawn(move || gate.recv().unwrap());
    while pool.metrics().running == 0 {
        std::thread::yield_now();
    }
    let _queued = pool.spawn(|| ());
    let rejected = pool.spawn(|| ());
    assert!(matches!(rejected.join(), Err(cotenant::JoinError::Rejected)));
    let metrics = pool.metrics();
    assert!(metrics.alerts.contains(cotenant::health::Alert::Rejecting), "{metrics}");
    let text = metrics.to_prometheus("api");
    assert!(text.contains("cotenant_pool_alert{pool=\"api\",alert=\"rejecting\"} 1"), "{text}");
    assert!(text.contains("cotenant_pool_alert{pool=\"api\",alert=\"at_capacity\"} 0"), "{text}");
    release.send(()).unwrap();
    blocker.join().unwrap();
}

//! The pool's user-space CPU budget (`Builder::cpu_budget`), checked without timing: bad
//! input, charging, parking at exhaustion, cancellation of a parked worker's task, metrics.
//! How well the budget holds a rate is measured by `cotenant lab throttling`, not here.

use std::time::Duration;

use cotenant::{BuildError, JoinError, Policy, Pool};

/// Burns `ns` of the calling thread's CPU time (its CPU clock, not the wall clock).
fn burn_cpu(ns: u64) {
    let cpu_now =
        || cotenant::internal::sampler::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).expect("thread CPU clock");
    let start = cpu_now();
    while cpu_now() - start < ns {
        std::hint::black_box(0u64);
    }
}

fn build_error(builder: cotenant::Builder) -> String {
    match builder.build() {
        Err(BuildError::InvalidArgument(why)) => why,
        other => panic!("expected an invalid argument, got {other:?}"),
    }
}

#[test]
fn bad_budgets_are_refused_naming_the_setting_and_the_value() {
    let ms = Duration::from_millis;
    for (cpus, period, expect) in [
        (0.0, ms(100), "cpus must be a positive number, got 0"),
        (-1.5, ms(100), "got -1.5"),
        (f64::NAN, ms(100), "got NaN"),
        (f64::INFINITY, ms(100), "got inf"),
        (1.0, Duration::from_micros(999), "period must be between 1ms and 1s, got 999µs"),
        (1.0, Duration::from_secs(2), "got 2s"),
        (1e12, ms(100), "more than this budget holds"),
        (1e-7, ms(1), "less than the smallest quota"),
    ] {
        let why = build_error(Pool::builder().policy(Policy::fixed(1)).cpu_budget(cpus, period));
        assert!(why.starts_with("cpu_budget: "), "{why}");
        assert!(why.contains(expect), "{cpus} {period:?}: {why}");
    }
}

#[test]
fn a_budgeted_pool_runs_everything_and_charges_its_cpu_time() {
    let pool =
        Pool::builder().policy(Policy::fixed(2)).cpu_budget(1.5, Duration::from_millis(100)).build().unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            pool.spawn(move || {
                burn_cpu(1_000_000);
                i
            })
        })
        .collect();
    let results: Vec<u32> = tasks.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(results, (0..20).collect::<Vec<_>>());
    pool.shutdown();
    let budget = pool.metrics().budget.expect("a budgeted pool reports its budget");
    assert_eq!((budget.quota_ns, budget.period_ns), (150_000_000, 100_000_000));
    assert!(budget.charged_ns >= 20_000_000, "20 tasks of 1 ms CPU, charged {} ns", budget.charged_ns);
    assert!(budget.periods >= 1);
    let text = pool.metrics().to_prometheus("p");
    assert!(text.contains("cotenant_pool_budget_quota_seconds{pool=\"p\"} 0.15"), "{text}");
    assert!(text.contains("cotenant_pool_budget_throttled_periods_total{pool=\"p\"}"), "{text}");
    assert!(pool.metrics().to_string().contains("budget 1.50 CPUs per 100ms"));
}

#[test]
fn a_pool_without_a_budget_reports_none() {
    let pool = Pool::builder().policy(Policy::fixed(1)).build().unwrap();
    assert_eq!(pool.metrics().budget, None);
}

/// A task that overruns a tiny budget leaves a debt; the worker parks with the next task in
/// hand until refills pay it. `shutdown_now` must cancel that task (and the queued ones)
/// rather than run it, and return without waiting for the refill.
#[test]
fn shutdown_now_cancels_the_task_of_a_worker_parked_at_exhaustion() {
    // 1 ms of CPU per second; the first task burns 20 ms, a debt of about 19 periods.
    let pool =
        Pool::builder().policy(Policy::fixed(1)).cpu_budget(0.001, Duration::from_secs(1)).build().unwrap();
    let first = pool.spawn(|| burn_cpu(20_000_000));
    let parked = pool.spawn(|| "ran");
    let queued = pool.spawn(|| "ran");
    first.join().unwrap();
    // The worker found the budget spent: it holds `parked` (or will) and waits for a refill.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while pool.metrics().budget.unwrap().throttled_periods == 0 {
        assert!(std::time::Instant::now() < deadline, "the worker never parked: {}", pool.metrics());
        std::thread::yield_now();
    }
    pool.shutdown_now();
    assert!(matches!(parked.join(), Err(JoinError::Cancelled)));
    assert!(matches!(queued.join(), Err(JoinError::Cancelled)));
    let budget = pool.metrics().budget.unwrap();
    assert!(budget.charged_ns >= 20_000_000);
}

#[test]
fn checkpoint_outside_a_budgeted_pool_does_nothing() {
    cotenant::checkpoint();
    let pool = Pool::builder().policy(Policy::fixed(1)).build().unwrap();
    assert_eq!(
        pool.spawn(|| {
            cotenant::checkpoint();
            1
        })
        .join()
        .unwrap(),
        1
    );
}

/// A long task that calls `checkpoint` is charged as it goes: by the time it returns, the
/// budget has seen most of its CPU time, not only at its end.
#[test]
fn checkpoint_charges_a_long_task_as_it_runs() {
    let pool =
        Pool::builder().policy(Policy::fixed(1)).cpu_budget(1.0, Duration::from_millis(10)).build().unwrap();
    let charged_midway = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = charged_midway.clone();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let task = pool.spawn(move || {
        for _ in 0..10 {
            burn_cpu(1_000_000);
            cotenant::checkpoint();
        }
        tx.send(()).unwrap();
        // Wait until the test has read the metrics while this task is still running.
        while !seen.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::yield_now();
        }
    });
    rx.recv().unwrap();
    let charged = pool.metrics().budget.unwrap().charged_ns;
    charged_midway.store(true, std::sync::atomic::Ordering::SeqCst);
    task.join().unwrap();
    // Slices are 2.5 ms here (a quarter of 10 ms): at most one slice of the 10 ms is uncharged.
    assert!(charged >= 7_000_000, "charged {charged} ns of 10 ms while the task ran");
}

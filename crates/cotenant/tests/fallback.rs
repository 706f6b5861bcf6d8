//! The fallback for systems other than Linux, built and run on Linux with
//! `RUSTFLAGS="--cfg cotenant_force_fallback"` (and as it is on any other system): the CPU
//! count is `std::thread::available_parallelism`'s and the explanation says so, a pool builds,
//! runs its tasks and keeps a fixed target (every worker), host CPU tokens fail with a clear
//! error, pinning is reported as unavailable, and waiting works. Counts and states, never
//! timings: the one wait, for the controller's first period, is on a condition with a generous
//! deadline.

#![cfg(any(not(target_os = "linux"), cotenant_force_fallback))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cotenant::cpus::{self, Constraint, Origin, Rounding};
use cotenant::metrics::TokenState;
use cotenant::tokens::HostTokens;
use cotenant::wait::{wait_until, Backoff, Event, Signal};
use cotenant::{Policy, Pool};

/// Where the fallback's count comes from, as its origin names it.
const PARALLELISM: &str = "std::thread::available_parallelism";
/// What every way to a token set says outside Linux.
const NO_TOKENS: &str = "host CPU tokens need Linux (System V semaphores)";

/// The standard library's CPU count.
fn parallelism() -> u32 {
    u32::try_from(std::thread::available_parallelism().expect("the standard library's CPU count").get())
        .expect("a CPU count that fits 32 bits")
}

/// Polls `condition` until it holds or `limit` passes; true if it held.
fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_cpu_count_is_available_parallelism_and_the_explanation_says_so() {
    let n = parallelism();
    let mut limit = cpus::detect().expect("the fallback always has a count");
    assert_eq!(limit.allowed_cpus(), n);
    assert_eq!(limit.allowed_set().count(), n);
    assert_eq!(limit.limit(), f64::from(n));
    assert_eq!((limit.threads(Rounding::Floor), limit.threads(Rounding::Ceil)), (n, n));
    assert_eq!(limit.binding(), Constraint::Online);
    assert_eq!(limit.binding_origin(), Some(&Origin::Syscall(PARALLELISM)));
    assert_eq!(limit.cgroup_version(), "none");
    assert!(limit.quotas().is_empty());
    let why = limit.quota_absent_reason().expect("the quota says why it is absent");
    assert!(why.contains("Linux") && why.contains(PARALLELISM), "{why}");

    // The explanation (`cotenant cpus --explain`): the online row is the standard library's
    // count and binds; every other source is there, absent, saying why.
    let rows = limit.sources();
    let online = rows.iter().find(|row| row.kind == "online").expect("an online row");
    assert!(online.binds, "{online:?}");
    assert_eq!(online.origin, Some(Origin::Syscall(PARALLELISM)));
    assert!(online.value.starts_with(&cpus::cpus_word(f64::from(n))), "{online:?}");
    for kind in ["cpuset", "affinity", "quota", "weight"] {
        let row =
            rows.iter().find(|row| row.kind == kind).unwrap_or_else(|| panic!("no {kind} row: {rows:?}"));
        assert!(!row.binds && row.origin.is_none(), "{row:?}");
        assert!(row.value.starts_with("absent: ") && row.value.contains("Linux"), "{row:?}");
    }

    // A refresh reads the count again; this process by its pid is the same answer.
    limit.refresh().expect("a refresh of the fallback's count");
    assert_eq!((limit.allowed_cpus(), limit.binding()), (n, Constraint::Online));
    let own = cpus::detect_pid(std::process::id()).expect("this process's own count");
    assert_eq!((own.allowed_cpus(), own.binding()), (n, Constraint::Online));
    // The `num_cpus::get()`-style count agrees.
    assert_eq!(cpus::get(), n as usize);
}

#[test]
fn another_processs_cpu_count_is_unknown_and_the_error_says_why() {
    let other = std::process::id().wrapping_add(1);
    let e = cpus::detect_pid(other).expect_err("only this process's count is known");
    assert!(matches!(e, cpus::Error::Undetermined { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(&other.to_string()) && text.contains("Linux"), "{text}");
}

#[test]
fn a_copy_of_a_linux_systems_files_is_still_read() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/cpus/v1-quota-1.5");
    let limit = cpus::Probe::with_root(root).detect().expect("the fixture's files are read as on Linux");
    assert_eq!(limit.limit(), 1.5);
    assert_eq!(limit.threads(Rounding::Floor), 1);
}

#[test]
fn a_default_pool_builds_runs_its_tasks_and_keeps_every_worker() {
    let pool = Pool::builder().name("fallback").build().expect("a default pool builds");
    let threads = parallelism() as usize;
    assert_eq!(pool.threads(), threads, "one thread per CPU of the standard library's count");
    assert_eq!(pool.policy().name(), "adaptive");
    let ran = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..100u64)
        .map(|i| {
            let ran = ran.clone();
            pool.spawn(move || {
                ran.fetch_add(1, Ordering::Relaxed);
                i * i
            })
        })
        .collect();
    let sum: u64 = tasks.into_iter().map(|task| task.join().expect("every task runs")).sum();
    assert_eq!(sum, (0..100u64).map(|i| i * i).sum::<u64>());
    assert_eq!(ran.load(Ordering::Relaxed), 100);

    // The controller has nothing to sample: every period it runs falls back to every worker,
    // counted as a sample error, and decides nothing.
    assert!(
        eventually(Duration::from_secs(30), || pool.metrics().sample_errors > 0),
        "the controller never ran a period: {}",
        pool.metrics()
    );
    let metrics = pool.metrics();
    assert_eq!((metrics.target, metrics.threads), (threads, threads), "a fixed target: {metrics}");
    assert_eq!(metrics.decisions, 0, "{metrics}");
    assert_eq!(pool.target(), threads);
    // No host tokens to share (`Off` if the environment turned them off).
    assert!(matches!(metrics.host_tokens, TokenState::Unavailable | TokenState::Off), "{metrics}");
    // And it still works.
    assert_eq!(pool.spawn(|| 42).join().unwrap(), 42);
    pool.shutdown();
}

#[test]
fn pinned_workers_run_unpinned_and_the_pool_says_so() {
    let pool = Pool::builder()
        .policy(Policy::fixed(2))
        .threads(2)
        .pin_workers(true)
        .host_tokens_off()
        .build()
        .unwrap();
    assert_eq!(pool.spawn(|| 7).join().unwrap(), 7);
    let pinned = &pool.placement().pinned;
    assert!(pinned.iter().all(Option::is_none), "no worker is pinned: {pinned:?}");
    let metrics = pool.metrics();
    assert!(metrics.degradations >= 1, "the missing affinity mask is reported: {metrics}");
    pool.shutdown();
}

#[test]
fn host_tokens_give_a_clear_error() {
    for opened in [HostTokens::open("fallback-test", 2), HostTokens::open_observer("fallback-test", 2)] {
        let e = opened.expect_err("no named set outside Linux");
        assert!(e.to_string().contains(NO_TOKENS), "{e}");
    }
    let e = HostTokens::private(2).expect_err("no private set outside Linux");
    assert!(e.to_string().contains(NO_TOKENS), "{e}");
    assert!(!HostTokens::exists("fallback-test"));
    let e = HostTokens::remove_named("fallback-test").expect_err("nothing to remove");
    assert!(e.to_string().contains(NO_TOKENS), "{e}");
    let e = cotenant::tokens::list::list().expect_err("nothing to list");
    assert!(e.to_string().contains(NO_TOKENS), "{e}");
}

#[test]
fn there_is_no_host_sampler_and_an_advisor_advises_every_thread() {
    let e = cotenant::internal::sampler::HostSampler::system().expect_err("nothing to sample");
    assert!(e.to_string().contains("needs Linux"), "{e}");
    let period = Duration::from_millis(2);
    let mut advisor = cotenant::advisor::Advisor::new(3, Policy::adaptive(), period).unwrap();
    // A period has passed once this returns, so the poll below tries to read (and cannot).
    std::thread::sleep(period);
    assert_eq!(advisor.poll(Some(10)), 3, "every thread");
    assert_eq!((advisor.sample_errors(), advisor.decisions()), (1, 0));
    let why = advisor.last_error().expect("the reason is kept").to_string();
    assert!(why.contains("needs Linux"), "{why}");
}

#[test]
fn waiting_works_with_the_standard_librarys_primitives() {
    // An event set by another thread wakes a parked waiter.
    let event = Arc::new(Event::new());
    let setter = {
        let event = event.clone();
        std::thread::spawn(move || event.set())
    };
    event.wait();
    assert!(event.is_set());
    setter.join().unwrap();
    event.reset();
    assert!(!event.wait_timeout(Duration::ZERO), "not set, no time: false at once");

    // A signal wakes a waiter parked on a condition kept outside it.
    let (ready, signal) = (Arc::new(AtomicBool::new(false)), Arc::new(Signal::new()));
    let waiter = {
        let (ready, signal) = (ready.clone(), signal.clone());
        std::thread::spawn(move || signal.wait_until(|| ready.load(Ordering::Acquire), &Backoff::parking()))
    };
    ready.store(true, Ordering::Release);
    signal.notify_all();
    let _waited = waiter.join().unwrap();

    // Without a notifier: the schedule's steps until the condition holds (after 3 checks).
    let checks = AtomicUsize::new(0);
    let waited = wait_until(|| checks.fetch_add(1, Ordering::Relaxed) == 3, &Backoff::wiredtiger());
    assert_eq!(waited.checks, 3);
}

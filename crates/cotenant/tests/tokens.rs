//! Pools sharing host CPU tokens (`cotenant::tokens`): never more tasks running at once than
//! tokens, every task runs, every token comes back. Counts, not timings.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cotenant::tokens::HostTokens;
use cotenant::{Policy, Pool};

/// Tracks how many tasks run at once, and the most ever.
#[derive(Default)]
struct Concurrency {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Concurrency {
    fn task(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        // Long enough that the other workers try to run meanwhile (CPU work, no sleep: a
        // sleeping task would hold its token just the same, but this is what tokens are for).
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        std::hint::black_box(x);
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn pools_sharing_tokens_never_run_more_tasks_at_once_than_tokens() {
    let tokens = Arc::new(HostTokens::private(2).unwrap());
    let concurrency = Arc::new(Concurrency::default());
    let pools: Vec<Pool> = (0..3)
        .map(|_| {
            Pool::builder().policy(Policy::fixed(4)).threads(4).host_tokens(tokens.clone()).build().unwrap()
        })
        .collect();
    let tasks: Vec<_> = (0..120)
        .map(|i| {
            let concurrency = concurrency.clone();
            pools[i % 3].spawn(move || concurrency.task())
        })
        .collect();
    for task in tasks {
        task.join().unwrap();
    }
    let most = concurrency.most.load(Ordering::SeqCst);
    assert!((1..=2).contains(&most), "{most} tasks ran at once with 2 tokens");
    let timeouts: u64 = pools.iter().map(|p| p.metrics().token_timeouts).sum();
    assert_eq!(timeouts, 0);
    for pool in &pools {
        pool.shutdown();
    }
    assert_eq!(tokens.available().unwrap(), 2, "every token is back");
}

#[test]
fn a_pool_whose_tokens_are_all_held_elsewhere_still_runs_its_tasks() {
    // Every token held by someone who never gives it back (a blocked holder): the pool waits
    // the limit once per task, then runs the task without one and counts it.
    // The default limit, 1 s.
    let (tokens, pool) = token_held_elsewhere(std::time::Duration::from_secs(1));
    assert_eq!(pool.spawn(|| 7).join().unwrap(), 7);
    assert_eq!(pool.metrics().token_timeouts, 1);
    pool.shutdown();
    tokens.release().unwrap();
    assert_eq!(tokens.available().unwrap(), 1);
}

#[test]
fn a_removed_set_leaves_the_pool_running_without_tokens() {
    let name = format!("test-removed-{}", std::process::id());
    // Removes the set even if an assertion fails before the test does.
    struct Remove(String);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = HostTokens::remove_named(&self.0);
        }
    }
    let _remove = Remove(name.clone());
    let tokens = Arc::new(HostTokens::open(&name, 1).unwrap());
    let pool =
        Pool::builder().policy(Policy::fixed(2)).threads(2).host_tokens(tokens.clone()).build().unwrap();
    assert_eq!(pool.spawn(|| 1).join().unwrap(), 1);
    // Removed by someone else (as `cotenant lab clean` does with the lab's set).
    assert!(HostTokens::remove_named(&name).unwrap());
    let results: Vec<i32> = (0..10).map(|i| pool.spawn(move || i)).map(|t| t.join().unwrap()).collect();
    assert_eq!(results, (0..10).collect::<Vec<_>>());
    let metrics = pool.metrics();
    // Every task after the removal failed to take a token (at once: no wait) and says so.
    assert!(metrics.token_errors >= 10, "{metrics}");
    assert_eq!(metrics.token_timeouts, 0, "{metrics}");
    pool.shutdown();
}

#[test]
fn an_elastic_pool_refuses_host_tokens_and_says_why() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    let e = Pool::builder().elastic(1, 4).host_tokens(tokens).build().unwrap_err().to_string();
    assert!(e.contains("elastic pools do not support host_tokens"), "{e}");
}

#[test]
fn host_tokens_refuse_a_cpu_budget_and_a_zero_wait() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    let budget = Pool::builder()
        .host_tokens(tokens.clone())
        .cpu_budget(1.0, std::time::Duration::from_millis(100))
        .build()
        .unwrap_err()
        .to_string();
    assert!(budget.contains("host_tokens and cpu_budget do not combine"), "{budget}");
    let wait = Pool::builder()
        .host_tokens(tokens)
        .host_tokens_wait(std::time::Duration::ZERO)
        .build()
        .unwrap_err()
        .to_string();
    assert!(wait.contains("host_tokens_wait must be at least 1ms"), "{wait}");
}

/// A set of one token, held here, and a one-worker pool sharing it that waits at most `wait`.
fn token_held_elsewhere(wait: std::time::Duration) -> (Arc<HostTokens>, Pool) {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    assert!(tokens.acquire(std::time::Duration::ZERO).unwrap());
    let pool = Pool::builder()
        .policy(Policy::fixed(1))
        .threads(1)
        .host_tokens(tokens.clone())
        .host_tokens_wait(wait)
        .build()
        .unwrap();
    (tokens, pool)
}

#[test]
fn shutdown_now_cancels_a_task_whose_worker_waits_for_a_token() {
    // The only token is held elsewhere; the worker pops the task and waits (limit 60 s);
    // shutdown_now must cancel it at the wait's next check, not run it.
    let (tokens, pool) = token_held_elsewhere(std::time::Duration::from_secs(60));
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let task = {
        let ran = ran.clone();
        pool.spawn(move || ran.store(true, Ordering::SeqCst))
    };
    // Shut down once the worker waits for a token, so that the wait is what is tested.
    until("the worker waits for a token", || tokens.waiting().unwrap() > 0);
    pool.shutdown_now();
    assert!(matches!(task.join(), Err(cotenant::JoinError::Cancelled)));
    assert!(!ran.load(Ordering::SeqCst));
    tokens.release().unwrap();
    assert_eq!(tokens.available().unwrap(), 1, "the waiting worker took no token");
}

#[test]
fn an_unbounded_wait_waits_for_the_token() {
    // host_tokens_wait(Duration::MAX): the worker waits past its 50 ms cancel checks
    // until the token comes, and runs its task holding it (no timeout counted).
    let (tokens, pool) = token_held_elsewhere(std::time::Duration::MAX);
    let task = pool.spawn(|| 5);
    until("the worker waits for a token", || tokens.waiting().unwrap() > 0);
    // Several checks pass while the token is held elsewhere (a longer sleep only makes the
    // test stricter, never flaky).
    std::thread::sleep(std::time::Duration::from_millis(150));
    tokens.release().unwrap();
    assert_eq!(task.join().unwrap(), 5);
    assert_eq!(pool.metrics().token_timeouts, 0);
    pool.shutdown();
    assert_eq!(tokens.available().unwrap(), 1);
}

#[test]
fn a_newcomer_does_not_take_the_token_a_waiter_was_woken_for() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    assert!(tokens.acquire(std::time::Duration::ZERO).unwrap());
    // A lost wake-up would still end with the token, by the last try at the limit: the limit
    // is what tells them apart (a woken waiter returns at once, a lost one after 20 s).
    let limit = std::time::Duration::from_secs(20);
    let waiter = {
        let tokens = tokens.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            (tokens.acquire(limit).unwrap(), start.elapsed())
        })
    };
    until("the waiter waits", || tokens.waiting().unwrap() > 0);
    tokens.release().unwrap();
    // Whether or not the waiter has run yet, the freed token is the waiter's: still counted
    // as waiting, or already taken.
    assert!(!tokens.acquire(std::time::Duration::ZERO).unwrap());
    let (got, waited) = waiter.join().unwrap();
    assert!(got);
    assert!(waited < limit, "the waiter was not woken: it took the token at its limit");
    assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (0, 0));
    tokens.release().unwrap();
}

#[test]
fn a_waiter_that_checks_for_cancellation_keeps_its_place_in_the_queue() {
    use cotenant::tokens::Acquired;
    use std::time::Duration;
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    // `cancelled` is asked before every sleep, so its count says how far each waiter got
    // (registered on the pipe, first try failed, asleep), with no timing assumption.
    let waiter = |check_every: Duration| {
        let checks = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (tokens, checks) = (tokens.clone(), checks.clone());
            std::thread::spawn(move || {
                let cancelled = || {
                    checks.fetch_add(1, Ordering::SeqCst);
                    false
                };
                tokens.acquire_or_cancel(Duration::from_secs(20), check_every, &cancelled).unwrap()
            })
        };
        (thread, checks)
    };
    // The first waiter wakes every 200 ms to check (as a pool's worker does every 50 ms); the
    // second never does, so only a byte on the pipe can give it the token.
    let (first, first_checks) = waiter(Duration::from_millis(200));
    until("the first waiter sleeps", || first_checks.load(Ordering::SeqCst) >= 1);
    let (second, second_checks) = waiter(Duration::MAX);
    until("the second waiter sleeps", || second_checks.load(Ordering::SeqCst) >= 1);
    // The first waiter goes round its check several times after the second queued: with a
    // new registration at each, it would now be behind the second.
    let seen = first_checks.load(Ordering::SeqCst);
    until("the first waiter checks again", || first_checks.load(Ordering::SeqCst) >= seen + 3);
    // Release while the first waiter sleeps: a byte that comes while it is awake for a check
    // wakes the second too (the documented exception). It went to sleep right after the check
    // just seen, for 200 ms; releasing 50 ms in leaves a margin of 150 ms.
    std::thread::sleep(Duration::from_millis(50));
    tokens.release().unwrap();
    assert_eq!(first.join().unwrap(), Acquired::Token, "the first in the queue got the token");
    // The second is still waiting; the token it gets now is the one the first gives back.
    tokens.release().unwrap();
    assert_eq!(second.join().unwrap(), Acquired::Token);
    tokens.release().unwrap();
    assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (1, 0));
}

#[test]
fn a_cancelled_wait_leaves_without_a_token_and_uncounted() {
    use cotenant::tokens::Acquired;
    use std::time::Duration;
    let tokens = HostTokens::private(1).unwrap();
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    let checks = AtomicUsize::new(0);
    // Cancelled at its third check: the wait ends long before its 20 s limit.
    let cancelled = || checks.fetch_add(1, Ordering::SeqCst) >= 2;
    let got =
        tokens.acquire_or_cancel(Duration::from_secs(20), Duration::from_millis(1), &cancelled).unwrap();
    assert_eq!(got, Acquired::Cancelled);
    assert_eq!(checks.load(Ordering::SeqCst), 3);
    assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (0, 0));
    // With no waiter left, the token given back is free for anyone.
    tokens.release().unwrap();
    let got = tokens.acquire_or_cancel(Duration::ZERO, Duration::from_millis(1), &|| true).unwrap();
    assert_eq!(got, Acquired::Token, "a free token is taken before any check");
    tokens.release().unwrap();
}

/// A forked child, killed and reaped when dropped (also when an assertion fails first).
struct Child(libc::pid_t);

impl Child {
    /// Runs `op` in a forked child that then sleeps until killed. The child makes only system
    /// calls (no allocation, no unwinding: it exits at once if `op` fails), as a child of a
    /// multi-threaded process must.
    fn run(op: impl FnOnce() -> bool) -> Child {
        // SAFETY: the child runs `op` (system calls on inherited descriptors) and never returns.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            if !op() {
                // SAFETY: ends the child without running the parent's code.
                unsafe { libc::_exit(1) };
            }
            loop {
                // SAFETY: plain system call.
                unsafe { libc::pause() };
            }
        }
        Child(pid)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: our own child.
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
            libc::waitpid(self.0, std::ptr::null_mut(), 0);
        }
    }
}

/// Polls `done` until it holds (no timing assumption); fails after a generous minute.
fn until(what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "never happened: {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn a_process_that_dies_holding_a_token_or_waiting_for_one_leaves_nothing_behind() {
    let tokens = HostTokens::private(1).unwrap();
    assert!(tokens.hands_over_by_pipe());
    // A holder dies: the kernel gives its token back.
    let holder = Child::run(|| matches!(tokens.acquire(std::time::Duration::ZERO), Ok(true)));
    until("the child holds the token", || tokens.available().unwrap() == 0);
    drop(holder);
    assert_eq!(tokens.available().unwrap(), 1, "the dead holder's token came back");
    // A waiter dies: it no longer counts as one, so newcomers are not held back behind it.
    assert!(tokens.acquire(std::time::Duration::ZERO).unwrap());
    let waiter = Child::run(|| tokens.acquire(std::time::Duration::from_secs(3600)).is_ok());
    until("the child waits", || tokens.waiting().unwrap() == 1);
    drop(waiter);
    assert_eq!(tokens.waiting().unwrap(), 0, "the dead waiter is no longer counted");
    tokens.release().unwrap();
    assert!(tokens.acquire(std::time::Duration::ZERO).unwrap(), "a newcomer takes the free token");
    tokens.release().unwrap();
}

//! Pools sharing host CPU tokens (`cotenant::tokens`): never more tasks running at once than
//! tokens, every task runs, every token comes back. Counts, not timings.

// Host CPU tokens need Linux (System V semaphores): nothing to test under the fallback for
// other systems (`tests/fallback.rs` checks the error it gives instead).
#![cfg(not(cotenant_force_fallback))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cotenant::tokens::HostTokens;
use cotenant::{Policy, Pool};

mod common;
use common::{leases_or_skip, sysv_key_exists, thread_state, until, Child, RemoveNamed};

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
    // Waiting up to a minute for a token: a task that gave up waiting (after the default
    // second, on a loaded host) would run without one and blur the count.
    let pools: Vec<Pool> = (0..3)
        .map(|_| {
            Pool::builder()
                .policy(Policy::fixed(4))
                .threads(4)
                .host_tokens(tokens.clone())
                .host_tokens_wait(std::time::Duration::from_secs(60))
                .build()
                .unwrap()
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

/// Opens its gate when dropped: by the test, or when an assertion fails first.
struct Gate(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Gate {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A one-worker pool sharing `tokens`, waiting for one for at most a minute, whose first task
/// holds its token until the returned gate is dropped, so that the tests can queue tasks
/// behind it and line up waiters. The task keeps running meanwhile (it yields in a loop): the
/// controller takes back the token of a holder that blocks, a tick or two after it blocked
/// (tests below), and a test thread slowed down by a loaded host would then find the token
/// free before it looked.
fn pool_behind_a_gate(tokens: &Arc<HostTokens>) -> (Pool, cotenant::Task<()>, Gate) {
    let pool = one_worker_sharing(tokens, std::time::Duration::from_secs(60));
    let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let first = {
        let open = open.clone();
        pool.spawn(move || {
            while !open.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        })
    };
    (pool, first, Gate(open))
}

#[test]
fn a_worker_keeps_its_token_for_the_tasks_it_runs_back_to_back_while_nobody_waits() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    let (pool, first, open) = pool_behind_a_gate(&tokens);
    until("the first task holds the token", || tokens.available().unwrap() == 0);
    let queued: Vec<_> = (0..20).map(|i| pool.spawn(move || i)).collect();
    drop(open);
    first.join().unwrap();
    let results: Vec<i32> = queued.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(results, (0..20).collect::<Vec<_>>());
    let metrics = pool.metrics();
    assert_eq!(metrics.token_takes, 1, "one token for 21 tasks in a row: {metrics:?}");
    assert_eq!(metrics.token_timeouts + metrics.token_errors, 0, "{metrics}");
    // The queue ran dry after the last task: the token went back.
    until("the token is back", || tokens.available().unwrap() == 1);
    pool.shutdown();
}

#[test]
fn a_worker_gives_its_token_back_after_a_task_when_another_worker_waits() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    // Built before the gated pool, so dropped after it: if an assertion fails, the gate opens
    // first and this pool's worker gets the token instead of waiting out its limit.
    let other_pool = one_worker_sharing(&tokens, std::time::Duration::from_secs(60));
    let (first_pool, first, open) = pool_behind_a_gate(&tokens);
    until("the first task holds the token", || tokens.available().unwrap() == 0);
    let queued: Vec<_> = (0..5).map(|i| first_pool.spawn(move || i)).collect();
    let other = other_pool.spawn(|| 99);
    until("the other pool's worker waits for the token", || tokens.waiting().unwrap() == 1);
    drop(open);
    first.join().unwrap();
    assert_eq!(other.join().unwrap(), 99);
    let results: Vec<i32> = queued.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(results, (0..5).collect::<Vec<_>>());
    let (mine, theirs) = (first_pool.metrics(), other_pool.metrics());
    // Given back after the first task for the waiter (and taken again at least once after).
    assert!(mine.token_takes >= 2, "the waiter was passed over: {mine:?}");
    assert_eq!(theirs.token_takes, 1, "{theirs:?}");
    assert_eq!(mine.token_timeouts + theirs.token_timeouts, 0, "{mine}; {theirs}");
    first_pool.shutdown();
    other_pool.shutdown();
    assert_eq!(tokens.available().unwrap(), 1, "every token is back");
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
    let _remove = RemoveNamed(name.clone());
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
fn after_tasks_ran_without_a_token_the_adaptive_policy_sizes_against_its_neighbours_again() {
    let name = format!("test-fallback-{}", std::process::id());
    let _remove = RemoveNamed(name.clone());
    let tokens = Arc::new(HostTokens::open(&name, 1).unwrap());
    let adaptive = Pool::builder().threads(2).host_tokens(tokens.clone()).build().unwrap();
    // An adaptive pool that keeps sizing itself against its neighbours: its controller ticks,
    // and it has no token-sharing policy to fall back from.
    let plain = Pool::builder()
        .threads(2)
        .host_tokens(tokens.clone())
        .host_tokens_size_to_neighbours(true)
        .build()
        .unwrap();
    assert_eq!(adaptive.spawn(|| 1).join().unwrap(), 1);
    assert_eq!(adaptive.metrics().token_fallback_periods, 0, "{}", adaptive.metrics());
    assert!(HostTokens::remove_named(&name).unwrap());
    // Tasks keep failing to take a token until the controller has ticked after one did (it
    // ticks every 10 ms; the bound is generous), and until it has decided for the plain pool
    // too (a pool's first tick only records: on a slow host that tick can be the one that
    // gives the adaptive pool its fallback period).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while adaptive.metrics().token_fallback_periods == 0 || plain.metrics().decisions == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no fallback period or no decision: {} / {}",
            adaptive.metrics(),
            plain.metrics()
        );
        adaptive.spawn(|| ()).join().unwrap();
        plain.spawn(|| ()).join().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(adaptive.metrics().token_errors > 0);
    assert!(plain.metrics().token_errors > 0, "{}", plain.metrics());
    assert_eq!(plain.metrics().token_fallback_periods, 0, "{}", plain.metrics());
    adaptive.shutdown();
    plain.shutdown();
}

#[test]
fn with_tokens_the_adaptive_policy_stops_sizing_against_the_token_sharers() {
    let tokens = Arc::new(HostTokens::private(2).unwrap());
    let adaptive = Pool::builder().host_tokens(tokens.clone()).build().unwrap();
    assert_eq!(adaptive.policy(), &Policy::adaptive().sharing_host_tokens());
    adaptive.shutdown();
    // A fixed pool keeps its target; a pool without tokens keeps the plain policy.
    let fixed = Pool::builder().policy(Policy::fixed(2)).host_tokens(tokens.clone()).build().unwrap();
    assert_eq!(fixed.policy(), &Policy::fixed(2));
    fixed.shutdown();
    let opted_out =
        Pool::builder().host_tokens(tokens.clone()).host_tokens_size_to_neighbours(true).build().unwrap();
    assert_eq!(opted_out.policy(), &Policy::adaptive());
    opted_out.shutdown();
    let plain = Pool::builder().host_tokens_off().build().unwrap();
    assert_eq!(plain.policy(), &Policy::adaptive());
    plain.shutdown();
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
    let pool = one_worker_sharing(&tokens, wait);
    (tokens, pool)
}

/// A one-worker pool sharing `tokens`, waiting for one for at most `wait`.
fn one_worker_sharing(tokens: &Arc<HostTokens>, wait: std::time::Duration) -> Pool {
    Pool::builder()
        .policy(Policy::fixed(1))
        .threads(1)
        .host_tokens(tokens.clone())
        .host_tokens_wait(wait)
        .build()
        .unwrap()
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

/// How often the first waiter of the queue test below checks for cancellation (a pool's
/// worker does every 50 ms).
const FIRST_CHECKS_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// The queue test's scenario once: two waiters on a set of one held token, the first checking
/// for cancellation every `FIRST_CHECKS_EVERY`, the second never (only a byte on the pipe can
/// give it the token); the token released while the first sleeps. `Some(true)` if the first
/// got it; `None` if the release could not be shown to come while the first waiter slept: a
/// byte that comes while it is awake for a check wakes the second too (the documented
/// exception), so that outcome proves nothing.
fn one_token_for_two_waiters() -> Option<bool> {
    use cotenant::tokens::Acquired;
    use std::time::{Duration, Instant};
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    // `cancelled` is asked before every sleep, so its count says how far each waiter got
    // (registered on the pipe, first try failed, about to sleep), with no timing assumption.
    let waiter = |check_every: Duration| {
        let checks = Arc::new(AtomicUsize::new(0));
        let tid = Arc::new(std::sync::atomic::AtomicI32::new(0));
        let thread = {
            let (tokens, checks, tid) = (tokens.clone(), checks.clone(), tid.clone());
            std::thread::spawn(move || {
                tid.store(gettid(), Ordering::SeqCst);
                let cancelled = || {
                    checks.fetch_add(1, Ordering::SeqCst);
                    false
                };
                tokens.acquire_or_cancel(Duration::from_secs(60), check_every, &cancelled).unwrap()
            })
        };
        (thread, checks, tid)
    };
    let (first, first_checks, first_tid) = waiter(FIRST_CHECKS_EVERY);
    until("the first waiter sleeps", || first_checks.load(Ordering::SeqCst) >= 1);
    let (second, second_checks, _) = waiter(Duration::MAX);
    until("the second waiter sleeps", || second_checks.load(Ordering::SeqCst) >= 1);
    // The first waiter goes round its check several times after the second queued: with a
    // new registration at each, it would now be behind the second.
    let seen = first_checks.load(Ordering::SeqCst);
    until("the first waiter checks again", || first_checks.load(Ordering::SeqCst) >= seen + 3);
    let tid = first_tid.load(Ordering::SeqCst);
    // Release early in one of the first waiter's sleeps. A check counted after `before` (the
    // count read just after it was older), then the waiter fell asleep (state S: in
    // epoll_wait, the only call of its loop that blocks) for FIRST_CHECKS_EVERY: unless a byte
    // wakes it, it sleeps until `before + FIRST_CHECKS_EVERY` at least. A release that has
    // returned by then came while it slept; one that has not proves nothing.
    let mut released_in_time = None;
    for _ in 0..50 {
        // `before`: the last moment the count was seen unchanged (read after it), so the next
        // check came later.
        let mut before = Instant::now();
        let count = first_checks.load(Ordering::SeqCst);
        let looking_since = before;
        loop {
            let now = Instant::now();
            if first_checks.load(Ordering::SeqCst) > count {
                break;
            }
            before = now;
            assert!(looking_since.elapsed() < Duration::from_secs(60), "the first waiter stopped checking");
            std::thread::sleep(Duration::from_millis(1));
        }
        until("the first waiter sleeps or checks again", || {
            thread_state(tid) == Some('S') || first_checks.load(Ordering::SeqCst) > count + 1
        });
        if first_checks.load(Ordering::SeqCst) == count + 1 && before.elapsed() < FIRST_CHECKS_EVERY / 2 {
            tokens.release().unwrap();
            released_in_time = Some(before.elapsed() < FIRST_CHECKS_EVERY);
            break;
        }
        // Too late in this sleep to be sure: wait for the next check.
    }
    if released_in_time.is_none() {
        tokens.release().unwrap(); // so that both waiters end
    }
    until("a waiter takes the token", || first.is_finished() || second.is_finished());
    let first_won = first.is_finished();
    // The other is still waiting; the token it gets now is the one the winner gives back.
    tokens.release().unwrap();
    assert_eq!(first.join().unwrap(), Acquired::Token);
    assert_eq!(second.join().unwrap(), Acquired::Token);
    tokens.release().unwrap();
    assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (1, 0));
    released_in_time.unwrap_or(false).then_some(first_won)
}

#[test]
fn a_waiter_that_checks_for_cancellation_keeps_its_place_in_the_queue() {
    // A run whose release cannot be shown to have come while the first waiter slept (a loaded
    // host can hold the test thread up past the sleep) proves nothing: it is run again.
    const ATTEMPTS: u32 = 5;
    for attempt in 1..=ATTEMPTS {
        match one_token_for_two_waiters() {
            Some(first_won) => {
                assert!(first_won, "the second in the queue got the token released while the first slept");
                return;
            }
            None => {
                eprintln!("attempt {attempt}: the release came too late in the first waiter's sleep to tell")
            }
        }
    }
    panic!("in {ATTEMPTS} attempts, no release could be shown to come while the first waiter slept");
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

#[test]
fn the_token_of_a_blocked_task_goes_to_a_waiting_pool_and_comes_back_once() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    // Waits far longer than the test: a token that came by the wait limit would prove nothing.
    let wait = std::time::Duration::from_secs(3600);
    let build =
        || Pool::builder().threads(1).host_tokens(tokens.clone()).host_tokens_wait(wait).build().unwrap();
    let (blocked, other) = (build(), build());
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let (started, has_started) = std::sync::mpsc::channel::<bool>();
    let in_task = tokens.clone();
    let holder = blocked.spawn(move || {
        // Looked at from the task, while it runs: once it blocks, the controller may take the
        // token back before a slow test thread could look.
        started.send(in_task.available().unwrap() == 0).unwrap();
        gate.recv().unwrap(); // blocked, holding the only token
    });
    assert!(has_started.recv().unwrap(), "the blocked task held the token");
    let (done, is_done) = std::sync::mpsc::channel::<()>();
    other.execute(move || done.send(()).unwrap());
    // The controller takes the token back a tick or two after the task blocked (10 ms ticks;
    // the bound is generous), and the other pool's waiting worker gets it.
    is_done
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the other pool never got the token: {}", blocked.metrics()));
    // Counted before the give-back; waited for all the same, rather than assuming the count
    // is seen by the time the other pool's task has run.
    until("the take-back is counted", || blocked.metrics().token_takebacks >= 1);
    release.send(()).unwrap();
    holder.join().unwrap();
    blocked.shutdown();
    other.shutdown();
    // Given back once, by the controller: the blocked task's end gives nothing back again.
    assert_eq!(blocked.metrics().token_takebacks, 1, "{}; the other: {}", blocked.metrics(), other.metrics());
    assert_eq!(tokens.available().unwrap(), 1, "the one token is free, and not counted twice");
    assert_eq!(other.metrics().token_takebacks, 0);
}

#[test]
fn a_holder_that_runs_or_waits_for_a_cpu_keeps_its_token() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    let pool = Pool::builder().threads(1).host_tokens(tokens.clone()).build().unwrap();
    // CPU work for a few hundred controller ticks: the holder is running or runnable (state
    // R) throughout, whatever else the host runs, so its token is never taken back.
    pool.spawn(|| {
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    })
    .join()
    .unwrap();
    assert_eq!(pool.metrics().token_takebacks, 0, "{}", pool.metrics());
    pool.shutdown();
    assert_eq!(tokens.available().unwrap(), 1);
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

#[test]
fn a_set_holds_one_lease_per_cpu_each_for_one_holder_at_a_time() {
    let tokens = HostTokens::private(2).unwrap();
    // SAFETY: sysconf has no preconditions.
    let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) } as u32;
    let leases = configured.min(cotenant::tokens::MAX_LEASES);
    if !leases_or_skip(&tokens) {
        // A kernel whose semaphore limits leave no room for leases: sets without them work.
        return;
    }
    assert_eq!(tokens.leases(), leases);
    assert_eq!(tokens.free_leases().unwrap(), (0..leases).collect::<Vec<_>>());
    assert!(tokens.try_lease(0).unwrap());
    assert!(!tokens.try_lease(0).unwrap(), "a held lease is not handed out twice");
    assert!(!tokens.free_leases().unwrap().contains(&0));
    assert!(!tokens.try_lease(leases).unwrap(), "no lease beyond the CPUs");
    let beyond = tokens.give_back_lease(leases).unwrap_err().to_string();
    assert!(beyond.contains(&format!("no lease for CPU {leases}")), "{beyond}");
    tokens.give_back_lease(0).unwrap();
    assert_eq!(tokens.free_leases().unwrap(), (0..leases).collect::<Vec<_>>());
    let twice = tokens.give_back_lease(0).unwrap_err().to_string();
    assert!(twice.contains("the lease of CPU 0 is not held"), "{twice}");
    assert!(tokens.try_lease(0).unwrap());
    assert!(!tokens.try_lease(0).unwrap(), "a second give-back did not free the lease for two holders");
    tokens.give_back_lease(0).unwrap();
}

#[test]
fn a_token_and_a_cpu_lease_are_taken_together_or_not_at_all() {
    let tokens = HostTokens::private(1).unwrap();
    if !leases_or_skip(&tokens) {
        return;
    }
    let every_lease: Vec<u32> = (0..tokens.leases()).collect();
    assert!(tokens.try_acquire_with_lease(0).unwrap());
    assert_eq!(tokens.available().unwrap(), 0, "the token is taken");
    assert!(!tokens.free_leases().unwrap().contains(&0), "and CPU 0's lease with it");
    let last = tokens.leases() - 1;
    if last > 0 {
        assert!(!tokens.try_acquire_with_lease(last).unwrap(), "no token left");
        assert!(tokens.free_leases().unwrap().contains(&last), "so no lease taken either");
    }
    tokens.release_with_lease(0).unwrap();
    assert_eq!(tokens.available().unwrap(), 1, "the token is back");
    assert_eq!(tokens.free_leases().unwrap(), every_lease, "and the lease");
    assert!(tokens.try_lease(0).unwrap());
    assert!(!tokens.try_lease(0).unwrap(), "the lease was freed once, not twice");
    tokens.give_back_lease(0).unwrap();

    assert!(tokens.try_lease(0).unwrap());
    assert!(!tokens.try_acquire_with_lease(0).unwrap(), "the lease is held");
    assert_eq!(tokens.available().unwrap(), 1, "so the token stays free");
    tokens.give_back_lease(0).unwrap();
    assert!(!tokens.try_acquire_with_lease(tokens.leases()).unwrap(), "no lease beyond the CPUs");
    assert_eq!(tokens.available().unwrap(), 1);

    // A lease given back that was not held: refused, and the token goes back all the same.
    assert!(tokens.acquire(std::time::Duration::ZERO).unwrap());
    let not_held = tokens.release_with_lease(0).unwrap_err().to_string();
    assert!(not_held.contains("the lease of CPU 0 is not held"), "{not_held}");
    assert_eq!(tokens.available().unwrap(), 1, "the token came back despite the error");
    assert!(tokens.try_lease(0).unwrap());
    assert!(!tokens.try_lease(0).unwrap(), "the refused give-back freed no lease");
    tokens.give_back_lease(0).unwrap();
}

#[test]
fn giving_a_token_and_its_lease_back_wakes_a_waiter() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    if !leases_or_skip(&tokens) {
        return;
    }
    assert!(tokens.try_acquire_with_lease(0).unwrap());
    let limit = std::time::Duration::from_secs(20);
    let waiter = {
        let tokens = tokens.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            let got = tokens.acquire(limit).unwrap();
            tokens.release().unwrap();
            (got, start.elapsed())
        })
    };
    until("the waiter waits", || tokens.waiting().unwrap() == 1);
    tokens.release_with_lease(0).unwrap();
    let (got, waited) = waiter.join().unwrap();
    assert!(got && waited < limit, "woken with the token (after {waited:?}), not by the limit's last try");
    assert_eq!(tokens.free_leases().unwrap().len() as u32, tokens.leases(), "the lease is back");
}

#[test]
fn a_process_that_dies_holding_a_lease_gives_it_back() {
    let tokens = HostTokens::private(1).unwrap();
    if !leases_or_skip(&tokens) {
        return;
    }
    let holder = Child::run(|| matches!(tokens.try_lease(0), Ok(true)));
    until("the child holds CPU 0's lease", || !tokens.free_leases().unwrap().contains(&0));
    drop(holder);
    assert!(tokens.free_leases().unwrap().contains(&0), "the dead holder's lease came back");
}

/// The CPUs thread `tid` of this process may run on (`Cpus_allowed_list` in its status).
fn cpus_allowed(tid: libc::pid_t) -> String {
    let path = format!("/proc/self/task/{tid}/status");
    let status = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim().to_owned()
}

fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The CPU the calling thread runs on.
fn this_cpu() -> u32 {
    // SAFETY: sched_getcpu has no preconditions (-1 on failure, which the conversion refuses).
    u32::try_from(unsafe { libc::sched_getcpu() }).expect("sched_getcpu failed")
}

/// The CPUs the calling thread may run on, ascending.
fn allowed_cpus() -> Vec<u32> {
    // SAFETY: cpu_set_t is plain data that sched_getaffinity fills; CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).map(|c| c as u32).collect()
    }
}

/// Runs of the lease tests below. A task reads its CPU after its worker has its own mask back,
/// and so free to be moved by the kernel (on a loaded host, now and then between the move
/// and the read): at most `MOVED_AWAY` runs may read another CPU than the leased one.
const RUNS: usize = 10;
const MOVED_AWAY: usize = 2;

#[test]
fn a_token_holder_runs_on_the_cpu_it_leased_with_its_own_cpu_mask() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    if !leases_or_skip(&tokens) {
        return;
    }
    let everywhere = cpus_allowed(gettid());
    let pool =
        Pool::builder().policy(Policy::fixed(1)).threads(1).host_tokens(tokens.clone()).build().unwrap();
    // For each CPU the process may use (the first 4), every other lease is held here: the
    // worker must take that CPU's lease, wherever it runs, and move there.
    let leasable: Vec<u32> = allowed_cpus().into_iter().filter(|&c| c < tokens.leases()).take(4).collect();
    assert!(!leasable.is_empty(), "no lease for any CPU of {everywhere}");
    for &only in &leasable {
        let others: Vec<u32> = (0..tokens.leases()).filter(|&c| c != only).collect();
        for &cpu in &others {
            assert!(tokens.try_lease(cpu).unwrap(), "CPU {cpu}'s lease was free");
        }
        let mut started_there = 0;
        for _ in 0..RUNS {
            let in_task = tokens.clone();
            // Where the task starts, first: the worker moved there when it took its lease.
            let (cpu, during, free_during) = pool
                .spawn(move || (this_cpu(), cpus_allowed(gettid()), in_task.free_leases().unwrap()))
                .join()
                .unwrap();
            assert_eq!(
                free_during,
                Vec::<u32>::new(),
                "the task holds CPU {only}'s lease, the only one free"
            );
            assert_eq!(during, everywhere, "the task runs with the worker's own mask, not bound to its CPU");
            started_there += usize::from(cpu == only);
            until("the token and the lease are back", || {
                tokens.available().unwrap() == 1 && tokens.free_leases().unwrap() == [only]
            });
        }
        assert!(
            started_there >= RUNS - MOVED_AWAY,
            "with only CPU {only}'s lease free, {started_there} of {RUNS} tasks started there"
        );
        for &cpu in &others {
            tokens.give_back_lease(cpu).unwrap();
        }
    }
    assert_eq!(tokens.free_leases().unwrap().len() as u32, tokens.leases(), "every lease is back");
}

#[test]
fn holders_running_at_once_run_on_different_cpus() {
    let allowed = allowed_cpus().len();
    // As many holders as the process has CPUs (at most 4), all running at once.
    let holders = allowed.min(4);
    if holders < 2 {
        eprintln!("skipped: needs 2 CPUs, this process may use {allowed}");
        return;
    }
    let tokens = Arc::new(HostTokens::private(holders as u32).unwrap());
    if !leases_or_skip(&tokens) {
        return;
    }
    let pool = Pool::builder()
        .policy(Policy::fixed(holders))
        .threads(holders)
        .host_tokens(tokens.clone())
        .build()
        .unwrap();
    let mut apart = 0;
    for _ in 0..RUNS {
        let arrived = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..holders)
            .map(|_| {
                let arrived = arrived.clone();
                pool.spawn(move || {
                    // Where the task starts (its worker moved there for its lease), while every
                    // holder holds its token: none gives it back before all have looked. They
                    // wait for each other running, not blocked: the controller takes back the
                    // token and lease of a blocked holder, and the lease could go to another.
                    let cpu = this_cpu();
                    arrived.fetch_add(1, Ordering::SeqCst);
                    while arrived.load(Ordering::SeqCst) < holders {
                        std::thread::yield_now();
                    }
                    cpu
                })
            })
            .collect();
        let mut cpus: Vec<u32> = tasks.into_iter().map(|t| t.join().unwrap()).collect();
        cpus.sort();
        cpus.dedup();
        apart += usize::from(cpus.len() == holders);
    }
    assert!(apart >= RUNS - MOVED_AWAY, "two holders started on one CPU in {} of {RUNS} runs", RUNS - apart);
}

#[test]
fn a_pool_pinned_for_good_takes_no_leases() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    let pool = Pool::builder()
        .policy(Policy::fixed(1))
        .threads(1)
        .pin_workers(true)
        .host_tokens(tokens.clone())
        .build()
        .unwrap();
    let in_task = tokens.clone();
    let (free, available) = pool
        .spawn(move || (in_task.free_leases().unwrap().len(), in_task.available().unwrap()))
        .join()
        .unwrap();
    assert_eq!(available, 0, "the task holds the token");
    assert_eq!(free as u32, tokens.leases(), "but no lease");
}

#[test]
fn a_pool_without_leases_runs_its_tasks_unpinned() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    let everywhere = cpus_allowed(gettid());
    let pool = Pool::builder()
        .policy(Policy::fixed(1))
        .threads(1)
        .host_tokens(tokens.clone())
        .host_tokens_leases(false)
        .build()
        .unwrap();
    let in_task = tokens.clone();
    let (cpus, free) =
        pool.spawn(move || (cpus_allowed(gettid()), in_task.free_leases().unwrap().len())).join().unwrap();
    assert_eq!(cpus, everywhere, "the task sees all the process's CPUs");
    assert_eq!(free as u32, tokens.leases(), "no lease taken");
}

#[test]
fn a_fixed_pool_with_tokens_has_its_blocked_holders_token_taken_back() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    let wait = std::time::Duration::from_secs(3600);
    let build = || {
        Pool::builder()
            .policy(Policy::fixed(1))
            .threads(1)
            .host_tokens(tokens.clone())
            .host_tokens_wait(wait)
            .build()
            .unwrap()
    };
    let (blocked, other) = (build(), build());
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let (started, has_started) = std::sync::mpsc::channel::<bool>();
    let in_task = tokens.clone();
    let holder = blocked.spawn(move || {
        // Looked at from the running task: once it blocks, its token may go back at once.
        started.send(in_task.available().unwrap() == 0).unwrap();
        gate.recv().unwrap()
    });
    assert!(has_started.recv().unwrap(), "the blocked task held the token");
    let (done, is_done) = std::sync::mpsc::channel::<()>();
    other.execute(move || done.send(()).unwrap());
    // Without a controller for fixed pools the other pool would wait for the hour.
    is_done
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the other pool never got the token: {}", blocked.metrics()));
    until("the take-back is counted", || blocked.metrics().token_takebacks >= 1);
    release.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(blocked.metrics().token_takebacks, 1, "taken back once: {}", blocked.metrics());
    drop((blocked, other));
    assert_eq!(tokens.available().unwrap(), 1);
}

#[test]
fn a_pool_draining_in_shutdown_still_gives_up_a_blocked_holders_token() {
    let tokens = Arc::new(HostTokens::private(1).unwrap());
    let wait = std::time::Duration::from_secs(3600);
    let build =
        || Pool::builder().threads(1).host_tokens(tokens.clone()).host_tokens_wait(wait).build().unwrap();
    let draining = Arc::new(build());
    let other = build();
    // The task runs (state R: its token is not taken back) until the pool is draining, and
    // only then blocks, holding the token.
    let block_now = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (release, gate) = std::sync::mpsc::channel::<()>();
    {
        let block_now = block_now.clone();
        draining.execute(move || {
            while !block_now.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            gate.recv().unwrap()
        });
    }
    draining.execute(|| ());
    until("the running task holds the token", || tokens.available().unwrap() == 0);
    let shutdown = {
        let draining = draining.clone();
        std::thread::spawn(move || draining.shutdown())
    };
    // Each probe that got in before the pool closed is one more task to drain.
    let probes_in = std::sync::atomic::AtomicU64::new(0);
    until("the pool is closed (shutdown drains it)", || match draining.try_spawn(|| ()) {
        Ok(_) => {
            probes_in.fetch_add(1, Ordering::SeqCst);
            false
        }
        Err(e) => e == cotenant::TrySpawnError::ShutDown,
    });
    assert_eq!(draining.metrics().token_takebacks, 0, "the holder ran until now");
    block_now.store(true, Ordering::SeqCst);
    // `shutdown` now waits for the blocked task; the controller must still take its token back.
    let (done, is_done) = std::sync::mpsc::channel::<()>();
    other.execute(move || done.send(()).unwrap());
    is_done
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the draining pool kept its blocked token: {}", draining.metrics()));
    until("the take-back is counted", || draining.metrics().token_takebacks >= 1);
    release.send(()).unwrap();
    shutdown.join().unwrap();
    assert_eq!(
        draining.metrics().token_takebacks,
        1,
        "taken back once: {}; the other: {}",
        draining.metrics(),
        other.metrics()
    );
    assert_eq!(draining.metrics().completed, 2 + probes_in.into_inner(), "the queue drained");
    drop(other);
    assert_eq!(tokens.available().unwrap(), 1);
}

#[test]
fn a_process_killed_while_holding_tokens_loses_none_and_leaves_the_members() {
    let name = format!("cotenant-test-killed-{}", std::process::id());
    let tokens = HostTokens::open(&name, 2).unwrap();
    let _remove = RemoveNamed(name.clone());
    assert_eq!(tokens.members().unwrap(), 1, "this process");
    let semid = tokens.semid();
    for round in 0..100 {
        // The child joins as a member and takes a token, as a pool's process would, with raw
        // system calls (a child of a multi-threaded process may not allocate).
        let child = Child::run(move || {
            let mut ops = [
                libc::sembuf {
                    sem_num: cotenant::tokens::MEMBERS_SEMAPHORE,
                    sem_op: 1,
                    sem_flg: libc::SEM_UNDO as i16,
                },
                libc::sembuf {
                    sem_num: cotenant::tokens::TOKENS_SEMAPHORE,
                    sem_op: -1,
                    sem_flg: libc::SEM_UNDO as i16,
                },
            ];
            // SAFETY: a valid array of two sembufs.
            unsafe { libc::semop(semid, ops.as_mut_ptr(), ops.len()) == 0 }
        });
        until("the child holds a token and is a member", || {
            tokens.available().unwrap() == 1 && tokens.members().unwrap() == 2
        });
        drop(child); // SIGKILL, then reaped
        assert_eq!(
            (tokens.available().unwrap(), tokens.members().unwrap()),
            (2, 1),
            "round {round}: the killed holder's token and membership came back"
        );
    }
}

#[test]
fn a_set_another_user_made_on_our_key_is_refused_with_the_reason() {
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("skipped: creating a set as another user needs root (to switch uid in a child)");
        return;
    }
    let name = format!("cotenant-test-foreign-{}", std::process::id());
    let key = cotenant::tokens::key(&name, 0);
    // Another user (nobody) creates a set on our key first, world-writable, with cotenant's
    // shape and marker, as an attacker would to be trusted.
    let child = Child::run(move || unsafe {
        // SAFETY: system calls only.
        if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
            return false;
        }
        let semid = libc::semget(key, 8, libc::IPC_CREAT | libc::IPC_EXCL | 0o666);
        if semid < 0 {
            return false;
        }
        let mut values = [2u16, 0x0c08, 2, 0, 0, 0, 1, 1];
        libc::semctl(semid, 0, libc::SETALL, values.as_mut_ptr()) == 0
    });
    let _remove = RemoveKey(key);
    until("the other user's set exists", || sysv_key_exists(key));
    drop(child);
    let e = HostTokens::open(&name, 2).unwrap_err().to_string();
    assert!(e.contains("refused") && e.contains("created by uid 65534"), "{e}");
    let e = HostTokens::remove_named(&name).unwrap_err().to_string();
    assert!(e.contains("not removed"), "{e}");
    // A default pool on that name runs without tokens: `tests/default_tokens.rs`.
}

/// Removes whatever set sits on `key` (as root) when dropped.
struct RemoveKey(i32);

impl Drop for RemoveKey {
    fn drop(&mut self) {
        // SAFETY: plain system calls on integers.
        unsafe {
            let semid = libc::semget(self.0, 0, 0);
            if semid >= 0 {
                libc::semctl(semid, 0, libc::IPC_RMID);
            }
        }
    }
}

#[test]
fn a_set_of_ours_that_another_user_owns_or_may_use_is_refused() {
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("skipped: handing a set to another user needs root");
        return;
    }
    for (case, mode, owner) in [("owner", 0o600, 65534u32), ("mode", 0o666, 0)] {
        let name = format!("cotenant-test-{case}-{}", std::process::id());
        let key = cotenant::tokens::key(&name, 0);
        // SAFETY: plain system calls; `ds` is a semid_ds that IPC_STAT fills and IPC_SET reads.
        unsafe {
            let semid = libc::semget(key, 8, libc::IPC_CREAT | libc::IPC_EXCL | mode);
            assert!(semid >= 0, "{case}: semget: {}", std::io::Error::last_os_error());
            let mut ds: libc::semid_ds = std::mem::zeroed();
            assert_eq!(libc::semctl(semid, 0, libc::IPC_STAT, &mut ds as *mut libc::semid_ds), 0);
            ds.sem_perm.uid = owner;
            assert_eq!(libc::semctl(semid, 0, libc::IPC_SET, &mut ds as *mut libc::semid_ds), 0);
        }
        let _remove = RemoveKey(key);
        let e = HostTokens::open(&name, 2).unwrap_err().to_string();
        let want = if case == "owner" { "owned by uid 65534" } else { "mode 0666" };
        assert!(e.contains("refused") && e.contains(want), "{case}: {e}");
    }
}

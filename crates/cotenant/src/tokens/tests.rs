//! Unit tests of a token set: private and named sets, the hand-over on the pipe and on the
//! semaphore, cancelled waits, and a set without leases.

use super::*;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[test]
fn a_set_without_leases_still_hands_out_tokens() {
    let name = format!("cotenant-test-no-leases-{}", std::process::id());
    // SAFETY: plain system call on integers.
    let semid = unsafe { libc::semget(user_key(&name), NSEMS, libc::IPC_CREAT | libc::IPC_EXCL | 0o600) };
    assert!(semid >= 0, "semget: {}", io::Error::last_os_error());
    // A set made where the kernel's per-set limit left no room for leases: the protocol's
    // semaphores alone, initialised.
    HostTokens::without_pipe(semid, 1, &name).initialise(1, name_check(&name)).unwrap();
    let _remove = RemoveNamed(name.clone());
    let tokens = HostTokens::open(&name, 1).unwrap();
    assert_eq!((tokens.count(), tokens.leases()), (1, 0));
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    assert!(!tokens.try_lease(0).unwrap(), "no lease to take");
    assert!(tokens.free_leases().unwrap().is_empty());
    tokens.release().unwrap();
    tokens.remove().unwrap();
    assert!(!HostTokens::exists(&name));
}

#[test]
fn a_private_set_hands_out_its_tokens_and_takes_them_back() {
    let tokens = HostTokens::private(2).unwrap();
    assert_eq!((tokens.count(), tokens.available().unwrap()), (2, 2));
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    assert_eq!(tokens.available().unwrap(), 0);
    // None left: a zero wait says so at once rather than blocking.
    assert!(!tokens.acquire(Duration::ZERO).unwrap());
    tokens.release().unwrap();
    assert_eq!(tokens.available().unwrap(), 1);
    tokens.release().unwrap();
    assert_eq!(tokens.available().unwrap(), 2);
}

/// A waiter is woken by the release: it returns with the token before its limit (a lost
/// wake-up would also end with the token, by the last try at the limit).
fn hand_over(tokens: HostTokens) {
    let tokens = std::sync::Arc::new(tokens);
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    let limit = Duration::from_secs(20);
    let waiter = {
        let tokens = tokens.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            (tokens.acquire(limit).unwrap(), start.elapsed())
        })
    };
    // Released only once the waiter waits, so that the hand-over is what is tested.
    while tokens.waiting().unwrap() == 0 {
        std::thread::yield_now();
    }
    tokens.release().unwrap();
    let (got, waited) = waiter.join().unwrap();
    assert!(got && waited < limit, "woken: {got}, after {waited:?}");
    assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (0, 0));
}

#[test]
fn a_waiter_gets_the_token_a_holder_releases() {
    let tokens = HostTokens::private(1).unwrap();
    assert!(tokens.hands_over_by_pipe());
    hand_over(tokens);
}

#[test]
fn without_the_pipe_a_waiter_is_woken_by_the_semaphore() {
    let mut tokens = HostTokens::private(1).unwrap();
    tokens.waits_on_pipe = false;
    hand_over(tokens);
}

#[test]
fn a_cancelled_wait_ends_on_the_pipe_and_on_the_semaphore_alike() {
    for on_pipe in [true, false] {
        let mut tokens = HostTokens::private(1).unwrap();
        tokens.waits_on_pipe = on_pipe;
        assert!(tokens.acquire(Duration::ZERO).unwrap());
        let checks = AtomicUsize::new(0);
        // Cancelled at its third check, long before the limit.
        let cancelled = || checks.fetch_add(1, Ordering::SeqCst) >= 2;
        let got = tokens.acquire_or_cancel(Duration::from_secs(20), Duration::from_millis(1), &cancelled);
        assert_eq!(got.unwrap(), Acquired::Cancelled, "on the pipe: {on_pipe}");
        assert_eq!(checks.into_inner(), 3, "on the pipe: {on_pipe}");
        assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (0, 0));
        // A limit that ends before the next check is a time-out: asked before the first
        // sleep and once more when the limit has passed, not at the 60 s check.
        let checks = AtomicUsize::new(0);
        let count = || checks.fetch_add(1, Ordering::SeqCst) == usize::MAX;
        let start = Instant::now();
        let got = tokens.acquire_or_cancel(Duration::from_millis(5), Duration::from_secs(60), &count);
        assert_eq!(got.unwrap(), Acquired::TimedOut, "on the pipe: {on_pipe}");
        assert_eq!(checks.into_inner(), 2, "on the pipe: {on_pipe}");
        assert!(start.elapsed() < Duration::from_secs(30), "the limit, not the check, ended it");
        assert_eq!(tokens.waiting().unwrap(), 0);
        tokens.release().unwrap();
    }
}

#[test]
fn one_wait_registers_once_on_the_pipe_whatever_its_checks() {
    let tokens = HostTokens::private(1).unwrap();
    assert!(tokens.hands_over_by_pipe());
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    let checks = AtomicUsize::new(0);
    let cancelled = || checks.fetch_add(1, Ordering::SeqCst) >= 5;
    let before = wakeup::REGISTRATIONS.with(|r| r.get());
    let got = tokens.acquire_or_cancel(Duration::from_secs(20), Duration::ZERO, &cancelled).unwrap();
    assert_eq!(got, Acquired::Cancelled);
    // Six checks (a zero interval is raised to 1 ms rather than polled), one registration:
    // its place in the pipe's queue is the one it took first.
    assert_eq!(checks.into_inner(), 6);
    assert_eq!(wakeup::REGISTRATIONS.with(|r| r.get()) - before, 1);
    tokens.release().unwrap();
}

#[test]
fn a_check_that_panics_leaves_no_waiter_counted() {
    let tokens = HostTokens::private(1).unwrap();
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tokens.acquire_or_cancel(Duration::from_secs(20), Duration::from_millis(1), &|| panic!("check"))
    }));
    assert!(waited.is_err());
    assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (0, 0));
    tokens.release().unwrap();
    // Nobody is counted as waiting, so the fast path takes the free token.
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    tokens.release().unwrap();
}

#[test]
fn bad_counts_and_names_are_refused_with_the_reason() {
    for count in [0, MAX_TOKENS + 1] {
        let e = HostTokens::private(count).unwrap_err().to_string();
        assert!(e.contains("count must be in 1..=32767"), "{e}");
    }
    let e = HostTokens::open("", 2).unwrap_err().to_string();
    assert!(e.contains("1 to 200 bytes"), "{e}");
}

#[test]
fn a_named_set_is_shared_and_keeps_its_first_count() {
    let name = format!("test-{}", std::process::id());
    let _remove = RemoveNamed(name.clone());
    let first = HostTokens::open(&name, 3).unwrap();
    let second = HostTokens::open(&name, 8).unwrap();
    assert_eq!(second.count(), 3);
    assert!(second.acquire(Duration::ZERO).unwrap());
    assert_eq!(first.available().unwrap(), 2);
    second.release().unwrap();
    drop(second);
    assert!(HostTokens::exists(&name));
    first.remove().unwrap();
    assert!(!HostTokens::exists(&name));
    // Gone: nothing to remove by name any more; and by name it goes too.
    assert!(!HostTokens::remove_named(&name).unwrap());
    drop(HostTokens::open(&name, 1).unwrap());
    assert!(HostTokens::remove_named(&name).unwrap());
    assert!(!HostTokens::exists(&name));
}

#[test]
fn keys_differ_by_name_and_user_and_are_never_private() {
    assert_ne!(key("default", 0), key("default", 1000));
    assert_ne!(key("default", 0), key("lab", 0));
    assert_ne!(key("default", 0), libc::IPC_PRIVATE);
}

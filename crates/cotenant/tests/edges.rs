//! Library edges of issue 34 ("Hardening"), each a regression named `r34_…`: a `Task` joined
//! after it was polled to completion, a host token given back twice, and the degradations a
//! pool reports instead of passing in silence. Counts and states, never timings.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use cotenant::tokens::HostTokens;
use cotenant::{JoinError, Policy, Pool};

/// A waker that unparks the polling thread (the smallest executor: `poll_until_ready`).
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `task` on this thread until it is ready, parking between polls (the task's
/// resolution wakes it); a park can also end spuriously, which only polls once more.
fn poll_until_ready<T>(task: &mut cotenant::Task<T>) -> Result<T, JoinError> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(result) = Pin::new(&mut *task).poll(&mut cx) {
            return result;
        }
        std::thread::park();
    }
}

/// Issue 34: polling a `Task` to completion and then calling `join()` reached an `unreachable!`.
#[test]
fn r34_join_after_a_poll_took_the_result_says_so_instead_of_panicking() {
    let pool = Pool::builder().policy(Policy::fixed(1)).host_tokens_off().build().unwrap();
    let mut task = pool.spawn(|| 6 * 7);
    assert_eq!(poll_until_ready(&mut task).unwrap(), 42, "the poll gets the value");
    assert!(task.is_finished());
    // A second poll after `Ready` gets the same error rather than a panic.
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let again = Pin::new(&mut task).poll(&mut Context::from_waker(&waker));
    assert!(matches!(again, Poll::Ready(Err(JoinError::AlreadyTaken))), "{again:?}");
    let error = task.join().unwrap_err();
    assert!(matches!(error, JoinError::AlreadyTaken), "{error:?}");
    assert!(error.to_string().contains("already taken"), "{error}");
    assert_eq!(error.panic_message(), None);
    // A failed task's error, too, is handed over once.
    let mut failed = pool.spawn(|| -> u8 { panic!("boom") });
    assert_eq!(poll_until_ready(&mut failed).unwrap_err().panic_message(), Some("boom"));
    assert!(matches!(failed.join(), Err(JoinError::AlreadyTaken)));
    pool.shutdown();
}

/// Issue 34: `HostTokens::release` accepted a double release, adding a token to the set.
#[test]
#[cfg_attr(cotenant_force_fallback, ignore = "host CPU tokens need Linux (System V semaphores)")]
fn r34_a_second_release_is_refused_and_adds_no_token() {
    let tokens = HostTokens::private(2).unwrap();
    // Nothing taken yet: nothing to give back.
    let never_taken = tokens.release().unwrap_err().to_string();
    assert!(never_taken.contains("nothing to give back"), "{never_taken}");
    assert_eq!(tokens.available().unwrap(), 2, "the refused release added no token");
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    assert_eq!(tokens.available().unwrap(), 1);
    tokens.release().unwrap();
    assert_eq!(tokens.available().unwrap(), 2);
    let twice = tokens.release().unwrap_err().to_string();
    assert!(twice.contains("released twice?"), "{twice}");
    assert_eq!(tokens.available().unwrap(), 2, "still the set's count, not one more");
    // Two taken, two given back (from another thread too), the third refused.
    let tokens = Arc::new(tokens);
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    assert!(tokens.acquire(Duration::ZERO).unwrap());
    let other = tokens.clone();
    std::thread::spawn(move || other.release().unwrap()).join().unwrap();
    tokens.release().unwrap();
    assert!(tokens.release().is_err());
    assert_eq!(tokens.available().unwrap(), 2);
}

/// The same with the token's CPU lease: the lease of a second give-back is refused, and so is
/// its token.
#[test]
#[cfg_attr(cotenant_force_fallback, ignore = "host CPU tokens need Linux (System V semaphores)")]
fn r34_a_second_release_with_a_lease_gives_back_neither_again() {
    let tokens = HostTokens::private(1).unwrap();
    if tokens.leases() == 0 {
        eprintln!("skipped: this kernel's semaphore limits leave no room for CPU leases");
        return;
    }
    assert!(tokens.try_acquire_with_lease(0).unwrap());
    tokens.release_with_lease(0).unwrap();
    let twice = tokens.release_with_lease(0).unwrap_err().to_string();
    assert!(twice.contains("the lease of CPU 0 is not held"), "{twice}");
    assert!(twice.contains("nothing to give back"), "{twice}");
    assert_eq!(tokens.available().unwrap(), 1, "no token added");
    assert!(tokens.try_lease(0).unwrap());
    assert!(!tokens.try_lease(0).unwrap(), "the lease was freed once, not twice");
    tokens.give_back_lease(0).unwrap();
}

/// Issue 34: failures that turned features off were silent. A pool reports them in its
/// metrics, for people and for Prometheus; a pinned pool whose CPU mask was read reports none.
/// (No host tokens and a fixed policy: nothing here reads schedstat, which a kernel may lack.)
#[test]
#[cfg_attr(cotenant_force_fallback, ignore = "pinning needs Linux (sched_setaffinity)")]
fn r34_degradations_are_a_metric_and_a_healthy_pinned_pool_has_none() {
    let pool = Pool::builder()
        .policy(Policy::fixed(1))
        .threads(1)
        .pin_workers(true)
        .host_tokens_off()
        .name("edges")
        .build()
        .unwrap();
    assert_eq!(pool.spawn(|| 1).join().unwrap(), 1);
    assert_eq!(pool.placement().pinned.len(), 1);
    assert!(pool.placement().pinned[0].is_some(), "the mask was read and the worker pinned");
    let metrics = pool.metrics();
    assert_eq!(metrics.degradations, 0, "{metrics}");
    let text = metrics.to_prometheus("edges");
    assert!(text.contains("# TYPE cotenant_pool_degradations_total counter"), "{text}");
    assert!(text.contains("cotenant_pool_degradations_total{pool=\"edges\"} 0"), "{text}");
    pool.shutdown();
}

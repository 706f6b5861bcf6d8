//! A pool's side of the host CPU tokens ([`crate::tokens`], [`Builder::host_tokens`]): a
//! worker takes a token after popping a task and gives it back when the task ends (a guard, so
//! that no path can keep it). A token that does not come within the wait limit is skipped and
//! counted (its holders may be blocked, or the host busier than the limit allows); a set that
//! fails (removed) is skipped, counted and logged once per pool. A `shutdown_now` while a
//! worker waits cancels its task: the wait checks for it every 50 ms, keeping its place in the
//! queue of waiters.
//!
//! [`Builder::host_tokens`]: super::Builder::host_tokens

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::tokens::{Acquired, HostTokens};

/// The default wait for a token before a task runs without one.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(1);
/// How often a waiting worker checks for `shutdown_now`.
const CANCEL_CHECK: Duration = Duration::from_millis(50);

pub(crate) struct PoolTokens {
    set: Arc<HostTokens>,
    wait: Duration,
    /// Tasks run without a token because none came within `wait`.
    pub(crate) timeouts: AtomicU64,
    /// Token operations that failed (taking one: the task then runs without; giving one back).
    pub(crate) errors: AtomicU64,
    warned: AtomicBool,
}

/// What a worker about to run a task got.
pub(crate) enum Take<'a> {
    /// A token, given back when this is dropped.
    Held(Held<'a>),
    /// None: run the task without one (counted).
    Without,
    /// `shutdown_now` came while it waited: cancel the task.
    Cancelled,
}

/// A token held for one task; dropping it gives the token back.
pub(crate) struct Held<'a>(&'a PoolTokens);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.set.release() {
            self.0.failed(&e);
        }
    }
}

impl PoolTokens {
    pub(crate) fn new(set: Arc<HostTokens>, wait: Duration) -> PoolTokens {
        PoolTokens {
            set,
            wait,
            timeouts: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        }
    }

    /// Waits for a token for at most the pool's limit, checking `cancelling` every
    /// `CANCEL_CHECK` without losing its place among the waiters.
    pub(crate) fn take(&self, cancelling: impl Fn() -> bool) -> Take<'_> {
        match self.set.acquire_or_cancel(self.wait, CANCEL_CHECK, &cancelling) {
            Ok(Acquired::Token) if cancelling() => {
                drop(Held(self));
                Take::Cancelled
            }
            Ok(Acquired::Token) => Take::Held(Held(self)),
            Ok(Acquired::Cancelled) => Take::Cancelled,
            // A shutdown during the last sleep of the wait still cancels.
            Ok(Acquired::TimedOut) if cancelling() => Take::Cancelled,
            Ok(Acquired::TimedOut) => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                Take::Without
            }
            Err(e) => {
                self.failed(&e);
                Take::Without
            }
        }
    }

    fn failed(&self, e: &crate::tokens::TokensError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!("{e}; this pool's tasks run without a host token while it fails");
        }
    }
}

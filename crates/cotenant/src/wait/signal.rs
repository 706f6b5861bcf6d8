//! Waiting that can be woken: [`Signal`] (an event count: "something changed, look again") and
//! [`Event`] (a flag with `set` and `wait`), neither of which ever loses a wake-up.
//!
//! The fast paths are one atomic each: a notify with nobody parked is a fence and a load, a
//! wait whose condition already holds is the condition itself. Parking uses the standard
//! library's `Mutex` and `Condvar` (futex-backed on Linux), reached through `crate::sync` so
//! the loom models in `wait/loom_event.rs` check this protocol.
//!
//! The protocol (the pool's step P against step S, `pool/README.md`): a waiter registers in
//! `parked`, fences, takes the lock and checks its condition, then waits (which releases the
//! lock); a notifier makes the condition true, fences, and reads `parked`. The `SeqCst` fences
//! are totally ordered: if the waiter's comes first, the notifier sees it registered and, taking
//! the lock, notifies after the waiter has either started waiting or released the lock having
//! seen the condition; if the notifier's comes first, the waiter's check sees the condition.

use std::time::{Duration, Instant};

use super::backoff::{Backoff, Step};
#[cfg(not(loom))]
use super::busy_step;
use super::Waited;
use crate::sync::{fence, lock, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};

/// "Something changed": wakes the threads waiting in [`Signal::wait_until`] for a condition
/// that a notifier made true. The condition lives outside (atomics the waiters read); the
/// signal only says when to look again.
///
/// ```
/// use cotenant::wait::{Backoff, Signal};
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// let (ready, signal) = (Arc::new(AtomicBool::new(false)), Arc::new(Signal::new()));
/// let waiter = {
///     let (ready, signal) = (ready.clone(), signal.clone());
///     std::thread::spawn(move || signal.wait_until(|| ready.load(Ordering::Acquire), &Backoff::parking()))
/// };
/// ready.store(true, Ordering::Release);
/// signal.notify_all();
/// waiter.join().unwrap();
/// ```
#[derive(Debug, Default)]
pub struct Signal {
    /// Threads between their registration and their last check (see the module docs).
    parked: AtomicUsize,
    /// Taken by a parking thread from its check to its wait, and by a notifier that found
    /// someone parked, so a notification cannot fall between the check and the wait.
    lock: Mutex<()>,
    woken: Condvar,
}

impl Signal {
    /// A signal nobody waits on.
    pub fn new() -> Self {
        Signal::default()
    }

    /// Wakes every thread parked on this signal. Call it after making a waited-for condition
    /// true; it costs a fence and a load when nobody is parked.
    pub fn notify_all(&self) {
        fence(Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) == 0 {
            return;
        }
        let _guard = lock(&self.lock);
        self.woken.notify_all();
    }

    /// Waits until `ready` returns true, following `backoff`: its spins and yields as
    /// [`super::wait_until`] does, its sleeps as parks on this signal (woken early by
    /// [`Signal::notify_all`]), its park steps as parks until notified. `ready` is called with
    /// the signal's lock held during a park step: keep it short, and do not notify from it.
    pub fn wait_until(&self, ready: impl FnMut() -> bool, backoff: &Backoff) -> Waited {
        self.wait_until_deadline(ready, backoff, None).0
    }

    /// [`Signal::wait_until`] giving up at `deadline`; the flag says whether `ready` held.
    pub fn wait_until_deadline(
        &self,
        mut ready: impl FnMut() -> bool,
        backoff: &Backoff,
        deadline: Option<Instant>,
    ) -> (Waited, bool) {
        let mut waited = Waited::default();
        loop {
            if ready() {
                return (waited, true);
            }
            let remaining = match deadline {
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return (waited, false),
                },
                None => None,
            };
            let step = backoff.step(waited.checks);
            waited.checks = waited.checks.saturating_add(1);
            // Under loom, busy steps would only multiply the interleavings: park at once.
            #[cfg(not(loom))]
            if busy_step(step, &mut waited) {
                continue;
            }
            let timeout = match step {
                Step::Sleep(d) => Some(remaining.map_or(d, |left| left.min(d))),
                _ => remaining,
            };
            waited.parks = waited.parks.saturating_add(1);
            if self.park(timeout, &mut ready) {
                return (waited, true);
            }
        }
    }

    /// Registers, checks `ready` under the lock, and waits for a notification (or `timeout`).
    /// True when `ready` held at the check.
    fn park(&self, timeout: Option<Duration>, ready: &mut impl FnMut() -> bool) -> bool {
        // Unregisters on every way out, a panic in `ready` included (a registration left behind
        // would only make every later notification take the lock, but still).
        struct Registered<'a>(&'a AtomicUsize);
        impl Drop for Registered<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.parked.fetch_add(1, Ordering::SeqCst);
        let _registered = Registered(&self.parked);
        fence(Ordering::SeqCst);
        let guard = lock(&self.lock);
        let held = ready();
        if !held {
            // One wait: a notification, a timeout or a spurious wake-up all lead back to a
            // check of `ready` by the caller.
            drop(match timeout {
                None => crate::sync::wait(&self.woken, guard),
                Some(timeout) => crate::sync::wait_timeout(&self.woken, guard, timeout),
            });
        } else {
            drop(guard);
        }
        held
    }
}

/// A flag threads can wait for: [`Event::set`] wakes every waiter, [`Event::reset`] clears it.
/// Setting it when nobody waits is a store, a fence and a load. A waiter returns once it sees
/// the flag set: a `set` followed by a `reset` before a parked waiter looks again wakes it, and
/// it goes back to waiting for the next `set` (a pulse is not a latch; use a [`Signal`] and a
/// counter to count pulses).
///
/// ```
/// use cotenant::wait::Event;
/// use std::sync::Arc;
/// let done = Arc::new(Event::new());
/// let setter = { let done = done.clone(); std::thread::spawn(move || done.set()) };
/// done.wait();
/// assert!(done.is_set());
/// setter.join().unwrap();
/// ```
#[derive(Debug, Default)]
pub struct Event {
    set: AtomicBool,
    signal: Signal,
}

impl Event {
    /// An event that is not set.
    pub fn new() -> Self {
        Event::default()
    }

    /// Sets the flag and wakes every waiter.
    pub fn set(&self) {
        self.set.store(true, Ordering::Release);
        self.signal.notify_all();
    }

    /// Clears the flag; later waits wait for the next [`Event::set`].
    pub fn reset(&self) {
        self.set.store(false, Ordering::Release);
    }

    /// Whether the flag is set now.
    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Waits until the flag is set: a short spin, then parked until [`Event::set`].
    pub fn wait(&self) {
        self.wait_with(&Backoff::parking());
    }

    /// Waits at most `timeout`; true when the flag was set.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        match deadline {
            Some(deadline) => {
                self.signal.wait_until_deadline(|| self.is_set(), &Backoff::parking(), Some(deadline)).1
            }
            None => {
                self.wait();
                true
            }
        }
    }

    /// Waits until the flag is set, following `backoff` (see [`Signal::wait_until`]).
    pub fn wait_with(&self, backoff: &Backoff) -> Waited {
        self.signal.wait_until(|| self.is_set(), backoff)
    }
}

//! How an idle worker may wait inside another runtime's `block_on` (`Builder::park_with`), so
//! that the pool's idle workers drive that runtime's reactor themselves, as tokio's own
//! workers do, instead of a thread of its own handing every readiness event over.
//!
//! **What it saves.** With the reactor on a thread of its own, each event that wakes one of the
//! pool's futures costs a queue push, a futex wake of a sleeping worker and a context switch
//! before the future is polled. A worker that drives the reactor while idle queues the woken
//! poll itself and, being the allowed sleeper the push prefers (`Roster::wake_one_allowed`),
//! runs it as soon as the hook returns: no other thread is involved.
//!
//! **The contract.** The hook receives a [`Woken`] future and must block until it is ready
//! (`runtime.block_on(woken)`); `Pool`'s `unpark` of the worker wakes the future's waker, and
//! the worker then takes its wake-up token as usual (`Parker::park`, which returns at once). A
//! hook that returns early only means the worker sleeps on its condition variable as without
//! one; a hook that panics is caught and logged once (the worker survives and sleeps as
//! usual).
//!
//! **One driver at a time.** Only one worker of the pool is in the hook at once (`driving`): a
//! current-thread runtime has one reactor, and a second worker in its `block_on` would only
//! wait for the first, adding a wake-up each time the reactor changes hands. The pool's other
//! idle workers sleep as usual. Only a worker allowed to run when it goes to sleep parks in the
//! hook (`Roster::sleep`): one the target parked costs no CPU, not even the reactor's.
//!
//! **Nobody left out.** A worker that leaves the hook because it has a task hands the hook over
//! as soon as it has popped one (`Roster::hand_over_driving`, called from the worker loop): if
//! nobody is in the hook, the lowest allowed sleeper is woken, finds nothing to run and goes
//! back to sleep in it, so the reactor is driven while the task runs however long it takes.
//! Popping first keeps the woken task on the worker that saw its event. A worker that sleeps
//! or exits outside the hook (the target fell below it, it was woken as a borrower above the
//! target, an elastic pool retires it) hands over the same way; without that, an allowed
//! worker asleep on its condition variable would never be woken again, since no event would
//! be delivered (a hang the HTTP benchmark found). The order of the two sides is `SeqCst`: a
//! worker whose entry found the hook taken had registered as a sleeper before the driver
//! left, so the driver's later check sees it.
//!
//! **What it costs.** A hand-over is a futex wake of an idle worker while the task runs, off
//! the task's path; with one allowed worker there is nobody to hand over to. While every
//! allowed worker is busy, nobody is in the hook: sockets and timers wait until one runs out
//! of tasks (tokio's multi-thread runtime behaves the same when all its workers are busy). A
//! service whose handlers all compute for long keeps a reactor thread of its own instead.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::roster::Parker;

/// What `Builder::park_with` stores: called with the worker's wake-up as a future.
pub(crate) type ParkHook = dyn Fn(&mut Woken<'_>) + Send + Sync;

/// The wake-up of a worker waiting in the pool's park hook ([`Builder::park_with`]): a future
/// that is ready once the pool wakes the worker (a task for it, a change of target, shutdown).
///
/// [`Builder::park_with`]: super::Builder::park_with
#[must_use = "a park hook must block until the worker's wake-up is ready"]
pub struct Woken<'a> {
    parker: &'a Parker,
}

impl Future for Woken<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.parker.poll_unparked(cx)
    }
}

impl std::fmt::Debug for Woken<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Woken").finish_non_exhaustive()
    }
}

/// The pool's park hook and who is in it.
pub(crate) struct IdleDriver {
    hook: Arc<ParkHook>,
    /// A worker is in the hook now.
    driving: AtomicBool,
    /// A panic of the hook has been logged (once per pool).
    warned: AtomicBool,
}

impl IdleDriver {
    pub(crate) fn new(hook: Arc<ParkHook>) -> Self {
        IdleDriver { hook, driving: AtomicBool::new(false), warned: AtomicBool::new(false) }
    }

    /// Waits for `parker`'s token in the hook if no other worker is in it, else as usual; takes
    /// the token either way. True if it waited in the hook.
    pub(crate) fn park(&self, parker: &Parker) -> bool {
        let drove = self.driving.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_ok();
        if drove {
            let mut woken = Woken { parker };
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.hook)(&mut woken)));
            // Before blocking below: if the hook returned early, another worker may drive.
            self.driving.store(false, Ordering::SeqCst);
            if let Err(payload) = result {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    let panic = super::Panic::new(payload);
                    tracing::warn!(
                        panic = panic.message().unwrap_or("<non-string payload>"),
                        "cotenant: the pool's park hook panicked; its idle workers sleep without it \
                         when it does (logged once)"
                    );
                }
            }
        }
        // Returns at once when the hook returned because the worker was woken.
        parker.park();
        drove
    }

    /// Whether a worker is in the hook now (`Roster::sleep`'s hand-over).
    pub(crate) fn is_driving(&self) -> bool {
        self.driving.load(Ordering::SeqCst)
    }
}

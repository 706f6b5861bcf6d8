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
//! hook that returns early only makes that worker sleep as without one. A hook that panics is
//! caught, logged at error level and **never called again** (a hook that panics once, such as
//! tokio's `block_on` on a thread already inside a runtime, would panic at every idle moment):
//! whatever it drove is then not driven by this pool, which the log says.
//!
//! **One driver at a time.** Only one worker of the pool is in the hook at once (`driving`, its
//! index): a current-thread runtime has one reactor, and a second worker in its `block_on`
//! would only wait for the first, adding a wake-up each time the reactor changes hands. The
//! pool's other idle workers sleep as usual. Only a worker allowed to run when it goes to
//! sleep parks in the hook (`Roster::sleep`), and one that the target stops allowing while it
//! is in the hook is woken out of it (`Roster::after_target_change`): a worker the target
//! parked costs no CPU, not even the reactor's. For the same reason the runtime must be this
//! pool's alone: a runtime some other thread is inside `block_on` of is not driven from here.
//!
//! **Nobody left out.** A worker that starts a task while nobody is in the hook (it just left
//! the hook with the task, or was woken to take the hook over and found a task) hands the hook
//! over as soon as it has popped it (`Roster::hand_over_driving`, from the worker loop): the
//! lowest allowed sleeper, if any, is woken and, usually finding nothing to run, goes back to
//! sleep in the hook, so the reactor is driven while the task runs however long it takes.
//! Popping first keeps the woken task on the worker that saw its event. A worker that
//! sleeps or exits outside the hook (the target fell below it, it was woken as a borrower above
//! the target, an elastic pool retires it) hands over the same way, and so does a change of
//! target that allows a sleeper while nobody is in the hook; without that, an allowed worker
//! asleep on its condition variable would never be woken again, since no event would be
//! delivered (a hang the HTTP benchmark found). The order of the two sides is `SeqCst`: a
//! worker whose entry found the hook taken had registered as a sleeper before the driver left,
//! so the driver's later check sees it.
//!
//! **What runs in the hook.** Whatever the runtime runs inside `block_on` runs on the pool's
//! worker, registered as asleep: for tokio, the tasks spawned with `tokio::spawn` on that
//! runtime. A long one delays the wake-up of that worker, and one that submits to a full
//! queue of this pool runs the task in place, as a worker of the pool does. Spawn on the pool.
//!
//! **What it costs.** A hand-over is a futex wake of an idle worker while the task runs, off
//! the task's path; with one allowed worker there is nobody to hand over to. While every
//! allowed worker is busy, nobody is in the hook: sockets and timers wait until one runs out
//! of tasks (tokio's multi-thread runtime behaves the same when all its workers are busy). A
//! service whose handlers all compute for long keeps a reactor thread of its own instead.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::roster::Parker;

/// What `Builder::park_with` stores: called with the worker's wake-up as a future.
pub(crate) type ParkHook = dyn Fn(&mut Woken<'_>) + Send + Sync;

/// The wake-up of a worker waiting in the pool's park hook ([`Builder::park_with`]): a future
/// that is ready once the pool wakes the worker (a task for it, a change of target, shutdown).
///
/// [`Builder::park_with`]: super::Builder::park_with
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
    /// The worker in the hook now, plus one (0: nobody).
    driving: AtomicUsize,
    /// The hook panicked: it is not called again (a hook that panics once would most likely
    /// panic at every idle moment of every worker).
    broken: AtomicBool,
    /// Entries that found the hook taken (tests wait on it).
    #[cfg(test)]
    pub(crate) found_taken: AtomicUsize,
}

impl IdleDriver {
    pub(crate) fn new(hook: Arc<ParkHook>) -> Self {
        IdleDriver {
            hook,
            driving: AtomicUsize::new(0),
            broken: AtomicBool::new(false),
            #[cfg(test)]
            found_taken: AtomicUsize::new(0),
        }
    }

    /// Worker `index` waits for `parker`'s token in the hook if no other worker is in it, else
    /// as usual; takes the token either way.
    pub(crate) fn park(&self, index: usize, parker: &Parker) {
        let drove = !self.broken.load(Ordering::Relaxed)
            && self.driving.compare_exchange(0, index + 1, Ordering::SeqCst, Ordering::SeqCst).is_ok();
        #[cfg(test)]
        if !drove {
            self.found_taken.fetch_add(1, Ordering::SeqCst);
        }
        if drove {
            let mut woken = Woken { parker };
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.hook)(&mut woken)));
            // Before blocking below: if the hook returned early, another worker may drive.
            self.driving.store(0, Ordering::SeqCst);
            if let Err(payload) = result {
                self.broken.store(true, Ordering::Relaxed);
                let panic = super::Panic::new(payload);
                tracing::error!(
                    panic = panic.message().unwrap_or("<non-string payload>"),
                    "cotenant: the pool's park hook panicked; it is not called again, so whatever it \
                     drove (a reactor's sockets and timers) is no longer driven by this pool"
                );
            }
        }
        // Returns at once when the hook returned because the worker was woken.
        parker.park();
    }

    /// Whether a worker is in the hook now (`Roster::hand_over_driving`).
    pub(crate) fn is_driving(&self) -> bool {
        self.driving.load(Ordering::SeqCst) != 0
    }

    /// Nobody is in the hook and it may still be called: an allowed sleeper should take it.
    pub(crate) fn wants_driver(&self) -> bool {
        !self.broken.load(Ordering::Relaxed) && !self.is_driving()
    }

    /// The worker in the hook now, if any (`Roster::after_target_change`).
    pub(crate) fn driver(&self) -> Option<usize> {
        self.driving.load(Ordering::SeqCst).checked_sub(1)
    }
}

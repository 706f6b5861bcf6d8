//! Who may run and who sleeps: the target, the registry of sleeping workers, and the wake-ups.
//! The protocol is written down in `pool/README.md`; this file implements its steps.
//!
//! Invariant (kept under the `registry` lock): `idle_allowed` equals the number of registered
//! sleepers whose index is below the target. Submitters read it without the lock, after a
//! `SeqCst` fence, to decide whether a wake-up is needed at all (the fast path of every submit).

use std::task::{Context, Poll, Waker};

use super::park_with::IdleDriver;
use crate::sync::{fence, lock, wait, AtomicUsize, CachePadded, Condvar, Mutex, Ordering};

/// A one-token parker: `unpark` before `park` makes that `park` return at once, so a wake-up
/// that races with falling asleep is never lost (the same contract as `std::thread::park`).
///
/// A worker parked through the pool's park hook (`park_with.rs`) waits in the hook's
/// `block_on` instead of on the condition variable: it leaves the `Waker` of that `block_on`
/// here, and `unpark` wakes it too.
#[derive(Default)]
pub(crate) struct Parker {
    state: Mutex<ParkState>,
    unparked: Condvar,
}

#[derive(Default)]
struct ParkState {
    token: bool,
    /// The waker of a park hook's `block_on` polling `Woken` (`Parker::poll_unparked`).
    waker: Option<Waker>,
}

impl Parker {
    /// Blocks until the token is set, then takes it.
    pub(crate) fn park(&self) {
        let mut state = lock(&self.state);
        // A hook that returned early left its waker: no longer anyone's to wake.
        state.waker = None;
        while !state.token {
            state = wait(&self.unparked, state);
        }
        state.token = false;
    }

    fn unpark(&self) {
        let waker = {
            let mut state = lock(&self.state);
            state.token = true;
            state.waker.take()
        };
        self.unparked.notify_one();
        // Outside the lock: waking a runtime may take its own locks, or poll `Woken` at once.
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// `Woken`'s poll: ready once the token is set (left for `park` to take), else the waker is
    /// kept for `unpark`.
    pub(crate) fn poll_unparked(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.state);
        if state.token {
            return Poll::Ready(());
        }
        match &state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

struct Registry {
    /// `asleep[i]`: worker `i` registered itself as sleeping and nobody has claimed it since.
    asleep: Vec<bool>,
}

impl Registry {
    fn count_below(&self, end: usize) -> usize {
        self.asleep.iter().take(end).filter(|&&asleep| asleep).count()
    }
}

pub(crate) struct Roster {
    target: AtomicUsize,
    idle_allowed: AtomicUsize,
    registry: Mutex<Registry>,
    parkers: Box<[CachePadded<Parker>]>,
}

impl Roster {
    /// `threads` workers of which the first `target` may run (`1 <= target <= threads`).
    pub(crate) fn new(threads: usize, target: usize) -> Self {
        debug_assert!(1 <= target && target <= threads);
        Roster {
            target: AtomicUsize::new(target),
            idle_allowed: AtomicUsize::new(0),
            registry: Mutex::new(Registry { asleep: vec![false; threads] }),
            parkers: (0..threads).map(|_| CachePadded(Parker::default())).collect(),
        }
    }

    /// Workers currently allowed to run: indices `0..target`.
    pub(crate) fn target(&self) -> usize {
        self.target.load(Ordering::SeqCst)
    }

    /// Sleepers that a submit may wake (a snapshot).
    #[cfg(all(test, loom))]
    pub(crate) fn idle_allowed(&self) -> usize {
        self.idle_allowed.load(Ordering::SeqCst)
    }

    /// Step T (README): changes the target; wakes at most `queued()` of the newly allowed
    /// sleepers, lowest index first. Returns how many it woke.
    pub(crate) fn set_target(&self, new: usize, queued: impl Fn() -> usize) -> usize {
        let new = new.clamp(1, self.parkers.len());
        let mut registry = lock(&self.registry);
        let old = self.target.swap(new, Ordering::SeqCst);
        self.idle_allowed.store(registry.count_below(new), Ordering::SeqCst);
        if new <= old {
            return 0;
        }
        // Pairs with the fence in `Shared::push`: either the submitter sees the new
        // `idle_allowed` and wakes someone, or we see its task in `queued()`.
        fence(Ordering::SeqCst);
        let mut budget = queued();
        let mut woken = Vec::new();
        for index in old..new {
            if budget == 0 {
                break;
            }
            if registry.asleep[index] {
                registry.asleep[index] = false;
                self.idle_allowed.fetch_sub(1, Ordering::SeqCst);
                woken.push(index);
                budget -= 1;
            }
        }
        drop(registry);
        for &index in &woken {
            self.parkers[index].unpark();
        }
        woken.len()
    }

    /// Step S (README): worker `index` goes to sleep unless `stay_awake(target)` says there is
    /// a reason not to, checked after registering so that no wake-up can be missed.
    ///
    /// With a park hook (`driver`), a worker allowed to run when it registers sleeps in the
    /// hook (`IdleDriver::park`) rather than on its condition variable; one above the target
    /// costs no CPU there, so it never does. Returns whether the worker slept in the hook
    /// (it then hands the hook over once it has a task: `hand_over_driving`).
    pub(crate) fn sleep(
        &self,
        index: usize,
        stay_awake: impl Fn(usize) -> bool,
        driver: Option<&IdleDriver>,
    ) -> bool {
        let allowed = {
            let mut registry = lock(&self.registry);
            registry.asleep[index] = true;
            let allowed = index < self.target.load(Ordering::SeqCst);
            if allowed {
                self.idle_allowed.fetch_add(1, Ordering::SeqCst);
            }
            allowed
        };
        // Pairs with the fence in `Shared::push` (see README, "the lost wake-up").
        fence(Ordering::SeqCst);
        if stay_awake(self.target.load(Ordering::SeqCst)) {
            let mut registry = lock(&self.registry);
            if registry.asleep[index] {
                registry.asleep[index] = false;
                if index < self.target.load(Ordering::SeqCst) {
                    self.idle_allowed.fetch_sub(1, Ordering::SeqCst);
                }
                return false;
            }
            // Someone claimed us already and will unpark us (or has): take that token now so
            // it does not cut a later sleep short.
        }
        match driver {
            Some(driver) if allowed => driver.park(&self.parkers[index]),
            Some(driver) => {
                self.hand_over_driving(driver);
                self.parkers[index].park();
                false
            }
            None => {
                self.parkers[index].park();
                false
            }
        }
    }

    /// Called by a worker that left the park hook and took a task, that sleeps outside the
    /// hook although the pool has one, or that exits: if nobody is in the hook, wakes the
    /// lowest allowed sleeper, which goes back to sleep in it (`park_with.rs`, "Nobody left
    /// out").
    pub(crate) fn hand_over_driving(&self, driver: &IdleDriver) {
        if !driver.is_driving() {
            self.wake_one_allowed(None);
        }
    }

    /// Step W (README): wakes the lowest-index allowed sleeper, if any. The caller has made
    /// its task visible and issued a `SeqCst` fence before calling.
    ///
    /// `preferred`: a worker to wake before the lowest-index one if it is an allowed sleeper:
    /// the calling thread when it is a worker of the pool asleep in the park hook, which
    /// queued the task while driving the hook's reactor and runs it next without a hand-off.
    pub(crate) fn wake_one_allowed(&self, preferred: Option<usize>) -> bool {
        if self.idle_allowed.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let mut registry = lock(&self.registry);
        let target = self.target.load(Ordering::SeqCst);
        let preferred = preferred.filter(|&index| index < target && registry.asleep[index]);
        let Some(index) = preferred.or_else(|| (0..target).find(|&index| registry.asleep[index])) else {
            return false;
        };
        registry.asleep[index] = false;
        self.idle_allowed.fetch_sub(1, Ordering::SeqCst);
        drop(registry);
        self.parkers[index].unpark();
        true
    }

    /// Step B (`borrow.rs`): claims the lowest-index sleeper at or above the target and below
    /// `limit`, calls `mark(index)` (the borrowed flag, set before the worker can see its
    /// wake-up) and wakes it. The `idle_allowed` invariant is untouched: the claimed worker
    /// was not counted (its index is at or above the target, read under the lock).
    pub(crate) fn wake_borrower(&self, limit: usize, mark: impl Fn(usize)) -> bool {
        let mut registry = lock(&self.registry);
        let target = self.target.load(Ordering::SeqCst);
        let limit = limit.min(registry.asleep.len());
        let Some(index) = (target..limit).find(|&index| registry.asleep[index]) else {
            return false;
        };
        registry.asleep[index] = false;
        mark(index);
        drop(registry);
        self.parkers[index].unpark();
        true
    }

    /// Wakes every sleeper at or above the target (an elastic pool's controller, after
    /// lowering it: those workers retire). A worker registering concurrently reads the target
    /// after registering, so it either is claimed here or sees itself above the target.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn wake_above_target(&self) -> usize {
        let mut registry = lock(&self.registry);
        let target = self.target.load(Ordering::SeqCst);
        let woken: Vec<usize> =
            (target..registry.asleep.len()).filter(|&index| registry.asleep[index]).collect();
        for &index in &woken {
            registry.asleep[index] = false;
        }
        drop(registry);
        for &index in &woken {
            self.parkers[index].unpark();
        }
        woken.len()
    }

    /// Wakes every sleeper (shutdown).
    pub(crate) fn wake_all(&self) {
        let mut registry = lock(&self.registry);
        let woken: Vec<usize> = (0..registry.asleep.len()).filter(|&index| registry.asleep[index]).collect();
        for &index in &woken {
            registry.asleep[index] = false;
        }
        self.idle_allowed.store(0, Ordering::SeqCst);
        drop(registry);
        for index in woken {
            self.parkers[index].unpark();
        }
    }

    /// Workers registered as sleeping now (a snapshot, for tests).
    #[cfg(test)]
    pub(crate) fn asleep(&self) -> usize {
        let registry = lock(&self.registry);
        registry.count_below(registry.asleep.len())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Roster;
    use std::sync::Arc;

    /// Waits until `n` workers are registered asleep (a state, whatever the timing).
    fn until_asleep(roster: &Roster, n: usize) {
        while roster.asleep() != n {
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_wake_up_prefers_the_given_allowed_sleeper_over_the_lowest_index() {
        let roster = Arc::new(Roster::new(3, 3));
        let sleepers: Vec<_> = (0..3)
            .map(|index| {
                let roster = roster.clone();
                std::thread::spawn(move || {
                    roster.sleep(index, |_| false, None);
                })
            })
            .collect();
        until_asleep(&roster, 3);
        assert!(roster.wake_one_allowed(Some(2)));
        let mut sleepers = sleepers.into_iter();
        let (first, second, third) =
            (sleepers.next().unwrap(), sleepers.next().unwrap(), sleepers.next().unwrap());
        third.join().unwrap(); // worker 2 was the one woken
        until_asleep(&roster, 2);
        // A preferred worker that is not asleep: the lowest-index sleeper, as without one.
        assert!(roster.wake_one_allowed(Some(2)));
        first.join().unwrap();
        // One above the target is never preferred.
        roster.set_target(1, || 0);
        assert!(!roster.wake_one_allowed(Some(1)), "worker 1 is above the target");
        roster.wake_all();
        second.join().unwrap();
    }

    #[test]
    fn a_driver_that_sleeps_outside_the_hook_hands_the_reactor_to_an_allowed_sleeper() {
        use super::super::park_with::IdleDriver;
        let roster = Arc::new(Roster::new(2, 2));
        let driver =
            Arc::new(IdleDriver::new(Arc::new(|woken: &mut super::super::Woken<'_>| crate::block_on(woken))));
        let sleep = |index: usize| {
            let (roster, driver) = (roster.clone(), driver.clone());
            std::thread::spawn(move || {
                roster.sleep(index, |_| false, Some(&driver));
            })
        };
        // Worker 1 sleeps first, in the hook; worker 0 finds it taken and sleeps on its condvar.
        let in_hook = sleep(1);
        until_asleep(&roster, 1);
        while !driver.is_driving() {
            std::thread::yield_now();
        }
        let plain = sleep(0);
        until_asleep(&roster, 2);
        // The target falls below worker 1, which is then woken as a borrower: it leaves the
        // hook and, above the target, sleeps outside it.
        roster.set_target(1, || 0);
        assert!(roster.wake_borrower(2, |_| {}));
        in_hook.join().unwrap();
        let outside = sleep(1);
        // Worker 0, the allowed sleeper, is woken to take the hook over.
        plain.join().unwrap();
        roster.wake_all();
        outside.join().unwrap();
    }
}

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
        // A hook that returned early left its waker: no longer anyone's to wake. Dropped
        // outside the lock (a waker's drop is the runtime's code).
        let stale = lock(&self.state).waker.take();
        drop(stale);
        let mut state = lock(&self.state);
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
        let replaced = match &state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => None,
            _ => state.waker.replace(cx.waker().clone()),
        };
        drop(state);
        drop(replaced); // outside the lock, as in `park`
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
    /// costs no CPU there, so it never does.
    pub(crate) fn sleep(
        &self,
        index: usize,
        stay_awake: impl Fn(usize) -> bool,
        driver: Option<&IdleDriver>,
    ) {
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
                return;
            }
            // Someone claimed us already and will unpark us (or has): take that token now so
            // it does not cut a later sleep short.
        }
        match driver {
            Some(driver) if allowed => driver.park(index, &self.parkers[index]),
            Some(driver) => {
                self.hand_over_driving(driver);
                self.parkers[index].park();
            }
            None => self.parkers[index].park(),
        }
    }

    /// Called by a worker that starts a task, sleeps outside the park hook or exits, in a pool
    /// with one: if nobody is in the hook, wakes the lowest allowed sleeper, which usually goes
    /// back to sleep in it (`park_with.rs`, "Nobody left out").
    pub(crate) fn hand_over_driving(&self, driver: &IdleDriver) {
        if driver.wants_driver() {
            self.wake_one_allowed(|| None);
        }
    }

    /// After a target change, with a park hook: a worker in the hook that the target no longer
    /// allows is woken (it sleeps outside the hook and hands it over, as one above the target
    /// must cost no CPU); with nobody in the hook, a newly allowed sleeper is woken to take it
    /// (`park_with.rs`, "Nobody left out").
    pub(crate) fn after_target_change(&self, driver: &IdleDriver) {
        match driver.driver() {
            Some(index) if index >= self.target() => {
                let mut registry = lock(&self.registry);
                // Above the target it is not counted in `idle_allowed`: nothing to undo.
                if index < registry.asleep.len() && registry.asleep[index] {
                    registry.asleep[index] = false;
                    drop(registry);
                    self.parkers[index].unpark();
                }
            }
            Some(_) => {}
            None => self.hand_over_driving(driver),
        }
    }

    /// Step W (README): wakes the lowest-index allowed sleeper, if any. The caller has made
    /// its task visible and issued a `SeqCst` fence before calling.
    ///
    /// `preferred`: a worker to wake before the lowest-index one if it is an allowed sleeper:
    /// the calling thread when it is a worker of the pool asleep in the park hook, which
    /// queued the task while driving the hook's reactor and runs it next without a hand-off.
    pub(crate) fn wake_one_allowed(&self, preferred: impl FnOnce() -> Option<usize>) -> bool {
        if self.idle_allowed.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let preferred = preferred();
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

    /// Whether worker `index` is registered as sleeping and unclaimed (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_asleep(&self, index: usize) -> bool {
        lock(&self.registry).asleep[index]
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Roster;
    use crate::pool::park_with::IdleDriver;
    use crate::pool::Woken;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::thread::JoinHandle;

    /// Waits until `n` workers are registered asleep (a state, whatever the timing).
    fn until_asleep(roster: &Roster, n: usize) {
        while roster.asleep() != n {
            std::thread::yield_now();
        }
    }

    fn until(condition: impl Fn() -> bool) {
        while !condition() {
            std::thread::yield_now();
        }
    }

    /// A park hook that blocks on `cotenant::block_on`, as a runtime's would.
    fn driver() -> Arc<IdleDriver> {
        Arc::new(IdleDriver::new(Arc::new(|woken: &mut Woken<'_>| crate::block_on(woken))))
    }

    /// Worker `index` sleeping on its own thread (returns once woken).
    fn sleeper(roster: &Arc<Roster>, driver: Option<&Arc<IdleDriver>>, index: usize) -> JoinHandle<()> {
        let (roster, driver) = (roster.clone(), driver.cloned());
        std::thread::spawn(move || roster.sleep(index, |_| false, driver.as_deref()))
    }

    #[test]
    fn a_wake_up_prefers_the_given_allowed_sleeper_over_the_lowest_index() {
        let roster = Arc::new(Roster::new(3, 3));
        let sleepers: Vec<_> = (0..3).map(|index| sleeper(&roster, None, index)).collect();
        until_asleep(&roster, 3);
        assert!(roster.wake_one_allowed(|| Some(2)));
        assert!(!roster.is_asleep(2) && roster.is_asleep(0) && roster.is_asleep(1), "worker 2 was claimed");
        let [first, second, third]: [JoinHandle<()>; 3] = sleepers.try_into().unwrap();
        third.join().unwrap();
        // A preferred worker that is not asleep: the lowest-index sleeper, as without one.
        assert!(roster.wake_one_allowed(|| Some(2)));
        assert!(!roster.is_asleep(0) && roster.is_asleep(1), "worker 0 was claimed");
        first.join().unwrap();
        // One above the target is never preferred: worker 1 sleeps, worker 2 sleeps again, the
        // target falls to 2, and a wake-up preferring 2 claims 1.
        let again = sleeper(&roster, None, 2);
        until_asleep(&roster, 2);
        roster.set_target(2, || 0);
        assert!(roster.wake_one_allowed(|| Some(2)));
        assert!(!roster.is_asleep(1) && roster.is_asleep(2), "worker 1 was claimed, not 2");
        second.join().unwrap();
        roster.wake_all();
        again.join().unwrap();
    }

    /// Worker 1 in the hook, worker 0 asleep outside it (its entry found the hook taken).
    fn one_driving_one_plain(
        roster: &Arc<Roster>,
        driver: &Arc<IdleDriver>,
    ) -> (JoinHandle<()>, JoinHandle<()>) {
        let in_hook = sleeper(roster, Some(driver), 1);
        until(|| driver.driver() == Some(1));
        let plain = sleeper(roster, Some(driver), 0);
        until(|| driver.found_taken.load(Ordering::SeqCst) == 1);
        until_asleep(roster, 2);
        (in_hook, plain)
    }

    #[test]
    fn a_driver_that_sleeps_outside_the_hook_hands_the_reactor_to_an_allowed_sleeper() {
        let (roster, driver) = (Arc::new(Roster::new(2, 2)), driver());
        let (in_hook, plain) = one_driving_one_plain(&roster, &driver);
        // Worker 1 is woken as a borrower above a lowered target (bypassing the hook's own
        // wake-up by calling the roster directly): it leaves the hook and sleeps outside it.
        roster.set_target(1, || 0);
        assert!(roster.wake_borrower(2, |_| {}));
        in_hook.join().unwrap();
        let outside = sleeper(&roster, Some(&driver), 1);
        // Worker 0, the allowed sleeper, is woken to take the hook over.
        plain.join().unwrap();
        roster.wake_all();
        outside.join().unwrap();
    }

    #[test]
    fn a_lower_target_wakes_the_driver_it_no_longer_allows() {
        let (roster, driver) = (Arc::new(Roster::new(2, 2)), driver());
        let (in_hook, plain) = one_driving_one_plain(&roster, &driver);
        roster.set_target(1, || 0);
        roster.after_target_change(&driver);
        in_hook.join().unwrap(); // worker 1, above the target, left the hook
        assert!(roster.is_asleep(0), "nobody else was woken yet");
        // Back to sleep above the target: outside the hook, handing it to worker 0.
        let outside = sleeper(&roster, Some(&driver), 1);
        plain.join().unwrap();
        roster.wake_all();
        outside.join().unwrap();
    }

    #[test]
    fn a_raised_target_with_nobody_in_the_hook_wakes_a_newly_allowed_sleeper() {
        let (roster, driver) = (Arc::new(Roster::new(2, 1)), driver());
        // Worker 1 sleeps above the target (outside the hook); worker 0 is busy elsewhere.
        let above = sleeper(&roster, Some(&driver), 1);
        until_asleep(&roster, 1);
        assert!(driver.driver().is_none());
        roster.set_target(2, || 0); // nothing queued: T itself wakes nobody
        assert!(roster.is_asleep(1));
        roster.after_target_change(&driver);
        above.join().unwrap(); // woken to take the hook
    }
}

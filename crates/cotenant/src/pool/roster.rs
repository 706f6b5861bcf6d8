//! Who may run and who sleeps: the target, the registry of sleeping workers, and the wake-ups.
//! The protocol is written down in `pool/README.md`; this file implements its steps.
//!
//! Invariant (kept under the `registry` lock): `idle_allowed` equals the number of registered
//! sleepers whose index is below the target. Submitters read it without the lock, after a
//! `SeqCst` fence, to decide whether a wake-up is needed at all (the fast path of every submit).

use crate::sync::{fence, lock, wait, AtomicUsize, CachePadded, Condvar, Mutex, Ordering};

/// A one-token parker: `unpark` before `park` makes that `park` return at once, so a wake-up
/// that races with falling asleep is never lost (the same contract as `std::thread::park`).
#[derive(Default)]
struct Parker {
    token: Mutex<bool>,
    unparked: Condvar,
}

impl Parker {
    fn park(&self) {
        let mut token = lock(&self.token);
        while !*token {
            token = wait(&self.unparked, token);
        }
        *token = false;
    }

    fn unpark(&self) {
        *lock(&self.token) = true;
        self.unparked.notify_one();
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
    pub(crate) fn sleep(&self, index: usize, stay_awake: impl Fn(usize) -> bool) {
        {
            let mut registry = lock(&self.registry);
            registry.asleep[index] = true;
            if index < self.target.load(Ordering::SeqCst) {
                self.idle_allowed.fetch_add(1, Ordering::SeqCst);
            }
        }
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
        self.parkers[index].park();
    }

    /// Step W (README): wakes the lowest-index allowed sleeper, if any. The caller has made
    /// its task visible and issued a `SeqCst` fence before calling.
    pub(crate) fn wake_one_allowed(&self) -> bool {
        if self.idle_allowed.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let mut registry = lock(&self.registry);
        let target = self.target.load(Ordering::SeqCst);
        let Some(index) = (0..target).find(|&index| registry.asleep[index]) else {
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
    #[cfg(all(test, loom))]
    pub(crate) fn asleep(&self) -> usize {
        let registry = lock(&self.registry);
        registry.count_below(registry.asleep.len())
    }
}

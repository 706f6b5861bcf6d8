//! The only source of atomics, locks, condition variables and threads in the pool: `std` in normal
//! builds, [loom](https://docs.rs/loom) under `--cfg loom` so the same protocol code runs in the
//! loom models of `pool/tests/loom_protocol.rs` (tokio's `loom/mod.rs` pattern).

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

/// Locks `mutex`, ignoring poisoning: the pool never runs user code while holding one of its
/// locks, so a poisoned lock only means a panic elsewhere and the data is still consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits on `condvar`, ignoring poisoning (see [`lock`]).
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Bounded waiting with exponential back-off (seed 004: never spin without bound): checks
/// `ready`, and between checks busy-waits `2^k` `spin_loop` hints in round `k < spin_rounds`,
/// then yields the CPU for `yield_rounds` more rounds. Returns whether `ready` became true;
/// the caller sleeps otherwise. Under loom it only checks once: spinning would multiply the
/// interleavings to explore, and the protocols must be correct without it.
pub(crate) fn spin_then_yield(spin_rounds: u32, yield_rounds: u32, mut ready: impl FnMut() -> bool) -> bool {
    #[cfg(not(loom))]
    for round in 0..spin_rounds + yield_rounds {
        if ready() {
            return true;
        }
        if round < spin_rounds {
            for _ in 0..(1u32 << round) {
                std::hint::spin_loop();
            }
        } else {
            thread::yield_now();
        }
    }
    #[cfg(loom)]
    let _ = (spin_rounds, yield_rounds);
    ready()
}

/// Threads: spawn with a name, yield.
pub(crate) mod thread {
    #[cfg(not(loom))]
    pub(crate) use std::thread::{yield_now, JoinHandle};

    #[cfg(loom)]
    pub(crate) use loom::thread::{yield_now, JoinHandle};

    /// Spawns a named thread (loom threads are named too, which helps reading its traces).
    pub(crate) fn spawn_named<F>(name: String, f: F) -> std::io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        #[cfg(not(loom))]
        {
            std::thread::Builder::new().name(name).spawn(f)
        }
        #[cfg(loom)]
        {
            loom::thread::Builder::new().name(name).spawn(f)
        }
    }

    /// An id for the calling thread, to recognise a pool's own worker calling `shutdown`.
    pub(crate) fn current_id() -> std::thread::ThreadId {
        #[cfg(not(loom))]
        {
            std::thread::current().id()
        }
        #[cfg(loom)]
        {
            // loom runs every modelled thread on one OS thread; the pool's self-join guard is
            // not part of the models.
            std::thread::current().id()
        }
    }
}

/// Pads and aligns a value to its own cache line pair, so per-worker counters written by one
/// thread do not slow down the others (false sharing). 128 bytes covers the adjacent-line
/// prefetcher of x86 and the 128-byte lines of some ARM cores.
#[repr(align(128))]
#[derive(Debug, Default)]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

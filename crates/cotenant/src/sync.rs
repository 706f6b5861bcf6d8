//! The only source of atomics, locks, condition variables and threads in the pool: `std` in normal
//! builds, [loom](https://docs.rs/loom) under `--cfg loom` so the same protocol code runs in the
//! loom models of `pool/tests/loom_protocol.rs` (tokio's `loom/mod.rs` pattern).

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering},
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

/// Waits on `condvar` for at most `timeout`, ignoring poisoning (see [`lock`]). Under loom it
/// never times out (loom does not model time), which makes a model fail on a lost wake-up.
pub(crate) fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
) -> MutexGuard<'a, T> {
    match condvar.wait_timeout(guard, timeout) {
        Ok((guard, _)) => guard,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

/// Threads: spawn with a name, yield.
pub(crate) mod thread {
    #[cfg(not(loom))]
    pub(crate) use std::thread::{yield_now, JoinHandle};

    #[cfg(loom)]
    pub(crate) use loom::thread::{yield_now, JoinHandle};

    /// Spawns a named thread (loom threads are named too, which helps reading its traces).
    // Outside loom the pool spawns through `worker::spawn_thread` (it sets `Builder::stack_size`).
    #[cfg_attr(not(loom), allow(dead_code))]
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

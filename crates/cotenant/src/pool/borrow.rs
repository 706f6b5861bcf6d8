//! The pool's side of borrowing (`policy/borrow_limit.rs` says when and why): the limit the
//! controller sets each period, and the rate-limited "is a CPU idle now?" check that a submit
//! and a borrowed worker make by reading `/proc/loadavg`.
//!
//! Cost: one `pread` of `/proc/loadavg` (a few microseconds) at most once per
//! [`SUBMIT_CHECK_INTERVAL`] for the whole pool on the submit path, and at most once per
//! [`WORKER_CHECK_INTERVAL`] per borrowed worker; none at all while every allowed worker has
//! nothing to do, or while borrowing is off (fixed and `share` policies, a cpuset, a failed
//! sample).

use std::time::Duration;

use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// The shortest interval between two checks on the submit path: a burst of submits pays
/// for one read, not one each.
#[cfg_attr(loom, allow(dead_code))]
const SUBMIT_CHECK_INTERVAL: Duration = Duration::from_micros(50);
/// How often a borrowed worker checks whether someone else waits for a CPU: it holds a CPU
/// somebody wants for at most this long plus the task it is running.
pub(crate) const WORKER_CHECK_INTERVAL: Duration = Duration::from_micros(200);

pub(crate) struct Borrow {
    /// Workers that may run counting borrowed ones (0: borrowing off). Set by the controller.
    limit: AtomicUsize,
    /// The host's online CPUs, which `/proc/loadavg`'s running count is over.
    online_cpus: AtomicUsize,
    /// When the submit path last read `/proc/loadavg` (nanoseconds since the pool's epoch).
    #[cfg_attr(loom, allow(dead_code))]
    last_submit_check_ns: AtomicU64,
    #[cfg(not(loom))]
    loadavg: Option<std::fs::File>,
}

impl Borrow {
    /// Borrowing starts off; `dynamic` pools open `/proc/loadavg` now so that a check never
    /// pays for an `open`.
    pub(crate) fn new(dynamic: bool) -> Self {
        #[cfg(loom)]
        let _ = dynamic;
        Borrow {
            limit: AtomicUsize::new(0),
            online_cpus: AtomicUsize::new(0),
            last_submit_check_ns: AtomicU64::new(0),
            #[cfg(not(loom))]
            loadavg: if dynamic { std::fs::File::open("/proc/loadavg").ok() } else { None },
        }
    }

    /// The controller's decision for the coming period (`limit` 0 turns borrowing off).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn set(&self, limit: usize, online_cpus: u32) {
        self.online_cpus.store(online_cpus as usize, Ordering::Relaxed);
        self.limit.store(limit, Ordering::Relaxed);
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// The submit path's check: false without reading when another submit checked less than
    /// [`SUBMIT_CHECK_INTERVAL`] ago.
    pub(crate) fn submit_may_borrow(&self, now_ns: u64, submitter_stays: bool) -> bool {
        // Under loom the clock-timed throttle is left out: a model must take the same path on
        // every replay of a schedule.
        #[cfg(not(loom))]
        {
            let last = self.last_submit_check_ns.load(Ordering::Relaxed);
            if last != 0 && now_ns.saturating_sub(last) < SUBMIT_CHECK_INTERVAL.as_nanos() as u64 {
                return false;
            }
            if self
                .last_submit_check_ns
                .compare_exchange(last, now_ns.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                return false; // another submit is checking right now
            }
        }
        #[cfg(loom)]
        let _ = now_ns;
        self.cpu_idle_now(submitter_stays)
    }

    /// Whether a CPU is free for one more worker now (see `policy::borrow_limit::cpu_idle_now`);
    /// false when `/proc/loadavg` cannot be read.
    pub(crate) fn cpu_idle_now(&self, reader_stays: bool) -> bool {
        #[cfg(not(loom))]
        {
            use std::os::unix::fs::FileExt;
            let Some(file) = &self.loadavg else { return false };
            let mut buf = [0u8; 256];
            let Ok(len) = file.read_at(&mut buf, 0) else { return false };
            let Ok(text) = std::str::from_utf8(&buf[..len]) else { return false };
            let Ok(runnable) = crate::procfs::loadavg::parse_running(text) else { return false };
            let cpus = u32::try_from(self.online_cpus.load(Ordering::Relaxed)).unwrap_or(u32::MAX);
            crate::policy::borrow_limit::cpu_idle_now(runnable, cpus, reader_stays)
        }
        // Under loom a CPU is always free: whether a model borrows is then decided by the
        // limit it sets (0 unless it calls `set`), the same on every replay of a schedule.
        #[cfg(loom)]
        {
            let _ = reader_stays;
            true
        }
    }
}

//! The fallback of `crate::sys`, for systems other than Linux (and for Linux under
//! `--cfg cotenant_force_fallback`): the standard library, and the POSIX CPU clocks on the
//! systems that have them. What only Linux offers (thread affinity masks, `SCHED_IDLE`, a
//! thread's own nice value, the CPU a thread runs on) fails with an
//! [`io::ErrorKind::Unsupported`] error naming what is missing, or reads as unavailable.

use std::fs::File;
use std::io;

/// The fallback: the CPU count is `std::thread::available_parallelism`, there is no host
/// sampler and no host CPU tokens (see the crate documentation, "Platforms").
pub(crate) const FALLBACK: bool = true;

/// One word of a CPU affinity mask (never handed to a system call here: masks cannot be read
/// or set).
pub(crate) type MaskWord = u64;

/// The error of a call only Linux offers: `what` needs Linux, and this build does without.
fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} needs Linux; this build of cotenant runs its fallback for other systems"),
    )
}

/// No affinity masks here: always an `Unsupported` error.
pub(crate) fn get_thread_affinity(_words: &mut [MaskWord]) -> io::Result<usize> {
    Err(unsupported("reading a thread's CPU affinity mask (sched_getaffinity)"))
}

/// No affinity masks here: always an `Unsupported` error.
pub(crate) fn set_thread_affinity(_words: &[MaskWord]) -> io::Result<()> {
    Err(unsupported("setting a thread's CPU affinity mask (sched_setaffinity)"))
}

/// No read of a mask ever fails for its size here (none is read at all).
pub(crate) fn mask_too_small(_error: &io::Error) -> bool {
    false
}

// The CPU clocks: POSIX's `CLOCK_PROCESS_CPUTIME_ID` and `CLOCK_THREAD_CPUTIME_ID` where the
// system has them (the list is of the systems whose `libc` bindings define both; Linux is on it
// for the forced fallback), so that the CPU budget and the elastic pool's task meter work
// there too; elsewhere (Windows, ...) no clock, and every reading is `None`.
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd",
    target_os = "dragonfly",
    target_os = "openbsd",
    target_os = "illumos",
    target_os = "solaris"
))]
mod clocks {
    /// A clock `clock_gettime` reads.
    pub(crate) type ClockId = libc::clockid_t;

    /// The CPU time of the whole process.
    pub(crate) const PROCESS_CPU_CLOCK: ClockId = libc::CLOCK_PROCESS_CPUTIME_ID;

    /// The CPU time of the calling thread.
    #[allow(dead_code)] // for the pool's task meters (`pool/budget.rs`, `pool/elastic.rs`)
    pub(crate) const THREAD_CPU_CLOCK: ClockId = libc::CLOCK_THREAD_CPUTIME_ID;

    /// Reads clock `clock` in nanoseconds (`None` if the call fails).
    pub(crate) fn clock_ns(clock: ClockId) -> Option<u64> {
        // SAFETY: `timespec` is plain data, for which all zeroes is a valid value (zeroed
        // rather than a literal: on some systems it has private padding fields).
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: `ts` is a valid out-pointer for the duration of the call.
        if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
            return None;
        }
        Some((ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64))
    }
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd",
    target_os = "dragonfly",
    target_os = "openbsd",
    target_os = "illumos",
    target_os = "solaris"
)))]
mod clocks {
    /// A clock (none can be read on this system).
    pub(crate) type ClockId = i32;

    /// The CPU time of the whole process: not readable here.
    pub(crate) const PROCESS_CPU_CLOCK: ClockId = 0;

    /// The CPU time of the calling thread: not readable here.
    #[allow(dead_code)] // for the pool's task meters (`pool/budget.rs`, `pool/elastic.rs`)
    pub(crate) const THREAD_CPU_CLOCK: ClockId = 1;

    /// No CPU clock on this system: always `None`.
    pub(crate) fn clock_ns(_clock: ClockId) -> Option<u64> {
        None
    }
}

pub(crate) use clocks::*;

/// The clock tick is Linux's unit of `/proc/stat`, which is not read here: `None` (callers
/// use their default, 10 ms).
#[allow(dead_code)] // only the Linux sampler and the pool's default period ask
pub(crate) fn clock_ticks_per_second() -> Option<u64> {
    None
}

/// Reads into `buf` from `offset` of `file` without relying on its cursor: `pread` on Unix,
/// `seek_read` on Windows (each one call that names the offset, so a file shared between
/// threads is read where each asks); elsewhere a seek and a read.
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
    #[cfg(not(any(unix, windows)))]
    {
        use std::io::{Read as _, Seek as _};
        let mut file = file;
        file.seek(io::SeekFrom::Start(offset))?;
        file.read(buf)
    }
}

/// No cgroup can vanish under a reader here: always false (a failed read is an error).
pub(crate) fn file_vanished(_error: &io::Error) -> bool {
    false
}

/// The CPU a thread runs on is not known here: always `None`.
#[allow(dead_code)] // for the pool's CPU leases (`pool/host_tokens.rs`)
pub(crate) fn current_cpu() -> Option<u32> {
    None
}

/// No `SCHED_IDLE` here: always an `Unsupported` error.
#[allow(dead_code)] // for the pool's background workers (`pool/placement.rs`)
pub(crate) fn set_sched_idle() -> io::Result<()> {
    Err(unsupported("the SCHED_IDLE scheduling class"))
}

/// A thread's own nice value cannot be set here (a nice value belongs to the whole process on
/// most systems): always an `Unsupported` error.
#[allow(dead_code)] // for the pool's background workers (`pool/placement.rs`)
pub(crate) fn set_current_thread_nice(_nice: i32) -> io::Result<()> {
    Err(unsupported("setting one thread's own nice value"))
}

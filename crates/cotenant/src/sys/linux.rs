//! The Linux implementation of `crate::sys`: the raw system calls, through `libc`.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Not the fallback: the CPU count, the host sampler and the host CPU tokens read the kernel.
pub(crate) const FALLBACK: bool = false;

/// One word of a CPU affinity mask, as the kernel lays it out (`unsigned long`).
pub(crate) type MaskWord = libc::c_ulong;

/// The bytes of `words`, as the affinity system calls take their size.
fn mask_bytes(words: &[MaskWord]) -> usize {
    std::mem::size_of_val(words)
}

/// The calling thread's affinity mask into `words` (`sched_getaffinity(2)`, the raw system
/// call: glibc's wrapper is typed for a fixed `cpu_set_t`). Returns the size of the kernel's
/// mask in bytes; the words after it are left as they were. Fails with `EINVAL`
/// ([`mask_too_small`]) when `words` is smaller than the kernel's mask.
pub(crate) fn get_thread_affinity(words: &mut [MaskWord]) -> io::Result<usize> {
    // SAFETY: pid 0 is the calling thread; the kernel writes at most `mask_bytes(words)` bytes
    // into `words`, which holds that many.
    let written =
        unsafe { libc::syscall(libc::SYS_sched_getaffinity, 0, mask_bytes(words), words.as_mut_ptr()) };
    if written < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(written as usize)
}

/// Makes `words` the calling thread's affinity mask (`sched_setaffinity(2)`, the raw system
/// call). Allocates nothing, so it may run in a child between `fork` and `exec`.
pub(crate) fn set_thread_affinity(words: &[MaskWord]) -> io::Result<()> {
    // SAFETY: pid 0 is the calling thread; the kernel reads at most `mask_bytes(words)` bytes
    // of `words`, which holds that many.
    let result = unsafe { libc::syscall(libc::SYS_sched_setaffinity, 0, mask_bytes(words), words.as_ptr()) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `error` of [`get_thread_affinity`] means the buffer was smaller than the kernel's
/// mask (`EINVAL`), so that a larger one may succeed.
pub(crate) fn mask_too_small(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::EINVAL)
}

/// A clock `clock_gettime(2)` reads.
pub(crate) type ClockId = libc::clockid_t;

/// The CPU time of the whole process.
pub(crate) const PROCESS_CPU_CLOCK: ClockId = libc::CLOCK_PROCESS_CPUTIME_ID;

/// The CPU time of the calling thread.
#[allow(dead_code)] // for the pool's task meters (`pool/budget.rs`, `pool/elastic.rs`) and tests
pub(crate) const THREAD_CPU_CLOCK: ClockId = libc::CLOCK_THREAD_CPUTIME_ID;

/// Reads clock `clock` in nanoseconds (`None` if the call fails, e.g. a thread clock of a
/// thread that has exited).
pub(crate) fn clock_ns(clock: ClockId) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some((ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64))
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, the unit of `/proc/stat`), `None` if the
/// system does not say.
pub(crate) fn clock_ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&ticks| ticks > 0)
}

/// Reads into `buf` from `offset` of `file` without moving its cursor (`pread(2)`): one
/// system call, and safe to share the file between threads.
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    file.read_at(buf, offset)
}

/// Whether `error`, from reading a file opened earlier, means the file is gone: `ENODEV`, a
/// cgroup removed after its file was opened.
pub(crate) fn file_vanished(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENODEV)
}

/// The CPU the calling thread runs on (`sched_getcpu`, answered without entering the kernel
/// where the vDSO has it), `None` if the kernel does not say.
#[allow(dead_code)] // for the pool's CPU leases (`pool/host_tokens.rs`)
pub(crate) fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu has no preconditions (-1 on failure).
    u32::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// Moves the calling thread to `SCHED_IDLE`: it runs only on CPUs nothing else wants.
#[allow(dead_code)] // for the pool's background workers (`pool/placement.rs`)
pub(crate) fn set_sched_idle() -> io::Result<()> {
    // SAFETY: sched_param is plain data (priority 0, as SCHED_IDLE requires); pid 0 is the
    // calling thread.
    let idle = unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param)
    };
    if idle != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the calling thread's own nice value (the other threads of the process keep theirs).
#[allow(dead_code)] // for the pool's background workers (`pool/placement.rs`)
pub(crate) fn set_current_thread_nice(nice: i32) -> io::Result<()> {
    // On Linux, PRIO_PROCESS with a thread id sets that thread's nice value alone.
    // SAFETY: gettid has no preconditions; setpriority only reads its arguments.
    let done = unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice)
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

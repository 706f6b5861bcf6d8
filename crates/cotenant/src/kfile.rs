//! Reading kernel-generated files (procfs, sysfs, cgroupfs) through a handle kept open. The
//! kernel regenerates their text on every read from offset 0, so a re-read costs one `pread`
//! rather than open + read + close (about 10x cheaper, RESULTS.md). A thread's own schedstat
//! that fails is opened again a second later, not given up on (`ThreadSchedstat`).
//!
//! The positional read is `crate::sys::read_at` (`pread` on Unix, `seek_read` on Windows), so
//! that a copy of a Linux system's files (`cpus::Probe::with_root`) can be read on any system.
//! Outside Linux there is no schedstat: `ThreadSchedstat::for_current_thread` says so once, as
//! a failure its callers count and log, and makes no system call.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The largest text accepted: kernel files are far smaller; anything bigger is not one.
const MAX_BYTES: usize = 16 << 20;

/// Reads the whole text of `file` from offset 0 into `buf` (cleared first). Reads 4 KiB at a
/// time; a short read is the end of the file, so a small file costs a single `pread`.
pub(crate) fn read_at_zero(file: &File, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        match crate::sys::read_at(file, &mut chunk, buf.len() as u64) {
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if n < chunk.len() {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if buf.len() > MAX_BYTES {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "larger than 16 MiB, not a kernel file"));
        }
    }
}

/// How long after a failed reading a thread's schedstat is opened again: often enough that a
/// passing failure costs seconds of readings, not the thread's life; rarely enough that a
/// kernel without schedstat costs one failed `open` per thread per second.
const SCHEDSTAT_RETRY: Duration = Duration::from_secs(1);

/// The calling thread's `/proc/thread-self/schedstat`, kept open: its run-queue wait for one
/// `pread` per reading. Used by the thread that opened it only (the path names the reader).
/// A reading that fails closes the file, which is opened again at the first reading after
/// `SCHEDSTAT_RETRY`; each stretch of failures is reported once (`take_failure`) for the
/// caller to count and log. (Its users, the elastic meter and the host tokens, are not built
/// under loom.)
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct ThreadSchedstat {
    /// `None`: the system has no such file (outside Linux), nothing is ever opened.
    path: Option<PathBuf>,
    file: Option<File>,
    buf: Vec<u8>,
    /// While the file is closed after a failure: when to open it again.
    retry_at: Option<Instant>,
    retry_after: Duration,
    /// The last reading failed: a failure now continues the stretch, and is not reported again.
    failing: bool,
    /// Why the current stretch of failures began, until the caller takes it.
    new_failure: Option<String>,
}

#[cfg_attr(loom, allow(dead_code))]
impl ThreadSchedstat {
    /// The calling thread's file, opened at the first reading (`None` readings when the kernel
    /// lacks `CONFIG_SCHED_INFO`, reported as a failure). Outside Linux (`crate::sys`'s
    /// fallback) there is none: every reading is `None`, and that is reported once, as the
    /// failure of the first stretch, without a system call.
    pub(crate) fn for_current_thread() -> Self {
        if crate::sys::FALLBACK {
            let mut schedstat = ThreadSchedstat::new(None);
            schedstat.failed(NO_SCHEDSTAT.to_owned());
            return schedstat;
        }
        ThreadSchedstat::at("/proc/thread-self/schedstat")
    }

    fn at(path: impl Into<PathBuf>) -> Self {
        ThreadSchedstat::new(Some(path.into()))
    }

    fn new(path: Option<PathBuf>) -> Self {
        ThreadSchedstat {
            path,
            file: None,
            buf: Vec::with_capacity(64),
            retry_at: None,
            retry_after: SCHEDSTAT_RETRY,
            failing: false,
            new_failure: None,
        }
    }

    /// Nanoseconds the thread has waited on a run queue so far, or `None` when its file cannot
    /// be opened or read now (no system call until the retry is due).
    pub(crate) fn run_delay_ns(&mut self) -> Option<u64> {
        if self.file.is_none() {
            if self.retry_at.is_some_and(|at| Instant::now() < at) {
                return None;
            }
            let opened = match &self.path {
                // No such file on this system: reported once by `for_current_thread`.
                None => return None,
                Some(path) => File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display())),
            };
            match opened {
                Ok(file) => self.file = Some(file),
                Err(why) => {
                    self.failed(why);
                    return None;
                }
            }
        }
        let (Some(file), Some(path)) = (self.file.as_ref(), self.path.as_deref()) else { return None };
        match read_run_delay(file, path, &mut self.buf) {
            Ok(delay) => {
                self.failing = false;
                Some(delay)
            }
            Err(why) => {
                self.file = None;
                self.failed(why);
                None
            }
        }
    }

    /// Why readings began to fail, once per stretch of failures (`None`: no new stretch since
    /// the last call): for the caller's count and log.
    pub(crate) fn take_failure(&mut self) -> Option<String> {
        self.new_failure.take()
    }

    fn failed(&mut self, why: String) {
        self.retry_at = Some(Instant::now() + self.retry_after);
        if !std::mem::replace(&mut self.failing, true) {
            self.new_failure = Some(why);
        }
    }
}

/// Why a thread's run-queue wait is never read outside Linux.
#[cfg_attr(loom, allow(dead_code))]
const NO_SCHEDSTAT: &str = "a thread's run-queue wait needs Linux (/proc/thread-self/schedstat); \
                            this build of cotenant runs its fallback for other systems";

/// The run-queue wait in the schedstat file `file` (at `path`), or why it cannot be had.
fn read_run_delay(file: &File, path: &Path, buf: &mut Vec<u8>) -> Result<u64, String> {
    read_at_zero(file, buf).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = std::str::from_utf8(buf).map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
    crate::procfs::schedstat::parse_task(text)
        .map(|stat| stat.run_delay_ns)
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const OWN: &str = "/proc/thread-self/schedstat";

    #[test]
    fn an_unreadable_schedstat_is_reported_once_and_read_again_later() {
        if !Path::new(OWN).exists() {
            eprintln!("skipped: this kernel keeps no per-thread schedstat (CONFIG_SCHED_INFO)");
            return;
        }
        // A file that cannot be opened: no reading, and the failure is reported.
        let mut schedstat = ThreadSchedstat::at("/proc/thread-self/no-such-file");
        schedstat.retry_after = Duration::ZERO; // every reading tries again
        assert_eq!(schedstat.run_delay_ns(), None);
        let why = schedstat.take_failure().expect("the failure is reported");
        assert!(why.contains("/proc/thread-self/no-such-file"), "{why}");
        assert_eq!(schedstat.run_delay_ns(), None, "tried again, failed again");
        assert_eq!(schedstat.take_failure(), None, "one stretch of failures is reported once");
        // Readable again: read again, not turned off for good.
        schedstat.path = Some(PathBuf::from(OWN));
        assert!(schedstat.run_delay_ns().is_some(), "read again after the failures");
        assert_eq!(schedstat.take_failure(), None);
        // A read that fails on the open file (text that is not a schedstat): a new stretch,
        // reported again; the file is opened afresh at the next reading.
        schedstat.file = Some(File::open("/proc/thread-self/stat").unwrap());
        assert_eq!(schedstat.run_delay_ns(), None);
        let why = schedstat.take_failure().expect("a new stretch is reported");
        assert!(why.contains(OWN), "{why}");
        assert!(schedstat.run_delay_ns().is_some(), "opened again");
    }

    #[test]
    fn after_a_failure_no_system_call_is_made_until_the_retry_is_due() {
        let mut schedstat = ThreadSchedstat::at("/proc/thread-self/no-such-file");
        schedstat.retry_after = Duration::from_secs(3600);
        assert_eq!(schedstat.run_delay_ns(), None);
        assert!(schedstat.take_failure().is_some());
        // Even a path that would open now is not tried before the retry.
        schedstat.path = Some(PathBuf::from("/proc/self/stat"));
        assert_eq!(schedstat.run_delay_ns(), None);
        assert!(schedstat.file.is_none(), "not opened before the retry is due");
        assert_eq!(schedstat.take_failure(), None);
    }

    /// Outside Linux (`crate::sys`'s fallback): no reading, the reason reported once, and no
    /// file ever opened.
    #[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
    #[test]
    fn without_linux_the_run_queue_wait_is_unavailable_and_said_once() {
        let mut schedstat = ThreadSchedstat::for_current_thread();
        assert_eq!(schedstat.run_delay_ns(), None);
        let why = schedstat.take_failure().expect("the reason is reported");
        assert!(why.contains("needs Linux"), "{why}");
        schedstat.retry_at = None; // due again: still nothing to open
        assert_eq!(schedstat.run_delay_ns(), None);
        assert!(schedstat.file.is_none(), "nothing was opened");
        assert_eq!(schedstat.take_failure(), None, "said once");
    }
}

//! Reading kernel-generated files (procfs, sysfs, cgroupfs) through a handle kept open. The
//! kernel regenerates their text on every read from offset 0, so a re-read costs one `pread`
//! rather than open + read + close (about 10x cheaper, RESULTS.md).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The largest text accepted: kernel files are far smaller; anything bigger is not one.
const MAX_BYTES: usize = 16 << 20;

/// Reads the whole text of `file` from offset 0 into `buf` (cleared first). Reads 4 KiB at a
/// time; a short read is the end of the file, so a small file costs a single `pread`.
pub(crate) fn read_at_zero(file: &File, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        match file.read_at(&mut chunk, buf.len() as u64) {
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

/// The calling thread's `/proc/thread-self/schedstat`, kept open: its run-queue wait for one
/// `pread` per reading. Used by the thread that opened it only (the path names the reader).
/// (Its users, the elastic meter and the host tokens, are not built under loom.)
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct ThreadSchedstat {
    file: Option<File>,
    buf: Vec<u8>,
}

#[cfg_attr(loom, allow(dead_code))]
impl ThreadSchedstat {
    /// Opens the calling thread's file (none when the kernel lacks `CONFIG_SCHED_INFO` or the
    /// open fails: every reading is then `None`).
    pub(crate) fn for_current_thread() -> Self {
        ThreadSchedstat { file: File::open("/proc/thread-self/schedstat").ok(), buf: Vec::with_capacity(64) }
    }

    /// Nanoseconds the thread has waited on a run queue so far, or `None` when its file could
    /// not be opened or read; unreadable once, unreadable for good (no more reads are paid for).
    pub(crate) fn run_delay_ns(&mut self) -> Option<u64> {
        let file = self.file.as_ref()?;
        let delay = read_at_zero(file, &mut self.buf)
            .ok()
            .and_then(|()| std::str::from_utf8(&self.buf).ok())
            .and_then(|text| crate::procfs::schedstat::parse_task(text).ok())
            .map(|stat| stat.run_delay_ns);
        if delay.is_none() {
            self.file = None;
        }
        delay
    }
}

//! The hand-over's wake-up channel: a pipe that carries one byte per token freed while somebody
//! waited, so that a waiting worker is woken the way a pipe wakes its reader.
//!
//! Why a pipe and not the semaphore's own wait: a pipe wakes its reader *synchronously* (the
//! kernel is told the waker is about to sleep), so the woken waiter is placed on the CPU the
//! releasing worker is leaving; a semaphore's wake-up is not, and on a busy host the new holder
//! often lands in the run queue of another busy CPU while the freed one idles until its next
//! balance: 10-20 % of capacity lost when tokens are contended (`RESULTS.md`, "Where the
//! capacity goes"). The bytes are only hints: the tokens themselves stay in the semaphore, which
//! gives back what a dead process held (`SEM_UNDO`); a byte without a free token wakes a waiter
//! that finds none and waits again, and a free token without a byte (one a dead holder gave
//! back) is found at a waiter's next check, or when its limit ends.
//!
//! Each wait registers the pipe in its own epoll instance with `EPOLLEXCLUSIVE`, so that one
//! byte wakes one waiter, in the order they began to wait, and still with a timeout (a blocking
//! `read` would give both, but no timeout). epoll passes the pipe's synchronous wake-up on.
//!
//! Processes share the channel through a named pipe (FIFO): `cotenant-tokens-<uid>-<key>` in
//! `/dev/shm`, or in `/tmp` on a host without it (a fixed place, not `$TMPDIR`: every process of
//! the set must find the same pipe), mode 0600, refused unless it is a FIFO owned by this user.
//! A kernel without `EPOLLEXCLUSIVE` (before Linux 4.5) is found when the channel is opened, and
//! the set then waits on the semaphore.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The two ends of the channel (one descriptor for a FIFO opened for reading and writing).
#[derive(Debug)]
pub(super) struct WakeUps {
    read: OwnedFd,
    write: Option<OwnedFd>,
}

/// Where the named channel of the set with System V key `key` lives.
pub(super) fn fifo_path(uid: u32, key: i32) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { shm } else { Path::new("/tmp") };
    dir.join(format!("cotenant-tokens-{uid}-{:08x}", key as u32))
}

fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

impl WakeUps {
    /// A channel only this process can use (an anonymous pipe), for a private set.
    pub(super) fn anonymous() -> io::Result<WakeUps> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded: both descriptors are open and ours alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let channel = WakeUps { read, write: Some(write) };
        channel.waiter()?;
        Ok(channel)
    }

    /// Opens the named channel at `path`, creating it if nobody has. Refuses anything but a
    /// FIFO owned by this user with no access for others (someone else's file at the
    /// predictable path must not receive or fake our wake-ups).
    pub(super) fn named(path: &Path) -> io::Result<WakeUps> {
        let c_path = cstring(path)?;
        // SAFETY: a valid C string.
        let created = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } == 0;
        if !created {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EEXIST) {
                return Err(err);
            }
        }
        let opened = Self::open_checked(&c_path);
        if opened.is_err() && created {
            // Ours and unusable (a umask that took the owner's access away, say): not left behind.
            let _ = Self::remove(path);
        }
        opened
    }

    fn open_checked(c_path: &CString) -> io::Result<WakeUps> {
        // Read and write: never blocks on a FIFO (Linux), and the pipe exists as long as one
        // process has it open.
        let flags = libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        // SAFETY: a valid C string.
        let fd = unsafe { libc::open(c_path.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open succeeded: the descriptor is ours.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let meta = file.metadata()?;
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        if !meta.file_type().is_fifo() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "not a FIFO of this user with mode 0600; remove it",
            ));
        }
        let channel = WakeUps { read: file.into(), write: None };
        channel.waiter()?;
        Ok(channel)
    }

    /// Removes the named channel at `path` (nothing to do if it is gone).
    pub(super) fn remove(path: &Path) -> io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn write_fd(&self) -> &OwnedFd {
        self.write.as_ref().unwrap_or(&self.read)
    }

    /// Wakes one waiter (the first that began to wait); whether a wake-up was written. A full
    /// pipe already holds more wake-ups than anyone waits for, so one that does not fit is
    /// dropped.
    pub(super) fn wake_one(&self) -> bool {
        let byte = 1u8;
        // SAFETY: writes one byte from a valid buffer.
        unsafe { libc::write(self.write_fd().as_raw_fd(), (&byte as *const u8).cast(), 1) == 1 }
    }

    /// Consumes one wake-up if one is there; whether it was.
    pub(super) fn take_one(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: reads at most one byte into a valid buffer; the descriptor is non-blocking.
        unsafe { libc::read(self.read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) == 1 }
    }

    /// Consumes every wake-up left in the channel (by a set that was removed and created again).
    pub(super) fn drain(&self) {
        while self.take_one() {}
    }

    /// Starts one wait: the calling thread's own registration, exclusive.
    pub(super) fn waiter(&self) -> io::Result<Waiter> {
        #[cfg(test)]
        REGISTRATIONS.with(|r| r.set(r.get() + 1));
        // SAFETY: plain system call.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: epoll_create1 succeeded: the descriptor is ours.
        let epoll = unsafe { OwnedFd::from_raw_fd(epfd) };
        let mut event = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32, u64: 0 };
        // SAFETY: both descriptors are open; `event` is valid for the call.
        if unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, self.read.as_raw_fd(), &mut event) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Waiter { epoll })
    }
}

#[cfg(test)]
thread_local! {
    /// Waiters this thread registered on a pipe (tests: one per wait, whatever its checks).
    pub(super) static REGISTRATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One thread's wait for a wake-up (closing it ends the registration).
pub(super) struct Waiter {
    epoll: OwnedFd,
}

impl Waiter {
    /// Sleeps until a wake-up is there or `timeout` passes (rounded up to a millisecond);
    /// `Ok(true)` if one is there. A signal ends the sleep early, as a timeout does.
    pub(super) fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let millis = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: room for one event; the descriptor is open.
        let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), &mut event, 1, millis) };
        if n < 0 {
            let err = io::Error::last_os_error();
            return if err.raw_os_error() == Some(libc::EINTR) { Ok(false) } else { Err(err) };
        }
        Ok(n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_up_is_seen_once_and_a_drained_channel_is_quiet() {
        let channel = WakeUps::anonymous().unwrap();
        let waiter = channel.waiter().unwrap();
        assert!(!waiter.wait(Duration::ZERO).unwrap());
        assert!(channel.wake_one() && channel.wake_one());
        assert!(waiter.wait(Duration::ZERO).unwrap());
        assert!(channel.take_one());
        channel.drain();
        assert!(!channel.take_one());
        assert!(!waiter.wait(Duration::ZERO).unwrap());
    }

    #[test]
    fn a_named_channel_is_shared_and_someone_elses_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("cotenant-wakeup-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fifo");
        let (first, second) = (WakeUps::named(&path).unwrap(), WakeUps::named(&path).unwrap());
        first.wake_one();
        assert!(second.take_one(), "a wake-up written by one opener is read by the other");
        WakeUps::remove(&path).unwrap();
        WakeUps::remove(&path).unwrap();
        // A regular file at the path is not our channel.
        let file = dir.join("file");
        std::fs::write(&file, b"").unwrap();
        let e = WakeUps::named(&file).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        // A FIFO others may write to is not ours either (they could fake wake-ups).
        let open_fifo = dir.join("open-fifo");
        let c_path = cstring(&open_fifo).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        std::fs::set_permissions(&open_fifo, std::os::unix::fs::PermissionsExt::from_mode(0o622)).unwrap();
        let e = WakeUps::named(&open_fifo).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

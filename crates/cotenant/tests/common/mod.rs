//! Helpers shared by the integration tests that fork: a child that is always reaped, and a
//! wait for a condition with a generous deadline instead of a fixed sleep; a guard that removes
//! a named token set.
#![allow(dead_code)] // each test binary uses its own part

/// A forked child, killed and reaped when dropped (also when an assertion fails first).
pub struct Child(pub libc::pid_t);

impl Child {
    /// Runs `op` in a forked child that then sleeps until killed. The child makes only system
    /// calls (no allocation, no unwinding: it exits at once if `op` fails), as a child of a
    /// multi-threaded process must.
    pub fn run(op: impl FnOnce() -> bool) -> Child {
        // SAFETY: the child runs `op` (system calls on inherited descriptors) and never returns.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            if !op() {
                // SAFETY: ends the child without running the parent's code.
                unsafe { libc::_exit(1) };
            }
            loop {
                // SAFETY: plain system call.
                unsafe { libc::pause() };
            }
        }
        Child(pid)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: our own child.
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
            libc::waitpid(self.0, std::ptr::null_mut(), 0);
        }
    }
}

/// Polls `done` until it holds (no timing assumption); fails after a generous minute.
pub fn until(what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "never happened: {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Removes this user's named token set when dropped, even if an assertion fails first.
pub struct RemoveNamed(pub String);

impl Drop for RemoveNamed {
    fn drop(&mut self) {
        let _ = cotenant::tokens::HostTokens::remove_named(&self.0);
    }
}

/// Whether the kernel lists a System V semaphore set on `key` (`/proc/sysvipc/sem`).
pub fn sysv_key_exists(key: i32) -> bool {
    std::fs::read_to_string("/proc/sysvipc/sem")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().next().and_then(|k| k.parse::<i64>().ok()) == Some(i64::from(key)))
}

//! Helpers shared by the integration tests that fork: a child that is always reaped, and a
//! wait for a condition with a generous deadline instead of a fixed sleep; a guard that removes
//! a named token set; whether a set may lack CPU leases; a thread's scheduler state.
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

/// The semaphores of a set before its CPU leases (`NSEMS` in `tokens/mod.rs`, private there).
const PROTOCOL_SEMAPHORES: u64 = 6;

/// Whether `tokens`, a set the calling test created, has CPU leases. A new set gets one per
/// configured CPU unless the kernel's semaphore limits leave no room (`/proc/sys/kernel/sem`:
/// SEMMSL per set, SEMMNS in all): then this prints why the caller skips and returns `false`.
/// A set without leases although the limits had room for them is a bug, and fails.
pub fn leases_or_skip(tokens: &cotenant::tokens::HostTokens) -> bool {
    if tokens.leases() > 0 {
        return true;
    }
    // SAFETY: sysconf has no preconditions.
    let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(0) as u64;
    let wanted = PROTOCOL_SEMAPHORES + configured.min(u64::from(cotenant::tokens::MAX_LEASES));
    let limits = std::fs::read_to_string("/proc/sys/kernel/sem").unwrap_or_default();
    let limits: Vec<u64> = limits.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    let (Some(&per_set), Some(&in_all)) = (limits.first(), limits.get(1)) else {
        eprintln!("skipped: the set has no CPU leases and the kernel's semaphore limits cannot be read");
        return false;
    };
    let used = semaphores_in_use();
    if per_set >= wanted && in_all >= used.saturating_add(wanted) {
        panic!(
            "a new set has no CPU leases, although the kernel allows {per_set} semaphores per set \
             ({wanted} wanted) and {in_all} in all ({used} in use)"
        );
    }
    eprintln!(
        "skipped: the kernel's semaphore limits (SEMMSL {per_set}, SEMMNS {in_all}, {used} in use) \
         leave no room for {wanted} semaphores, so sets have no CPU leases"
    );
    false
}

/// Semaphores in every System V set of the host (`nsems`, the fourth column of
/// `/proc/sysvipc/sem`).
fn semaphores_in_use() -> u64 {
    std::fs::read_to_string("/proc/sysvipc/sem")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
        .sum()
}

/// The scheduler state of thread `tid` of this process (`R`, `S`, `D`...: the field after the
/// command name in `/proc/self/task/<tid>/stat`), `None` once it has exited.
pub fn thread_state(tid: libc::pid_t) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

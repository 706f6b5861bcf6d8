//! CPU affinity for the tests that pin processes: the first CPU this process may run on, and
//! binding a process to one CPU.

/// The first CPU this test process may run on.
pub fn first_allowed_cpu() -> usize {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it, CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
        (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)).expect("some CPU")
    }
}

/// Binds process `pid` (one thread: a shell loop) to `cpu` alone.
pub fn bind(pid: u32, cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it and sched_setaffinity reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(pid as libc::pid_t, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(rc, 0, "binding pid {pid} to CPU {cpu}: {}", std::io::Error::last_os_error());
}

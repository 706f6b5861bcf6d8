//! A child of the lab ([`LabChild`]): the leader of a process group of its own, recorded in the
//! cleanup registry, killed with its group and reaped however the run ends; and the
//! environment every child of the lab gets ([`lab_environment`]).

use std::io::{self, Write as _};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How often a child is checked for its exit while the lab waits for it.
const EXIT_POLL: Duration = Duration::from_millis(10);
/// How long a child killed with SIGKILL is waited for before the lab gives up on reaping it.
const KILLED_WAIT: Duration = Duration::from_secs(10);

/// A child of the lab (see the module documentation).
pub struct LabChild {
    pub(super) child: Child,
    /// Set once reaped: its pid and group are no longer ours to kill.
    status: Option<ExitStatus>,
}

impl LabChild {
    /// Starts `command` as the leader of a new process group, recorded in the lab's registry;
    /// refused once a signal is stopping the lab.
    pub fn spawn(command: &mut Command) -> io::Result<LabChild> {
        command.process_group(0);
        Ok(LabChild { child: cotenant_ops::cgroup::spawn_recorded(command)?, status: None })
    }

    /// Its pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its stdin, if piped and not taken yet.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Its stdout, if piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Waits until it exits (and reaps it) or `deadline` passes (`None`).
    pub fn wait_until(&mut self, deadline: Instant) -> io::Result<Option<ExitStatus>> {
        loop {
            if let Some(status) = self.status {
                return Ok(Some(status));
            }
            if let Some(status) = cotenant_ops::cgroup::try_reap(&mut self.child)? {
                self.status = Some(status);
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(EXIT_POLL.min(deadline - now));
        }
    }

    /// Kills its process group (it and whatever it started) unless it was reaped already.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            let pid = self.child.id() as i32;
            // SAFETY: kill has no memory effects; the child is not reaped, so its pid and its
            // group are still ours.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for LabChild {
    fn drop(&mut self) {
        self.kill();
        if let Ok(None) = self.wait_until(Instant::now() + KILLED_WAIT) {
            let _ = writeln!(
                io::stderr(),
                "cotenant: lab child {} has not exited {} s after SIGKILL; not waiting for it",
                self.id(),
                KILLED_WAIT.as_secs()
            );
        }
    }
}

/// Gives a child of the lab its environment: the default pools of every worker and tenant
/// share the lab's own token set (recorded, and removed when the lab ends, however it ends),
/// never the host's default one, whatever the user's environment says (`lab-worker` turns
/// tokens off for the kinds that do not cooperate).
pub fn lab_environment(command: &mut Command) -> &mut Command {
    command
        .env(cotenant::tokens::DEFAULT_SET_ENV, crate::neighbours::LAB_TOKENS)
        .env_remove(cotenant::tokens::TOKENS_ENV)
}

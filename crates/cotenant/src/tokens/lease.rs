//! CPU leases: one binary semaphore per CPU after the protocol's six, taken and given back
//! alone or in one `semop` with a token, and listed free.

use std::io;
use std::sync::atomic::Ordering;

use super::acquire::HANDED_OVER;
use super::{error, sembuf, HostTokens, TokensError, NSEMS, SEM_TOKENS, SEM_WAITERS};

impl HostTokens {
    /// How many CPU leases the set holds: those of CPUs `0..leases()` (see the module
    /// documentation; 0 for a set without).
    pub fn leases(&self) -> u32 {
        self.leases
    }

    /// Takes the lease of `cpu` if it is free, without waiting (`Ok(false)`: taken, or a CPU
    /// the set has no lease for). Give it back with [`give_back_lease`](Self::give_back_lease),
    /// before the token.
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn try_lease(&self, cpu: u32) -> Result<bool, TokensError> {
        if cpu >= self.leases {
            return Ok(false);
        }
        let num = lease_semaphore(cpu);
        self.try_semop([sembuf(num, -1, libc::IPC_NOWAIT | libc::SEM_UNDO)], "taking a CPU lease")
    }

    /// A token and the lease of `cpu` in one atomic `semop`, without waiting: both, or
    /// neither (`Ok(false)`: no token free, somebody waits for one, the lease is taken, or a
    /// CPU the set has no lease for). What [`acquire`](Self::acquire) with a zero limit and then
    /// [`try_lease`](Self::try_lease) do, in one system call instead of two; the caller tries
    /// those when this fails. Give both back with [`release_with_lease`](Self::release_with_lease).
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn try_acquire_with_lease(&self, cpu: u32) -> Result<bool, TokensError> {
        if cpu >= self.leases {
            return Ok(false);
        }
        let lease = sembuf(lease_semaphore(cpu), -1, libc::IPC_NOWAIT | libc::SEM_UNDO);
        let token = sembuf(SEM_TOKENS, -1, libc::IPC_NOWAIT | libc::SEM_UNDO);
        let got = if self.waits_on_pipe {
            // As `acquire_or_cancel`'s first try: a newcomer does not go ahead of the waiters.
            self.try_semop(
                [sembuf(SEM_WAITERS, 0, libc::IPC_NOWAIT), token, lease],
                "taking a token and a CPU lease",
            )?
        } else {
            self.try_semop([token, lease], "taking a token and a CPU lease")?
        };
        if got {
            self.held.fetch_add(1, Ordering::AcqRel);
            // No wait follows, so the yield a hand-over asks of this thread's next wait is moot.
            HANDED_OVER.with(|h| h.set(false));
        }
        Ok(got)
    }

    /// The CPUs whose lease nobody holds right now (one `GETALL`; a snapshot, so
    /// [`try_lease`](Self::try_lease) may still find one taken).
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn free_leases(&self) -> Result<Vec<u32>, TokensError> {
        if self.leases == 0 {
            return Ok(Vec::new());
        }
        let mut values = vec![0u16; NSEMS as usize + self.leases as usize];
        // SAFETY: GETALL writes one u16 per semaphore of the set, which `values` holds.
        if unsafe { libc::semctl(self.semid, 0, libc::GETALL, values.as_mut_ptr()) } < 0 {
            return Err(error(format!("set {:?} (GETALL): {}", self.name, io::Error::last_os_error())));
        }
        Ok((0..self.leases).filter(|&cpu| values[NSEMS as usize + cpu as usize] > 0).collect())
    }

    /// Gives back the lease of `cpu`, taken by this process with [`try_lease`](Self::try_lease).
    ///
    /// A lease nobody holds is refused (an error), so that a second give-back cannot leave the
    /// lease free for two holders. The semaphore cannot tell *who* holds it: giving back
    /// another process's lease is not detected, and is a bug in the caller.
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn give_back_lease(&self, cpu: u32) -> Result<(), TokensError> {
        if cpu >= self.leases {
            return Err(error(format!("set {:?}: no lease for CPU {cpu} to give back", self.name)));
        }
        let num = lease_semaphore(cpu);
        // One atomic semop: "the lease is held (value 0)", then free it.
        let held_then_free = [sembuf(num, 0, libc::IPC_NOWAIT), sembuf(num, 1, libc::SEM_UNDO)];
        if self.try_semop(held_then_free, "giving a CPU lease back")? {
            Ok(())
        } else {
            Err(error(format!(
                "set {:?}: the lease of CPU {cpu} is not held; nothing to give back",
                self.name
            )))
        }
    }

    /// Gives back the lease of `cpu` and then the token, as
    /// [`give_back_lease`](Self::give_back_lease) and [`release`](Self::release) do, in one
    /// atomic `semop` while nobody waits on the pipe (the common case: one system call instead
    /// of three); otherwise one after the other, waking the first waiter. Both are given back
    /// whatever fails; the error says what did.
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn release_with_lease(&self, cpu: u32) -> Result<(), TokensError> {
        // The one-semop path only for a token held (see `release`); otherwise the two calls
        // below give the lease back and refuse the token.
        if cpu < self.leases && self.take_held() {
            let num = lease_semaphore(cpu);
            // "The lease is held (value 0)", then free it and the token; with the pipe, also
            // "nobody waits on it": a waiter counts itself before its first try, so if this
            // succeeds its try finds the token, and if it fails `release` below wakes it.
            let held = sembuf(num, 0, libc::IPC_NOWAIT);
            let free = sembuf(num, 1, libc::SEM_UNDO);
            let token = sembuf(SEM_TOKENS, 1, libc::SEM_UNDO);
            let what = "giving a CPU lease and a token back";
            let done = match self.wakeups {
                Some(_) => {
                    self.try_semop([held, free, token, sembuf(SEM_WAITERS, 0, libc::IPC_NOWAIT)], what)
                }
                None => self.try_semop([held, free, token], what),
            };
            if let Ok(true) = done {
                return Ok(());
            }
            // Not given back here: still held, and `release` below gives it back.
            self.held.fetch_add(1, Ordering::AcqRel);
        }
        match (self.give_back_lease(cpu), self.release()) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
            (Err(lease), Err(token)) => Err(TokensError(format!("{lease}; and {token}"))),
        }
    }
}

/// The semaphore holding `cpu`'s lease (`cpu` below `MAX_LEASES`).
fn lease_semaphore(cpu: u32) -> u16 {
    (NSEMS as u32 + cpu) as u16
}

//! Host CPU tokens: one per CPU, shared by every cotenant pool on the host that opts in
//! ([`Builder::host_tokens`](crate::Builder::host_tokens)); a worker holds one while it runs a
//! task and hands it back after (or keeps it for its next task while nobody waits for one).
//! Cooperating pools then never run more tasks at once than the
//! host has CPUs, and no pool has to guess its neighbours' demand from last period's counters:
//! a token freed by one process wakes a worker of whichever process waits for one, at the
//! instant it is freed. This is GNU make's jobserver applied to CPU-bound
//! tasks, and what the simulator showed the adaptive policy alone cannot do on a host where
//! every thread competes with every other one (`RESULTS.md`, "Host tokens").
//!
//! The tokens are a System V semaphore, because only it gives them back when a process dies
//! holding some (`SEM_UNDO`: the kernel undoes a dead process's adjustments). Its key is derived
//! from a name and the user id, so only one user's processes share a set. A key can be computed
//! by anyone, so a set found on it is trusted only if this user created it and owns it and
//! nobody else may touch it (`IPC_STAT`: creator, owner, mode 0600), its marker says it is
//! cotenant's, and its name check matches the name (two names whose keys collide are told
//! apart): another user who creates a set on our key first cannot hold, count or remove our
//! tokens, because our processes refuse the set and say why. The set lives in the IPC
//! namespace: processes in different containers do not share tokens unless the containers share
//! it (`docker --ipc`, a pod's containers do).
//!
//! **Members.** Every process that opens a named set as a member ([`HostTokens::open`]) counts
//! itself in `MEMBERS` with `SEM_UNDO`, so the kernel keeps the count right when a member dies.
//! A pool engages its tokens only while the set is shared ([`HostTokens::shared_now`]: another
//! member process, or another pool of this process): a process alone on its CPUs takes no token
//! and makes no system call for one (`default.rs`, `pool/host_tokens.rs`).
//!
//! The hand-over (who gets a freed token, and how the waiter wakes) goes through a pipe
//! (`wakeup.rs`): the semaphore's own wait wakes its waiter in a way that leaves a CPU idle on a
//! busy host, the pipe's does not. The protocol, in the set's semaphores:
//! - take: one atomic `semop` that succeeds only if nobody waits and a token is free (a
//!   newcomer does not go ahead of the waiters, except that a woken waiter that has not run
//!   yet competes with the tries of the others, newcomers included);
//! - otherwise wait: count oneself in `WAITERS`, then repeatedly try to take a token and leave
//!   `WAITERS` in one atomic `semop`, sleeping on the pipe between tries;
//! - give back: free the token, then, if anybody waits, write one byte to the pipe, which wakes
//!   the first waiter; a worker that just handed a token over yields once before it waits
//!   itself, so that the waiter it woke on its CPU takes the token rather than it. Only a
//!   token taken through the same handle is given back: the handle counts them, and refuses a
//!   release beyond its count (a token given back twice would otherwise be one more token).
//!
//! Every adjustment is `SEM_UNDO`, so a process that dies neither keeps a token nor counts as a
//! waiter. Among processes that share the pipe no wake-up is lost: a waiter counts itself before
//! its first try, and a releaser frees the token before it reads the count. A token that comes
//! back without a byte is found at a waiter's next check (every 50 ms in a pool): one a dead
//! holder held, or one freed by a process that cannot open the pipe (its path is in `/dev/shm`,
//! else `/tmp`; a process that cannot create or open it logs so and waits on the semaphore
//! itself, which is correct but may pass pipe waiters and pays the old hand-over cost). Pipe
//! waiters are served in the order their wait began, also across the periodic checks of
//! [`HostTokens::acquire_or_cancel`] (a pool's workers check for `shutdown_now` every 50 ms),
//! with one exception: a byte that arrives while the first waiter is awake for a check (not
//! inside `epoll_wait`) also wakes the next, and either may take the token.
//!
//! A worker waits for a token at most the pool's limit (`Builder::host_tokens_wait`): holders
//! may be blocked (a task waiting for I/O or for another task while holding one), and a
//! blocked holder must slow cooperating pools down, not stall them; the task then runs without
//! a token (`pool/host_tokens.rs`). The set's six protocol semaphores: the free tokens, a marker
//! (`MAGIC`, so that a set that is not cotenant's, or of an older layout, is refused), the token
//! count it was created with, the waiters on the pipe, the member processes, and a check of the
//! name (so that two names whose keys collide are told apart).
//!
//! **CPU leases.** After those six, a set holds one binary semaphore per CPU of the host (its
//! configured CPUs, at most [`MAX_LEASES`]): the lease of that CPU. A token holder may take
//! one free lease, `SEM_UNDO` like the rest, and run its task on that CPU alone (a pool pins
//! its worker there, `pool/host_tokens.rs`). Tokens alone bound how many tasks run at once,
//! not where: the kernel places a woken token waiter by its own heuristics, and on this
//! project's test VM it often put it on the CPU of a holder that kept running while the other
//! CPU went idle, where the two shared one CPU until the next load balance, a tick later (a
//! traced run: 836 ms of runnable waiting with the other CPU idle in 5 s; service p99 twice
//! the item's time). A
//! holder gives its lease back before its token, so a holder never finds every lease taken
//! while there are no more tokens than leases. A set without leases (made by an older
//! cotenant, or where the kernel's per-set limit is too low for one per CPU) works as before.
//!
//! **Other systems.** Host CPU tokens need Linux: System V semaphores with `SEM_UNDO`, a FIFO
//! woken through `epoll`, `/proc/sysvipc/sem`. Outside Linux (`crate::sys`'s fallback) the
//! API is the same, so that code using it builds everywhere, but no set can be had:
//! [`HostTokens::open`], [`HostTokens::open_observer`], [`HostTokens::private`] and the
//! functions of [`list`] fail with a [`TokensError`] saying "host CPU tokens need Linux (System
//! V semaphores)", [`HostTokens::exists`] is false, and a default pool runs without tokens
//! (`Metrics::host_tokens` says `unavailable`, and nothing is logged: it is what the system
//! offers, not a failure).

// The System V protocol (Linux only): taking and giving back, the keys, the leases, the sets
// and their pipes, and the listing. Elsewhere `unsupported.rs` has the same API.
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
mod acquire;
mod default;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
mod keys;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
mod lease;
pub mod list;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
mod listing;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
mod set;
#[cfg(all(test, target_os = "linux", not(cotenant_force_fallback)))]
mod tests;
#[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
mod unsupported;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
mod wakeup;

pub use default::{default_set_name, DEFAULT_SET_ENV, TOKENS_ENV};
pub(crate) use default::{for_default_pool, DefaultTokens};
#[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
pub use unsupported::HostTokens;

use std::fmt;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
use std::io;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
use std::sync::atomic::AtomicU32;

#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
use keys::{check_name, foreign_ids, name_check, user_key};
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
use wakeup::WakeUps;

/// The value of the marker semaphore in a set created by cotenant (layout 2: with members and
/// a name check).
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
const MAGIC: i32 = 0x0c08;
/// The marker of the first layout (four semaphores, then leases): refused, and listed as such.
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
const OLD_MAGIC: i32 = 0x0c07;
/// The semaphores of a set: free tokens, marker, count, waiters on the pipe, member processes,
/// name check.
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
const NSEMS: i32 = 6;
/// The most CPU leases a set holds (one semaphore each, after the protocol's six); CPUs
/// beyond get none.
pub const MAX_LEASES: u32 = 1024;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
const SEM_TOKENS: u16 = TOKENS_SEMAPHORE;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
const SEM_MAGIC: u16 = 1;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
const SEM_COUNT: u16 = 2;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
const SEM_WAITERS: u16 = 3;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
const SEM_MEMBERS: u16 = MEMBERS_SEMAPHORE;
/// The semaphore counting member processes, for tests that count a forked child as a member
/// with a raw `semop` (a child of a multi-threaded process may not allocate).
#[doc(hidden)] // for cotenant's tests: internal, no stability promise
pub const MEMBERS_SEMAPHORE: u16 = 4;
/// The semaphore holding the free tokens (as [`MEMBERS_SEMAPHORE`]).
#[doc(hidden)] // for cotenant's tests: internal, no stability promise
pub const TOKENS_SEMAPHORE: u16 = 0;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
const SEM_NAME: u16 = 5;
/// The most tokens a set can hold (`SEMVMX`).
pub const MAX_TOKENS: u32 = 32767;

/// Set in a process's environment, it waits on named sets' semaphores instead of their pipes (to
/// measure one hand-over against the other on the same host; `RESULTS.md`); it still wakes pipe
/// waiters. Private sets always use their pipe.
#[doc(hidden)] // for cotenant's tests: internal, no stability promise
pub const NO_PIPE_ENV: &str = "COTENANT_TOKENS_NO_PIPE";

/// A host's CPU tokens (see the module documentation).
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
#[derive(Debug)]
pub struct HostTokens {
    semid: i32,
    count: u32,
    name: String,
    /// Removed on drop (a private set: nobody else can find it, or one already removed).
    remove_on_drop: bool,
    /// CPU leases in the set (semaphores `NSEMS..NSEMS + leases`): CPUs `0..leases`.
    leases: u32,
    /// The hand-over's pipe, used to wake waiters whenever it could be opened.
    wakeups: Option<WakeUps>,
    /// Whether this process also waits on the pipe (`false`: on the semaphore, see
    /// [`NO_PIPE_ENV`]).
    waits_on_pipe: bool,
    /// This handle counted the process in `MEMBERS` (uncounted on drop).
    member: bool,
    /// Pools of this process using this handle (`pool/host_tokens.rs`).
    pools: AtomicU32,
    /// Tokens taken through this handle and not given back yet: [`release`](Self::release)
    /// refuses to give back more than this, so that a second release of one token cannot add
    /// a token to the set. (The semaphore itself cannot refuse it: `semop` can wait for a value
    /// to drop to zero or below a decrement, not refuse an increment above the count.)
    held: AtomicU32,
}

/// What went wrong opening, using or removing a token set.
#[derive(Debug)]
pub struct TokensError(String);

impl fmt::Display for TokensError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TokensError {}

#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
fn error(what: impl fmt::Display) -> TokensError {
    TokensError(format!("host tokens: {what}"))
}

/// How [`HostTokens::acquire_or_cancel`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Acquired {
    /// A token is held: give it back with [`HostTokens::release`].
    Token,
    /// None came within the limit.
    TimedOut,
    /// The caller's check said to stop waiting.
    Cancelled,
}

/// The System V key of the set `name` for user `uid` (FNV-1a; never `IPC_PRIVATE`, 0).
#[doc(hidden)] // for cotenant's tests and tools: internal, no stability promise
pub fn key(name: &str, uid: u32) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in format!("cotenant-tokens/{name}/{uid}").bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    // 0 is `IPC_PRIVATE` (a set nobody else can find), on every system that has the call; a
    // literal, so that the key (also the default set's name hash) is the same everywhere.
    let key = hash as i32;
    if key == 0 {
        1
    } else {
        key
    }
}

#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
fn sembuf(num: u16, op: i16, flags: i32) -> libc::sembuf {
    libc::sembuf { sem_num: num, sem_op: op, sem_flg: flags as i16 }
}

#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
impl HostTokens {
    /// One atomic `semop` of `ops` (interrupted: tried again).
    fn raw_semop(&self, ops: &mut [libc::sembuf]) -> io::Result<()> {
        loop {
            // SAFETY: `ops` is a valid array of `ops.len()` sembufs.
            if unsafe { libc::semop(self.semid, ops.as_mut_ptr(), ops.len()) } == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
    }

    fn semop(&self, ops: &mut [libc::sembuf], what: &str) -> Result<(), TokensError> {
        self.raw_semop(ops).map_err(|e| error(format!("set {:?}: {what} (semop): {e}", self.name)))
    }

    /// `semop` of `IPC_NOWAIT` operations: `Ok(false)` if they cannot all be done now.
    fn try_semop<const N: usize>(&self, mut ops: [libc::sembuf; N], what: &str) -> Result<bool, TokensError> {
        match self.raw_semop(&mut ops) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(false),
            Err(e) => Err(error(format!("set {:?}: {what} (semop): {e}", self.name))),
        }
    }
}

/// Tests' guard: removes this user's set `name` when dropped (an assertion failing first
/// included; off Linux there is none to remove).
#[cfg(test)]
pub(crate) struct RemoveNamed(pub(crate) String);

#[cfg(test)]
impl Drop for RemoveNamed {
    fn drop(&mut self) {
        let _ = HostTokens::remove_named(&self.0);
    }
}

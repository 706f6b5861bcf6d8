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

mod default;
pub mod list;
mod wakeup;

pub use default::{default_set_name, DEFAULT_SET_ENV, TOKENS_ENV};
pub(crate) use default::{for_default_pool, DefaultTokens};

use std::cell::Cell;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use wakeup::WakeUps;

/// The value of the marker semaphore in a set created by cotenant (layout 2: with members and
/// a name check).
const MAGIC: i32 = 0x0c08;
/// The marker of the first layout (four semaphores, then leases): refused, and listed as such.
const OLD_MAGIC: i32 = 0x0c07;
/// The semaphores of a set: free tokens, marker, count, waiters on the pipe, member processes,
/// name check.
const NSEMS: i32 = 6;
/// The most CPU leases a set holds (one semaphore each, after the protocol's six); CPUs
/// beyond get none.
pub const MAX_LEASES: u32 = 1024;
const SEM_TOKENS: u16 = 0;
const SEM_MAGIC: u16 = 1;
const SEM_COUNT: u16 = 2;
const SEM_WAITERS: u16 = 3;
const SEM_MEMBERS: u16 = 4;
/// The semaphore counting member processes, for tests that count a forked child as a member
/// with a raw `semop` (a child of a multi-threaded process may not allocate).
#[doc(hidden)]
pub const MEMBERS_SEMAPHORE: u16 = SEM_MEMBERS;
/// The semaphore holding the free tokens (as [`MEMBERS_SEMAPHORE`]).
#[doc(hidden)]
pub const TOKENS_SEMAPHORE: u16 = SEM_TOKENS;
const SEM_NAME: u16 = 5;
/// The most tokens a set can hold (`SEMVMX`).
pub const MAX_TOKENS: u32 = 32767;
/// How long `open` waits for another process to finish creating the set.
const INIT_WAIT: Duration = Duration::from_secs(2);

/// A host's CPU tokens (see the module documentation).
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

thread_local! {
    /// This thread's last `release` woke a waiter: its next wait yields first.
    static HANDED_OVER: Cell<bool> = const { Cell::new(false) };
}

/// What went wrong opening, using or removing a token set.
#[derive(Debug)]
pub struct TokensError(String);

/// The shortest interval between the checks of [`HostTokens::acquire_or_cancel`].
const MIN_CHECK: Duration = Duration::from_millis(1);

/// A waiter counted in `WAITERS`, uncounted on drop unless taken out (`None`): only a panic in
/// the caller's check drops it armed; every other way out uncounts explicitly, to report errors.
struct Counted<'a>(Option<&'a HostTokens>);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if let Some(tokens) = self.0 {
            let _ = tokens.uncount_waiter();
        }
    }
}

/// How [`HostTokens::acquire_or_cancel`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// A token is held: give it back with [`HostTokens::release`].
    Token,
    /// None came within the limit.
    TimedOut,
    /// The caller's check said to stop waiting.
    Cancelled,
}

impl fmt::Display for TokensError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TokensError {}

fn error(what: impl fmt::Display) -> TokensError {
    TokensError(format!("host tokens: {what}"))
}

/// The System V key of the set `name` for user `uid` (FNV-1a; never `IPC_PRIVATE`, 0).
pub fn key(name: &str, uid: u32) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in format!("cotenant-tokens/{name}/{uid}").bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let key = hash as i32;
    if key == libc::IPC_PRIVATE {
        1
    } else {
        key
    }
}

/// The key of this user's set `name`.
fn user_key(name: &str) -> i32 {
    // SAFETY: getuid cannot fail.
    key(name, unsafe { libc::getuid() })
}

/// The id of the existing set on `name`'s key (`semget` without creating).
fn existing(name: &str) -> io::Result<i32> {
    // SAFETY: plain system call on integers.
    let semid = unsafe { libc::semget(user_key(name), 0, 0) };
    if semid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(semid)
}

fn sembuf(num: u16, op: i16, flags: i32) -> libc::sembuf {
    libc::sembuf { sem_num: num, sem_op: op, sem_flg: flags as i16 }
}

impl HostTokens {
    /// Opens the token set `name` of this user as a member, creating it with `count` tokens if
    /// nobody has (the first process to open a set decides its count; [`count`](Self::count)
    /// tells). The set outlives the processes (a kernel object, like a file); the tokens any of
    /// them held come back when it exits, and so does its place in the member count.
    /// [`remove`](Self::remove) deletes it. A set on the name's key that another user created or
    /// may write, that is not cotenant's, or that was made for another name, is refused with the
    /// reason.
    pub fn open(name: &str, count: u32) -> Result<HostTokens, TokensError> {
        let mut tokens = HostTokens::open_uncounted(name, count)?;
        tokens.semop(&mut [sembuf(SEM_MEMBERS, 1, libc::SEM_UNDO)], "counting this process as a member")?;
        tokens.member = true;
        Ok(tokens)
    }

    /// [`open`](Self::open) without counting this process as a member: for a process that
    /// creates, watches or removes a set its children use (the lab, `cotenant tokens`), so
    /// that a lone child still finds itself alone.
    pub fn open_observer(name: &str, count: u32) -> Result<HostTokens, TokensError> {
        HostTokens::open_uncounted(name, count)
    }

    fn open_uncounted(name: &str, count: u32) -> Result<HostTokens, TokensError> {
        check_name(name)?;
        check_count(count)?;
        let err = match create_set(user_key(name), libc::IPC_CREAT | libc::IPC_EXCL | 0o600) {
            Ok(created) => return HostTokens::initialise_new(created, count, name),
            Err(err) => err,
        };
        if err.raw_os_error() != Some(libc::EEXIST) {
            return Err(error(format!("creating set {name:?} (semget): {err}")));
        }
        let semid = existing(name).map_err(|e| error(format!("opening set {name:?} (semget): {e}")))?;
        let mut tokens = HostTokens::without_pipe(semid, 0, name);
        // Trusted only once we know who made it: a key anyone can compute is no proof. A set
        // we may not even read (EACCES) is another user's.
        let ds = tokens.stat_raw().map_err(|e| match e.raw_os_error() {
            Some(libc::EACCES) => error(format!(
                "set {name:?} (key {:#010x}) refused: another user's set, which this user may not read; \
                 its owner must remove it (`ipcrm -s {semid}`), or choose another name",
                user_key(name)
            )),
            _ => error(format!("set {name:?} (IPC_STAT): {e}")),
        })?;
        if let Some(why) = foreign(&ds) {
            return Err(error(format!(
                "set {name:?} (key {:#010x}) refused: {why}; remove it (`ipcrm -s {semid}`) or choose another name",
                user_key(name)
            )));
        }
        tokens.wait_until_initialised()?;
        if tokens.value(SEM_NAME)? != u32::from(name_check(name)) {
            return Err(error(format!(
                "set {name:?}: its key {:#010x} holds the set of another name (the keys of two names collide); \
                 choose another name",
                user_key(name)
            )));
        }
        tokens.count = tokens.value(SEM_COUNT)?;
        tokens.leases = tokens.semaphores()?.saturating_sub(NSEMS as u32);
        tokens.open_pipe();
        Ok(tokens)
    }

    /// Sets up a named set this process just created (`(id, leases)`).
    fn initialise_new(
        (semid, leases): (i32, u32),
        count: u32,
        name: &str,
    ) -> Result<HostTokens, TokensError> {
        let mut tokens = HostTokens::without_pipe(semid, count, name);
        tokens.leases = leases;
        tokens.open_pipe();
        // A pipe left by a removed set may still hold its wake-ups; drained before the set
        // is usable (initialised), so that no wake-up of this set is lost.
        tokens.wakeups.iter().for_each(WakeUps::drain);
        tokens.initialise(count, name_check(name)).map_err(|e| {
            let _ = tokens.remove_set();
            error(format!("initialising set {name:?}: {e}"))
        })?;
        // For `cotenant tokens list`: a key does not tell its name.
        if let Err(e) = list::write_name(&fifo_path(name), name) {
            tracing::debug!("host tokens: set {name:?}: its name was not recorded ({e})");
        }
        Ok(tokens)
    }

    /// Whether this user has a semaphore set on `name`'s key (without creating it; a foreign
    /// set on the same key counts too, which [`open`](Self::open) then refuses).
    pub fn exists(name: &str) -> bool {
        existing(name).is_ok()
    }

    /// A set of `count` tokens that only this process can use (tests, and pools in one
    /// process that share tokens through clones of an `Arc`); removed when dropped.
    pub fn private(count: u32) -> Result<HostTokens, TokensError> {
        check_count(count)?;
        let (semid, leases) = create_set(libc::IPC_PRIVATE, 0o600)
            .map_err(|e| error(format!("creating a private set (semget): {e}")))?;
        let mut tokens = HostTokens::without_pipe(semid, count, "(private)");
        tokens.leases = leases;
        tokens.remove_on_drop = true;
        tokens
            .initialise(count, name_check("(private)"))
            .map_err(|e| error(format!("initialising a private set: {e}")))?;
        tokens.wakeups =
            Some(WakeUps::anonymous().map_err(|e| error(format!("creating a private set's pipe: {e}")))?);
        tokens.waits_on_pipe = true;
        Ok(tokens)
    }

    /// Opens the named set's pipe (logged if it cannot), and decides how this process waits.
    fn open_pipe(&mut self) {
        let path = fifo_path(&self.name);
        self.wakeups = WakeUps::named(&path)
            .map_err(|e| {
                tracing::warn!(
                    "host tokens: set {:?}: no hand-over pipe at {} ({e}); waiting on the semaphore, \
                     which may leave a CPU idle at each hand-over, and pipe waiters of other \
                     processes find the tokens this one frees only at their next check",
                    self.name,
                    path.display()
                )
            })
            .ok();
        self.waits_on_pipe = self.wakeups.is_some() && std::env::var_os(NO_PIPE_ENV).is_none();
    }

    fn without_pipe(semid: i32, count: u32, name: &str) -> HostTokens {
        HostTokens {
            semid,
            count,
            name: name.to_owned(),
            remove_on_drop: false,
            leases: 0,
            wakeups: None,
            waits_on_pipe: false,
            member: false,
            pools: AtomicU32::new(0),
            held: AtomicU32::new(0),
        }
    }

    /// The set's first `semop` (it also stamps `sem_otime`, which tells openers it is ready).
    /// Without `SEM_UNDO`: the tokens must stay when the creator exits.
    fn initialise(&self, count: u32, name_check: u16) -> io::Result<()> {
        if self.leases > 0 {
            // Every lease free; SETALL does not stamp `sem_otime`, the semop below does.
            let mut values = vec![0u16; NSEMS as usize + self.leases as usize];
            values[NSEMS as usize..].fill(1);
            // SAFETY: SETALL reads one u16 per semaphore of the set, which `values` holds.
            if unsafe { libc::semctl(self.semid, 0, libc::SETALL, values.as_mut_ptr()) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let mut ops = [
            sembuf(SEM_TOKENS, count as i16, 0),
            sembuf(SEM_MAGIC, MAGIC as i16, 0),
            sembuf(SEM_COUNT, count as i16, 0),
            sembuf(SEM_NAME, name_check as i16, 0),
        ];
        self.raw_semop(&mut ops)
    }

    /// `Some(is cotenant's)` once the set's creator has initialised it, `None` before. A set
    /// of another shape is not cotenant's even then.
    fn initialised(&self) -> Result<Option<bool>, TokensError> {
        let ds = self.stat()?;
        // Fewer than the protocol's six: not ours. More: CPU leases (or a foreign set, which
        // the marker tells).
        #[allow(clippy::unnecessary_cast)] // `sem_nsems` is a c_ulong: 32 bits on some targets.
        let nsems = ds.sem_nsems as u64;
        if nsems < NSEMS as u64 || nsems > u64::from(NSEMS as u32 + MAX_LEASES) {
            return Ok(Some(false));
        }
        if ds.sem_otime == 0 {
            return Ok(None);
        }
        Ok(Some(self.value(SEM_MAGIC)? == MAGIC as u32))
    }

    pub(crate) fn stat(&self) -> Result<libc::semid_ds, TokensError> {
        self.stat_raw().map_err(|e| error(format!("set {:?} (IPC_STAT): {e}", self.name)))
    }

    fn stat_raw(&self) -> io::Result<libc::semid_ds> {
        // SAFETY: semid_ds is plain data; IPC_STAT fills it.
        let mut ds: libc::semid_ds = unsafe { std::mem::zeroed() };
        // SAFETY: IPC_STAT takes a pointer to a semid_ds.
        if unsafe { libc::semctl(self.semid, 0, libc::IPC_STAT, &mut ds as *mut libc::semid_ds) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ds)
    }

    /// How many semaphores the set holds.
    fn semaphores(&self) -> Result<u32, TokensError> {
        Ok(self.stat()?.sem_nsems as u32)
    }

    fn wait_until_initialised(&self) -> Result<(), TokensError> {
        let start = Instant::now();
        loop {
            if let Some(ours) = self.initialised()? {
                if !ours {
                    return Err(error(format!(
                        "set {:?}: its key is taken by a semaphore set that is not cotenant's (or is an \
                         older cotenant's); choose another name, or remove the set (`ipcrm -S {:#010x}`)",
                        self.name,
                        user_key(&self.name)
                    )));
                }
                return Ok(());
            }
            if start.elapsed() > INIT_WAIT {
                return Err(error(format!(
                    "set {:?} was created but never initialised (its creator died?); remove it with \
                     `HostTokens::remove_named` or `ipcrm -S {:#010x}`",
                    self.name,
                    user_key(&self.name)
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn value(&self, num: u16) -> Result<u32, TokensError> {
        // SAFETY: GETVAL takes no argument.
        let value = unsafe { libc::semctl(self.semid, i32::from(num), libc::GETVAL) };
        if value < 0 {
            return Err(error(format!("set {:?} (GETVAL): {}", self.name, io::Error::last_os_error())));
        }
        Ok(value as u32)
    }

    /// Processes counted as members of the set now ([`open`](Self::open); the kernel uncounts a
    /// member that dies). A private set has none.
    pub fn members(&self) -> Result<u32, TokensError> {
        self.value(SEM_MEMBERS)
    }

    /// Whether cooperating through this set can matter now: a private set always (its pools
    /// chose to share it); a named set while another member process is counted or more than one
    /// pool of this process uses it. An unreadable count (the set was removed) reads as not
    /// shared: a gated pool then runs without tokens rather than fail a system call per task.
    /// A pool that takes tokens only while this holds pays nothing alone.
    pub fn shared_now(&self) -> bool {
        // One `semctl`: the count's read fails exactly when the set is gone.
        self.remove_on_drop
            || self.members().is_ok_and(|members| {
                self.pools.load(Ordering::Relaxed) > 1 || members > u32::from(self.member)
            })
    }

    /// Whether the set still exists (it was not removed under us).
    pub(crate) fn usable(&self) -> bool {
        self.value(SEM_COUNT).is_ok()
    }

    /// A pool of this process starts or stops using the set (`shared_now`).
    pub(crate) fn pool_joined(&self) {
        self.pools.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn pool_left(&self) {
        self.pools.fetch_sub(1, Ordering::Relaxed);
    }

    /// The set's System V id (what `ipcs -s` shows and `ipcrm -s` takes).
    pub fn semid(&self) -> i32 {
        self.semid
    }

    /// The set's name (`"(private)"` for a private set).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tokens the set was created with.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// How many CPU leases the set holds: those of CPUs `0..leases()` (see the module
    /// documentation; 0 for a set without).
    pub fn leases(&self) -> u32 {
        self.leases
    }

    /// Takes the lease of `cpu` if it is free, without waiting (`Ok(false)`: taken, or a CPU
    /// the set has no lease for). Give it back with [`give_back_lease`](Self::give_back_lease),
    /// before the token.
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

    /// Tokens nobody holds right now.
    pub fn available(&self) -> Result<u32, TokensError> {
        self.value(SEM_TOKENS)
    }

    /// Threads waiting for a token right now (on the pipe or on the semaphore).
    pub fn waiting(&self) -> Result<u32, TokensError> {
        // SAFETY: GETNCNT takes no argument.
        let value = unsafe { libc::semctl(self.semid, i32::from(SEM_TOKENS), libc::GETNCNT) };
        if value < 0 {
            return Err(error(format!("set {:?} (GETNCNT): {}", self.name, io::Error::last_os_error())));
        }
        Ok(value as u32 + self.value(SEM_WAITERS)?)
    }

    /// Where this user's set `name` keeps its hand-over pipe (removed with the set).
    pub fn pipe_path(name: &str) -> PathBuf {
        fifo_path(name)
    }

    /// Whether this process's hand-overs go through the pipe (`false`: the semaphore's own
    /// wait, see the module documentation).
    pub fn hands_over_by_pipe(&self) -> bool {
        self.waits_on_pipe
    }

    /// Takes a token, waiting at most `limit` (`Ok(false)`: none came in time). A zero limit
    /// takes one only if one is free and nobody waits.
    pub fn acquire(&self, limit: Duration) -> Result<bool, TokensError> {
        self.acquire_or_cancel(limit, Duration::MAX, &|| false).map(|got| got == Acquired::Token)
    }

    /// [`acquire`](Self::acquire) that also asks `cancelled` before it first sleeps and then
    /// at least every `check_every` (at least 1 ms) while it waits, and gives up when it says
    /// so; a cancellation wins over a limit reached at the same check. A waiter on the pipe
    /// keeps its place in the queue across these checks (a pool's workers wait this way, so
    /// that `shutdown_now` ends their wait without sending them to the back of the queue every
    /// check); the module documentation says when a later waiter can still go first.
    pub fn acquire_or_cancel(
        &self,
        limit: Duration,
        check_every: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Acquired, TokensError> {
        let got = self.take_or_wait(limit, check_every, cancelled);
        if let Ok(Acquired::Token) = got {
            self.held.fetch_add(1, Ordering::AcqRel);
        }
        got
    }

    /// [`acquire_or_cancel`](Self::acquire_or_cancel) without the count of tokens held.
    fn take_or_wait(
        &self,
        limit: Duration,
        check_every: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Acquired, TokensError> {
        // A zero interval would poll without sleeping.
        let check_every = check_every.max(MIN_CHECK);
        let Some(wakeups) = self.wakeups.as_ref().filter(|_| self.waits_on_pipe) else {
            return self.acquire_on_semaphore(limit, check_every, cancelled);
        };
        let just_handed_over = HANDED_OVER.with(|h| h.replace(false));
        let nobody_waits_and_one_is_free = [
            sembuf(SEM_WAITERS, 0, libc::IPC_NOWAIT),
            sembuf(SEM_TOKENS, -1, libc::IPC_NOWAIT | libc::SEM_UNDO),
        ];
        if self.try_semop(nobody_waits_and_one_is_free, "taking a token")? {
            return Ok(Acquired::Token);
        }
        if limit.is_zero() {
            return Ok(Acquired::TimedOut);
        }
        let deadline = Instant::now().checked_add(limit);
        self.semop(&mut [sembuf(SEM_WAITERS, 1, libc::SEM_UNDO)], "counting a waiter")?;
        // Uncounts if `cancelled` panics: a waiter left counted would keep every process's
        // `acquire` off its fast path until this one exits.
        let mut counted = Counted(Some(self));
        if just_handed_over {
            // The waiter our release woke was most likely put on this CPU: let it run first.
            // SAFETY: plain system call.
            unsafe { libc::sched_yield() };
        }
        let got = self.wait_as_waiter(wakeups, deadline, check_every, cancelled);
        counted.0 = None;
        if !matches!(got, Ok(Acquired::Token)) {
            // Leaving without a token: no longer a waiter (a token taken left in the same
            // semop). If uncounting fails, the first error is the one to report.
            let uncounted = self.uncount_waiter();
            return got.and_then(|got| uncounted.map(|()| got));
        }
        got
    }

    /// Leaves `WAITERS` (IPC_NOWAIT: the count is ours to decrement, so this never blocks).
    fn uncount_waiter(&self) -> Result<(), TokensError> {
        self.semop(&mut [sembuf(SEM_WAITERS, -1, libc::IPC_NOWAIT | libc::SEM_UNDO)], "uncounting a waiter")
    }

    /// The waiting part of `acquire`, counted in `WAITERS`: `Ok(Acquired::Token)` has also
    /// uncounted. One epoll registration for the whole wait: its place among the pipe's
    /// exclusive waiters is where it was registered, whatever the checks in between.
    fn wait_as_waiter(
        &self,
        wakeups: &WakeUps,
        deadline: Option<Instant>,
        check_every: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Acquired, TokensError> {
        let take_and_leave = [
            sembuf(SEM_TOKENS, -1, libc::IPC_NOWAIT | libc::SEM_UNDO),
            sembuf(SEM_WAITERS, -1, libc::IPC_NOWAIT | libc::SEM_UNDO),
        ];
        let waiter = wakeups
            .waiter()
            .map_err(|e| error(format!("set {:?}: waiting on its pipe (epoll): {e}", self.name)))?;
        let mut woken_by_byte = false;
        loop {
            if self.try_semop(take_and_leave, "taking a token")? {
                if !woken_by_byte {
                    // Keep the pipe's bytes close to the tokens freed for waiters: the byte
                    // written for the token taken here would only wake a waiter for nothing.
                    wakeups.take_one();
                }
                return Ok(Acquired::Token);
            }
            if cancelled() {
                return Ok(Acquired::Cancelled);
            }
            let left = time_left(deadline);
            if left.is_zero() {
                return Ok(Acquired::TimedOut);
            }
            woken_by_byte = waiter
                .wait(left.min(check_every))
                .map_err(|e| error(format!("set {:?}: waiting on its pipe (epoll_wait): {e}", self.name)))?
                && wakeups.take_one();
        }
    }

    /// `acquire` for a process without the pipe: the semaphore's own wait (each check queues
    /// again: the semaphore has no way to keep a place).
    fn acquire_on_semaphore(
        &self,
        limit: Duration,
        check_every: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Acquired, TokensError> {
        let take = [sembuf(SEM_TOKENS, -1, libc::IPC_NOWAIT | libc::SEM_UNDO)];
        if self.try_semop(take, "taking a token")? {
            return Ok(Acquired::Token);
        }
        if limit.is_zero() {
            return Ok(Acquired::TimedOut);
        }
        let deadline = Instant::now().checked_add(limit);
        // As on the pipe: the caller's check, then the limit (no deadline: never), then a
        // sleep of at most `check_every` that ends with a token or without.
        loop {
            if cancelled() {
                return Ok(Acquired::Cancelled);
            }
            let left = time_left(deadline);
            if left.is_zero() {
                return Ok(Acquired::TimedOut);
            }
            let slice = left.min(check_every);
            let timeout = libc::timespec {
                tv_sec: slice.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: slice.subsec_nanos() as libc::c_long,
            };
            let mut op = sembuf(SEM_TOKENS, -1, libc::SEM_UNDO);
            // SAFETY: one valid sembuf and a valid timespec; libc has no semtimedop wrapper.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_semtimedop,
                    self.semid,
                    &mut op as *mut libc::sembuf,
                    1usize,
                    &timeout,
                )
            };
            if rc == 0 {
                return Ok(Acquired::Token);
            }
            let err = io::Error::last_os_error();
            // EAGAIN: the sleep ended without a token; EINTR: a signal. Either way, go round.
            if !matches!(err.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
                return Err(error(format!("set {:?}: taking a token (semtimedop): {err}", self.name)));
            }
        }
    }

    /// Gives a token back; if anybody waits on the pipe, wakes the first.
    ///
    /// Only a token taken through this handle ([`acquire`](Self::acquire),
    /// [`acquire_or_cancel`](Self::acquire_or_cancel),
    /// [`try_acquire_with_lease`](Self::try_acquire_with_lease)) and not given back yet can be
    /// given back: a release beyond those is refused with an error and changes nothing, so
    /// that giving one token back twice cannot add a token to the set. Any thread may give
    /// back a token another thread took through the same handle (as a pool's controller does
    /// for a blocked worker). The handle counts, not the semaphore: a process that opened the
    /// set twice gives each token back through the handle it took it with. The count is per
    /// handle, not per holder: while one thread holds a token, a second release by another
    /// thread that shares the handle is not detected (the pool gives each token back exactly
    /// once by its own bookkeeping, `WorkerStats::token_hold`).
    pub fn release(&self) -> Result<(), TokensError> {
        if !self.take_held() {
            return Err(error(format!(
                "set {:?}: no token taken through this handle is held; nothing to give back \
                 (released twice?)",
                self.name
            )));
        }
        if let Err(e) = self.semop(&mut [sembuf(SEM_TOKENS, 1, libc::SEM_UNDO)], "giving a token back") {
            // Not given back: still held.
            self.held.fetch_add(1, Ordering::AcqRel);
            return Err(e);
        }
        if let Some(wakeups) = &self.wakeups {
            // Read after the token is free: a waiter counted itself before its first try, so
            // either that try finds the token or this read finds the waiter.
            if self.value(SEM_WAITERS)? > 0 && wakeups.wake_one() {
                HANDED_OVER.with(|h| h.set(true));
            }
        }
        Ok(())
    }

    /// Gives back the lease of `cpu` and then the token, as
    /// [`give_back_lease`](Self::give_back_lease) and [`release`](Self::release) do, in one
    /// atomic `semop` while nobody waits on the pipe (the common case: one system call instead
    /// of three); otherwise one after the other, waking the first waiter. Both are given back
    /// whatever fails; the error says what did.
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

    /// Counts one token held through this handle as given back; `false` if none is held.
    fn take_held(&self) -> bool {
        self.held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| held.checked_sub(1)).is_ok()
    }

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

    /// Deletes the set: every process using it gets errors from then on (their pools run
    /// without tokens). For a named set, when no cotenant process on the host uses it.
    pub fn remove(mut self) -> Result<(), TokensError> {
        let result = self.remove_set();
        let pipe = if self.remove_on_drop { Ok(()) } else { remove_fifo(&self.name) };
        self.remove_on_drop = false;
        result.and(pipe)
    }

    /// Deletes this user's set `name` without opening it: also one left uninitialised by a
    /// creator that died (which [`open`](Self::open) refuses). `Ok(false)`: there was none.
    /// Refuses a set on the key that is not cotenant's.
    pub fn remove_named(name: &str) -> Result<bool, TokensError> {
        let semid = match existing(name) {
            Ok(semid) => semid,
            // No set: a pipe its removal left (a crash in between) goes all the same.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return remove_fifo(name).map(|()| false),
            Err(e) => return Err(error(format!("set {name:?} (semget): {e}"))),
        };
        let set = HostTokens::without_pipe(semid, 0, name);
        if let Some(why) = foreign(&set.stat()?) {
            return Err(error(format!("set {name:?}: not removed, {why} (`ipcrm -s {semid}` as its owner)")));
        }
        if set.initialised()? == Some(false) {
            return Err(error(format!(
                "set {name:?}: its key holds a semaphore set that is not cotenant's; not removed"
            )));
        }
        set.remove_set()?;
        remove_fifo(name)?;
        Ok(true)
    }

    fn remove_set(&self) -> Result<(), TokensError> {
        // SAFETY: IPC_RMID takes no argument.
        if unsafe { libc::semctl(self.semid, 0, libc::IPC_RMID) } < 0 {
            return Err(error(format!(
                "removing set {:?} (IPC_RMID): {}",
                self.name,
                io::Error::last_os_error()
            )));
        }
        Ok(())
    }
}

impl Drop for HostTokens {
    fn drop(&mut self) {
        if self.remove_on_drop {
            let _ = self.remove_set();
        } else if self.member {
            // Cancels this handle's `SEM_UNDO` count (a set removed meanwhile: nothing to do).
            let _ = self.raw_semop(&mut [sembuf(SEM_MEMBERS, -1, libc::SEM_UNDO | libc::IPC_NOWAIT)]);
        }
    }
}

/// Why a set found on one of our keys is not to be trusted (`None`: this user made it, owns it,
/// and nobody else may read or write it).
pub(crate) fn foreign(ds: &libc::semid_ds) -> Option<String> {
    let perm = &ds.sem_perm;
    #[allow(clippy::unnecessary_cast)] // `mode` is a c_ushort on some targets, c_uint on others.
    foreign_ids(perm.uid, perm.cuid, perm.mode as u32)
}

/// [`foreign`] from a set's owner, creator and mode (as `/proc/sysvipc/sem` lists them).
pub(crate) fn foreign_ids(owner: u32, creator: u32, mode: u32) -> Option<String> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let mode = mode & 0o777;
    if creator != uid {
        Some(format!("created by uid {creator}, not by this user (uid {uid})"))
    } else if owner != uid {
        Some(format!("owned by uid {owner}, not by this user (uid {uid})"))
    } else if mode & 0o077 != 0 {
        Some(format!("mode {mode:04o} lets other users use it (cotenant makes sets 0600)"))
    } else {
        None
    }
}

/// A second, independent hash of a set's name, kept in the set (`SEM_NAME`, 1..=32767): tells
/// apart two names whose keys collide.
fn name_check(name: &str) -> u16 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in format!("cotenant-name/{name}").bytes().rev() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash % 32767) as u16 + 1
}

fn check_name(name: &str) -> Result<(), TokensError> {
    if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
        return Err(error(format!("name {name:?}: 1 to 200 bytes, no control characters")));
    }
    Ok(())
}

/// The semaphore holding `cpu`'s lease (`cpu` below `MAX_LEASES`).
fn lease_semaphore(cpu: u32) -> u16 {
    (NSEMS as u32 + cpu) as u16
}

/// How many CPU leases a new set gets: one per configured CPU, at most `MAX_LEASES`.
fn leases_for_host() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    u32::try_from(cpus).unwrap_or(0).min(MAX_LEASES)
}

/// Creates a set on `key` with the protocol's semaphores and, where the kernel's per-set
/// limit (`SEMMSL`) allows, one lease per CPU; returns its id and its leases.
fn create_set(key: i32, flags: i32) -> io::Result<(i32, u32)> {
    let leases = leases_for_host();
    // SAFETY: plain system call on integers.
    let semid = unsafe { libc::semget(key, NSEMS + leases as i32, flags) };
    if semid >= 0 {
        return Ok((semid, leases));
    }
    let err = io::Error::last_os_error();
    if leases == 0 || !matches!(err.raw_os_error(), Some(libc::EINVAL | libc::ENOSPC)) {
        return Err(err);
    }
    // More semaphores than a set (EINVAL: SEMMSL) or the system (ENOSPC: SEMMNS) may still
    // hold: a set without leases still works.
    // SAFETY: plain system call on integers.
    let semid = unsafe { libc::semget(key, NSEMS, flags) };
    if semid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((semid, 0))
}

/// The time to `deadline`; `None` (a limit too long to add, `Duration::MAX`): no deadline,
/// waited out in hour-long slices.
fn time_left(deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::from_secs(3600), |d| d.saturating_duration_since(Instant::now()))
}

/// The named pipe of this user's set `name`.
fn fifo_path(name: &str) -> PathBuf {
    // SAFETY: getuid cannot fail.
    wakeup::fifo_path(unsafe { libc::getuid() }, user_key(name))
}

/// Set in a process's environment, it waits on named sets' semaphores instead of their pipes (to
/// measure one hand-over against the other on the same host; `RESULTS.md`); it still wakes pipe
/// waiters. Private sets always use their pipe.
pub const NO_PIPE_ENV: &str = "COTENANT_TOKENS_NO_PIPE";

fn remove_fifo(name: &str) -> Result<(), TokensError> {
    let path = fifo_path(name);
    list::remove_name(&path);
    WakeUps::remove(&path)
        .map_err(|e| error(format!("set {name:?}: removing its pipe {}: {e}", path.display())))
}

fn check_count(count: u32) -> Result<(), TokensError> {
    if count == 0 || count > MAX_TOKENS {
        return Err(error(format!("count must be in 1..={MAX_TOKENS}, got {count}")));
    }
    Ok(())
}

/// Tests' guard: removes this user's set `name` when dropped (an assertion failing first
/// included).
#[cfg(test)]
pub(crate) struct RemoveNamed(pub(crate) String);

#[cfg(test)]
impl Drop for RemoveNamed {
    fn drop(&mut self) {
        let _ = HostTokens::remove_named(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_set_without_leases_still_hands_out_tokens() {
        let name = format!("cotenant-test-no-leases-{}", std::process::id());
        // SAFETY: plain system call on integers.
        let semid = unsafe { libc::semget(user_key(&name), NSEMS, libc::IPC_CREAT | libc::IPC_EXCL | 0o600) };
        assert!(semid >= 0, "semget: {}", io::Error::last_os_error());
        // A set made where the kernel's per-set limit left no room for leases: the protocol's
        // semaphores alone, initialised.
        HostTokens::without_pipe(semid, 1, &name).initialise(1, name_check(&name)).unwrap();
        let _remove = RemoveNamed(name.clone());
        let tokens = HostTokens::open(&name, 1).unwrap();
        assert_eq!((tokens.count(), tokens.leases()), (1, 0));
        assert!(tokens.acquire(Duration::ZERO).unwrap());
        assert!(!tokens.try_lease(0).unwrap(), "no lease to take");
        assert!(tokens.free_leases().unwrap().is_empty());
        tokens.release().unwrap();
        tokens.remove().unwrap();
        assert!(!HostTokens::exists(&name));
    }

    #[test]
    fn a_private_set_hands_out_its_tokens_and_takes_them_back() {
        let tokens = HostTokens::private(2).unwrap();
        assert_eq!((tokens.count(), tokens.available().unwrap()), (2, 2));
        assert!(tokens.acquire(Duration::ZERO).unwrap());
        assert!(tokens.acquire(Duration::ZERO).unwrap());
        assert_eq!(tokens.available().unwrap(), 0);
        // None left: a zero wait says so at once rather than blocking.
        assert!(!tokens.acquire(Duration::ZERO).unwrap());
        tokens.release().unwrap();
        assert_eq!(tokens.available().unwrap(), 1);
        tokens.release().unwrap();
        assert_eq!(tokens.available().unwrap(), 2);
    }

    /// A waiter is woken by the release: it returns with the token before its limit (a lost
    /// wake-up would also end with the token, by the last try at the limit).
    fn hand_over(tokens: HostTokens) {
        let tokens = std::sync::Arc::new(tokens);
        assert!(tokens.acquire(Duration::ZERO).unwrap());
        let limit = Duration::from_secs(20);
        let waiter = {
            let tokens = tokens.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                (tokens.acquire(limit).unwrap(), start.elapsed())
            })
        };
        // Released only once the waiter waits, so that the hand-over is what is tested.
        while tokens.waiting().unwrap() == 0 {
            std::thread::yield_now();
        }
        tokens.release().unwrap();
        let (got, waited) = waiter.join().unwrap();
        assert!(got && waited < limit, "woken: {got}, after {waited:?}");
        assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (0, 0));
    }

    #[test]
    fn a_waiter_gets_the_token_a_holder_releases() {
        let tokens = HostTokens::private(1).unwrap();
        assert!(tokens.hands_over_by_pipe());
        hand_over(tokens);
    }

    #[test]
    fn without_the_pipe_a_waiter_is_woken_by_the_semaphore() {
        let mut tokens = HostTokens::private(1).unwrap();
        tokens.waits_on_pipe = false;
        hand_over(tokens);
    }

    #[test]
    fn a_cancelled_wait_ends_on_the_pipe_and_on_the_semaphore_alike() {
        for on_pipe in [true, false] {
            let mut tokens = HostTokens::private(1).unwrap();
            tokens.waits_on_pipe = on_pipe;
            assert!(tokens.acquire(Duration::ZERO).unwrap());
            let checks = AtomicUsize::new(0);
            // Cancelled at its third check, long before the limit.
            let cancelled = || checks.fetch_add(1, Ordering::SeqCst) >= 2;
            let got = tokens.acquire_or_cancel(Duration::from_secs(20), Duration::from_millis(1), &cancelled);
            assert_eq!(got.unwrap(), Acquired::Cancelled, "on the pipe: {on_pipe}");
            assert_eq!(checks.into_inner(), 3, "on the pipe: {on_pipe}");
            assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (0, 0));
            // A limit that ends before the next check is a time-out: asked before the first
            // sleep and once more when the limit has passed, not at the 60 s check.
            let checks = AtomicUsize::new(0);
            let count = || checks.fetch_add(1, Ordering::SeqCst) == usize::MAX;
            let start = Instant::now();
            let got = tokens.acquire_or_cancel(Duration::from_millis(5), Duration::from_secs(60), &count);
            assert_eq!(got.unwrap(), Acquired::TimedOut, "on the pipe: {on_pipe}");
            assert_eq!(checks.into_inner(), 2, "on the pipe: {on_pipe}");
            assert!(start.elapsed() < Duration::from_secs(30), "the limit, not the check, ended it");
            assert_eq!(tokens.waiting().unwrap(), 0);
            tokens.release().unwrap();
        }
    }

    #[test]
    fn one_wait_registers_once_on_the_pipe_whatever_its_checks() {
        let tokens = HostTokens::private(1).unwrap();
        assert!(tokens.hands_over_by_pipe());
        assert!(tokens.acquire(Duration::ZERO).unwrap());
        let checks = AtomicUsize::new(0);
        let cancelled = || checks.fetch_add(1, Ordering::SeqCst) >= 5;
        let before = wakeup::REGISTRATIONS.with(|r| r.get());
        let got = tokens.acquire_or_cancel(Duration::from_secs(20), Duration::ZERO, &cancelled).unwrap();
        assert_eq!(got, Acquired::Cancelled);
        // Six checks (a zero interval is raised to 1 ms rather than polled), one registration:
        // its place in the pipe's queue is the one it took first.
        assert_eq!(checks.into_inner(), 6);
        assert_eq!(wakeup::REGISTRATIONS.with(|r| r.get()) - before, 1);
        tokens.release().unwrap();
    }

    #[test]
    fn a_check_that_panics_leaves_no_waiter_counted() {
        let tokens = HostTokens::private(1).unwrap();
        assert!(tokens.acquire(Duration::ZERO).unwrap());
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tokens.acquire_or_cancel(Duration::from_secs(20), Duration::from_millis(1), &|| panic!("check"))
        }));
        assert!(waited.is_err());
        assert_eq!((tokens.available().unwrap(), tokens.waiting().unwrap()), (0, 0));
        tokens.release().unwrap();
        // Nobody is counted as waiting, so the fast path takes the free token.
        assert!(tokens.acquire(Duration::ZERO).unwrap());
        tokens.release().unwrap();
    }

    #[test]
    fn bad_counts_and_names_are_refused_with_the_reason() {
        for count in [0, MAX_TOKENS + 1] {
            let e = HostTokens::private(count).unwrap_err().to_string();
            assert!(e.contains("count must be in 1..=32767"), "{e}");
        }
        let e = HostTokens::open("", 2).unwrap_err().to_string();
        assert!(e.contains("1 to 200 bytes"), "{e}");
    }

    #[test]
    fn a_named_set_is_shared_and_keeps_its_first_count() {
        let name = format!("test-{}", std::process::id());
        let _remove = RemoveNamed(name.clone());
        let first = HostTokens::open(&name, 3).unwrap();
        let second = HostTokens::open(&name, 8).unwrap();
        assert_eq!(second.count(), 3);
        assert!(second.acquire(Duration::ZERO).unwrap());
        assert_eq!(first.available().unwrap(), 2);
        second.release().unwrap();
        drop(second);
        assert!(HostTokens::exists(&name));
        first.remove().unwrap();
        assert!(!HostTokens::exists(&name));
        // Gone: nothing to remove by name any more; and by name it goes too.
        assert!(!HostTokens::remove_named(&name).unwrap());
        drop(HostTokens::open(&name, 1).unwrap());
        assert!(HostTokens::remove_named(&name).unwrap());
        assert!(!HostTokens::exists(&name));
    }

    #[test]
    fn keys_differ_by_name_and_user_and_are_never_private() {
        assert_ne!(key("default", 0), key("default", 1000));
        assert_ne!(key("default", 0), key("lab", 0));
        assert_ne!(key("default", 0), libc::IPC_PRIVATE);
    }
}

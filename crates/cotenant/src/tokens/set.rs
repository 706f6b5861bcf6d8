//! Opening, creating, initialising and removing a set, and what a handle tells about it (its
//! count, members, free tokens, waiters, and whether it is shared now).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::keys::{check_name, existing, fifo_path, foreign, name_check, user_key};
use super::wakeup::WakeUps;
use super::{
    error, listing, sembuf, HostTokens, TokensError, MAGIC, MAX_LEASES, MAX_TOKENS, NO_PIPE_ENV, NSEMS,
    SEM_COUNT, SEM_MAGIC, SEM_MEMBERS, SEM_NAME, SEM_TOKENS, SEM_WAITERS,
};

/// How long `open` waits for another process to finish creating the set.
const INIT_WAIT: Duration = Duration::from_secs(2);

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
        if let Err(e) = listing::write_name(&fifo_path(name), name) {
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

    pub(super) fn without_pipe(semid: i32, count: u32, name: &str) -> HostTokens {
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
    pub(super) fn initialise(&self, count: u32, name_check: u16) -> io::Result<()> {
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

    pub(super) fn value(&self, num: u16) -> Result<u32, TokensError> {
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
    #[doc(hidden)] // for cotenant's tests: internal, no stability promise
    pub fn hands_over_by_pipe(&self) -> bool {
        self.waits_on_pipe
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

    pub(super) fn remove_set(&self) -> Result<(), TokensError> {
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

fn remove_fifo(name: &str) -> Result<(), TokensError> {
    let path = fifo_path(name);
    listing::remove_name(&path);
    WakeUps::remove(&path)
        .map_err(|e| error(format!("set {name:?}: removing its pipe {}: {e}", path.display())))
}

fn check_count(count: u32) -> Result<(), TokensError> {
    if count == 0 || count > MAX_TOKENS {
        return Err(error(format!("count must be in 1..={MAX_TOKENS}, got {count}")));
    }
    Ok(())
}

//! Host CPU tokens outside Linux (`crate::sys`'s fallback): the same API as on Linux, so that
//! code using it builds on every system, but no set can be had. Every way to a set fails with
//! [`unavailable`]'s error; a [`HostTokens`] can therefore never exist, and its methods, which
//! the compiler still checks, can never run (`self.unreachable()`).

use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Duration;

use super::list::SetInfo;
use super::{Acquired, TokensError};

/// The error of every call that would need a token set.
fn unavailable() -> TokensError {
    TokensError(
        "host CPU tokens need Linux (System V semaphores); this build of cotenant runs its fallback \
         for other systems, where pools run without them"
            .to_owned(),
    )
}

/// A host's CPU tokens (see the module documentation). None can be opened on this system.
#[derive(Debug)]
pub struct HostTokens {
    never: Infallible,
}

impl HostTokens {
    /// A handle cannot exist here, so no method of one can run: the compiler proves it (the
    /// copy of an `Infallible` is matched by no arm).
    fn unreachable(&self) -> ! {
        let never = self.never;
        match never {}
    }

    /// Opens the token set `name` as a member ([`HostTokens::open`] on Linux): here always the
    /// error "host CPU tokens need Linux (System V semaphores)".
    pub fn open(_name: &str, _count: u32) -> Result<HostTokens, TokensError> {
        Err(unavailable())
    }

    /// Opens the token set `name` without counting this process as a member: here always the
    /// error "host CPU tokens need Linux (System V semaphores)".
    pub fn open_observer(_name: &str, _count: u32) -> Result<HostTokens, TokensError> {
        Err(unavailable())
    }

    /// Whether this user has a set on `name`'s key: never, here.
    pub fn exists(_name: &str) -> bool {
        false
    }

    /// A set of `count` tokens only this process can use: here always the error "host CPU
    /// tokens need Linux (System V semaphores)".
    pub fn private(_count: u32) -> Result<HostTokens, TokensError> {
        Err(unavailable())
    }

    /// Processes counted as members of the set now.
    pub fn members(&self) -> Result<u32, TokensError> {
        self.unreachable()
    }

    /// Whether cooperating through this set can matter now.
    pub fn shared_now(&self) -> bool {
        self.unreachable()
    }

    /// Whether the set still exists.
    pub(crate) fn usable(&self) -> bool {
        self.unreachable()
    }

    /// A pool of this process starts using the set.
    pub(crate) fn pool_joined(&self) {
        self.unreachable()
    }

    /// A pool of this process stops using the set.
    pub(crate) fn pool_left(&self) {
        self.unreachable()
    }

    /// The set's System V id.
    pub fn semid(&self) -> i32 {
        self.unreachable()
    }

    /// The set's name.
    pub fn name(&self) -> &str {
        self.unreachable()
    }

    /// The tokens the set was created with.
    pub fn count(&self) -> u32 {
        self.unreachable()
    }

    /// Tokens nobody holds right now.
    pub fn available(&self) -> Result<u32, TokensError> {
        self.unreachable()
    }

    /// Threads waiting for a token right now.
    pub fn waiting(&self) -> Result<u32, TokensError> {
        self.unreachable()
    }

    /// Where this user's set `name` keeps its hand-over pipe: nowhere here (an empty path).
    pub fn pipe_path(_name: &str) -> PathBuf {
        PathBuf::new()
    }

    /// Whether this process's hand-overs go through the pipe.
    #[doc(hidden)] // for cotenant's tests: internal, no stability promise
    pub fn hands_over_by_pipe(&self) -> bool {
        self.unreachable()
    }

    /// Deletes the set.
    pub fn remove(self) -> Result<(), TokensError> {
        self.unreachable()
    }

    /// Deletes this user's set `name` without opening it: here always the error "host CPU
    /// tokens need Linux (System V semaphores)".
    pub fn remove_named(_name: &str) -> Result<bool, TokensError> {
        Err(unavailable())
    }

    /// How many CPU leases the set holds.
    pub fn leases(&self) -> u32 {
        self.unreachable()
    }

    /// Takes the lease of `cpu` if it is free, without waiting.
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn try_lease(&self, _cpu: u32) -> Result<bool, TokensError> {
        self.unreachable()
    }

    /// A token and the lease of `cpu` in one step, without waiting.
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn try_acquire_with_lease(&self, _cpu: u32) -> Result<bool, TokensError> {
        self.unreachable()
    }

    /// The CPUs whose lease nobody holds right now.
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn free_leases(&self) -> Result<Vec<u32>, TokensError> {
        self.unreachable()
    }

    /// Gives back the lease of `cpu`.
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn give_back_lease(&self, _cpu: u32) -> Result<(), TokensError> {
        self.unreachable()
    }

    /// Gives back the lease of `cpu` and then the token.
    #[doc(hidden)] // the pool's CPU leases: internal, no stability promise
    pub fn release_with_lease(&self, _cpu: u32) -> Result<(), TokensError> {
        self.unreachable()
    }

    /// Takes a token, waiting at most `limit`.
    pub fn acquire(&self, _limit: Duration) -> Result<bool, TokensError> {
        self.unreachable()
    }

    /// Takes a token, waiting at most `limit` and giving up when `cancelled` says so.
    pub fn acquire_or_cancel(
        &self,
        _limit: Duration,
        _check_every: Duration,
        _cancelled: &dyn Fn() -> bool,
    ) -> Result<Acquired, TokensError> {
        self.unreachable()
    }

    /// Gives a token back.
    pub fn release(&self) -> Result<(), TokensError> {
        self.unreachable()
    }
}

/// This user's token sets ([`list`](super::list::list) on Linux): here always the error "host
/// CPU tokens need Linux (System V semaphores)".
pub fn list() -> Result<Vec<SetInfo>, TokensError> {
    Err(unavailable())
}

/// Removes the listed set with key `key`: here always the error "host CPU tokens need Linux
/// (System V semaphores)".
pub fn remove(_key: i32, _force: bool) -> Result<(), TokensError> {
    Err(unavailable())
}

/// The key of a listed set given by name or by key: here always the error "host CPU tokens
/// need Linux (System V semaphores)" (no set is listed to resolve to).
pub fn resolve(_name_or_key: &str) -> Result<i32, TokensError> {
    Err(unavailable())
}

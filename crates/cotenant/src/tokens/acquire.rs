//! Taking and giving back tokens: the waiting protocol (a try; then a wait counted in
//! `WAITERS`, on the pipe or on the semaphore) and the release that wakes the first waiter.

use std::cell::Cell;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::wakeup::WakeUps;
use super::{error, sembuf, Acquired, HostTokens, TokensError, SEM_TOKENS, SEM_WAITERS};

thread_local! {
    /// This thread's last `release` woke a waiter: its next wait yields first.
    pub(super) static HANDED_OVER: Cell<bool> = const { Cell::new(false) };
}

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

impl HostTokens {
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

    /// Counts one token held through this handle as given back; `false` if none is held.
    pub(super) fn take_held(&self) -> bool {
        self.held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| held.checked_sub(1)).is_ok()
    }
}

/// The time to `deadline`; `None` (a limit too long to add, `Duration::MAX`): no deadline,
/// waited out in hour-long slices.
fn time_left(deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::from_secs(3600), |d| d.saturating_duration_since(Instant::now()))
}

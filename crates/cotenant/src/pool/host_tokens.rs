//! A pool's side of the host CPU tokens ([`crate::tokens`], [`Builder::host_tokens`]): a
//! worker takes a token after popping a task and gives it back when the task ends, unless it
//! keeps it for its next task ("Kept" below; a guard, so that no path can keep it by mistake).
//! A token that does not come within the wait limit is skipped and counted (its holders may be
//! blocked, or the host busier than the limit allows); a set that fails (removed) is skipped,
//! counted and logged once per pool. A `shutdown_now` while a worker waits cancels its task:
//! the wait checks for it every 50 ms, keeping its place in the queue of waiters.
//!
//! With a token, a worker also takes the lease of one CPU it may run on (the one it runs on
//! when that is free) and moves there (`crate::tokens`, "CPU leases"): holders with a lease
//! then do not share a CPU while another idles. It moves without staying pinned: when the
//! leased CPU is not the one it runs on, it binds itself to it and, once there, gives itself
//! its mask back at once; a worker already on its leased CPU (the usual case) makes no call at
//! all. Nothing running on the kernel's side moves a lone running thread off its CPU, and a
//! worker that runs a kept token's next task elsewhere moves back first (`Held::return_to_lease`). A task
//! thus runs with the worker's own CPU mask: threads it starts and `available_parallelism()`
//! inside it see the pool's CPUs, not one. Measured against pinning for the whole hold
//! (`RESULTS.md`, "Leases without pinning"): the same service p99 and worst item. A pool
//! whose workers are pinned for good (`Builder::pin_workers`) takes no leases. The token and
//! the lease of the worker's CPU are taken in one `semop` and given back in one while nobody
//! waits (`HostTokens::try_acquire_with_lease`, `release_with_lease`).
//!
//! A holder also notes its run-queue wait (its own schedstat, one `pread`) when it takes a
//! token and when it gives it back: while the tokens are shared, the controller counts only
//! the wait of holders as contention (`control.rs`). A worker woken for a task while every
//! token is held waits on a run queue before it can sleep on the tokens, behind the holders;
//! that wait (about 95 % of the workers' run-queue wait in a lab run of two processes at 70 %
//! load) is the tokens doing their job, not a neighbour to give way to.
//!
//! **Kept.** A worker that ends a task with another queued for it, while no worker of any pool
//! sharing the set waits for a token, keeps its token (and lease) for that task instead of
//! giving it back and taking it again (`Held::nobody_waits`, two `semctl`s against four system
//! calls, more when the worker's own CPU is leased). A waiter still gets the token when the
//! task in progress ends, as before; only a busy pool nobody competes with stops paying per
//! task (`RESULTS.md`, "What a host token costs per task": tiny tasks back to back ran 5.5x
//! faster with leases, 2.7x without). A task that changes its own thread's CPU mask changes it for the worker's later
//! tasks, as in a pool without tokens.
//!
//! [`Builder::host_tokens`]: super::Builder::host_tokens

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::worker::WorkerStats;
use crate::kfile::ThreadSchedstat;
use crate::tokens::{Acquired, HostTokens};

/// The default wait for a token before a task runs without one.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(1);
/// How often a waiting worker checks for `shutdown_now`.
const CANCEL_CHECK: Duration = Duration::from_millis(50);

pub(crate) struct PoolTokens {
    set: Arc<HostTokens>,
    wait: Duration,
    /// The CPUs the process could run on when the pool was built, whose leases the workers
    /// take; empty: no leases.
    allowed: Vec<u32>,
    /// Tasks run without a token because none came within `wait`.
    pub(crate) timeouts: AtomicU64,
    /// Tasks run without a token for any reason (timeouts and failures to take one): the
    /// controller reads it to stop trusting the tokens for a period (`control.rs`).
    pub(crate) ran_without: AtomicU64,
    /// Controller periods in which, because of `ran_without`, the policy as given replaced the
    /// token-sharing one (`control.rs`).
    pub(crate) fallback_periods: AtomicU64,
    /// Tokens taken: each held for one task, or for several run back to back (`Held::nobody_waits`).
    pub(crate) taken: AtomicU64,
    /// Token operations that failed (taking one: the task then runs without; giving one back),
    /// leases and moves to a leased CPU included (the task then runs where it is).
    pub(crate) errors: AtomicU64,
    warned: AtomicBool,
    /// A failure to move to a leased CPU was logged (apart from `warned`, so that a later
    /// token failure is still logged).
    warned_move: AtomicBool,
}

/// What a worker about to run a task got.
pub(crate) enum Take<'a> {
    /// A token, given back when this is dropped.
    Held(Held<'a>),
    /// None: run the task without one (counted).
    Without,
    /// `shutdown_now` came while it waited: cancel the task.
    Cancelled,
}

/// A token held for one task, or for several back to back ("Kept" above), with the lease of
/// the CPU the worker runs on if it got one; dropping it gives both back, the lease first, and
/// adds the worker's run-queue wait while it held the token to its `token_wait_total`.
pub(crate) struct Held<'a> {
    tokens: &'a PoolTokens,
    stats: &'a WorkerStats,
    lease: Option<u32>,
}

impl<'a> Held<'a> {
    /// A token just taken by the worker whose counters are `stats`.
    fn new(tokens: &'a PoolTokens, stats: &'a WorkerStats) -> Self {
        match own_run_delay() {
            Some(wait) => stats.token_wait_since.store(wait.saturating_add(1), Ordering::Release),
            // The controller then has no holders' wait for this pool (`WorkerStats::token_wait_ns`).
            None => stats.token_wait_unknown.store(true, Ordering::Relaxed),
        }
        Held { tokens, stats, lease: None }
    }

    /// Before the next task on a kept token: back to the leased CPU if the worker is no
    /// longer on it (one `sched_getcpu`, answered without entering the kernel, when it is).
    pub(crate) fn return_to_lease(&mut self) {
        if let Some(cpu) = self.lease {
            self.lease = self.tokens.move_to_lease(cpu);
        }
    }

    /// Whether no worker of any pool sharing the set waits for a token (two `semctl`s): then a
    /// worker with another task to run at once keeps this token, and its lease, for it,
    /// instead of giving both back and taking them again (four system calls, more when the
    /// worker's CPU is leased to another holder).
    /// A worker that waits before the check gets the token when this task ends, as without
    /// keeping; only one that starts waiting in the instant between the check and the next
    /// task's start gets it a task later than it would have.
    /// An error reads as "someone waits": the give-back then reports it.
    pub(crate) fn nobody_waits(&self) -> bool {
        matches!(self.tokens.set.waiting(), Ok(0))
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let since = self.stats.token_wait_since.load(Ordering::Acquire);
        if since != 0 {
            let held = super::worker::holding_wait(0, since, own_run_delay().unwrap_or(since - 1));
            // `since` cleared before the total grows, and read after it
            // (`WorkerStats::token_wait_ns`): one reading never counts the hold twice; one in
            // between sees less than the last one did (the controller keeps the larger).
            self.stats.token_wait_since.store(0, Ordering::Release);
            self.stats.token_wait_total.fetch_add(held, Ordering::Release);
        }
        let given_back = match self.lease.take() {
            Some(cpu) => self.tokens.set.release_with_lease(cpu),
            None => self.tokens.set.release(),
        };
        if let Err(e) = given_back {
            self.tokens.failed(&e);
        }
    }
}

thread_local! {
    /// This thread's schedstat, opened at its first token.
    static SCHEDSTAT: RefCell<Option<ThreadSchedstat>> = const { RefCell::new(None) };
}

/// The calling thread's run-queue wait so far, or `None` when the kernel does not report it.
fn own_run_delay() -> Option<u64> {
    SCHEDSTAT.with_borrow_mut(|schedstat| {
        schedstat.get_or_insert_with(ThreadSchedstat::for_current_thread).run_delay_ns()
    })
}

impl PoolTokens {
    /// `allowed`: the CPUs whose leases the workers may take, ascending (empty: none).
    pub(crate) fn new(set: Arc<HostTokens>, wait: Duration, allowed: Vec<u32>) -> PoolTokens {
        let allowed = if set.leases() == 0 { Vec::new() } else { allowed };
        PoolTokens {
            set,
            wait,
            allowed,
            timeouts: AtomicU64::new(0),
            ran_without: AtomicU64::new(0),
            fallback_periods: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            warned_move: AtomicBool::new(false),
        }
    }

    /// Waits for a token for at most the pool's limit, checking `cancelling` every
    /// `CANCEL_CHECK` without losing its place among the waiters.
    /// `stats`: the calling worker's counters.
    pub(crate) fn take<'a>(&'a self, stats: &'a WorkerStats, cancelling: impl Fn() -> bool) -> Take<'a> {
        // First a token and the lease of the CPU the worker is on, in one system call; if
        // that fails, the token (waiting for it) and then a lease, apart.
        let here = self.current_cpu().filter(|&cpu| self.may_run_on(cpu));
        let (got, leased) = match here.map(|cpu| self.set.try_acquire_with_lease(cpu)) {
            Some(Ok(true)) => (Ok(Acquired::Token), here),
            Some(Err(e)) => (Err(e), None),
            Some(Ok(false)) | None => {
                (self.set.acquire_or_cancel(self.wait, CANCEL_CHECK, &cancelling), None)
            }
        };
        match got {
            Ok(Acquired::Token) if cancelling() => {
                // Given back at once (with the lease that came with it), without a hold to measure.
                drop(Held { tokens: self, stats, lease: leased });
                Take::Cancelled
            }
            Ok(Acquired::Token) => {
                self.taken.fetch_add(1, Ordering::Relaxed);
                // Held first: whatever happens while leasing, the token goes back.
                let mut held = Held::new(self, stats);
                held.lease = match leased {
                    Some(cpu) => self.move_to_lease(cpu),
                    None => self.lease(),
                };
                Take::Held(held)
            }
            Ok(Acquired::Cancelled) => Take::Cancelled,
            // A shutdown during the last sleep of the wait still cancels.
            Ok(Acquired::TimedOut) if cancelling() => Take::Cancelled,
            Ok(Acquired::TimedOut) => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                self.ran_without.fetch_add(1, Ordering::Relaxed);
                Take::Without
            }
            Err(e) => {
                self.failed(&e);
                self.ran_without.fetch_add(1, Ordering::Relaxed);
                Take::Without
            }
        }
    }

    /// Takes the lease of a CPU for the token just taken, preferring the one the worker is
    /// on, and moves the worker there; `None` (no leases, none free among the allowed CPUs, or
    /// an error): the worker runs where the kernel puts it.
    fn lease(&self) -> Option<u32> {
        if self.allowed.is_empty() {
            return None;
        }
        match self.take_lease() {
            Ok(Some(cpu)) => self.move_to_lease(cpu),
            Ok(None) => None,
            Err(e) => {
                self.failed(&e);
                None
            }
        }
    }

    /// Moves the worker to `cpu`, whose lease it holds: `Some(cpu)`, or `None` with the lease
    /// given back if the move failed.
    fn move_to_lease(&self, cpu: u32) -> Option<u32> {
        if let Err(e) = move_current_thread(cpu) {
            // The CPU left the process's set since the pool was built, say.
            self.failed_move(&format!(
                "moving a worker to CPU {cpu} failed ({e}); the task runs where it is"
            ));
            if let Err(e) = self.set.give_back_lease(cpu) {
                self.failed(&e);
            }
            return None;
        }
        Some(cpu)
    }

    /// The CPU the calling worker runs on, when leases are on and the kernel says (`None`
    /// otherwise).
    fn current_cpu(&self) -> Option<u32> {
        if self.allowed.is_empty() {
            return None;
        }
        running_cpu()
    }

    fn take_lease(&self) -> Result<Option<u32>, crate::tokens::TokensError> {
        let here = self.current_cpu();
        if let Some(here) = here.filter(|&cpu| self.may_run_on(cpu)) {
            if self.set.try_lease(here)? {
                return Ok(Some(here));
            }
        }
        // Another holder runs here: a free CPU, the next one after this in id order first,
        // so that holders moving at once spread rather than all try the same one.
        let free: Vec<u32> =
            self.set.free_leases()?.into_iter().filter(|&cpu| self.may_run_on(cpu)).collect();
        let start = here.map_or(0, |here| free.iter().position(|&c| c > here).unwrap_or(0));
        for &cpu in free[start..].iter().chain(&free[..start]) {
            if self.set.try_lease(cpu)? {
                return Ok(Some(cpu));
            }
        }
        Ok(None)
    }

    /// Whether `cpu` is one of the allowed CPUs (ascending, from `sched_getaffinity`).
    fn may_run_on(&self, cpu: u32) -> bool {
        self.allowed.binary_search(&cpu).is_ok()
    }

    fn failed_move(&self, what: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if !self.warned_move.swap(true, Ordering::Relaxed) {
            tracing::warn!("host tokens: {what}");
        }
    }

    fn failed(&self, e: &crate::tokens::TokensError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!("{e}; this pool's tasks run without a host token while it fails");
        }
    }
}

/// The CPU the calling thread runs on (`sched_getcpu`, answered without entering the kernel
/// where the vDSO has it), `None` if the kernel does not say.
fn running_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu has no preconditions (-1 on failure).
    u32::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// Moves the calling thread onto `cpu` and leaves it free to run anywhere it could before:
/// nothing to do when it already runs there; otherwise bound to `cpu` alone, which returns once
/// the kernel has moved it, then given its own mask back. An error after the bind (the mask
/// could not be given back) leaves it bound to `cpu`, and says so.
fn move_current_thread(cpu: u32) -> std::io::Result<()> {
    if running_cpu() == Some(cpu) {
        return Ok(());
    }
    let mask = super::placement::current_thread_mask()?;
    super::placement::pin_current_thread(cpu)?;
    super::placement::restore_current_thread(&mask).map_err(|e| {
        std::io::Error::new(e.kind(), format!("{e}, after binding it there: it stays bound to CPU {cpu}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::RemoveNamed;

    #[test]
    fn a_holder_notes_its_run_queue_wait_from_taking_the_token_to_giving_it_back() {
        let name = format!("cotenant-test-holding-wait-{}", std::process::id());
        let _remove = RemoveNamed(name.clone());
        let set = Arc::new(HostTokens::open(&name, 1).unwrap());
        let tokens = PoolTokens::new(set, Duration::from_secs(1), Vec::new());
        let stats = WorkerStats::default();
        let Some(before) = own_run_delay() else { return }; // a kernel without schedstat
        let Take::Held(held) = tokens.take(&stats, || false) else { panic!("a free token was not taken") };
        let since = stats.token_wait_since.load(Ordering::Acquire);
        assert!(
            since > before,
            "the hold's start ({since}, plus one) is the wait when the token came ({before})"
        );
        assert_eq!(
            stats.token_wait_ns(since - 1 + 7_000),
            Some(7_000),
            "a hold in progress counts what grew since"
        );
        drop(held);
        let after = own_run_delay().unwrap();
        assert_eq!(stats.token_wait_since.load(Ordering::Acquire), 0, "no hold in progress");
        let total = stats.token_wait_total.load(Ordering::Acquire);
        assert!(total <= after - before, "{total} ns while holding, of {} ns in all", after - before);
        assert_eq!(
            stats.token_wait_ns(after + 1_000_000),
            Some(total),
            "without a hold, later waits do not count"
        );
        // A hold that began at no wait at all: giving the token back adds the whole wait so far.
        let Take::Held(held) = tokens.take(&stats, || false) else { panic!("the token did not come back") };
        stats.token_wait_since.store(1, Ordering::Release);
        drop(held);
        let added = stats.token_wait_total.load(Ordering::Acquire) - total;
        assert!(added >= before, "the give-back added {added} ns, the thread had waited {before} ns before");
    }
}

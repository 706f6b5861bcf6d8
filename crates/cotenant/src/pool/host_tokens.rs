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
//! worker that runs a kept token's next task elsewhere moves back first (`Held::move_to_lease`). A task
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
//! **Blocked holders.** A task that blocks (I/O, a lock, another task) while its worker holds a
//! token would keep a CPU token from every cooperating pool without using a CPU. Each worker
//! publishes its hold (`WorkerStats::token_hold`: a number and the lease), and the controller,
//! at every tick of a dynamic pool (`control.rs`), takes back the token and lease of a worker
//! that has held the same hold since the last tick without running (its thread CPU clock did
//! not move) and is blocked now (state `S` or `D` in `/proc/self/task/<tid>/stat`; a holder
//! that waits for a CPU is `R` and keeps its token). Whoever swaps the published hold to 0
//! gives the token back: the controller (`PoolTokens::take_back_blocked`), or the worker when
//! the task ends (`Held`'s drop); the other does nothing, so a token is given back exactly once.
//! The rest of a task whose token was taken back runs without one, counted like a task that
//! got none (`ran_without`: that period the adaptive policy sizes against the neighbours
//! again) and in `Metrics::token_takebacks`. A fixed pool with tokens registers with the
//! controller for this (and for engaging a default set), and a pool draining in `shutdown`
//! stays registered until its workers have exited.
//!
//! **Engaged only while shared.** A pool on the default set (`crate::tokens`, `default.rs`)
//! is *gated*: it takes tokens only while the set is shared (`HostTokens::shared_now`: another
//! member process, or another pool of this process), re-read by the controller every period
//! (`refresh_engaged`). A lone process's workers read one atomic flag per task and make no
//! system call for tokens. A pool given a set explicitly is always engaged.
//!
//! [`Builder::host_tokens`]: super::Builder::host_tokens

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::worker::WorkerStats;
use crate::kfile::ThreadSchedstat;
use crate::metrics::Degradation;
use crate::tokens::{Acquired, HostTokens};

/// The default wait for a token before a task runs without one.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(1);
/// How often a waiting worker checks for `shutdown_now`.
const CANCEL_CHECK: Duration = Duration::from_millis(50);

pub(crate) struct PoolTokens {
    set: Arc<HostTokens>,
    /// Engaged only while the set is shared (the default set); `false`: always engaged.
    gated: bool,
    /// Whether workers take tokens now (set by the controller for a gated pool).
    engaged: AtomicBool,
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
    /// Tokens the controller took back from workers blocked while holding them
    /// (`take_back_blocked`).
    pub(crate) taken_back: AtomicU64,
    /// Token operations that failed (taking one: the task then runs without; giving one back),
    /// leases and moves to a leased CPU included (the task then runs where it is).
    pub(crate) errors: AtomicU64,
    /// Workers of this pool waiting for a token now (the status record's `token_waits`,
    /// `control/status.rs`).
    waiting: AtomicU64,
    /// The pool's name, for the warnings (logged by the controller too, outside the workers'
    /// span).
    pool: Arc<str>,
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
/// the CPU the worker runs on if it got one; dropping it gives both back, the lease first
/// (unless the controller took them back, "Blocked holders" above), and adds the worker's
/// run-queue wait while it held the token to its `token_wait_total`.
pub(crate) struct Held<'a> {
    tokens: &'a PoolTokens,
    stats: &'a WorkerStats,
    lease: Option<u32>,
    /// What this hold published in `stats.token_hold` ([`hold_word`]); 0: not published.
    hold: u64,
}

/// The low half of a published hold: the lease's CPU plus one (0: no lease).
const HOLD_LEASE_BITS: u64 = 0xffff_ffff;

/// The word a worker publishes while it holds a token: the hold's `number` (never 0 in the
/// high half, so the word is never 0) and its lease.
fn hold_word(number: u64, lease: Option<u32>) -> u64 {
    let number = (number & HOLD_LEASE_BITS).max(1);
    (number << 32) | lease.map_or(0, |cpu| u64::from(cpu) + 1)
}

/// The lease recorded in a published hold.
fn hold_lease(hold: u64) -> Option<u32> {
    ((hold & HOLD_LEASE_BITS) as u32).checked_sub(1)
}

impl<'a> Held<'a> {
    /// A token just taken by the worker whose counters are `stats`.
    fn new(tokens: &'a PoolTokens, stats: &'a WorkerStats) -> Self {
        match own_run_delay(stats) {
            Some(wait) => {
                stats.token_wait_since.store(wait.saturating_add(1), Ordering::Release);
                // Readable again after a failure (`ThreadSchedstat` tries again): the holders'
                // wait is known from this hold on.
                stats.token_wait_unknown.store(false, Ordering::Relaxed);
            }
            // The controller then has no holders' wait for this pool (`WorkerStats::token_wait_ns`)
            // until a later token's reading succeeds.
            None => stats.token_wait_unknown.store(true, Ordering::Relaxed),
        }
        Held { tokens, stats, lease: None, hold: 0 }
    }

    /// Makes the hold visible to the controller ("Blocked holders" above).
    fn publish(&mut self, number: u64) {
        self.hold = hold_word(number, self.lease);
        self.stats.token_hold.store(self.hold, Ordering::Release);
    }

    /// Whether the controller took this hold back (token and lease given back).
    fn taken_back(&self) -> bool {
        self.hold != 0 && self.stats.token_hold.load(Ordering::Acquire) != self.hold
    }

    /// Moves the worker to its leased CPU, or gives the lease back if it cannot (logged): after
    /// taking the token, and before the next task on a kept token, in case the worker no longer
    /// runs there (one `sched_getcpu`, answered without entering the kernel, when it does).
    pub(crate) fn move_to_lease(&mut self) {
        if let Some(cpu) = self.lease {
            if !self.tokens.move_to(cpu) {
                self.give_back_lease();
            }
        }
    }

    /// Gives the lease back alone, keeping the token; nothing if the controller took the hold
    /// back meanwhile (it gave the lease back with the token).
    fn give_back_lease(&mut self) {
        let Some(cpu) = self.lease.take() else { return };
        if self.hold != 0 {
            let without = self.hold & !HOLD_LEASE_BITS;
            if self
                .stats
                .token_hold
                .compare_exchange(self.hold, without, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return;
            }
            self.hold = without;
        }
        if let Err(e) = self.tokens.set.give_back_lease(cpu) {
            self.tokens.failed(&e);
        }
    }

    /// Whether no worker of any pool sharing the set waits for a token (two `semctl`s): then a
    /// worker with another task to run at once keeps this token, and its lease, for it,
    /// instead of giving both back and taking them again (four system calls, more when the
    /// worker's CPU is leased to another holder).
    /// A worker that waits before the check gets the token when this task ends, as without
    /// keeping; only one that starts waiting in the instant between the check and the next
    /// task's start gets it a task later than it would have.
    /// An error reads as "someone waits": the give-back then reports it. A token the
    /// controller took back is not kept (`false`).
    pub(crate) fn nobody_waits(&self) -> bool {
        !self.taken_back() && self.tokens.is_engaged() && matches!(self.tokens.set.waiting(), Ok(0))
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let since = self.stats.token_wait_since.load(Ordering::Acquire);
        if since != 0 {
            let now = own_run_delay(self.stats).unwrap_or(since - 1);
            let held = super::worker::holding_wait(0, since, now);
            // `since` cleared before the total grows, and read after it
            // (`WorkerStats::token_wait_ns`): one reading never counts the hold twice; one in
            // between sees less than the last one did (the controller keeps the larger).
            self.stats.token_wait_since.store(0, Ordering::Release);
            self.stats.token_wait_total.fetch_add(held, Ordering::Release);
        }
        if self.hold != 0
            && self
                .stats
                .token_hold
                .compare_exchange(self.hold, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            // The controller took token and lease back while the task was blocked.
            return;
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

/// The calling thread's run-queue wait so far, or `None` when it cannot be read now (tried
/// again later: `ThreadSchedstat`). A failure is counted in the worker's `stats`
/// (`Metrics::degradations`) and logged once.
fn own_run_delay(stats: &WorkerStats) -> Option<u64> {
    SCHEDSTAT.with_borrow_mut(|schedstat| {
        let schedstat = schedstat.get_or_insert_with(ThreadSchedstat::for_current_thread);
        let delay = schedstat.run_delay_ns();
        if let Some(why) = schedstat.take_failure() {
            Degradation::OwnSchedstat.record(&stats.degradations, &why);
        }
        delay
    })
}

impl PoolTokens {
    /// `allowed`: the CPUs whose leases the workers may take, ascending (empty: none).
    /// `gated`: engaged only while the set is shared (see the module documentation).
    pub(crate) fn new(
        pool: Arc<str>,
        set: Arc<HostTokens>,
        wait: Duration,
        allowed: Vec<u32>,
        gated: bool,
    ) -> PoolTokens {
        let allowed = if set.leases() == 0 { Vec::new() } else { allowed };
        set.pool_joined();
        let engaged = AtomicBool::new(!gated || set.shared_now());
        PoolTokens {
            set,
            gated,
            engaged,
            wait,
            allowed,
            timeouts: AtomicU64::new(0),
            ran_without: AtomicU64::new(0),
            fallback_periods: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            taken_back: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            pool,
            warned: AtomicBool::new(false),
            warned_move: AtomicBool::new(false),
        }
    }

    /// The set the pool shares (read by a metrics registry, `crate::metrics::Registry`, for the
    /// set's own gauges).
    pub(crate) fn set(&self) -> &Arc<HostTokens> {
        &self.set
    }

    /// Workers of this pool waiting for a token now.
    pub(crate) fn waiting_workers(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Whether the workers take tokens now (one atomic load: all a lone process pays per task).
    pub(crate) fn is_engaged(&self) -> bool {
        self.engaged.load(Ordering::Relaxed)
    }

    /// The controller, every period: a gated pool engages while its set is shared and
    /// disengages when it no longer is (tokens held then are given back as usual).
    pub(crate) fn refresh_engaged(&self) {
        if self.gated {
            self.engaged.store(self.set.shared_now(), Ordering::Relaxed);
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
                // Only the slow path counts itself: a token taken at once never waited.
                self.waiting.fetch_add(1, Ordering::Relaxed);
                let got = self.set.acquire_or_cancel(self.wait, CANCEL_CHECK, &cancelling);
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                (got, None)
            }
        };
        match got {
            Ok(Acquired::Token) if cancelling() => {
                // Given back at once (with the lease that came with it), without a hold to measure.
                drop(Held { tokens: self, stats, lease: leased, hold: 0 });
                Take::Cancelled
            }
            Ok(Acquired::Token) => {
                let number = self.taken.fetch_add(1, Ordering::Relaxed) + 1;
                // Held first: whatever happens while leasing, the token goes back.
                let mut held = Held::new(self, stats);
                held.lease = leased.or_else(|| self.lease());
                held.move_to_lease();
                held.publish(number);
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
    /// on; `None` (no leases, none free among the allowed CPUs, or an error): the worker runs
    /// where the kernel puts it.
    fn lease(&self) -> Option<u32> {
        if self.allowed.is_empty() {
            return None;
        }
        match self.take_lease() {
            Ok(Some(cpu)) => Some(cpu),
            Ok(None) => None,
            Err(e) => {
                self.failed(&e);
                None
            }
        }
    }

    /// Moves the calling worker to `cpu`, whose lease it holds; `false` (logged) if it cannot.
    fn move_to(&self, cpu: u32) -> bool {
        if let Err(e) = move_current_thread(cpu) {
            // The CPU left the process's set since the pool was built, say.
            self.failed_move(&format!(
                "moving a worker to CPU {cpu} failed ({e}); the task runs where it is"
            ));
            return false;
        }
        true
    }

    /// The controller, every tick ("Blocked holders" above): takes back the token and lease of
    /// each worker that has held the same hold since the last tick without running and is
    /// blocked now. `seen`: per worker, the hold and thread CPU time read at the last tick
    /// (the caller keeps it between ticks).
    pub(crate) fn take_back_blocked<'w>(
        &self,
        workers: impl ExactSizeIterator<Item = &'w WorkerStats>,
        seen: &mut Vec<(u64, u64)>,
    ) {
        seen.resize(workers.len(), (0, 0));
        for (worker, seen) in workers.zip(seen.iter_mut()) {
            let hold = worker.token_hold.load(Ordering::Acquire);
            let clock = worker.cpu_clock.load(Ordering::Acquire);
            let ran = match (hold, clock) {
                (0, _) | (_, 0) => None,
                _ => crate::sampler::clock_ns((clock - 1) as u32 as libc::clockid_t),
            };
            let Some(ran) = ran else {
                *seen = (0, 0);
                continue;
            };
            let before = std::mem::replace(seen, (hold, ran));
            if before != (hold, ran) || !thread_blocked(worker.tid.load(Ordering::Acquire)) {
                continue;
            }
            if worker.token_hold.compare_exchange(hold, 0, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                // Counted before the give-back: whoever gets the token next (and whatever it
                // tells others) sees the count already.
                self.taken_back.fetch_add(1, Ordering::Relaxed);
                self.ran_without.fetch_add(1, Ordering::Relaxed);
                let given_back = match hold_lease(hold) {
                    Some(cpu) => self.set.release_with_lease(cpu),
                    None => self.set.release(),
                };
                if let Err(e) = given_back {
                    self.failed(&e);
                }
                *seen = (0, 0);
            }
        }
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
            tracing::warn!(pool = %self.pool, "host tokens: {what}");
        }
    }

    fn failed(&self, e: &crate::tokens::TokensError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(pool = %self.pool, "{e}; this pool's tasks run without a host token while it fails");
        }
    }
}

impl Drop for PoolTokens {
    fn drop(&mut self) {
        self.set.pool_left();
    }
}

/// Whether thread `tid` of this process is blocked now (sleeping or in an uninterruptible
/// wait); `false` when that cannot be read.
fn thread_blocked(tid: u64) -> bool {
    tid != 0
        && std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
            .ok()
            .and_then(|text| crate::procfs::pidstat::parse(&text).ok())
            .is_some_and(|stat| stat.is_blocked())
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
    let mask = crate::affinity::Mask::of_current_thread()?;
    crate::affinity::pin_current_thread(cpu)?;
    mask.apply_to_current_thread().map_err(|e| {
        std::io::Error::new(e.kind(), format!("{e}, after binding it there: it stays bound to CPU {cpu}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::RemoveNamed;

    #[test]
    fn a_published_hold_is_never_zero_and_carries_its_lease() {
        assert_eq!(hold_lease(hold_word(7, Some(0))), Some(0));
        assert_eq!(hold_lease(hold_word(7, Some(1023))), Some(1023));
        assert_eq!(hold_lease(hold_word(7, None)), None);
        // The lease dropped from a hold (`give_back_lease`) leaves the hold's number.
        assert_eq!(hold_word(7, Some(3)) & !HOLD_LEASE_BITS, hold_word(7, None));
        for number in [0, 1, 1 << 32, u64::MAX] {
            assert_ne!(hold_word(number, None), 0, "number {number}");
        }
        assert_ne!(hold_word(1, Some(0)), hold_word(2, Some(0)), "successive holds differ");
    }

    #[test]
    #[cfg_attr(cotenant_force_fallback, ignore = "needs Linux: the host sampler and System V token sets")]
    fn a_holder_notes_its_run_queue_wait_from_taking_the_token_to_giving_it_back() {
        let name = format!("cotenant-test-holding-wait-{}", std::process::id());
        let _remove = RemoveNamed(name.clone());
        let set = Arc::new(HostTokens::open(&name, 1).unwrap());
        let tokens = PoolTokens::new(Arc::from("test"), set, Duration::from_secs(1), Vec::new(), false);
        let stats = WorkerStats::default();
        let Some(before) = own_run_delay(&stats) else {
            eprintln!("skipped: a kernel without schedstat");
            return;
        };
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
        let after = own_run_delay(&stats).unwrap();
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

//! The friendly pool (seed 000 §5.2, made production-grade): a fixed set of OS threads of
//! which only the first `target` run tasks; a process-wide controller re-decides the target
//! every period from what the neighbours and the quota leave us (see [`Policy`]).
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | [`Builder`], [`Pool`], submission and the rejection policies ([`Full`]), shutdown |
//! | `task.rs` | [`Task`] (joined, or awaited as a future) and [`JoinError`]: a task's result, panic or cancellation |
//! | `queue.rs` | the bounded MPMC queue |
//! | `sleep.rs` | the target, sleeping workers and wake-ups (protocol in `pool/README.md`) |
//! | `worker.rs` | the worker loop and per-worker counters |
//! | `borrow.rs` | borrowing an idle CPU between decisions (`policy/borrow.rs`) |
//! | `budget.rs` | the user-space CPU budget: slices, charging, parking at exhaustion, [`checkpoint`] |
//! | `host_tokens.rs` | the pool's side of the host CPU tokens (`crate::tokens`): take, give back, skip |
//! | `control.rs` | the process-wide control thread: sampler → policy → `set_target` |
//! | `elastic.rs` | elastic pools: per-task measurement, creating and retiring threads |

mod borrow;
#[cfg(not(loom))]
mod budget;
#[cfg(not(loom))]
pub(crate) mod control;
#[cfg(not(loom))]
mod elastic;
#[cfg(not(loom))]
mod host_tokens;
mod placement;
mod queue;
mod sleep;
mod task;
mod worker;

#[cfg(all(test, loom))]
#[path = "tests/loom_borrow.rs"]
mod loom_borrow;
#[cfg(all(test, loom))]
#[path = "tests/loom_budget.rs"]
mod loom_budget;
#[cfg(all(test, loom))]
#[path = "tests/loom_elastic.rs"]
mod loom_elastic;
#[cfg(all(test, loom))]
#[path = "tests/loom_protocol.rs"]
mod loom_protocol;
#[cfg(all(test, loom))]
#[path = "tests/loom_task.rs"]
mod loom_task;

use std::fmt;
use std::time::{Duration, Instant};

use crate::metrics::Metrics;
use crate::policy::elastic::ElasticConfig;
use crate::policy::Policy;
use crate::sync::{
    fence, lock, thread, wait, wait_timeout, AtomicBool, AtomicU64, AtomicUsize, CachePadded, Condvar, Mutex,
};
use crate::sync::{Arc, Ordering};
use borrow::Borrow;
use queue::Queue;
use sleep::Sleep;
use task::{failed_task, task_pair_in, Job, Outcome};
use worker::WorkerStats;

#[cfg(not(loom))]
pub use budget::checkpoint;
pub use placement::{background_current_thread, Background, Placement};
pub use task::{JoinError, Panic, Task};

/// The default queue capacity: room for a burst of a few thousand tasks without blocking the
/// submitter, small enough (about 100 KiB) that a forgotten pool does not hoard memory.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;

/// The shortest period accepted: a controller deciding more often than this would spend more
/// CPU deciding than it saves (and the kernel's counters do not move much faster).
pub const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The longest period accepted: a controller that decides less often than this cannot follow
/// neighbours at all.
pub const MAX_PERIOD: Duration = Duration::from_secs(10);

/// How long a submitter blocked on a full queue waits before it tries again even if no worker
/// woke it (`Shared::push_blocking`).
const BLOCKED_RETRY: Duration = Duration::from_millis(10);

/// How often the controller adds a point to a pool's health window (`crate::health`).
#[cfg(not(loom))]
const HEALTH_EVERY: Duration = Duration::from_secs(1);

/// What a submit does when the queue is full (the rejection policies of seed 002).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Full {
    /// Wait for room (the default: back-pressure on the producer, nothing lost). Waiting
    /// submitters are woken when the workers have drained the queue to half its capacity (one
    /// wake-up per half a queue of tasks, not one per task), and try again every 10 ms in any
    /// case. Submits waiting when the pool shuts down are rejected. A task of this pool that
    /// submits to its own full queue runs the new task itself rather than wait (it might be
    /// the only worker allowed to run, waiting for itself).
    #[default]
    Block,
    /// Run the task on the submitting thread, which slows the producer down by exactly the
    /// work it tried to add.
    CallerRuns,
    /// Refuse the task: [`Pool::spawn`] returns a task that fails with [`JoinError::Rejected`],
    /// [`Pool::execute`] drops it; both are counted in [`Metrics::rejected`].
    Reject,
}

/// Why a pool could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A builder argument was out of range; the text says which and why.
    InvalidArgument(String),
    /// The operating system refused to start a worker thread (the threads already started
    /// were stopped and joined).
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::InvalidArgument(why) => write!(f, "invalid pool configuration: {why}"),
            BuildError::Spawn(error) => write!(f, "could not start a worker thread: {error}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Spawn(error) => Some(error),
            BuildError::InvalidArgument(_) => None,
        }
    }
}

/// Why [`Pool::try_spawn`] refused a task (the closure is dropped without running).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrySpawnError {
    /// The queue was full.
    Full,
    /// The pool is shutting down or shut down.
    ShutDown,
}

impl fmt::Display for TrySpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySpawnError::Full => f.write_str("the pool's queue is full"),
            TrySpawnError::ShutDown => f.write_str("the pool is shut down"),
        }
    }
}

impl std::error::Error for TrySpawnError {}

/// Configures and starts a [`Pool`]. Every setting is optional.
///
/// ```
/// use std::time::Duration;
/// let pool = cotenant::Pool::builder()
///     .policy(cotenant::Policy::adaptive())
///     .threads(2)
///     .period(Duration::from_millis(10))
///     .queue_capacity(1024)
///     .on_full(cotenant::Full::Block)
///     .name("worker")
///     .build()
///     .unwrap();
/// assert_eq!(pool.threads(), 2);
/// assert!((1..=2).contains(&pool.target()));
/// pool.shutdown();
/// ```
#[derive(Debug, Clone)]
#[must_use = "a Builder does nothing until build() is called"]
pub struct Builder {
    policy: Policy,
    threads: Option<usize>,
    period: Option<Duration>,
    queue_capacity: usize,
    on_full: Full,
    name: String,
    pin_workers: bool,
    background: bool,
    cpu_budget: Option<(f64, Duration)>,
    budget_slush: bool,
    elastic: Option<ElasticConfig>,
    #[cfg(not(loom))]
    host_tokens: Option<Arc<crate::tokens::HostTokens>>,
    #[cfg(not(loom))]
    host_tokens_wait: Duration,
    #[cfg(not(loom))]
    host_tokens_leases: bool,
    #[cfg(not(loom))]
    host_tokens_size_to_neighbours: bool,
    /// `host_tokens_off`: no default set.
    #[cfg(not(loom))]
    host_tokens_off: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            policy: Policy::adaptive(),
            threads: None,
            period: None,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            on_full: Full::Block,
            name: "cotenant".to_owned(),
            pin_workers: false,
            background: false,
            cpu_budget: None,
            budget_slush: true,
            elastic: None,
            #[cfg(not(loom))]
            host_tokens: None,
            #[cfg(not(loom))]
            host_tokens_wait: host_tokens::DEFAULT_WAIT,
            #[cfg(not(loom))]
            host_tokens_leases: true,
            #[cfg(not(loom))]
            host_tokens_size_to_neighbours: false,
            #[cfg(not(loom))]
            host_tokens_off: false,
        }
    }
}

impl Builder {
    /// How the target is decided. Default: [`Policy::adaptive`].
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// OS threads to start. Default: the CPUs this process may run on (online ∩ affinity ∩
    /// cpuset, see [`crate::cpus`]), or `n` for [`Policy::fixed`]`(n)`.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// How often the controller re-decides the target. Default: one clock tick
    /// (`sysconf(_SC_CLK_TCK)`, 10 ms on most kernels), the granularity of the kernel's
    /// per-CPU time accounting. Checked (1 ms to 10 s) for every policy, used by all but
    /// [`Policy::fixed`].
    pub fn period(mut self, period: Duration) -> Self {
        self.period = Some(period);
        self
    }

    /// The most tasks that may wait in the queue. Default: [`DEFAULT_QUEUE_CAPACITY`].
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity;
        self
    }

    /// What a submit does when the queue is full. Default: [`Full::Block`].
    pub fn on_full(mut self, on_full: Full) -> Self {
        self.on_full = on_full;
        self
    }

    /// The worker threads' name prefix: workers are named `<name>-<index>`. Default: `cotenant`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Pin worker `i` to the `i`-th CPU this process may run on (its affinity mask at `build`,
    /// round robin when there are more workers than CPUs). Seed 003: pinning pays even without
    /// a neighbour, through warm caches. A binding the kernel refuses is logged and that worker
    /// runs unpinned; [`Pool::placement`] says which. Default: off.
    pub fn pin_workers(mut self, pin: bool) -> Self {
        self.pin_workers = pin;
        self
    }

    /// Run the workers at `SCHED_IDLE`, which the kernel schedules only on CPUs nothing else
    /// wants: for batch work that must never delay a latency-sensitive neighbour. Where
    /// `SCHED_IDLE` is refused the workers fall back to nice 19 (logged, and reported by
    /// [`Pool::placement`]). Default: off.
    ///
    /// `SCHED_IDLE` ranks threads only against the other threads of their own cgroup: a
    /// neighbour in another cgroup still meets this pool's cgroup at its full weight and gains
    /// little (`docs/background.md`, measured by `cotenant lab isolation`).
    /// Give the batch job a cgroup of its own marked idle (`cpu.idle` = 1); that, not this
    /// setting, is what protected the neighbour in the measurements.
    pub fn background(mut self, background: bool) -> Self {
        self.background = background;
        self
    }

    /// Caps the CPU time the workers use together at `cpus` CPUs' worth per `period`, in user
    /// space (no cgroup, no root): a worker takes a slice of CPU time from a shared budget
    /// before running tasks, charges what its thread CPU clock says it used, and parks until
    /// the next period when the budget is spent (seed 001 §IV, `docs/cpu-budget.md`).
    ///
    /// A running task cannot be interrupted: a slice overruns by up to the rest of the task,
    /// and the overrun is paid from what the previous period left unused (the slush fund),
    /// then from the next period. Long tasks can call [`checkpoint`] to park mid-task.
    /// Graceful [`shutdown`](Pool::shutdown) (and dropping the pool) keeps the budget: the
    /// queue drains at the budget's pace, and a pool that owes a large debt waits for the
    /// refills that pay it; [`shutdown_now`](Pool::shutdown_now) does not wait.
    /// `cpus` must be positive (at least 10 µs of CPU per period) and `period` between 1 ms
    /// and 1 s. Default: no budget.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = cotenant::Pool::builder()
    ///     .cpu_budget(1.5, Duration::from_millis(100))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(pool.spawn(|| 6 * 7).join().unwrap(), 42);
    /// assert!(pool.metrics().budget.is_some());
    /// ```
    pub fn cpu_budget(mut self, cpus: f64, period: Duration) -> Self {
        self.cpu_budget = Some((cpus, period));
        self
    }

    /// Whether an overrun of the CPU budget is paid first from the previous period's leftover
    /// (the slush fund, on by default) or, as the kernel does, entirely from the next period.
    /// An internal switch for `cotenant lab throttling`, not a tuning knob.
    #[doc(hidden)]
    pub fn cpu_budget_slush(mut self, slush: bool) -> Self {
        self.budget_slush = slush;
        self
    }

    /// An elastic pool for tasks that block (I/O, calls to other services): between `min` and
    /// `max` threads, sized every period by seed 002's formula, threads = Ncpu × U × (1 + W/C),
    /// with W/C measured on the pool's own tasks (wall time, thread CPU time and run-queue
    /// wait) and Ncpu the CPUs the pool's [`Policy`] allows it now (so it too gives way when
    /// the neighbours are busy). Without a backlog, Little's law (arrival rate × task time)
    /// bounds the size; with a backlog, the size also grows while the allowed CPUs sit idle.
    /// It grows at once and shrinks after 50 periods of wanting fewer threads (half a second
    /// at the default period; `policy::elastic`). `max` is at most 65 536.
    ///
    /// Why create and retire threads here when a CPU pool parks a fixed set: a CPU pool needs
    /// at most one thread per CPU, and a parked thread costs nothing. A blocking pool may need
    /// hundreds of threads under load and a handful when quiet; keeping hundreds parked would
    /// cost memory for their stacks all the time.
    ///
    /// Not combinable with [`threads`](Builder::threads), [`pin_workers`](Builder::pin_workers)
    /// or [`cpu_budget`](Builder::cpu_budget) (`build` says so). Default: not elastic.
    ///
    /// ```
    /// let pool = cotenant::Pool::builder().elastic(2, 64).build().unwrap();
    /// let sleepy = pool.spawn(|| std::thread::sleep(std::time::Duration::from_millis(1)));
    /// sleepy.join().unwrap();
    /// let elastic = pool.metrics().elastic.unwrap();
    /// assert_eq!((elastic.min, elastic.max), (2, 64));
    /// assert!((2..=64).contains(&pool.target()));
    /// ```
    pub fn elastic(mut self, min: usize, max: usize) -> Self {
        let to_u32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        self.elastic = Some(ElasticConfig::new(to_u32(min), to_u32(max)));
        self
    }

    /// Share the host's CPU tokens of `tokens` with the other pools that use the same set
    /// ([`HostTokens`](crate::tokens::HostTokens)), engaged at every task whoever else uses it.
    /// Without this call a pool shares this user's default set for its CPUs, engaged only while
    /// another process (or another pool of this one) shares it: see "Host tokens by default"
    /// below and [`host_tokens_off`](Builder::host_tokens_off).
    ///
    /// A worker holds a token while it runs a task,
    /// so that cooperating pools together never run more tasks at once than there are tokens
    /// (one per CPU), and a token one pool gives back wakes a worker waiting for one, in
    /// whichever pool (`docs/host-tokens.md`, with what it costs on a real kernel). A worker
    /// that gets no token within [`host_tokens_wait`](Builder::host_tokens_wait) runs its task
    /// without one and counts it in [`Metrics::token_timeouts`]. For CPU-bound tasks: a task
    /// that blocks holds its token until the controller sees it blocked for a whole period and
    /// takes the token back ([`Metrics::token_takebacks`]; fixed pools included), so not
    /// combinable with
    /// [`elastic`](Builder::elastic), nor with [`cpu_budget`](Builder::cpu_budget), whose
    /// parking would hold it too. Under
    /// [`Full::CallerRuns`] the submitter runs its task without a token. A task that joins
    /// another task of its pool runs queued tasks of the pool meanwhile (see [`Task::join`]).
    ///
    /// **Host tokens by default.** A pool built without `host_tokens` and without
    /// [`host_tokens_off`](Builder::host_tokens_off) opens this user's default set for the CPUs
    /// the process may run on (one set per user and CPU set, `default-<cpulist>`, one token per
    /// CPU; [`crate::tokens::default_set_name`]) and engages it only while another live process
    /// counts among the set's members, or another pool of this process uses it: a process
    /// alone takes no token and makes no system call for one. Engaging and disengaging follow
    /// within one controller period. Elastic, background and budgeted pools have no default
    /// set. Where no set can be had (System V IPC refused, a set on the key that another user
    /// made), the pool runs without tokens, says why once in the log, and shows it in
    /// [`Metrics::host_tokens`]. The environment decides for every default pool of the process:
    /// `COTENANT_TOKENS=off` turns the default set off, `COTENANT_TOKENS_SET=NAME` names another
    /// set (services that should cooperate apart from the rest).
    ///
    /// With tokens, [`Policy::adaptive`] no longer sizes the pool against its neighbours
    /// ([`Policy::sharing_host_tokens`]; opt out with
    /// [`host_tokens_size_to_neighbours`](Builder::host_tokens_size_to_neighbours)): the tokens
    /// bound what the cooperating pools run, and a CPU a neighbour leaves idle serves this
    /// pool's next task at once.
    ///
    /// With a token a worker also leases a CPU of its own and moves there before the task (see
    /// [`host_tokens_leases`](Builder::host_tokens_leases)); the task runs with the worker's
    /// own CPU mask, not bound to that CPU.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let tokens = Arc::new(cotenant::tokens::HostTokens::private(2).unwrap());
    /// let pool = cotenant::Pool::builder().host_tokens(tokens.clone()).build().unwrap();
    /// assert_eq!(pool.spawn(|| 6 * 7).join().unwrap(), 42);
    /// pool.shutdown();
    /// assert_eq!(tokens.available().unwrap(), 2, "every token is back");
    /// ```
    #[cfg(not(loom))]
    pub fn host_tokens(mut self, tokens: Arc<crate::tokens::HostTokens>) -> Self {
        self.host_tokens = Some(tokens);
        self
    }

    /// No host tokens: neither the default set nor one given with
    /// [`host_tokens`](Builder::host_tokens). The pool then sizes itself against its neighbours
    /// with its policy alone (`COTENANT_TOKENS=off` does the same for every default pool of the
    /// process).
    ///
    /// ```
    /// let pool = cotenant::Pool::builder().host_tokens_off().build().unwrap();
    /// assert_eq!(pool.metrics().host_tokens, cotenant::metrics::TokenState::Off);
    /// ```
    #[cfg(not(loom))]
    pub fn host_tokens_off(mut self) -> Self {
        self.host_tokens = None;
        self.host_tokens_off = true;
        self
    }

    /// How long a worker of a [`host_tokens`](Builder::host_tokens) pool waits for a token
    /// before it runs its task without one (counted in [`Metrics::token_timeouts`]). Tokens
    /// are handed over roughly in arrival order, so a wait lasts about (waiting workers / tokens) ×
    /// task time: raise the limit above that for long tasks on a crowded host, or tasks will run
    /// without tokens exactly when the host is busiest. At least 1 ms. Default: 1 s.
    #[cfg(not(loom))]
    pub fn host_tokens_wait(mut self, wait: Duration) -> Self {
        self.host_tokens_wait = wait;
        self
    }

    /// Whether a [`host_tokens`](Builder::host_tokens) pool's worker leases a CPU with its token
    /// and moves there before the task (`docs/host-tokens.md`, "CPU leases"): without leases the
    /// kernel may place two holders on one CPU while another idles, for a scheduler tick
    /// (twice the service time at p99 on the test VM). The move costs nothing when the worker
    /// is already on its leased CPU, the usual case, and three system calls otherwise; the
    /// task is not bound there. Workers pinned for good
    /// ([`pin_workers`](Builder::pin_workers)) never lease. Default: on.
    #[cfg(not(loom))]
    pub fn host_tokens_leases(mut self, leases: bool) -> Self {
        self.host_tokens_leases = leases;
        self
    }

    /// Whether a [`host_tokens`](Builder::host_tokens) pool's adaptive policy keeps sizing
    /// itself against its neighbours' CPU use, as without tokens. Turn on when the neighbours
    /// that matter do *not* share the tokens (the policy cannot tell them apart): the pool
    /// then stays off the CPUs they were using lately, at the price of the idle CPUs of the
    /// neighbours that do. Default: off ([`Policy::sharing_host_tokens`]).
    #[cfg(not(loom))]
    pub fn host_tokens_size_to_neighbours(mut self, size: bool) -> Self {
        self.host_tokens_size_to_neighbours = size;
        self
    }

    /// Starts the threads (and registers with the controller unless the policy is fixed).
    #[cfg_attr(loom, allow(unused_mut))]
    pub fn build(mut self) -> Result<Pool, BuildError> {
        let invalid = |why: String| Err(BuildError::InvalidArgument(why));
        if let Err(why) = self.policy.validate() {
            return invalid(why);
        }
        // The set the pool shares: the one given, or this user's default set, which is engaged
        // only while shared (`PoolTokens::gated`).
        #[cfg(not(loom))]
        let (tokens, tokens_state) = self.tokens_to_share();
        // Neighbours that share the tokens cannot overcommit the host with us: the adaptive
        // policy stops sizing the pool against them (`Policy::sharing_host_tokens`).
        // In a period in which a task runs without a token, or the tokens are not engaged,
        // the controller goes back to the policy as given (`unshared_policy`, `control.rs`).
        #[cfg(not(loom))]
        let unshared_policy = if tokens.is_some() && !self.host_tokens_size_to_neighbours {
            let given = std::mem::take(&mut self.policy);
            self.policy = given.clone().sharing_host_tokens();
            (self.policy != given).then_some(given)
        } else {
            None
        };
        if let Some(config) = &self.elastic {
            if let Err(why) = config.validate() {
                return invalid(why);
            }
            let conflict = if self.threads.is_some() {
                Some("threads (an elastic pool sizes itself between min and max)")
            } else if self.pin_workers {
                Some("pin_workers (an elastic pool's threads come and go)")
            } else if self.cpu_budget.is_some() {
                Some("cpu_budget")
            } else {
                None
            };
            if let Some(conflict) = conflict {
                return invalid(format!("elastic pools do not support {conflict}"));
            }
            #[cfg(not(loom))]
            if self.host_tokens.is_some() {
                return invalid(
                    "elastic pools do not support host_tokens (their tasks block, and would hold CPU tokens while blocked)"
                        .into(),
                );
            }
        }
        #[cfg(not(loom))]
        if self.host_tokens.is_some() {
            if self.cpu_budget.is_some() {
                return invalid(
                    "host_tokens and cpu_budget do not combine (a task parked until the budget's refill would hold its CPU token)"
                        .into(),
                );
            }
            if self.host_tokens_wait < Duration::from_millis(1) {
                return invalid(format!(
                    "host_tokens_wait must be at least 1ms, got {:?}",
                    self.host_tokens_wait
                ));
            }
        }
        let threads = match (self.elastic, self.threads, self.policy.fixed_target()) {
            (Some(config), _, _) => config.max as usize,
            (None, Some(threads), _) => threads,
            (None, None, Some(fixed)) => fixed,
            (None, None, None) => default_threads(),
        };
        if threads == 0 {
            return invalid("threads must be at least 1, got 0".into());
        }
        if let (Some(fixed), None) = (self.policy.fixed_target(), self.elastic) {
            if fixed > threads {
                return invalid(format!(
                    "Policy::fixed({fixed}) asks for more workers than threads({threads})"
                ));
            }
        }
        if self.queue_capacity == 0 {
            return invalid("queue_capacity must be at least 1, got 0".into());
        }
        let period = self.period.unwrap_or_else(default_period);
        if period < MIN_PERIOD || period > MAX_PERIOD {
            return invalid(format!(
                "period must be between {MIN_PERIOD:?} and {MAX_PERIOD:?}, got {period:?}"
            ));
        }
        if self.name.contains('\0') {
            return invalid("name must not contain a NUL byte".into());
        }
        #[cfg(not(loom))]
        let budget = match self.cpu_budget {
            None => None,
            Some((cpus, _)) if !cpus.is_finite() || cpus <= 0.0 => {
                return invalid(format!("cpu_budget: cpus must be a positive number, got {cpus}"));
            }
            Some((_, budget_period))
                if budget_period < Duration::from_millis(1) || budget_period > Duration::from_secs(1) =>
            {
                return invalid(format!(
                    "cpu_budget: period must be between 1ms and 1s, got {budget_period:?}"
                ));
            }
            Some((cpus, budget_period)) => {
                match budget::Budget::new(cpus, budget_period, threads, self.budget_slush) {
                    Ok(budget) => Some(Arc::new(budget)),
                    Err(why) => return invalid(format!("cpu_budget: {why}")),
                }
            }
        };
        // Dynamic policies start with every worker allowed (all threads are ours until the
        // first sample says otherwise); the controller corrects it within one period. An
        // elastic pool starts at its minimum size.
        let initial_target = match self.elastic {
            Some(config) => config.min as usize,
            None => self.policy.fixed_target().unwrap_or(threads),
        };
        // An elastic pool starts its first `min` threads here, the controller the others.
        let started = initial_target.min(threads);
        let controlled = self.policy.fixed_target().is_none() || self.elastic.is_some();
        // A fixed pool with tokens registers too: the controller takes back its blocked
        // holders' tokens and engages or disengages a default set (`control.rs`).
        #[cfg(not(loom))]
        let controlled = controlled || tokens.is_some();
        // The CPU mask, read once for pinning and CPU leases (workers pinned for good take no
        // leases); unreadable, it turns both off, counted in `Metrics::degradations` and logged.
        #[cfg(not(loom))]
        let wants_mask = self.pin_workers || (tokens.is_some() && self.host_tokens_leases);
        #[cfg(loom)]
        let wants_mask = self.pin_workers;
        let (mask_cpus, mask_lost) = if wants_mask { read_affinity() } else { (Vec::new(), false) };
        let shared = Arc::new(Shared {
            queue: Queue::new(self.queue_capacity),
            sleep: Sleep::new(threads, initial_target),
            gate: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            cancelling: AtomicBool::new(false),
            on_full: self.on_full,
            dynamic: controlled,
            borrow: Borrow::new(self.policy.fixed_target().is_none()),
            borrows: AtomicU64::new(0),
            blocked: AtomicUsize::new(0),
            blocked_lock: Mutex::new(()),
            not_full: Condvar::new(),
            workers: (0..threads).map(|_| CachePadded(WorkerStats::default())).collect(),
            live: Mutex::new(if self.elastic.is_some() { started } else { threads }),
            exited: Condvar::new(),
            rejected: AtomicU64::new(0),
            caller_ran: AtomicU64::new(0),
            decisions: AtomicU64::new(0),
            sample_errors: AtomicU64::new(0),
            degradations: std::sync::atomic::AtomicU64::new(u64::from(mask_lost)),
            epoch: Instant::now(),
            #[cfg(not(loom))]
            budget,
            #[cfg(not(loom))]
            host_tokens: tokens.map(|(set, gated)| {
                // Workers pinned for good take no CPU leases (`host_tokens.rs`).
                let leases_on =
                    if self.pin_workers || !self.host_tokens_leases { Vec::new() } else { mask_cpus.clone() };
                host_tokens::PoolTokens::new(set, self.host_tokens_wait, leases_on, gated)
            }),
            #[cfg(not(loom))]
            tokens_state,
            #[cfg(not(loom))]
            elastic: self
                .elastic
                .map(|config| elastic::Elastic::new(config, self.name.clone(), self.background)),
            #[cfg(loom)]
            elastic: self.elastic.is_some(),
            #[cfg(not(loom))]
            health: std::sync::Mutex::new(crate::health::Health::new(Default::default())),
            #[cfg(not(loom))]
            health_at_ns: AtomicU64::new(0),
        });
        let started = if self.elastic.is_some() { started } else { threads };
        let allowed = if self.pin_workers { mask_cpus } else { Vec::new() };
        let placing = self.pin_workers || self.background;
        let (placed_tx, placed_rx) = std::sync::mpsc::channel::<placement::Outcome>();
        let mut handles = Vec::with_capacity(started);
        for index in 0..started {
            shared.workers[index].occupied.store(true, std::sync::atomic::Ordering::Release);
            let worker_shared = shared.clone();
            let request =
                placement::Request { cpu: placement::cpu_for(index, &allowed), background: self.background };
            let placed_tx = placed_tx.clone();
            match thread::spawn_named(format!("{}-{index}", self.name), move || {
                if placing {
                    let _ = placed_tx.send(placement::apply(index, &request));
                }
                drop(placed_tx);
                worker::run(worker_shared, index)
            }) {
                Ok(handle) => handles.push(handle),
                Err(error) => {
                    *lock(&shared.live) -= started - index;
                    shared.close(true);
                    for handle in handles {
                        let _ = handle.join();
                    }
                    return Err(BuildError::Spawn(error));
                }
            }
        }
        drop(placed_tx);
        #[cfg(not(loom))]
        if let Some(elastic) = &shared.elastic {
            elastic.started.store(started as u64, Ordering::Relaxed);
        }
        let mut placement = Placement::default();
        if placing {
            let mut outcomes: Vec<placement::Outcome> = placed_rx.iter().take(started).collect();
            outcomes.sort_by_key(|o| o.index);
            if self.pin_workers {
                placement.pinned = outcomes.iter().map(|o| o.cpu).collect();
            }
            placement.background = placement::weakest(outcomes.into_iter().filter_map(|o| o.background));
        }
        #[cfg(not(loom))]
        let control = if controlled {
            // An elastic pool's CPU policy decides CPUs, not threads: at most the allowed CPUs
            // (or `n` for `Policy::fixed(n)`).
            let policy_threads = match (self.elastic, self.policy.fixed_target()) {
                (None, _) => threads,
                (Some(_), Some(fixed)) => fixed,
                (Some(_), None) => default_threads(),
            };
            Some(control::register(&shared, self.policy.clone(), unshared_policy, period, policy_threads))
        } else {
            None
        };
        Ok(Pool {
            shared,
            handles: Mutex::new(handles),
            threads,
            policy: self.policy,
            period,
            name: self.name,
            placement,
            #[cfg(not(loom))]
            control,
        })
    }
}

#[cfg(not(loom))]
impl Builder {
    /// The set this pool shares and whether it is gated (engaged only while shared), or why
    /// it shares none (`Metrics::host_tokens`).
    fn tokens_to_share(
        &self,
    ) -> (Option<(Arc<crate::tokens::HostTokens>, bool)>, crate::metrics::TokenState) {
        use crate::metrics::TokenState;
        use crate::tokens::DefaultTokens;
        if let Some(set) = &self.host_tokens {
            return (Some((set.clone(), false)), TokenState::Engaged);
        }
        // Pools whose tasks block or park would hold tokens without using a CPU; a background
        // pool runs only on CPUs nobody else wants, so it has no business taking their tokens.
        if self.host_tokens_off || self.elastic.is_some() || self.cpu_budget.is_some() || self.background {
            return (None, TokenState::Off);
        }
        match crate::tokens::for_default_pool() {
            DefaultTokens::On(set) => (Some((set, true)), TokenState::Alone),
            DefaultTokens::Off => (None, TokenState::Off),
            DefaultTokens::Unavailable => (None, TokenState::Unavailable),
        }
    }
}

/// The CPUs this process may run on: `cpus::detect()`'s allowed CPUs, or what the standard
/// library reports when detection fails (it reads the affinity mask too).
fn default_threads() -> usize {
    #[cfg(not(loom))]
    if let Ok(budget) = crate::cpus::detect() {
        return budget.allowed_cpus().max(1) as usize;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPUs in the calling thread's affinity mask (which the kernel keeps within the cgroup's
/// cpuset), ascending, read in a buffer sized from the kernel (`crate::affinity`); empty when
/// it cannot be read (the caller decides what that turns off).
#[cfg(not(loom))]
pub(crate) fn affinity_cpus() -> Vec<u32> {
    crate::affinity::current_thread_cpus().unwrap_or_default()
}

/// The CPU mask for `build`, and whether it could not be read: pinning and CPU leases are then
/// off for the pool, which counts it (`Shared::degradations`), and the first such failure in
/// the process is logged with its reason.
fn read_affinity() -> (Vec<u32>, bool) {
    #[cfg(not(loom))]
    {
        match crate::affinity::current_thread_cpus() {
            Ok(cpus) => (cpus, false),
            Err(error) => {
                crate::metrics::Degradation::AffinityUnreadable.log_once(&error);
                (Vec::new(), true)
            }
        }
    }
    // Under loom the workers are model threads: nothing to pin.
    #[cfg(loom)]
    {
        (Vec::new(), false)
    }
}

/// One clock tick: `1 s / sysconf(_SC_CLK_TCK)` (the reference implementation divided by the
/// constant `_SC_CLK_TCK`, the *name* of the setting, and got 500 ms).
pub fn default_period() -> Duration {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        Duration::from_nanos(1_000_000_000 / ticks as u64)
    } else {
        Duration::from_millis(10)
    }
}

/// The highest bit of `Shared::gate`: set once the pool stops accepting tasks. The other bits
/// count submits in progress, so that shutdown can wait until no push is in flight.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// State shared by the pool handle, its workers and the controller.
pub(crate) struct Shared {
    queue: Queue<Job>,
    pub(crate) sleep: Sleep,
    gate: AtomicUsize,
    stopped: AtomicBool,
    cancelling: AtomicBool,
    on_full: Full,
    /// Whether a controller decides the target (a submit then wakes a napping controller).
    #[cfg_attr(loom, allow(dead_code))]
    dynamic: bool,
    pub(crate) borrow: Borrow,
    /// Workers woken beyond the target (see `borrow.rs`).
    borrows: AtomicU64,
    /// Submitters waiting for room (`Full::Block`), and what they wait on.
    blocked: AtomicUsize,
    blocked_lock: Mutex<()>,
    not_full: Condvar,
    pub(crate) workers: Box<[CachePadded<WorkerStats>]>,
    /// Worker threads that have not exited yet, and what `stop` waits on: whoever calls
    /// `shutdown` second (or from a task) still returns only once every worker is gone.
    live: Mutex<usize>,
    exited: Condvar,
    rejected: AtomicU64,
    caller_ran: AtomicU64,
    pub(crate) decisions: AtomicU64,
    pub(crate) sample_errors: AtomicU64,
    /// Features turned off or readings missed because the kernel refused a read, counted by
    /// `build` and the controller (the workers count theirs in `WorkerStats::degradations`):
    /// `Metrics::degradations`, `crate::metrics::Degradation`.
    pub(crate) degradations: std::sync::atomic::AtomicU64,
    pub(crate) epoch: Instant,
    /// The user-space CPU budget, if the pool has one (`budget.rs`).
    #[cfg(not(loom))]
    pub(crate) budget: Option<Arc<budget::Budget>>,
    /// The host's CPU tokens, if the pool shares them (`host_tokens.rs`).
    #[cfg(not(loom))]
    pub(crate) host_tokens: Option<host_tokens::PoolTokens>,
    /// Why the pool has no tokens, or (with tokens) the state at build (`Metrics::host_tokens`).
    #[cfg(not(loom))]
    tokens_state: crate::metrics::TokenState,
    /// An elastic pool's settings and counters (`elastic.rs`).
    #[cfg(not(loom))]
    pub(crate) elastic: Option<elastic::Elastic>,
    /// Under loom: whether the pool is elastic (its retirement is modelled without the meter).
    #[cfg(loom)]
    elastic: bool,
    /// The health alerts' sliding window (`crate::health`), and when it last got a point
    /// (ns since `epoch`).
    #[cfg(not(loom))]
    health: std::sync::Mutex<crate::health::Health>,
    #[cfg(not(loom))]
    health_at_ns: AtomicU64,
}

enum Refused {
    Full(Job),
    ShutDown(Job),
}

impl Shared {
    /// The pool accepts nothing more and no submit is in flight: workers drain and exit.
    /// Set by `close` only after the last in-flight push finished, so a worker that sees it
    /// and then an empty queue can exit without stranding a task.
    pub(crate) fn is_closed(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Closed, and no submit is between its gate check and its push.
    fn is_quiet(&self) -> bool {
        self.gate.load(Ordering::SeqCst) == CLOSED
    }

    fn is_cancelling(&self) -> bool {
        self.cancelling.load(Ordering::Relaxed)
    }

    /// Whether the calling thread is one of this pool's workers.
    pub(crate) fn is_own_worker(&self) -> bool {
        #[cfg(not(loom))]
        {
            worker::CURRENT_POOL.with(|current| current.get() == self as *const Shared as usize)
        }
        #[cfg(loom)]
        {
            false
        }
    }

    /// Whether this is an elastic pool (its workers above the target retire).
    pub(crate) fn is_elastic(&self) -> bool {
        #[cfg(not(loom))]
        {
            self.elastic.is_some()
        }
        #[cfg(loom)]
        {
            self.elastic
        }
    }

    /// Called by an elastic pool's worker that exits because it is above the size.
    pub(crate) fn worker_retired(&self) {
        #[cfg(not(loom))]
        if let Some(elastic) = &self.elastic {
            elastic.retired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Called by each worker thread as it exits.
    pub(crate) fn worker_exited(&self) {
        *lock(&self.live) -= 1;
        self.exited.notify_all();
    }

    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Step P (README): one attempt to enqueue; on success wakes an allowed sleeper if any.
    fn push(&self, job: Job) -> Result<(), Refused> {
        if self.gate.fetch_add(1, Ordering::SeqCst) & CLOSED != 0 {
            self.gate.fetch_sub(1, Ordering::SeqCst);
            return Err(Refused::ShutDown(job));
        }
        let result = match self.queue.push(job) {
            Ok(()) => {
                // Pairs with the fences in `Sleep::sleep` and `Sleep::set_target`.
                fence(Ordering::SeqCst);
                if !self.sleep.wake_one_allowed() {
                    self.maybe_borrow();
                }
                #[cfg(not(loom))]
                if self.dynamic {
                    control::nudge();
                }
                #[cfg(not(loom))]
                if let Some(elastic) = &self.elastic {
                    elastic.arrivals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(())
            }
            Err(job) => Err(Refused::Full(job)),
        };
        self.gate.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Enqueues under the pool's [`Full`] policy. `Err` gives back a job that must not run.
    fn submit(&self, job: Job) -> Result<(), JoinError> {
        let job = match self.push(job) {
            Ok(()) => return Ok(()),
            Err(Refused::ShutDown(job)) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                drop(job);
                return Err(JoinError::Rejected);
            }
            Err(Refused::Full(job)) => job,
        };
        match self.on_full {
            // A worker of this pool waiting for room in its own queue could wait forever (it
            // may be the only allowed worker): it runs the task itself instead.
            Full::Block if self.is_own_worker() => {
                self.caller_ran.fetch_add(1, Ordering::Relaxed);
                if job.run() == Outcome::Panicked {
                    self.workers[0].panicked.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
            Full::Block => self.push_blocking(job),
            Full::CallerRuns => {
                self.caller_ran.fetch_add(1, Ordering::Relaxed);
                // The job resolves its own Task; a panic is caught inside it.
                if job.run() == Outcome::Panicked {
                    self.workers[0].panicked.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
            Full::Reject => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                drop(job);
                Err(JoinError::Rejected)
            }
        }
    }

    /// Waits for room in the queue (`Full::Block`); rejected if the pool closes meanwhile.
    fn push_blocking(&self, mut job: Job) -> Result<(), JoinError> {
        loop {
            self.blocked.fetch_add(1, Ordering::SeqCst);
            let guard = lock(&self.blocked_lock);
            // Retry after registering: a worker that pops from now on will see `blocked` and
            // notify under `blocked_lock`, which we hold until `wait` releases it.
            match self.push(job) {
                Ok(()) => {
                    drop(guard);
                    self.blocked.fetch_sub(1, Ordering::SeqCst);
                    return Ok(());
                }
                Err(Refused::ShutDown(refused)) => {
                    drop(guard);
                    self.blocked.fetch_sub(1, Ordering::SeqCst);
                    self.rejected.fetch_add(1, Ordering::Relaxed);
                    drop(refused);
                    return Err(JoinError::Rejected);
                }
                Err(Refused::Full(back)) => job = back,
            }
            // The timeout is a backstop, not the protocol: producers that never block
            // (`try_spawn`, tasks of this pool) can keep the queue above half full, and a
            // blocked submitter must still get its turn.
            drop(wait_timeout(&self.not_full, guard, BLOCKED_RETRY));
            self.blocked.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A worker took a task: if submitters wait for room and the queue is at most half full,
    /// wake them all (they also retry every `BLOCKED_RETRY`).
    ///
    /// Why half: waking a blocked submitter at every pop costs a wake-up and a context switch
    /// per task, and on a shared host those wake-ups land on the neighbours' CPUs (a background
    /// pool's feeder woken at every pop gave a neighbour's p99 tens of milliseconds; RESULTS.md,
    /// "isolation"). Waking at half lets a submitter refill half the queue per wake-up while
    /// the workers still have half of it to run. No wake-up is lost: a submitter registers in
    /// `blocked` before its last try, so while it waits the queue was full after it registered,
    /// and the workers pop until the queue is empty; one of those pops leaves it at most half
    /// full and sees `blocked` (the fence pairs with `push_blocking`'s registration).
    fn after_pop(&self) {
        if self.on_full != Full::Block {
            return;
        }
        fence(Ordering::SeqCst);
        if self.blocked.load(Ordering::SeqCst) > 0 && self.queue.len() <= self.queue.capacity() / 2 {
            let _guard = lock(&self.blocked_lock);
            self.not_full.notify_all();
        }
    }

    /// Stops accepting; waits out in-flight submits; cancels the queue if `cancel`; wakes
    /// everyone. Idempotent.
    fn close(&self, cancel: bool) {
        if cancel {
            self.cancelling.store(true, Ordering::SeqCst);
            #[cfg(not(loom))]
            if let Some(budget) = &self.budget {
                budget.cancel();
            }
        }
        self.gate.fetch_or(CLOSED, Ordering::SeqCst);
        while !self.is_quiet() {
            thread::yield_now();
        }
        self.stopped.store(true, Ordering::SeqCst);
        if cancel {
            while let Some(job) = self.queue.pop() {
                drop(job); // resolves its Task as Cancelled
            }
        }
        {
            let _guard = lock(&self.blocked_lock);
            self.not_full.notify_all();
        }
        self.sleep.wake_all();
    }

    /// The pool's counters and gauges now (alerts not evaluated).
    pub(crate) fn snapshot(&self) -> Metrics {
        let shared = self;
        let sum = |f: fn(&WorkerStats) -> u64| shared.workers.iter().map(|w| f(w)).sum::<u64>();
        Metrics {
            threads: shared.workers.len(),
            target: shared.sleep.target(),
            running: shared.running(),
            queued: shared.queue.len(),
            queue_capacity: shared.queue.capacity(),
            completed: sum(|w| w.completed.load(Ordering::Relaxed))
                + shared.caller_ran.load(Ordering::Relaxed),
            caller_ran: shared.caller_ran.load(Ordering::Relaxed),
            rejected: shared.rejected.load(Ordering::Relaxed),
            panicked: sum(|w| w.panicked.load(Ordering::Relaxed)),
            decisions: shared.decisions.load(Ordering::Relaxed),
            sample_errors: shared.sample_errors.load(Ordering::Relaxed),
            borrows: shared.borrows.load(Ordering::Relaxed),
            degradations: shared.degradations.load(std::sync::atomic::Ordering::Relaxed)
                + sum(|w| w.degradations.load(std::sync::atomic::Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_timeouts: shared.host_tokens.as_ref().map_or(0, |t| t.timeouts.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_takes: shared.host_tokens.as_ref().map_or(0, |t| t.taken.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_errors: shared.host_tokens.as_ref().map_or(0, |t| t.errors.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_fallback_periods: shared
                .host_tokens
                .as_ref()
                .map_or(0, |t| t.fallback_periods.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            token_takebacks: shared.host_tokens.as_ref().map_or(0, |t| t.taken_back.load(Ordering::Relaxed)),
            #[cfg(not(loom))]
            host_tokens: match &shared.host_tokens {
                Some(tokens) if tokens.is_engaged() => crate::metrics::TokenState::Engaged,
                Some(_) => crate::metrics::TokenState::Alone,
                None => shared.tokens_state,
            },
            #[cfg(loom)]
            token_takebacks: 0,
            #[cfg(loom)]
            token_timeouts: 0,
            #[cfg(loom)]
            token_fallback_periods: 0,
            #[cfg(loom)]
            token_takes: 0,
            #[cfg(loom)]
            token_errors: 0,
            #[cfg(loom)]
            host_tokens: crate::metrics::TokenState::Off,
            #[cfg(not(loom))]
            budget: shared.budget.as_ref().map(|budget| crate::metrics::BudgetMetrics {
                quota_ns: budget.bandwidth.quota_ns(),
                period_ns: budget.bandwidth.period_ns(),
                periods: budget.periods(),
                throttled_periods: budget.bandwidth.throttled_periods(),
                short_periods: budget.bandwidth.short_periods(),
                charged_ns: budget.bandwidth.charged_ns(),
            }),
            #[cfg(loom)]
            budget: None,
            #[cfg(not(loom))]
            elastic: shared.elastic.as_ref().map(|elastic| {
                use std::sync::atomic::Ordering::Relaxed;
                crate::metrics::ElasticMetrics {
                    min: elastic.config.min as usize,
                    max: elastic.config.max as usize,
                    live: *lock(&shared.live),
                    started: elastic.started.load(Relaxed),
                    retired: elastic.retired.load(Relaxed),
                    cpus: elastic.cpus.load(Relaxed),
                    task_cpu_ns: elastic.compute_ns.load(Relaxed),
                    task_wait_ns: elastic.wait_ns.load(Relaxed),
                }
            }),
            #[cfg(loom)]
            elastic: None,
            alerts: crate::health::Alerts::default(),
        }
    }

    /// Adds `metrics` to the health window and logs each alert that changed, once.
    #[cfg(not(loom))]
    pub(crate) fn observe_health(&self, metrics: &Metrics) -> crate::health::Alerts {
        let now = self.epoch.elapsed();
        self.health_at_ns.store(u64::try_from(now.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        let mut health = self.health.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for transition in health.observe(now, metrics) {
            let alert = transition.alert.as_str();
            if transition.raised {
                tracing::warn!(alert, advice = transition.alert.advice(), %metrics, "cotenant pool alert raised");
            } else {
                tracing::info!(alert, %metrics, "cotenant pool alert cleared");
            }
        }
        health.alerts()
    }

    /// The controller's call each period: a health point at most every `HEALTH_EVERY`, so that
    /// alerts are logged even when nobody reads the metrics.
    #[cfg(not(loom))]
    pub(crate) fn health_tick(&self) {
        let now = worker::nanos_since(self.epoch);
        let last = self.health_at_ns.load(Ordering::Relaxed);
        if last == 0 || now.saturating_sub(last) >= HEALTH_EVERY.as_nanos() as u64 {
            let metrics = self.snapshot();
            self.observe_health(&metrics);
        }
    }

    pub(crate) fn running(&self) -> usize {
        self.workers.iter().filter(|worker| worker.is_busy()).count()
    }

    /// Step B (`borrow.rs`): a task waits, no allowed worker sleeps; if every allowed worker
    /// is busy and a CPU is idle now, wake one worker beyond the target for it. Called by a
    /// submit that woke nobody and by an allowed worker that finished a task with more
    /// queued. Purely additive: the allowed workers still take the task if nobody is borrowed.
    pub(crate) fn maybe_borrow(&self) {
        let limit = self.borrow.limit().min(self.workers.len());
        let target = self.sleep.target();
        if limit <= target || self.queue.is_empty() {
            return;
        }
        // An allowed worker that is not busy is spinning or about to pop: it will take it.
        if self.workers[..target].iter().any(|worker| !worker.is_busy()) {
            return;
        }
        if !self.borrow.submit_may_borrow(worker::nanos_since(self.epoch), self.is_own_worker()) {
            return;
        }
        if self.sleep.wake_borrower(limit, |index| self.workers[index].borrowed.store(true, Ordering::SeqCst))
        {
            self.borrows.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A thread pool that runs only as many workers as its neighbours and its quota leave room for.
///
/// `Pool` is `Send + Sync`: share it behind an `Arc`. Dropping it is a graceful
/// [`shutdown`](Pool::shutdown): queued tasks run, then the threads are joined.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// let pool = cotenant::Pool::builder().build().unwrap();
/// let sum = Arc::new(AtomicU64::new(0));
/// for i in 1..=100u64 {
///     let sum = sum.clone();
///     pool.execute(move || {
///         sum.fetch_add(i, Ordering::Relaxed);
///     });
/// }
/// let fib = pool.spawn(|| (1..=20u64).product::<u64>());
/// assert_eq!(fib.join().unwrap(), 2_432_902_008_176_640_000);
/// pool.shutdown(); // runs what is queued, joins the threads
/// assert_eq!(sum.load(Ordering::Relaxed), 5050);
/// assert_eq!(pool.metrics().completed, 101);
/// ```
pub struct Pool {
    shared: Arc<Shared>,
    handles: Mutex<Vec<thread::JoinHandle<()>>>,
    threads: usize,
    policy: Policy,
    period: Duration,
    name: String,
    placement: Placement,
    #[cfg(not(loom))]
    control: Option<control::Registration>,
}

impl Pool {
    /// A builder with the defaults: adaptive policy, one thread per allowed CPU, one clock tick.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The address of the pool's state, which its tasks carry so that a join on one of its
    /// workers can run its queued tasks (`Task::join`); 0 under loom, which needs none.
    fn address(&self) -> usize {
        #[cfg(not(loom))]
        {
            Arc::as_ptr(&self.shared) as usize
        }
        #[cfg(loom)]
        {
            0
        }
    }

    /// Where the workers run: the CPU each is pinned to (`Builder::pin_workers`) and, for a
    /// background pool (`Builder::background`), whether they got `SCHED_IDLE`, nice 19, or
    /// neither.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Queues `f` and returns the handle to its result. When the queue is full, what happens
    /// follows the pool's [`Full`] policy; a task refused (full under `Reject`, or pool shut
    /// down) fails with [`JoinError::Rejected`].
    pub fn spawn<F, T>(&self, f: F) -> Task<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (task, completer) = task_pair_in(self.address());
        match self.shared.submit(Job::with_result(f, completer)) {
            Ok(()) => task,
            // The refused job was dropped, which resolved `task` as Cancelled; say Rejected.
            Err(error) => {
                drop(task);
                failed_task(error)
            }
        }
    }

    /// Queues `f` without a handle. A panic in `f` is caught and counted in
    /// [`Metrics::panicked`]; a refused task is counted in [`Metrics::rejected`].
    pub fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        let _ = self.shared.submit(Job::detached(f));
    }

    /// Queues `f` only if there is room now, whatever the [`Full`] policy says.
    ///
    /// ```
    /// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(1)).queue_capacity(1).build().unwrap();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// let blocker = pool.spawn(move || gate.recv().unwrap());
    /// // Wait until the worker holds the blocker, so the queue's one slot is free.
    /// while pool.metrics().running == 0 { std::thread::yield_now(); }
    /// let queued = pool.try_spawn(|| 1).unwrap();
    /// assert_eq!(pool.try_spawn(|| 2).unwrap_err(), cotenant::TrySpawnError::Full);
    /// release.send(()).unwrap();
    /// blocker.join().unwrap();
    /// assert_eq!(queued.join().unwrap(), 1);
    /// ```
    pub fn try_spawn<F, T>(&self, f: F) -> Result<Task<T>, TrySpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (task, completer) = task_pair_in(self.address());
        match self.shared.push(Job::with_result(f, completer)) {
            Ok(()) => Ok(task),
            Err(Refused::Full(_)) => {
                self.shared.rejected.fetch_add(1, Ordering::Relaxed);
                Err(TrySpawnError::Full)
            }
            Err(Refused::ShutDown(_)) => {
                self.shared.rejected.fetch_add(1, Ordering::Relaxed);
                Err(TrySpawnError::ShutDown)
            }
        }
    }

    /// Workers currently allowed to run (`1 <= target <= threads`).
    pub fn target(&self) -> usize {
        self.shared.sleep.target()
    }

    /// The OS threads this pool started (for an elastic pool: its maximum; how many run now is
    /// in [`Metrics::elastic`]).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The policy deciding the target.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The controller's period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The worker name prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A snapshot of the pool's counters and gauges, with the health alerts in force
    /// ([`Metrics::alerts`]; each call is also a point of the alerts' sliding window).
    pub fn metrics(&self) -> Metrics {
        #[allow(unused_mut)]
        let mut metrics = self.shared.snapshot();
        #[cfg(not(loom))]
        {
            metrics.alerts = self.shared.observe_health(&metrics);
        }
        metrics
    }

    /// Stops accepting tasks, lets the workers run everything already queued, and waits until
    /// every worker thread has exited (for the threads an elastic pool started after `build`:
    /// until each has left the pool; the OS thread may finish exiting just after). Idempotent, and safe to call from several threads.
    /// Called from one of this pool's own tasks, it waits for every worker but the calling
    /// one, which exits after that task returns (so tasks still queued behind it may run after
    /// `shutdown` returns).
    pub fn shutdown(&self) {
        self.stop(false);
    }

    /// Stops accepting tasks, cancels every task that has not started (their [`Task`]s fail
    /// with [`JoinError::Cancelled`]), lets running tasks finish, and joins the threads.
    pub fn shutdown_now(&self) {
        self.stop(true);
    }

    fn stop(&self, cancel: bool) {
        // While the queue drains the controller still takes back blocked holders' tokens, but
        // samples nothing (`Registration::drain`); it lets go of the pool once the workers are
        // gone (each clears its clock before it exits).
        #[cfg(not(loom))]
        if let Some(control) = &self.control {
            control.drain();
        }
        self.shared.close(cancel);
        let handles = std::mem::take(&mut *lock(&self.handles));
        let me = thread::current_id();
        for handle in handles {
            #[cfg(not(loom))]
            if handle.thread().id() == me {
                continue; // a task of this pool called shutdown: a thread cannot join itself
            }
            let _ = me;
            // A worker thread catches every panic of user code; nothing to report.
            let _ = handle.join();
        }
        // A concurrent or earlier caller may hold the handles: wait for every worker to exit
        // anyway (all but the calling one, if a task of this pool called us).
        let own = usize::from(self.shared.is_own_worker());
        let mut live = lock(&self.shared.live);
        while *live > own {
            live = wait(&self.shared.exited, live);
        }
        drop(live);
        #[cfg(not(loom))]
        if let Some(control) = &self.control {
            control.unregister();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop(false);
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("threads", &self.threads)
            .field("target", &self.target())
            .field("policy", &self.policy)
            .finish()
    }
}

//! [`Builder`]: a pool's settings, their defaults and limits, and the setters; `build.rs`
//! checks them and starts the pool.

use std::any::Any;
use std::fmt;
use std::time::Duration;

#[cfg(not(loom))]
use super::host_tokens;
use super::Full;
use crate::policy::elastic_size::ElasticConfig;
use crate::policy::Policy;
#[cfg(not(loom))]
use crate::sync::Arc;

/// The default queue capacity: room for a burst of a few thousand tasks without blocking the
/// submitter, small enough (about 100 KiB) that a forgotten pool does not hoard memory.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;

/// The shortest period accepted: a controller deciding more often than this would spend more
/// CPU deciding than it saves (and the kernel's counters do not move much faster).
pub const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The longest period accepted: a controller that decides less often than this cannot follow
/// neighbours at all.
pub const MAX_PERIOD: Duration = Duration::from_secs(10);

/// Whether a pool keeps its task histograms when neither the builder
/// ([`Builder::task_histograms`]) nor [`TASK_HISTOGRAMS_ENV`] says: off, because timing every
/// task (two clock readings of about 12 ns and two bucket updates) costs 1.14-1.24x the CPU
/// time of a task that does next to nothing (`pool-bench --peers cotenant-adaptive,cotenant-hist`;
/// RESULTS.md, issues 37 and 38), and nothing measurable on tasks of a microsecond or more.
/// Tokio's poll-time histograms are opt-in for the same reason.
const DEFAULT_TASK_HISTOGRAMS: bool = false;

/// The environment variable that turns the task histograms on (`on`, `1`, `true`, `yes`) or off
/// (`off`, `0`, `false`, `no`) for the pools of a process whose code does not say
/// ([`Builder::task_histograms`] wins): how an operator gets the queue-wait and run-time
/// histograms (and `cotenant top`'s p99 queue wait) from a service without rebuilding it.
pub const TASK_HISTOGRAMS_ENV: &str = "COTENANT_TASK_HISTOGRAMS";

/// Whether the task histograms are on for a pool whose builder was not told: `env`, the value of
/// [`TASK_HISTOGRAMS_ENV`] if set and not blank, else [`DEFAULT_TASK_HISTOGRAMS`]; a value that
/// says neither keeps the default, with the reason for the caller to log.
pub(crate) fn task_histograms_from(env: Option<&str>) -> (bool, Option<String>) {
    match env.map(|value| crate::env_switch::parse(TASK_HISTOGRAMS_ENV, value, DEFAULT_TASK_HISTOGRAMS)) {
        None => (DEFAULT_TASK_HISTOGRAMS, None),
        Some(Ok(on)) => (on, None),
        Some(Err(why)) => (DEFAULT_TASK_HISTOGRAMS, Some(why)),
    }
}

/// Whether the task histograms are on for a pool whose builder was not told, from this
/// process's environment; a bad value is logged once per process.
pub(crate) fn task_histograms_from_env() -> bool {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let value = std::env::var_os(TASK_HISTOGRAMS_ENV);
    let (on, bad_value) = task_histograms_from(value.as_ref().map(|v| v.to_string_lossy()).as_deref());
    if let Some(why) = bad_value {
        if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            let default = if DEFAULT_TASK_HISTOGRAMS { "on" } else { "off" };
            tracing::warn!("cotenant: {why}; the task histograms stay {default} (their default)");
        }
    }
    on
}

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
///
/// [`Pool`]: super::Pool
#[derive(Debug, Clone)]
#[must_use = "a Builder does nothing until build() is called"]
pub struct Builder {
    pub(super) policy: Policy,
    pub(super) threads: Option<usize>,
    pub(super) period: Option<Duration>,
    pub(super) queue_capacity: usize,
    pub(super) on_full: Full,
    pub(super) name: String,
    pub(super) pin_workers: bool,
    pub(super) background: bool,
    pub(super) cpu_budget: Option<(f64, Duration)>,
    pub(super) budget_slush: bool,
    pub(super) elastic: Option<ElasticConfig>,
    #[cfg(not(loom))]
    pub(super) host_tokens: Option<Arc<crate::tokens::HostTokens>>,
    #[cfg(not(loom))]
    pub(super) host_tokens_wait: Duration,
    #[cfg(not(loom))]
    pub(super) host_tokens_leases: bool,
    #[cfg(not(loom))]
    pub(super) host_tokens_size_to_neighbours: bool,
    /// `host_tokens_off`: no default set.
    #[cfg(not(loom))]
    pub(super) host_tokens_off: bool,
    pub(super) stack_size: Option<usize>,
    pub(super) hooks: Hooks,
    /// `Builder::task_histograms`; `None`: [`task_histograms_from`] the environment at build.
    pub(super) task_histograms: Option<bool>,
}

/// A hook run on each worker thread as it starts or stops (`Builder::on_thread_start`).
pub(crate) type ThreadHook = dyn Fn() + Send + Sync;

/// What receives the panic of a task nobody holds a handle to (`Builder::panic_handler`).
pub(crate) type PanicHandler = dyn Fn(Box<dyn Any + Send>) + Send + Sync;

/// The user's code the pool calls besides tasks. `std::sync::Arc` even under loom: these are
/// plain shared closures, not part of any model.
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    pub(crate) start: Option<std::sync::Arc<ThreadHook>>,
    pub(crate) stop: Option<std::sync::Arc<ThreadHook>>,
    pub(crate) panic: Option<std::sync::Arc<PanicHandler>>,
    /// `Builder::park_with` (`park_with.rs`).
    pub(crate) park: Option<std::sync::Arc<super::park_with::ParkHook>>,
}

// By hand: closures have no `Debug`; say which hooks are set.
impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("on_thread_start", &self.start.is_some())
            .field("on_thread_stop", &self.stop.is_some())
            .field("panic_handler", &self.panic.is_some())
            .field("park_with", &self.park.is_some())
            .finish()
    }
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
            stack_size: None,
            hooks: Hooks::default(),
            task_histograms: None,
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

    /// The most tasks that may wait in the queue. Default: [`DEFAULT_QUEUE_CAPACITY`]. (The
    /// polls of woken futures are queued past it: see [`Pool::spawn_future`](crate::Pool::spawn_future).)
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

    /// Whether the pool keeps histograms of its tasks' queue wait and run time
    /// ([`Metrics::queue_wait`] and [`Metrics::run_time`], `None` when off): buckets from 1 µs
    /// to about 8.4 s, each twice the one before, counted by each worker in its own memory
    /// (no lock, no allocation), for one clock reading per task on the worker and one at the
    /// submit; off, the pool reads no clock for them. Default: off, unless the environment
    /// variable [`TASK_HISTOGRAMS_ENV`] (`COTENANT_TASK_HISTOGRAMS=on`) turns them on for the
    /// process; this setting wins over it. Timing every task costs 1.14-1.24x the CPU time of
    /// a task that does next to nothing, and nothing measurable on tasks of a microsecond or
    /// more.
    ///
    /// - **Queue wait**: from the submit to the moment a worker takes the task off the queue.
    ///   A task that its submitter ran because the queue was full ([`Full::CallerRuns`])
    ///   waited 0.
    /// - **Run time**: from that moment to the worker's next reading: the task's end when the
    ///   queue is empty after it, else the moment it takes its next task. Besides the task, it
    ///   holds the worker's few nanoseconds of bookkeeping and, in a pool that shares host CPU
    ///   tokens or has a CPU budget, the wait for a token or for the budget before the task. A
    ///   task that joins another task of its pool, and runs queued tasks while it waits,
    ///   includes their time.
    ///
    /// Both count the tasks that [`Metrics::completed`] counts, once each (panicked ones too,
    /// not those [`Pool::shutdown_now`] dropped unrun). While the workers run tasks back to
    /// back, each one's run time is recorded when its worker takes the next, so a snapshot may
    /// count a task or two fewer there than in `completed`; once every worker has found the
    /// queue empty (a moment after the last task, which `Pool::wait_idle` may return before)
    /// or the pool is shut down, they match.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = cotenant::Pool::builder()
    ///     .policy(cotenant::Policy::fixed(1))
    ///     .task_histograms(true)
    ///     .build()
    ///     .unwrap();
    /// pool.spawn(|| std::thread::sleep(Duration::from_millis(2))).join().unwrap();
    /// pool.shutdown();
    /// let metrics = pool.metrics();
    /// let run_time = metrics.run_time.unwrap();
    /// assert_eq!(run_time.count(), 1);
    /// assert!(run_time.quantile_ns(0.5).unwrap() >= 2_000_000, "it slept 2 ms at least");
    /// assert_eq!(metrics.queue_wait.unwrap().count(), metrics.completed);
    ///
    /// let untimed = cotenant::Pool::builder().task_histograms(false).build().unwrap();
    /// assert!(untimed.metrics().run_time.is_none());
    /// ```
    ///
    /// [`Metrics::queue_wait`]: crate::metrics::Metrics::queue_wait
    /// [`Metrics::run_time`]: crate::metrics::Metrics::run_time
    /// [`Metrics::completed`]: crate::metrics::Metrics::completed
    /// [`Pool::shutdown_now`]: super::Pool::shutdown_now
    pub fn task_histograms(mut self, on: bool) -> Self {
        self.task_histograms = Some(on);
        self
    }

    /// The stack size of each worker thread, in bytes (also of the threads an elastic pool
    /// starts later), as `std::thread::Builder::stack_size` and rayon's `stack_size` set it:
    /// for tasks that recurse deeply or keep large arrays on the stack. The system raises a
    /// size below its minimum to that minimum. 0 is refused by `build`. Default: the standard
    /// library's (2 MiB, or `RUST_MIN_STACK`).
    ///
    /// ```
    /// let pool = cotenant::Pool::builder()
    ///     .policy(cotenant::Policy::fixed(1))
    ///     .stack_size(32 << 20)
    ///     .build()
    ///     .unwrap();
    /// fn depth(n: u64) -> u64 {
    ///     // 512 bytes of array a level: 2.5 MiB for 5 000 levels, more than the default stack.
    ///     let frame = [n; 64];
    ///     if n == 0 { 0 } else { 1 + depth(std::hint::black_box(frame)[0] - 1) }
    /// }
    /// assert_eq!(pool.spawn(|| depth(5_000)).join().unwrap(), 5_000);
    /// let refused = cotenant::Pool::builder().stack_size(0).build().unwrap_err();
    /// assert!(refused.to_string().contains("stack_size"), "{refused}");
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Calls `hook` on each worker thread as it starts, before it runs any task: to set a
    /// thread-local, register the thread with a profiler, or name it elsewhere. Also on the
    /// threads an elastic pool starts later. A second call replaces the first hook.
    ///
    /// A panic in the hook goes to the [`panic_handler`](Builder::panic_handler) if there is
    /// one, and is logged; the worker then runs as usual. Default: none.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let (started, stopped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    /// let pool = cotenant::Pool::builder()
    ///     .policy(cotenant::Policy::fixed(3))
    ///     .on_thread_start({
    ///         let started = started.clone();
    ///         move || {
    ///             started.fetch_add(1, Ordering::SeqCst);
    ///         }
    ///     })
    ///     .on_thread_stop({
    ///         let stopped = stopped.clone();
    ///         move || {
    ///             stopped.fetch_add(1, Ordering::SeqCst);
    ///         }
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.shutdown(); // returns once every worker has run its stop hook
    /// assert_eq!(started.load(Ordering::SeqCst), 3);
    /// assert_eq!(stopped.load(Ordering::SeqCst), 3);
    /// ```
    pub fn on_thread_start<F>(mut self, hook: F) -> Self
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.hooks.start = Some(std::sync::Arc::new(hook));
        self
    }

    /// Calls `hook` on each worker thread as it leaves the pool, after its last task: at
    /// shutdown, and when an elastic pool retires the thread. [`Pool::shutdown`] returns only
    /// after every worker's stop hook has returned (called from a task of the pool: every
    /// worker's but that task's own, which stops once the task returns). A panic in it is
    /// handled as in [`on_thread_start`](Builder::on_thread_start). Default: none.
    ///
    /// [`Pool::shutdown`]: super::Pool::shutdown
    pub fn on_thread_stop<F>(mut self, hook: F) -> Self
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.hooks.stop = Some(std::sync::Arc::new(hook));
        self
    }

    /// Receives the panic of each task started with [`Pool::execute`] (whose panic nobody else
    /// would see: a [`Task`] carries its own panic to whoever joins it, and a scope re-raises
    /// the panics of its tasks), on the thread that ran the task, as rayon's `panic_handler`
    /// does. The panic is still caught (the worker survives) and counted in
    /// [`Metrics::panicked`]. Also receives the panics of the thread hooks. A panic in the
    /// handler itself is logged and dropped. Default: none (the payload is dropped).
    ///
    /// ```
    /// let (report, reports) = std::sync::mpsc::channel::<String>();
    /// let pool = cotenant::Pool::builder()
    ///     .policy(cotenant::Policy::fixed(1))
    ///     .panic_handler(move |payload| {
    ///         let message = payload
    ///             .downcast_ref::<&str>()
    ///             .map(|text| text.to_string())
    ///             .or_else(|| payload.downcast_ref::<String>().cloned())
    ///             .unwrap_or_default();
    ///         let _ = report.send(message);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.execute(|| panic!("lost in the pool"));
    /// assert_eq!(reports.recv().unwrap(), "lost in the pool");
    /// pool.wait_idle();
    /// assert_eq!(pool.metrics().panicked, 1);
    /// ```
    ///
    /// [`Pool::execute`]: super::Pool::execute
    /// [`Task`]: super::Task
    /// [`Metrics::panicked`]: crate::metrics::Metrics::panicked
    pub fn panic_handler<F>(mut self, handler: F) -> Self
    where
        F: Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    {
        self.hooks.panic = Some(std::sync::Arc::new(handler));
        self
    }

    /// How a worker with nothing to run waits: inside `hook`, which must block until the
    /// [`Woken`] future it is given is ready, typically another runtime's `block_on`, so that
    /// the pool's idle workers drive that runtime's reactor (its sockets and timers) themselves.
    /// A future of the pool woken by that reactor is then queued and polled by the same worker,
    /// with no hand-over to another thread, which is what tokio's own workers do.
    ///
    /// Only one worker is in the hook at a time, and only one the target allows to run (the
    /// pool's other idle workers sleep as without a hook, costing no CPU); a worker that leaves
    /// it with a task wakes an idle allowed worker to take it over. While every allowed worker
    /// is busy nobody is in the hook: a reactor driven only this way waits until a worker runs
    /// out of tasks. The runtime must be the pool's alone (not inside `block_on` on another
    /// thread), and what it runs in its `block_on` (tokio's own spawned tasks) runs on the
    /// worker. A hook that returns before its future is ready only makes that worker sleep as
    /// usual; one that panics is logged at error level and not called again, and what it
    /// drove is then not driven by the pool. Default: none (workers sleep on a condition
    /// variable).
    ///
    /// ```
    /// // A tokio current-thread runtime driven by the pool's idle worker would be
    /// // `.park_with(move |woken| runtime.block_on(woken))`; any `block_on` works:
    /// let pool = cotenant::Pool::builder()
    ///     .policy(cotenant::Policy::fixed(1))
    ///     .park_with(|woken| cotenant::block_on(woken))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(pool.spawn(|| 6 * 7).join().unwrap(), 42);
    /// ```
    ///
    /// [`Woken`]: super::Woken
    pub fn park_with<F>(mut self, hook: F) -> Self
    where
        F: Fn(&mut super::Woken<'_>) + Send + Sync + 'static,
    {
        self.hooks.park = Some(std::sync::Arc::new(hook));
        self
    }

    /// Pin worker `i` to the `i`-th CPU this process may run on (its affinity mask at `build`,
    /// round robin when there are more workers than CPUs). Pinning pays even without a
    /// neighbour, through warm caches (the noisy-neighbour course on cgroups and pinning). A
    /// binding the kernel refuses is logged and that worker runs unpinned;
    /// [`Pool::placement`] says which. Default: off.
    ///
    /// [`Pool::placement`]: super::Pool::placement
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
    ///
    /// [`Pool::placement`]: super::Pool::placement
    pub fn background(mut self, background: bool) -> Self {
        self.background = background;
        self
    }

    /// Caps the CPU time the workers use together at `cpus` CPUs' worth per `period`, in user
    /// space (no cgroup, no root): a worker takes a slice of CPU time from a shared budget
    /// before running tasks, charges what its thread CPU clock says it used, and parks until
    /// the next period when the budget is spent (the slush fund of the CFS throttling paper,
    /// done in user space: `docs/cpu-budget.md`).
    ///
    /// A running task cannot be interrupted: a slice overruns by up to the rest of the task,
    /// and the overrun is paid from what the previous period left unused (the slush fund),
    /// then from the next period. Long tasks can call [`checkpoint`] to park mid-task.
    /// Graceful [`shutdown`](super::Pool::shutdown) (and dropping the pool) keeps the budget: the
    /// queue drains at the budget's pace, and a pool that owes a large debt waits for the
    /// refills that pay it; [`shutdown_now`](super::Pool::shutdown_now) does not wait.
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
    ///
    /// [`checkpoint`]: super::checkpoint
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
    /// `max` threads, sized every period by the utilisation formula of "Thread Pool Sizing and
    /// the Contention Cliff", threads = Ncpu × U × (1 + W/C),
    /// with W/C measured on the pool's own tasks (wall time, thread CPU time and run-queue
    /// wait) and Ncpu the CPUs the pool's [`Policy`] allows it now (so it too gives way when
    /// the neighbours are busy). Without a backlog, Little's law (arrival rate × task time)
    /// bounds the size; with a backlog, the size also grows while the allowed CPUs sit idle.
    /// It grows at once and shrinks after 50 periods of wanting fewer threads (half a second
    /// at the default period; `policy::elastic_size`). `max` is at most 65 536.
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
    /// // Host tokens need Linux; elsewhere `private` says so and there is nothing to show.
    /// let Ok(tokens) = cotenant::tokens::HostTokens::private(2) else { return };
    /// let tokens = Arc::new(tokens);
    /// let pool = cotenant::Pool::builder().host_tokens(tokens.clone()).build().unwrap();
    /// assert_eq!(pool.spawn(|| 6 * 7).join().unwrap(), 42);
    /// pool.shutdown();
    /// assert_eq!(tokens.available().unwrap(), 2, "every token is back");
    /// ```
    ///
    /// [`Metrics::token_timeouts`]: crate::metrics::Metrics::token_timeouts
    /// [`Metrics::token_takebacks`]: crate::metrics::Metrics::token_takebacks
    /// [`Task::join`]: super::Task::join
    /// [`Metrics::host_tokens`]: crate::metrics::Metrics::host_tokens
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
    ///
    /// [`Metrics::token_timeouts`]: crate::metrics::Metrics::token_timeouts
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

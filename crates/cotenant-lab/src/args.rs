//! Command-line definitions (clap) of `cotenant lab`, `cotenant sim` and the lab's hidden
//! worker modes; the `cotenant` command embeds them as subcommands.

use clap::{Args, ValueEnum};
use cotenant_ops::values::{parse_load, parse_positive};
use std::path::PathBuf;

mod lab_command;
mod sim;

pub use lab_command::{
    BurstArgs, CommonArgs, ExperimentCommand, FactorArgs, FairnessArgs, GoNeighboursArgs, HeadlineArgs,
    IsolationArgs, ItemsFlag, LabCommand, LengthArgs, LoadFlag, NeighboursArgs, OutputArgs, OvercommitArgs,
    PoolsFlag, ProcessesFlag, QuotaArgs, RuntimesArgs, ServiceFlag, SettingFlag, SpinArgs, ThrottlingArgs,
};
pub use sim::{
    GroupSharesArg, RunningReweightArg, SchedulerArg, SchedulerFlag, SimArgs, SimBandwidthArgs, SimCommand,
    SimNeighboursArgs, SimTable2Args, SimValidateArgs, SimVariant, SimWorkloadArgs,
};

/// What the experiments read: the flags of the chosen experiment's subcommand
/// ([`LabCommand::lab_args`]), and for every flag it does not take, that flag's default.
#[derive(Debug, Clone)]
pub struct LabArgs {
    /// The experiment.
    pub experiment: Experiment,
    /// A short smoke run (fewer configurations, 1 s per run, 1 repeat).
    pub quick: bool,
    /// Runs per configuration; the tables give the median and the spread.
    pub repeats: Option<u32>,
    /// Write results.json, results.csv and report.md under DIR/<experiment>/.
    pub out: Option<PathBuf>,
    /// Print the results as JSON instead of tables: one line per experiment (JSON Lines, so
    /// that `lab all --json` prints one document per line).
    pub json: bool,
    /// Offered loads per process, as fractions of its fair share of the CPUs (1.0 = exactly),
    /// comma-separated (default: 0.7 and the 1.5 overload; --quick: 0.7).
    pub load: Vec<f64>,
    /// Process counts for `neighbours`, comma-separated (default: 1 to 2 × CPUs).
    pub processes: Vec<u32>,
    /// Pool kinds for `neighbours` and `headline`, comma-separated (default: ignorant, optimal,
    /// share, plain, adaptive; `headline`: ignorant, optimal, adaptive, plain). `adaptive` is the
    /// default pool (sharing host CPU tokens), `plain` the adaptive policy without them.
    pub pools: Vec<PoolKind>,
    /// Where `neighbours`' processes live.
    pub setting: SettingArg,
    /// Seconds each configuration runs.
    pub seconds: Option<u64>,
    /// Service time of one work item, in milliseconds.
    pub service_ms: f64,
    /// How `go-neighbours`' Go services run their items.
    pub go_items: GoItems,
    /// What `neighbours`' items are: work for a thread pool, or futures (`--items async`).
    pub items: Items,
    /// With `--items async`: each item's timer wait, in milliseconds (`None`: the default,
    /// [`DEFAULT_ASYNC_WAIT_MS`]).
    pub async_wait_ms: Option<f64>,
    /// `neighbours`: items of exactly `service_ms` of CPU time (`lab-worker --exact-cpu`)
    /// instead of a calibrated amount of work.
    pub exact_cpu: bool,
    /// `isolation`'s scenarios to run, comma-separated (default: all); baseline and
    /// unisolated always run, as the ratios' denominators.
    pub scenarios: Vec<crate::isolation::Scenario>,
    /// `spin`: the client's round trip each session sleeps before a transaction, in µs; it sets
    /// how busy the sessions keep their CPUs (default 200: about 85 % of the restricted CPU on
    /// the test VM; RESULTS.md, section `spin`, says why the round trip sets the load).
    pub round_trip_us: Option<u64>,
    /// `isolation`: how the load generator's connection threads are scheduled. `realtime`
    /// (`SCHED_FIFO` 1, falling back to normal with the reason recorded) keeps B from delaying
    /// the client itself, as if it ran on another host; `normal` lets the client compete with
    /// the tenants (RESULTS.md, "isolation").
    pub client_priority: crate::loadgen::ClientPriority,
}

impl LabArgs {
    /// `experiment` given no flag: every field at its flag's default (the defaults clap gives
    /// in `args/lab_command.rs`, checked equal by its tests).
    pub fn defaults(experiment: Experiment) -> LabArgs {
        LabArgs {
            experiment,
            quick: false,
            repeats: None,
            out: None,
            json: false,
            load: Vec::new(),
            processes: Vec::new(),
            pools: Vec::new(),
            setting: SettingArg::Both,
            seconds: None,
            service_ms: 5.0,
            go_items: GoItems::Limited,
            items: Items::Threads,
            async_wait_ms: None,
            exact_cpu: false,
            scenarios: Vec::new(),
            round_trip_us: None,
            client_priority: crate::loadgen::ClientPriority::Realtime,
        }
    }
}

/// How the Go worker runs its items (`go-neighbours`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GoItems {
    /// At most GOMAXPROCS items at once, in arrival order: a worker pool sized by GOMAXPROCS.
    Limited,
    /// One goroutine per item as it arrives, time-sliced by the Go scheduler.
    PerItem,
}

/// What each item of `neighbours` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Items {
    /// Work handed to a thread pool, run by one of its workers: the pool kinds of `--pools`.
    Threads,
    /// A future that awaits a short timer, then computes the same work: the executors
    /// tokio-default, tokio-optimal and cotenant-async.
    Async,
}

/// The timer wait of an async item when `--async-wait-ms` is not given (ms).
pub const DEFAULT_ASYNC_WAIT_MS: f64 = 1.0;

/// `--async-wait-ms`: a wait in milliseconds, more than 0 and at most a second.
pub fn parse_async_wait_ms(text: &str) -> Result<f64, String> {
    cotenant_ops::values::parse_bounded(text, 1000.0, "the wait of an async item (ms)")
}

/// The experiments of the lab (each a subcommand of `cotenant lab`: [`ExperimentCommand`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    /// One process, fixed pools of 1 to 4 × CPUs threads: what more threads than CPUs cost.
    Overcommit,
    /// The same with a mutex around the work: overcommitted threads queueing on a lock.
    Contention,
    /// Quotas from 0.5 CPU to the CPU count, in real cgroups: pools sized to the online CPUs, to
    /// the quota, and adaptive; includes a Go program.
    Quota,
    /// P identical processes at once, each with its own open-loop load: pools that each assume
    /// the whole host, against pools that make room for their neighbours (`--items async`:
    /// futures on tokio's runtime and on the cotenant executor).
    Neighbours,
    /// share's overcommit factor 0.5 to 3 next to adaptive: the latency and throughput trade-off.
    Factor,
    /// A bursty and a steady tenant: quotas against adaptive pools.
    Burst,
    /// A runs alone for 2 s, then B starts: CPU shares over time, Jain's index.
    Fairness,
    /// What Go, Java, Python, Node, C++, Rust and cotenant believe about their CPUs under each
    /// quota.
    Runtimes,
    /// An HTTP server next to a CPU-bound batch job, under every isolation option (weights,
    /// cpusets, nice, SCHED_IDLE, an idle cgroup, cotenant pools).
    Isolation,
    /// CPU bandwidth throttling on this kernel (threads that fit their quota yet get throttled),
    /// quota rewrites, and the pool's user-space CPU budget.
    Throttling,
    /// Sessions waiting for each other: pure spinning against yield, back-off and park, under
    /// CPU restriction and priority inversion (a model of MongoDB's WiredTiger snapshot wait).
    Spin,
    /// Pool sizes 1 to 256 against I/O delays of 0 to 50 ms (the contention cliff), and the
    /// elastic pool.
    Sizing,
    /// `neighbours` with Go services: default GOMAXPROCS against the cotenant Go controller.
    GoNeighbours,
    /// What `make demo` runs: P = 2 in one cgroup at 50, 70, 90 and 100 % load; ignorant, optimal,
    /// the default pool and the adaptive policy alone; a picture of the tails against the load.
    Headline,
    /// Every experiment above, one after another.
    All,
    /// Remove what a crashed run left behind: `cotenant-lab-*` cgroups and lab workers.
    Clean,
}

impl Experiment {
    /// The name on the command line (and of the output directory).
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Overcommit => "overcommit",
            Experiment::Contention => "contention",
            Experiment::Quota => "quota",
            Experiment::Neighbours => "neighbours",
            Experiment::Factor => "factor",
            Experiment::Burst => "burst",
            Experiment::Fairness => "fairness",
            Experiment::Runtimes => "runtimes",
            Experiment::GoNeighbours => "go-neighbours",
            Experiment::Isolation => "isolation",
            Experiment::Throttling => "throttling",
            Experiment::Spin => "spin",
            Experiment::Sizing => "sizing",
            Experiment::Headline => "headline",
            Experiment::All => "all",
            Experiment::Clean => "clean",
        }
    }
}

/// Where a run's processes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SettingArg {
    /// All processes in one cgroup.
    OneCgroup,
    /// One cgroup per process, equal weights.
    PerProcess,
    /// Both.
    Both,
}

/// How each process of a run sizes its pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolKind {
    /// fixed(CPUs): what every runtime does.
    Ignorant,
    /// fixed(max(1, CPUs / P)): a perfect static split, known in advance.
    Optimal,
    /// The friendlypool's formula (CPUs × own CPU use / all CPU use), overcommit factor 1.
    Share,
    /// cotenant's default pool: the adaptive policy, sharing host CPU tokens with the other
    /// processes of the run (engaged while another shares them): the tokens keep the tasks
    /// running at once among them to one per CPU, so each pool may use a CPU the others leave
    /// idle.
    Adaptive,
    /// cotenant's adaptive policy alone, without host tokens (`Builder::host_tokens_off`).
    Plain,
    /// fixed(--fixed-threads): a pool sized by hand (the quota and overcommit experiments).
    Fixed,
    // The Go worker's kinds (`go-neighbours`): not pools of `lab-worker`, so not on its
    // command line.
    /// Go's default GOMAXPROCS.
    #[value(skip)]
    #[serde(rename = "go-default")]
    GoDefault,
    /// GOMAXPROCS = max(1, CPUs / P), set once: Go's "optimal".
    #[value(skip)]
    #[serde(rename = "go-optimal")]
    GoOptimal,
    /// GOMAXPROCS steered by the cotenant Go controller (`go/`).
    #[value(skip)]
    #[serde(rename = "go-cotenant")]
    GoCotenant,
    // The executors of async items (`neighbours --items async`): `lab-worker` runs them, so
    // they are on its command line (and `--pools` takes them, with `--items async` only).
    /// Async items on a tokio multi-thread runtime with its default workers, one per CPU the
    /// process sees (`--items async`).
    #[serde(rename = "tokio-default")]
    TokioDefault,
    /// Async items on a tokio multi-thread runtime of max(1, CPUs / P) workers, a static split
    /// known in advance (`--items async`).
    #[serde(rename = "tokio-optimal")]
    TokioOptimal,
    /// Async items on the cotenant executor (`Pool::spawn_future`) of the default pool, sharing
    /// host CPU tokens as `adaptive` does; a small tokio runtime on its own thread drives their
    /// timers (`--items async`).
    #[serde(rename = "cotenant-async")]
    CotenantAsync,
}

impl PoolKind {
    /// Whether this kind serves async items (an executor of futures) rather than thread items.
    pub fn is_async(self) -> bool {
        matches!(self, PoolKind::TokioDefault | PoolKind::TokioOptimal | PoolKind::CotenantAsync)
    }
}

/// Internal: one process of a lab experiment.
#[derive(Debug, Args)]
pub struct LabWorkerArgs {
    /// Pool to run the items on.
    #[arg(long, value_enum)]
    pub pool: PoolKind,
    /// Processes in the experiment (sizes the optimal pool and the fair share).
    #[arg(long)]
    pub processes: u32,
    /// Offered load, as a fraction of the fair share of the CPUs.
    #[arg(long, value_parser = parse_load)]
    pub load: f64,
    /// CPU time of one item, in milliseconds.
    #[arg(long, value_parser = parse_positive)]
    pub service_ms: f64,
    /// How long items arrive, in milliseconds.
    #[arg(long)]
    pub duration_ms: u64,
    /// How items arrive: evenly, Poisson or in bursts.
    #[arg(long, value_enum, default_value_t = crate::workload::Arrivals::Poisson)]
    pub arrivals: crate::workload::Arrivals,
    /// Starting value of the arrival schedule's random numbers (mixed with the pid).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Start the schedule at this CLOCK_REALTIME instant (ns since the epoch), so that all
    /// processes of a run start together.
    #[arg(long)]
    pub start_at_ns: u64,
    /// The lab's pid: the worker exits if that process dies (it also asks the kernel to kill
    /// it then, with PR_SET_PDEATHSIG).
    #[arg(long)]
    pub parent: u32,
    /// Workers of a `fixed` pool.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub fixed_threads: Option<u32>,
    /// The pool's OS threads (default: the CPUs this process may use).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,
    /// The overcommit factor of a `share` pool (`factor` varies it).
    #[arg(long, default_value_t = 1.0, value_parser = parse_load)]
    pub share_factor: f64,
    /// The CPUs the load is a fraction of (default: this process's CPUs / processes).
    #[arg(long, value_parser = parse_positive)]
    pub fair_cpus: Option<f64>,
    /// Run each item's work inside one process-wide mutex (`contention`).
    #[arg(long)]
    pub mutex: bool,
    /// Closed loop: keep the pool saturated instead of following a schedule.
    #[arg(long)]
    pub saturate: bool,
    /// Record the process's CPU time and the pool's target every N ms.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub series_ms: Option<u64>,
    /// Include every item's times in the report.
    #[arg(long)]
    pub items: bool,
    /// Give the pool a user-space CPU budget of this many CPUs (`Builder::cpu_budget`).
    #[arg(long, value_parser = parse_positive)]
    pub cpu_budget: Option<f64>,
    /// The budget's period, in ms.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub budget_period_ms: u64,
    /// Turn the budget's slush fund off (the kernel's way: overruns are debts of the next period).
    #[arg(long)]
    pub no_slush: bool,
    /// Items of exactly --service-ms of CPU time (read on the thread's CPU clock) instead of
    /// calibrated ones: the offered load is then exact in CPU time.
    #[arg(long)]
    pub exact_cpu: bool,
    /// Items of this many chunks of work instead of calibrating in this process (the lab
    /// calibrates once per experiment, so that every process and run does the same work).
    #[arg(long, conflicts_with = "exact_cpu", value_parser = clap::value_parser!(u32).range(1..))]
    pub chunks: Option<u32>,
    /// The async kinds (tokio-default, tokio-optimal, cotenant-async): how long each item waits
    /// on its timer before it computes, in milliseconds.
    #[arg(long, default_value_t = DEFAULT_ASYNC_WAIT_MS, value_parser = parse_async_wait_ms)]
    pub async_wait_ms: f64,
}

/// Which tenant of `lab isolation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TenantRole {
    /// A: the HTTP server.
    Server,
    /// B: the CPU-bound batch job.
    Batch,
}

/// How tenant B runs its chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BatchMode {
    /// One thread per CPU.
    Plain,
    /// A cotenant adaptive pool.
    Adaptive,
    /// A cotenant background pool (`SCHED_IDLE`).
    Background,
}

/// The priority of a `plain` tenant B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BatchPriority {
    /// Normal priority (nice unchanged).
    Normal,
    /// nice 19.
    Nice,
    /// `SCHED_IDLE`.
    Idle,
}

/// Internal: a tenant of the isolation experiment.
#[derive(Debug, Args)]
pub struct LabTenantArgs {
    /// Which tenant to run.
    #[arg(value_enum)]
    pub role: TenantRole,
    /// A: pool workers (default: the CPUs).
    #[arg(long)]
    pub threads: Option<usize>,
    /// A: pin the pool's workers.
    #[arg(long)]
    pub pin: bool,
    /// A: CPU work per request (µs).
    #[arg(long, default_value_t = 200)]
    pub work_us: u64,
    /// B: how it runs its chunks.
    #[arg(long, value_enum, default_value_t = BatchMode::Plain)]
    pub mode: BatchMode,
    /// B (plain): its threads' priority.
    #[arg(long, value_enum, default_value_t = BatchPriority::Normal)]
    pub priority: BatchPriority,
    /// B: start of the measuring window (CLOCK_REALTIME ns since the epoch).
    #[arg(long, default_value_t = 0)]
    pub measure_from_ns: u64,
    /// B: length of the measuring window (ms).
    #[arg(long, default_value_t = 1000)]
    pub measure_ms: u64,
    /// The lab's pid.
    #[arg(long)]
    pub parent: u32,
}

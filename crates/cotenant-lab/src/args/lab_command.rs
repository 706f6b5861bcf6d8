//! The command line of `cotenant lab`: one subcommand per experiment, each taking exactly the
//! flags that experiment reads (clap refuses any other), turned into the [`LabArgs`] the
//! experiments read.

use clap::{Args, Subcommand};
use cotenant_ops::values::{parse_load, parse_positive};
use std::path::PathBuf;

use super::{parse_async_wait_ms, Experiment, GoItems, Items, LabArgs, PoolKind, SettingArg};

/// Run an experiment on this host.
#[derive(Debug, Args)]
pub struct LabCommand {
    /// The experiment.
    #[command(subcommand)]
    pub experiment: ExperimentCommand,
}

impl LabCommand {
    /// The arguments the experiments read: the flags the chosen experiment takes, and for every
    /// other field the value its flag's default gave it when every experiment took every flag.
    pub fn lab_args(&self) -> LabArgs {
        let mut args = LabArgs::defaults(self.experiment.experiment());
        match &self.experiment {
            ExperimentCommand::Overcommit(a) | ExperimentCommand::Contention(a) => a.fill(&mut args),
            ExperimentCommand::Quota(a) => a.fill(&mut args),
            ExperimentCommand::Neighbours(a) => a.fill(&mut args),
            ExperimentCommand::Factor(a) => a.fill(&mut args),
            ExperimentCommand::Burst(a) => a.fill(&mut args),
            ExperimentCommand::Fairness(a) => a.fill(&mut args),
            ExperimentCommand::Runtimes(a) => a.fill(&mut args),
            ExperimentCommand::Isolation(a) => a.fill(&mut args),
            ExperimentCommand::Throttling(a) => a.fill(&mut args),
            ExperimentCommand::Spin(a) => a.fill(&mut args),
            ExperimentCommand::Sizing(a) | ExperimentCommand::All(a) => a.fill(&mut args),
            ExperimentCommand::GoNeighbours(a) => a.fill(&mut args),
            ExperimentCommand::Headline(a) => a.fill(&mut args),
            ExperimentCommand::Clean => {}
        }
        args
    }
}

/// The experiments of the lab, each with its own flags.
#[derive(Debug, Subcommand)]
pub enum ExperimentCommand {
    /// One process, fixed pools of 1 to 4 × CPUs threads: what more threads than CPUs cost.
    Overcommit(OvercommitArgs),
    /// The same with a mutex around the work: overcommitted threads queueing on a lock.
    Contention(OvercommitArgs),
    /// Quotas from 0.5 CPU to the CPU count, in real cgroups: pools sized to the online CPUs, to
    /// the quota, and adaptive; includes a Go program.
    Quota(QuotaArgs),
    /// P identical processes at once, each with its own open-loop load: pools that each assume
    /// the whole host, against pools that make room for their neighbours (`--items async`:
    /// futures on tokio's runtime and on the cotenant executor).
    Neighbours(NeighboursArgs),
    /// share's overcommit factor 0.5 to 3 next to adaptive: the latency and throughput trade-off.
    Factor(FactorArgs),
    /// A bursty and a steady tenant: quotas against adaptive pools.
    Burst(BurstArgs),
    /// A runs alone for 2 s, then B starts: CPU shares over time, Jain's index.
    Fairness(FairnessArgs),
    /// What Go, Java, Python, Node, C++, Rust and cotenant believe about their CPUs under each
    /// quota.
    Runtimes(RuntimesArgs),
    /// An HTTP server next to a CPU-bound batch job, under every isolation option (weights,
    /// cpusets, nice, SCHED_IDLE, an idle cgroup, cotenant pools).
    Isolation(IsolationArgs),
    /// CPU bandwidth throttling on this kernel (threads that fit their quota yet get throttled),
    /// quota rewrites, and the pool's user-space CPU budget.
    Throttling(ThrottlingArgs),
    /// Sessions waiting for each other: pure spinning against yield, back-off and park, under
    /// CPU restriction and priority inversion (a model of MongoDB's WiredTiger snapshot wait).
    Spin(SpinArgs),
    /// Pool sizes 1 to 256 against I/O delays of 0 to 50 ms (the contention cliff), and the
    /// elastic pool.
    Sizing(CommonArgs),
    /// `neighbours` with Go services: default GOMAXPROCS against the cotenant Go controller.
    GoNeighbours(GoNeighboursArgs),
    /// What `make demo` runs: P = 2 in one cgroup at 50, 70, 90 and 100 % load; ignorant, optimal,
    /// the default pool and the adaptive policy alone; a picture of the tails against the load.
    Headline(HeadlineArgs),
    /// Every experiment above, one after another.
    All(CommonArgs),
    /// Remove what a crashed run left behind: `cotenant-lab-*` cgroups and lab workers.
    Clean,
}

impl ExperimentCommand {
    /// The experiment this subcommand runs.
    pub fn experiment(&self) -> Experiment {
        match self {
            ExperimentCommand::Overcommit(_) => Experiment::Overcommit,
            ExperimentCommand::Contention(_) => Experiment::Contention,
            ExperimentCommand::Quota(_) => Experiment::Quota,
            ExperimentCommand::Neighbours(_) => Experiment::Neighbours,
            ExperimentCommand::Factor(_) => Experiment::Factor,
            ExperimentCommand::Burst(_) => Experiment::Burst,
            ExperimentCommand::Fairness(_) => Experiment::Fairness,
            ExperimentCommand::Runtimes(_) => Experiment::Runtimes,
            ExperimentCommand::Isolation(_) => Experiment::Isolation,
            ExperimentCommand::Throttling(_) => Experiment::Throttling,
            ExperimentCommand::Spin(_) => Experiment::Spin,
            ExperimentCommand::Sizing(_) => Experiment::Sizing,
            ExperimentCommand::GoNeighbours(_) => Experiment::GoNeighbours,
            ExperimentCommand::Headline(_) => Experiment::Headline,
            ExperimentCommand::All(_) => Experiment::All,
            ExperimentCommand::Clean => Experiment::Clean,
        }
    }
}

/// Copies the flags a clap struct holds into the [`LabArgs`] the experiments read.
trait Fill {
    fn fill(&self, args: &mut LabArgs);
}

/// `--out` and `--json`: where the results go (every experiment but `clean`).
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Write results.json, results.csv and report.md under DIR/<experiment>/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the results as JSON instead of tables: one line per experiment (JSON Lines, so
    /// that `lab all --json` prints one document per line).
    #[arg(long)]
    pub json: bool,
}

impl Fill for OutputArgs {
    fn fill(&self, args: &mut LabArgs) {
        args.out.clone_from(&self.out);
        args.json = self.json;
    }
}

/// `--quick` and `--seconds`: how long the runs are (every experiment that runs a workload).
#[derive(Debug, Args)]
pub struct LengthArgs {
    /// A short smoke run (fewer configurations, 1 s per run, 1 repeat).
    #[arg(long)]
    pub quick: bool,
    /// Seconds each configuration runs.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub seconds: Option<u64>,
}

impl Fill for LengthArgs {
    fn fill(&self, args: &mut LabArgs) {
        args.quick = self.quick;
        args.seconds = self.seconds;
    }
}

/// The flags every experiment that repeats its runs takes, and all that `all` takes (it runs
/// every experiment with them): `--quick`, `--seconds`, `--repeats`, `--out` and `--json`.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// `--quick` and `--seconds`.
    #[command(flatten)]
    pub length: LengthArgs,
    /// Runs per configuration; the tables give the median and the spread.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: Option<u32>,
    /// `--out` and `--json`.
    #[command(flatten)]
    pub output: OutputArgs,
}

impl Fill for CommonArgs {
    fn fill(&self, args: &mut LabArgs) {
        self.length.fill(args);
        args.repeats = self.repeats;
        self.output.fill(args);
    }
}

/// `--load`.
#[derive(Debug, Args)]
pub struct LoadFlag {
    /// Offered loads per process, as fractions of its fair share of the CPUs (1.0 = exactly),
    /// comma-separated (default: 0.7 and the 1.5 overload; --quick: 0.7).
    #[arg(long, value_delimiter = ',', value_parser = parse_load)]
    pub load: Vec<f64>,
}

impl Fill for LoadFlag {
    fn fill(&self, args: &mut LabArgs) {
        args.load.clone_from(&self.load);
    }
}

/// `--service-ms`.
#[derive(Debug, Args)]
pub struct ServiceFlag {
    /// Service time of one work item, in milliseconds.
    #[arg(long, default_value_t = 5.0, value_parser = parse_positive)]
    pub service_ms: f64,
}

impl Fill for ServiceFlag {
    fn fill(&self, args: &mut LabArgs) {
        args.service_ms = self.service_ms;
    }
}

/// `--processes`.
#[derive(Debug, Args)]
pub struct ProcessesFlag {
    /// Process counts for `neighbours`, comma-separated (default: 1 to 2 × CPUs).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=256))]
    pub processes: Vec<u32>,
}

impl Fill for ProcessesFlag {
    fn fill(&self, args: &mut LabArgs) {
        args.processes.clone_from(&self.processes);
    }
}

/// `--pools`.
#[derive(Debug, Args)]
pub struct PoolsFlag {
    /// Pool kinds for `neighbours` and `headline`, comma-separated (default: ignorant, optimal,
    /// share, plain, adaptive; `headline`: ignorant, optimal, adaptive, plain). `adaptive` is the
    /// default pool (sharing host CPU tokens), `plain` the adaptive policy without them. With
    /// `neighbours --items async` the kinds are the executors tokio-default, tokio-optimal and
    /// cotenant-async (the default: all three), and only those.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub pools: Vec<PoolKind>,
}

impl Fill for PoolsFlag {
    fn fill(&self, args: &mut LabArgs) {
        args.pools.clone_from(&self.pools);
    }
}

/// `--setting`.
#[derive(Debug, Args)]
pub struct SettingFlag {
    /// Where `neighbours`' processes live.
    #[arg(long, value_enum, default_value_t = SettingArg::Both)]
    pub setting: SettingArg,
}

impl Fill for SettingFlag {
    fn fill(&self, args: &mut LabArgs) {
        args.setting = self.setting;
    }
}

/// `--items`, `--async-wait-ms` and `--exact-cpu` (`neighbours`).
#[derive(Debug, Args)]
pub struct ItemsFlag {
    /// What each item is: `threads`, work a pool's worker thread runs (the pool kinds), or
    /// `async`, a future that awaits a short timer and then computes the same work, served by
    /// tokio's multi-thread runtime with its default workers (tokio-default), by tokio with
    /// max(1, CPUs / P) workers (tokio-optimal) and by the cotenant executor on the default pool
    /// (cotenant-async). An async item's service time is its compute alone; its end-to-end time
    /// runs from its scheduled arrival to the end of its compute, the timer's wait included,
    /// for every executor alike.
    #[arg(long, value_enum, default_value_t = Items::Threads)]
    pub items: Items,
    /// With `--items async`: how long each item waits on its timer before it computes, in
    /// milliseconds (default 1; tokio's timers count whole milliseconds).
    #[arg(long, value_parser = parse_async_wait_ms)]
    pub async_wait_ms: Option<f64>,
    /// Items of exactly --service-ms of CPU time, read on the worker thread's CPU clock,
    /// instead of a fixed amount of work calibrated once: on a host where busy CPUs slow each
    /// other (hyperthreads, a VM's vCPUs), the same work costs more CPU time when the host is
    /// busy; with this, every item costs the same CPU time, as in the simulator. Rust kinds only.
    #[arg(long)]
    pub exact_cpu: bool,
}

impl Fill for ItemsFlag {
    fn fill(&self, args: &mut LabArgs) {
        args.items = self.items;
        args.async_wait_ms = self.async_wait_ms;
        args.exact_cpu = self.exact_cpu;
    }
}

/// Defines an experiment's flags as a list of flag groups, and its [`Fill`]: each group fills
/// the fields it holds. (Written once here rather than a struct and an impl per experiment.)
macro_rules! flag_groups {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $group:ty),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Args)]
        pub struct $name {
            $(
                #[doc = concat!("The `", stringify!($group), "` flags.")]
                #[command(flatten)]
                pub $field: $group,
            )+
        }

        impl Fill for $name {
            fn fill(&self, args: &mut LabArgs) {
                $(self.$field.fill(args);)+
            }
        }
    };
}

flag_groups! {
    /// The flags of `overcommit` and `contention` (`--load`: its first value only).
    OvercommitArgs { common: CommonArgs, load: LoadFlag, service: ServiceFlag }
}

flag_groups! {
    /// The flags of `quota` (`--load`: its first value only).
    QuotaArgs { common: CommonArgs, load: LoadFlag, service: ServiceFlag }
}

flag_groups! {
    /// The flags of `neighbours`.
    NeighboursArgs {
        common: CommonArgs,
        load: LoadFlag,
        processes: ProcessesFlag,
        pools: PoolsFlag,
        setting: SettingFlag,
        service: ServiceFlag,
        items: ItemsFlag,
    }
}

flag_groups! {
    /// The flags of `factor` (its pools are share's factors, its setting one cgroup).
    FactorArgs { common: CommonArgs, load: LoadFlag, processes: ProcessesFlag, service: ServiceFlag }
}

flag_groups! {
    /// The flags of `headline` (one cgroup).
    HeadlineArgs {
        common: CommonArgs,
        load: LoadFlag,
        processes: ProcessesFlag,
        pools: PoolsFlag,
        service: ServiceFlag,
    }
}

flag_groups! {
    /// The flags of `burst`.
    BurstArgs { common: CommonArgs, service: ServiceFlag }
}

flag_groups! {
    /// The flags of `fairness`.
    FairnessArgs { common: CommonArgs, service: ServiceFlag }
}

flag_groups! {
    /// The flags of `runtimes`: one fixed set of probes, so no length or repeats.
    RuntimesArgs { output: OutputArgs }
}

flag_groups! {
    /// The flags of `throttling`: one run per row, so no `--repeats`.
    ThrottlingArgs { length: LengthArgs, output: OutputArgs, service: ServiceFlag }
}

/// The flags of `go-neighbours` (its pools are the three Go kinds).
#[derive(Debug, Args)]
pub struct GoNeighboursArgs {
    /// `--quick`, `--seconds`, `--repeats`, `--out` and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
    /// `--load`.
    #[command(flatten)]
    pub load: LoadFlag,
    /// `--processes`.
    #[command(flatten)]
    pub processes: ProcessesFlag,
    /// `--setting`.
    #[command(flatten)]
    pub setting: SettingFlag,
    /// `--service-ms`.
    #[command(flatten)]
    pub service: ServiceFlag,
    /// How `go-neighbours`' Go services run their items.
    #[arg(long, value_enum, default_value_t = GoItems::Limited)]
    pub go_items: GoItems,
}

impl Fill for GoNeighboursArgs {
    fn fill(&self, args: &mut LabArgs) {
        self.common.fill(args);
        self.load.fill(args);
        self.processes.fill(args);
        self.setting.fill(args);
        self.service.fill(args);
        args.go_items = self.go_items;
    }
}

/// The flags of `isolation`.
#[derive(Debug, Args)]
pub struct IsolationArgs {
    /// `--quick`, `--seconds`, `--repeats`, `--out` and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
    /// `isolation`'s scenarios to run, comma-separated (default: all); baseline and
    /// unisolated always run, as the ratios' denominators.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenarios: Vec<crate::isolation::Scenario>,
    /// `isolation`: how the load generator's connection threads are scheduled. `realtime`
    /// (`SCHED_FIFO` 1, falling back to normal with the reason recorded) keeps B from delaying
    /// the client itself, as if it ran on another host; `normal` lets the client compete with
    /// the tenants (RESULTS.md, "isolation").
    #[arg(long, value_enum, default_value_t = crate::loadgen::ClientPriority::Realtime)]
    pub client_priority: crate::loadgen::ClientPriority,
}

impl Fill for IsolationArgs {
    fn fill(&self, args: &mut LabArgs) {
        self.common.fill(args);
        args.scenarios.clone_from(&self.scenarios);
        args.client_priority = self.client_priority;
    }
}

/// The flags of `spin`.
#[derive(Debug, Args)]
pub struct SpinArgs {
    /// `--quick`, `--seconds`, `--repeats`, `--out` and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
    /// `spin`: the client's round trip each session sleeps before a transaction, in µs; it sets
    /// how busy the sessions keep their CPUs (default 200: about 85 % of the restricted CPU on
    /// the test VM; RESULTS.md, section `spin`, says why the round trip sets the load).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub round_trip_us: Option<u64>,
}

impl Fill for SpinArgs {
    fn fill(&self, args: &mut LabArgs) {
        self.common.fill(args);
        args.round_trip_us = self.round_trip_us;
    }
}

#[cfg(test)]
mod tests;

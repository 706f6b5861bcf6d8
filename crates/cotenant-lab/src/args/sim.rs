//! Command-line definitions (clap) of `cotenant sim`: the simulations, their flags, and the
//! scheduler model a simulated host runs (kept apart from `args.rs`, the lab's, to keep each file
//! short).

use clap::{Args, Subcommand, ValueEnum};
use cotenant_ops::values::{parse_load, parse_positive, parse_time};
use std::path::PathBuf;

use super::{PoolKind, SettingArg};

/// Run a deterministic simulation.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// The simulation to run.
    #[command(subcommand)]
    pub command: SimCommand,
}

/// The simulations to choose from.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// CFS bandwidth control (the kernel's CPU quotas) event by event: a quota per period,
    /// per-CPU local pools refilled in slices, charged at scheduler ticks; CPU-bound threads,
    /// one per CPU.
    ///
    /// The model and its variants follow the paper "Mitigating Unnecessary Throttling in Linux
    /// CFS Bandwidth Control" (Ugedal and Kumar, 2022).
    Bandwidth(SimBandwidthArgs),
    /// Threads that fit their quota yet get throttled, simulated: N CPU-bound threads on N
    /// CPUs, quota N CPUs, periods 100, 50 and 10 ms, random tick phases and start offsets;
    /// throttled periods per variant, the measurements of the CFS throttling paper beside.
    ///
    /// The paper is "Mitigating Unnecessary Throttling in Linux CFS Bandwidth Control" (Ugedal
    /// and Kumar, 2022); its Table II measured this setting on Linux 5.12.
    Table2(SimTable2Args),
    /// Neighbouring pools on a simulated host of any size: P processes with pools (running
    /// the library's policy code), each offered open-loop CPU-bound work, under a fair
    /// scheduler; tables, verdicts and charts like `lab neighbours`.
    Neighbours(SimNeighboursArgs),
    /// Simulates the configurations of a real `lab neighbours` run and compares the
    /// ignorant/adaptive ratios (p99, max, throughput), real against simulated.
    Validate(SimValidateArgs),
}

/// Simulate the CFS throttling paper's Table II: throttled periods per kernel variant.
#[derive(Debug, Args)]
pub struct SimTable2Args {
    /// CPU-bound threads, one per CPU; the quota is this many CPUs (the paper's: 3).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: u32,
    /// Simulated time per run (the paper's runs took about 74 s unthrottled).
    #[arg(long, default_value = "74s", value_parser = parse_time)]
    pub duration: std::time::Duration,
    /// The scheduler tick (4ms at HZ=250; the paper does not give its HZ).
    #[arg(long, default_value = "4ms", value_parser = parse_time)]
    pub tick: std::time::Duration,
    /// What a local pool takes at a time.
    #[arg(long, default_value = "5ms", value_parser = parse_time)]
    pub slice: std::time::Duration,
    /// Runs per period and variant, each with its own random tick phases and start offsets
    /// (random streams 1 to N); the table gives the median and the range.
    // Named `--runs` for users; `--seeds`, its first name, still works (hidden alias).
    #[arg(long = "runs", alias = "seeds", value_name = "N", default_value_t = 10)]
    #[arg(value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub seeds: u32,
    /// Blocking and configuration writes.
    #[command(flatten)]
    pub workload: SimWorkloadArgs,
    /// Print JSON instead.
    #[arg(long)]
    pub json: bool,
}

/// Simulate neighbouring processes with pools on a simulated host.
#[derive(Debug, Args)]
pub struct SimNeighboursArgs {
    /// CPUs of the simulated host.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cpus: u32,
    /// Process counts, comma-separated (default: 1, 2, 4, 8).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub processes: Vec<u32>,
    /// Pool kinds, comma-separated (default: ignorant, optimal, share, plain, adaptive).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub pools: Vec<PoolKind>,
    /// Offered loads per process, as fractions of its fair share (default: 1.0 and 1.5).
    #[arg(long, value_delimiter = ',', value_parser = parse_load)]
    pub load: Vec<f64>,
    /// Where the processes live: one cgroup (threads compete) or one each (processes compete).
    #[arg(long, value_enum, default_value_t = SettingArg::Both)]
    pub setting: SettingArg,
    /// How long items arrive (the run then drains its queues).
    #[arg(long, default_value = "10s", value_parser = parse_time)]
    pub duration: std::time::Duration,
    /// Items arriving before this are left out of the latencies (the pools' first decisions).
    #[arg(long, default_value = "1s", value_parser = parse_time)]
    pub warmup: std::time::Duration,
    /// Host CPU tokens beyond one per CPU, for the `adaptive` pools (which share tokens).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub spare_tokens: u32,
    /// The `adaptive` pools' workers take no CPU leases with their tokens (the library's take
    /// one by default): token holders may then share a CPU while another idles, until a load
    /// balance moves one. Matters under `--scheduler linux` only.
    #[arg(long)]
    pub no_leases: bool,
    /// CPU time of one item, in milliseconds.
    #[arg(long, default_value_t = 5.0, value_parser = parse_positive)]
    pub service_ms: f64,
    /// The random stream of the first repeat (repeat i uses stream N + i): the same stream
    /// gives the same run.
    // Named `--random-stream` for users; `--seed`, its first name, still works (hidden alias).
    #[arg(long = "random-stream", alias = "seed", value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Runs per configuration, each with its own random stream; tables give the median and the
    /// spread.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: u32,
    /// The scheduler model (`--scheduler`).
    #[command(flatten)]
    pub scheduler: SchedulerFlag,
    /// Write results.json, results.csv, report.md and charts under DIR/sim-neighbours/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Compare a real neighbours run with its simulation.
#[derive(Debug, Args)]
pub struct SimValidateArgs {
    /// `results.json` of a real `cotenant lab neighbours` run.
    #[arg(long, value_name = "FILE")]
    pub real: PathBuf,
    /// Simulated runs per configuration (random streams 1 to N).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: u32,
    /// The scheduler model (`--scheduler`).
    #[command(flatten)]
    pub scheduler: SchedulerFlag,
    /// Write results.json and report.md under DIR/sim-validate/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Which kernel behaviour `sim bandwidth` simulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SimVariant {
    /// Linux 5.12, as the CFS throttling paper measured it: the period's leftover is discarded.
    Baseline,
    /// The paper's slush fund: the leftover pays the next period's overruns.
    Slush,
    /// All of the paper's fixes: the slush fund, and a configuration write that changes
    /// nothing is a no-op.
    All,
    /// Linux since 5.4 in this model: baseline, and an idle CPU returns all but 1 ms of its
    /// local pool.
    Mainline,
}

/// Blocking and configuration writes, for `sim bandwidth` and `sim table2`.
#[derive(Debug, Clone, Args)]
pub struct SimWorkloadArgs {
    /// Each thread runs this much CPU time, then blocks for --sleep (default: never blocks).
    #[arg(long, value_parser = parse_time, requires = "sleep")]
    pub run: Option<std::time::Duration>,
    /// How long a thread blocks after each --run.
    #[arg(long, value_parser = parse_time, requires = "run")]
    pub sleep: Option<std::time::Duration>,
    /// A same-value write of the quota and period this often (what container runtimes do when
    /// they reconcile; default: never).
    #[arg(long, value_parser = parse_time)]
    pub update_every: Option<std::time::Duration>,
}

/// Simulate CFS bandwidth control event by event.
#[derive(Debug, Args)]
pub struct SimBandwidthArgs {
    /// The bandwidth period.
    #[arg(long, default_value = "100ms", value_parser = parse_time)]
    pub period: std::time::Duration,
    /// CPU time per period, all CPUs together (e.g. 10ms; 2 CPUs of a 100ms period: 200ms).
    #[arg(long, value_parser = parse_time)]
    pub quota: std::time::Duration,
    /// What a local pool takes from the global pool at a time (the kernel's default 5 ms).
    #[arg(long, default_value = "5ms", value_parser = parse_time)]
    pub slice: std::time::Duration,
    /// The scheduler tick (4ms at HZ=250; 1, 3.33 and 10 ms are the other common ones).
    #[arg(long, default_value = "4ms", value_parser = parse_time)]
    pub tick: std::time::Duration,
    /// When each CPU's first tick comes (below --tick).
    #[arg(long, default_value = "0ms", value_parser = parse_time)]
    pub tick_phase: std::time::Duration,
    /// Periods to simulate.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub periods: u32,
    /// CPU-bound threads, one per CPU.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: u32,
    /// Kernel behaviour to simulate.
    #[arg(long, value_enum, default_value_t = SimVariant::Baseline)]
    pub variant: SimVariant,
    /// Blocking and configuration writes.
    #[command(flatten)]
    pub workload: SimWorkloadArgs,
    /// Print every event before the per-period table.
    #[arg(long)]
    pub timeline: bool,
    /// Also draw the pools over time: DIR/bandwidth-timeline.svg (and .png).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print JSON instead.
    #[arg(long)]
    pub json: bool,
}

/// `--scheduler`, the flag of `sim neighbours` and `sim validate`.
#[derive(Debug, Args)]
pub struct SchedulerFlag {
    /// The scheduler model of the simulated host: `idealised` (one run queue for the host, an
    /// idealised fair scheduler) or `linux` (Linux 6.6 and later, as traced on 6.18: a run queue per CPU, the
    /// earliest eligible virtual deadline first, wake-up placement and load balancing).
    #[arg(long = "scheduler", value_name = "SCHEDULER", value_enum, default_value_t = SchedulerArg::Idealised)]
    pub model: SchedulerArg,
    /// Simulate each process's submitting thread (the load generator, in the process's cgroup):
    /// every arrival wakes it, it runs this many microseconds of CPU, then queues the items and
    /// wakes a worker from its own CPU. 0 (the default): not simulated, items queue themselves.
    #[arg(long = "submit-us", value_name = "MICROSECONDS", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub submit_us: u32,
    /// How the Linux model reweights a CPU's running group entity when its share changes (its
    /// threads waking or sleeping there): `as-measured` (Linux 6.18 as traced on a real host:
    /// each such reweight grows the running group's lead, so a neighbour group on that CPU can
    /// wait tens of milliseconds) or `lag-conserving` (its lead kept, as the kernel does for a
    /// waiting group; the simulator's rule before the trace, which however took 6.6's lag clamp
    /// and base slice).
    #[arg(long = "running-reweight", value_name = "RULE", value_enum, default_value_t = RunningReweightArg::AsMeasured)]
    pub running_reweight: RunningReweightArg,
    /// How the Linux model splits a process group's weight across CPUs: `counts` (in proportion
    /// to its runnable threads on each) or `loads` (from load averages, as the kernel does; it
    /// reweights a running group more often than the kernel was traced doing).
    #[arg(long = "group-shares", value_name = "RULE", value_enum, default_value_t = GroupSharesArg::Counts)]
    pub group_shares: GroupSharesArg,
}

/// `--group-shares` of `sim neighbours` and `sim validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GroupSharesArg {
    /// In proportion to the group's runnable threads on each CPU.
    Counts,
    /// From the group queues' load averages (`calc_group_shares`).
    Loads,
}

/// `--running-reweight` of `sim neighbours` and `sim validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunningReweightArg {
    /// As traced on Linux 6.18: the running entity's weight counted twice where it is placed.
    AsMeasured,
    /// The running entity's lag kept, as for a waiting one.
    LagConserving,
}

/// The scheduler model of `sim neighbours` and `sim validate` (`--scheduler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedulerArg {
    /// One run queue for the whole host, fair by virtual runtime: the simulator's first model.
    Idealised,
    /// Linux as it schedules today: per-CPU run queues, the earliest eligible virtual deadline
    /// first, wake-up placement, newly-idle and periodic load balancing, per-CPU group shares.
    Linux,
}

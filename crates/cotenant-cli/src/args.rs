//! Command-line definitions (clap) only; turning them into library calls is `cmd`'s job.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Share a Linux host's CPUs without hurting each other's tail latency.
#[derive(Debug, Parser)]
#[command(name = "cotenant", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the number of CPUs this process (or --pid) should use, and why.
    ///
    /// The count is the smallest of the online CPUs, the cgroup cpuset, the affinity mask and
    /// the CPU quota of the cgroup and every ancestor (cgroup v1 and v2), rounded down by
    /// default: never more runnable threads than the quota pays for.
    Cpus(CpusArgs),
    /// Run an experiment of seed 000 on this host, side by side with the alternatives.
    ///
    /// Today: `neighbours` (Figure 7) with every process in one cgroup. The other experiments
    /// of issue 4 are not written yet.
    Lab(LabArgs),
    /// Internal: one process of a lab experiment (started by `cotenant lab`).
    #[command(hide = true)]
    LabWorker(LabWorkerArgs),
}

#[derive(Debug, Args)]
pub struct LabArgs {
    /// The experiment.
    #[arg(value_enum)]
    pub experiment: Experiment,
    /// A short smoke run (fewer configurations, 1 s per run, 1 repeat).
    #[arg(long)]
    pub quick: bool,
    /// Runs per configuration; the tables give the median and the spread.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: Option<u32>,
    /// Write results.json, results.csv and report.md under DIR/<experiment>/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Offered load per process, as a fraction of its fair share of the CPUs (1.0 = exactly).
    #[arg(long, default_value_t = 0.7, value_parser = parse_load)]
    pub load: f64,
    /// Seconds each configuration runs.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub seconds: Option<u64>,
    /// Service time of one work item, in milliseconds.
    #[arg(long, default_value_t = 5.0, value_parser = parse_positive)]
    pub service_ms: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    /// P identical processes at once, each with its own open-loop load (seed 000 Figure 7).
    Neighbours,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolKind {
    /// fixed(CPUs): what every runtime does.
    Ignorant,
    /// fixed(max(1, CPUs / P)): a perfect static split, known in advance.
    Optimal,
    /// The seed's formula, share(1).
    Share,
    /// cotenant's adaptive policy.
    Adaptive,
}

#[derive(Debug, Args)]
pub struct LabWorkerArgs {
    #[arg(long, value_enum)]
    pub pool: PoolKind,
    /// Processes in the experiment (sizes the optimal pool and the fair share).
    #[arg(long)]
    pub processes: u32,
    #[arg(long, value_parser = parse_load)]
    pub load: f64,
    #[arg(long, value_parser = parse_positive)]
    pub service_ms: f64,
    #[arg(long)]
    pub duration_ms: u64,
    #[arg(long, value_enum, default_value_t = crate::lab::workload::Arrivals::Poisson)]
    pub arrivals: crate::lab::workload::Arrivals,
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
}

/// A finite number in `(0, max]`; `what` says what it is, in the error.
fn parse_bounded(text: &str, max: f64, what: &str) -> Result<f64, String> {
    let v: f64 = text.parse().map_err(|_| format!("{text:?} is not a number"))?;
    if v.is_finite() && v > 0.0 && v <= max {
        Ok(v)
    } else {
        Err(format!("{what} must be more than 0 and at most {max}, got {v}"))
    }
}

fn parse_load(text: &str) -> Result<f64, String> {
    parse_bounded(text, 10.0, "the load (a fraction of the fair share)")
}

fn parse_positive(text: &str) -> Result<f64, String> {
    parse_bounded(text, 60_000.0, "the value")
}

#[derive(Debug, Args)]
pub struct CpusArgs {
    /// How to round a fractional limit to a thread count (always at least 1).
    #[arg(long, value_enum, default_value_t = RoundingArg::Floor)]
    pub rounding: RoundingArg,
    /// Print the fractional limit (e.g. 1.5) instead of a thread count.
    #[arg(long, conflicts_with_all = ["explain", "json"])]
    pub fractional: bool,
    /// Print every source, the file it came from, and which one binds.
    #[arg(long, conflicts_with = "json")]
    pub explain: bool,
    /// Print a JSON object (limit, threads, threads_ceil, binding, cgroup_version, sources...).
    #[arg(long)]
    pub json: bool,
    /// Report on another process instead of this one.
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,
    /// Read /proc and /sys from under DIR instead of / (a captured tree or a test fixture).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoundingArg {
    /// Round down: never more threads than the quota pays for (default).
    Floor,
    /// Round up: use the fraction too, accepting some throttling.
    Ceil,
    /// Round to nearest, halves up.
    Nearest,
}

impl From<RoundingArg> for cotenant::Rounding {
    fn from(r: RoundingArg) -> Self {
        match r {
            RoundingArg::Floor => cotenant::Rounding::Floor,
            RoundingArg::Ceil => cotenant::Rounding::Ceil,
            RoundingArg::Nearest => cotenant::Rounding::Nearest,
        }
    }
}

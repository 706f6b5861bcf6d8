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

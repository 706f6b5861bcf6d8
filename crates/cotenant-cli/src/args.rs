//! Command-line definitions (clap) only; turning them into library calls is `cmd`'s job.

use clap::{Args, Parser, Subcommand, ValueEnum};
#[cfg(feature = "lab")]
use cotenant_lab::args::{LabCommand, LabTenantArgs, LabWorkerArgs, SimArgs};
use cotenant_ops::values::{parse_duration, parse_fraction, parse_positive, parse_time};
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
    /// Measure an effect of CPU overcommitment on this host, side by side with the alternatives.
    ///
    /// Prints tables and a verdict; with --out, writes results.csv, results.json, report.md
    /// and charts (SVG and PNG) under DIR/<experiment>/. Experiments that need real cgroups
    /// (root) are skipped, saying why, where they cannot be created.
    #[cfg(feature = "lab")]
    Lab(LabCommand),
    /// Run a command with the CPU count set for every common runtime (GOMAXPROCS,
    /// RAYON_NUM_THREADS, OMP_NUM_THREADS, -XX:ActiveProcessorCount, ...).
    ///
    /// Computes the count once, sets the variables the user has not set (--force overrides),
    /// and execs the command: same pid, its exit status and signals are passed on as they
    /// are. The variables are listed in docs/run.md.
    Run(RunArgs),
    /// Print `export` lines setting the CPU count for every common runtime (for shells and
    /// container entrypoints: `eval "$(cotenant env)"`).
    Env(EnvArgs),
    /// Diagnose CPU interference: why is this process (or host) slow on shared CPUs?
    ///
    /// Samples for --duration (two snapshots) and reports findings, most likely cause first,
    /// each with its evidence (file, numbers) and a recommendation: contention, a busy sibling
    /// cgroup (with the exact `cotenant cgroup set` line that marks it idle), throttling,
    /// weights, cpusets, pressure, migrations, NUMA, oversized pools. Without --pid: the host.
    /// `--verify BEFORE.json` compares with a report saved before a change. The --json shape is
    /// documented in docs/doctor.md.
    Doctor(DoctorArgs),
    /// How many threads a pool needs: the utilisation formula (Ncpu × U × (1 + W/C)) or Little's
    /// law (L = λ × W), with the arithmetic shown.
    ///
    /// `--wait W --compute C [--util U] [--cpus N]`: the formula; --cpus defaults to this
    /// process's cotenant CPU limit, --util to 1. `--rate R --latency W`: Little's law. Times
    /// take a unit: ns, us, ms or s. `--pid PID [--duration 10s]`: measure a running
    /// process's thread groups and size each.
    Size(SizeArgs),
    /// Deterministic simulations of what a small host cannot show: `sim bandwidth` runs the
    /// kernel's CPU bandwidth control (CFS quotas) event by event.
    ///
    /// `cotenant sim bandwidth --period 10ms --quota 10ms --slice 5ms --tick 4ms --periods 3
    /// --threads 1 --variant baseline --timeline` prints every refill, tick, throttle and
    /// unthrottle with the local and global pools, then each period's run and throttled time;
    /// --json prints {"variant", "periods": [{"index", "ran_ms", "throttled_ms"}],
    /// "throttled_ratio", "events": [...]}.
    #[cfg(feature = "lab")]
    Sim(SimArgs),
    /// Change a cgroup's CPU settings (quota, idle, weight), writing only what differs
    /// (`cgroup set`).
    ///
    /// Every write of a CPU quota, even of the same value, resets the kernel's bandwidth pools
    /// and can throttle the cgroup for the rest of the period; `set` reads the current values,
    /// writes only the files that differ, and reads them back. `--idle` ranks a batch job's
    /// cgroup below its neighbours. Details in docs/cgroup-set.md.
    Cgroup(CgroupArgs),
    /// List or remove this user's host CPU token sets (what cooperating pools share).
    ///
    /// Pools share one set of CPU tokens per user and CPU set by default, so that together
    /// they never run more tasks than there are CPUs. A set is a System V semaphore set that
    /// outlives the processes, like a file: `tokens list` shows each (tokens, free, waiting,
    /// member processes, owner and mode, and why a set is refused), `tokens remove` deletes one.
    Tokens(TokensArgs),
    /// Show every cooperating pool of this user on this host, live: pid, command, pool,
    /// threads, target, running, queued, token holds and waits, CPU share, p99 queue wait (of
    /// pools that time their tasks: COTENANT_TASK_HISTOGRAMS=on in the process's environment).
    ///
    /// Each process's pools publish a small status record; top reads them twice a second, most
    /// CPU first (q, Esc or Ctrl-C quits). --once prints one table, --json one snapshot;
    /// fields in docs/top.md.
    Top(crate::cmd::top::TopArgs),
    /// Print a shell completion script for cotenant: bash, zsh, fish, elvish or powershell.
    ///
    /// Try it in the current shell with `source <(cotenant completions bash)`, or save it where
    /// the shell looks for completions: for bash
    /// ~/.local/share/bash-completion/completions/cotenant, for zsh a file named _cotenant in a
    /// folder of $fpath, for fish ~/.config/fish/completions/cotenant.fish. `make install`
    /// installs the bash, zsh and fish scripts under PREFIX/share.
    Completions(CompletionsArgs),
    /// Print the manual page of cotenant (roff), every command in one page.
    ///
    /// Read it with `cotenant man | man -l -`, or save it as cotenant.1 in a folder of
    /// $MANPATH (e.g. ~/.local/share/man/man1/). `make install` installs it as
    /// PREFIX/share/man/man1/cotenant.1.
    Man,
    /// Internal: one process of a lab experiment (started by `cotenant lab`).
    #[cfg(feature = "lab")]
    #[command(hide = true)]
    LabWorker(LabWorkerArgs),
    /// Internal: a tenant of `lab isolation` (started by `cotenant lab`).
    #[cfg(feature = "lab")]
    #[command(hide = true)]
    LabTenant(LabTenantArgs),
    /// Internal: print what Rust std, num_cpus and cotenant believe (`lab runtimes`).
    #[cfg(feature = "lab")]
    #[command(hide = true)]
    LabProbe,
}

/// What `run` and `env` share: how the count is computed and which variables get it.
#[derive(Debug, Args)]
pub struct CountArgs {
    /// How to round a fractional limit to a thread count (always at least 1).
    #[arg(long, value_enum, default_value_t = RoundingArg::Floor)]
    pub rounding: RoundingArg,
    /// Overwrite variables the user already set.
    #[arg(long)]
    pub force: bool,
    /// Also preload cotenant's shim, so that sysconf(_SC_NPROCESSORS_ONLN), get_nprocs() and
    /// std::thread::hardware_concurrency() answer the count (C, C++, Python < 3.13). The shim
    /// is taken from $COTENANT_PRELOAD_LIB, else from the cotenant executable's folder or
    /// ../lib/cotenant relative to it, else the copy built into cotenant is written to
    /// $XDG_CACHE_HOME/cotenant (default ~/.cache/cotenant) on first use. Read the risks in docs/run.md first.
    #[arg(long)]
    pub preload: bool,
    /// Refuse when the CPU count cannot be determined (an unreadable or unexpected cgroup
    /// file): exit with 1, `run` starting nothing and `env` printing nothing. Without it, `run`
    /// starts the command unchanged (no variable set) and `env` prints no line, after one
    /// warning naming the file and the reason.
    #[arg(long)]
    pub strict: bool,
    /// Read /proc and /sys from under DIR instead of / (a test fixture).
    #[arg(long, value_name = "DIR", hide = true)]
    pub root: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub count: CountArgs,
    /// Print what would be set and the command, and run nothing.
    #[arg(long)]
    pub print: bool,
    /// The command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The process to diagnose (default: the whole host).
    ///
    /// Its cooperating neighbours, the processes whose pools share a host CPU token set with
    /// its own, are named from the status records pools publish, in the folder `cotenant top`
    /// reads ($COTENANT_STATUS_DIR, else /dev/shm/cotenant-status-<uid> of the process's user).
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,
    /// How long to sample: "2s", "500ms", "1.5s" (100ms to 60s).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub duration: std::time::Duration,
    /// Print a JSON object (schema in docs/doctor.md).
    #[arg(long)]
    pub json: bool,
    /// Compare with a report saved before a change: the output of `doctor --pid PID --json`.
    /// Applies nothing: after the operator applied a remedy, the doctor measures again and
    /// reports the process's run-queue wait before and after, and which of the remedy commands
    /// printed before it no longer prints.
    #[arg(long, value_name = "BEFORE.json", requires = "pid")]
    pub verify: Option<PathBuf>,
    /// Read /proc and /sys from under DIR instead of / (a test fixture).
    #[arg(long, value_name = "DIR", hide = true)]
    pub root: Option<PathBuf>,
}

/// `cotenant size`: the utilisation formula, Little's law, or a running process.
#[derive(Debug, Args)]
pub struct SizeArgs {
    /// CPUs the pool may use (default: this process's cotenant CPU limit).
    #[arg(long, value_parser = parse_positive)]
    pub cpus: Option<f64>,
    /// Target CPU utilisation, a fraction in (0, 1] (default 1).
    #[arg(long, value_parser = parse_fraction)]
    pub util: Option<f64>,
    /// Time a task waits (I/O, locks, remote calls), e.g. 45ms.
    #[arg(long, value_parser = parse_time)]
    pub wait: Option<std::time::Duration>,
    /// CPU time of a task, e.g. 5ms.
    #[arg(long, value_parser = parse_time)]
    pub compute: Option<std::time::Duration>,
    /// Arrival rate, requests per second (Little's law).
    #[arg(long, value_parser = parse_positive)]
    pub rate: Option<f64>,
    /// Time a request spends in the system, e.g. 50ms (Little's law).
    #[arg(long, value_parser = parse_time)]
    pub latency: Option<std::time::Duration>,
    /// Measure a running process instead: sample its threads' states and CPU times, group
    /// them by name, and size each group (a thread dump's method, for any language).
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,
    /// How long to sample with --pid (default 10s).
    #[arg(long, value_parser = parse_duration, requires = "pid")]
    pub duration: Option<std::time::Duration>,
    /// Print JSON: {"method", "exact", "threads", "arithmetic", "cpus_source"}; with --pid
    /// {"pid", "cpus", "seconds", "groups": [{"pattern", "threads", "running_fraction",
    /// "wait_compute_ratio", "recommended", "oversized"}]}.
    #[arg(long)]
    pub json: bool,
}

/// `cotenant tokens`: list or remove host CPU token sets.
#[derive(Debug, Args)]
pub struct TokensArgs {
    #[command(subcommand)]
    pub command: TokensCommand,
}

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// This user's token sets, and any set squatting this process's default key.
    List(TokensListArgs),
    /// Remove a set by name (or key, 0x...), or every listed set with --all. A set with live
    /// member processes, or one cotenant refuses, is removed only with --force.
    Remove(TokensRemoveArgs),
}

#[derive(Debug, Args)]
pub struct TokensListArgs {
    /// Print a JSON array (one object per set).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TokensRemoveArgs {
    /// The set's name (as `tokens list` shows it) or key (0x followed by 8 hex digits).
    #[arg(value_name = "NAME", required_unless_present = "all", conflicts_with = "all")]
    pub name: Option<String>,
    /// Every set `tokens list` shows.
    #[arg(long)]
    pub all: bool,
    /// Remove even a set with live member processes (their pools then run without tokens) or
    /// one that another user made on our key.
    #[arg(long)]
    pub force: bool,
    /// Print a JSON object: what was removed, what was not and why.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CgroupArgs {
    #[command(subcommand)]
    pub command: CgroupCommand,
}

#[derive(Debug, Subcommand)]
pub enum CgroupCommand {
    /// Set a cgroup's CPU quota (as CPUs), period and burst, mark it idle or not, or set its
    /// CPU weight (v1 or v2); unchanged values are not rewritten.
    ///
    /// `--idle` is the remedy for a batch job in a cgroup next to a latency-sensitive service:
    /// the kernel picks a cgroup before a thread, so only the cgroup's own setting ranks the
    /// batch job below the service (`cotenant doctor` prints the exact line when it sees one).
    Set(CgroupSetArgs),
}

#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("setting").required(true).multiple(true).args(["cpus", "idle", "no_idle", "weight"])
))]
pub struct CgroupSetArgs {
    /// The cgroup directory: absolute, or relative to the cpu controller's mount point. It must
    /// be on a cgroup file system and not itself a symbolic link; no control file is written
    /// through a symbolic link.
    #[arg(value_name = "CGROUP")]
    pub cgroup: PathBuf,
    /// CPUs the quota allows per period (e.g. 1.5), or `max` for no limit.
    #[arg(long, value_name = "X", value_parser = cotenant_ops::cgroup_set::parse_cpus)]
    #[arg(allow_negative_numbers = true)] // so that `--cpus -1` gets parse_cpus's message
    pub cpus: Option<cotenant_ops::cgroup_set::Cpus>,
    /// The period: "100ms", "0.1s", "50000us" (1ms to 1s; default: keep the current one).
    #[arg(long = "period", value_name = "P", value_parser = cotenant_ops::cgroup_set::parse_period)]
    #[arg(requires = "cpus")]
    pub period_us: Option<u64>,
    /// The burst, at most the quota: "20ms", "0us" (default: leave it; Linux 5.14+).
    #[arg(long = "burst", value_name = "B", value_parser = cotenant_ops::cgroup_set::parse_micros)]
    #[arg(requires = "cpus")]
    pub burst_us: Option<u64>,
    /// Mark the cgroup idle (cpu.idle = 1, Linux 5.15+, v1 and v2): its processes then run
    /// only on CPU time the cgroups beside it leave, and a waking thread of those cgroups
    /// preempts them at once. Not with --weight (an idle cgroup takes no weight).
    #[arg(long, conflicts_with = "no_idle")]
    pub idle: bool,
    /// Mark the cgroup not idle (cpu.idle = 0); the kernel then puts its weight back to the
    /// default unless --weight is given too.
    #[arg(long)]
    pub no_idle: bool,
    /// The CPU weight, in cgroup v2 units: 1 to 10000, default 100 (10 is a tenth of a
    /// default cgroup's share under contention). v2 writes cpu.weight; v1 writes cpu.shares
    /// converted as systemd does (N × 1024 / 100, rounded down: 10 → 102).
    #[arg(long, value_name = "N", value_parser = cotenant_ops::cgroup_set::parse_weight)]
    pub weight: Option<u64>,
    /// Print a JSON object (fields in docs/cgroup-set.md).
    #[arg(long)]
    pub json: bool,
    /// Read /proc/self/mountinfo and place mount points under DIR instead of / (a test
    /// fixture); an absolute CGROUP is used as it is. With COTENANT_TEST_CGROUP_FIXTURE=1, a
    /// directory below DIR may be a plain fixture on any file system (links are still refused).
    #[arg(long, value_name = "DIR", hide = true)]
    pub root: Option<PathBuf>,
}

/// `cotenant completions`: which shell to write the script for.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_name = "SHELL", value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    #[command(flatten)]
    pub count: CountArgs,
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

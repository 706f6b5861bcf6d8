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
    /// Prints tables and a verdict; with --out, writes results.csv, results.json, report.md
    /// and charts (SVG and PNG) under DIR/<experiment>/. Experiments that need real cgroups
    /// (root) are skipped, saying why, where they cannot be created.
    Lab(LabArgs),
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
    /// each with its evidence (file, numbers) and a recommendation: contention, throttling,
    /// weights, cpusets, pressure, migrations, NUMA, oversized pools. Without --pid: the host.
    /// The --json shape is documented in docs/doctor.md.
    Doctor(DoctorArgs),
    /// How many threads a pool needs: seed 002's formula (Ncpu × U × (1 + W/C)) or Little's
    /// law (L = λ × W), with the arithmetic shown.
    ///
    /// `--wait W --compute C [--util U] [--cpus N]`: the formula; --cpus defaults to this
    /// process's cotenant CPU limit, --util to 1. `--rate R --latency W`: Little's law. Times
    /// take a unit: ns, us, ms or s. `--pid PID [--duration 10s]`: measure a running
    /// process's thread groups and size each.
    Size(SizeArgs),
    /// Deterministic simulations (issue 10): `sim bandwidth` runs seed 001's CFS bandwidth
    /// control event by event.
    ///
    /// `cotenant sim bandwidth --period 10ms --quota 10ms --slice 5ms --tick 4ms --periods 3
    /// --threads 1 --variant baseline --timeline` prints every refill, tick, throttle and
    /// unthrottle with the local and global pools, then each period's run and throttled time;
    /// --json prints {"variant", "periods": [{"index", "ran_ms", "throttled_ms"}],
    /// "throttled_ratio", "events": [...]}.
    Sim(SimArgs),
    /// Change a cgroup's CPU settings, writing only what differs (`cgroup set`).
    ///
    /// Every write of a CPU quota, even of the same value, resets the kernel's bandwidth pools
    /// and can throttle the cgroup (seed 001 §IV-A2); `set` reads the current values, writes
    /// only the files that differ, and reads them back. Details in docs/cgroup-set.md.
    Cgroup(CgroupArgs),
    /// List or remove this user's host CPU token sets (what cooperating pools share).
    ///
    /// Pools share one set of CPU tokens per user and CPU set by default, so that together
    /// they never run more tasks than there are CPUs. A set is a System V semaphore set that
    /// outlives the processes, like a file: `tokens list` shows each (tokens, free, waiting,
    /// member processes, owner and mode, and why a set is refused), `tokens remove` deletes one.
    Tokens(TokensArgs),
    /// Internal: one process of a lab experiment (started by `cotenant lab`).
    #[command(hide = true)]
    LabWorker(LabWorkerArgs),
    /// Internal: a tenant of `lab isolation` (started by `cotenant lab`).
    #[command(hide = true)]
    LabTenant(LabTenantArgs),
    /// Internal: print what Rust std, num_cpus and cotenant believe (`lab runtimes`).
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
    /// std::thread::hardware_concurrency() answer the count (C, C++, Python < 3.13). Read the
    /// risks in docs/run.md first.
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
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,
    /// How long to sample: "2s", "500ms", "1.5s" (100ms to 60s).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub duration: std::time::Duration,
    /// Print a JSON object (schema in docs/doctor.md).
    #[arg(long)]
    pub json: bool,
    /// Read /proc and /sys from under DIR instead of / (a test fixture).
    #[arg(long, value_name = "DIR", hide = true)]
    pub root: Option<PathBuf>,
}

/// The shortest and longest `doctor --duration`.
const DURATION_BOUNDS: (std::time::Duration, std::time::Duration) =
    (std::time::Duration::from_millis(100), std::time::Duration::from_secs(60));

/// A duration as `2s`, `1.5s` or `500ms` (a bare number is seconds), within [`DURATION_BOUNDS`].
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    let v: f64 =
        number.trim().parse().map_err(|_| format!("{text:?} is not a duration (e.g. 2s, 500ms, 1.5s)"))?;
    let secs = v * scale;
    let (lo, hi) = DURATION_BOUNDS;
    if !secs.is_finite() || secs < lo.as_secs_f64() || secs > hi.as_secs_f64() {
        return Err(format!("the duration must be between 100ms and 60s, got {text:?}"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

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
    /// them by name, and size each group (seed 002's thread-dump method).
    #[arg(long)]
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

/// A fraction in (0, 1].
fn parse_fraction(text: &str) -> Result<f64, String> {
    let v: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number (e.g. 0.8)"))?;
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("must be above 0 and at most 1 (0.8 for 80 %), got {text:?}"))
    }
}

/// A time with a unit: `45ms`, `1.5s`, `200us`, `200µs`, `500ns`; zero allowed, at most a day.
pub fn parse_time(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let units: [(&str, f64); 5] = [("ns", 1e-9), ("us", 1e-6), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)];
    let Some((number, scale)) =
        units.iter().find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n, *scale)))
    else {
        return Err(format!("{text:?} needs a unit: ns, us, ms or s (e.g. 45ms)"));
    };
    let v: f64 = number.trim().parse().map_err(|_| format!("{text:?} is not a time (e.g. 45ms, 1.5s)"))?;
    let secs = v * scale;
    if !secs.is_finite() || !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("{text:?} must be between 0 and a day"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: SimCommand,
}

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// CFS bandwidth control (seed 001): a quota per period, per-CPU local pools refilled in
    /// slices, charged at scheduler ticks; CPU-bound threads, one per CPU.
    Bandwidth(SimBandwidthArgs),
    /// Seed 001 Table II simulated: N CPU-bound threads on N CPUs, quota N CPUs, periods 100,
    /// 50 and 10 ms, tick phases and start offsets drawn from seeds; throttled periods per
    /// variant, the seed's measurements beside.
    Table2(SimTable2Args),
    /// Seed 000 Figure 7 on a simulated host of any size: P processes with pools (running
    /// the library's policy code), each offered open-loop CPU-bound work, under a fair
    /// scheduler; tables, verdicts and charts like `lab neighbours`.
    Neighbours(SimNeighboursArgs),
    /// Simulates the configurations of a real `lab neighbours` run and compares the
    /// ignorant/adaptive ratios (p99, max, throughput), real against simulated.
    Validate(SimValidateArgs),
}

#[derive(Debug, Args)]
pub struct SimTable2Args {
    /// CPU-bound threads, one per CPU; the quota is this many CPUs (the seed: 3).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: u32,
    /// Simulated time per run (the seed's runs took about 74 s unthrottled).
    #[arg(long, default_value = "74s", value_parser = parse_time)]
    pub duration: std::time::Duration,
    /// The scheduler tick (4ms at HZ=250; the seed does not give its HZ).
    #[arg(long, default_value = "4ms", value_parser = parse_time)]
    pub tick: std::time::Duration,
    /// What a local pool takes at a time.
    #[arg(long, default_value = "5ms", value_parser = parse_time)]
    pub slice: std::time::Duration,
    /// Runs per period and variant, seeds 1..=N; the table gives the median and the range.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub seeds: u32,
    #[command(flatten)]
    pub workload: SimWorkloadArgs,
    /// Print JSON instead.
    #[arg(long)]
    pub json: bool,
}

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
    /// CPU time of one item, in milliseconds.
    #[arg(long, default_value_t = 5.0, value_parser = parse_positive)]
    pub service_ms: f64,
    /// Seed of the first repeat (repeat i uses seed + i).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs per configuration, each with its own seed; tables give the median and the spread.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: u32,
    /// Write results.json, results.csv, report.md and charts under DIR/sim-neighbours/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SimValidateArgs {
    /// `results.json` of a real `cotenant lab neighbours` run.
    #[arg(long, value_name = "FILE")]
    pub real: PathBuf,
    /// Simulated runs per configuration (seeds 1..=N).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: u32,
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
    /// The seed's kernel 5.12: the period's leftover is discarded.
    Baseline,
    /// Seed 001 §IV-A: the leftover pays the next period's overruns.
    Slush,
    /// Seed 001's "All": the slush fund, and a configuration write that changes nothing is a
    /// no-op.
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
    #[arg(long, value_enum, default_value_t = SimVariant::Baseline)]
    pub variant: SimVariant,
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
    /// Set the CPU quota (as CPUs), period and burst of a cgroup (v1 or v2); unchanged values
    /// are not rewritten.
    Set(CgroupSetArgs),
}

#[derive(Debug, Args)]
pub struct CgroupSetArgs {
    /// The cgroup directory: absolute, or relative to the cpu controller's mount point. It must
    /// be on a cgroup file system and not itself a symbolic link; no control file is written
    /// through a symbolic link.
    #[arg(value_name = "CGROUP")]
    pub cgroup: PathBuf,
    /// CPUs the quota allows per period (e.g. 1.5), or `max` for no limit.
    #[arg(long, value_name = "X", value_parser = crate::cgroup_set::parse_cpus)]
    #[arg(allow_negative_numbers = true)] // so that `--cpus -1` gets parse_cpus's message
    pub cpus: crate::cgroup_set::Cpus,
    /// The period: "100ms", "0.1s", "50000us" (1ms to 1s; default: keep the current one).
    #[arg(long = "period", value_name = "P", value_parser = crate::cgroup_set::parse_period)]
    pub period_us: Option<u64>,
    /// The burst, at most the quota: "20ms", "0us" (default: leave it; Linux 5.14+).
    #[arg(long = "burst", value_name = "B", value_parser = crate::cgroup_set::parse_micros)]
    pub burst_us: Option<u64>,
    /// Print a JSON object (fields in docs/cgroup-set.md).
    #[arg(long)]
    pub json: bool,
    /// Read /proc/self/mountinfo and place mount points under DIR instead of / (a test
    /// fixture); an absolute CGROUP is used as it is. With COTENANT_TEST_CGROUP_FIXTURE=1, a
    /// directory below DIR may be a plain fixture on any file system (links are still refused).
    #[arg(long, value_name = "DIR", hide = true)]
    pub root: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    #[command(flatten)]
    pub count: CountArgs,
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
    /// Offered loads per process, as fractions of its fair share of the CPUs (1.0 = exactly),
    /// comma-separated (default: 0.7 and the 1.5 overload; --quick: 0.7).
    #[arg(long, value_delimiter = ',', value_parser = parse_load)]
    pub load: Vec<f64>,
    /// Process counts for `neighbours`, comma-separated (default: 1 to 2 × CPUs).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=256))]
    pub processes: Vec<u32>,
    /// Pool kinds for `neighbours` and `headline`, comma-separated (default: ignorant, optimal,
    /// share, plain, adaptive). `adaptive` is the default pool (sharing host CPU tokens),
    /// `plain` the adaptive policy without them.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub pools: Vec<PoolKind>,
    /// Where `neighbours`' processes live.
    #[arg(long, value_enum, default_value_t = SettingArg::Both)]
    pub setting: SettingArg,
    /// Seconds each configuration runs.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub seconds: Option<u64>,
    /// Service time of one work item, in milliseconds.
    #[arg(long, default_value_t = 5.0, value_parser = parse_positive)]
    pub service_ms: f64,
    /// How `go-neighbours`' Go services run their items.
    #[arg(long, value_enum, default_value_t = GoItems::Limited)]
    pub go_items: GoItems,
    /// `isolation`'s scenarios to run, comma-separated (default: all); baseline and
    /// unisolated always run, as the ratios' denominators.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenarios: Vec<crate::lab::isolation::Scenario>,
    /// `spin`: the client's round trip each session sleeps before a transaction, in µs; it sets
    /// how busy the sessions keep their CPUs (default 200: about 85 % of the restricted CPU on
    /// the test VM; see RESULTS.md, "Where the seed's shape holds").
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub round_trip_us: Option<u64>,
    /// `isolation`: how the load generator's connection threads are scheduled. `realtime`
    /// (`SCHED_FIFO` 1, falling back to normal with the reason recorded) keeps B from delaying
    /// the client itself, as if it ran on another host; `normal` lets the client compete with
    /// the tenants (RESULTS.md, "isolation").
    #[arg(long, value_enum, default_value_t = crate::lab::loadgen::ClientPriority::Realtime)]
    pub client_priority: crate::lab::loadgen::ClientPriority,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    /// One process, fixed pools of 1 to 4 × CPUs threads (seed 000 Figure 2).
    Overcommit,
    /// The same with a mutex around the work (Figure 3).
    Contention,
    /// Quotas from 0.5 CPU to the CPU count, in real cgroups; includes a Go program (Figure 5).
    Quota,
    /// P identical processes at once, each with its own open-loop load (Figure 7).
    Neighbours,
    /// share's overcommit factor 0.5 to 3 next to adaptive (Figure 8).
    Factor,
    /// A bursty and a steady tenant: quotas against adaptive pools (seed 000 §4).
    Burst,
    /// A runs alone for 2 s, then B starts: CPU shares over time, Jain's index.
    Fairness,
    /// What Go, Java, Python, Node, C++, Rust and cotenant believe about their CPUs (Table 2).
    Runtimes,
    /// An HTTP server next to a CPU-bound batch job, under every isolation option (seed 003).
    Isolation,
    /// CPU bandwidth throttling on this kernel (seed 001 Table II), quota rewrites, and the
    /// pool's user-space CPU budget.
    Throttling,
    /// Sessions waiting for each other (seed 004): pure spinning against yield, back-off and
    /// park, under CPU restriction and priority inversion.
    Spin,
    /// Pool sizes 1 to 256 against I/O delays of 0 to 50 ms, and the elastic pool (seed 002).
    Sizing,
    /// `neighbours` with Go services: default GOMAXPROCS against the cotenant Go controller.
    GoNeighbours,
    /// What `make demo` runs: a quick `neighbours` at P = 2 with a short verdict.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SettingArg {
    /// All processes in one cgroup.
    OneCgroup,
    /// One cgroup per process, equal weights.
    PerProcess,
    /// Both.
    Both,
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
    /// Workers of a `fixed` pool.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub fixed_threads: Option<u32>,
    /// The pool's OS threads (default: the CPUs this process may use).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,
    /// The overcommit factor of a `share` pool (seed 000 Figure 8).
    #[arg(long, default_value_t = 1.0, value_parser = parse_load)]
    pub share_factor: f64,
    /// The CPUs the load is a fraction of (default: this process's CPUs / processes).
    #[arg(long, value_parser = parse_positive)]
    pub fair_cpus: Option<f64>,
    /// Run each item's work inside one process-wide mutex (seed 000 Figure 3).
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
    Normal,
    /// nice 19.
    Nice,
    /// `SCHED_IDLE`.
    Idle,
}

#[derive(Debug, Args)]
pub struct LabTenantArgs {
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

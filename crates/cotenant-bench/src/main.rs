//! `pool-bench`: cotenant's thread pool side by side with its peers, in one run, reported as
//! ratios to the best peer.
//!
//! # What is measured
//!
//! Every peer is a pool of the same `n` threads (`--threads`, default: the available CPUs):
//! cotenant with a fixed and with an adaptive policy, rayon, a hand-written crossbeam-channel
//! pool, the `threadpool` crate, tokio's blocking pool, and `reference`, a re-implementation of
//! the seed's friendlypool (seed 000 §5) with its documented weaknesses kept (`src/reference.rs`).
//!
//! - **roundtrip**: spawn one task that returns a `u64`, join it, and repeat, sequentially. This is
//!   the latency of one hand-off to an idle pool and back: waking a worker, handing it the task,
//!   delivering the result, waking the caller. Reported in ns per round trip.
//! - **throughput**: one thread submits many tiny tasks fire-and-forget (each does a
//!   `black_box`ed multiply and increments a shared counter), then waits until all have run. This
//!   is the per-task cost of the queue and the workers under load. Reported in million tasks per
//!   second. The counter must end equal to the number submitted, or the run fails: a pool that
//!   loses tasks must not look fast.
//! - **throughput-2**: the same tasks submitted from two threads at once (half each): the cost
//!   of the submit path when submitters contend on the queue. With n workers on n CPUs the two
//!   submitters oversubscribe the CPUs (four threads on this repository's 2-CPU VM): the
//!   workload then also measures how each pool behaves when its submitters are preempted.
//! - **throughput (CPU)**, **throughput-2 (CPU)**: from the same timed batches, the CPU time the
//!   whole process spent per task (`CLOCK_PROCESS_CPUTIME_ID`: submitters, workers, spinning,
//!   wake-ups, system calls), in ns. Wall-clock rates on a 2-CPU VM move by tens of per cent
//!   between runs (steal, and three threads on two CPUs landing in different regimes); the CPU
//!   per task moves less (steal is not charged to it), though not nothing: how long workers
//!   spin before parking and how often submitters wake them still depend on the regime.
//!   Printed after the three wall-clock tables.
//!
//! Each measurement builds a fresh pool, warms it up (untimed), times the workload, and shuts the
//! pool down (untimed, threads joined) before the next peer starts: only one pool exists at a time.
//!
//! `--controller-cost SECONDS` measures something else instead: the CPU used by cotenant's
//! adaptive controller thread, with the pool idle and with it saturated. `--global-pool SECONDS`
//! measures a CPU budget's global pool behind an atomic, a mutex and a spinlock
//! (`global_pool.rs`, seed 001 Figure 9).
//!
//! # Why rounds and ratios
//!
//! Absolute times on a shared, virtualised 2-CPU machine drift by tens of percent between runs
//! and even within one (CPU frequency, neighbours, the hypervisor), so a number measured today
//! cannot be compared with one measured yesterday. Two peers measured in the same minute can.
//! The peers are therefore interleaved in rounds: round `r` runs every peer once, in an order
//! rotated by `r`, so a slow period hits every peer alike and no peer always runs first (cold)
//! or last. Each table gives a peer's median over the rounds, its min and max (the spread shows
//! how much to trust the median), and its **ratio to the best peer's median in the same run**:
//! 1.00 is the best, larger is worse, for times and rates alike. Claims of one pool against
//! another rest on those ratios.

mod controller_cost;
mod global_pool;
mod peers;
mod reference;
mod report;
mod steal;
mod workloads;

use std::num::NonZeroUsize;
use std::process::ExitCode;

use clap::Parser;

use crate::peers::PeerKind;
use crate::report::{Better, Host};
use crate::workloads::{Config, Workload};

/// Sizes of a run, before any explicit `--rounds`, `--roundtrips` or `--tasks`.
struct Sizes {
    /// Rounds.
    rounds: usize,
    /// Round trips per measurement.
    roundtrips: u64,
    /// Tasks per throughput measurement.
    tasks: u64,
}

/// A full run.
const FULL: Sizes = Sizes { rounds: 5, roundtrips: 20_000, tasks: 1_000_000 };
/// `--quick`: a smoke run for CI.
const QUICK: Sizes = Sizes { rounds: 2, roundtrips: 2_000, tasks: 100_000 };

/// Compares thread pools side by side in one run: cotenant (fixed and adaptive), rayon, a
/// crossbeam-channel pool, threadpool, tokio's blocking pool and the seed's friendlypool. Prints
/// one markdown table per workload, with each peer's ratio to the best peer of the run.
#[derive(Parser, Debug)]
#[command(name = "pool-bench", version)]
struct Args {
    /// Rounds; each runs every peer once, in an order rotated by the round [default: 5; 2 with
    /// --quick]
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    rounds: Option<usize>,

    /// Sequential spawn + join round trips per measurement [default: 20000; 2000 with --quick]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    roundtrips: Option<u64>,

    /// Tasks per throughput measurement [default: 1000000; 100000 with --quick]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    tasks: Option<u64>,

    /// Each throughput task also runs about NS nanoseconds of arithmetic (calibrated at start;
    /// no clock read inside the task) [default: 0, the tiny task]
    #[arg(long, value_name = "NS", default_value_t = 0)]
    task_ns: u64,

    /// Threads in every pool [default: the available CPUs]
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    threads: Option<usize>,

    /// Peers to run, comma-separated [default: all]
    #[arg(long, value_name = "PEERS", value_enum, value_delimiter = ',')]
    peers: Vec<PeerKind>,

    /// Smoke run for CI: 2 rounds, 2000 round trips, 100000 tasks (explicit sizes still win)
    #[arg(long)]
    quick: bool,

    /// Instead of the workloads: the CPU use of cotenant's adaptive controller thread, idle for
    /// SECONDS and then saturated for SECONDS
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    controller_cost: Option<f64>,

    /// Instead of the workloads: the accounting cost of a CPU budget's global pool (atomic,
    /// mutex, spinlock) at slices of 5 ms, 1 ms and 1 µs, each measured for SECONDS
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    global_pool: Option<f64>,

    /// The controller thread's name, for --controller-cost
    #[arg(long, value_name = "NAME", default_value = "cotenant-ctl")]
    ctl_thread: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("pool-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Runs what `args` asks for; tables go to stdout, progress to stderr.
fn run(args: &Args) -> Result<(), String> {
    let cpus = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let threads = args.threads.unwrap_or(cpus);
    let host = Host::detect(cpus);

    if let Some(seconds) = args.controller_cost {
        println!("{}", host.header(&format!("threads per pool: {threads}; window: {seconds} s per phase")));
        return controller_cost::run(seconds, threads, &args.ctl_thread);
    }

    let sizes = if args.quick { QUICK } else { FULL };
    if let Some(seconds) = args.global_pool {
        let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 3 });
        println!("{}", host.header(&format!("window: {seconds} s per measurement; rounds: {rounds}")));
        return global_pool::run(std::time::Duration::from_secs_f64(seconds), rounds, cpus);
    }
    let config = Config {
        threads,
        cpus,
        rounds: args.rounds.unwrap_or(sizes.rounds),
        roundtrips: args.roundtrips.unwrap_or(sizes.roundtrips),
        tasks: args.tasks.unwrap_or(sizes.tasks),
        task_work: (workloads::spin_iterations_for(args.task_ns), args.task_ns),
        peers: selected_peers(&args.peers),
    };
    let peer_names: Vec<&str> = config.peers.iter().map(|peer| peer.name()).collect();
    println!(
        "{}",
        host.header(&format!(
            "threads per pool: {threads}; rounds: {}; roundtrips: {}; tasks: {}; peers: {}",
            config.rounds,
            config.roundtrips,
            config.tasks,
            peer_names.join(", ")
        ))
    );

    let steal_before = steal::read();
    // The CPU-per-task tables come from the same measurements as the wall-clock ones, but are
    // printed after all of those, so that the wall-clock tables keep their order.
    let mut cpu_tables = Vec::new();
    for workload in Workload::ALL {
        let rounds = workloads::run_rounds(workload, &config)?;
        let rows: Vec<(&str, Vec<f64>)> = peer_names.iter().copied().zip(rounds.values).collect();
        println!(
            "{}",
            report::table(&workload.title(&config), workload.better(), |v| workload.show(v), &rows)
        );
        if let Some(title) = workload.cpu_title(&config) {
            cpu_tables.push(cpu_table(&title, &peer_names, rounds.cpu_ns_per_task));
        }
    }
    for table in cpu_tables {
        println!("{table}");
    }
    if let Some(line) =
        steal_before.zip(steal::read()).and_then(|(before, after)| steal::sentence(before, after))
    {
        println!("{line}");
    }
    Ok(())
}

/// The CPU-per-task table titled `title`, from each peer's values (in the order of `peer_names`);
/// a sentence instead where the process CPU clock gave no reading at all.
fn cpu_table(title: &str, peer_names: &[&str], cpu_ns_per_task: Vec<Vec<f64>>) -> String {
    if cpu_ns_per_task.iter().all(Vec::is_empty) {
        return format!(
            "## {title}\n\nNo values: clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed on every read.\n"
        );
    }
    let rows: Vec<(&str, Vec<f64>)> = peer_names.iter().copied().zip(cpu_ns_per_task).collect();
    report::table(title, Better::Lower, workloads::show_cpu_ns, &rows)
}

/// The peers asked for, without repeats, in the order given; every peer if none was named.
fn selected_peers(asked: &[PeerKind]) -> Vec<PeerKind> {
    if asked.is_empty() {
        return PeerKind::ALL.to_vec();
    }
    let mut peers = Vec::with_capacity(asked.len());
    for &peer in asked {
        if !peers.contains(&peer) {
            peers.push(peer);
        }
    }
    peers
}

/// A count of at least 1.
fn parse_positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A positive, finite number of seconds, at most a day.
fn parse_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text.parse().map_err(|e: std::num::ParseFloatError| e.to_string())?;
    if seconds > 0.0 && seconds <= 86_400.0 {
        Ok(seconds)
    } else {
        Err("must be a number of seconds above 0 and at most 86400".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }

    #[test]
    fn peers_parse_from_a_comma_list_and_repeats_are_dropped() {
        let args = Args::try_parse_from(["pool-bench", "--peers", "rayon,cotenant-fixed,rayon"]).unwrap();
        assert_eq!(selected_peers(&args.peers), vec![PeerKind::Rayon, PeerKind::CotenantFixed]);
        let all = Args::try_parse_from(["pool-bench"]).unwrap();
        assert_eq!(selected_peers(&all.peers), PeerKind::ALL.to_vec());
        assert!(Args::try_parse_from(["pool-bench", "--peers", "nope"]).is_err());
    }

    #[test]
    fn a_cpu_table_ranks_the_lowest_cost_first_or_says_why_it_is_empty() {
        let table = cpu_table("t", &["busy", "lean"], vec![vec![900.0, 1100.0], vec![500.0]]);
        let lean = table.find("| lean | 500 CPU ns | 500 CPU ns | 500 CPU ns | 1.00 |").unwrap();
        let busy = table.find("| busy | 1000 CPU ns | 900 CPU ns | 1100 CPU ns | 2.00 |").unwrap();
        assert!(lean < busy, "{table}");
        let empty = cpu_table("t", &["a", "b"], vec![Vec::new(), Vec::new()]);
        assert!(empty.contains("No values"), "{empty}");
    }

    #[test]
    fn sizes_must_be_positive() {
        assert!(Args::try_parse_from(["pool-bench", "--rounds", "0"]).is_err());
        assert!(Args::try_parse_from(["pool-bench", "--tasks", "0"]).is_err());
        assert!(Args::try_parse_from(["pool-bench", "--controller-cost", "0"]).is_err());
        assert!(Args::try_parse_from(["pool-bench", "--controller-cost", "nan"]).is_err());
        let quick = Args::try_parse_from(["pool-bench", "--quick", "--rounds", "3"]).unwrap();
        assert!(quick.quick);
        assert_eq!(quick.rounds, Some(3));
    }
}

//! `workloads`: what is timed on each peer, and the rounds that interleave the peers.
//!
//! One measurement = build a fresh pool, warm it up (untimed), time the workload, shut the pool
//! down (untimed, joined) — so exactly one pool exists at a time and none inherits another's
//! threads or queue. Round `r` measures every peer once, starting at peer `r` of the list
//! (a rotation), so drift on a noisy machine reaches every peer alike.
//!
//! A throughput measurement yields two values from the same timed batch: the wall-clock rate,
//! and the CPU time the whole process spent per task over that span
//! (`CLOCK_PROCESS_CPUTIME_ID`, every thread: submitters, workers, spinning, wake-ups, system
//! calls). Only one pool exists at a time, so that CPU time is the pool's and its submitters'.
//! It is what the task path costs whatever the scheduling regime the threads land in, and
//! hypervisor steal is not charged to it (on a guest kernel with paravirtual steal accounting),
//! so it moves far less between runs on a shared VM than the wall-clock rate.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::peers::{
    CotenantPeer, CrossbeamPeer, Peer, PeerKind, RayonPeer, ThreadpoolPeer, Tokens, TokioPeer,
};
use crate::reference;
use crate::report::Better;

/// How long the throughput workload waits with no task completing before it declares tasks lost.
const STALL_LIMIT: Duration = Duration::from_secs(30);
/// How often a waiting throughput run wakes to check for a stall.
const STALL_CHECK: Duration = Duration::from_millis(500);
/// The multiplier of a throughput task's computation (the 64-bit golden ratio).
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// What one run measures, resolved from the command line.
pub struct Config {
    /// Threads in every pool.
    pub threads: usize,
    /// CPUs of the host, for the reference pool's `ceil(share × cpus)`.
    pub cpus: usize,
    /// Rounds; each measures every peer once.
    pub rounds: usize,
    /// Round trips per measurement of `roundtrip`.
    pub roundtrips: u64,
    /// Tasks per measurement of `throughput`.
    pub tasks: u64,
    /// Work in each `throughput` task beyond its multiply: iterations of `spin` (0: none),
    /// and the nanoseconds they were calibrated to (for the title).
    pub task_work: (u64, u64),
    /// The peers, in the order of round 0.
    pub peers: Vec<PeerKind>,
}

/// What one measurement yields.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    /// The workload's value, in the unit of [`Workload::show`].
    pub value: f64,
    /// The process's CPU time per task over the timed batch, in ns: throughput workloads only,
    /// and `None` where the process CPU clock could not be read.
    pub cpu_ns_per_task: Option<f64>,
}

/// Every measurement of one workload, per peer in the order of [`Config::peers`].
pub struct Rounds {
    /// Each peer's values, one per round.
    pub values: Vec<Vec<f64>>,
    /// Each peer's CPU ns per task, one per round that has one (empty for `roundtrip`).
    pub cpu_ns_per_task: Vec<Vec<f64>>,
}

/// A workload, run on every peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Spawn one task returning a `u64` and join it, sequentially; ns per round trip.
    Roundtrip,
    /// Submit tiny tasks fire-and-forget from one thread, wait for all; million tasks per second.
    Throughput,
    /// The same tasks submitted from two threads at once (half each).
    Throughput2,
}

impl Workload {
    /// Every workload, in the order of a run.
    pub const ALL: [Workload; 3] = [Workload::Roundtrip, Workload::Throughput, Workload::Throughput2];

    /// Short name, for progress lines and errors.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Roundtrip => "roundtrip",
            Workload::Throughput => "throughput",
            Workload::Throughput2 => "throughput-2",
        }
    }

    /// The table title.
    pub fn title(self, config: &Config) -> String {
        match self {
            Workload::Roundtrip => format!(
                "roundtrip: ns per spawn + join of one task, {} sequential per measurement (lower is better)",
                config.roundtrips
            ),
            Workload::Throughput | Workload::Throughput2 => format!(
                "{}: million tasks/s, {}, until all have run (higher is better)",
                self.name(),
                self.tasks_phrase(config)
            ),
        }
    }

    /// The title of the CPU-per-task table; `None` for a workload that has none (`roundtrip`).
    pub fn cpu_title(self, config: &Config) -> Option<String> {
        match self {
            Workload::Roundtrip => None,
            Workload::Throughput | Workload::Throughput2 => Some(format!(
                "{} (CPU): CPU ns per task, {} (all threads of the process; lower is better)",
                self.name(),
                self.tasks_phrase(config)
            )),
        }
    }

    /// "1000000 tiny fire-and-forget tasks from one thread", for the throughput titles.
    fn tasks_phrase(self, config: &Config) -> String {
        let from = if self == Workload::Throughput { "one thread" } else { "two threads at once" };
        let tasks = if config.task_work.0 > 0 {
            format!("fire-and-forget tasks of about {} ns of arithmetic each", config.task_work.1)
        } else {
            "tiny fire-and-forget tasks".to_owned()
        };
        format!("{} {tasks} from {from}", config.tasks)
    }

    /// Which direction is better.
    pub fn better(self) -> Better {
        match self {
            Workload::Roundtrip => Better::Lower,
            Workload::Throughput | Workload::Throughput2 => Better::Higher,
        }
    }

    /// One value, with its unit.
    pub fn show(self, value: f64) -> String {
        match self {
            Workload::Roundtrip => format!("{value:.0} ns"),
            Workload::Throughput | Workload::Throughput2 => format!("{value:.3} M/s"),
        }
    }

    /// Times this workload on `pool`, then shuts `pool` down.
    fn run<P: Peer + Sync>(self, pool: P, config: &Config) -> Result<Measurement, String> {
        match self {
            Workload::Roundtrip => {
                roundtrip(pool, config.roundtrips).map(|value| Measurement { value, cpu_ns_per_task: None })
            }
            Workload::Throughput => throughput(pool, config.tasks, config.task_work.0, 1),
            Workload::Throughput2 => throughput(pool, config.tasks, config.task_work.0, 2),
        }
    }
}

/// Measures `workload` on every peer of `config`, round after round: per peer, in the order of
/// `config.peers`, one value per round and the CPU ns per task of each round that has one.
/// Progress goes to stderr.
pub fn run_rounds(workload: Workload, config: &Config) -> Result<Rounds, String> {
    let mut values = vec![Vec::with_capacity(config.rounds); config.peers.len()];
    let mut cpu_per_task = vec![Vec::new(); config.peers.len()];
    for round in 0..config.rounds {
        for index in rotation(config.peers.len(), round) {
            let peer = config.peers[index];
            let measured = measure(peer, workload, config)
                .map_err(|e| format!("{} on {}, round {}: {e}", workload.name(), peer.name(), round + 1))?;
            let cpu =
                measured.cpu_ns_per_task.map_or_else(String::new, |ns| format!(", {}", show_cpu_ns(ns)));
            eprintln!(
                "[{}] round {}/{}: {:<18} {}{cpu}",
                workload.name(),
                round + 1,
                config.rounds,
                peer.name(),
                workload.show(measured.value)
            );
            values[index].push(measured.value);
            if let Some(ns) = measured.cpu_ns_per_task {
                cpu_per_task[index].push(ns);
            }
        }
    }
    Ok(Rounds { values, cpu_ns_per_task: cpu_per_task })
}

/// One CPU-per-task value, with its unit.
pub fn show_cpu_ns(ns: f64) -> String {
    format!("{ns:.0} CPU ns")
}

/// The order of round `round` over `len` peers: every index once, starting at `round % len`.
pub fn rotation(len: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..len).map(move |k| (k + round) % len)
}

/// Builds `peer`'s pool and runs `workload` on it.
fn measure(peer: PeerKind, workload: Workload, config: &Config) -> Result<Measurement, String> {
    let n = config.threads;
    // Histograms off, whatever COTENANT_TASK_HISTOGRAMS says: `cotenant-hist` is the one with them.
    let cotenant_pool = |policy, tokens| CotenantPeer::new(policy, n, tokens, Some(false));
    let adaptive = cotenant::Policy::adaptive;
    match peer {
        PeerKind::CotenantFixed => {
            workload.run(cotenant_pool(cotenant::Policy::fixed(n), Tokens::Default)?, config)
        }
        PeerKind::CotenantAdaptive => workload.run(cotenant_pool(adaptive(), Tokens::Default)?, config),
        PeerKind::CotenantPlain => workload.run(cotenant_pool(adaptive(), Tokens::Off)?, config),
        PeerKind::CotenantHist => {
            workload.run(CotenantPeer::new(adaptive(), n, Tokens::Default, Some(true))?, config)
        }
        PeerKind::CotenantTokens => {
            workload.run(cotenant_pool(adaptive(), Tokens::Private { leases: true })?, config)
        }
        PeerKind::CotenantTokensNoLeases => {
            workload.run(cotenant_pool(adaptive(), Tokens::Private { leases: false })?, config)
        }
        PeerKind::Rayon => workload.run(RayonPeer::new(n)?, config),
        PeerKind::Crossbeam => workload.run(CrossbeamPeer::new(n)?, config),
        PeerKind::Threadpool => workload.run(ThreadpoolPeer::new(n), config),
        PeerKind::TokioBlocking => workload.run(TokioPeer::new(n)?, config),
        PeerKind::Reference => {
            let pool = reference::Pool::new(n, config.cpus).map_err(|e| format!("reference pool: {e}"))?;
            workload.run(pool, config)
        }
    }
}

/// `roundtrip`: ns per sequential spawn + join, after an untimed warm-up.
fn roundtrip<P: Peer>(pool: P, count: u64) -> Result<f64, String> {
    let warmup = (count / 10).clamp(100, 2_000);
    let timed = time_roundtrips(&pool, warmup).and_then(|_| time_roundtrips(&pool, count));
    let stopped = pool.shutdown();
    let elapsed = timed?;
    stopped?;
    Ok(elapsed.as_nanos() as f64 / count as f64)
}

/// Spawns and joins `count` tasks one after the other, checking each result.
fn time_roundtrips<P: Peer>(pool: &P, count: u64) -> Result<Duration, String> {
    let start = Instant::now();
    for i in 0..count {
        let got = pool.spawn_join(move || black_box(i))?;
        if got != i {
            return Err(format!("round trip {i} returned {got}"));
        }
    }
    Ok(start.elapsed())
}

/// `throughput` (from `submitters` threads): million tasks per second and the process's CPU ns
/// per task, both over the same timed batch, after an untimed warm-up. Fails if the count of
/// tasks that ran differs from the count submitted, checked again after the pool has shut down.
fn throughput<P: Peer + Sync>(
    pool: P,
    tasks: u64,
    work: u64,
    submitters: u64,
) -> Result<Measurement, String> {
    let warmup = (tasks / 20).clamp(1_000, 50_000);
    let timed =
        run_batch(&pool, warmup, work, submitters).and_then(|_| run_batch(&pool, tasks, work, submitters));
    let stopped = pool.shutdown();
    let batch = timed?;
    stopped?;
    let ran = batch.completion.count();
    if ran != tasks {
        return Err(format!("{ran} tasks ran for {tasks} submitted"));
    }
    Ok(Measurement {
        value: tasks as f64 / batch.elapsed.as_secs_f64() / 1e6,
        cpu_ns_per_task: batch.cpu_ns.and_then(|(before, after)| cpu_ns_per_task(before, after, tasks)),
    })
}

/// One timed throughput batch.
struct Batch {
    /// Wall-clock time from the first submit to the last completion.
    elapsed: Duration,
    /// The process's CPU clock (ns) just before the first submit and just after the last
    /// completion; `None` where it could not be read.
    cpu_ns: Option<(u64, u64)>,
    /// The batch's completion counter, to check that no task was lost.
    completion: Arc<Completion>,
}

/// The CPU time of the whole process so far, in ns (every thread, including those that have
/// exited, such as a batch's second submitter); `None` if the clock cannot be read.
fn process_cpu_ns() -> Option<u64> {
    cotenant::internal::sampler::clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU ns per task from two readings of the process CPU clock (ns) around a batch of `tasks`
/// tasks (pure). `None` for no tasks, or for a clock that went backwards (a bad reading is left
/// out of the table rather than shown as a negative cost).
pub fn cpu_ns_per_task(before_ns: u64, after_ns: u64, tasks: u64) -> Option<f64> {
    let spent = after_ns.checked_sub(before_ns)?;
    if tasks == 0 {
        return None;
    }
    Some(spent as f64 / tasks as f64)
}

/// Submits `tasks` tiny tasks from `submitters` threads (task `i` from thread `i % submitters`)
/// and waits until every one has run; the wall-clock and process CPU time from the first submit
/// to the last completion.
fn run_batch<P: Peer + Sync>(pool: &P, tasks: u64, work: u64, submitters: u64) -> Result<Batch, String> {
    let completion = Arc::new(Completion::new(tasks));
    let submit_from = |first: u64| {
        for i in (first..tasks).step_by(submitters as usize) {
            let completion = Arc::clone(&completion);
            pool.execute(move || {
                // The tiny task: a multiply the optimizer cannot see through, then count itself.
                let _ = black_box(black_box(i).wrapping_mul(MIX));
                spin(i, work);
                completion.finish_one();
            });
        }
    };
    // The CPU clock is read outside the wall-clock span: a read costs well under a microsecond,
    // nothing beside a batch of thousands of tasks.
    let cpu_before = process_cpu_ns();
    let start = Instant::now();
    if submitters == 1 {
        submit_from(0);
    } else {
        // The other submitters start first; this thread submits its share meanwhile.
        std::thread::scope(|scope| {
            for first in 1..submitters {
                scope.spawn(move || submit_from(first));
            }
            submit_from(0);
        });
    }
    completion.wait(STALL_LIMIT)?;
    let elapsed = start.elapsed();
    let cpu_ns = cpu_before.zip(process_cpu_ns());
    Ok(Batch { elapsed, cpu_ns, completion })
}

/// `iterations` dependent multiply-adds the optimizer cannot remove: a task's own work, with no
/// clock read or system call in it (`--task-ns`).
pub fn spin(seed: u64, iterations: u64) -> u64 {
    let mut x = seed;
    for _ in 0..iterations {
        x = black_box(x.wrapping_mul(MIX).wrapping_add(1));
    }
    x
}

/// How many `spin` iterations take about `ns` nanoseconds on this thread now: timed over 20 ms
/// of them (a benchmark's calibration, not a decision).
pub fn spin_iterations_for(ns: u64) -> u64 {
    if ns == 0 {
        return 0;
    }
    let probe = 1_000_000;
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        black_box(spin(1, probe));
        best = best.min(start.elapsed());
    }
    let per_ns = probe as f64 / best.as_nanos().max(1) as f64;
    ((ns as f64 * per_ns).round() as u64).max(1)
}

/// The completion counter of one throughput batch: each task counts itself, the one that brings
/// the count to the total wakes the submitter.
struct Completion {
    /// Tasks submitted.
    total: u64,
    /// Tasks that have run.
    done: AtomicU64,
    /// Held while notifying, so the wake-up cannot fall between the waiter's check and its wait.
    lock: Mutex<()>,
    /// Notified when `done` reaches `total`.
    all_done: Condvar,
}

impl Completion {
    /// A counter expecting `total` tasks.
    fn new(total: u64) -> Self {
        Self { total, done: AtomicU64::new(0), lock: Mutex::new(()), all_done: Condvar::new() }
    }

    /// Called by each task once it has done its work.
    fn finish_one(&self) {
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.total {
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.all_done.notify_all();
        }
    }

    /// Tasks that have run so far.
    fn count(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }

    /// Waits until every task has run. Fails loudly, rather than hanging, when no task has
    /// completed for `stall_limit`: the pool has lost tasks.
    fn wait(&self, stall_limit: Duration) -> Result<(), String> {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut last = self.count();
        let mut last_progress = Instant::now();
        loop {
            let now = self.count();
            if now >= self.total {
                return Ok(());
            }
            if now != last {
                last = now;
                last_progress = Instant::now();
            } else if last_progress.elapsed() >= stall_limit {
                return Err(format!(
                    "only {now} of {} tasks ran, none in the last {stall_limit:?}: the pool lost tasks",
                    self.total
                ));
            }
            guard = self.all_done.wait_timeout(guard, STALL_CHECK).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_round_visits_every_peer_once_starting_further_along() {
        for round in 0..9 {
            let mut order: Vec<usize> = rotation(7, round).collect();
            assert_eq!(order[0], round % 7);
            order.sort_unstable();
            assert_eq!(order, (0..7).collect::<Vec<_>>());
        }
    }

    #[test]
    fn cpu_per_task_is_the_cpu_time_between_two_readings_over_the_tasks() {
        // Recorded readings: 1.5 s of process CPU time for a million tasks is 1500 ns each.
        let per_task = cpu_ns_per_task(4_000_000_000, 5_500_000_000, 1_000_000).unwrap();
        assert!((per_task - 1_500.0).abs() < 1e-9, "{per_task}");
        assert_eq!(cpu_ns_per_task(7, 7, 10), Some(0.0));
        assert_eq!(cpu_ns_per_task(0, 1_000, 0), None, "no tasks");
        assert_eq!(cpu_ns_per_task(1_000, 999, 10), None, "a clock that went backwards");
    }

    #[test]
    fn only_the_throughput_workloads_have_a_cpu_table() {
        let config = Config {
            threads: 2,
            cpus: 2,
            rounds: 1,
            roundtrips: 10,
            tasks: 1_000_000,
            task_work: (0, 0),
            peers: Vec::new(),
        };
        assert_eq!(Workload::Roundtrip.cpu_title(&config), None);
        assert_eq!(
            Workload::Throughput.cpu_title(&config).unwrap(),
            "throughput (CPU): CPU ns per task, 1000000 tiny fire-and-forget tasks from one thread \
             (all threads of the process; lower is better)"
        );
        assert!(Workload::Throughput2.cpu_title(&config).unwrap().starts_with(
            "throughput-2 (CPU): CPU ns per task, 1000000 tiny fire-and-forget tasks from two threads at once"
        ));
        // The wall-clock titles are quoted by the results file: unchanged.
        assert_eq!(
            Workload::Throughput.title(&config),
            "throughput: million tasks/s, 1000000 tiny fire-and-forget tasks from one thread, \
             until all have run (higher is better)"
        );
    }

    #[test]
    fn a_stalled_batch_fails_instead_of_hanging() {
        let completion = Completion::new(3);
        completion.finish_one();
        let err = completion.wait(Duration::from_millis(50)).unwrap_err();
        assert!(err.contains("only 1 of 3 tasks ran"), "{err}");
    }

    /// Every peer runs both workloads at a tiny size without losing a task. Slow-ish (the
    /// reference pool takes up to half a second to shut down), but it is the harness's only
    /// end-to-end check.
    #[test]
    fn every_peer_runs_every_workload() {
        let config = Config {
            threads: 2,
            cpus: 2,
            rounds: 1,
            roundtrips: 50,
            tasks: 2_000,
            task_work: (0, 0),
            peers: PeerKind::ALL.to_vec(),
        };
        for workload in Workload::ALL {
            let rounds = run_rounds(workload, &config).unwrap();
            assert_eq!(rounds.values.len(), PeerKind::ALL.len());
            assert_eq!(rounds.cpu_ns_per_task.len(), PeerKind::ALL.len());
            let with_cpu = usize::from(workload.cpu_title(&config).is_some());
            for ((peer, values), cpu) in PeerKind::ALL.iter().zip(&rounds.values).zip(&rounds.cpu_ns_per_task)
            {
                assert_eq!(values.len(), 1, "{}", peer.name());
                assert!(values[0].is_finite() && values[0] > 0.0, "{}: {values:?}", peer.name());
                // The process CPU clock is readable on Linux: one value per throughput round.
                assert_eq!(cpu.len(), with_cpu, "{}: {cpu:?}", peer.name());
                assert!(cpu.iter().all(|ns| ns.is_finite() && *ns >= 0.0), "{}: {cpu:?}", peer.name());
            }
        }
    }
}

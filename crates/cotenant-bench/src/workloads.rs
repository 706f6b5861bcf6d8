//! `workloads`: what is timed on each peer, and the rounds that interleave the peers.
//!
//! One measurement = build a fresh pool, warm it up (untimed), time the workload, shut the pool
//! down (untimed, joined) — so exactly one pool exists at a time and none inherits another's
//! threads or queue. Round `r` measures every peer once, starting at peer `r` of the list
//! (a rotation), so drift on a noisy machine reaches every peer alike.

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
            Workload::Throughput | Workload::Throughput2 => {
                let from = if self == Workload::Throughput { "one thread" } else { "two threads at once" };
                let tasks = if config.task_work.0 > 0 {
                    format!("fire-and-forget tasks of about {} ns of arithmetic each", config.task_work.1)
                } else {
                    "tiny fire-and-forget tasks".to_owned()
                };
                format!(
                    "{}: million tasks/s, {} {tasks} from {from}, until all have run (higher is better)",
                    self.name(),
                    config.tasks
                )
            }
        }
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
    fn run<P: Peer + Sync>(self, pool: P, config: &Config) -> Result<f64, String> {
        match self {
            Workload::Roundtrip => roundtrip(pool, config.roundtrips),
            Workload::Throughput => throughput(pool, config.tasks, config.task_work.0, 1),
            Workload::Throughput2 => throughput(pool, config.tasks, config.task_work.0, 2),
        }
    }
}

/// Measures `workload` on every peer of `config`, round after round; one vector of values (one
/// per round) per peer, in the order of `config.peers`. Progress goes to stderr.
pub fn run_rounds(workload: Workload, config: &Config) -> Result<Vec<Vec<f64>>, String> {
    let mut values = vec![Vec::with_capacity(config.rounds); config.peers.len()];
    for round in 0..config.rounds {
        for index in rotation(config.peers.len(), round) {
            let peer = config.peers[index];
            let value = measure(peer, workload, config)
                .map_err(|e| format!("{} on {}, round {}: {e}", workload.name(), peer.name(), round + 1))?;
            eprintln!(
                "[{}] round {}/{}: {:<18} {}",
                workload.name(),
                round + 1,
                config.rounds,
                peer.name(),
                workload.show(value)
            );
            values[index].push(value);
        }
    }
    Ok(values)
}

/// The order of round `round` over `len` peers: every index once, starting at `round % len`.
pub fn rotation(len: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..len).map(move |k| (k + round) % len)
}

/// Builds `peer`'s pool and runs `workload` on it.
fn measure(peer: PeerKind, workload: Workload, config: &Config) -> Result<f64, String> {
    let n = config.threads;
    let cotenant_pool = |policy, tokens| CotenantPeer::new(policy, n, tokens, None);
    let adaptive = cotenant::Policy::adaptive;
    match peer {
        PeerKind::CotenantFixed => {
            workload.run(cotenant_pool(cotenant::Policy::fixed(n), Tokens::Default)?, config)
        }
        PeerKind::CotenantAdaptive => workload.run(cotenant_pool(adaptive(), Tokens::Default)?, config),
        PeerKind::CotenantPlain => workload.run(cotenant_pool(adaptive(), Tokens::Off)?, config),
        PeerKind::CotenantNoHist => {
            workload.run(CotenantPeer::new(adaptive(), n, Tokens::Default, Some(false))?, config)
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

/// `throughput` (from `submitters` threads): million tasks per second, after an untimed warm-up.
/// Fails if the count of tasks that ran differs from the count submitted, checked again after
/// the pool has shut down.
fn throughput<P: Peer + Sync>(pool: P, tasks: u64, work: u64, submitters: u64) -> Result<f64, String> {
    let warmup = (tasks / 20).clamp(1_000, 50_000);
    let timed =
        run_batch(&pool, warmup, work, submitters).and_then(|_| run_batch(&pool, tasks, work, submitters));
    let stopped = pool.shutdown();
    let (elapsed, completion) = timed?;
    stopped?;
    let ran = completion.count();
    if ran != tasks {
        return Err(format!("{ran} tasks ran for {tasks} submitted"));
    }
    Ok(tasks as f64 / elapsed.as_secs_f64() / 1e6)
}

/// Submits `tasks` tiny tasks from `submitters` threads (task `i` from thread `i % submitters`)
/// and waits until every one has run; the time from the first submit to the last completion.
fn run_batch<P: Peer + Sync>(
    pool: &P,
    tasks: u64,
    work: u64,
    submitters: u64,
) -> Result<(Duration, Arc<Completion>), String> {
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
    Ok((start.elapsed(), completion))
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
            let values = run_rounds(workload, &config).unwrap();
            assert_eq!(values.len(), PeerKind::ALL.len());
            for (peer, values) in PeerKind::ALL.iter().zip(&values) {
                assert_eq!(values.len(), 1, "{}", peer.name());
                assert!(values[0].is_finite() && values[0] > 0.0, "{}: {values:?}", peer.name());
            }
        }
    }
}

//! One process of a lab experiment (`cotenant lab-worker`, hidden): builds the pool kind it is
//! told to (or, for the async kinds, the executor of `async_items.rs`), waits for the common
//! start instant, serves its open-loop schedule and prints one JSON line ([`WorkerReport`]) on
//! stdout.
//!
//! It never outlives the lab: it asks the kernel for SIGKILL when its parent dies
//! (`PR_SET_PDEATHSIG`), and checks that the parent is still the one it was given.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use cotenant::BudgetMetrics;
use serde::{Deserialize, Serialize};

use super::workload::{self, thread_cpu_ns, Calibration, Summary};
use crate::args::{LabWorkerArgs, PoolKind};
use crate::async_items::Executor;

/// What a worker prints.
#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The worker's pid.
    pub pid: u32,
    /// Items per second it was offered.
    pub rate_per_s: f64,
    /// Its pool's threads and final target.
    pub threads: usize,
    /// Target at the end of the run.
    pub final_target: usize,
    /// Controller decisions during the run.
    pub decisions: u64,
    /// Workers woken beyond the target onto an idle CPU (borrowing; absent in old reports).
    #[serde(default)]
    pub borrows: u64,
    /// With host tokens: tasks run without a token because none came in time (absent in old
    /// reports and in the Go worker's).
    #[serde(default)]
    pub token_timeouts: u64,
    /// With host tokens: tokens the controller took back from tasks blocked while holding one
    /// (absent in old reports and in the Go worker's).
    #[serde(default)]
    pub token_takebacks: u64,
    /// Host tokens taken (0 for a pool that never engaged its tokens; absent in old reports).
    #[serde(default)]
    pub token_takes: u64,
    /// Chunks per item and measured chunk time.
    pub chunks: u32,
    /// Nanoseconds of one chunk.
    pub chunk_ns: f64,
    /// Items ran to an exact CPU time (`--exact-cpu`; `chunks` and `chunk_ns` are then 0).
    #[serde(default)]
    pub exact_cpu: bool,
    /// Latency and throughput.
    pub summary: SummaryRow,
    /// Every `--series-ms`: the process's CPU time and the pool's target (absent in the Go
    /// worker's report).
    #[serde(default)]
    pub series: Vec<SeriesPoint>,
    /// With `--items`: every item's `[intended, started, ended]`, ns from the common start.
    #[serde(default)]
    pub items: Vec<[u64; 3]>,
    /// CPU time of the whole process during the run (ns; absent in the Go worker's report).
    #[serde(default)]
    pub process_cpu_ns: u64,
    /// CPU time of the pool's workers during the run: the process's minus the main thread's
    /// (ns; with `--series-ms` it includes the sampler thread too).
    #[serde(default)]
    pub workers_cpu_ns: u64,
    /// Wall time of the run (ns).
    #[serde(default)]
    pub wall_ns: u64,
    /// With `--cpu-budget`: the budget's counters over the run (from the common start), with
    /// the field names of [`BudgetMetrics`] (its `serde` feature).
    #[serde(default)]
    pub budget: Option<BudgetMetrics>,
}

/// One budget's counters over a run: the counts of `after` since `before` (an earlier
/// snapshot of the same budget, or the default, all zero), the quota and the period as in
/// `after`.
pub fn budget_between(before: BudgetMetrics, after: BudgetMetrics) -> BudgetMetrics {
    // `after` as the base: the struct is `#[non_exhaustive]`, so no literal outside its crate.
    let mut run = after;
    run.periods = after.periods.saturating_sub(before.periods);
    run.throttled_periods = after.throttled_periods.saturating_sub(before.throttled_periods);
    run.short_periods = after.short_periods.saturating_sub(before.short_periods);
    run.charged_ns = after.charged_ns.saturating_sub(before.charged_ns);
    run
}

/// One point of a worker's time series.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SeriesPoint {
    /// Milliseconds since the common start (negative before it is impossible: sampling starts
    /// with the schedule).
    pub t_ms: f64,
    /// The process's CPU time so far, in milliseconds.
    pub cpu_ms: f64,
    /// The pool's target then.
    pub target: usize,
}

/// [`Summary`] in a form that deserialises (the lab reads it back).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SummaryRow {
    /// Items offered.
    pub offered: usize,
    /// Items completed.
    pub completed: usize,
    /// Completed per second.
    pub throughput_per_s: f64,
    /// Service p50, p99, max (µs).
    pub service_p50_us: f64,
    /// Service p99.
    pub service_p99_us: f64,
    /// Service max.
    pub service_max_us: f64,
    /// End-to-end p50 (µs).
    pub e2e_p50_us: f64,
    /// End-to-end p99.
    pub e2e_p99_us: f64,
    /// End-to-end max.
    pub e2e_max_us: f64,
    /// Queue time (start − intended arrival) p99 (absent in the Go worker's report).
    #[serde(default)]
    pub queue_p99_us: f64,
}

impl From<&Summary> for SummaryRow {
    fn from(s: &Summary) -> Self {
        SummaryRow {
            offered: s.offered,
            completed: s.completed,
            throughput_per_s: s.throughput_per_s,
            service_p50_us: s.service.p50_us,
            service_p99_us: s.service.p99_us,
            service_max_us: s.service.max_us,
            e2e_p50_us: s.end_to_end.p50_us,
            e2e_p99_us: s.end_to_end.p99_us,
            e2e_max_us: s.end_to_end.max_us,
            queue_p99_us: s.queue.p99_us,
        }
    }
}

/// The pool a worker builds for `kind` in an experiment of `processes` on `cpus` CPUs.
pub fn build_pool(args: &LabWorkerArgs, cpus: usize) -> anyhow::Result<cotenant::Pool> {
    let processes = args.processes.max(1) as usize;
    let policy = match args.pool {
        PoolKind::Ignorant => cotenant::Policy::fixed(cpus),
        // Plain: the default policy without host tokens, to show what the tokens add.
        PoolKind::Plain => cotenant::Policy::adaptive(),
        PoolKind::Optimal => cotenant::Policy::fixed((cpus / processes).max(1)),
        PoolKind::Share => cotenant::Policy::share(args.share_factor),
        // cotenant-async: the executor on the default pool, built as `adaptive`'s.
        PoolKind::Adaptive | PoolKind::CotenantAsync => cotenant::Policy::adaptive(),
        PoolKind::Fixed => match args.fixed_threads {
            Some(n) => cotenant::Policy::fixed(n as usize),
            None => bail!("--pool fixed needs --fixed-threads"),
        },
        PoolKind::GoDefault | PoolKind::GoOptimal | PoolKind::GoCotenant => {
            bail!("the Go kinds run in the Go worker, not in lab-worker")
        }
        PoolKind::TokioDefault | PoolKind::TokioOptimal => {
            bail!("the tokio kinds run on a tokio runtime, not on a pool")
        }
    };
    let threads = match (args.threads, args.pool, args.fixed_threads) {
        (Some(t), _, _) => t as usize,
        (None, PoolKind::Fixed, Some(n)) => n as usize,
        _ => cpus,
    };
    let mut builder =
        cotenant::Pool::builder().policy(policy).threads(threads).queue_capacity(1 << 16).name("lab");
    // `adaptive` is the default pool: host tokens on the lab's set (the runner names it in
    // `COTENANT_TOKENS_SET`), engaged while another worker shares it; so is `cotenant-async`'s.
    // Every other kind is a pool that does not cooperate.
    if !matches!(args.pool, PoolKind::Adaptive | PoolKind::CotenantAsync) {
        builder = builder.host_tokens_off();
    }
    if let Some(cpus) = args.cpu_budget {
        builder = builder
            .cpu_budget(cpus, Duration::from_millis(args.budget_period_ms))
            .cpu_budget_slush(!args.no_slush);
    }
    Ok(builder.build()?)
}

/// Runs `work` while a second thread records the process's CPU time and the pool's target
/// (read by `target`) every `every` (if given).
fn with_series<T>(
    target: impl Fn() -> usize + Sync,
    every: Option<Duration>,
    work: impl FnOnce() -> T,
) -> (T, Vec<SeriesPoint>) {
    let Some(every) = every else { return (work(), Vec::new()) };
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let start = std::time::Instant::now();
            let mut points = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let cpu_ns = cotenant::internal::sampler::process_cpu_ns().unwrap_or(0);
                points.push(SeriesPoint {
                    t_ms: start.elapsed().as_secs_f64() * 1000.0,
                    cpu_ms: cpu_ns as f64 / 1e6,
                    target: target(),
                });
                std::thread::sleep(every);
            }
            points
        });
        let out = work();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (out, sampler.join().unwrap_or_default())
    })
}

/// What serves a worker's items: a pool (thread items) or an executor (async items).
enum Server {
    Pool(cotenant::Pool),
    Async(Executor),
}

impl Server {
    /// The cotenant pool that runs the items, if any (none for tokio's runtimes).
    fn pool(&self) -> Option<&cotenant::Pool> {
        match self {
            Server::Pool(pool) => Some(pool),
            Server::Async(executor) => executor.pool(),
        }
    }

    fn shutdown(self) {
        match self {
            Server::Pool(pool) => pool.shutdown(),
            Server::Async(executor) => executor.shutdown(),
        }
    }
}

/// `cotenant lab-worker`: checks that its parent is still the lab (and dies with it), builds
/// the pool, waits for the common start, serves its schedule, and prints its [`WorkerReport`]
/// as one JSON line on stdout.
pub fn run(args: &LabWorkerArgs) -> anyhow::Result<ExitCode> {
    // SAFETY: prctl with PR_SET_PDEATHSIG and a signal number has no memory effects.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } as u32 != args.parent {
        bail!("the lab (pid {}) is gone; not starting", args.parent);
    }
    // The lab's tests make a worker hang or flood its stderr (hidden, test-only).
    super::runner::apply_test_fault()?;
    let cpus = cotenant::cpus::detect().context("detecting this process's CPUs")?.allowed_cpus() as usize;
    let server = if args.pool.is_async() {
        if args.saturate {
            bail!(
                "--saturate: --pool {} serves async items, on an open-loop schedule only",
                crate::neighbours::kind_name(args.pool)
            );
        }
        Server::Async(Executor::build(args.pool, args.processes, || build_pool(args, cpus))?)
    } else {
        Server::Pool(build_pool(args, cpus)?)
    };
    let pool = server.pool();
    // A tokio runtime's workers are all allowed to run: its "target" is its worker count.
    let workers = match &server {
        Server::Async(executor) => executor.workers(),
        Server::Pool(_) => 0,
    };
    let service = Duration::from_secs_f64(args.service_ms / 1000.0);
    let calibration: Calibration = match (args.exact_cpu, args.chunks) {
        (true, _) => Calibration::exact_cpu(service)?,
        (false, Some(chunks)) => Calibration::of_chunks(chunks, service),
        (false, None) => workload::calibrate(service),
    };
    // Fair share: CPUs / P per process unless told; rate = load × that / service time.
    let fair_cpus = args.fair_cpus.unwrap_or(cpus as f64 / f64::from(args.processes.max(1)));
    let rate = args.load * fair_cpus / (args.service_ms / 1000.0);
    let plan = workload::schedule(
        args.arrivals,
        rate,
        Duration::from_millis(args.duration_ms),
        args.seed ^ u64::from(std::process::id()),
    );
    let start_at = UNIX_EPOCH + Duration::from_nanos(args.start_at_ns);
    if let Ok(wait) = start_at.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
    let lock = args.mutex.then(|| std::sync::Arc::new(std::sync::Mutex::new(())));
    let duration = Duration::from_millis(args.duration_ms);
    let cpu_before = (
        cotenant::internal::sampler::process_cpu_ns().unwrap_or(0),
        thread_cpu_ns(),
        std::time::Instant::now(),
    );
    let budget_before = pool.and_then(|pool| pool.metrics().budget);
    let target = || pool.map_or(workers, cotenant::Pool::target);
    let wait = Duration::from_secs_f64(args.async_wait_ms / 1000.0);
    let (items, series) = with_series(target, args.series_ms.map(Duration::from_millis), || match &server {
        Server::Async(executor) => executor.run(calibration, &plan, wait, lock.as_ref()),
        Server::Pool(pool) if args.saturate => {
            workload::run_saturated(pool, calibration, duration, 4 * pool.metrics().threads)
        }
        Server::Pool(pool) => workload::run(pool, calibration, &plan, lock.as_ref()),
    });
    let (process_cpu_ns, workers_cpu_ns, wall_ns) = {
        let process = cotenant::internal::sampler::process_cpu_ns().unwrap_or(0).saturating_sub(cpu_before.0);
        let main = thread_cpu_ns().saturating_sub(cpu_before.1);
        (process, process.saturating_sub(main), cpu_before.2.elapsed().as_nanos() as u64)
    };
    let summary = workload::summarize(&items, duration);
    let mut metrics = pool.map(cotenant::Pool::metrics).unwrap_or_default();
    if pool.is_none() {
        // A tokio runtime: its workers, no controller, no tokens.
        metrics.threads = workers;
        metrics.target = workers;
    }
    server.shutdown();
    let report = WorkerReport {
        pid: std::process::id(),
        rate_per_s: rate,
        threads: metrics.threads,
        final_target: metrics.target,
        decisions: metrics.decisions,
        borrows: metrics.borrows,
        token_timeouts: metrics.token_timeouts,
        token_takebacks: metrics.token_takebacks,
        token_takes: metrics.token_takes,
        chunks: calibration.chunks,
        chunk_ns: calibration.chunk_ns,
        exact_cpu: calibration.exact_cpu,
        summary: SummaryRow::from(&summary),
        series,
        items: if args.items {
            items.iter().map(|i| [i.intended, i.started, i.ended]).collect()
        } else {
            vec![]
        },
        process_cpu_ns,
        workers_cpu_ns,
        wall_ns,
        // The budget's counters over the run only (not the start-up before the common start).
        budget: metrics.budget.map(|after| budget_between(budget_before.unwrap_or_default(), after)),
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(ExitCode::from(cotenant_ops::exit::OK))
}

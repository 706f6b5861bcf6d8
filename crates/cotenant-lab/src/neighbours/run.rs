//! The code that runs a plan on this host: the lab's token set, the cgroups and worker
//! processes of one run, the Go worker's calibration, and the rows each run records.

use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

use super::aggregate::{figures, RunFigures};
use super::plan::{kind_name, Key, Plan, RunConfig, Setting};
use super::verdict::{charts, table};
use crate::args::{GoItems, Items, LabArgs, PoolKind, DEFAULT_ASYNC_WAIT_MS};
use crate::gobuild::{go_worker, GoWorker};
use crate::runner::{run_workers, WorkerSpec};
use crate::worker::WorkerReport;
use crate::{Lab, Outcome};
use cotenant_ops::cgroup::{Cgroup, Layout};
use cotenant_ops::stats::median;

/// The Go worker's arguments for `config` on a host of `cpus` CPUs.
pub(super) fn go_worker_args(config: &RunConfig, cpus: u32) -> Vec<String> {
    let processes = config.processes.max(1);
    let mut args: Vec<String> = vec![
        "--processes".into(),
        processes.to_string(),
        "--fair-cpus".into(),
        (f64::from(cpus) / f64::from(processes)).to_string(),
        "--load".into(),
        config.load.to_string(),
        "--service-ms".into(),
        config.service_ms.to_string(),
        "--duration-ms".into(),
        config.duration_ms.to_string(),
        "--seed".into(),
        config.repeat.to_string(),
    ];
    if config.go_items == GoItems::Limited {
        args.push("--limit".into());
    }
    if config.go_chunks > 0 {
        args.extend(["--chunks".into(), config.go_chunks.to_string()]);
    }
    match config.kind {
        PoolKind::GoOptimal => args.extend(["--gomaxprocs".into(), (cpus / processes).max(1).to_string()]),
        PoolKind::GoCotenant => args.push("--cotenant".into()),
        _ => {}
    }
    args
}

/// The token set of an `adaptive` run: one token per CPU, removed when the run ends however it
/// ends: dropped, or by the lab's signal thread (it is created under the registry's lock of
/// `cgroup.rs`, and none after a signal). Only a lab killed by SIGKILL leaves it behind; the
/// next run replaces it, and `lab clean` removes it while no lab runs.
struct LabTokens(Option<cotenant::tokens::HostTokens>);

/// The name of the lab's token set (`lab clean` removes it too).
pub const LAB_TOKENS: &str = "cotenant-lab";

impl LabTokens {
    fn create(cpus: u32) -> anyhow::Result<LabTokens> {
        cotenant_ops::cgroup::create_token_set(LAB_TOKENS, || LabTokens::create_now(cpus))
    }

    fn create_now(cpus: u32) -> anyhow::Result<LabTokens> {
        use cotenant::tokens::HostTokens;
        let open = || {
            // As an observer: the lab itself is no member, so a lone worker stays alone.
            HostTokens::open_observer(LAB_TOKENS, cpus)
                .or_else(|_| {
                    // Left uninitialised by a run killed while creating it: remove it and retry.
                    HostTokens::remove_named(LAB_TOKENS)?;
                    HostTokens::open_observer(LAB_TOKENS, cpus)
                })
                .context("creating the lab's host token set")
        };
        let mut tokens = open()?;
        // Dead processes leave the member count and give their tokens back (SEM_UNDO): members
        // or held tokens belong to a live run (its workers count even while alone).
        if tokens.members()? > 0 || tokens.available()? != tokens.count() {
            anyhow::bail!(
                "the lab's host token set {LAB_TOKENS} is in use by another running lab (run one lab at a time: \
                 timing runs disturb each other)"
            );
        }
        if tokens.count() != cpus {
            // Left by a run on another CPU count (a changed VM): start afresh.
            tokens.remove()?;
            tokens = open()?;
        }
        Ok(LabTokens(Some(tokens)))
    }
}

impl Drop for LabTokens {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.0.take().map(|tokens| tokens.remove()) {
            eprintln!("lab: {e}");
        }
    }
}

fn is_go(kind: PoolKind) -> bool {
    matches!(kind, PoolKind::GoDefault | PoolKind::GoOptimal | PoolKind::GoCotenant)
}

/// The arguments of `lab-worker` for `config` (the Rust kinds, thread items or async).
pub(super) fn lab_worker_args(config: &RunConfig) -> Vec<String> {
    let mut args = vec![
        "--pool".to_owned(),
        kind_name(config.kind).to_owned(),
        "--share-factor".to_owned(),
        config.share_factor.to_string(),
        "--processes".to_owned(),
        config.processes.to_string(),
        "--load".to_owned(),
        config.load.to_string(),
        "--service-ms".to_owned(),
        config.service_ms.to_string(),
        "--duration-ms".to_owned(),
        config.duration_ms.to_string(),
        "--seed".to_owned(),
        config.repeat.to_string(),
    ];
    if config.exact_cpu {
        args.push("--exact-cpu".to_owned());
    } else if config.chunks > 0 {
        args.extend(["--chunks".to_owned(), config.chunks.to_string()]);
    }
    if config.kind.is_async() {
        args.extend(["--async-wait-ms".to_owned(), config.async_wait_ms.to_string()]);
    }
    args
}

/// Whether the processes of a `kind` run share the lab's token set: the default pool's kinds.
fn shares_tokens(kind: PoolKind) -> bool {
    matches!(kind, PoolKind::Adaptive | PoolKind::CotenantAsync)
}

/// Runs `config.processes` workers at once on a host of `cpus` CPUs and returns their reports.
pub fn run_once(config: &RunConfig, cpus: u32, layout: Option<&Layout>) -> anyhow::Result<Vec<WorkerReport>> {
    let args = lab_worker_args(config);
    // An `adaptive` (or `cotenant-async`) run's processes share the lab's token set for its
    // duration (removed when it ends; the runner names it to every worker in
    // `COTENANT_TOKENS_SET`).
    let _tokens = if shares_tokens(config.kind) { Some(LabTokens::create(cpus)?) } else { None };
    // The cgroups live until the run ends (dropped after the workers are reaped).
    let mut cgroups = Vec::new();
    if let Some(layout) = layout {
        let count = match config.setting {
            Setting::OneCgroup => 1,
            Setting::PerProcess => config.processes,
        };
        for i in 0..count {
            let cg = Cgroup::create(
                layout,
                cotenant_ops::cgroup::LAB_PREFIX,
                &format!("neighbours-{i}"),
                false,
                None,
            )
            .context("creating a lab cgroup")?;
            Cgroup::set_weight(layout, cg.cpu_dir(false), 100).context("setting a lab cgroup's weight")?;
            cgroups.push(cg);
        }
    } else if config.setting == Setting::PerProcess {
        anyhow::bail!("one cgroup per process needs real cgroups");
    }
    let go = if is_go(config.kind) {
        match go_worker() {
            GoWorker::Ready(path) => Some(path),
            GoWorker::NotInstalled => anyhow::bail!("the Go kinds need a Go toolchain; none is installed"),
            GoWorker::BuildFailed(why) => anyhow::bail!("building the Go worker failed: {why}"),
        }
    } else {
        None
    };
    let specs = (0..config.processes as usize)
        .map(|i| {
            let cgroup = cgroups.get(i).or(cgroups.first());
            match &go {
                Some(program) => Ok(WorkerSpec {
                    program: program.clone(),
                    args: go_worker_args(config, cpus),
                    cgroup,
                    start_offset: Duration::ZERO,
                }),
                None => WorkerSpec::lab_worker(args.clone(), cgroup),
            }
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    run_workers(&specs)
}

/// `neighbours`: the pool kinds on thread items, or with `--items async` the executors on
/// futures, whose report says how they run.
pub fn run_neighbours(lab: &Lab, args: &LabArgs) -> anyhow::Result<Outcome> {
    let mut outcome = run_plan(lab, args, &Plan::neighbours(lab, args), "neighbours")?;
    if args.items == Items::Async {
        outcome.report = format!(
            "Every item is a future that awaits a timer of {} ms, then computes the thread items' \
             work inside the poll that resumes it (a lightweight thread: it waits, then runs on a \
             worker). Kinds: tokio-default, a tokio multi-thread runtime with its default workers \
             (one per CPU the process sees); tokio-optimal, tokio with max(1, CPUs / P) workers set \
             once; cotenant-async, the cotenant executor (`Pool::spawn_future`) on the default pool \
             (the adaptive policy, sharing host CPU tokens with the run's other processes), whose \
             timers a current-thread tokio runtime on its own thread drives. Service time is the \
             compute alone; end-to-end time runs from the scheduled arrival to the end of the \
             compute, the timer's wait included for every kind alike.\n\n{}",
            args.async_wait_ms.unwrap_or(DEFAULT_ASYNC_WAIT_MS),
            outcome.report
        );
    }
    Ok(outcome)
}

/// `go-neighbours`: skipped with a note, not failed, when Go is missing or its build fails.
pub fn run_go(lab: &Lab, args: &LabArgs) -> anyhow::Result<Outcome> {
    let skipped = |why: String| Outcome::skipped(why);
    match go_worker() {
        GoWorker::Ready(program) => {
            let mut plan = Plan::go_neighbours(lab, args);
            plan.go_chunks = calibrate_go(&program, args.service_ms)?;
            let mut outcome = run_plan(lab, args, &plan, "go-neighbours")?;
            let how = match args.go_items {
                GoItems::Limited => {
                    "runs at most GOMAXPROCS items at once, in arrival order (a worker pool sized by \
                     GOMAXPROCS; `--go-items per-item` starts a goroutine per item instead)"
                }
                GoItems::PerItem => {
                    "starts one goroutine per item as it arrives, and Go's scheduler time-slices them \
                     (`--go-items limited` runs at most GOMAXPROCS at once instead)"
                }
            };
            outcome.report = format!(
                "Every process is a Go service (the Go worker, built with the host's toolchain) that {how}. \
                 Kinds: Go's default GOMAXPROCS; GOMAXPROCS = max(1, CPUs / P) set once; GOMAXPROCS \
                 steered by the cotenant Go controller (`go/`). Service time runs from the moment an \
                 item may run to its end. Every item is {} chunks of work in every run (calibrated once, \
                 the median of {GO_CALIBRATIONS} calibrations, so that throughputs compare the same work).\n\n{}",
                plan.go_chunks, outcome.report
            );
            Ok(outcome)
        }
        GoWorker::NotInstalled => Ok(skipped("Go is not installed".into())),
        GoWorker::BuildFailed(why) => Ok(skipped(format!("building the Go worker failed ({why})"))),
    }
}

/// Calibrations of the Go worker whose median sizes every item of `go-neighbours`.
const GO_CALIBRATIONS: usize = 3;

/// The chunks of a `service_ms` item for the Go worker at `program`: the median of
/// [`GO_CALIBRATIONS`] calibrations, each in a fresh process (Go's cost per chunk varies
/// between processes). Each is a child of the lab (killed on a signal) with a deadline of
/// [`crate::runner::PROBE_DEADLINE`]: a calibration that hangs ends the experiment with an error.
fn calibrate_go(program: &std::path::Path, service_ms: f64) -> anyhow::Result<u32> {
    use crate::runner::{run_bounded_output, PROBE_DEADLINE};
    let mut found = Vec::new();
    for _ in 0..GO_CALIBRATIONS {
        let mut command = std::process::Command::new(program);
        command.args(["--calibrate", "--service-ms", &service_ms.to_string()]);
        let output = run_bounded_output(&mut command, PROBE_DEADLINE).context("calibrating the Go worker")?;
        let text = String::from_utf8_lossy(&output.stdout);
        let chunks = serde_json::from_str::<serde_json::Value>(text.trim())
            .ok()
            .and_then(|v| v["chunks"].as_u64())
            .filter(|&c| output.status.success() && c > 0)
            .with_context(|| {
                format!("the Go worker's calibration printed {:?} ({})", text.trim(), output.status)
            })?;
        found.push(chunks as f64);
    }
    Ok(median(&mut found) as u32)
}

/// The configuration of one run as its row records it: the whole row of a run that failed
/// ([`crate::failed_row`]), and the first keys of every other.
#[derive(Debug, Serialize)]
struct ConfigRow {
    /// Where the processes lived: the setting's name (`one cgroup`, `cgroup per process`).
    setting: &'static str,
    /// Offered load per process (fraction of its fair share).
    load: f64,
    /// Processes at once.
    processes: u32,
    /// The pool's name in tables (`share(2)` when the share factor is not 1).
    pool: String,
    /// Which repeat this is, from 0 (also the seed).
    repeat: u32,
    /// Run length (s).
    seconds: u64,
    /// Service time per item (ms).
    service_ms: f64,
}

/// The row of a run that ended: its configuration, then what it measured. The optional keys
/// belong to some kinds only (Go, Rust, async or `adaptive`), and are absent from the others'
/// rows.
#[derive(Debug, Serialize)]
struct MeasuredRow {
    /// The run's configuration, its keys side by side with the figures'.
    #[serde(flatten)]
    config: ConfigRow,
    /// How the Go worker ran its items (Go kinds only).
    #[serde(skip_serializing_if = "Option::is_none")]
    go_items: Option<GoItems>,
    /// Chunks of work per item of the Go worker, calibrated once for the plan (Go kinds only).
    #[serde(skip_serializing_if = "Option::is_none")]
    go_chunks: Option<u32>,
    /// Chunks of work per item of the Rust workers, calibrated once (Rust kinds only).
    #[serde(skip_serializing_if = "Option::is_none")]
    chunks: Option<u32>,
    /// How long each item waited on its timer before it computed (ms; the async kinds only).
    #[serde(skip_serializing_if = "Option::is_none")]
    async_wait_ms: Option<f64>,
    /// CPUs the processes used over the run, all their threads (CPUs; Rust kinds, when the
    /// run's wall time was measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    cpus_used: Option<f64>,
    /// CPU time per completed item, pool workers only (µs; Rust kinds, when items completed
    /// and their CPU time was measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_us_per_item: Option<f64>,
    /// CPUs others kept busy just before the run (CPUs, over 300 ms).
    host_busy_cpus_before: f64,
    /// The run's figures (latencies in µs, throughput per s, completed fraction), their keys
    /// side by side with the configuration's.
    #[serde(flatten)]
    figures: RunFigures,
    /// Jain's index of the processes' throughputs (1 = equal; no unit).
    throughput_jain: f64,
    /// Each process's final pool target (threads), in process order, separated by spaces.
    final_targets: String,
    /// Tasks run without a token because none came in time, all processes together (count;
    /// `adaptive` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    token_timeouts: Option<u64>,
    /// Tokens the controllers took back from tasks blocked while holding one, all processes
    /// together (count; `adaptive` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    token_takebacks: Option<u64>,
    /// Host tokens taken, all processes together (count; `adaptive` only; 0 when no pool
    /// engaged its tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    token_takes: Option<u64>,
    /// Items of exactly `service_ms` of CPU time (`--exact-cpu`); absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    exact_cpu: bool,
}

/// Runs `plan` and reduces it to an [`Outcome`] with tables, charts and verdicts.
pub fn run_plan(lab: &Lab, args: &LabArgs, plan: &Plan, title: &str) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::default();
    // Every Rust process of every run does the same work: items sized once, here, rather than
    // by each process's own calibration, which moves by over 10 % from run to run and would
    // move the throughputs with it (issue 33's 150 % line was read through that noise).
    if args.exact_cpu {
        if let Some(&(kind, _)) = plan.pools.iter().find(|&&(kind, _)| is_go(kind)) {
            anyhow::bail!(
                "--exact-cpu: the Go kinds ({}) size their items by work, not CPU time; leave them out or drop the flag",
                kind_name(kind)
            );
        }
    }
    let chunks = if args.exact_cpu {
        0
    } else if plan.pools.iter().any(|&(kind, _)| !is_go(kind)) {
        crate::workload::calibrate_fastest(Duration::from_secs_f64(args.service_ms / 1000.0))
    } else {
        0
    };
    let (aggregates, verdicts) = plan.execute(|key, repeat| {
        let &Key { setting, load, processes, kind, share_factor } = key;
        let config = RunConfig {
            processes,
            kind,
            share_factor,
            setting,
            load,
            service_ms: args.service_ms,
            duration_ms: plan.seconds * 1000,
            repeat,
            go_items: args.go_items,
            go_chunks: plan.go_chunks,
            chunks,
            exact_cpu: args.exact_cpu,
            async_wait_ms: args.async_wait_ms.unwrap_or(DEFAULT_ASYNC_WAIT_MS),
        };
        let busy_before = lab.quiet_check();
        eprintln!(
            "lab {title}: {}, load {:.0}%, P={processes}, {}, repeat {}/{}",
            setting.name(),
            load * 100.0,
            key.pool_name(),
            repeat + 1,
            plan.repeats
        );
        let config_row = ConfigRow {
            setting: setting.name(),
            load,
            processes,
            pool: key.pool_name(),
            repeat,
            seconds: plan.seconds,
            service_ms: args.service_ms,
        };
        let reports = match run_once(&config, lab.host.cpus, lab.layout.as_ref().ok()) {
            Ok(reports) => reports,
            Err(e) => {
                // A failed run gets its row, and `execute` goes on without it; any other error
                // ends the experiment.
                if let Some(why) = crate::runner::failed_run(&e) {
                    eprintln!("lab {title}: the run failed and is recorded as such: {why}");
                    outcome.rows.push(crate::failed_row(crate::row_of(&config_row), &why));
                }
                return Err(e);
            }
        };
        let figures = figures(&reports);
        let rust = !is_go(kind);
        // The CPUs the processes used over the run (all their threads): whether a slow run
        // left CPUs idle or spent them on something else.
        let used_ns: u64 = reports.iter().map(|r| r.process_cpu_ns).sum();
        let wall_ns = reports.iter().map(|r| r.wall_ns).max().unwrap_or(0);
        // CPU time per completed item, pool workers only: what the same work cost.
        let completed: usize = reports.iter().map(|r| r.summary.completed).sum();
        let workers_ns: u64 = reports.iter().map(|r| r.workers_cpu_ns).sum();
        // Fairness between the processes: Jain's index of their throughputs (1 = equal).
        let throughputs: Vec<f64> = reports.iter().map(|r| r.summary.throughput_per_s).collect();
        let targets: Vec<String> = reports.iter().map(|r| r.final_target.to_string()).collect();
        // The token counts of the default pool's kinds.
        let adaptive = shares_tokens(kind);
        let row = MeasuredRow {
            config: config_row,
            go_items: (!rust).then_some(args.go_items),
            go_chunks: (!rust).then_some(plan.go_chunks),
            chunks: rust.then_some(chunks),
            async_wait_ms: kind.is_async().then_some(config.async_wait_ms),
            cpus_used: (rust && wall_ns > 0).then_some(used_ns as f64 / wall_ns as f64),
            cpu_us_per_item: (rust && completed > 0 && workers_ns > 0)
                .then_some(workers_ns as f64 / completed as f64 / 1000.0),
            host_busy_cpus_before: busy_before,
            figures,
            throughput_jain: cotenant::internal::policy_sim::jain(&throughputs),
            final_targets: targets.join(" "),
            token_timeouts: adaptive.then(|| reports.iter().map(|r| r.token_timeouts).sum::<u64>()),
            token_takebacks: adaptive.then(|| reports.iter().map(|r| r.token_takebacks).sum::<u64>()),
            // Evidence that the default pools engaged their tokens (0 alone: P = 1).
            token_takes: adaptive.then(|| reports.iter().map(|r| r.token_takes).sum::<u64>()),
            exact_cpu: args.exact_cpu,
        };
        outcome.rows.push(crate::row_of(&row));
        Ok(figures)
    })?;
    outcome.report = table(&aggregates);
    if plan.by_load {
        outcome.verdicts = super::headline::verdicts(&aggregates, plan);
        outcome.charts = super::headline::chart(&aggregates, plan).into_iter().collect();
    } else {
        outcome.verdicts = verdicts;
        outcome.charts = charts(&aggregates, plan);
    }
    outcome.summary = serde_json::to_value(&aggregates)?;
    Ok(outcome)
}

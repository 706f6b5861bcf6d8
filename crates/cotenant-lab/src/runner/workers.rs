//! A run's worker processes: what each one is ([`WorkerSpec`], [`schedule_args`],
//! [`fixed_pool_args`]) and how long it runs ([`run_length`], [`cgroup_run_length`]), starting
//! them all at one common instant and collecting their reports ([`run_workers_at`]); and the
//! test hook a worker applies before its run ([`apply_test_fault`]).

use std::io::{self, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use crate::args::LabArgs;
use crate::worker::WorkerReport;
use crate::{Lab, Outcome};
use cotenant_ops::cgroup::{Cgroup, Layout};

use super::child::{lab_environment, LabChild};
use super::collect::collect;
use super::deadline::{deadline_for, WorkerFailed};

/// How far in the future the common start is: time for every child to start, calibrate and
/// build its pool.
pub const START_DELAY: Duration = Duration::from_millis(700);
/// The length assumed for a child whose arguments do not say (`--duration-ms`).
const UNKNOWN_RUN_LENGTH: Duration = Duration::from_secs(600);
/// Test hook, read by `lab-worker` only ([`apply_test_fault`]): `hang` never starts the run,
/// `flood-stderr` first writes [`FLOOD_BYTES`] to stderr (more than a pipe holds).
pub const FAULT_ENV: &str = "COTENANT_LAB_WORKER_FAULT";
/// What `flood-stderr` writes.
pub const FLOOD_BYTES: usize = 1 << 20;

/// One process of a run.
pub struct WorkerSpec<'a> {
    /// The program (the cotenant binary, or the Go worker).
    pub program: PathBuf,
    /// Its arguments, without `--start-at-ns` and `--parent` (added here). Its
    /// `--duration-ms` sets the run's deadline.
    pub args: Vec<String>,
    /// The cgroup it starts in (joined between fork and exec), if any.
    pub cgroup: Option<&'a Cgroup>,
    /// Extra delay of its start after the common one (the fairness experiment's B).
    pub start_offset: Duration,
}

impl<'a> WorkerSpec<'a> {
    /// A `cotenant lab-worker` with `args`.
    pub fn lab_worker(args: Vec<String>, cgroup: Option<&'a Cgroup>) -> anyhow::Result<Self> {
        let program = std::env::current_exe().context("locating the cotenant binary")?;
        let mut all = vec!["lab-worker".to_owned()];
        all.extend(args);
        Ok(WorkerSpec { program, args: all, cgroup, start_offset: Duration::ZERO })
    }

    /// When this process's run ends, after the common start: its offset plus its
    /// `--duration-ms`, if its arguments say.
    pub(super) fn run_end(&self) -> Option<Duration> {
        let at = self.args.iter().position(|a| a == "--duration-ms")?;
        let ms: u64 = self.args.get(at + 1)?.parse().ok()?;
        Some(self.start_offset + Duration::from_millis(ms))
    }
}

/// Test hook, called by `lab-worker` before its run: acts on [`FAULT_ENV`] (`hang` never
/// returns; unset, nothing happens).
pub fn apply_test_fault() -> anyhow::Result<()> {
    match std::env::var(FAULT_ENV).as_deref() {
        Err(_) | Ok("") => Ok(()),
        Ok("hang") => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        Ok("flood-stderr") => {
            let line = [b"x".repeat(1023), b"\n".to_vec()].concat();
            let mut stderr = io::stderr().lock();
            for _ in 0..FLOOD_BYTES / line.len() {
                stderr.write_all(&line)?;
            }
            Ok(())
        }
        Ok(other) => anyhow::bail!("{FAULT_ENV}={other:?}: expected hang or flood-stderr"),
    }
}

/// Seconds per run and runs per configuration: `--seconds` and `--repeats` where given, else
/// the experiment's own defaults, each `(quick, full)`: for `--quick` and for a full run.
pub fn run_length(args: &LabArgs, seconds: (u64, u64), repeats: (u32, u32)) -> (u64, u32) {
    if args.quick {
        (args.seconds.unwrap_or(seconds.0), args.repeats.unwrap_or(repeats.0))
    } else {
        (args.seconds.unwrap_or(seconds.1), args.repeats.unwrap_or(repeats.1))
    }
}

/// What an experiment in real cgroups starts from: the cgroup layout and its [`run_length`]
/// (seconds, repeats); or, where real cgroups cannot be made, the outcome that says
/// `experiment` was skipped and why.
pub fn cgroup_run_length<'l>(
    lab: &'l Lab,
    experiment: &str,
    args: &LabArgs,
    seconds: (u64, u64),
    repeats: (u32, u32),
) -> Result<(&'l Layout, u64, u32), Box<Outcome>> {
    let layout = lab.cgroups_for(experiment)?;
    let (seconds, repeats) = run_length(args, seconds, repeats);
    Ok((layout, seconds, repeats))
}

/// `lab-worker` arguments of one run of a schedule, after its pool: `processes` processes on
/// the host, each offered `load` × its fair CPUs (`fair_cpus`, or by default its share of the
/// host's) in items of `service_ms` for `duration`. Callers put the pool first and append the
/// rest (`--seed`, `--arrivals`, `--saturate`, ...).
pub fn schedule_args(
    processes: u32,
    load: f64,
    fair_cpus: Option<f64>,
    service_ms: f64,
    duration: Duration,
) -> Vec<String> {
    let mut args = vec!["--processes".to_owned(), processes.to_string()];
    args.extend(["--load".to_owned(), load.to_string()]);
    if let Some(fair_cpus) = fair_cpus {
        args.extend(["--fair-cpus".to_owned(), fair_cpus.to_string()]);
    }
    args.extend([
        "--service-ms".to_owned(),
        service_ms.to_string(),
        "--duration-ms".to_owned(),
        duration.as_millis().to_string(),
    ]);
    args
}

/// `lab-worker` arguments shared by the one-process experiments: a fixed pool of `threads`,
/// offered `load` × `fair_cpus` CPUs of `service_ms` items for `duration`. Callers append the
/// rest (`--seed`, `--arrivals`, `--saturate`, a budget, ...).
pub fn fixed_pool_args(
    threads: u32,
    fair_cpus: f64,
    load: f64,
    service_ms: f64,
    duration: Duration,
) -> Vec<String> {
    let mut args = vec!["--pool".to_owned(), "fixed".to_owned()];
    args.extend(["--fixed-threads".to_owned(), threads.to_string()]);
    args.extend(schedule_args(1, load, Some(fair_cpus), service_ms, duration));
    args
}

/// Runs every spec at once and returns their reports, in order.
pub fn run_workers(specs: &[WorkerSpec]) -> anyhow::Result<Vec<WorkerReport>> {
    run_workers_at(specs, SystemTime::now() + START_DELAY)
}

/// [`run_workers`] with a common start chosen by the caller (which samples the host
/// meanwhile). Fails with [`WorkerFailed`] when a worker does not finish by the run's deadline
/// (it is killed), fails, or prints no report.
pub fn run_workers_at(specs: &[WorkerSpec], start_at: SystemTime) -> anyhow::Result<Vec<WorkerReport>> {
    let run = specs
        .iter()
        .map(WorkerSpec::run_end)
        .try_fold(Duration::ZERO, |longest, end| Some(longest.max(end?)));
    let until_start = start_at.duration_since(SystemTime::now()).unwrap_or_default();
    let deadline = deadline_for(until_start, run.unwrap_or(UNKNOWN_RUN_LENGTH))?;
    let mut children = Vec::new();
    for spec in specs {
        let start_ns = (start_at + spec.start_offset)
            .duration_since(UNIX_EPOCH)
            .context("clock before 1970")?
            .as_nanos()
            .to_string();
        let parent = std::process::id().to_string();
        let mut args: Vec<&str> = spec.args.iter().map(String::as_str).collect();
        args.extend(["--start-at-ns", &start_ns, "--parent", &parent]);
        let mut command = match spec.cgroup {
            Some(cgroup) => cgroup.command(&spec.program, &args, None),
            None => {
                let mut c = Command::new(&spec.program);
                c.args(&args);
                c
            }
        };
        lab_environment(&mut command).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let child =
            LabChild::spawn(&mut command).with_context(|| format!("starting {}", spec.program.display()))?;
        children.push(child);
    }
    let mut reports = Vec::new();
    for (finished, child) in collect(&mut children, deadline)?.into_iter().zip(&children) {
        if !finished.status.success() {
            return Err(WorkerFailed(format!(
                "a lab worker (pid {}) failed ({}): {}",
                child.id(),
                finished.status,
                finished.stderr.trim()
            ))
            .into());
        }
        let out = String::from_utf8_lossy(&finished.stdout);
        let line = out.lines().last().unwrap_or("");
        let report = serde_json::from_str(line).map_err(|e| {
            WorkerFailed(format!(
                "a lab worker (pid {}) printed {:?}, not a report: {e}",
                child.id(),
                line.chars().take(200).collect::<String>()
            ))
        })?;
        reports.push(report);
    }
    Ok(reports)
}

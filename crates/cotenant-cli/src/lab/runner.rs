//! Starting an experiment's processes and collecting their reports: every process is a
//! `cotenant lab-worker` (or the Go worker) started in its cgroup, all of them starting their
//! schedules at one common instant; every child is killed and reaped however the run ends.
//!
//! SIGINT and SIGTERM are handled by `cgroup.rs`'s signal thread: it kills every process in the
//! lab's cgroups and removes them. Children outside any cgroup (no cgroup file system) die with
//! the lab through `PR_SET_PDEATHSIG`, set by the worker itself.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use super::cgroup::Cgroup;
use super::worker::WorkerReport;

/// How far in the future the common start is: time for every child to start, calibrate and
/// build its pool.
pub const START_DELAY: Duration = Duration::from_millis(700);

/// One process of a run.
pub struct WorkerSpec<'a> {
    /// The program (the cotenant binary, or the Go worker).
    pub program: PathBuf,
    /// Its arguments, without `--start-at-ns` and `--parent` (added here).
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
}

/// Children killed and reaped however the run ends (error, panic).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
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
    [
        "--pool",
        "fixed",
        "--fixed-threads",
        &threads.to_string(),
        "--processes",
        "1",
        "--load",
        &load.to_string(),
        "--fair-cpus",
        &fair_cpus.to_string(),
        "--service-ms",
        &service_ms.to_string(),
        "--duration-ms",
        &duration.as_millis().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Runs every spec at once and returns their reports, in order.
pub fn run_workers(specs: &[WorkerSpec]) -> anyhow::Result<Vec<WorkerReport>> {
    run_workers_at(specs, SystemTime::now() + START_DELAY)
}

/// [`run_workers`] with a common start chosen by the caller (which samples the host
/// meanwhile).
pub fn run_workers_at(specs: &[WorkerSpec], start_at: SystemTime) -> anyhow::Result<Vec<WorkerReport>> {
    let mut children = Children(Vec::new());
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
        // The default pools of every worker share the lab's own token set, never the host's
        // default one, and whatever the user's environment says (`lab-worker` turns tokens off
        // for the kinds that do not cooperate).
        command
            .env(cotenant::tokens::DEFAULT_SET_ENV, super::neighbours::LAB_TOKENS)
            .env_remove(cotenant::tokens::TOKENS_ENV);
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", spec.program.display()))?;
        children.0.push(child);
    }
    let mut reports = Vec::new();
    for child in &mut children.0 {
        let mut out = String::new();
        child.stdout.take().context("worker stdout")?.read_to_string(&mut out)?;
        let mut err = String::new();
        child.stderr.take().context("worker stderr")?.read_to_string(&mut err)?;
        let status = child.wait()?;
        if !status.success() {
            bail!("a lab worker failed ({status}): {}", err.trim());
        }
        let line = out.lines().last().unwrap_or("");
        let report = serde_json::from_str(line).with_context(|| {
            format!("a lab worker printed {:?}", line.chars().take(200).collect::<String>())
        })?;
        reports.push(report);
    }
    Ok(reports)
}

/// The `--parent` of a lab worker's command line (`cotenant lab-worker ... --parent PID`, or
/// the Go worker's), if it is one.
pub fn worker_parent(cmdline: &[&str]) -> Option<u32> {
    let is_worker = matches!(cmdline.get(1), Some(&"lab-worker" | &"lab-tenant"))
        || cmdline.first().is_some_and(|a| a.ends_with("/goworker"));
    if !is_worker {
        return None;
    }
    let at = cmdline.iter().position(|a| *a == "--parent")?;
    cmdline.get(at + 1)?.parse().ok()
}

/// Lab workers whose lab is gone (its pid is not their parent any more): `(pid, command)`.
pub fn orphan_workers() -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&raw);
        let args: Vec<&str> = text.split('\0').filter(|a| !a.is_empty()).collect();
        let Some(parent) = worker_parent(&args) else { continue };
        let ppid = std::fs::read_to_string(entry.path().join("stat")).ok().and_then(|s| {
            s.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1)?.parse::<u32>().ok())
        });
        if ppid != Some(parent) {
            found.push((pid, args.join(" ")));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_recognised_by_its_command_line() {
        assert_eq!(
            worker_parent(&["/x/cotenant", "lab-worker", "--pool", "share", "--parent", "42"]),
            Some(42)
        );
        assert_eq!(worker_parent(&["/tmp/cotenant-lab-go-0/goworker", "--parent", "7"]), Some(7));
        assert_eq!(worker_parent(&["/x/cotenant", "lab-tenant", "batch", "--parent", "9"]), Some(9));
        assert_eq!(worker_parent(&["/x/cotenant", "lab", "neighbours", "--parent", "42"]), None);
        assert_eq!(worker_parent(&["/x/cotenant", "lab-worker", "--parent"]), None);
        assert_eq!(worker_parent(&[]), None);
    }
}

//! Starting an experiment's processes and collecting their reports: every process is a
//! `cotenant lab-worker` (or the Go worker) started in its cgroup, all of them starting their
//! schedules at one common instant.
//!
//! Every child is a [`LabChild`]: the leader of a process group of its own, recorded in
//! `cgroup.rs`'s registry (a signal to the lab kills and reaps it, and nothing starts once a
//! signal came), and killed with its group and reaped however the run ends. [`collect`] reads
//! each child's stdout and stderr at once, each on a thread of its own (a child that fills one
//! pipe while the lab reads the other would wait forever, and so would the lab), keeping the
//! last [`STDERR_KEPT`] bytes of stderr for error messages. A run has a deadline
//! ([`worker_deadline`]): a child still running then is killed, and the run fails with
//! [`WorkerFailed`], as it does when a child fails or prints no report; the experiments record
//! such a run as failed and go on. Children outside any cgroup also die with the lab through
//! `PR_SET_PDEATHSIG`, set by the worker itself.
//!
//! The other programs the lab runs to their end (compilers, the runtimes' probes, the Go
//! worker's calibration, `cotenant cgroup set`) go through [`run_bounded_output`]: a
//! [`LabChild`] too, collected the same way, with a fixed limit of its kind
//! ([`BUILD_DEADLINE`], [`PROBE_DEADLINE`], [`CGROUP_SET_DEADLINE`]) rather than a run's.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use cotenant_ops::cgroup::Cgroup;
use super::worker::WorkerReport;

/// How far in the future the common start is: time for every child to start, calibrate and
/// build its pool.
pub const START_DELAY: Duration = Duration::from_millis(700);

/// The least a run is given beyond its length before its children are killed: a loaded host
/// slows a worker's start, calibration and report, but a hung worker never ends.
pub const DEADLINE_GRACE_MIN: Duration = Duration::from_secs(30);
/// The grace of a long run, in multiples of its length, when that is more than
/// [`DEADLINE_GRACE_MIN`].
pub const DEADLINE_GRACE_FACTOR: u32 = 2;
/// The length assumed for a child whose arguments do not say (`--duration-ms`).
const UNKNOWN_RUN_LENGTH: Duration = Duration::from_secs(600);
/// What a child's stderr keeps (its end) for the error message of a failed run.
pub const STDERR_KEPT: usize = 64 * 1024;
/// What [`run_bounded_output`] keeps of a program's stderr (its end): all of it in practice,
/// since a compiler's first error line is the one worth showing, but bounded.
const TOOL_STDERR_KEPT: usize = 1 << 20;
/// How long a build (`go build`, `javac`, `c++`, `cc`) may take before it is killed: a cold Go
/// build takes about a minute on a loaded 2-CPU host; one that takes ten has hung.
pub const BUILD_DEADLINE: Duration = Duration::from_secs(600);
/// How long a probe, a version check or the Go worker's calibration (each a second or so of
/// work) may take before it is killed.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(120);
/// How long `cotenant cgroup set` (a few control files read and written) may take before it
/// is killed.
pub const CGROUP_SET_DEADLINE: Duration = Duration::from_secs(30);
/// How often a child is checked for its exit while the lab waits for it.
const EXIT_POLL: Duration = Duration::from_millis(10);
/// How long a child killed with SIGKILL is waited for before the lab gives up on reaping it.
const KILLED_WAIT: Duration = Duration::from_secs(10);

/// Test hook: a number of seconds that replaces every run's [`worker_deadline`] (the tests'
/// hung worker is killed after a few seconds, not after 30).
pub const DEADLINE_ENV: &str = "COTENANT_LAB_WORKER_DEADLINE_S";
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
    fn run_end(&self) -> Option<Duration> {
        let at = self.args.iter().position(|a| a == "--duration-ms")?;
        let ms: u64 = self.args.get(at + 1)?.parse().ok()?;
        Some(self.start_offset + Duration::from_millis(ms))
    }
}

/// A run that failed because of its children (one did not finish by the deadline and was
/// killed, exited with an error, or printed no report): recorded as a failed run by the
/// experiments, which go on, rather than an error that ends them.
#[derive(Debug)]
pub struct WorkerFailed(pub String);

impl fmt::Display for WorkerFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WorkerFailed {}

/// The reason to record when `err` is a failed run ([`WorkerFailed`], with any context added
/// on its way); `None` for an error the experiment must stop on.
pub fn failed_run(err: &anyhow::Error) -> Option<String> {
    err.downcast_ref::<WorkerFailed>().map(|_| format!("{err:#}"))
}

/// How long the lab waits for a run's children, from their start: until the common start
/// (`until_start`), the run's length, and a grace of max([`DEADLINE_GRACE_MIN`],
/// [`DEADLINE_GRACE_FACTOR`] × the length).
pub fn worker_deadline(until_start: Duration, run: Duration) -> Duration {
    until_start + run + DEADLINE_GRACE_MIN.max(run * DEADLINE_GRACE_FACTOR)
}

/// [`worker_deadline`], unless [`DEADLINE_ENV`] replaces it.
pub fn deadline_for(until_start: Duration, run: Duration) -> anyhow::Result<Deadline> {
    let limit = match std::env::var(DEADLINE_ENV) {
        Err(_) => worker_deadline(until_start, run),
        Ok(text) => text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| *s > 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .with_context(|| format!("{DEADLINE_ENV}={text:?}: not a positive number of seconds"))?,
    };
    Ok(Deadline::after(limit))
}

/// When the lab stops waiting for children, and how long after their start that is (for the
/// message).
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    limit: Duration,
}

impl Deadline {
    /// `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        Deadline { at: Instant::now() + limit, limit }
    }
}

/// The last `cap` bytes written to it, however many are written: what a child's stderr keeps.
#[derive(Debug)]
pub struct Tail {
    cap: usize,
    kept: VecDeque<u8>,
    dropped: u64,
}

impl Tail {
    /// Keeps at most `cap` bytes.
    pub fn new(cap: usize) -> Tail {
        Tail { cap, kept: VecDeque::new(), dropped: 0 }
    }

    /// Appends `bytes`, forgetting the oldest beyond the cap.
    pub fn push(&mut self, bytes: &[u8]) {
        let bytes = match bytes.len().checked_sub(self.cap) {
            Some(cut) if cut > 0 => {
                self.dropped += cut as u64;
                &bytes[cut..]
            }
            _ => bytes,
        };
        let overflow = (self.kept.len() + bytes.len()).saturating_sub(self.cap);
        self.kept.drain(..overflow);
        self.dropped += overflow as u64;
        self.kept.extend(bytes);
    }

    /// What is kept, as text, saying how much came before it.
    pub fn text(&self) -> String {
        let (front, back) = self.kept.as_slices();
        let text = String::from_utf8_lossy(&[front, back].concat()).into_owned();
        if self.dropped > 0 {
            format!("[{} earlier bytes not kept] {text}", self.dropped)
        } else {
            text
        }
    }
}

/// A child of the lab (see the module documentation).
pub struct LabChild {
    child: Child,
    /// Set once reaped: its pid and group are no longer ours to kill.
    status: Option<ExitStatus>,
}

impl LabChild {
    /// Starts `command` as the leader of a new process group, recorded in the lab's registry;
    /// refused once a signal is stopping the lab.
    pub fn spawn(command: &mut Command) -> io::Result<LabChild> {
        command.process_group(0);
        Ok(LabChild { child: cotenant_ops::cgroup::spawn_recorded(command)?, status: None })
    }

    /// Its pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its stdin, if piped and not taken yet.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Its stdout, if piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Waits until it exits (and reaps it) or `deadline` passes (`None`).
    pub fn wait_until(&mut self, deadline: Instant) -> io::Result<Option<ExitStatus>> {
        loop {
            if let Some(status) = self.status {
                return Ok(Some(status));
            }
            if let Some(status) = cotenant_ops::cgroup::try_reap(&mut self.child)? {
                self.status = Some(status);
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(EXIT_POLL.min(deadline - now));
        }
    }

    /// Kills its process group (it and whatever it started) unless it was reaped already.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            let pid = self.child.id() as i32;
            // SAFETY: kill has no memory effects; the child is not reaped, so its pid and its
            // group are still ours.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for LabChild {
    fn drop(&mut self) {
        self.kill();
        if let Ok(None) = self.wait_until(Instant::now() + KILLED_WAIT) {
            let _ = writeln!(
                io::stderr(),
                "cotenant: lab child {} has not exited {} s after SIGKILL; not waiting for it",
                self.id(),
                KILLED_WAIT.as_secs()
            );
        }
    }
}

/// What a child printed and how it ended.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// The end of what it wrote to stderr ([`STDERR_KEPT`] bytes at most).
    pub stderr: String,
}

/// One pipe read to its end by a reader thread: (child index, what was read).
enum PipeRead {
    Stdout(usize, io::Result<Vec<u8>>),
    Stderr(usize, io::Result<Tail>),
}

/// Reads the stdout and stderr of every child at once and waits for them until `deadline`.
/// A child still running then is killed with all the others, and so is every child when one
/// pipe fails; the run then fails with [`WorkerFailed`]. The children's exit statuses are
/// returned as they are: the caller decides what a failure means.
pub fn collect(children: &mut [LabChild], deadline: Deadline) -> anyhow::Result<Vec<Finished>> {
    collect_keeping(children, deadline, STDERR_KEPT)
}

/// [`collect`], keeping the last `stderr_kept` bytes of each child's stderr.
fn collect_keeping(
    children: &mut [LabChild],
    deadline: Deadline,
    stderr_kept: usize,
) -> anyhow::Result<Vec<Finished>> {
    let (sender, reads) = mpsc::channel();
    for (i, child) in children.iter_mut().enumerate() {
        let stdout = child.child.stdout.take().context("a lab child's stdout is not piped")?;
        let stderr = child.child.stderr.take().context("a lab child's stderr is not piped")?;
        let to_lab = sender.clone();
        read_on_thread(move || to_lab.send(PipeRead::Stdout(i, read_all(stdout))))?;
        let to_lab = sender.clone();
        read_on_thread(move || to_lab.send(PipeRead::Stderr(i, read_tail(stderr, stderr_kept))))?;
    }
    drop(sender);
    let mut stdouts: Vec<Option<Vec<u8>>> = children.iter().map(|_| None).collect();
    let mut stderrs: Vec<Option<Tail>> = children.iter().map(|_| None).collect();
    // Each pipe ends when its child exits: in the common case nothing here polls.
    let mut pipe_error = None;
    for _ in 0..2 * children.len() {
        let Ok(read) = reads.recv_timeout(deadline.at.saturating_duration_since(Instant::now())) else {
            break; // the deadline
        };
        match read {
            PipeRead::Stdout(i, Ok(bytes)) => stdouts[i] = Some(bytes),
            PipeRead::Stderr(i, Ok(tail)) => stderrs[i] = Some(tail),
            PipeRead::Stdout(i, Err(e)) | PipeRead::Stderr(i, Err(e)) => {
                pipe_error = Some(format!("reading the output of lab child pid {}: {e}", children[i].id()));
                break;
            }
        }
    }
    if let Some(why) = pipe_error {
        children.iter_mut().for_each(LabChild::kill);
        return Err(WorkerFailed(why).into());
    }
    let mut finished = Vec::new();
    for i in 0..children.len() {
        let status = children[i].wait_until(deadline.at)?;
        let (Some(status), Some(stdout), Some(stderr)) = (status, stdouts[i].take(), stderrs[i].take())
        else {
            // Still running, or its pipes still open (held by something it started).
            let pid = children[i].id();
            children.iter_mut().for_each(LabChild::kill);
            return Err(WorkerFailed(format!(
                "lab child pid {pid} did not finish within {:.0} s; killed",
                deadline.limit.as_secs_f64()
            ))
            .into());
        };
        finished.push(Finished { status, stdout, stderr: stderr.text() });
    }
    Ok(finished)
}

/// Runs `command` to its end as a [`LabChild`] (the leader of its own process group, recorded,
/// killed with its group on a signal), with an empty stdin and its stdout and stderr read at
/// once, and waits for it at most `limit` (one of [`BUILD_DEADLINE`], [`PROBE_DEADLINE`],
/// [`CGROUP_SET_DEADLINE`]): still running then, it is killed with its group. For the programs
/// the lab runs to completion that are not workers: [`DEADLINE_ENV`] does not apply.
///
/// Returns its status and output as they are (the caller decides what a failure means; its
/// stderr is the last [`TOOL_STDERR_KEPT`] bytes). Errors name the program: one that cannot
/// be started keeps the spawn's `io::Error` as its source (`NotFound`: not installed), one
/// killed at its deadline is a [`WorkerFailed`] that says after how long.
pub fn run_bounded_output(command: &mut Command, limit: Duration) -> anyhow::Result<Finished> {
    let program = command.get_program().to_string_lossy().into_owned();
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = LabChild::spawn(command).with_context(|| format!("starting {program}"))?;
    let mut finished =
        collect_keeping(std::slice::from_mut(&mut child), Deadline::after(limit), TOOL_STDERR_KEPT)
            .with_context(|| format!("running {program}"))?;
    finished.pop().with_context(|| format!("running {program}: no exit status collected"))
}

/// Whether `err` (from [`run_bounded_output`]) says its program does not exist: not installed.
pub fn is_not_found(err: &anyhow::Error) -> bool {
    err.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::NotFound)
}

/// Starts a reader thread (not joined: it ends when its pipe does, and reports by channel).
fn read_on_thread<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("lab-pipe".into())
        .spawn(move || {
            let _ = read();
        })
        .map(drop)
        .context("starting a thread to read a lab child's output")
}

fn read_all(mut pipe: impl Read) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    pipe.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn read_tail(mut pipe: impl Read, cap: usize) -> io::Result<Tail> {
    let mut tail = Tail::new(cap);
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => return Ok(tail),
            Ok(n) => tail.push(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Gives a child of the lab its environment: the default pools of every worker and tenant
/// share the lab's own token set (recorded, and removed when the lab ends, however it ends),
/// never the host's default one, whatever the user's environment says (`lab-worker` turns
/// tokens off for the kinds that do not cooperate).
pub fn lab_environment(command: &mut Command) -> &mut Command {
    command
        .env(cotenant::tokens::DEFAULT_SET_ENV, super::neighbours::LAB_TOKENS)
        .env_remove(cotenant::tokens::TOKENS_ENV)
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

/// Whether a command line is a running lab: the cotenant binary's `lab <experiment>`, but not
/// `lab clean`.
pub fn is_lab(cmdline: &[&str]) -> bool {
    let cotenant =
        cmdline.first().is_some_and(|p| Path::new(p).file_name() == Some(std::ffi::OsStr::new("cotenant")));
    cotenant && cmdline.get(1) == Some(&"lab") && cmdline.len() > 2 && !cmdline[2..].contains(&"clean")
}

/// This user's labs running now, but this process: `(pid, command)`.
pub fn running_labs() -> Vec<(u32, String)> {
    use std::os::unix::fs::MetadataExt as _;
    let me = std::process::id();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if pid == me || !entry.metadata().is_ok_and(|m| m.uid() == uid) {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&raw);
        let args: Vec<&str> = text.split('\0').filter(|a| !a.is_empty()).collect();
        if is_lab(&args) {
            found.push((pid, args.join(" ")));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_given_its_length_and_a_grace_of_at_least_30_s() {
        let s = Duration::from_secs;
        assert_eq!(worker_deadline(s(1), s(5)), s(1 + 5 + 30), "short runs: 30 s of grace");
        assert_eq!(worker_deadline(s(1), s(20)), s(1 + 20 + 40), "long runs: twice their length");
        assert_eq!(worker_deadline(Duration::ZERO, Duration::ZERO), s(30));
    }

    #[test]
    fn a_run_lasts_until_its_latest_worker_ends() {
        let spec = |duration_ms: &str, offset_s: u64| WorkerSpec {
            program: PathBuf::from("/x/cotenant"),
            args: ["lab-worker", "--duration-ms", duration_ms, "--seed", "1"].map(String::from).to_vec(),
            cgroup: None,
            start_offset: Duration::from_secs(offset_s),
        };
        assert_eq!(spec("4000", 2).run_end(), Some(Duration::from_secs(6)));
        assert_eq!(spec("soon", 0).run_end(), None, "unreadable: unknown");
        let mut silent = spec("1", 0);
        silent.args.truncate(1);
        assert_eq!(silent.run_end(), None, "not given: unknown");
    }

    #[test]
    fn the_tail_keeps_the_last_bytes_and_counts_the_rest() {
        let mut tail = Tail::new(8);
        tail.push(b"abc");
        assert_eq!(tail.text(), "abc");
        tail.push(b"defgh");
        assert_eq!(tail.text(), "abcdefgh", "exactly full: nothing lost");
        tail.push(b"ij");
        assert_eq!(tail.text(), "[2 earlier bytes not kept] cdefghij");
        tail.push(&[b'z'; 20]);
        assert_eq!(tail.text(), "[22 earlier bytes not kept] zzzzzzzz", "a write longer than the cap");
        let mut flood = Tail::new(STDERR_KEPT);
        for _ in 0..100 {
            flood.push(&[b'e'; 4096]);
        }
        assert_eq!(flood.kept.len(), STDERR_KEPT);
        assert_eq!(flood.dropped, (100 * 4096 - STDERR_KEPT) as u64);
    }

    #[test]
    fn a_failed_run_is_told_from_an_error_that_ends_the_experiment() {
        let why = "lab child pid 7 did not finish within 3 s; killed";
        let failed = anyhow::Error::new(WorkerFailed(why.into())).context("tenant B");
        assert_eq!(
            failed_run(&failed).as_deref(),
            Some("tenant B: lab child pid 7 did not finish within 3 s; killed")
        );
        assert_eq!(failed_run(&anyhow::anyhow!("creating a lab cgroup")), None);
    }

    #[test]
    fn a_program_run_to_its_end_gives_its_status_and_both_outputs() {
        let mut sh = Command::new("sh");
        sh.args(["-c", "printf out; printf 'first\\nsecond\\n' >&2; exit 3"]);
        let finished = run_bounded_output(&mut sh, PROBE_DEADLINE).unwrap();
        assert_eq!(finished.status.code(), Some(3), "a failure is returned, not an error");
        assert_eq!(finished.stdout, b"out");
        assert_eq!(finished.stderr, "first\nsecond\n");
    }

    #[test]
    fn a_program_that_does_not_exist_is_not_installed_and_named() {
        let missing = "/nonexistent/cotenant-no-such-tool";
        let e = run_bounded_output(&mut Command::new(missing), BUILD_DEADLINE).unwrap_err();
        assert!(is_not_found(&e), "{e:#}");
        assert!(format!("{e:#}").starts_with(&format!("starting {missing}: ")), "{e:#}");
        assert!(!is_not_found(&anyhow::anyhow!("c++ failed")));
    }

    #[test]
    fn a_program_past_its_deadline_is_killed_and_named_with_the_deadline() {
        // Never ends by itself: only the deadline can end it, however loaded the host.
        let mut sleeper = Command::new("sleep");
        sleeper.arg("3600");
        let e = run_bounded_output(&mut sleeper, Duration::from_secs(1)).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.starts_with("running sleep: lab child pid "), "{text}");
        assert!(text.ends_with("did not finish within 1 s; killed"), "{text}");
        assert!(failed_run(&e).is_some(), "a timed-out program is a failed run: {text}");
    }

    #[test]
    fn a_running_lab_is_recognised_by_its_command_line() {
        assert!(is_lab(&["/x/target/release/cotenant", "lab", "neighbours", "--quick"]));
        assert!(is_lab(&["cotenant", "lab", "--quick", "all"]));
        assert!(!is_lab(&["/x/cotenant", "lab", "clean"]), "lab clean is no lab");
        assert!(!is_lab(&["/x/cotenant", "lab"]));
        assert!(!is_lab(&["/x/deps/lab-0123abcd", "lab", "neighbours"]), "another program");
        assert!(!is_lab(&["/x/cotenant", "lab-worker", "--parent", "4"]));
        assert!(!is_lab(&[]));
    }

    #[test]
    fn a_worker_is_recognised_by_its_command_line() {
        assert_eq!(
            worker_parent(&["/x/cotenant", "lab-worker", "--pool", "share", "--parent", "42"]),
            Some(42)
        );
        assert_eq!(worker_parent(&["/root/.cache/cotenant/lab-go/goworker", "--parent", "7"]), Some(7));
        assert_eq!(worker_parent(&["/x/cotenant", "lab-tenant", "batch", "--parent", "9"]), Some(9));
        assert_eq!(worker_parent(&["/x/cotenant", "lab", "neighbours", "--parent", "42"]), None);
        assert_eq!(worker_parent(&["/x/cotenant", "lab-worker", "--parent"]), None);
        assert_eq!(worker_parent(&[]), None);
    }
}

//! Reading children's stdout and stderr at once and waiting for them by a deadline: [`collect`]
//! for a run's children, [`run_bounded_output`] for a program the lab runs to its end; what a
//! child's stderr keeps ([`Tail`]).

use std::collections::VecDeque;
use std::io::{self, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::child::LabChild;
use super::deadline::{Deadline, WorkerFailed};

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

/// The last `cap` bytes written to it, however many are written: what a child's stderr keeps.
#[derive(Debug)]
pub struct Tail {
    cap: usize,
    pub(super) kept: VecDeque<u8>,
    pub(super) dropped: u64,
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
/// the lab runs to completion that are not workers: [`DEADLINE_ENV`](super::DEADLINE_ENV) does not apply.
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

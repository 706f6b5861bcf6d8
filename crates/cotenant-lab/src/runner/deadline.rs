//! A run's deadline (its length and a grace, or the tests' hook), and a failed run
//! ([`WorkerFailed`]) told apart from an error that ends the experiment.

use std::fmt;
use std::time::{Duration, Instant};

use anyhow::Context;

/// The least a run is given beyond its length before its children are killed: a loaded host
/// slows a worker's start, calibration and report, but a hung worker never ends.
pub const DEADLINE_GRACE_MIN: Duration = Duration::from_secs(30);
/// The grace of a long run, in multiples of its length, when that is more than
/// [`DEADLINE_GRACE_MIN`].
pub const DEADLINE_GRACE_FACTOR: u32 = 2;
/// Test hook: a number of seconds that replaces every run's [`worker_deadline`] (the tests'
/// hung worker is killed after a few seconds, not after 30).
pub const DEADLINE_ENV: &str = "COTENANT_LAB_WORKER_DEADLINE_S";

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
    pub(super) at: Instant,
    pub(super) limit: Duration,
}

impl Deadline {
    /// `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        Deadline { at: Instant::now() + limit, limit }
    }
}

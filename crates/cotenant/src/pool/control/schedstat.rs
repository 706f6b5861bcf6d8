//! The workers' run-queue waits, read from their `/proc/self/task/<tid>/schedstat` files
//! (kept open in the pool's entry, opened again a while after a failure).

use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::Entry;
use crate::metrics::Degradation;
use crate::pool::Shared;
use crate::sampler::read_at_zero;

/// The workers' run-queue wait so far (schedstat), summed.
pub(super) struct RunqWaits {
    pub(super) all: u64,
    /// The part spent holding host tokens (0 without tokens); `None` when a worker could not
    /// read its own wait.
    pub(super) holding: Option<u64>,
}

/// How long after a failed reading the workers' schedstat files are opened again.
const SCHEDSTAT_RETRY: Duration = Duration::from_secs(1);

/// The workers' run-queue waits, or `None` when a worker has not started yet or its schedstat
/// cannot be opened or read (no `CONFIG_SCHED_INFO`, say): the files are then closed and
/// opened again after `SCHEDSTAT_RETRY`, and a stretch of failures is counted once in
/// `Metrics::degradations` (the first in the process also logged).
pub(super) fn read_runq_waits(entry: &mut Entry, pool: &Shared) -> Option<RunqWaits> {
    if entry.schedstat.is_none() {
        if entry.schedstat_retry_at.is_some_and(|at| Instant::now() < at) {
            return None;
        }
        entry.schedstat = Some(Vec::new());
    }
    if entry.schedstat.as_ref().is_some_and(Vec::is_empty) {
        // Open every worker's file or none: a partial list would under-count.
        let mut files = Vec::with_capacity(pool.workers.len());
        for worker in pool.workers.iter() {
            let tid = worker.tid.load(std::sync::atomic::Ordering::Acquire);
            if tid == 0 {
                return None; // not started yet: try next period
            }
            let path = PathBuf::from(format!("/proc/self/task/{tid}/schedstat"));
            match File::open(&path) {
                Ok(file) => files.push((path, file)),
                Err(error) => {
                    schedstat_failed(entry, pool, &format!("cannot open {}: {error}", path.display()));
                    return None;
                }
            }
        }
        entry.schedstat = Some(files);
    }
    let files = entry.schedstat.as_ref()?;
    debug_assert_eq!(files.len(), pool.workers.len(), "one schedstat file per worker, in order");
    entry.token_wait_seen.resize(pool.workers.len(), 0);
    let mut waits = RunqWaits { all: 0, holding: Some(0) };
    let mut failure = None;
    for (((path, file), worker), seen) in
        files.iter().zip(pool.workers.iter()).zip(&mut entry.token_wait_seen)
    {
        let stat = read_at_zero(file, path, &mut entry.buf).map_err(|e| e.to_string()).and_then(|text| {
            crate::procfs::schedstat::parse_task(text).map_err(|e| format!("{}: {e}", path.display()))
        });
        let stat = match stat {
            Ok(stat) => stat,
            Err(why) => {
                failure = Some(why);
                break;
            }
        };
        waits.all = waits.all.saturating_add(stat.run_delay_ns);
        let holding = worker.token_wait_ns(stat.run_delay_ns).map(|now| {
            *seen = (*seen).max(now);
            *seen
        });
        waits.holding = waits.holding.zip(holding).map(|(sum, one)| sum.saturating_add(one));
    }
    if let Some(why) = failure {
        schedstat_failed(entry, pool, &why);
        return None;
    }
    entry.schedstat_failing = false;
    Some(waits)
}

/// The workers' schedstat files failed (`why`): closed, opened again after `SCHEDSTAT_RETRY`;
/// the first failure of a stretch is counted for the pool and, first in the process, logged.
fn schedstat_failed(entry: &mut Entry, pool: &Shared, why: &str) {
    entry.schedstat = None;
    entry.schedstat_retry_at = Some(Instant::now() + SCHEDSTAT_RETRY);
    if !std::mem::replace(&mut entry.schedstat_failing, true) {
        Degradation::WorkerSchedstat.record(&pool.degradations, &why);
    }
}

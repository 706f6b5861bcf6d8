//! The elastic pool's mechanics (`Builder::elastic`, issue 9 item 3): measuring each task,
//! creating threads and retiring them. What size to have is decided by the pure
//! [`crate::policy::elastic_size`].
//!
//! 1. **Slots.** An elastic pool has `max` worker slots (`Shared::workers`, `Roster`) and a
//!    thread in some of them. The size is the target of `roster.rs`: slots below it may run.
//!    A slot's counters outlive its thread, so the controller's deltas stay exact when threads
//!    come and go.
//! 2. **Measuring.** Every task is counted; one in `SAMPLE_EVERY` (and any after a pause) is
//!    measured: wall time, thread CPU clock and, when the kernel has schedstat, run-queue wait
//!    (`/proc/thread-self/schedstat`, kept open, one `pread`). Sampling, because reading the
//!    thread CPU clock around every task was measured to cost throughput (see
//!    `SAMPLE_EVERY`). Submits count arrivals.
//! 3. **Creating.** The control thread raises the target first, then starts a thread in every
//!    empty slot below it (`spawn_missing`), so a new thread never sees itself above the
//!    target. A slot whose old thread is still leaving is skipped until the next period.
//! 4. **Retiring.** A worker at or above the target exits instead of sleeping (`worker.rs`);
//!    after lowering the target, the controller wakes the sleepers above it so that idle threads
//!    leave too. Slot 0 is below every target (min ≥ 1), so some thread always runs the queue.
//! 5. **Shutdown** unregisters the pool from the controller before closing it, and the
//!    controller spawns only during its tick under the registry lock: no thread is created
//!    after `stop` began, and `stop` waits for every live thread (`Shared::live`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::worker::WorkerStats;
use super::Shared;
use crate::kfile::ThreadSchedstat;
use crate::metrics::Degradation;
use crate::policy::elastic_size::ElasticConfig;
use crate::sampler::clock_ns;
use crate::sync::lock;

/// An elastic pool's settings and counters (in `Shared`).
pub(crate) struct Elastic {
    pub(crate) config: ElasticConfig,
    /// Thread names are `<name>-<slot>`.
    name: String,
    background: bool,
    /// Counter: tasks submitted (accepted into the queue).
    pub(crate) arrivals: AtomicU64,
    /// Counters: threads started (including the first `min`) and retired.
    pub(crate) started: AtomicU64,
    pub(crate) retired: AtomicU64,
    /// The last decision's inputs, for `metrics()`: the CPUs the CPU policy allowed, and the
    /// per-task CPU and blocked time estimates (ns).
    pub(crate) cpus: AtomicU64,
    pub(crate) compute_ns: AtomicU64,
    pub(crate) wait_ns: AtomicU64,
    /// Whether a failure to start a thread has been logged.
    spawn_warned: AtomicBool,
}

impl Elastic {
    pub(crate) fn new(config: ElasticConfig, name: String, background: bool) -> Self {
        Elastic {
            config,
            name,
            background,
            arrivals: AtomicU64::new(0),
            started: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            cpus: AtomicU64::new(0),
            compute_ns: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            spawn_warned: AtomicBool::new(false),
        }
    }
}

/// The per-task counters of one slot, summed over every thread that ran in it: every task
/// counts in `tasks`; the sampled ones (`TaskMeter`) add their times.
#[derive(Default)]
pub(crate) struct TaskCounters {
    pub(crate) tasks: AtomicU64,
    pub(crate) sampled: AtomicU64,
    pub(crate) wall_ns: AtomicU64,
    pub(crate) cpu_ns: AtomicU64,
    pub(crate) runq_ns: AtomicU64,
}

/// Cumulative totals over every slot (the controller takes deltas).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) tasks: u64,
    pub(crate) sampled: u64,
    pub(crate) wall_ns: u64,
    pub(crate) cpu_ns: u64,
    pub(crate) runq_ns: u64,
    pub(crate) arrivals: u64,
}

impl Totals {
    pub(crate) fn read(shared: &Shared, elastic: &Elastic) -> Totals {
        let mut totals = Totals { arrivals: elastic.arrivals.load(Ordering::Relaxed), ..Totals::default() };
        for worker in shared.workers.iter() {
            let c = &worker.tasks;
            // The counts first: a sample counted in them has its times added already (the
            // meter adds the times, then the counts with Release).
            totals.tasks += c.tasks.load(Ordering::Acquire);
            totals.sampled += c.sampled.load(Ordering::Acquire);
            totals.wall_ns += c.wall_ns.load(Ordering::Relaxed);
            totals.cpu_ns += c.cpu_ns.load(Ordering::Relaxed);
            totals.runq_ns += c.runq_ns.load(Ordering::Relaxed);
        }
        totals
    }

    /// CPU time and run-queue wait of every task finished since `before`, estimated from the
    /// ones sampled since then (from the averages `avg_cpu_ns` and `avg_runq_ns` when none
    /// was). Deltas are scaled, not totals: a ratio of totals drifts as the run grows long.
    pub(crate) fn all_tasks_since(&self, before: &Totals, avg_cpu_ns: f64, avg_runq_ns: f64) -> (u64, u64) {
        let tasks = self.tasks.saturating_sub(before.tasks) as f64;
        let sampled = self.sampled.saturating_sub(before.sampled);
        if sampled == 0 {
            return ((tasks * avg_cpu_ns) as u64, (tasks * avg_runq_ns) as u64);
        }
        let scale = tasks / sampled as f64;
        (
            (self.cpu_ns.saturating_sub(before.cpu_ns) as f64 * scale) as u64,
            (self.runq_ns.saturating_sub(before.runq_ns) as f64 * scale) as u64,
        )
    }
}

/// One task in `SAMPLE_EVERY` is measured, and any task that starts `SAMPLE_AFTER` or more
/// after the thread's last sample. Why not every task: reading the thread CPU clock
/// (`CLOCK_THREAD_CPUTIME_ID`) twice per task cost 15 % of the throughput of 21 threads on
/// the 2-CPU VM of RESULTS.md ("sizing"), with the CPUs partly idle; a sampled estimate of the
/// per-task times serves the formula as well.
pub(crate) const SAMPLE_EVERY: u32 = 16;
pub(crate) const SAMPLE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// One worker thread's task meter (step 2).
pub(crate) struct TaskMeter {
    schedstat: ThreadSchedstat,
    count: u32,
    last_sample: Option<Instant>,
}

/// The readings at the start of a sampled task (`runq_ns`: `None` when schedstat could not
/// be read).
pub(crate) struct Mark {
    at: Instant,
    cpu_ns: u64,
    runq_ns: Option<u64>,
}

impl TaskMeter {
    /// The calling thread's meter, reading its schedstat (unreadable, as when the kernel lacks
    /// `CONFIG_SCHED_INFO`: a sample's run-queue wait then counts as blocked time, and the CPU
    /// policy alone limits the pool; the failure is counted in `Metrics::degradations`, logged
    /// once, and the file tried again a second later).
    pub(crate) fn for_current_thread() -> Self {
        TaskMeter { schedstat: ThreadSchedstat::for_current_thread(), count: 0, last_sample: None }
    }

    /// Starts a task: a `Mark` if this one is sampled.
    pub(crate) fn start(&mut self) -> Option<Mark> {
        self.count = self.count.wrapping_add(1);
        let at = Instant::now();
        let due = self.count % SAMPLE_EVERY == 1
            || self.last_sample.is_none_or(|last| at.duration_since(last) >= SAMPLE_AFTER);
        if !due {
            return None;
        }
        self.last_sample = Some(at);
        Some(Mark { at, cpu_ns: thread_cpu_ns(), runq_ns: self.schedstat.run_delay_ns() })
    }

    /// Ends a task: counts it, and adds its times if it was sampled.
    pub(crate) fn finish(&mut self, mark: Option<Mark>, stats: &WorkerStats) {
        let c = &stats.tasks;
        if let Some(mark) = mark {
            // Both readings or none: a file readable again at the end of the task (after a
            // failure at its start) would otherwise count the thread's whole wait so far.
            let runq_ns = match (mark.runq_ns, self.schedstat.run_delay_ns()) {
                (Some(start), Some(end)) => end.saturating_sub(start),
                _ => 0,
            };
            let cpu_ns = thread_cpu_ns().saturating_sub(mark.cpu_ns);
            let wall_ns = u64::try_from(mark.at.elapsed().as_nanos()).unwrap_or(u64::MAX);
            c.wall_ns.fetch_add(wall_ns, Ordering::Relaxed);
            c.cpu_ns.fetch_add(cpu_ns, Ordering::Relaxed);
            c.runq_ns.fetch_add(runq_ns, Ordering::Relaxed);
            c.sampled.fetch_add(1, Ordering::Release);
            // After the sample's readings: the first failure's log line is not part of them.
            if let Some(why) = self.schedstat.take_failure() {
                Degradation::OwnSchedstat.record(&stats.degradations, &why);
            }
        }
        c.tasks.fetch_add(1, Ordering::Release);
    }
}

fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// Step 3: starts a thread in every empty slot below `size`. Returns how many started.
/// Called by the control thread after raising the target (`build` starts the first `min`
/// itself, keeping their join handles).
pub(crate) fn spawn_missing(shared: &Arc<Shared>, size: usize) -> Result<usize, std::io::Error> {
    let Some(elastic) = shared.elastic.as_ref() else { return Ok(0) };
    let mut started = 0;
    for index in 0..size.min(shared.workers.len()) {
        let slot = &shared.workers[index];
        if slot.occupied.swap(true, Ordering::AcqRel) {
            continue; // a thread runs there, or is still leaving
        }
        *lock(&shared.live) += 1;
        let worker_shared = shared.clone();
        let request = super::placement::Request { cpu: None, background: elastic.background };
        let spawned =
            super::worker::spawn_thread(format!("{}-{index}", elastic.name), shared.stack_size, move || {
                let _span = super::worker::pool_span(&worker_shared.name).entered();
                if request.background {
                    let _ = super::placement::apply(index, &request); // logs a refusal itself
                }
                super::worker::run(worker_shared, index)
            });
        match spawned {
            Ok(_) => {
                elastic.started.fetch_add(1, Ordering::Relaxed);
                started += 1;
            }
            Err(error) => {
                slot.occupied.store(false, Ordering::Release);
                shared.worker_exited();
                if !elastic.spawn_warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        pool = %shared.name,
                        %error,
                        "cotenant: an elastic pool cannot start a thread; it runs with fewer"
                    );
                }
                return Err(error);
            }
        }
    }
    Ok(started)
}

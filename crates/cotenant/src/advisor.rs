//! The advisor: the pool's controller for a runtime cotenant does not own. A foreign runtime
//! (Go's scheduler, a JVM, a C++ executor, through the C ABI of `crates/cotenant-ffi`) polls an
//! [`Advisor`] for how many of its threads should be active, and applies the answer itself
//! (`runtime.GOMAXPROCS`, parking executor threads, ...).
//!
//! The decision is the pool's: the same [`HostSampler`] readings, the same [`Sample`] fields,
//! the same pure [`Policy::decide`]. This module only wires I/O to it:
//!
//! 1. [`Advisor::new`] opens the host counters and takes the first reading (the baseline).
//! 2. [`Advisor::poll`] does nothing but return the last target unless a period has passed
//!    since the last reading. Otherwise it takes a reading, turns the two readings into a
//!    [`Sample`] (`sample_between`, pure and unit-tested on recorded numbers), asks the policy,
//!    and returns the new target.
//! 3. When a reading fails it falls back as the pool's controller does
//!    ([`fallback_target`]: every thread the quota pays for), counts the error, logs the first
//!    one through `tracing`, and starts again from a fresh baseline.
//!
//! **What stands in for the workers' signals.** The pool knows which threads are its workers;
//! an advisor does not. So the process's *own threads*, all of them, are the workers: their
//! CPU time and run-queue wait come from `/proc/self/task/*/schedstat` (per thread, summed over
//! threads alive at both readings, plus threads born in between), and their busy time is CPU
//! time plus run-queue wait (time they wanted a CPU). Threads of the runtime that are not
//! workers (a garbage collector, I/O threads) count too: when they wait for a CPU, the advice
//! is to run fewer workers, which is what a host that is short of CPUs needs anyway. On a
//! kernel without scheduler statistics (`0 0 0` everywhere) the process's CPU clock gives the
//! CPU time and nothing counts as waiting, so the advisor only follows idle CPUs and quotas.
//! The queue length is what the caller passes to [`Advisor::poll`]; `None` counts as an empty
//! queue, so growth then needs the threads to have been busy (`saturated_fraction` of the
//! target) through the period.
//!
//! **Systems other than Linux.** There are no host counters to read there (the sampler reads
//! `/proc`), so every poll takes step 3: the advice is every thread, and each reading that
//! could not be taken counts in [`Advisor::sample_errors`] ([`Advisor::last_error`] says why).
//! A runtime that follows the advice then runs as if it had no advisor.

use std::fmt;
use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::policy::{fallback_target, Decision, Policy, PolicyState, Sample};
use crate::pool::{MAX_PERIOD, MIN_PERIOD};
use crate::procfs::schedstat::{self, TaskSchedstat};
use crate::sampler::{read_at_zero, HostCounters, HostDelta, HostSampler, SampleError};

// The pool's controller's retry rules, shared so the two cannot drift.
use crate::pool::control::{SAMPLER_REBUILD_AFTER, SAMPLER_RETRY};
/// Where the process's threads are listed.
const TASK_DIR: &str = "/proc/self/task";

/// Why an [`Advisor`] could not be built: the text names the argument and its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvisorError(String);

impl fmt::Display for AdvisorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid advisor configuration: {}", self.0)
    }
}

impl std::error::Error for AdvisorError {}

/// Recommends how many of a foreign runtime's threads should run, re-deciding at most once per
/// period, when polled.
///
/// Poll it about once per period (more often costs nothing: between periods a poll only reads
/// the clock); a runtime that polls less often gets decisions over longer stretches, which the
/// policy handles, but follows its neighbours more slowly. One reading costs a few `pread`s plus
/// one per thread of the process.
///
/// ```
/// use std::time::Duration;
/// use cotenant::advisor::Advisor;
///
/// let mut advisor = Advisor::new(4, cotenant::Policy::adaptive(), Duration::from_millis(10)).unwrap();
/// std::thread::sleep(Duration::from_millis(10));
/// let active = advisor.poll(Some(0)); // e.g. runtime.GOMAXPROCS(active)
/// assert!((1..=4).contains(&active));
/// assert_eq!(advisor.target(), active);
///
/// let err = Advisor::new(4, cotenant::Policy::adaptive(), Duration::ZERO).unwrap_err();
/// assert!(err.to_string().contains("period"));
/// ```
pub struct Advisor {
    policy: Policy,
    state: PolicyState,
    threads: u32,
    period: Duration,
    sampler: Option<HostSampler>,
    /// The error of the last attempt to build the sampler, and when: retried after
    /// [`SAMPLER_RETRY`].
    sampler_error: Option<(SampleError, Instant)>,
    failed_reads: u32,
    tasks: TaskStats,
    /// The last good reading: the baseline of the next sample.
    last: Option<Reading>,
    /// When the last reading was attempted.
    last_at: Option<Instant>,
    /// The cap of the last good sample: what the fallback keeps to.
    last_cap: Option<u32>,
    last_decision: Option<Decision>,
    last_error: Option<SampleError>,
    decisions: u64,
    sample_errors: u64,
}

impl fmt::Debug for Advisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Advisor")
            .field("policy", &self.policy)
            .field("threads", &self.threads)
            .field("period", &self.period)
            .field("target", &self.state.target)
            .field("decisions", &self.decisions)
            .field("sample_errors", &self.sample_errors)
            .finish()
    }
}

impl Advisor {
    /// An advisor for a runtime with `threads` threads (at least 1; the most it will ever
    /// recommend), deciding with `policy` every `period` (between [`MIN_PERIOD`] and
    /// [`MAX_PERIOD`]; the pool's default is [`crate::pool::default_period`]). The first
    /// recommendation is every thread, as for a new pool; failing to open the host counters
    /// is not an error (the advisor falls back and retries).
    pub fn new(threads: u32, policy: Policy, period: Duration) -> Result<Advisor, AdvisorError> {
        if threads == 0 {
            return Err(AdvisorError("threads must be at least 1, got 0".into()));
        }
        policy.validate().map_err(AdvisorError)?;
        if let Some(fixed) = policy.fixed_target() {
            if fixed > threads as usize {
                return Err(AdvisorError(format!(
                    "Policy::fixed({fixed}) asks for more threads than threads ({threads})"
                )));
            }
        }
        if !(MIN_PERIOD..=MAX_PERIOD).contains(&period) {
            return Err(AdvisorError(format!(
                "period must be between {MIN_PERIOD:?} and {MAX_PERIOD:?}, got {period:?}"
            )));
        }
        let initial = policy.fixed_target().map_or(threads, |n| n as u32);
        let mut advisor = Advisor {
            policy,
            state: PolicyState::new(initial),
            threads,
            period,
            sampler: None,
            sampler_error: None,
            failed_reads: 0,
            tasks: TaskStats::default(),
            last: None,
            last_at: None,
            last_cap: None,
            last_decision: None,
            last_error: None,
            decisions: 0,
            sample_errors: 0,
        };
        if advisor.policy.fixed_target().is_none() {
            // Step 1: the baseline. A failure here only means the first poll retries.
            advisor.last_at = Some(Instant::now());
            advisor.last = advisor.read().ok();
        }
        Ok(advisor)
    }

    /// The recommended number of active threads, in `1..=threads`. Re-decided when at least a
    /// period has passed since the last reading; otherwise the last recommendation. `queued`
    /// is the runtime's queue of runnable work now (Go: the run queues' length), `None` when
    /// unknown.
    pub fn poll(&mut self, queued: Option<u32>) -> u32 {
        if self.policy.fixed_target().is_some() {
            return self.state.target;
        }
        let now = Instant::now();
        if self.last_at.is_some_and(|at| now.saturating_duration_since(at) < self.period) {
            return self.state.target;
        }
        self.last_at = Some(now);
        match self.read() {
            Ok(reading) => {
                self.last_error = None;
                let before = self.last.replace(reading);
                let now = self.last.as_ref().expect("just stored");
                if let Some(sample) =
                    before.and_then(|before| sample_between(self.threads, &before, now, queued))
                {
                    self.last_cap = Some(sample.cap());
                    let decision = self.policy.decide(&sample, &mut self.state);
                    self.decisions += 1;
                    self.last_decision = Some(decision);
                }
            }
            Err(error) => {
                // Step 3, as the pool's controller does it.
                if self.sample_errors == 0 {
                    tracing::warn!("cotenant: advisor sampling failed ({error}); advising every thread");
                }
                self.sample_errors += 1;
                let target = fallback_target(self.threads, self.last_cap);
                self.state = PolicyState::new(target);
                self.last = None;
                self.last_error = Some(error);
            }
        }
        self.state.target
    }

    /// The last recommendation, without polling.
    pub fn target(&self) -> u32 {
        self.state.target
    }

    /// The most threads it recommends.
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// The policy deciding.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The shortest time between two readings.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The last decision and why it was made (`None` before the first one).
    pub fn last_decision(&self) -> Option<Decision> {
        self.last_decision
    }

    /// Decisions made so far.
    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    /// Readings that failed so far (each fell back to [`fallback_target`]).
    pub fn sample_errors(&self) -> u64 {
        self.sample_errors
    }

    /// Why the last reading failed, if it did.
    pub fn last_error(&self) -> Option<&SampleError> {
        self.last_error.as_ref()
    }

    /// Takes a reading, building (or rebuilding) the sampler as the pool's controller does.
    fn read(&mut self) -> Result<Reading, SampleError> {
        let now = Instant::now();
        if self.sampler.is_none() {
            if let Some((error, at)) = &self.sampler_error {
                if now.saturating_duration_since(*at) < SAMPLER_RETRY {
                    return Err(error.clone());
                }
            }
            match HostSampler::system() {
                Ok(sampler) => (self.sampler, self.sampler_error) = (Some(sampler), None),
                Err(error) => {
                    self.sampler_error = Some((error.clone(), now));
                    return Err(error);
                }
            }
        }
        let sampler = self.sampler.as_mut().expect("built above");
        match sampler.read() {
            Ok(host) => {
                self.failed_reads = 0;
                Ok(Reading { host, tasks: self.tasks.read() })
            }
            Err(error) => {
                self.failed_reads = self.failed_reads.saturating_add(1);
                if self.failed_reads >= SAMPLER_REBUILD_AFTER {
                    (self.sampler, self.failed_reads) = (None, 0);
                }
                Err(error)
            }
        }
    }
}

/// One reading: the host counters and, when the kernel keeps them, every thread's schedstat
/// (sorted by thread id).
#[derive(Debug, Clone)]
struct Reading {
    host: HostCounters,
    tasks: Option<Vec<(u32, TaskSchedstat)>>,
}

/// The policy sample of the stretch between two readings (pure). `None` when the readings are
/// not comparable (the allowed CPUs changed, or no time passed).
fn sample_between(threads: u32, before: &Reading, now: &Reading, queued: Option<u32>) -> Option<Sample> {
    let delta = HostDelta::between(&before.host, &now.host)?;
    let (cpu_ns, runq_wait_ns) = match (&before.tasks, &now.tasks) {
        (Some(before), Some(now)) => {
            let (cpu, wait) = tasks_delta(before, now);
            (cpu, Some(wait))
        }
        // No scheduler statistics: the process clock, and nothing counts as waiting.
        _ => (delta.self_ns, None),
    };
    Some(delta.sample(
        threads,
        cpu_ns.saturating_add(runq_wait_ns.unwrap_or(0)),
        Some(cpu_ns),
        runq_wait_ns,
        queued.unwrap_or(0),
    ))
}

/// CPU time and run-queue wait of the threads in `now`, since `before` (pure; both sorted by
/// thread id). A thread absent from `before` was born in between and counts whole; a thread
/// absent from `now` has exited and its last stretch is lost (it is in the process clock).
fn tasks_delta(before: &[(u32, TaskSchedstat)], now: &[(u32, TaskSchedstat)]) -> (u64, u64) {
    now.iter().fold((0u64, 0u64), |(cpu, wait), (tid, stat)| {
        let old = before
            .binary_search_by_key(tid, |(tid, _)| *tid)
            .map_or(TaskSchedstat::default(), |index| before[index].1);
        (
            cpu.saturating_add(stat.on_cpu_ns.saturating_sub(old.on_cpu_ns)),
            wait.saturating_add(stat.run_delay_ns.saturating_sub(old.run_delay_ns)),
        )
    })
}

/// The process's threads' schedstat files, kept open across readings (threads come and go).
#[derive(Default)]
struct TaskStats {
    /// Open files by thread id, sorted.
    files: Vec<(u32, PathBuf, File)>,
    /// Set once the kernel is seen to keep no scheduler statistics.
    unavailable: bool,
    buf: Vec<u8>,
}

impl TaskStats {
    /// Every live thread's statistics, sorted by thread id; `None` when the kernel keeps none
    /// or `/proc/self/task` cannot be listed.
    fn read(&mut self) -> Option<Vec<(u32, TaskSchedstat)>> {
        if self.unavailable {
            return None;
        }
        let mut tids: Vec<u32> = std::fs::read_dir(TASK_DIR)
            .ok()?
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort_unstable();
        let mut old = std::mem::take(&mut self.files).into_iter().peekable();
        for tid in tids {
            while old.next_if(|(old_tid, _, _)| *old_tid < tid).is_some() {} // exited: close
            match old.next_if(|(old_tid, _, _)| *old_tid == tid) {
                Some(open) => self.files.push(open),
                None => {
                    let path = PathBuf::from(format!("{TASK_DIR}/{tid}/schedstat"));
                    // A thread that exited since the listing has no file: skip it.
                    if let Ok(file) = File::open(&path) {
                        self.files.push((tid, path, file));
                    }
                }
            }
        }
        let mut stats = Vec::with_capacity(self.files.len());
        let buf = &mut self.buf;
        self.files.retain(|(tid, path, file)| {
            // A read fails (ESRCH) once the thread has exited: forget it.
            let Ok(text) = read_at_zero(file, path, buf) else { return false };
            match schedstat::parse_task(text) {
                Ok(stat) => {
                    stats.push((*tid, stat));
                    true
                }
                Err(_) => false,
            }
        });
        // A kernel without scheduler statistics prints `0 0 0` for every thread; one that keeps
        // them counts at least the calling thread's first timeslice (its CPU time may still
        // read 0 early in a process's life, so that alone proves nothing).
        if stats.iter().all(|(_, stat)| *stat == TaskSchedstat::default()) {
            self.unavailable = !stats.is_empty();
            return None;
        }
        Some(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::cpulist;

    const MS: u64 = 1_000_000;

    /// A reading `ms` after `t0`, with the host's busy and idle nanoseconds, the process clock,
    /// and per-thread `(tid, on_cpu_ns, run_delay_ns)`.
    fn reading(
        t0: Instant,
        ms: u64,
        busy: u64,
        idle: u64,
        self_ns: u64,
        tasks: Option<&[(u32, u64, u64)]>,
    ) -> Reading {
        Reading {
            host: HostCounters {
                at: t0 + Duration::from_millis(ms),
                self_ns,
                busy_ns: busy,
                idle_ns: Some(idle),
                procs_running: Some(4),
                throttled_ns: 0,
                allowed: cpulist::parse("0-1").unwrap(),
                quota_cpus: None,
                online_cpus: 2,
            },
            tasks: tasks.map(|tasks| {
                tasks
                    .iter()
                    .map(|&(tid, on_cpu_ns, run_delay_ns)| {
                        (tid, TaskSchedstat { on_cpu_ns, run_delay_ns, timeslices: 0 })
                    })
                    .collect()
            }),
        }
    }

    #[test]
    fn the_process_threads_stand_in_for_the_workers() {
        let t0 = Instant::now();
        // Thread 10 ran 6 ms and waited 3 ms; 11 exited (its stretch is lost); 12 was born and
        // ran 2 ms, waited 1 ms.
        let before =
            reading(t0, 0, 100 * MS, 50 * MS, 40 * MS, Some(&[(10, 20 * MS, 5 * MS), (11, 7 * MS, 0)]));
        let now =
            reading(t0, 10, 118 * MS, 52 * MS, 49 * MS, Some(&[(10, 26 * MS, 8 * MS), (12, 2 * MS, MS)]));
        let sample = sample_between(4, &before, &now, Some(3)).unwrap();
        assert_eq!(
            sample,
            Sample {
                elapsed_ns: 10 * MS,
                threads: 4,
                cpus: 2,
                quota_cpus: None,
                self_ns: 9 * MS,
                busy_ns: 18 * MS,
                idle_ns: 2 * MS,
                procs_running: Some(4),
                throttled_ns: 0,
                workers_busy_ns: 12 * MS,
                workers_cpu_ns: Some(8 * MS),
                workers_runq_wait_ns: Some(4 * MS),
                queued: 3,
            }
        );
        assert!((sample.waiting_workers() - 0.4).abs() < 1e-9);
        assert!((sample.busy_workers() - 1.2).abs() < 1e-9);
    }

    #[test]
    fn without_scheduler_statistics_the_process_clock_counts_and_nobody_waits() {
        let t0 = Instant::now();
        let before = reading(t0, 0, 0, 0, 0, None);
        let now = reading(t0, 10, 20 * MS, 0, 15 * MS, None);
        let sample = sample_between(2, &before, &now, None).unwrap();
        assert_eq!(
            (sample.workers_cpu_ns, sample.workers_runq_wait_ns, sample.workers_busy_ns, sample.queued),
            (Some(15 * MS), None, 15 * MS, 0)
        );
        assert_eq!(sample.waiting_workers(), 0.0);
        // One side without statistics is as good as none.
        let now = reading(t0, 10, 20 * MS, 0, 15 * MS, Some(&[(1, 5 * MS, 5 * MS)]));
        assert_eq!(sample_between(2, &before, &now, None).unwrap().workers_runq_wait_ns, None);
    }

    #[test]
    fn incomparable_readings_give_no_sample() {
        let t0 = Instant::now();
        let before = reading(t0, 0, 0, 0, 0, None);
        assert_eq!(sample_between(2, &before, &before, None), None, "no time passed");
        let mut moved = reading(t0, 10, 1, 1, 1, None);
        moved.host.allowed = cpulist::parse("0").unwrap();
        assert_eq!(sample_between(2, &before, &moved, None), None, "the allowed CPUs changed");
    }

    #[test]
    fn a_recycled_thread_id_never_counts_negative_time() {
        let before = [(7, TaskSchedstat { on_cpu_ns: 9 * MS, run_delay_ns: 9 * MS, timeslices: 1 })];
        let now = [(7, TaskSchedstat { on_cpu_ns: MS, run_delay_ns: 0, timeslices: 1 })];
        assert_eq!(tasks_delta(&before, &now), (0, 0));
    }

    #[test]
    fn recorded_contention_makes_the_adaptive_policy_shrink() {
        // Two readings 10 ms apart on 2 CPUs: our 4 threads ran 1 CPU's worth and waited
        // 1.5 threads' worth; neighbours used the other CPU; nothing idle.
        let t0 = Instant::now();
        let before = reading(t0, 0, 0, 0, 0, Some(&[(1, 0, 0), (2, 0, 0)]));
        let now = reading(t0, 10, 20 * MS, 0, 10 * MS, Some(&[(1, 5 * MS, 8 * MS), (2, 5 * MS, 7 * MS)]));
        let sample = sample_between(4, &before, &now, None).unwrap();
        let mut state = PolicyState::new(4);
        let decision = Policy::adaptive().decide(&sample, &mut state);
        assert!(decision.target < 4, "{decision:?} from {sample:?}");
    }

    #[test]
    fn bad_arguments_are_refused_naming_them() {
        let period = Duration::from_millis(10);
        for (threads, policy, period, what) in [
            (0, Policy::adaptive(), period, "threads"),
            (2, Policy::share(0.0), period, "overcommit"),
            (2, Policy::fixed(3), period, "Policy::fixed(3)"),
            (2, Policy::adaptive(), Duration::from_micros(10), "period"),
            (2, Policy::adaptive(), Duration::from_secs(11), "period"),
        ] {
            let err = Advisor::new(threads, policy, period).unwrap_err();
            assert!(err.to_string().contains(what), "{err}");
        }
    }

    #[test]
    fn a_fixed_policy_reads_nothing() {
        let mut advisor = Advisor::new(4, Policy::fixed(2), Duration::from_millis(1)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!((advisor.poll(None), advisor.decisions(), advisor.sample_errors()), (2, 0, 0));
    }

    #[cfg(target_os = "linux")] // `gettid`, and threads listed in /proc
    #[test]
    fn the_threads_of_this_process_are_read_sorted() {
        // A kernel without scheduler statistics has no file, or prints `0 0 0` even for the
        // running thread (which has run at least one timeslice): then there is nothing to read.
        let own = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        if own.split_whitespace().all(|field| field == "0") {
            eprintln!(
                "skipped: this kernel keeps no scheduler statistics (/proc/thread-self/schedstat: {own:?})"
            );
            return;
        }
        let mut tasks = TaskStats::default();
        let first = tasks.read().expect("the kernel keeps scheduler statistics: they must be read");
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() } as u32;
        assert!(first.iter().any(|(tid, _)| *tid == me), "{first:?}");
        assert!(first.windows(2).all(|pair| pair[0].0 < pair[1].0), "{first:?}");
        let second = tasks.read().unwrap();
        assert_eq!(second.len(), tasks.files.len(), "one open file per thread read");
    }

    #[test]
    fn polling_the_real_host_stays_in_range() {
        // Values depend on the host; only the range and the bookkeeping are asserted.
        let mut advisor = Advisor::new(3, Policy::adaptive(), Duration::from_millis(2)).unwrap();
        assert_eq!(advisor.target(), 3, "starts with every thread");
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(3));
            let n = advisor.poll(None);
            assert!((1..=3).contains(&n), "{n}");
        }
        // Each poll read (a reading after a failed one only sets a new baseline).
        assert!((1..=5).contains(&(advisor.decisions() + advisor.sample_errors())), "{advisor:?}");
        // Within the period, a poll repeats the last answer without reading.
        let mut slow = Advisor::new(3, Policy::adaptive(), MAX_PERIOD).unwrap();
        assert_eq!((slow.poll(Some(10)), slow.decisions(), slow.sample_errors()), (3, 0, 0));
    }
}

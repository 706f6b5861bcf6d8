//! Host-wide CPU counters, read once per period for every pool of the process: this process's
//! CPU time, the busy and idle time of the CPUs it may run on, runnable tasks, the quota and
//! its throttling. Cumulative [`HostCounters`] snapshots; the controller subtracts two of them.
//!
//! Sources, most precise first (the friendlypool paper's controller read `/proc/stat` in 10 ms
//! ticks over all CPUs; we read nanoseconds, and only the CPUs we may use):
//! - this process: `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)` (ns);
//! - busy time of the allowed CPUs: cgroup v1 `cpuacct.usage_percpu` of the *root* cgroup (ns,
//!   every task on the host), else `/proc/stat`'s per-CPU lines (clock ticks);
//! - idle time: `/proc/stat` when it is the busy source, else the period minus busy time;
//! - `procs_running`: `/proc/loadavg` (generating `/proc/stat` is much dearer, so it is read
//!   only when it is the busy source);
//! - quota: [`Limit::refresh`](crate::cpus::Limit::refresh); throttling: the leaf cgroup's
//!   `cpu.stat`.
//!
//! Every file is opened once and re-read with `pread` at offset 0 (`sampler/linux.rs`).
//!
//! Outside Linux (`crate::sys`'s fallback, `sampler/fallback.rs`) none of these files exists:
//! [`HostSampler::system`] fails, saying so, and the callers fall back as they do whenever
//! sampling fails (a dynamic pool keeps every worker, an advisor advises every thread). The
//! counters, their difference and the CPU clocks below are the same everywhere; the clocks read
//! `None` on a system without POSIX CPU clocks.

use std::fmt;
use std::fs::File;
use std::ops::Deref;
use std::path::Path;
use std::time::Instant;

use crate::policy::Sample;
use crate::procfs::cpulist::CpuSet;

#[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
mod fallback;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
mod linux;

#[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
pub use fallback::HostSampler;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
pub use linux::HostSampler;

/// A reading of the host counters; times are cumulative nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCounters {
    /// When it was taken.
    pub at: Instant,
    /// CPU time of this process.
    pub self_ns: u64,
    /// Busy time summed over the allowed CPUs.
    pub busy_ns: u64,
    /// Idle time summed over the allowed CPUs, when the source reports it.
    pub idle_ns: Option<u64>,
    /// Runnable tasks on the host now.
    pub procs_running: Option<u32>,
    /// Time the process's cgroup was throttled.
    pub throttled_ns: u64,
    /// The allowed CPUs these sums are over.
    pub allowed: CpuSet,
    /// The quota's CPU limit when a quota binds, else `None`.
    pub quota_cpus: Option<f64>,
    /// The host's online CPUs (0 when unknown): `procs_running` counts tasks on all of them.
    pub online_cpus: u32,
}

/// Why a reading failed: the file (or call) and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleError(pub(crate) String);

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SampleError {}

/// The part of a policy sample that is the same for every pool: the difference of two
/// readings. `None` when the allowed CPUs changed in between (the sums are not comparable).
///
/// The host fields are a [`Sample`]'s, read through `Deref` (`delta.busy_ns`): `elapsed_ns`
/// between the readings; `cpus` allowed and `quota_cpus` at the second reading; this process's
/// `self_ns`; `busy_ns` and `idle_ns` of the allowed CPUs; `procs_running` at the second
/// reading; `throttled_ns`. [`HostDelta::sample`] adds the pool's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct HostDelta {
    /// The host fields; the pool's (`threads`, `workers_*`, `queued`) stay zero or `None`.
    host: Sample,
    /// The host's online CPUs at the second reading (0 when unknown).
    pub online_cpus: u32,
}

impl Deref for HostDelta {
    type Target = Sample;

    fn deref(&self) -> &Sample {
        &self.host
    }
}

impl HostDelta {
    /// `now - before`, or `None` if the allowed CPUs changed or time did not advance.
    pub fn between(before: &HostCounters, now: &HostCounters) -> Option<HostDelta> {
        if before.allowed != now.allowed {
            return None;
        }
        let elapsed_ns = u64::try_from(now.at.checked_duration_since(before.at)?.as_nanos()).ok()?;
        if elapsed_ns == 0 {
            return None;
        }
        let cpus = now.allowed.count();
        let busy_ns = now.busy_ns.saturating_sub(before.busy_ns);
        let capacity = elapsed_ns.saturating_mul(u64::from(cpus));
        let idle_ns = match (before.idle_ns, now.idle_ns) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => capacity.saturating_sub(busy_ns),
        };
        let host = Sample {
            elapsed_ns,
            cpus,
            quota_cpus: now.quota_cpus,
            // CPU time of a process on several CPUs can exceed the busy time of the CPUs we
            // sum over only through rounding; clamp so neighbours are never negative.
            self_ns: now.self_ns.saturating_sub(before.self_ns),
            busy_ns,
            idle_ns,
            procs_running: now.procs_running,
            throttled_ns: now.throttled_ns.saturating_sub(before.throttled_ns),
            ..Sample::default()
        };
        Some(HostDelta { host, online_cpus: now.online_cpus })
    }

    /// The policy sample of a period: these host numbers plus the workers' own counters over
    /// the same period (busy wall time, CPU time and run-queue wait, when known) and the queue
    /// length at its end. The one place a `Sample` is assembled from readings (the pool's
    /// controller and the advisor both call it).
    pub fn sample(
        &self,
        threads: u32,
        workers_busy_ns: u64,
        workers_cpu_ns: Option<u64>,
        workers_runq_wait_ns: Option<u64>,
        queued: u32,
    ) -> Sample {
        Sample { threads, workers_busy_ns, workers_cpu_ns, workers_runq_wait_ns, queued, ..self.host.clone() }
    }
}

/// This process's CPU time in nanoseconds.
pub fn process_cpu_ns() -> Result<u64, SampleError> {
    clock_ns(crate::sys::PROCESS_CPU_CLOCK)
        .ok_or_else(|| SampleError("clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed".into()))
}

/// Reads clock `clock` in nanoseconds (`None` if the call fails, e.g. a thread clock of a
/// thread that has exited, or on a system without POSIX CPU clocks).
pub fn clock_ns(clock: crate::sys::ClockId) -> Option<u64> {
    crate::sys::clock_ns(clock)
}

/// Reads the whole file from offset 0 into `buf` (`kfile::read_at_zero`), as text.
pub(crate) fn read_at_zero<'a>(
    file: &File,
    path: &Path,
    buf: &'a mut Vec<u8>,
) -> Result<&'a str, SampleError> {
    crate::kfile::read_at_zero(file, buf)
        .map_err(|e| SampleError(format!("cannot read {}: {e}", path.display())))?;
    std::str::from_utf8(buf).map_err(|_| SampleError(format!("{}: not UTF-8 text", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn counters(at: Instant, busy: u64, idle: Option<u64>, allowed: &str) -> HostCounters {
        HostCounters {
            at,
            self_ns: 5,
            busy_ns: busy,
            idle_ns: idle,
            procs_running: Some(3),
            throttled_ns: 0,
            allowed: crate::procfs::cpulist::parse(allowed).unwrap(),
            quota_cpus: None,
            online_cpus: 2,
        }
    }

    #[test]
    fn idle_is_the_rest_of_the_capacity_when_the_source_has_none() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(10);
        let d = HostDelta::between(&counters(t0, 0, None, "0-1"), &counters(t1, 15_000_000, None, "0-1"))
            .unwrap();
        assert_eq!((d.elapsed_ns, d.cpus, d.busy_ns, d.idle_ns), (10_000_000, 2, 15_000_000, 5_000_000));
    }

    #[test]
    fn a_changed_cpu_set_makes_the_readings_incomparable() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(10);
        assert_eq!(
            HostDelta::between(&counters(t0, 0, Some(0), "0-1"), &counters(t1, 1, Some(1), "0")),
            None
        );
    }
}

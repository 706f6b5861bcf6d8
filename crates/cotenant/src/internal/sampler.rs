//! Host-wide CPU counters, read once per period for every pool of the process: this process's
//! CPU time, the busy and idle time of the CPUs it may run on, runnable tasks, the quota and
//! its throttling. Cumulative [`HostCounters`] snapshots; the controller subtracts two of them.
//!
//! Sources, most precise first (seed 000 §5.2 read `/proc/stat` in 10 ms ticks over all CPUs;
//! we read nanoseconds, and only the CPUs we may use):
//! - this process: `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)` (ns);
//! - busy time of the allowed CPUs: cgroup v1 `cpuacct.usage_percpu` of the *root* cgroup (ns,
//!   every task on the host), else `/proc/stat`'s per-CPU lines (clock ticks);
//! - idle time: `/proc/stat` when it is the busy source, else the period minus busy time;
//! - `procs_running`: `/proc/loadavg` (generating `/proc/stat` is much dearer, so it is read
//!   only when it is the busy source);
//! - quota: [`Limit::refresh`]; throttling: the leaf cgroup's `cpu.stat`.
//!
//! Every file is opened once and re-read with `pread` at offset 0.

use std::fmt;
use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::cpus::{self, Constraint, Limit, Origin, Source};
use crate::policy::Sample;
use crate::procfs::{cgroupfs, cpulist::CpuSet, loadavg, mountinfo, stat};

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

enum BusySource {
    /// Root `cpuacct.usage_percpu`, nanoseconds per CPU.
    Cpuacct(PathBuf, File),
    /// `/proc/stat` per-CPU lines.
    ProcStat(PathBuf, File),
}

/// Reads [`HostCounters`] for the calling process.
pub struct HostSampler {
    budget: Limit,
    busy: BusySource,
    loadavg: (PathBuf, File),
    cpu_stat: Option<(PathBuf, File)>,
    tick_ns: u64,
    buf: Vec<u8>,
}

impl fmt::Debug for HostSampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostSampler")
            .field("busy_source", &self.busy_source())
            .field("cpu_stat", &self.cpu_stat.as_ref().map(|(p, _)| p))
            .finish()
    }
}

impl HostSampler {
    /// Resolves and opens the files of the running system.
    pub fn system() -> Result<Self, SampleError> {
        let budget = cpus::detect().map_err(|e| SampleError(format!("cannot detect the CPU budget: {e}")))?;
        let loadavg = open(Path::new("/proc/loadavg"))?;
        let busy = match root_cpuacct_usage().and_then(|path| File::open(&path).ok().map(|file| (path, file)))
        {
            Some((path, file)) => BusySource::Cpuacct(path, file),
            None => {
                let (path, file) = open(Path::new("/proc/stat"))?;
                BusySource::ProcStat(path, file)
            }
        };
        let cpu_stat = leaf_cpu_stat(&budget).and_then(|path| open(&path).ok());
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let tick_ns = if ticks > 0 { 1_000_000_000 / ticks as u64 } else { 10_000_000 };
        Ok(HostSampler { budget, busy, loadavg, cpu_stat, tick_ns, buf: Vec::with_capacity(4096) })
    }

    /// Where busy time comes from: the `cpuacct.usage_percpu` path or `/proc/stat`.
    pub fn busy_source(&self) -> String {
        match &self.busy {
            BusySource::Cpuacct(path, _) => path.display().to_string(),
            BusySource::ProcStat(path, _) => path.display().to_string(),
        }
    }

    /// Takes a reading. On error, the reading is lost but the sampler stays usable.
    pub fn read(&mut self) -> Result<HostCounters, SampleError> {
        let at = Instant::now();
        let self_ns = process_cpu_ns()?;
        if let Err(e) = self.budget.refresh() {
            return Err(SampleError(format!("cannot refresh the CPU budget: {e}")));
        }
        let allowed = self.budget.allowed_set();
        let quota_cpus = (self.budget.binding() == Constraint::Quota).then(|| self.budget.limit());
        let online_cpus = self.budget.online().value().map_or(0, CpuSet::count);

        let (path, file) = &self.loadavg;
        let text = read_at_zero(file, path, &mut self.buf)?;
        let running =
            loadavg::parse_running(text).map_err(|e| SampleError(format!("{}: {e}", path.display())))?;
        let procs_running = Some(running.min(u64::from(u32::MAX)) as u32);
        let (busy_ns, idle_ns) = match &self.busy {
            BusySource::ProcStat(path, file) => {
                let text = read_at_zero(file, path, &mut self.buf)?;
                let stat = stat::parse(text).map_err(|e| SampleError(format!("{}: {e}", path.display())))?;
                let (mut busy, mut idle) = (0u64, 0u64);
                for (cpu, times) in &stat.per_cpu {
                    if allowed.contains(*cpu) {
                        busy = busy.saturating_add(times.busy());
                        idle = idle.saturating_add(times.idle_total());
                    }
                }
                (busy.saturating_mul(self.tick_ns), Some(idle.saturating_mul(self.tick_ns)))
            }
            BusySource::Cpuacct(path, file) => {
                let text = read_at_zero(file, path, &mut self.buf)?;
                let per_cpu = cgroupfs::parse_usage_percpu(text)
                    .map_err(|e| SampleError(format!("{}: {e}", path.display())))?;
                let busy = per_cpu
                    .iter()
                    .enumerate()
                    .filter(|(cpu, _)| allowed.contains(*cpu as u32))
                    .fold(0u64, |sum, (_, ns)| sum.saturating_add(*ns));
                (busy, None)
            }
        };
        let throttled_ns = match &self.cpu_stat {
            Some((path, file)) => {
                let text = read_at_zero(file, path, &mut self.buf)?;
                cgroupfs::parse_cpu_stat(text)
                    .map_err(|e| SampleError(format!("{}: {e}", path.display())))?
                    .throttled_ns
            }
            None => 0,
        };
        Ok(HostCounters {
            at,
            self_ns,
            busy_ns,
            idle_ns,
            procs_running,
            throttled_ns,
            allowed,
            quota_cpus,
            online_cpus,
        })
    }
}

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
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
        .ok_or_else(|| SampleError("clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed".into()))
}

/// Reads clock `clock` in nanoseconds (`None` if the call fails, e.g. a thread clock of a
/// thread that has exited).
pub fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some((ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64))
}

fn open(path: &Path) -> Result<(PathBuf, File), SampleError> {
    File::open(path)
        .map(|file| (path.to_path_buf(), file))
        .map_err(|e| SampleError(format!("cannot open {}: {e}", path.display())))
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

/// The root cgroup's `cpuacct.usage_percpu` when a cgroup v1 cpuacct hierarchy is mounted at
/// its root (a container that sees only its own subtree would report only itself).
fn root_cpuacct_usage() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mounts = mountinfo::parse_cgroup_mounts(&text).ok()?;
    mounts
        .iter()
        .filter(|m| !m.is_v2 && m.has_controller("cpuacct") && m.root == "/")
        .map(|m| Path::new(&m.mount_point).join("cpuacct.usage_percpu"))
        .find(|path| path.exists())
}

/// `cpu.stat` next to the leaf cgroup's quota file.
fn leaf_cpu_stat(budget: &Limit) -> Option<PathBuf> {
    let leaf = budget.quotas().first()?;
    let Source::Present { origin: Origin::File(path), .. } = &leaf.quota else { return None };
    Some(path.parent()?.join("cpu.stat"))
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

    #[test]
    fn the_system_sampler_reads_this_host() {
        // On Linux with /proc (every host the tests run on) the real files must open and
        // parse: a failure here is the bug, not a reason to skip. Values depend on the host;
        // what must hold on any of them is asserted.
        let mut sampler = HostSampler::system().unwrap_or_else(|e| panic!("HostSampler::system: {e}"));
        let a = sampler.read().unwrap();
        // 50 ms of this thread's CPU time (not wall time: a loaded host stretches it).
        let burn_from = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap();
        while clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap() - burn_from < 50_000_000 {
            std::hint::black_box(0u64);
        }
        let b = sampler.read().unwrap();
        let d = HostDelta::between(&a, &b).unwrap();
        assert!(d.cpus >= 1 && d.elapsed_ns >= 50_000_000, "{d:?}");
        assert!(d.self_ns >= 50_000_000, "the burn is this process's CPU time: {d:?}");
        // The burn ran on the CPUs summed over (one this process may use), so they were busy.
        assert!(d.busy_ns > 0, "{d:?}");
    }
}

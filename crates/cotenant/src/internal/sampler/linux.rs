//! The host sampler on Linux: the files of the module documentation, opened once and re-read
//! with `pread` at offset 0.

use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{process_cpu_ns, read_at_zero, HostCounters, SampleError};
use crate::cpus::{self, Constraint, Limit, Origin, Source};
use crate::procfs::{cgroupfs, cpulist::CpuSet, loadavg, mountinfo, stat};

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
    /// When the limits were last read (`None`: at the next reading).
    limits_read_at: Option<Instant>,
}

/// The limits (online CPUs, cpusets, affinity, quotas) are read again at the first reading
/// this long after the last time, not at each: they change rarely (an operator's command, a
/// container update), and re-reading them was four of a reading's dozen system calls. A new
/// limit is seen within this time plus one period (or one coasting stride).
pub const LIMITS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

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
        let tick_ns = crate::sys::clock_ticks_per_second().map_or(10_000_000, |ticks| 1_000_000_000 / ticks);
        Ok(HostSampler {
            budget,
            busy,
            loadavg,
            cpu_stat,
            tick_ns,
            buf: Vec::with_capacity(4096),
            limits_read_at: None,
        })
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
        if self.limits_read_at.is_none_or(|read| at.saturating_duration_since(read) >= LIMITS_EVERY) {
            // A failed refresh is tried again at the next reading.
            if let Err(e) = self.budget.refresh() {
                return Err(SampleError(format!("cannot refresh the CPU budget: {e}")));
            }
            self.limits_read_at = Some(at);
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

fn open(path: &Path) -> Result<(PathBuf, File), SampleError> {
    File::open(path)
        .map(|file| (path.to_path_buf(), file))
        .map_err(|e| SampleError(format!("cannot open {}: {e}", path.display())))
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
    use super::super::{clock_ns, HostDelta};
    use super::*;

    #[test]
    fn the_system_sampler_reads_this_host() {
        // On Linux with /proc (every host the tests run on) the real files must open and
        // parse: a failure here is the bug, not a reason to skip. Values depend on the host;
        // what must hold on any of them is asserted.
        let mut sampler = HostSampler::system().unwrap_or_else(|e| panic!("HostSampler::system: {e}"));
        let a = sampler.read().unwrap();
        // 50 ms of this thread's CPU time (not wall time: a loaded host stretches it).
        let burn_from = clock_ns(crate::sys::THREAD_CPU_CLOCK).unwrap();
        while clock_ns(crate::sys::THREAD_CPU_CLOCK).unwrap() - burn_from < 50_000_000 {
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

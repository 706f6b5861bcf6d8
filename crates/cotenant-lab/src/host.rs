//! Facts about the host recorded with every experiment, and the "is the host quiet?" check
//! made before each run (issue 4: the lab warns, and records it, when the host is busy).

use std::time::Duration;

use serde::Serialize;

/// What the results files record about the host.
#[derive(Debug, Clone, Serialize)]
pub struct HostFacts {
    /// CPUs this process may use.
    pub cpus: u32,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// "v1", "v2" or "none".
    pub cgroup_version: String,
    /// `/proc/loadavg` before the experiment.
    pub loadavg_before: String,
    /// Whether real cgroups could be created (root and a writable cgroup file system), and
    /// why not.
    pub cgroups: String,
}

impl HostFacts {
    /// Reads the facts now.
    pub fn read(cgroups: &Result<cotenant_ops::cgroup::Layout, String>) -> anyhow::Result<Self> {
        use anyhow::Context;
        let budget = cotenant::cpus::detect().context("detecting this host's CPUs")?;
        Ok(HostFacts {
            cpus: budget.allowed_cpus(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            cgroup_version: budget.cgroup_version().to_owned(),
            loadavg_before: std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_owned(),
            cgroups: match cgroups {
                Ok(_) => "available".to_owned(),
                Err(why) => format!("unavailable: {why}"),
            },
        })
    }
}

/// Busy and total jiffies of all CPUs from `/proc/stat`'s first line.
fn stat_jiffies(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().next()?;
    let fields: Vec<u64> =
        line.strip_prefix("cpu ")?.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    if fields.len() < 5 {
        return None;
    }
    let total: u64 = fields.iter().take(8).sum();
    // idle + iowait are not busy.
    let idle = fields[3] + fields[4];
    Some((total - idle, total))
}

/// CPUs busy between two `/proc/stat` readings (`None` when either does not parse).
pub fn busy_cpus_between(before: &str, after: &str, cpus: u32) -> Option<f64> {
    let (b0, t0) = stat_jiffies(before)?;
    let (b1, t1) = stat_jiffies(after)?;
    let total = t1.checked_sub(t0)?;
    if total == 0 {
        return None;
    }
    Some(b1.saturating_sub(b0) as f64 / total as f64 * f64::from(cpus))
}

/// The CPUs other processes kept busy over `window` just before a run, with a warning on
/// stderr when it is more than a quarter of a CPU (the run will be noisy). The lab runs
/// nothing during the window, so this is everyone else.
pub fn busy_before_run(cpus: u32, window: Duration) -> f64 {
    let read = || std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let before = read();
    std::thread::sleep(window);
    let busy = busy_cpus_between(&before, &read(), cpus).unwrap_or(f64::NAN);
    if busy > 0.25 {
        eprintln!("cotenant: warning: the host was busy before this run ({busy:.2} CPUs used by others); it will be noisy");
    }
    busy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_cpus_come_from_proc_stat_deltas() {
        let before = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 1 1 1\n";
        // 100 more busy jiffies, 100 more idle: half of 2 CPUs.
        let after = "cpu  150 0 150 900 0 0 0 0 0 0\n";
        assert_eq!(busy_cpus_between(before, after, 2), Some(1.0));
        assert_eq!(busy_cpus_between(before, before, 2), None, "no time passed");
        assert_eq!(busy_cpus_between("garbage", after, 2), None);
    }
}

//! `cotenant size --pid PID`: seed 002's thread-dump method, made language-independent
//! (issue 9, item 2). Instead of a JVM thread dump, every thread's state is sampled from
//! `/proc/PID/task/*/stat` every 100 ms, and its time on a CPU and waiting for one from
//! `/proc/PID/task/*/schedstat` at the start and the end.
//!
//! Threads are grouped by name with the trailing number replaced by `*` (`pool-1-thread-7`
//! joins `pool-1-thread-*`). Per group: threads, the fraction of samples in which they were
//! running or runnable, the wait/compute ratio W/C (median over the group's threads that ran),
//! and the size seed 002's formula gives with Ncpu = this process's cotenant CPU limit at full
//! utilisation. W is the time a thread was neither on a CPU nor waiting for one (blocked: I/O,
//! locks, an empty queue); run-queue wait is left out of both, since more threads do not help
//! a pool whose threads wait for CPUs. The grouping and arithmetic are pure ([`groups`]), fed by
//! samples, and tested without a process.
//!
//! Measure under the load you size for: an idle pool's threads wait for work, which looks like
//! W to this method (as it does to a thread dump).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

/// How often thread states are sampled (seed 002: "sample thread states").
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// A group whose threads ran at least this fraction of the samples is CPU-bound: about one
/// thread per CPU is its right size, and more is a finding.
const CPU_BOUND_RUNNING: f64 = 0.8;

/// What was measured for one thread over the whole sample.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadTotals {
    /// The thread's id (its folder under `/proc/<pid>/task`).
    pub tid: u32,
    /// The thread's name (`comm` in its `stat` file) when first seen.
    pub comm: String,
    /// State samples taken.
    pub samples: u32,
    /// The samples in which it was running or runnable (`R`).
    pub running_samples: u32,
    /// Time on a CPU over the sample (a schedstat delta; `None` when the kernel keeps no
    /// scheduler statistics or the file was unreadable).
    pub on_cpu_ns: Option<u64>,
    /// Time waiting on a run queue over the sample (a schedstat delta; `None` as for
    /// `on_cpu_ns`).
    pub run_delay_ns: Option<u64>,
    /// How long the thread was observed.
    pub observed_ns: u64,
}

impl ThreadTotals {
    /// W / C for this thread, if it ran at all.
    fn wait_compute_ratio(&self) -> Option<f64> {
        match (self.on_cpu_ns, self.run_delay_ns) {
            (Some(cpu), Some(delay)) if cpu > 0 => {
                let waited = self.observed_ns.saturating_sub(cpu).saturating_sub(delay);
                Some(waited as f64 / cpu as f64)
            }
            // Without schedstat: the sampled states (seed 002's 12 of 100 running: 88/12).
            (None, _) | (_, None) if self.running_samples > 0 => {
                Some(f64::from(self.samples - self.running_samples) / f64::from(self.running_samples))
            }
            _ => None,
        }
    }
}

/// One group of `cotenant size --pid --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// The thread name with its trailing number replaced by `*`.
    pub pattern: String,
    /// How many threads the group has.
    pub threads: u32,
    /// Samples in which a thread of the group was running or runnable, over all its samples.
    pub running_fraction: f64,
    /// Median W/C of the group's threads that ran; `null` if none ran during the sample.
    pub wait_compute_ratio: Option<f64>,
    /// The utilisation formula (`cpus × (1 + W/C)`, from "Thread Pool Sizing and the Contention
    /// Cliff") at full utilisation of `cpus`; `null` without a W/C.
    pub recommended: Option<u64>,
    /// CPU-bound (running at least 80 % of the time) and more threads than `cpus` allows.
    pub oversized: bool,
}

/// `pool-1-thread-7` → `pool-1-thread-*`, `worker12` → `worker*`, `main` → `main`.
pub fn pattern(comm: &str) -> String {
    let stem = comm.trim_end_matches(|c: char| c.is_ascii_digit());
    if stem.len() == comm.len() || stem.is_empty() {
        comm.to_owned()
    } else {
        format!("{stem}*")
    }
}

/// Groups threads by [`pattern`] and sizes each group for `cpus` CPUs. Largest groups first.
pub fn groups(threads: &[ThreadTotals], cpus: f64) -> Vec<Group> {
    let mut by_pattern: BTreeMap<String, Vec<&ThreadTotals>> = BTreeMap::new();
    for t in threads {
        by_pattern.entry(pattern(&t.comm)).or_default().push(t);
    }
    let mut out: Vec<Group> = by_pattern
        .into_iter()
        .map(|(pattern, members)| {
            let samples: u32 = members.iter().map(|t| t.samples).sum();
            let running: u32 = members.iter().map(|t| t.running_samples).sum();
            let running_fraction = if samples == 0 { 0.0 } else { f64::from(running) / f64::from(samples) };
            let mut ratios: Vec<f64> = members.iter().filter_map(|t| t.wait_compute_ratio()).collect();
            let ratio = (!ratios.is_empty()).then(|| crate::stats::median(&mut ratios));
            let recommended = ratio.and_then(|r| {
                cotenant::sizing::by_utilization(cpus, 1.0, r, 1.0).ok().map(|sizing| sizing.threads)
            });
            let threads = members.len() as u32;
            let oversized = running_fraction >= CPU_BOUND_RUNNING && f64::from(threads) > cpus.ceil();
            Group { pattern, threads, running_fraction, wait_compute_ratio: ratio, recommended, oversized }
        })
        .collect();
    out.sort_by(|a, b| b.threads.cmp(&a.threads).then_with(|| a.pattern.cmp(&b.pattern)));
    out
}

fn read_schedstat(task: &Path) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(task.join("schedstat")).ok()?;
    let s = cotenant::internal::procfs::schedstat::parse_task(&text).ok()?;
    Some((s.on_cpu_ns, s.run_delay_ns))
}

/// Samples `/proc/<pid>/task/*` under `proc_root` for `duration`. Threads that appear or exit
/// during the sample are counted for the time they were seen.
pub fn sample(proc_root: &Path, pid: u32, duration: Duration) -> anyhow::Result<Vec<ThreadTotals>> {
    let tasks = proc_root.join(pid.to_string()).join("task");
    struct Seen {
        totals: ThreadTotals,
        first: Instant,
        last: Instant,
        schedstat_start: Option<(u64, u64)>,
        schedstat_last: Option<(u64, u64)>,
    }
    let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
    let start = Instant::now();
    loop {
        let entries = std::fs::read_dir(&tasks).with_context(|| {
            format!("reading {} (no such process, or its files are not readable)", tasks.display())
        })?;
        let now = Instant::now();
        for entry in entries.flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
            let dir = entry.path();
            let Ok(text) = std::fs::read_to_string(dir.join("stat")) else { continue };
            let Ok(stat) = cotenant::internal::procfs::pidstat::parse(&text) else { continue };
            let schedstat = read_schedstat(&dir);
            let s = seen.entry(tid).or_insert_with(|| Seen {
                totals: ThreadTotals {
                    tid,
                    comm: stat.comm.clone(),
                    samples: 0,
                    running_samples: 0,
                    on_cpu_ns: None,
                    run_delay_ns: None,
                    observed_ns: 0,
                },
                first: now,
                last: now,
                schedstat_start: schedstat,
                schedstat_last: schedstat,
            });
            s.totals.samples += 1;
            s.totals.running_samples += u32::from(stat.state == 'R');
            s.last = now;
            if schedstat.is_some() {
                s.schedstat_last = schedstat;
            }
        }
        if start.elapsed() >= duration {
            break;
        }
        std::thread::sleep(SAMPLE_INTERVAL.min(duration.saturating_sub(start.elapsed())));
    }
    anyhow::ensure!(!seen.is_empty(), "{} lists no readable thread", tasks.display());
    Ok(seen
        .into_values()
        .map(|s| {
            let mut t = s.totals;
            t.observed_ns = u64::try_from((s.last - s.first).as_nanos()).unwrap_or(u64::MAX);
            if let (Some(a), Some(b)) = (s.schedstat_start, s.schedstat_last) {
                t.on_cpu_ns = Some(b.0.saturating_sub(a.0));
                t.run_delay_ns = Some(b.1.saturating_sub(a.1));
            }
            t
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tid: u32, comm: &str, running: u32, cpu_ms: u64, delay_ms: u64) -> ThreadTotals {
        ThreadTotals {
            tid,
            comm: comm.into(),
            samples: 100,
            running_samples: running,
            on_cpu_ns: Some(cpu_ms * 1_000_000),
            run_delay_ns: Some(delay_ms * 1_000_000),
            observed_ns: 10_000_000_000,
        }
    }

    #[test]
    fn trailing_numbers_become_a_star() {
        assert_eq!(pattern("pool-1-thread-7"), "pool-1-thread-*");
        assert_eq!(pattern("pool-1-thread-12"), "pool-1-thread-*");
        assert_eq!(pattern("worker12"), "worker*");
        assert_eq!(pattern("main"), "main");
        assert_eq!(pattern("42"), "42", "an all-digit name stays itself");
        assert_eq!(pattern(""), "");
    }

    /// Seed 002's example: a pool whose threads run 12 % of the time (W/C = 88/12 = 7.3), on
    /// 8 CPUs: 8 × (1 + 7.33) = 66.7 → 67 threads.
    #[test]
    fn an_io_pool_is_sized_by_its_wait_compute_ratio() {
        let threads: Vec<_> =
            (0..4).map(|i| thread(100 + i, &format!("pool-1-thread-{i}"), 12, 1200, 0)).collect();
        let g = groups(&threads, 8.0);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].pattern, "pool-1-thread-*");
        assert_eq!(g[0].threads, 4);
        assert!((g[0].running_fraction - 0.12).abs() < 1e-9);
        assert!((g[0].wait_compute_ratio.unwrap() - 8800.0 / 1200.0).abs() < 1e-9);
        assert_eq!(g[0].recommended, Some(67));
        assert!(!g[0].oversized);
    }

    /// Run-queue wait is not W: a CPU-bound pool on a busy host stays CPU-bound.
    #[test]
    fn waiting_for_a_cpu_is_not_waiting_for_io() {
        let threads: Vec<_> = (0..8).map(|i| thread(i, &format!("rayon-{i}"), 95, 5_000, 5_000)).collect();
        let g = &groups(&threads, 2.0)[0];
        assert_eq!(g.wait_compute_ratio, Some(0.0));
        assert_eq!(g.recommended, Some(2));
        assert!(g.oversized, "8 CPU-bound threads for 2 CPUs is a finding");
    }

    #[test]
    fn idle_groups_have_no_ratio_and_the_sample_counts_fall_back() {
        let mut idle = thread(1, "janitor", 0, 0, 0);
        let g = groups(std::slice::from_ref(&idle), 2.0);
        assert_eq!((g[0].wait_compute_ratio, g[0].recommended), (None, None));
        // No schedstat: the sampled states give W/C (12 of 100 running: 88/12).
        idle.on_cpu_ns = None;
        idle.running_samples = 12;
        let g = groups(&[idle], 2.0);
        assert!((g[0].wait_compute_ratio.unwrap() - 88.0 / 12.0).abs() < 1e-9);
    }

    #[test]
    fn groups_come_largest_first() {
        let threads =
            vec![thread(1, "main", 50, 100, 0), thread(2, "w-1", 50, 100, 0), thread(3, "w-2", 50, 100, 0)];
        let names: Vec<_> = groups(&threads, 2.0).into_iter().map(|g| g.pattern).collect();
        assert_eq!(names, ["w-*", "main"]);
    }

    #[test]
    fn sampling_this_process_finds_its_threads() {
        let me = std::process::id();
        let threads = sample(Path::new("/proc"), me, Duration::from_millis(250)).unwrap();
        assert!(threads.iter().any(|t| t.tid == me), "the main thread");
        assert!(threads.iter().all(|t| t.samples >= 1 && t.running_samples <= t.samples));
        let err = sample(Path::new("/nonexistent-proc"), me, Duration::ZERO).unwrap_err();
        assert!(format!("{err:#}").contains("/nonexistent-proc/"), "{err:#}");
    }
}

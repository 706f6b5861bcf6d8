//! One run of `lab throttling` in a real cgroup: its quota (and burst) set, the worker started,
//! the cgroup's `cpu.stat` read at the common start and at the end while a thread of the lab
//! rewrites the quota, or not.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use cotenant::internal::procfs::cgroupfs::{parse_cpu_stat, CpuStat};

use crate::runner::{run_bounded_output, run_workers_at, WorkerSpec, CGROUP_SET_DEADLINE, START_DELAY};
use crate::worker::WorkerReport;
use crate::Lab;
use cotenant_ops::cgroup::{Cgroup, Layout, LAB_PREFIX};

use super::plan::{Limit, Rewrite};
use super::report::Throttling;

fn read_cpu_stat(dir: &Path) -> anyhow::Result<CpuStat> {
    let path = dir.join("cpu.stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_cpu_stat(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The name of this layout's burst file, if the kernel has one in `dir` (Linux 5.14+).
fn burst_file(layout: &Layout, dir: &Path) -> Option<&'static str> {
    let name = match layout {
        Layout::V1 { .. } => "cpu.cfs_burst_us",
        Layout::V2 { .. } => "cpu.max.burst",
    };
    dir.join(name).exists().then_some(name)
}

/// One run in a cgroup: the worker's report and the cgroup's counters between the common start
/// and the end of the schedule, plus how many rewrites wrote something.
pub(super) struct CgroupRun {
    pub(super) report: WorkerReport,
    pub(super) throttling: Throttling,
    pub(super) rewrites: u64,
    pub(super) rewrites_written: u64,
}

pub(super) fn run_in_cgroup(
    lab: &Lab,
    layout: &Layout,
    limit: Limit,
    rewrite: Rewrite,
    worker_args: Vec<String>,
    duration: Duration,
) -> anyhow::Result<Option<CgroupRun>> {
    let cpus = f64::from(lab.host.cpus.max(1));
    let cg =
        Cgroup::create(layout, LAB_PREFIX, "throttling", false, None).context("creating a lab cgroup")?;
    let dir = cg.cpu_dir(false).to_owned();
    let period_us = limit.period_ms * 1000;
    let quota_us = limit.quota_of_n.map(|f| (f * cpus * period_us as f64).round() as u64);
    Cgroup::set_quota(layout, &dir, quota_us, period_us)
        .with_context(|| format!("setting the quota of {}", dir.display()))?;
    if limit.burst {
        // Checked in the new cgroup: a v2 root has no cpu.max.burst even where children do.
        let (Some(name), Some(q)) = (burst_file(layout, &dir), quota_us) else {
            return Ok(None);
        };
        // Only on a cgroup file system, never through a symbolic link (issue 34).
        cotenant_ops::cgroupfs::write_control(&dir, name, &q.to_string())
            .with_context(|| format!("setting the burst of {}", dir.display()))?;
    }
    let spec = WorkerSpec::lab_worker(worker_args, Some(&cg))?;
    let start_at = SystemTime::now() + START_DELAY;
    let done = AtomicBool::new(false);
    let rewrites = AtomicU64::new(0);
    let written = AtomicU64::new(0);
    let exe = std::env::current_exe().context("locating the cotenant binary")?;
    let (report, throttling) = std::thread::scope(|scope| -> anyhow::Result<(WorkerReport, Throttling)> {
        let counters = scope.spawn(|| -> anyhow::Result<Throttling> {
            sleep_until(start_at);
            let before = read_cpu_stat(&dir)?;
            let started = std::time::Instant::now();
            while started.elapsed() < duration && !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                match rewrite {
                    Rewrite::None => {}
                    Rewrite::Plain => {
                        Cgroup::set_quota(layout, &dir, quota_us, period_us)?;
                        rewrites.fetch_add(1, Ordering::Relaxed);
                        written.fetch_add(1, Ordering::Relaxed);
                    }
                    Rewrite::CgroupSet => {
                        let mut command = std::process::Command::new(&exe);
                        command.args(["cgroup", "set"]).arg(&dir).args([
                            "--cpus",
                            &format!("{cpus}"),
                            "--period",
                            &format!("{}ms", limit.period_ms),
                            "--json",
                        ]);
                        // A child of the lab (killed on a signal) with a deadline: a write
                        // that hangs ends the experiment with an error, not the lab's wait.
                        let out = run_bounded_output(&mut command, CGROUP_SET_DEADLINE)
                            .context("cotenant cgroup set")?;
                        anyhow::ensure!(out.status.success(), "cotenant cgroup set failed: {}", out.stderr);
                        rewrites.fetch_add(1, Ordering::Relaxed);
                        let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
                            .context("reading the --json output of cotenant cgroup set")?;
                        if answer["action"] != "unchanged" {
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            let after = read_cpu_stat(&dir)?;
            Ok(Throttling::between(&before, &after))
        });
        let report = run_workers_at(&[spec], start_at);
        done.store(true, Ordering::SeqCst);
        let throttling = counters.join().map_err(|_| anyhow::anyhow!("the counter thread panicked"))??;
        Ok((report?.pop().context("no report from the worker")?, throttling))
    })?;
    Ok(Some(CgroupRun {
        report,
        throttling,
        rewrites: rewrites.load(Ordering::Relaxed),
        rewrites_written: written.load(Ordering::Relaxed),
    }))
}

fn sleep_until(at: SystemTime) {
    if let Ok(wait) = at.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
}

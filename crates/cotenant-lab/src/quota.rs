//! Seed 000 Figure 5: one process alone in a real cgroup with a CPU quota of 0.5 CPU to the
//! CPU count, in steps of 0.5, serving an open-loop load of 70 % of its quota. Pools: fixed to
//! the online CPU count (what C++, Python and Go before 1.25 do), fixed to the quota rounded up
//! by hand (what the JVM's container support does), cotenant's `adaptive`, and a real Go
//! program with its default GOMAXPROCS (built by the lab when Go is installed).

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

use super::gobuild::{go_worker, GoWorker};
use super::runner::{cgroup_run_length, run_workers, schedule_args, WorkerSpec};
use super::{Chart, Lab, Outcome, Series};
use cotenant_ops::cgroup::{Cgroup, LAB_PREFIX};
use cotenant_ops::stats::column_medians;

/// The quotas to run on `cpus` CPUs: 0.5 to `cpus` in steps of 0.5 (quick: the smallest and
/// the largest below the CPU count, and the CPU count).
pub fn quotas(cpus: u32, quick: bool) -> Vec<f64> {
    let all: Vec<f64> = (1..=2 * cpus.max(1)).map(|i| f64::from(i) * 0.5).collect();
    if quick && all.len() > 2 {
        vec![all[0], all[all.len() - 2]]
    } else {
        all
    }
}

/// The pools compared, in table order.
pub const POOLS: [&str; 4] =
    ["fixed(online CPUs)", "fixed(quota, rounded up)", "adaptive", "go (default GOMAXPROCS)"];

/// One run's row of `results.csv`: one pool under one quota, one repeat.
#[derive(Serialize)]
struct QuotaRow<'a> {
    /// The cgroup's CPU quota (CPUs, at a 100 ms period).
    quota_cpus: f64,
    /// The pool, one of [`POOLS`].
    pool: &'a str,
    /// Threads the worker's pool had (count).
    threads: usize,
    /// Which repeat of the configuration (from 0).
    repeat: u32,
    /// CPUs other processes kept busy just before the run (the quiet-host check).
    host_busy_cpus_before: f64,
    /// Service time, 99th percentile (µs).
    service_p99_us: f64,
    /// Service time, maximum (µs).
    service_max_us: f64,
    /// End-to-end time (from the intended arrival), 99th percentile (µs).
    e2e_p99_us: f64,
    /// Items completed per second.
    throughput_per_s: f64,
    /// Items completed over items offered (0 to 1).
    completed_fraction: f64,
}

/// Runs the experiment.
pub fn run(lab: &Lab, args: &crate::args::LabArgs) -> anyhow::Result<Outcome> {
    let cpus = lab.host.cpus.max(1);
    let (layout, seconds, repeats) = match cgroup_run_length(lab, "quota", args, (1, 5), (1, 3)) {
        Ok(start) => start,
        Err(skipped) => return Ok(*skipped),
    };
    let load = args.load.first().copied().unwrap_or(0.7);
    let go = go_worker();
    let mut outcome = Outcome::default();
    let mut report = format!(
        "One process alone in a cgroup with a CPU quota (period 100 ms), offered {:.0}% of its quota in {} ms items, \
         Poisson arrivals, {seconds} s runs. Go: {}.\n\n\
         | quota | pool | threads | service p99 ms | end-to-end p99 ms | throughput /s | repeats |\n\
         |---:|---|---:|---:|---:|---:|---:|\n",
        load * 100.0,
        args.service_ms,
        match &go {
            GoWorker::Ready(path) => format!("built at {}", path.display()),
            GoWorker::NotInstalled => "not installed (its rows are skipped)".to_owned(),
            GoWorker::BuildFailed(why) => format!("build failed ({why}); its rows are skipped"),
        }
    );
    let mut points: Vec<(&str, f64, [f64; 3])> = Vec::new();
    for q in quotas(cpus, args.quick) {
        for pool in POOLS {
            let mut runs: Vec<[f64; 3]> = Vec::new();
            let mut threads = 0;
            for repeat in 0..repeats {
                let mut common =
                    schedule_args(1, load, Some(q), args.service_ms, Duration::from_secs(seconds));
                common.extend(["--seed".to_owned(), repeat.to_string()]);
                let cg = Cgroup::create(layout, LAB_PREFIX, "quota", false, None)
                    .context("creating a lab cgroup")?;
                Cgroup::set_quota(layout, cg.cpu_dir(false), Some((q * 100_000.0).round() as u64), 100_000)?;
                let spec = match pool {
                    "go (default GOMAXPROCS)" => match &go {
                        GoWorker::Ready(path) => WorkerSpec {
                            program: path.clone(),
                            args: common,
                            cgroup: Some(&cg),
                            start_offset: Default::default(),
                        },
                        _ => break,
                    },
                    _ => {
                        let mut a: Vec<String> = match pool {
                            "fixed(online CPUs)" => vec!["--pool".into(), "ignorant".into()],
                            "adaptive" => vec!["--pool".into(), "adaptive".into()],
                            _ => vec![
                                "--pool".into(),
                                "fixed".into(),
                                "--fixed-threads".into(),
                                (q.ceil() as u32).max(1).to_string(),
                            ],
                        };
                        a.extend(common);
                        WorkerSpec::lab_worker(a, Some(&cg))?
                    }
                };
                let busy_before = lab.quiet_check();
                eprintln!("lab quota: {q} CPUs, {pool}, repeat {}/{repeats}", repeat + 1);
                let report = run_workers(&[spec])?.pop().context("no report from the worker")?;
                let s = &report.summary;
                threads = report.threads;
                outcome.rows.push(crate::row_of(&QuotaRow {
                    quota_cpus: q,
                    pool,
                    threads: report.threads,
                    repeat,
                    host_busy_cpus_before: busy_before,
                    service_p99_us: s.service_p99_us,
                    service_max_us: s.service_max_us,
                    e2e_p99_us: s.e2e_p99_us,
                    throughput_per_s: s.throughput_per_s,
                    completed_fraction: s.completed as f64 / s.offered.max(1) as f64,
                }));
                runs.push([s.service_p99_us, s.e2e_p99_us, s.throughput_per_s]);
            }
            if runs.is_empty() {
                continue;
            }
            let med = column_medians(&runs);
            let _ = writeln!(
                report,
                "| {q} | {pool} | {threads} | {:.1} | {:.1} | {:.1} | {} |",
                med[0] / 1000.0,
                med[1] / 1000.0,
                med[2],
                runs.len()
            );
            points.push((pool, q, [med[0], med[1], med[2]]));
        }
    }
    report.push_str("\nMedians over repeats (every run is in results.csv).\n");
    outcome.verdicts = verdicts(&points);
    outcome.summary = serde_json::json!(points
        .iter()
        .map(|(p, q, m)| serde_json::json!({"pool": p, "quota_cpus": q, "service_p99_us": m[0], "e2e_p99_us": m[1], "throughput_per_s": m[2]}))
        .collect::<Vec<_>>());
    let chart = |stem: &str, title: &str, i: usize| Chart {
        file_stem: stem.into(),
        title: title.into(),
        x_label: "quota (CPUs)".into(),
        y_label: "ms".into(),
        log_y: true,
        beside: Vec::new(),
        series: POOLS
            .iter()
            .map(|pool| Series {
                name: (*pool).into(),
                points: points.iter().filter(|p| p.0 == *pool).map(|p| (p.1, p.2[i] / 1000.0)).collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect(),
    };
    outcome.charts = vec![
        chart("service-p99", "service p99 against the quota", 0),
        chart("e2e-p99", "end-to-end p99 against the quota", 1),
    ];
    outcome.report = report;
    Ok(outcome)
}

/// Per quota, adaptive's end-to-end p99 against the pool sized to the online CPUs.
pub fn verdicts(points: &[(&str, f64, [f64; 3])]) -> Vec<String> {
    let find = |pool: &str, q: f64| points.iter().find(|p| p.0 == pool && p.1 == q).map(|p| p.2);
    let mut quotas: Vec<f64> = points.iter().map(|p| p.1).collect();
    quotas.dedup();
    quotas
        .into_iter()
        .filter_map(|q| {
            let (a, f) = (find("adaptive", q)?, find("fixed(online CPUs)", q)?);
            let mut line = format!(
                "quota {q}: adaptive end-to-end p99 {:.2}x fixed(online CPUs)'s, service p99 {:.2}x",
                a[1] / f[1],
                a[0] / f[0]
            );
            if let Some(g) = find("go (default GOMAXPROCS)", q) {
                let _ = write!(line, "; Go's end-to-end p99 {:.2}x", g[1] / f[1]);
            }
            Some(line)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_go_from_half_a_cpu_to_the_cpu_count() {
        assert_eq!(quotas(2, false), [0.5, 1.0, 1.5, 2.0]);
        assert_eq!(quotas(2, true), [0.5, 1.5]);
        assert_eq!(quotas(1, true), [0.5, 1.0]);
    }

    #[test]
    fn verdicts_compare_adaptive_with_the_online_cpu_pool() {
        let points = [
            ("fixed(online CPUs)", 0.5, [40_000.0, 200_000.0, 70.0]),
            ("adaptive", 0.5, [6_000.0, 20_000.0, 70.0]),
            ("go (default GOMAXPROCS)", 0.5, [8_000.0, 50_000.0, 70.0]),
        ];
        assert_eq!(
            verdicts(&points),
            ["quota 0.5: adaptive end-to-end p99 0.10x fixed(online CPUs)'s, service p99 0.15x; Go's end-to-end p99 0.25x"]
        );
    }
}

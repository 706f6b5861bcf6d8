//! Seed 000 Figures 2 and 3: one process alone on the host, a fixed pool of 1 to 4 × CPUs
//! threads, CPU-bound items offered open-loop. Without a lock (`overcommit`), threads beyond
//! the CPUs add preemption to every item's service time; with a mutex around the work
//! (`contention`), they add waiting for the lock (and for the lock holder to be scheduled).

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::runner::{fixed_pool_args, run_length, run_workers, WorkerSpec};
use super::{Chart, Lab, Outcome, Series};
use crate::args::LabArgs;
use cotenant_ops::stats::median;

/// One thread count's medians over repeats.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Point {
    /// Pool threads.
    pub threads: u32,
    /// Median service p99 (µs).
    pub service_p99_us: f64,
    /// Median service max (µs).
    pub service_max_us: f64,
    /// Median queue p99 (µs).
    pub queue_p99_us: f64,
    /// Median throughput (items/s).
    pub throughput_per_s: f64,
}

/// One run's row of `results.csv`: one thread count, one repeat.
#[derive(Serialize)]
struct OvercommitRow {
    /// Pool threads (count).
    threads: u32,
    /// Whether every item ran inside one mutex (`contention`).
    mutex: bool,
    /// Offered load, a fraction of the capacity (the host's CPUs, or one CPU with the mutex).
    load: f64,
    /// Which repeat of the configuration (from 0).
    repeat: u32,
    /// CPUs other processes kept busy just before the run (the quiet-host check).
    host_busy_cpus_before: f64,
    /// Service time, median (µs).
    service_p50_us: f64,
    /// Service time, 99th percentile (µs).
    service_p99_us: f64,
    /// Service time, maximum (µs).
    service_max_us: f64,
    /// Queue time (start minus intended arrival), 99th percentile (µs).
    queue_p99_us: f64,
    /// End-to-end time (from the intended arrival), 99th percentile (µs).
    e2e_p99_us: f64,
    /// Items completed per second.
    throughput_per_s: f64,
}

/// Runs the experiment; `mutex` makes it `contention`.
pub fn run(lab: &Lab, args: &LabArgs, mutex: bool) -> anyhow::Result<Outcome> {
    let cpus = lab.host.cpus.max(1);
    let threads: Vec<u32> = if args.quick { vec![1, cpus, 4 * cpus] } else { (1..=4 * cpus).collect() };
    let (seconds, repeats) = run_length(args, (1, 5), (1, 3));
    let load = args.load.first().copied().unwrap_or(0.7);
    // The capacity the load is a fraction of: the host, or the one CPU the lock lets run.
    let capacity = if mutex { 1.0 } else { f64::from(cpus) };
    let name = if mutex { "contention" } else { "overcommit" };
    let cgroup = match &lab.layout {
        Ok(layout) => Some(cotenant_ops::cgroup::Cgroup::create(
            layout,
            cotenant_ops::cgroup::LAB_PREFIX,
            name,
            false,
            None,
        )?),
        Err(_) => None,
    };
    let mut outcome = Outcome::default();
    let mut points = Vec::new();
    for &n in &threads {
        let mut runs = Vec::new();
        for repeat in 0..repeats {
            let busy_before = lab.quiet_check();
            eprintln!("lab {name}: {n} threads, repeat {}/{repeats}", repeat + 1);
            let mut worker_args =
                fixed_pool_args(n, capacity, load, args.service_ms, Duration::from_secs(seconds));
            worker_args.extend(["--seed".to_owned(), repeat.to_string()]);
            if mutex {
                worker_args.push("--mutex".into());
            }
            let report = run_workers(&[WorkerSpec::lab_worker(worker_args, cgroup.as_ref())?])?
                .pop()
                .ok_or_else(|| anyhow::anyhow!("the lab worker printed no report"))?;
            let s = &report.summary;
            outcome.rows.push(crate::row_of(&OvercommitRow {
                threads: n,
                mutex,
                load,
                repeat,
                host_busy_cpus_before: busy_before,
                service_p50_us: s.service_p50_us,
                service_p99_us: s.service_p99_us,
                service_max_us: s.service_max_us,
                queue_p99_us: s.queue_p99_us,
                e2e_p99_us: s.e2e_p99_us,
                throughput_per_s: s.throughput_per_s,
            }));
            runs.push(s.clone());
        }
        let med =
            |f: fn(&super::worker::SummaryRow) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
        points.push(Point {
            threads: n,
            service_p99_us: med(|s| s.service_p99_us),
            service_max_us: med(|s| s.service_max_us),
            queue_p99_us: med(|s| s.queue_p99_us),
            throughput_per_s: med(|s| s.throughput_per_s),
        });
    }
    outcome.report = table(&points, cpus, load, mutex);
    outcome.verdicts = verdict(&points, cpus).into_iter().collect();
    outcome.summary = serde_json::to_value(&points)?;
    let line = |name: &str, f: fn(&Point) -> f64| Series {
        name: name.into(),
        points: points.iter().map(|p| (f64::from(p.threads), f(p))).collect(),
    };
    outcome.charts = vec![
        Chart {
            file_stem: "latency".into(),
            title: format!("{name}: latency against pool threads ({cpus} CPUs)"),
            x_label: "pool threads".into(),
            y_label: "ms".into(),
            log_y: true,
            beside: Vec::new(),
            series: vec![
                line("service p99", |p| p.service_p99_us / 1000.0),
                line("service max", |p| p.service_max_us / 1000.0),
                line("queue p99", |p| p.queue_p99_us / 1000.0),
            ],
        },
        Chart {
            file_stem: "throughput".into(),
            title: format!("{name}: throughput against pool threads"),
            x_label: "pool threads".into(),
            y_label: "items per second".into(),
            log_y: false,
            beside: Vec::new(),
            series: vec![line("throughput", |p| p.throughput_per_s)],
        },
    ];
    Ok(outcome)
}

/// The Markdown table.
pub fn table(points: &[Point], cpus: u32, load: f64, mutex: bool) -> String {
    let mut out = format!(
        "One process alone, fixed pools, {} offered {:.0}% of {}.\n\n\
         | threads | service p99 ms | service max ms | queue p99 ms | throughput /s |\n|---:|---:|---:|---:|---:|\n",
        if mutex { "every item inside one mutex," } else { "no lock," },
        load * 100.0,
        if mutex { "one CPU (what the lock lets run)".to_owned() } else { format!("the host's {cpus} CPUs") }
    );
    for p in points {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} |",
            p.threads,
            p.service_p99_us / 1000.0,
            p.service_max_us / 1000.0,
            p.queue_p99_us / 1000.0,
            p.throughput_per_s
        );
    }
    out.push_str("\nMedians over repeats (every row is in results.csv).\n");
    out
}

/// The most threads against as many threads as CPUs: service p99 and throughput ratios.
pub fn verdict(points: &[Point], cpus: u32) -> Option<String> {
    let at_cpus = points.iter().find(|p| p.threads == cpus)?;
    let most = points.iter().max_by_key(|p| p.threads)?;
    if most.threads == at_cpus.threads || at_cpus.service_p99_us <= 0.0 || at_cpus.throughput_per_s <= 0.0 {
        return None;
    }
    Some(format!(
        "{} threads on {cpus} CPUs: service p99 {:.2}x that of {cpus} threads, queue p99 {:.2}x, throughput {:.2}x",
        most.threads,
        most.service_p99_us / at_cpus.service_p99_us,
        if at_cpus.queue_p99_us > 0.0 { most.queue_p99_us / at_cpus.queue_p99_us } else { f64::NAN },
        most.throughput_per_s / at_cpus.throughput_per_s,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(threads: u32, p99: f64, tput: f64) -> Point {
        Point {
            threads,
            service_p99_us: p99,
            service_max_us: p99 * 2.0,
            queue_p99_us: 1000.0,
            throughput_per_s: tput,
        }
    }

    #[test]
    fn the_verdict_compares_the_most_threads_with_one_per_cpu() {
        let points = [point(1, 5000.0, 150.0), point(2, 5500.0, 280.0), point(8, 22_000.0, 275.0)];
        let v = verdict(&points, 2).unwrap();
        assert_eq!(
            v,
            "8 threads on 2 CPUs: service p99 4.00x that of 2 threads, queue p99 1.00x, throughput 0.98x"
        );
        assert_eq!(verdict(&points[..2], 2), None, "nothing beyond one thread per CPU");
        assert!(table(&points, 2, 0.7, false).contains("| 8 | 22.0 | 44.0 | 1.0 | 275.0 |"));
    }
}

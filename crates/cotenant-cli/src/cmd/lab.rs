//! `cotenant lab <experiment>`: runs the configurations, prints a table and a verdict, and
//! writes `results.json` and `report.md` under `--out`.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use crate::args::{Experiment, LabArgs};
use crate::lab::neighbours::{self, kind_name, Aggregate, RunConfig, RunFigures, KINDS};

#[derive(Serialize)]
struct Results {
    experiment: &'static str,
    host: Host,
    rows: Vec<Row>,
    aggregates: Vec<Aggregate>,
    verdicts: Vec<String>,
}

#[derive(Serialize)]
struct Host {
    cpus: u32,
    kernel: String,
    cgroup_version: String,
    loadavg_before: String,
}

#[derive(Serialize)]
struct Row {
    config: RunConfig,
    figures: RunFigures,
}

pub fn run(args: &LabArgs) -> anyhow::Result<ExitCode> {
    match args.experiment {
        Experiment::Neighbours => neighbours_experiment(args),
    }
}

fn neighbours_experiment(args: &LabArgs) -> anyhow::Result<ExitCode> {
    let budget = cotenant::cpus::detect().context("detecting this host's CPUs")?;
    let cpus = budget.allowed_cpus();
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_owned();
    let load1: f64 = loadavg.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
    if load1 > 0.5 * f64::from(cpus) {
        eprintln!("cotenant: warning: the host is busy before the run (load average {load1}); results will be noisy");
    }
    let host = Host {
        cpus,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_owned(),
        cgroup_version: budget.cgroup_version().to_owned(),
        loadavg_before: loadavg,
    };
    let processes: Vec<u32> = if args.quick { vec![1, 2] } else { (1..=2 * cpus).collect() };
    let repeats = args.repeats.unwrap_or(if args.quick { 1 } else { 3 });
    let seconds = args.seconds.unwrap_or(if args.quick { 1 } else { 5 });
    let mut rows = Vec::new();
    let mut aggregates = Vec::new();
    for &p in &processes {
        for kind in KINDS {
            let mut runs = Vec::new();
            for repeat in 0..repeats {
                let config = RunConfig {
                    processes: p,
                    kind,
                    load: args.load,
                    service_ms: args.service_ms,
                    duration_ms: seconds * 1000,
                    repeat,
                };
                eprintln!("lab neighbours: P={p} {} repeat {}/{repeats}", kind_name(kind), repeat + 1);
                let reports = neighbours::run_once(&config)?;
                let figures = neighbours::figures(&reports);
                runs.push(figures);
                rows.push(Row { config, figures });
            }
            aggregates.push(neighbours::aggregate(p, kind, &runs));
        }
    }
    let verdicts: Vec<String> =
        processes.iter().filter_map(|&p| neighbours::verdict(&aggregates, p)).collect();
    let results = Results { experiment: "neighbours", host, rows, aggregates, verdicts };
    let report = report(&results, args);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{report}");
    }
    if let Some(dir) = &args.out {
        let dir = dir.join("neighbours");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = dir.join("results.json");
        std::fs::write(&json, serde_json::to_string_pretty(&results)?)
            .with_context(|| format!("writing {}", json.display()))?;
        let md = dir.join("report.md");
        std::fs::write(&md, &report).with_context(|| format!("writing {}", md.display()))?;
    }
    Ok(ExitCode::from(crate::exit::OK))
}

fn report(results: &Results, args: &LabArgs) -> String {
    let mut out = String::new();
    let h = &results.host;
    let _ = writeln!(
        out,
        "# lab neighbours\n\nhost: {} CPUs, Linux {}, cgroup {}; load average before: {}\n\
         all processes in one cgroup; each offered {:.0}% of its fair share (CPUs / P) of {} ms items, Poisson arrivals\n",
        h.cpus,
        h.kernel,
        h.cgroup_version,
        h.loadavg_before,
        args.load * 100.0,
        args.service_ms
    );
    let _ = writeln!(
        out,
        "| P | pool | service p99 ms | service max ms | end-to-end p99 ms | throughput /s | completed | repeats |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|"
    );
    for a in &results.aggregates {
        let spread =
            |m: f64, lo: f64, hi: f64| format!("{:.1} ({:.1}–{:.1})", m / 1000.0, lo / 1000.0, hi / 1000.0);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.1} | {:.0}% | {} |",
            a.processes,
            kind_name(a.kind),
            spread(a.median.service_p99_us, a.min.service_p99_us, a.max.service_p99_us),
            spread(a.median.service_max_us, a.min.service_max_us, a.max.service_max_us),
            spread(a.median.e2e_p99_us, a.min.e2e_p99_us, a.max.e2e_p99_us),
            a.median.throughput_per_s,
            a.median.completed_fraction * 100.0,
            a.repeats
        );
    }
    let _ = writeln!(out, "\nMedians over repeats, (min–max) in brackets.\n\n## Verdict\n");
    for v in &results.verdicts {
        let _ = writeln!(out, "- {v}");
    }
    out
}

//! The lab (issue 4): seed 000's experiments, run on the user's own host with real processes.
//!
//! | file | what it owns |
//! |---|---|
//! | `workload.rs` | calibrated CPU-bound items, open-loop schedules, latency summaries |
//! | `worker.rs` | the hidden `lab-worker` mode: one process of an experiment |
//! | `cgroup.rs` | real cgroups (`cotenant-lab-*`), removed on every exit path |
//! | `runner.rs` | starting a run's processes at one instant, collecting their reports |
//! | `host.rs` | host facts and the quiet-host check before each run |
//! | `overcommit.rs` | Figures 2 and 3: one process, 1 to 4 × CPUs threads, with and without a lock |
//! | `quota.rs` | Figure 5: quotas in real cgroups, including a Go program (`gobuild.rs`) |
//! | `neighbours.rs` | Figure 7 (and `factor`, Figure 8, and `headline`): P processes, pool kinds, two settings |
//! | `burst.rs` | §4: a bursty and a steady tenant, quotas against adaptive pools |
//! | `fairness.rs` | A alone, then B: CPU shares over time and Jain's index |
//! | `plot.rs` | line charts as SVG and PNG (plotters) |
//! | `runtimes.rs` | Table 2: what each language runtime believes about its CPUs |
//! | `isolation.rs` | seed 003: an HTTP server next to a batch job, every isolation option |
//! | `tenants.rs` | the server (A) and the batch job (B) of `isolation`, as hidden modes |
//! | `loadgen.rs` | the open-loop HTTP load generator of `isolation` |
//! | `throttling.rs` | seed 001: Table II on this kernel, rewrites, and the user-space CPU budget |
//! | `spin.rs` | seed 004: a model of WiredTiger's snapshot wait, per waiting strategy, restricted and inverted |
//! | `sizing.rs` | seed 002: pool sizes 1 to 256 against I/O delays, and the elastic pool |
//!
//! Every experiment returns an [`Outcome`]; `cmd/lab.rs` prints it and writes
//! `DIR/<experiment>/{results.csv, results.json, report.md, <chart>.svg, <chart>.png}`.

pub mod burst;
pub mod cgroup;
pub mod fairness;
pub mod gobuild;
pub mod host;
pub mod isolation;
pub mod loadgen;
pub mod neighbours;
pub mod overcommit;
pub mod plot;
pub mod quota;
pub mod runner;
pub mod runtimes;
pub mod sizing;
pub mod spin;
pub mod tenants;
pub mod throttling;
pub mod worker;
pub mod workload;

use serde::Serialize;

/// What one experiment produced: everything the output files are made of.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Raw rows, one flat JSON object per measured configuration and repeat (numbers and
    /// strings only): the lines of `results.csv` (columns in first-seen order) and the `rows`
    /// of `results.json`.
    pub rows: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Aggregates (medians and spreads), as the experiment chooses to shape them.
    pub summary: serde_json::Value,
    /// Markdown: the tables and notes of `report.md` (the lab adds the title, the host facts,
    /// the chart links and the verdict).
    pub report: String,
    /// Charts to render next to the report.
    pub charts: Vec<Chart>,
    /// One-line verdicts computed from the data.
    pub verdicts: Vec<String>,
}

/// A line chart: one or more series of (x, y) points.
#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    /// File name without extension (`service-p99` gives `service-p99.svg` and `.png`).
    pub file_stem: String,
    /// Title drawn above the chart.
    pub title: String,
    /// Axis labels.
    pub x_label: String,
    /// Axis labels.
    pub y_label: String,
    /// A logarithmic y axis (latencies).
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// One line of a [`Chart`].
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points in x order; non-finite values are skipped when drawing.
    pub points: Vec<(f64, f64)>,
}

/// What every experiment needs to know about where it runs.
pub struct Lab {
    /// Facts recorded with the results.
    pub host: host::HostFacts,
    /// Real cgroups, or why not.
    pub layout: Result<cgroup::Layout, String>,
}

impl Lab {
    /// Looks at the host. Warns (and records) when real cgroups are unavailable: the
    /// experiments that need them are then skipped, not failed.
    pub fn new() -> anyhow::Result<Lab> {
        let layout = cgroup::layout();
        if let Err(why) = &layout {
            eprintln!(
                "cotenant: note: real cgroups unavailable ({why}); experiments that need them are skipped"
            );
        }
        let host = host::HostFacts::read(&layout)?;
        Ok(Lab { host, layout })
    }

    /// The settings `--setting` asks for, without the cgroup-per-process one when real
    /// cgroups are unavailable.
    pub fn settings(&self, args: &crate::args::LabArgs) -> Vec<neighbours::Setting> {
        use crate::args::SettingArg;
        use neighbours::Setting;
        let wanted = match args.setting {
            SettingArg::OneCgroup => vec![Setting::OneCgroup],
            SettingArg::PerProcess => vec![Setting::PerProcess],
            SettingArg::Both => vec![Setting::OneCgroup, Setting::PerProcess],
        };
        wanted.into_iter().filter(|s| *s == Setting::OneCgroup || self.layout.is_ok()).collect()
    }

    /// The quiet-host check before a run: CPUs others kept busy over 300 ms.
    pub fn quiet_check(&self) -> f64 {
        host::busy_before_run(self.host.cpus, std::time::Duration::from_millis(300))
    }
}

//! The lab (issue 4): seed 000's experiments, run on the user's own host with real processes;
//! and the front end of the simulator (`cotenant sim`), which draws with the lab's charts.
//! The `cotenant` command dispatches here when built with its `lab` feature (the default).
//!
//! | file | what it owns |
//! |---|---|
//! | `workload.rs` | calibrated CPU-bound items, open-loop schedules, latency summaries |
//! | `worker.rs` | the hidden `lab-worker` mode: one process of an experiment |
//! | `async_items.rs` | `neighbours --items async`: futures on tokio's runtime or the cotenant executor |
//! | `args.rs` | the clap definitions of `lab`, `sim` and the hidden worker modes |
//! | `command.rs` | `cotenant lab`: runs experiments, prints and writes their outcomes |
//! | `sim/` | `cotenant sim`: the simulator's commands, tables and charts |
//! | `runner/` | starting a run's processes at one instant, collecting their reports by a deadline |
//! | `host.rs` | host facts and the quiet-host check before each run |
//! | `overcommit.rs` | Figures 2 and 3: one process, 1 to 4 × CPUs threads, with and without a lock |
//! | `quota.rs` | Figure 5: quotas in real cgroups, including a Go program (`gobuild.rs`) |
//! | `neighbours/` | Figure 7 (and `factor`, Figure 8, and `headline`): P processes, pool kinds, two settings |
//! | `burst.rs` | §4: a bursty and a steady tenant, quotas against adaptive pools |
//! | `fairness.rs` | A alone, then B: CPU shares over time and Jain's index |
//! | `plot.rs` | line charts as SVG and PNG (plotters), side by side in one picture if asked |
//! | `runtimes.rs` | Table 2: what each language runtime believes about its CPUs |
//! | `isolation/` | seed 003: an HTTP server next to a batch job, every isolation option |
//! | `tenants.rs` | the server (A) and the batch job (B) of `isolation`, as hidden modes |
//! | `loadgen.rs` | the open-loop HTTP load generator of `isolation` |
//! | `throttling/` | seed 001: Table II on this kernel, rewrites, and the user-space CPU budget |
//! | `spin/` | seed 004: a model of WiredTiger's snapshot wait, per waiting strategy, restricted and inverted |
//! | `sizing.rs` | seed 002: pool sizes 1 to 256 against I/O delays, and the elastic pool |
//!
//! Every experiment returns an [`Outcome`]; `command.rs` prints it and writes
//! `DIR/<experiment>/{results.csv, results.json, report.md, <chart>.svg, <chart>.png}`. Rows
//! reach the files as they are measured too ([`Rows::push`]), so that a run stopped half-way
//! keeps them.

pub mod args;
pub mod async_items;
pub mod burst;
pub mod command;
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
pub mod sim;
pub mod sizing;
pub mod spin;
pub mod tenants;
pub mod throttling;
pub mod worker;
pub mod workload;

/// Real cgroups and the cleanup registry live in `cotenant-ops`, shared with the CLI and tests.
pub use cotenant_ops::cgroup;

use std::sync::Mutex;

use serde::Serialize;

/// One raw row: a flat JSON object (numbers and strings only).
pub type Row = serde_json::Map<String, serde_json::Value>;

/// Where every row goes as soon as it is pushed, besides its [`Rows`]: see [`set_row_sink`].
pub type RowSink = Box<dyn FnMut(&Row) + Send>;

static ROW_SINK: Mutex<Option<RowSink>> = Mutex::new(None);

/// Sets (or with `None` clears) the sink every [`Rows::push`] hands its row to at once:
/// `command.rs` sets one for each experiment run with `--out`, which keeps `results.csv` and
/// `results.json` up to date while the experiment runs. Experiments need not know.
pub fn set_row_sink(sink: Option<RowSink>) {
    *ROW_SINK.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = sink;
}

/// The rows of an [`Outcome`], in the order measured. Read as a slice; added to only with
/// [`push`](Rows::push), which also hands each row to the row sink, if one is set.
#[derive(Debug, Default, Clone, Serialize)]
#[serde(transparent)]
pub struct Rows(Vec<Row>);

impl Rows {
    /// Appends `row` once the configuration it measures has ended, and hands it to the row sink.
    pub fn push(&mut self, row: Row) {
        if let Some(sink) = ROW_SINK.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).as_mut() {
            sink(&row);
        }
        self.0.push(row);
    }
}

impl std::ops::Deref for Rows {
    type Target = [Row];

    fn deref(&self) -> &[Row] {
        &self.0
    }
}

/// Marks `row` as the record of a failed run (`failed` = true, `failure` = why): its
/// configuration's keys and no figures. `command.rs` lists such rows in the report and exits
/// with a failure status.
pub fn failed_row(mut row: Row, why: &str) -> Row {
    row.insert("failed".into(), true.into());
    row.insert("failure".into(), why.into());
    row
}

/// The [`Row`] of a typed row: each experiment declares its rows as `#[derive(Serialize)]`
/// structs of numbers and strings (optional figures `#[serde(skip_serializing_if =
/// "Option::is_none")]`), and this turns one into the flat JSON object the output files are made
/// of. Keys come out sorted, as they always have (`serde_json::Map` is a sorted map here).
///
/// Panics only if `typed` is not a struct of plain fields, which is a bug in the row's type.
pub fn row_of(typed: &impl Serialize) -> Row {
    match serde_json::to_value(typed) {
        Ok(serde_json::Value::Object(row)) => row,
        other => panic!("a lab row must serialize to a flat JSON object, got {other:?}"),
    }
}

/// Whether `row` records a failed run ([`failed_row`]).
pub fn is_failed(row: &Row) -> bool {
    row.get("failed") == Some(&serde_json::Value::Bool(true))
}

/// What one experiment produced: everything the output files are made of.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Raw rows, one flat JSON object per measured configuration and repeat (numbers and
    /// strings only): the lines of `results.csv` (columns in first-seen order) and the `rows`
    /// of `results.json`. A failed run has a row too ([`failed_row`]).
    pub rows: Rows,
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

impl Outcome {
    /// An outcome that only says why the experiment was skipped (`why` without a full stop).
    pub fn skipped(why: impl std::fmt::Display) -> Outcome {
        Outcome { report: format!("Skipped: {why}.\n"), ..Outcome::default() }
    }
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
    /// Charts drawn to the right of this one, in the same picture (each with its own axes;
    /// their own `file_stem` and `beside` are not used).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub beside: Vec<Chart>,
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
    /// The cgroup layout `experiment` needs, or, where real cgroups cannot be made, the outcome
    /// that says it was skipped and why.
    pub fn cgroups_for(&self, experiment: &str) -> Result<&cgroup::Layout, Box<Outcome>> {
        self.layout.as_ref().map_err(|why| {
            Box::new(Outcome::skipped(format!("the {experiment} experiment needs real cgroups ({why})")))
        })
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn marked(n: u64) -> Row {
        let mut row = Row::new();
        row.insert("sink_test".into(), n.into());
        row
    }

    #[test]
    fn each_row_reaches_the_sink_as_it_is_pushed() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink_seen = seen.clone();
        // Other tests may push rows meanwhile: only this test's are kept.
        set_row_sink(Some(Box::new(move |row: &Row| {
            if row.contains_key("sink_test") {
                sink_seen.lock().unwrap().push(row.clone());
            }
        })));
        let mut rows = Rows::default();
        rows.push(marked(1));
        assert_eq!(*seen.lock().unwrap(), vec![marked(1)], "handed over at once");
        rows.push(marked(2));
        set_row_sink(None);
        rows.push(marked(3));
        assert_eq!(*seen.lock().unwrap(), vec![marked(1), marked(2)], "no sink, nothing handed over");
        assert_eq!(rows.len(), 3);
        assert_eq!(
            serde_json::to_value(&rows).unwrap(),
            serde_json::json!([{"sink_test": 1}, {"sink_test": 2}, {"sink_test": 3}])
        );
    }

    #[test]
    fn a_failed_row_keeps_its_configuration_and_says_why() {
        let mut row = Row::new();
        row.insert("pool".into(), "adaptive".into());
        assert!(!is_failed(&row));
        let failed = failed_row(row, "killed");
        assert!(is_failed(&failed));
        assert_eq!(failed["pool"], "adaptive");
        assert_eq!(failed["failure"], "killed");
    }
}

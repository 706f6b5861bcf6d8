//! `cotenant lab <experiment>`: runs an experiment, prints its report (or JSON), and with
//! `--out DIR` writes `DIR/<experiment>/{results.json, results.csv, report.md, charts}`.
//!
//! Before the lab creates anything it hands its signals to `lab/cgroup.rs`, which undoes
//! everything the lab made on SIGINT, SIGTERM, SIGHUP or SIGQUIT. With `--out`, the files are
//! written as the experiment goes ([`Progress`]): `report.md` says the results are partial
//! until the final files replace them, so a stopped run keeps every row it measured. A failed
//! run (a worker that hung or crashed) has a row of its own, is listed in the report, and makes
//! the lab exit with a failure status once every experiment has run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use crate as lab;
use crate::args::{Experiment, LabArgs, LabCommand};
use crate::{Lab, Outcome};

/// The experiments `all` runs, in order.
const ALL: [Experiment; 13] = [
    Experiment::Runtimes,
    Experiment::Overcommit,
    Experiment::Contention,
    Experiment::Quota,
    Experiment::Neighbours,
    Experiment::Factor,
    Experiment::GoNeighbours,
    Experiment::Burst,
    Experiment::Fairness,
    Experiment::Isolation,
    Experiment::Throttling,
    Experiment::Spin,
    Experiment::Sizing,
];

/// What `--json` prints and `results.json` holds (the host facts are generic for the tests).
#[derive(Serialize)]
struct Results<'a, H: Serialize = lab::host::HostFacts> {
    experiment: &'static str,
    host: &'a H,
    rows: &'a [serde_json::Map<String, serde_json::Value>],
    summary: &'a serde_json::Value,
    verdicts: &'a [String],
}

/// `cotenant lab <experiment>`: runs the experiment (every one for `all`, in turn), prints
/// each outcome and, with `--out`, writes it under `DIR/<experiment>/` (rows as they are
/// measured); `lab clean` removes what killed labs left instead. Exits with failure when a
/// run failed. Each experiment's subcommand takes only the flags it reads (clap refuses the
/// others); the experiments read them as one [`LabArgs`].
pub fn run(command: &LabCommand) -> anyhow::Result<ExitCode> {
    let args = &command.lab_args();
    // Options that parse one by one but do not go together: refused before anything starts.
    lab::neighbours::check_items(args).map_err(cotenant_ops::usage::UsageError::new)?;
    if args.experiment == Experiment::Clean {
        return clean();
    }
    // Before anything is created: from here on a signal removes whatever the lab made.
    lab::cgroup::install_signal_cleanup()?;
    // The default pools of every worker and tenant share the lab's own token set (runner/child.rs):
    // recorded before any of them can create it, removed when the lab ends however it ends.
    lab::cgroup::record_token_set(lab::neighbours::LAB_TOKENS)?;
    let _lab_set = LabSetCleanup;
    // The temporary build folders (`private_dir::cache_dir`'s fallback) go when the run ends,
    // however it ends.
    let _temp_folders = lab::cgroup::RemoveTempFolders;
    let lab = Lab::new()?;
    let experiments: Vec<Experiment> =
        if args.experiment == Experiment::All { ALL.to_vec() } else { vec![args.experiment] };
    let mut failed_runs = 0;
    for experiment in experiments {
        let dir = args.out.as_ref().map(|out| out.join(experiment.name()));
        if let Some(dir) = &dir {
            let mut progress = Progress::begin(dir.clone(), experiment, &lab)?;
            let mut warned = false;
            lab::set_row_sink(Some(Box::new(move |row: &lab::Row| {
                if let Err(e) = progress.add(row) {
                    if !std::mem::replace(&mut warned, true) {
                        let name = experiment.name();
                        eprintln!("lab {name}: the partial results are not kept up to date: {e:#}");
                    }
                }
            })));
        }
        let outcome = run_one(experiment, &lab, args);
        lab::set_row_sink(None);
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                if let Some(dir) = &dir {
                    // The rows measured stay; the report says why there are no more.
                    let _ = write_output(dir, "report.md", &interrupted_report(experiment, &lab, Some(&e)));
                }
                return Err(e);
            }
        };
        let failed = outcome.rows.iter().filter(|row| lab::is_failed(row)).count();
        if failed > 0 {
            eprintln!("lab {}: {failed} run(s) failed; see the report's \"Failed runs\"", experiment.name());
            failed_runs += failed;
        }
        emit(experiment, &lab, args, &outcome)?;
    }
    Ok(ExitCode::from(if failed_runs > 0 { cotenant_ops::exit::FAILURE } else { cotenant_ops::exit::OK }))
}

/// Removes the lab's token set when the lab ends, however it ends (a signal's thread removes
/// it itself, see `lab/cgroup.rs`): the workers' default pools create it; `lab clean` removes
/// one a killed lab left.
struct LabSetCleanup;

impl Drop for LabSetCleanup {
    fn drop(&mut self) {
        // Another lab of this user still running uses the same set between its runs too.
        if !lab::runner::running_labs().is_empty() {
            return;
        }
        if let Err(why) = lab::cgroup::remove_token_set(lab::neighbours::LAB_TOKENS) {
            eprintln!("lab: {why}");
        }
    }
}

/// `DIR/<experiment>/` while the experiment runs. `report.md` says the results are partial
/// from the start; `results.json` (with `"partial": true`) and `results.csv` are rewritten with
/// every row as it is measured, each replaced whole (`private_dir::write_file`: a new file
/// renamed over the old, never written through a symbolic link). The final files of [`emit`]
/// replace all three when the experiment ends.
struct Progress {
    dir: PathBuf,
    experiment: Experiment,
    host: serde_json::Value,
    rows: Vec<lab::Row>,
}

impl Progress {
    /// Creates the folder and writes the partial report and empty results.
    fn begin(dir: PathBuf, experiment: Experiment, lab: &Lab) -> anyhow::Result<Progress> {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        write_output(&dir, "report.md", &interrupted_report(experiment, lab, None))?;
        let progress = Progress { dir, experiment, host: serde_json::to_value(&lab.host)?, rows: Vec::new() };
        progress.write_rows()?;
        Ok(progress)
    }

    /// Adds a row measured just now, and rewrites the results with it.
    fn add(&mut self, row: &lab::Row) -> anyhow::Result<()> {
        self.rows.push(row.clone());
        self.write_rows()
    }

    fn write_rows(&self) -> anyhow::Result<()> {
        let results = serde_json::json!({
            "experiment": self.experiment.name(),
            "host": self.host,
            "rows": self.rows,
            "summary": null,
            "verdicts": [],
            "partial": true,
        });
        // The CSV first: a reader that finds a row in results.json finds it in the CSV too.
        write_output(&self.dir, "results.csv", &csv_text(&self.rows)?)?;
        write_output(&self.dir, "results.json", &serde_json::to_string_pretty(&results)?)
    }
}

/// Writes `dir/name` whole, as the final files are written (never through a symbolic link).
fn write_output(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    cotenant_ops::private_dir::write_file(&dir.join(name), text.as_bytes(), 0o644)
}

/// The report of a run that has not ended: its title, and why its results are partial.
fn interrupted_report(experiment: Experiment, lab: &Lab, error: Option<&anyhow::Error>) -> String {
    let why = match error {
        Some(e) => format!("The run stopped with an error: {e:#}."),
        None => "The run did not finish: it was stopped (a signal, a crash) or is still running.".to_owned(),
    };
    format!(
        "{}Interrupted: partial results. {why} `results.csv` and `results.json` (`\"partial\": true`) \
         hold every row measured before it stopped; the tables, charts and verdicts are written when a \
         run ends.\n",
        title(experiment, lab)
    )
}

/// `rows` as CSV text: the columns are every key, in the order first seen; no rows, no text.
fn csv_text(rows: &[lab::Row]) -> anyhow::Result<String> {
    if rows.is_empty() {
        return Ok(String::new());
    }
    let mut columns: Vec<&String> = Vec::new();
    for row in rows {
        for key in row.keys() {
            if !columns.contains(&key) {
                columns.push(key);
            }
        }
    }
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(&columns)?;
    for row in rows {
        writer.write_record(columns.iter().map(|c| match row.get(*c) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        }))?;
    }
    let bytes = writer.into_inner().map_err(|e| anyhow::anyhow!("writing CSV: {}", e.error()))?;
    Ok(String::from_utf8(bytes)?)
}

fn run_one(experiment: Experiment, lab: &Lab, args: &LabArgs) -> anyhow::Result<Outcome> {
    use lab::neighbours;
    match experiment {
        Experiment::Overcommit => lab::overcommit::run(lab, args, false),
        Experiment::Contention => lab::overcommit::run(lab, args, true),
        Experiment::Quota => lab::quota::run(lab, args),
        Experiment::Neighbours => neighbours::run_neighbours(lab, args),
        Experiment::Factor => neighbours::run_plan(lab, args, &neighbours::Plan::factor(lab, args), "factor"),
        Experiment::GoNeighbours => neighbours::run_go(lab, args),
        Experiment::Isolation => lab::isolation::run(lab, args),
        Experiment::Throttling => lab::throttling::run(lab, args),
        Experiment::Spin => lab::spin::run(lab, args),
        Experiment::Sizing => lab::sizing::run(lab, args),
        Experiment::Headline => {
            neighbours::run_plan(lab, args, &neighbours::Plan::headline(lab, args), "headline")
        }
        Experiment::Burst => lab::burst::run(lab, args),
        Experiment::Fairness => lab::fairness::run(lab, args),
        Experiment::Runtimes => lab::runtimes::run(args),
        Experiment::All | Experiment::Clean => unreachable!("handled by the caller"),
    }
}

/// The report's title and host line.
fn title(experiment: Experiment, lab: &Lab) -> String {
    let h = &lab.host;
    format!(
        "# lab {}\n\nhost: {} CPUs, Linux {}, cgroup {}; load average before: {}; real cgroups {}\n\n",
        experiment.name(),
        h.cpus,
        h.kernel,
        h.cgroup_version,
        h.loadavg_before,
        h.cgroups
    )
}

/// The full Markdown report: title, host, the experiment's tables, failed runs, charts and
/// verdicts.
fn report(experiment: Experiment, lab: &Lab, outcome: &Outcome, with_charts: bool) -> String {
    let mut out = title(experiment, lab);
    out.push_str(&outcome.report);
    let failed: Vec<&lab::Row> = outcome.rows.iter().filter(|row| lab::is_failed(row)).collect();
    if !failed.is_empty() {
        let _ = writeln!(
            out,
            "\n## Failed runs\n\n{} run(s) failed and are left out of the figures above (their rows have \
             `failed` = true):\n",
            failed.len()
        );
        for row in failed {
            let _ = writeln!(out, "- {}", describe_failed(row));
        }
    }
    if with_charts && !outcome.charts.is_empty() {
        out.push_str("\n## Charts\n\n");
        for chart in &outcome.charts {
            let _ = writeln!(out, "![{}]({}.svg)\n", chart.title, chart.file_stem);
        }
    }
    out.push_str("\n## Verdict\n\n");
    if outcome.verdicts.is_empty() {
        out.push_str("- (no verdict: not enough configurations in this run)\n");
    }
    for v in &outcome.verdicts {
        let _ = writeln!(out, "- {v}");
    }
    out
}

/// A failed run's row in one line: its configuration, then why it failed.
fn describe_failed(row: &lab::Row) -> String {
    let config: Vec<String> = row
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "failed" | "failure"))
        .map(|(key, value)| match value {
            serde_json::Value::String(s) => format!("{key} {s}"),
            other => format!("{key} {other}"),
        })
        .collect();
    let why = row.get("failure").and_then(serde_json::Value::as_str).unwrap_or("no reason recorded");
    format!("{}: {why}", config.join(", "))
}

/// One experiment's results as one line of JSON: `lab all --json` prints JSON Lines, one
/// document per experiment, never pretty documents back to back.
fn json_line<H: Serialize>(results: &Results<H>) -> serde_json::Result<String> {
    serde_json::to_string(results)
}

fn emit(experiment: Experiment, lab: &Lab, args: &LabArgs, outcome: &Outcome) -> anyhow::Result<()> {
    let results = Results {
        experiment: experiment.name(),
        host: &lab.host,
        rows: &outcome.rows,
        summary: &outcome.summary,
        verdicts: &outcome.verdicts,
    };
    if args.json {
        println!("{}", json_line(&results)?);
    } else {
        print!("{}", report(experiment, lab, outcome, false));
    }
    let Some(out) = &args.out else { return Ok(()) };
    let dir = out.join(experiment.name());
    write_files(
        &dir,
        &serde_json::to_string_pretty(&results)?,
        &report(experiment, lab, outcome, true),
        outcome,
    )?;
    eprintln!("lab {}: wrote {}", experiment.name(), dir.display());
    for chart in &outcome.charts {
        eprintln!(
            "lab {}: chart {}",
            experiment.name(),
            dir.join(format!("{}.png", chart.file_stem)).display()
        );
    }
    Ok(())
}

/// Writes `dir/{results.json, results.csv, report.md}` and the outcome's charts (also used by
/// `cotenant sim`, whose outputs have the lab's shape).
pub(crate) fn write_files(
    dir: &Path,
    results_json: &str,
    report_md: &str,
    outcome: &Outcome,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Root may write into a shared --out folder: a symbolic link planted at a file's name is
    // replaced, never written through, and `dir` itself being a link is refused (issue 34).
    let write = |name: &str, text: &str| -> anyhow::Result<()> {
        cotenant_ops::private_dir::write_file(&dir.join(name), text.as_bytes(), 0o644)
    };
    // Data first: a chart that fails to render must not lose the measurements.
    write("results.json", results_json)?;
    write_csv(&dir.join("results.csv"), &outcome.rows)?;
    write("report.md", report_md)?;
    for chart in &outcome.charts {
        lab::plot::render(chart, dir)?;
    }
    Ok(())
}

/// `rows` as CSV ([`csv_text`]), written by rename (`private_dir::write_file`), never through a
/// link planted at the file's name.
fn write_csv(path: &Path, rows: &[lab::Row]) -> anyhow::Result<()> {
    let text = csv_text(rows).with_context(|| format!("writing {}", path.display()))?;
    cotenant_ops::private_dir::write_file(path, text.as_bytes(), 0o644)
}

/// `lab clean`: removes `cotenant-lab-*` cgroups whose lab is gone, kills lab workers whose
/// lab is gone, and removes the lab's token set unless a lab is running or processes are
/// members of it.
fn clean() -> anyhow::Result<ExitCode> {
    let mut removed = 0;
    match lab::cgroup::layout() {
        Ok(layout) => {
            for dir in lab::cgroup::sweep(&layout, lab::cgroup::LAB_PREFIX, false) {
                println!("removed cgroup {}", dir.display());
                removed += 1;
            }
        }
        Err(why) => println!("cgroups not checked: {why}"),
    }
    for (pid, what) in lab::runner::orphan_workers() {
        // SAFETY: kill has no memory effects; the pid was just read from /proc.
        if unsafe { libc::kill(pid as i32, libc::SIGKILL) } == 0 {
            println!("killed {what} (pid {pid})");
            removed += 1;
        }
    }
    // The lab's token set (left by a killed run): not while a lab runs, whose workers may be
    // between two runs, or about to join it (the lab itself is no member).
    let set = lab::neighbours::LAB_TOKENS;
    let labs = lab::runner::running_labs();
    if !labs.is_empty() && cotenant::tokens::HostTokens::exists(set) {
        for (pid, what) in &labs {
            println!("kept host token set {set}: in use by the running lab {what} (pid {pid})");
        }
    } else if labs.is_empty() {
        match lab::cgroup::remove_token_set(set) {
            Ok(true) => {
                println!("removed host token set {set}");
                removed += 1;
            }
            Ok(false) => {}
            Err(why) => println!("{why}"),
        }
    }
    if removed == 0 {
        println!("nothing to clean");
    }
    Ok(ExitCode::from(cotenant_ops::exit::OK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_output_is_one_line_per_experiment() {
        let rows = vec![row(&[("pool", json!("adaptive")), ("report", json!("two\nlines"))])];
        let summary = json!({"verdict": "a\nb"});
        let host = json!({"cpus": 2});
        let verdicts = vec!["x".to_owned()];
        let results = Results {
            experiment: "neighbours",
            host: &host,
            rows: &rows,
            summary: &summary,
            verdicts: &verdicts,
        };
        let line = json_line(&results).unwrap();
        assert!(!line.contains('\n'), "{line}");
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back["rows"][0]["report"], "two\nlines");
    }

    fn row(pairs: &[(&str, serde_json::Value)]) -> lab::Row {
        pairs.iter().map(|(key, value)| ((*key).to_owned(), value.clone())).collect()
    }

    #[test]
    fn partial_results_have_every_column_in_the_order_first_seen() {
        let rows = [
            row(&[("load", json!(0.7)), ("pool", json!("ignorant"))]),
            lab::failed_row(row(&[("pool", json!("adaptive"))]), "killed"),
        ];
        assert_eq!(
            csv_text(&rows).unwrap(),
            "load,pool,failed,failure\n0.7,ignorant,,\n,adaptive,true,killed\n"
        );
        assert_eq!(csv_text(&[]).unwrap(), "", "no rows yet: an empty file");
    }

    #[test]
    fn a_failed_run_is_listed_with_its_configuration_and_reason() {
        let why = "lab child pid 7 did not finish within 3 s; killed";
        let failed = lab::failed_row(row(&[("processes", json!(2)), ("setting", json!("one cgroup"))]), why);
        assert_eq!(describe_failed(&failed), format!("processes 2, setting one cgroup: {why}"));
    }
}

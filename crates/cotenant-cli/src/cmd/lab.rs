//! `cotenant lab <experiment>`: runs an experiment, prints its report (or JSON), and with
//! `--out DIR` writes `DIR/<experiment>/{results.json, results.csv, report.md, charts}`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use crate::args::{Experiment, LabArgs};
use crate::lab::{self, Lab, Outcome};

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

#[derive(Serialize)]
struct Results<'a> {
    experiment: &'static str,
    host: &'a lab::host::HostFacts,
    rows: &'a [serde_json::Map<String, serde_json::Value>],
    summary: &'a serde_json::Value,
    verdicts: &'a [String],
}

pub fn run(args: &LabArgs) -> anyhow::Result<ExitCode> {
    if args.experiment == Experiment::Clean {
        return clean();
    }
    anyhow::ensure!(
        args.round_trip_us.is_none() || matches!(args.experiment, Experiment::Spin | Experiment::All),
        "--round-trip-us applies to `cotenant lab spin` only, not to `{}`",
        args.experiment.name()
    );
    let lab = Lab::new()?;
    // The workers' default pools share the lab's own token set; it goes when the lab ends.
    let _lab_set = LabSetCleanup;
    let experiments: Vec<Experiment> =
        if args.experiment == Experiment::All { ALL.to_vec() } else { vec![args.experiment] };
    for experiment in experiments {
        let outcome = run_one(experiment, &lab, args)?;
        emit(experiment, &lab, args, &outcome)?;
    }
    Ok(ExitCode::from(crate::exit::OK))
}

/// Removes the lab's token set, if there is one and no live worker is a member of it (another
/// lab's); `None`: there is none.
fn remove_lab_set() -> Option<Result<(), cotenant::tokens::TokensError>> {
    use cotenant::tokens::list;
    let key = list::resolve(lab::neighbours::LAB_TOKENS).ok()?;
    match list::list() {
        Ok(sets) if sets.iter().any(|s| s.key == key) => Some(list::remove(key, false)),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    }
}

/// Removes the lab's token set when the lab ends, however it ends but by a signal (the
/// workers' default pools create it; `lab clean` removes one a killed lab left).
struct LabSetCleanup;

impl Drop for LabSetCleanup {
    fn drop(&mut self) {
        if let Some(Err(e)) = remove_lab_set() {
            eprintln!("lab: {e}");
        }
    }
}

fn run_one(experiment: Experiment, lab: &Lab, args: &LabArgs) -> anyhow::Result<Outcome> {
    use lab::neighbours;
    match experiment {
        Experiment::Overcommit => lab::overcommit::run(lab, args, false),
        Experiment::Contention => lab::overcommit::run(lab, args, true),
        Experiment::Quota => lab::quota::run(lab, args),
        Experiment::Neighbours => {
            neighbours::run_plan(lab, args, &neighbours::Plan::neighbours(lab, args), "neighbours")
        }
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

/// The full Markdown report: title, host, the experiment's tables, charts and verdicts.
fn report(experiment: Experiment, lab: &Lab, outcome: &Outcome, with_charts: bool) -> String {
    let h = &lab.host;
    let mut out = format!(
        "# lab {}\n\nhost: {} CPUs, Linux {}, cgroup {}; load average before: {}; real cgroups {}\n\n",
        experiment.name(),
        h.cpus,
        h.kernel,
        h.cgroup_version,
        h.loadavg_before,
        h.cgroups
    );
    out.push_str(&outcome.report);
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

fn emit(experiment: Experiment, lab: &Lab, args: &LabArgs, outcome: &Outcome) -> anyhow::Result<()> {
    let results = Results {
        experiment: experiment.name(),
        host: &lab.host,
        rows: &outcome.rows,
        summary: &outcome.summary,
        verdicts: &outcome.verdicts,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
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
    let write = |name: &str, text: &str| -> anyhow::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
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

/// `rows` as CSV: the columns are every key, in the order first seen.
fn write_csv(path: &Path, rows: &[serde_json::Map<String, serde_json::Value>]) -> anyhow::Result<()> {
    let mut columns: Vec<&String> = Vec::new();
    for row in rows {
        for key in row.keys() {
            if !columns.contains(&key) {
                columns.push(key);
            }
        }
    }
    let mut writer = csv::Writer::from_path(path).with_context(|| format!("writing {}", path.display()))?;
    writer.write_record(&columns)?;
    for row in rows {
        writer.write_record(columns.iter().map(|c| match row.get(*c) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        }))?;
    }
    writer.flush().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// `lab clean`: removes `cotenant-lab-*` cgroups whose lab is gone, and kills lab workers
/// whose lab is gone.
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
    // The lab's token set (left by a killed run): not while a running lab's workers use it.
    match remove_lab_set() {
        Some(Ok(())) => {
            println!("removed host token set {}", lab::neighbours::LAB_TOKENS);
            removed += 1;
        }
        Some(Err(e)) => println!("{e}"),
        None => {}
    }
    if removed == 0 {
        println!("nothing to clean");
    }
    Ok(ExitCode::from(crate::exit::OK))
}

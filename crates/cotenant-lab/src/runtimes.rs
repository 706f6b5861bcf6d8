//! Seed 000 Table 2, updated: what each language runtime believes about its CPUs, inside the
//! scenarios of issue 2 (quota 0.5, 1, 1.5 and 3 CPUs, a parent quota over an unlimited child,
//! cpuset {0}, affinity {0}) in real cgroups, next to `cotenant cpus`, under the correct value.
//!
//! Each probe is a few lines (`lab-probes/`), embedded with `include_str!`, written to a cache
//! directory and built there on first use (Go, Java, C++) or run by its interpreter (Python,
//! Node). Rust std, num_cpus and cotenant are probed by this binary's hidden `lab-probe` mode.
//! A missing toolchain fills its column with "not installed"; it is not an error.
//!
//! The lab runs the probes as root, so that directory is one only the invoking user can write:
//! `<cache>/cotenant/lab-probes`, where `<cache>` is `$XDG_CACHE_HOME` or `~/.cache` (checked,
//! and made where missing, by [`cotenant_ops::private_dir::cache_dir`]; a fresh `mkdtemp` folder
//! without either). The sources are written with [`cotenant_ops::private_dir::write_file`], which
//! replaces a symbolic link rather than writing through it; the compilers write their outputs
//! into the same folder. Go's build cache and settings are kept as safe as the worker's
//! ([`super::gobuild::confine_go`]).
//!
//! Every compiler and probe is a child of the lab (`runner::run_bounded_output`): the leader of
//! its own process group, killed with everything it started on a signal to the lab, and when
//! its deadline passes ([`BUILD_DEADLINE`] for a build, [`PROBE_DEADLINE`] for a probe or a
//! version check), which fails that cell, not the experiment.
//!
//! A second table runs the same probes through `cotenant run` (issue 5), and the C, C++ and
//! Python ones through `cotenant run --preload`, to show which runtimes the environment
//! variables (or the shim) correct.

use std::fmt::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

use super::runner::{is_not_found, run_bounded_output, BUILD_DEADLINE, PROBE_DEADLINE};
use super::Outcome;
use cotenant_ops::cgroup::{Cgroup, Layout, LAB_PREFIX};
use cotenant_ops::private_dir;

/// The probes' folder in the user's cache directory (see [`private_dir::cache_dir`]).
const PROBES_DIR: &str = "lab-probes";
/// The mode of the probe sources written (their folder is private).
const SOURCE_MODE: u32 = 0o644;
/// The probe sources, as (file name, text).
const SOURCES: [(&str, &str); 6] = [
    ("probe.go", include_str!("../lab-probes/probe.go")),
    ("Probe.java", include_str!("../lab-probes/Probe.java")),
    ("probe.py", include_str!("../lab-probes/probe.py")),
    ("probe.js", include_str!("../lab-probes/probe.js")),
    ("probe.cpp", include_str!("../lab-probes/probe.cpp")),
    ("probe-omp.c", include_str!("../lab-probes/probe-omp.c")),
];

/// The runtimes in table order (cotenant first).
pub const RUNTIMES: [&str; 11] =
    ["cotenant", "Go", "Java", "Python", "Node", "C++", "OpenMP", "Rust std", "rayon", "tokio", "num_cpus"];

/// The columns of the "via `cotenant run`" table: runtimes that read a variable it sets, and
/// (with `--preload`) those that read only the C library.
pub const VIA_RUN: [&str; 7] =
    ["Go", "Java", "OpenMP", "rayon", "tokio", "Python --preload", "C++ --preload"];

/// The prefix of a "via `cotenant run`" cell's runtime name.
const RUN_PREFIX: &str = "run: ";

/// One scenario: a quota on the probe's cgroup, a quota on its parent only, a cpuset or an
/// affinity mask.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scenario {
    /// No limit at all (the baseline).
    NoLimit,
    /// A quota of this many CPUs on the probe's cgroup.
    Quota(f64),
    /// A quota of this many CPUs on the parent, the probe in an unlimited child.
    ParentQuota(f64),
    /// cpuset {0}.
    Cpuset0,
    /// Affinity {0}.
    Affinity0,
}

impl Scenario {
    /// Every scenario, in table order.
    pub const ALL: [Scenario; 8] = [
        Scenario::NoLimit,
        Scenario::Quota(0.5),
        Scenario::Quota(1.0),
        Scenario::Quota(1.5),
        Scenario::Quota(3.0),
        Scenario::ParentQuota(1.0),
        Scenario::Cpuset0,
        Scenario::Affinity0,
    ];

    /// Its name in the table.
    pub fn name(self) -> String {
        match self {
            Scenario::NoLimit => "no limit".into(),
            Scenario::Quota(q) => format!("quota {q}"),
            Scenario::ParentQuota(q) => format!("parent quota {q}, child unlimited"),
            Scenario::Cpuset0 => "cpuset {0}".into(),
            Scenario::Affinity0 => "affinity {0}".into(),
        }
    }

    /// Whether it needs a real cgroup with a limit.
    fn needs_cgroups(self) -> bool {
        !matches!(self, Scenario::NoLimit | Scenario::Affinity0)
    }
}

/// The threads a CPU-bound pool should have in `scenario` on a host where this process may use
/// `cpus` CPUs and the baseline (no limit) answer is `baseline`: the limit rounded down (a
/// thread the quota cannot pay for is throttled every period), at least 1, and never more than
/// the baseline (the lab itself may run in a limited container).
pub fn correct(scenario: Scenario, cpus: u32, baseline: u32) -> u32 {
    let limit = match scenario {
        Scenario::NoLimit => f64::from(cpus),
        Scenario::Quota(q) | Scenario::ParentQuota(q) => q.min(f64::from(cpus)),
        Scenario::Cpuset0 | Scenario::Affinity0 => 1.0,
    };
    ((limit + 1e-9).floor() as u32).clamp(1, baseline.max(1))
}

/// A probe's printed number (trimmed), or what was wrong with it.
pub fn parse_count(text: &str) -> Result<u32, String> {
    let t = text.trim();
    t.parse::<u32>()
        .map_err(|_| format!("printed {:?}, not a CPU count", t.chars().take(40).collect::<String>()))
}

/// `lab-probe`: prints `{"rust_std": N, "num_cpus": N, "rayon": N, "tokio": N, "cotenant": N}`:
/// the real crates' answers (rayon's global pool, a tokio multi-thread runtime's workers).
pub fn probe_main() -> anyhow::Result<ExitCode> {
    let rust_std = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cotenant =
        cotenant::cpus::detect().context("cotenant::cpus::detect")?.threads(cotenant::Rounding::Floor);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .build()
        .context("starting a tokio runtime")?
        .metrics()
        .num_workers();
    println!(
        "{}",
        serde_json::json!({
            "rust_std": rust_std,
            "num_cpus": num_cpus::get(),
            "rayon": rayon::current_num_threads(),
            "tokio": tokio,
            "cotenant": cotenant,
        })
    );
    Ok(ExitCode::from(cotenant_ops::exit::OK))
}

/// How to run one runtime's probe, or why it cannot run.
struct Probe {
    runtime: &'static str,
    command: Result<(PathBuf, Vec<String>), String>,
}

/// Runs a tool (a compiler, or an interpreter's `--version`) to its end within `limit` and
/// returns its stdout; `what` names it. A program that does not exist is "not installed".
fn run_tool(command: &mut Command, what: &str, limit: Duration) -> Result<String, String> {
    match run_bounded_output(command, limit) {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(format!("{what} failed: {}", out.stderr.lines().next().unwrap_or("no message"))),
        Err(e) if is_not_found(&e) => Err("not installed".into()),
        // Killed at its deadline, or not started: the error names the program (and the deadline).
        Err(e) => Err(format!("{what}: {e:#}")),
    }
}

/// Writes the probe sources into `dir`, a private folder (from [`private_dir::cache_dir`]),
/// replacing whatever is at their names, a symbolic link included.
fn write_sources(dir: &Path) -> anyhow::Result<()> {
    for (name, text) in SOURCES {
        private_dir::write_file(&dir.join(name), text.as_bytes(), SOURCE_MODE)?;
    }
    Ok(())
}

/// Writes the probe sources to `dir` (a private folder: see the module doc) and builds what
/// needs building.
fn prepare(dir: &Path) -> anyhow::Result<Vec<Probe>> {
    write_sources(dir)?;
    let go = {
        let go_build = |program: &str| {
            let mut c = Command::new(program);
            c.args(["build", "-o", "probe-go", "probe.go"]).current_dir(dir);
            super::gobuild::confine_go(&mut c, dir);
            run_tool(&mut c, "go build", BUILD_DEADLINE)
        };
        // Also look where Go installs itself when it is not on the PATH.
        go_build("go")
            .or_else(|e| {
                if e == "not installed" && Path::new("/usr/local/go/bin/go").exists() {
                    go_build("/usr/local/go/bin/go")
                } else {
                    Err(e)
                }
            })
            .map(|_| (dir.join("probe-go"), vec![]))
    };
    let java = run_tool(Command::new("javac").arg("Probe.java").current_dir(dir), "javac", BUILD_DEADLINE)
        .map(|_| (PathBuf::from("java"), vec!["-cp".into(), dir.display().to_string(), "Probe".into()]));
    let cpp = run_tool(
        Command::new("c++").args(["-O1", "-pthread", "-o", "probe-cpp", "probe.cpp"]).current_dir(dir),
        "c++",
        BUILD_DEADLINE,
    )
    .map(|_| (dir.join("probe-cpp"), vec![]));
    let openmp = run_tool(
        Command::new("cc").args(["-O1", "-fopenmp", "-o", "probe-omp", "probe-omp.c"]).current_dir(dir),
        "cc -fopenmp",
        BUILD_DEADLINE,
    )
    .map(|_| (dir.join("probe-omp"), vec![]));
    let interpreted = |program: &str, file: &str| -> Result<(PathBuf, Vec<String>), String> {
        run_tool(Command::new(program).arg("--version"), program, PROBE_DEADLINE)
            .map(|_| (PathBuf::from(program), vec![dir.join(file).display().to_string()]))
    };
    Ok(vec![
        Probe { runtime: "Go", command: go },
        Probe { runtime: "Java", command: java },
        Probe { runtime: "Python", command: interpreted("python3", "probe.py") },
        Probe { runtime: "Node", command: interpreted("node", "probe.js") },
        Probe { runtime: "C++", command: cpp },
        Probe { runtime: "OpenMP", command: openmp },
    ])
}

/// Runs a prepared probe to its end within [`PROBE_DEADLINE`] (killed with its process group
/// then, in a cgroup or not); its stdout.
fn run_bounded(mut command: Command) -> Result<String, String> {
    let out = run_bounded_output(&mut command, PROBE_DEADLINE).map_err(|e| format!("{e:#}"))?;
    if !out.status.success() {
        return Err(format!("failed ({}): {}", out.status, out.stderr.lines().next().unwrap_or("")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A command for `program args` in `cgroup` (if any), pinned to CPU 0 with `pin`.
fn command_in(cgroup: Option<&Cgroup>, program: &Path, args: &[String], pin: bool) -> Command {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match cgroup {
        Some(cg) => cg.command(program, &args, pin.then_some(0)),
        None => {
            let mut c = Command::new(program);
            c.args(&args);
            if pin {
                // SAFETY: between fork and exec only sched_setaffinity is called, on a set
                // prepared on the stack.
                unsafe {
                    c.pre_exec(|| {
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        libc::CPU_SET(0, &mut set);
                        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            }
            c
        }
    }
}

/// The cgroup for `scenario` (None for no limit and affinity, or without real cgroups).
fn scenario_cgroup(layout: &Layout, scenario: Scenario) -> anyhow::Result<Cgroup> {
    const PERIOD: u64 = 100_000;
    let quota_us = |q: f64| Some((q * PERIOD as f64).round() as u64);
    let (child, cpuset) = match scenario {
        Scenario::ParentQuota(_) => (true, None),
        Scenario::Cpuset0 => (false, Some("0")),
        _ => (false, None),
    };
    let cg =
        Cgroup::create(layout, LAB_PREFIX, "runtimes", child, cpuset).context("creating a lab cgroup")?;
    match scenario {
        Scenario::Quota(q) => Cgroup::set_quota(layout, cg.cpu_dir(false), quota_us(q), PERIOD)?,
        Scenario::ParentQuota(q) => Cgroup::set_quota(layout, cg.cpu_dir(false), quota_us(q), PERIOD)?,
        _ => {}
    }
    Ok(cg)
}

/// One cell of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Scenario name.
    pub scenario: String,
    /// Runtime name.
    pub runtime: String,
    /// What it printed, or why there is no number.
    pub value: Result<u32, String>,
    /// The correct value.
    pub correct: u32,
}

/// The row of one [`Cell`].
#[derive(Debug, Serialize)]
struct CellRow<'a> {
    /// Scenario name.
    scenario: &'a str,
    /// Runtime name (a column of the tables).
    runtime: &'a str,
    /// The thread count it printed (threads; null when there is no number).
    value: Option<u32>,
    /// Why there is no number (empty when there is one).
    note: &'a str,
    /// The correct thread count (threads).
    correct: u32,
    /// Whether it printed the correct count.
    is_correct: bool,
}

impl<'a> CellRow<'a> {
    /// The row of `c`.
    fn of(c: &'a Cell) -> CellRow<'a> {
        CellRow {
            scenario: &c.scenario,
            runtime: &c.runtime,
            value: c.value.as_ref().ok().copied(),
            note: c.value.as_ref().err().map_or("", String::as_str),
            correct: c.correct,
            is_correct: c.value.as_ref().ok() == Some(&c.correct),
        }
    }
}

/// The Markdown table of `columns` (cells whose runtime is not a column are left out): the
/// correct value first, wrong values in bold with a cross.
pub fn table(cells: &[Cell], columns: &[&str]) -> String {
    let mut out = String::from("| scenario | correct |");
    for r in columns {
        let _ = write!(out, " {} |", r.strip_prefix(RUN_PREFIX).unwrap_or(r));
    }
    out.push_str("\n|---|---:|");
    out.push_str(&"---:|".repeat(columns.len()));
    out.push('\n');
    let mut scenarios: Vec<&str> = Vec::new();
    for c in cells {
        if !scenarios.contains(&c.scenario.as_str()) {
            scenarios.push(&c.scenario);
        }
    }
    for s in scenarios {
        let row: Vec<&Cell> = cells.iter().filter(|c| c.scenario == s).collect();
        let correct = row.first().map_or(0, |c| c.correct);
        let _ = write!(out, "| {s} | {correct} |");
        for r in columns {
            let text = match row.iter().find(|c| c.runtime == *r).map(|c| &c.value) {
                Some(Ok(v)) if *v == correct => v.to_string(),
                Some(Ok(v)) => format!("**{v}** ✗"),
                Some(Err(why)) => why.clone(),
                None => "-".into(),
            };
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    out
}

/// "cotenant correct in 8 of 8 scenarios; Go 5 of 8; ..." for `columns` (runtimes without
/// a number are counted as "not run").
pub fn verdict(cells: &[Cell], columns: &[&str]) -> String {
    columns
        .iter()
        .map(|r| {
            let mine: Vec<&Cell> = cells.iter().filter(|c| c.runtime == *r).collect();
            let measured: Vec<&&Cell> = mine.iter().filter(|c| c.value.is_ok()).collect();
            if measured.is_empty() {
                return format!("{r} not run");
            }
            let right = measured.iter().filter(|c| c.value.as_ref().ok() == Some(&c.correct)).count();
            format!("{r} correct in {right} of {} scenarios", measured.len())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Runs the experiment.
pub fn run(args: &crate::args::LabArgs) -> anyhow::Result<Outcome> {
    let _ = args;
    let layout = cotenant_ops::cgroup::layout();
    let dir = private_dir::cache_dir(PROBES_DIR).context("choosing a private folder for the probes")?;
    let probes = prepare(&dir)?;
    let exe = std::env::current_exe().context("locating the cotenant binary")?;
    let cpus = cotenant::cpus::detect().context("detecting this host's CPUs")?.allowed_cpus();
    let mut cells: Vec<Cell> = Vec::new();
    let mut baseline = cpus;
    let mut skipped = Vec::new();
    for scenario in Scenario::ALL {
        let cgroup = match (&layout, scenario.needs_cgroups()) {
            (Ok(layout), true) if scenario == Scenario::Cpuset0 && !layout.has_cpuset() => {
                skipped.push(format!("{} (no cpuset controller)", scenario.name()));
                continue;
            }
            (Ok(layout), true) => Some(scenario_cgroup(layout, scenario)?),
            (Err(why), true) => {
                skipped.push(format!("{} ({why})", scenario.name()));
                continue;
            }
            (_, false) => None,
        };
        let pin = scenario == Scenario::Affinity0;
        eprintln!("lab runtimes: {}", scenario.name());
        let native =
            run_bounded(command_in(cgroup.as_ref(), &exe, &["lab-probe".to_owned()], pin)).and_then(|out| {
                serde_json::from_str::<serde_json::Value>(out.trim()).map_err(|e| format!("bad JSON: {e}"))
            });
        let field = |key: &str| -> Result<u32, String> {
            native.clone().and_then(|v| v[key].as_u64().map(|n| n as u32).ok_or_else(|| format!("no {key}")))
        };
        if scenario == Scenario::NoLimit {
            baseline = field("cotenant").unwrap_or(cpus);
        }
        let correct = correct(scenario, cpus, baseline);
        let mut add = |runtime: &str, value: Result<u32, String>| {
            cells.push(Cell { scenario: scenario.name(), runtime: runtime.into(), value, correct });
        };
        add("cotenant", field("cotenant"));
        add("Rust std", field("rust_std"));
        add("num_cpus", field("num_cpus"));
        add("rayon", field("rayon"));
        add("tokio", field("tokio"));
        for probe in &probes {
            let value = match &probe.command {
                Ok((program, pargs)) => run_bounded(command_in(cgroup.as_ref(), program, pargs, pin))
                    .and_then(|out| parse_count(&out))
                    .map_err(|e| format!("{} in {}: {e}", probe.runtime, scenario.name())),
                Err(why) => Err(why.clone()),
            };
            add(probe.runtime, value);
        }
        // The same probes started by `cotenant run` (and `--preload` for the C library readers).
        let via_run = |preload: bool, program: &Path, pargs: &[String]| -> Vec<String> {
            // --strict: a count that cannot be determined fails the probe rather than running it
            // unchanged and recording that as "via cotenant run".
            let mut args = vec!["run".to_owned(), "--strict".to_owned()];
            if preload {
                args.push("--preload".into());
            }
            args.push("--".into());
            args.push(program.display().to_string());
            args.extend(pargs.iter().cloned());
            args
        };
        let native_run =
            run_bounded(command_in(cgroup.as_ref(), &exe, &via_run(false, &exe, &["lab-probe".into()]), pin))
                .and_then(|out| {
                    serde_json::from_str::<serde_json::Value>(out.trim())
                        .map_err(|e| format!("bad JSON: {e}"))
                });
        for key in ["rayon", "tokio"] {
            let value = native_run
                .clone()
                .and_then(|v| v[key].as_u64().map(|n| n as u32).ok_or_else(|| format!("no {key}")));
            add(&format!("{RUN_PREFIX}{key}"), value);
        }
        for probe in &probes {
            let (column, preload) = match probe.runtime {
                "Go" | "Java" | "OpenMP" => (probe.runtime.to_owned(), false),
                "Python" | "C++" => (format!("{} --preload", probe.runtime), true),
                _ => continue,
            };
            let value = match &probe.command {
                Ok((program, pargs)) => {
                    run_bounded(command_in(cgroup.as_ref(), &exe, &via_run(preload, program, pargs), pin))
                        .and_then(|out| parse_count(&out))
                        .map_err(|e| format!("{column} via cotenant run in {}: {e}", scenario.name()))
                }
                Err(why) => Err(why.clone()),
            };
            add(&format!("{RUN_PREFIX}{column}"), value);
        }
    }
    let mut outcome = Outcome::default();
    for c in &cells {
        outcome.rows.push(super::row_of(&CellRow::of(c)));
    }
    let mut report = format!(
        "The thread count each runtime would use by default, in each scenario, on this host's {cpus} CPUs. \
         Correct: the limit rounded down, at least 1. Wrong values are in bold.\n\n{}",
        table(&cells, &RUNTIMES)
    );
    let via_run: Vec<String> = VIA_RUN.iter().map(|c| format!("{RUN_PREFIX}{c}")).collect();
    let via_run: Vec<&str> = via_run.iter().map(String::as_str).collect();
    let _ = write!(
        report,
        "\nThe same probes started by `cotenant run` (the C library readers with `--preload`):\n\n{}",
        table(&cells, &via_run)
    );
    if !skipped.is_empty() {
        let _ = write!(report, "\nSkipped: {}.\n", skipped.join(", "));
    }
    outcome.report = report;
    outcome.verdicts = vec![verdict(&cells, &RUNTIMES), verdict(&cells, &via_run)];
    outcome.summary =
        serde_json::Value::Array(outcome.rows.iter().cloned().map(serde_json::Value::Object).collect());
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_correct_value_is_the_limit_rounded_down() {
        let c = |s| correct(s, 2, 2);
        assert_eq!(
            Scenario::ALL.map(c),
            [2, 1, 1, 1, 2, 1, 1, 1],
            "no limit, quota 0.5/1/1.5/3, parent 1, cpuset, affinity"
        );
        assert_eq!(correct(Scenario::Quota(3.0), 8, 8), 3);
        assert_eq!(correct(Scenario::Quota(3.0), 8, 2), 2, "capped by the lab's own limit");
    }

    #[test]
    fn probe_sources_replace_a_planted_symlink() {
        use std::os::unix::fs::symlink;
        let dir = private_dir::fresh_temp("cotenant-test-runtimes").unwrap();
        let outside = private_dir::fresh_temp("cotenant-test-runtimes-outside").unwrap();
        let victim = outside.join("victim");
        std::fs::write(&victim, "root-owned data").unwrap();
        symlink(&victim, dir.join("probe.cpp")).unwrap();
        write_sources(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root-owned data", "written through");
        assert!(std::fs::symlink_metadata(dir.join("probe.cpp")).unwrap().file_type().is_file());
        for (name, text) in SOURCES {
            assert_eq!(std::fs::read_to_string(dir.join(name)).unwrap(), text, "{name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn probe_output_is_a_count_or_a_clear_error() {
        assert_eq!(parse_count(" 4\n"), Ok(4));
        assert!(parse_count("four").unwrap_err().contains("\"four\""));
        assert!(parse_count("").is_err());
    }

    #[test]
    fn the_table_marks_wrong_values_and_the_verdict_counts_them() {
        let cell = |runtime: &str, value: Result<u32, String>| Cell {
            scenario: "quota 0.5".into(),
            runtime: runtime.into(),
            value,
            correct: 1,
        };
        let cells = [cell("cotenant", Ok(1)), cell("Go", Ok(2)), cell("Java", Err("not installed".into()))];
        let t = table(&cells, &RUNTIMES);
        assert!(t.contains("| quota 0.5 | 1 | 1 | **2** ✗ | not installed | - |"), "{t}");
        let run = [Cell { runtime: "run: Go".into(), ..cell("", Ok(1)) }];
        let t = table(&run, &["run: Go"]);
        assert!(t.contains("| scenario | correct | Go |") && t.contains("| quota 0.5 | 1 | 1 |"), "{t}");
        let v = verdict(&cells, &RUNTIMES);
        assert!(
            v.starts_with(
                "cotenant correct in 1 of 1 scenarios; Go correct in 0 of 1 scenarios; Java not run"
            ),
            "{v}"
        );
    }
}

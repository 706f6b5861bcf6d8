//! The lab as a user runs it: a `--quick` smoke run of every experiment (structure, not
//! timing: the numbers of a 1 s run on a shared machine assert nothing), `lab clean`, runs
//! interrupted by each signal that must leave no worker process, no `cotenant-lab-*` cgroup and
//! no token set or pipe of the lab behind, and workers that hang or flood their stderr.
//!
//! Every test that runs a lab holds one lock: run at once, they would only slow each other
//! down, and they share the lab's token set (`cotenant-lab`).

mod support;

use std::io::Read as _;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cotenant::tokens::HostTokens;

use serde_json::Value;
use support::cgroup::{layout, skip, Layout};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The lab's token set (`lab::neighbours::LAB_TOKENS`).
const LAB_TOKENS: &str = "cotenant-lab";
/// The lab's test hooks (`lab::runner::{FAULT_ENV, DEADLINE_ENV}`).
const FAULT_ENV: &str = "COTENANT_LAB_WORKER_FAULT";
const DEADLINE_ENV: &str = "COTENANT_LAB_WORKER_DEADLINE_S";
/// Far more than any lab run of these tests takes, however loaded the host: a lab still
/// running then has hung.
const LAB_HUNG: Duration = Duration::from_secs(240);

/// A new folder only this user can use (`mkdtemp`, mode 0700) for a lab's `--out`: a fixed
/// name in the shared temporary folder could be made first by someone else.
fn private_out(tag: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt as _;
    let template = std::env::temp_dir().join(format!("cotenant-lab-test-{tag}-XXXXXX"));
    let mut bytes = template.into_os_string().into_vec();
    bytes.push(0);
    // SAFETY: a NUL-terminated, writable template that mkdtemp fills in place.
    let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    assert!(!made.is_null(), "mkdtemp: {}", std::io::Error::last_os_error());
    bytes.pop();
    PathBuf::from(std::ffi::OsString::from_vec(bytes))
}

fn cotenant() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cotenant"))
}

/// Pids of `lab-worker` processes started by the lab process `parent`.
fn workers_of(parent: u32) -> Vec<u32> {
    let needle = format!("--parent\0{parent}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                .unwrap_or(false)
        })
        .collect()
}

/// The cgroup directories (top level of each hierarchy) whose name starts with `prefix`.
fn cgroups_named(layout: &Layout, prefix: &str) -> Vec<PathBuf> {
    let bases: Vec<&PathBuf> = match layout {
        Layout::V1 { cpu, cpuset } => std::iter::once(cpu).chain(cpuset).collect(),
        Layout::V2 { root, .. } => vec![root],
    };
    bases
        .into_iter()
        .flat_map(|b| std::fs::read_dir(b).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect()
}

/// Runs `cotenant lab <experiment> --quick --json --out DIR` (`runtimes`, which has no
/// `--quick`: without it) and checks what every experiment must produce; returns the parsed
/// results.json.
fn smoke(experiment: &str, extra: &[&str]) -> Value {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = private_out(experiment);
    let quick: &[&str] = if experiment == "runtimes" { &[] } else { &["--quick"] };
    let output = cotenant()
        .args(["lab", experiment])
        .args(quick)
        .args(["--json", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{experiment}: {stderr}");
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let dir = out.join(experiment);
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(printed, written, "{experiment}: --json prints what results.json holds");
    assert_eq!(written["experiment"], experiment);
    for fact in ["cpus", "kernel", "cgroup_version", "loadavg_before"] {
        assert!(!written["host"][fact].is_null(), "{experiment}: host fact {fact} missing");
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.starts_with(&format!("# lab {experiment}")) && report.contains("## Verdict"), "{report}");
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let rows = written["rows"].as_array().unwrap();
    assert_eq!(csv.lines().count(), rows.len() + 1, "{experiment}: one CSV line per row, plus the header");
    // Every chart linked from the report exists as SVG and PNG.
    for line in report.lines().filter(|l| l.starts_with("![")) {
        let stem = line.rsplit('(').next().unwrap().trim_end_matches(')').trim_end_matches(".svg");
        assert!(std::fs::read_to_string(dir.join(format!("{stem}.svg"))).unwrap().contains("<svg"));
        assert!(std::fs::read(dir.join(format!("{stem}.png"))).unwrap().starts_with(b"\x89PNG"));
    }
    std::fs::remove_dir_all(&out).unwrap();
    written
}

fn cgroups_available(test: &str) -> bool {
    match layout() {
        Ok(_) => true,
        Err(why) => {
            skip(test, &why);
            false
        }
    }
}

#[test]
fn neighbours_quick_runs_every_pool_kind_in_both_settings() {
    let results = smoke("neighbours", &[]);
    let rows = results["rows"].as_array().unwrap();
    let settings = if layout().is_ok() { 2 } else { 1 };
    assert_eq!(rows.len(), settings * 2 * 5, "settings × P = 1, 2 × five pool kinds");
    assert!(rows.iter().any(|row| row["pool"] == "plain"), "the plain kind ran");
    {
        // Checked while no other lab test runs (one of them may be creating the set).
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        assert!(!cotenant::tokens::HostTokens::exists("cotenant-lab"), "the lab removed its token set");
        let pipe = cotenant::tokens::HostTokens::pipe_path("cotenant-lab");
        assert!(!pipe.exists(), "the lab removed its token set's pipe {}", pipe.display());
    }
    for row in rows {
        assert_eq!(row["completed_fraction"], 1.0, "every offered item ran: {row}");
        assert!(row["service_p99_us"].as_f64().unwrap() > 0.0);
        assert!(row["host_busy_cpus_before"].is_number(), "the quiet check is recorded: {row}");
    }
    // Adaptive's line and tokens' line for each setting and P.
    assert_eq!(results["verdicts"].as_array().unwrap().len(), settings * 2 * 2);
}

#[test]
fn neighbours_with_async_items_quick_runs_the_three_executors() {
    // P = 2 in one cgroup: the smallest run where the executors have a neighbour (and the
    // cotenant executor's pool shares host tokens), three runs of 1 s.
    let results = smoke("neighbours", &["--items", "async", "--processes", "2", "--setting", "one-cgroup"]);
    let rows = results["rows"].as_array().unwrap();
    let pools: Vec<&str> = rows.iter().map(|row| row["pool"].as_str().unwrap()).collect();
    assert_eq!(pools, ["tokio-default", "tokio-optimal", "cotenant-async"], "{results}");
    for row in rows {
        assert_eq!(row["completed_fraction"], 1.0, "every offered item ran: {row}");
        assert!(row["service_p99_us"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["async_wait_ms"], 1.0, "the default timer wait is recorded: {row}");
    }
    // Only the executor on the default pool shares the lab's host tokens.
    assert!(rows[2]["token_takes"].is_number() && rows[0]["token_takes"].is_null(), "{results}");
    {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        assert!(!HostTokens::exists(LAB_TOKENS), "the lab removed its token set");
    }
    let verdicts: Vec<&str> =
        results["verdicts"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(verdicts.len(), 1 + 4, "the comparison at 70 %, then the four targets: {verdicts:#?}");
    assert!(verdicts[0].contains("cotenant-async service p99") && verdicts[0].contains("tokio-optimal's"));
    // A quick run has the 70 % load only: that target is measured, the others say they are not.
    assert!(verdicts[3].contains("load 70%") && !verdicts[3].contains("not measured"), "{verdicts:#?}");
    for i in [1, 2, 4] {
        assert!(verdicts[i].ends_with("not measured (no such run)"), "{verdicts:#?}");
    }
}

/// Whether the lab can find a Go toolchain (where `gobuild.rs` looks).
fn go_installed() -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("go"))
        .chain([PathBuf::from("/usr/local/go/bin/go")])
        .any(|p| p.is_file())
}

#[test]
fn go_neighbours_quick_runs_the_go_service_three_ways() {
    if !go_installed() {
        skip("go_neighbours_quick_runs_the_go_service_three_ways", "no Go toolchain");
        return;
    }
    let results = smoke("go-neighbours", &[]);
    let rows = results["rows"].as_array().unwrap();
    let settings = if layout().is_ok() { 2 } else { 1 };
    assert_eq!(rows.len(), settings * 3, "settings × three Go kinds: {results}");
    for pool in ["go-default", "go-optimal", "go-cotenant"] {
        assert!(rows.iter().any(|r| r["pool"] == pool), "{pool} missing: {results}");
    }
    for row in rows {
        assert_eq!(row["completed_fraction"], 1.0, "every offered item ran: {row}");
        assert_eq!(row["go_items"], "limited", "the default way to run items: {row}");
        assert!(row["service_p99_us"].as_f64().unwrap() > 0.0);
    }
    let verdicts = results["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), settings);
    assert!(verdicts[0].as_str().unwrap().contains("go-cotenant service p99"), "{verdicts:?}");
}

#[test]
fn isolation_quick_runs_every_scenario_with_both_tenants() {
    if !cgroups_available("isolation_quick_runs_every_scenario_with_both_tenants") {
        return;
    }
    let results = smoke("isolation", &[]);
    let rows = results["rows"].as_array().unwrap();
    let scenarios: Vec<&str> = rows.iter().map(|r| r["scenario"].as_str().unwrap()).collect();
    for s in [
        "baseline",
        "baseline-pinned",
        "unisolated",
        "weighted",
        "nice",
        "idle",
        "cooperative",
        "background",
        "unisolated-one-cgroup",
        "idle-one-cgroup",
        "background-one-cgroup",
    ] {
        assert!(scenarios.contains(&s), "{s} missing: {scenarios:?}");
    }
    // The idle-cgroup scenarios run wherever cgroups have cpu.idle (Linux 5.15+).
    assert_eq!(scenarios.contains(&"cgroup-idle"), scenarios.contains(&"background-cgroup-idle"));
    assert_eq!(scenarios.contains(&"cgroup-idle"), scenarios.contains(&"cgroup-set-idle"));
    for row in rows {
        assert_eq!(row["errors"], 0, "every request answered: {row}");
        assert!(row["completed"].as_u64().unwrap() > 0 && row["p99_us"].as_f64().unwrap() > 0.0, "{row}");
        let alone = row["scenario"] == "baseline" || row["scenario"] == "baseline-pinned";
        assert_eq!(row["b_chunks_per_s"].is_null(), alone, "B counted exactly when it ran: {row}");
        // The doctor ran on A during every run and its top finding is stored with the numbers.
        let top = row["doctor_top"].as_str().unwrap();
        assert!(!top.is_empty() && row["doctor_summary"].as_str().unwrap().starts_with(top), "{row}");
        // The client asks for SCHED_FIFO by default and records whether it got it.
        let client = row["client_ran_as"].as_str().unwrap();
        assert!(client == "SCHED_FIFO 1" || client.starts_with("normal (SCHED_FIFO refused: "), "{row}");
    }
    let idle = rows.iter().find(|r| r["scenario"] == "idle").unwrap();
    assert_eq!(idle["b_ran_as"], "SCHED_IDLE", "{idle}");
    assert!(results["verdicts"].as_array().unwrap().iter().any(|v| v
        .as_str()
        .unwrap()
        .starts_with("background: A's p99")
        && v.as_str().unwrap().contains("target")));
}

#[test]
fn throttling_quick_runs_table_ii_rewrites_and_the_budget() {
    let results = smoke("throttling", &[]);
    let rows = results["rows"].as_array().unwrap();
    let part = |name: &'static str| rows.iter().filter(move |r| r["part"] == name);
    // The user-space budget needs no cgroup: always there, slush on and off for every case.
    let budget: Vec<&Value> = part("budget").collect();
    assert_eq!(budget.len(), 12, "{budget:?}");
    for row in &budget {
        assert!(row["cpus_used"].as_f64().unwrap() > 0.0 && row["periods"].as_u64().unwrap() > 0, "{row}");
    }
    // Saturated, then open loop at the budget (1.5 CPUs) with exact-CPU items.
    let open: Vec<&&Value> = budget.iter().filter(|r| !r["offered"].is_null()).collect();
    assert_eq!(open.len(), 4, "{open:?}");
    assert!(open.iter().all(|r| r["budget_cpus"] == 1.5), "{open:?}");
    if layout().is_err() {
        assert!(results["rows"].as_array().unwrap().iter().all(|r| r["part"] == "budget"));
        return;
    }
    let table: Vec<&Value> = part("table2").collect();
    assert!(table.len() >= 3, "unlimited and quota N at two periods at least: {table:?}");
    for row in &table {
        let limited = !row["quota_of_n"].is_null();
        assert_eq!(row["periods"].as_u64().unwrap() > 0, limited, "periods are counted under a quota: {row}");
        assert!(row["workers_cpu_s"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert!(part("latency").count() >= 2);
    let rewrite =
        |label: &str| part("rewrite").find(|r| r["rewrite"].as_str().unwrap().contains(label)).unwrap();
    let plain = rewrite("plain");
    assert!(
        plain["rewrites"].as_u64().unwrap() > 0 && plain["rewrites_written"] == plain["rewrites"],
        "{plain}"
    );
    let set = rewrite("cgroup set");
    assert!(set["rewrites"].as_u64().unwrap() > 0, "{set}");
    assert_eq!(set["rewrites_written"], 0, "`cgroup set` of unchanged values writes nothing: {set}");
    let verdicts = results["verdicts"].as_array().unwrap();
    assert!(verdicts.iter().any(|v| v.as_str().unwrap().starts_with("quota = demand: throttled in")));
    assert!(verdicts.iter().any(|v| v.as_str().unwrap().starts_with("rewrite: throttled")));
}

#[test]
fn spin_quick_runs_every_strategy_in_every_part() {
    let results = smoke("spin", &["--round-trip-us", "300"]);
    let rows = results["rows"].as_array().unwrap();
    let part = |name: &'static str| rows.iter().filter(move |r| r["part"] == name);
    // 3 scenarios x 4 strategies; --quick: the sweep at 4 sessions per CPU only; uncontended.
    assert_eq!(part("scenario").count(), 12);
    assert_eq!(part("sessions").count(), 4);
    assert_eq!(part("uncontended").count(), 4);
    for row in rows {
        assert!(row["transactions"].as_u64().unwrap() > 0, "{row}");
        let (p50, p999) = (row["p50_ms"].as_f64().unwrap(), row["p999_ms"].as_f64().unwrap());
        assert!(0.0 < p50 && p50 <= p999, "{row}");
        // End-to-end latency includes the round trip asked for (not in the uncontended part,
        // whose transactions run back to back).
        if row["part"] != "uncontended" {
            assert!(p50 >= 0.3, "{row}");
        }
        // The process's CPU time over the run: at least some, at most every CPU of the host.
        let cpus_used = row["cpus_used"].as_f64().unwrap();
        let host_cpus = results["host"]["cpus"].as_f64().unwrap();
        assert!(0.0 < cpus_used && cpus_used <= host_cpus + 0.25, "{row}");
    }
    for strategy in ["spin", "yield", "backoff", "park"] {
        assert!(part("scenario").any(|r| r["strategy"] == strategy && r["config"] == "restricted + nice -20"));
    }
    let charts = results["summary"]["scenarios"].as_array().unwrap();
    assert_eq!(charts.len(), 12);
    let verdicts = results["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 4, "{verdicts:?}");
    assert!(verdicts[0].as_str().unwrap().starts_with("spin: P99.9"));
}

#[test]
fn sizing_quick_sweeps_fixed_sizes_and_the_elastic_pool() {
    let results = smoke("sizing", &[]);
    let rows = results["rows"].as_array().unwrap();
    // --quick: delays 0 and 20 ms, fixed sizes 1, 4, 16, 64, and the elastic pool.
    assert_eq!(rows.len(), 2 * 5);
    for row in rows {
        assert!(row["tasks"].as_u64().unwrap() > 0, "{row}");
        assert!(row["throughput"].as_f64().unwrap() > 0.0, "{row}");
        let cpu = row["cpu_percent"].as_f64().unwrap();
        assert!((0.0..=110.0).contains(&cpu), "{row}");
    }
    let elastic: Vec<&Value> = rows.iter().filter(|r| r["pool"] == "elastic").collect();
    assert_eq!(elastic.len(), 2);
    for row in elastic {
        let size = row["size"].as_f64().unwrap();
        assert!((1.0..=256.0).contains(&size), "{row}");
    }
    // Blocking tasks: one thread cannot keep up with 64 (20 ms of sleep per 2 ms of CPU).
    let at = |pool: &str, size: f64| {
        rows.iter()
            .find(|r| r["delay_ms"] == 20 && r["pool"] == pool && (pool == "elastic" || r["size"] == size))
            .map(|r| r["throughput"].as_f64().unwrap())
            .unwrap()
    };
    assert!(at("fixed", 64.0) > 2.0 * at("fixed", 1.0));
    assert!(at("elastic", 0.0) > 2.0 * at("fixed", 1.0), "the elastic pool grew past one thread");
    let summary = results["summary"]["delays"].as_array().unwrap();
    assert_eq!(summary.len(), 2);
    assert!(summary[1]["formula_u1"].as_f64().unwrap() > summary[0]["formula_u1"].as_f64().unwrap());
    let verdicts = results["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 3, "{verdicts:?}");
}

#[test]
fn overcommit_and_contention_quick_sweep_the_thread_counts() {
    for experiment in ["overcommit", "contention"] {
        let results = smoke(experiment, &[]);
        let threads: Vec<u64> =
            results["rows"].as_array().unwrap().iter().map(|r| r["threads"].as_u64().unwrap()).collect();
        let cpus = results["host"]["cpus"].as_u64().unwrap();
        assert_eq!(threads, [1, cpus, 4 * cpus], "{experiment}");
        assert_eq!(results["verdicts"].as_array().unwrap().len(), 1, "{experiment}");
    }
}

#[test]
fn quota_quick_runs_every_pool_in_real_cgroups() {
    if !cgroups_available("quota_quick_runs_every_pool_in_real_cgroups") {
        return;
    }
    let results = smoke("quota", &[]);
    let pools: std::collections::BTreeSet<&str> =
        results["rows"].as_array().unwrap().iter().map(|r| r["pool"].as_str().unwrap()).collect();
    for pool in ["fixed(online CPUs)", "fixed(quota, rounded up)", "adaptive"] {
        assert!(pools.contains(pool), "{pool} missing: {pools:?}");
    }
    assert!(!results["verdicts"].as_array().unwrap().is_empty());
}

#[test]
fn factor_headline_and_burst_quick_produce_verdicts() {
    for experiment in ["factor", "headline", "burst"] {
        if experiment == "burst" && !cgroups_available("burst") {
            continue;
        }
        let results = smoke(experiment, &[]);
        // headline: one line per pool but ignorant (optimal, the default pool, plain).
        let lines = if experiment == "headline" { 3 } else { 1 };
        assert_eq!(results["verdicts"].as_array().unwrap().len(), lines, "{experiment}: {results}");
    }
}

#[test]
fn fairness_quick_reports_both_policies_over_time() {
    let results = smoke("fairness", &[]);
    let rows = results["rows"].as_array().unwrap();
    for pool in ["share", "adaptive"] {
        let windows = rows.iter().filter(|r| r["pool"] == pool).count();
        assert!(windows >= 10, "{pool}: {windows} windows of 100 ms in 2 s");
    }
    // Every window's index is Jain's of its two CPU shares, (a + b)² / 2(a² + b²), which any
    // two shares keep within [0.5, 1]: recomputed, so a wrong index (or shares) fails.
    for row in rows {
        let (a, b) = (row["a_cpus"].as_f64().unwrap(), row["b_cpus"].as_f64().unwrap());
        assert!(a >= 0.0 && b >= 0.0 && a + b > 0.0, "no CPU used in the window: {row}");
        let jain = (a + b).powi(2) / (2.0 * (a * a + b * b));
        assert!((row["jain"].as_f64().unwrap() - jain).abs() < 1e-9, "Jain's index is not {jain}: {row}");
    }
    // B ran: some window gave it CPU.
    assert!(rows.iter().any(|r| r["b_cpus"].as_f64().unwrap() > 0.0), "B never ran");
    assert_eq!(results["verdicts"].as_array().unwrap().len(), 2);
}

#[test]
fn runtimes_reports_cotenant_and_every_runtime_it_finds() {
    let results = smoke("runtimes", &[]);
    let rows = results["rows"].as_array().unwrap();
    let cotenant_rows: Vec<&Value> = rows.iter().filter(|r| r["runtime"] == "cotenant").collect();
    assert!(!cotenant_rows.is_empty(), "{results}");
    for row in cotenant_rows {
        assert_eq!(row["is_correct"], true, "cotenant wrong: {row}");
    }
}

#[test]
fn bad_lab_arguments_are_usage_errors_naming_the_argument() {
    let output = cotenant().args(["lab", "neighbours", "--load", "0"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("--load") && err.contains("more than 0"), "{err}");
    let output = cotenant().args(["lab", "spin", "--round-trip-us", "2000000"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("--round-trip-us") && err.contains("2000000"), "{err}");
    let output = cotenant().args(["lab", "nonsense"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("nonsense"));
}

#[test]
fn async_items_options_that_do_not_go_together_are_usage_errors() {
    for (args, says) in [
        (&["--items", "fibres"][..], "--items"),
        (&["--items", "async", "--async-wait-ms", "0"][..], "--async-wait-ms"),
        (&["--pools", "tokio-default"][..], "--pools tokio-default: this kind serves async items"),
        (&["--items", "async", "--pools", "adaptive"][..], "--pools adaptive: with --items async"),
        (&["--async-wait-ms", "2"][..], "--async-wait-ms: only with --items async"),
    ] {
        let output = cotenant().args(["lab", "neighbours"]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_flag_an_experiment_does_not_take_is_refused() {
    // Each experiment is a subcommand with its own flags: one it would ignore is a usage
    // error naming it, not silently dropped.
    for (args, flag) in [
        (&["quota", "--processes", "2"][..], "--processes"),
        (&["spin", "--pools", "adaptive"][..], "--pools"),
        (&["neighbours", "--round-trip-us", "300"][..], "--round-trip-us"),
        (&["runtimes", "--quick"][..], "--quick"),
        (&["all", "--processes", "2"][..], "--processes"),
    ] {
        let output = cotenant().arg("lab").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&format!("unexpected argument '{flag}'")), "{args:?}: {err}");
    }
}

/// Whether `cotenant tokens list --json` shows a set named `name`.
fn token_set_listed(name: &str) -> bool {
    let out = cotenant().args(["tokens", "list", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sets: Value = serde_json::from_slice(&out.stdout).expect("tokens list --json is JSON");
    sets.as_array().expect("an array").iter().any(|s| s["name"] == name)
}

/// A lab started by a test: its stderr read on a thread (a full pipe would stop it), and the lab
/// killed if the test ends first.
struct RunningLab {
    child: Child,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl RunningLab {
    fn start(command: &mut Command) -> RunningLab {
        let mut child = command.stdin(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let mut pipe = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        });
        RunningLab { child, stderr: Some(stderr) }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the lab to end, at most `limit` (then it is killed and the test fails).
    fn wait(&mut self, limit: Duration) -> (ExitStatus, String) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let stderr = self.stderr.take().unwrap().join().unwrap();
                return (status, stderr);
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let stderr = self.stderr.take().unwrap().join().unwrap();
                panic!("the lab did not end within {limit:?}; killed. Its stderr:\n{stderr}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the lab runs workers and `ready` holds; fails at once if the lab ends first.
    fn wait_for_workers(&mut self, ready: impl Fn() -> bool) {
        let start = Instant::now();
        while workers_of(self.pid()).is_empty() || !ready() {
            if let Some(status) = self.child.try_wait().unwrap() {
                let stderr = self.stderr.take().unwrap().join().unwrap();
                panic!("the lab ended ({status}) before its workers were ready. Its stderr:\n{stderr}");
            }
            assert!(start.elapsed() < Duration::from_secs(60), "the lab never started its workers");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RunningLab {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Checks that the lab `pid` left no worker, no cgroup, no token set and no pipe of its set.
fn assert_nothing_left(pid: u32, stderr: &str) {
    // Killed and reaped by the lab itself, not later by the kernel: checked at once.
    assert!(workers_of(pid).is_empty(), "workers left behind: {:?}\n{stderr}", workers_of(pid));
    if let Ok(layout) = layout() {
        let left = cgroups_named(&layout, &format!("cotenant-lab-{pid}-"));
        assert!(left.is_empty(), "cgroups left behind: {left:?}\n{stderr}");
    }
    assert!(!token_set_listed(LAB_TOKENS), "`tokens list` still shows {LAB_TOKENS}\n{stderr}");
    assert!(!HostTokens::exists(LAB_TOKENS), "the token set {LAB_TOKENS} is left\n{stderr}");
    let pipe = HostTokens::pipe_path(LAB_TOKENS);
    assert!(!pipe.exists(), "the set's pipe {} is left\n{stderr}", pipe.display());
}

/// Starts `cotenant lab ARGS`, waits until it runs workers and `ready` holds, sends `signal`,
/// and checks that the lab died of it (SIGQUIT: exit status 131, no core) and left nothing.
fn interrupt(signal: i32, args: &[&str], ready: impl Fn() -> bool) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut command = cotenant();
    command.arg("lab").args(args).stdout(Stdio::null());
    // A signal ignored when the lab starts stays ignored (`nohup`, a script's background job):
    // the test wants it delivered, wherever it runs.
    // SAFETY: between fork and exec, only signal(2), which is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            libc::signal(signal, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut lab = RunningLab::start(&mut command);
    lab.wait_for_workers(ready);
    // SAFETY: kill with a pid we own and a valid signal.
    assert_eq!(unsafe { libc::kill(lab.pid() as i32, signal) }, 0);
    let (status, stderr) = lab.wait(Duration::from_secs(60));
    if signal == libc::SIGQUIT {
        assert_eq!(status.code(), Some(128 + signal), "{status}\n{stderr}");
    } else {
        assert_eq!(status.signal(), Some(signal), "the lab did not die of the signal: {status}\n{stderr}");
    }
    assert!(stderr.contains("cotenant: stopped by SIG"), "{stderr}");
    assert_nothing_left(lab.pid(), &stderr);
}

/// `interrupt` in the middle of an adaptive `neighbours` run: its workers, their cgroup (with
/// real cgroups) and the lab's token set all exist when the signal comes. Needs no root.
fn interrupt_neighbours(signal: i32) {
    let args = ["neighbours", "--quick", "--pools", "adaptive", "--processes", "2", "--seconds", "30"];
    interrupt(signal, &args, || HostTokens::exists(LAB_TOKENS));
}

#[test]
fn sigint_in_the_middle_of_neighbours_leaves_nothing() {
    interrupt_neighbours(libc::SIGINT);
}

#[test]
fn sigterm_in_the_middle_of_neighbours_leaves_nothing() {
    interrupt_neighbours(libc::SIGTERM);
}

#[test]
fn sighup_in_the_middle_of_neighbours_leaves_nothing() {
    interrupt_neighbours(libc::SIGHUP);
}

#[test]
fn sigquit_in_the_middle_of_neighbours_leaves_nothing() {
    interrupt_neighbours(libc::SIGQUIT);
}

/// `interrupt` in the middle of `isolation`'s first run: tenant A serving, its cgroups made,
/// and the lab's token set opened by A's pool.
fn interrupt_isolation(test: &str, signal: i32) {
    if !cgroups_available(test) {
        return;
    }
    let args = ["isolation", "--quick", "--scenarios", "cooperative", "--seconds", "30"];
    interrupt(signal, &args, || HostTokens::exists(LAB_TOKENS));
}

#[test]
fn sigint_in_the_middle_of_isolation_leaves_nothing() {
    interrupt_isolation("sigint_in_the_middle_of_isolation_leaves_nothing", libc::SIGINT);
}

#[test]
fn sigterm_in_the_middle_of_isolation_leaves_nothing() {
    interrupt_isolation("sigterm_in_the_middle_of_isolation_leaves_nothing", libc::SIGTERM);
}

#[test]
fn sighup_in_the_middle_of_isolation_leaves_nothing() {
    interrupt_isolation("sighup_in_the_middle_of_isolation_leaves_nothing", libc::SIGHUP);
}

#[test]
fn sigquit_in_the_middle_of_isolation_leaves_nothing() {
    interrupt_isolation("sigquit_in_the_middle_of_isolation_leaves_nothing", libc::SIGQUIT);
}

#[test]
fn sigterm_in_the_middle_of_burst_leaves_nothing() {
    if !cgroups_available("sigterm_in_the_middle_of_burst_leaves_nothing") {
        return;
    }
    interrupt(libc::SIGTERM, &["burst", "--seconds", "30"], || true);
}

/// Runs `cotenant lab neighbours --quick --pools ignorant --setting one-cgroup --json --out DIR
/// ARGS` with `env`; returns its status, stderr and results.json, and checks it left nothing.
fn neighbours_with(env: &[(&str, &str)], args: &[&str]) -> (ExitStatus, String, Value) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = private_out("faults");
    let mut command = cotenant();
    command
        .args(["lab", "neighbours", "--quick", "--pools", "ignorant", "--setting", "one-cgroup"])
        .args(["--json", "--out"])
        .arg(&out)
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null());
    let mut lab = RunningLab::start(&mut command);
    let (status, stderr) = lab.wait(LAB_HUNG);
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("neighbours").join("results.json")).unwrap())
            .unwrap();
    let report = std::fs::read_to_string(out.join("neighbours").join("report.md")).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
    assert!(!report.contains("Interrupted"), "the run ended, the report is final: {report}");
    assert_nothing_left(lab.pid(), &stderr);
    (status, stderr, results)
}

#[test]
fn a_hung_worker_is_killed_at_its_deadline_and_its_run_recorded_as_failed() {
    // Every worker hangs: the run fails after 3 s instead of waiting forever, the lab goes on to
    // the end, writes its results, and says so in its exit status.
    let (status, stderr, results) =
        neighbours_with(&[(FAULT_ENV, "hang"), (DEADLINE_ENV, "3")], &["--processes", "1"]);
    assert_eq!(status.code(), Some(1), "a failed run fails the lab: {stderr}");
    assert!(stderr.contains("1 run(s) failed"), "{stderr}");
    let rows = results["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{results}");
    assert_eq!(rows[0]["failed"], true, "{results}");
    assert_eq!(rows[0]["processes"], 1, "the failed row names its configuration: {results}");
    let why = rows[0]["failure"].as_str().unwrap();
    assert!(why.contains("did not finish within 3 s; killed"), "{why}");
}

#[test]
fn a_worker_flooding_its_stderr_does_not_stop_the_lab() {
    // Each worker writes 1 MiB to stderr before its run, more than a pipe holds: read one pipe
    // after the other, both the lab and the worker would wait for ever.
    let (status, stderr, results) = neighbours_with(&[(FAULT_ENV, "flood-stderr")], &["--processes", "2"]);
    assert!(status.success(), "{stderr}");
    let rows = results["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{results}");
    assert!(rows[0]["failed"].is_null(), "{results}");
    assert_eq!(rows[0]["completed_fraction"], 1.0, "{results}");
}

#[test]
fn an_interrupted_run_keeps_its_rows_and_says_so() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = private_out("partial");
    let dir = out.join("neighbours");
    let results = dir.join("results.json");
    // 100 runs of 1 s (about 2 minutes): stopped as soon as the first row is kept.
    let mut command = cotenant();
    command
        .args(["lab", "neighbours", "--pools", "ignorant", "--setting", "one-cgroup", "--processes", "1"])
        .args(["--repeats", "100", "--load", "0.7", "--seconds", "1", "--out"])
        .arg(&out)
        .stdout(Stdio::null());
    let mut lab = RunningLab::start(&mut command);
    let rows = |path: &Path| -> usize {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|v| v["rows"].as_array().map(Vec::len))
            .unwrap_or(0)
    };
    let start = Instant::now();
    while rows(&results) == 0 {
        assert!(lab.child.try_wait().unwrap().is_none(), "the lab ended before its first row was kept");
        assert!(start.elapsed() < Duration::from_secs(120), "no row was written while the lab ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill with a pid we own and a valid signal.
    assert_eq!(unsafe { libc::kill(lab.pid() as i32, libc::SIGTERM) }, 0);
    let (_, stderr) = lab.wait(Duration::from_secs(60));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
    assert_eq!(written["partial"], true, "{written}");
    let kept = written["rows"].as_array().unwrap();
    assert!(!kept.is_empty() && kept[0]["processes"] == 1, "{written}\n{stderr}");
    assert_eq!(csv.lines().count(), kept.len() + 1, "one CSV line per row kept, plus the header: {csv}");
    assert!(report.starts_with("# lab neighbours"), "{report}");
    assert!(report.contains("Interrupted: partial results"), "{report}");
    assert_nothing_left(lab.pid(), &stderr);
}

#[test]
fn clean_keeps_the_token_set_of_a_running_lab_and_removes_a_stale_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // A lab that makes no set of its own while it runs (ignorant pools do not cooperate).
    let mut lab = RunningLab::start(
        cotenant()
            .args(["lab", "neighbours", "--quick", "--pools", "ignorant", "--processes", "1"])
            .args(["--setting", "one-cgroup", "--seconds", "30"])
            .stdout(Stdio::null()),
    );
    lab.wait_for_workers(|| true);
    // The set as a running lab holds it between two runs: there, and no member counted.
    let set = HostTokens::open_observer(LAB_TOKENS, 2).unwrap();
    let output = cotenant().args(["lab", "clean"]).output().unwrap();
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    let kept = HostTokens::exists(LAB_TOKENS);
    // SAFETY: kill with a pid we own and a valid signal.
    assert_eq!(unsafe { libc::kill(lab.pid() as i32, libc::SIGTERM) }, 0);
    let (_, stderr) = lab.wait(Duration::from_secs(60));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(kept, "lab clean removed the token set of a running lab: {printed}");
    assert!(
        printed.contains(&format!("kept host token set {LAB_TOKENS}: in use by the running lab"))
            && printed.contains(&format!("(pid {})", lab.pid())),
        "{printed}"
    );
    // The lab removed it as it stopped; left by a lab killed with SIGKILL, clean removes it.
    assert_nothing_left(lab.pid(), &stderr);
    drop(set);
    let stale = HostTokens::open_observer(LAB_TOKENS, 2).unwrap();
    let output = cotenant().args(["lab", "clean"]).output().unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    let left = HostTokens::exists(LAB_TOKENS);
    if left {
        let _ = stale.remove();
    }
    assert!(!left, "lab clean left the set of a lab that is gone: {printed}");
    assert!(printed.contains(&format!("removed host token set {LAB_TOKENS}")), "{printed}");
}

#[test]
fn clean_removes_cgroups_of_a_lab_that_is_gone() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Ok(layout) = layout() else {
        skip("clean_removes_cgroups_of_a_lab_that_is_gone", "no real cgroups");
        return;
    };
    // A pid above the kernel's maximum (2^22) never exists.
    let stale: &Path = match &layout {
        Layout::V1 { cpu, .. } => cpu,
        Layout::V2 { root, .. } => root,
    };
    let stale = stale.join("cotenant-lab-4194305-stale");
    std::fs::create_dir(&stale).unwrap();
    let output = cotenant().args(["lab", "clean"]).output().unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    let exists = stale.exists();
    if exists {
        let _ = std::fs::remove_dir(&stale);
    }
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!exists, "lab clean left {}: {printed}", stale.display());
    assert!(printed.contains("cotenant-lab-4194305-stale"), "{printed}");
}

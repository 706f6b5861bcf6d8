//! The lab as a user runs it: a `--quick` smoke run of every experiment (structure, not
//! timing: the numbers of a 1 s run on a shared machine assert nothing), `lab clean`, and
//! interrupted runs that must leave no worker process and no `cotenant-lab-*` cgroup behind.
//!
//! The smoke runs hold one lock: run at once, they would only slow each other down.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::cgroup::{layout, skip, Layout};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

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

/// Runs `cotenant lab <experiment> --quick --json --out DIR` and checks what every
/// experiment must produce; returns the parsed results.json.
fn smoke(experiment: &str, extra: &[&str]) -> Value {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = std::env::temp_dir().join(format!("cotenant-lab-test-{}-{experiment}", std::process::id()));
    let output = cotenant()
        .args(["lab", experiment, "--quick", "--json", "--out"])
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
    for pool in ["go default", "go CPUs/P", "go + cotenant"] {
        assert!(rows.iter().any(|r| r["pool"] == pool), "{pool} missing: {results}");
    }
    for row in rows {
        assert_eq!(row["completed_fraction"], 1.0, "every offered item ran: {row}");
        assert_eq!(row["go_items"], "limited", "the default way to run items: {row}");
        assert!(row["service_p99_us"].as_f64().unwrap() > 0.0);
    }
    let verdicts = results["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), settings);
    assert!(verdicts[0].as_str().unwrap().contains("go + cotenant service p99"), "{verdicts:?}");
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
        // headline runs the plain kind too: its own line.
        let lines = if experiment == "headline" { 2 } else { 1 };
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
    assert!(rows.iter().all(|r| (0.5..=1.0 + 1e-9).contains(&r["jain"].as_f64().unwrap())));
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
    // A spin-only option given to another experiment is refused, not silently ignored.
    let output = cotenant().args(["lab", "neighbours", "--round-trip-us", "300"]).output().unwrap();
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("--round-trip-us applies to `cotenant lab spin` only"), "{err}");
    let output = cotenant().args(["lab", "nonsense"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("nonsense"));
}

/// Starts a long lab run, waits for its workers, sends `signal`, and checks that no worker and
/// no cgroup of that lab remains.
fn interrupt(signal: i32, args: &[&str]) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut lab =
        cotenant().arg("lab").args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let pid = lab.id();
    let start = Instant::now();
    while workers_of(pid).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(60), "the lab never started a worker");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill with a pid we own and a valid signal.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
    let status = lab.wait().unwrap();
    assert!(!status.success());
    // Workers in a cgroup are killed by the lab's signal thread; any other worker by the kernel
    // when the lab dies (PR_SET_PDEATHSIG). Give either a moment.
    let start = Instant::now();
    while !workers_of(pid).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "workers left behind: {:?}", workers_of(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Ok(layout) = layout() {
        let left = cgroups_named(&layout, &format!("cotenant-lab-{pid}-"));
        assert!(left.is_empty(), "cgroups left behind: {left:?}");
    }
}

#[test]
fn sigint_in_the_middle_leaves_no_worker_and_no_cgroup() {
    interrupt(
        libc::SIGINT,
        &["neighbours", "--seconds", "30", "--processes", "2", "--setting", "per-process"],
    );
}

#[test]
fn sigterm_in_the_middle_leaves_no_worker_and_no_cgroup() {
    interrupt(libc::SIGTERM, &["burst", "--seconds", "30"]);
}

#[test]
fn clean_removes_cgroups_of_a_lab_that_is_gone() {
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

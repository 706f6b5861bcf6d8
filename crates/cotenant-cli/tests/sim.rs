//! `cotenant sim bandwidth` end to end: seed 001's Figure 4 in the JSON the issue asks for,
//! the slush fund's effect, the timeline, and bad input named.

use serde_json::Value;
use std::process::{Command, Output};

const FIGURE_4: [&str; 14] = [
    "sim",
    "bandwidth",
    "--period",
    "10ms",
    "--quota",
    "10ms",
    "--slice",
    "5ms",
    "--tick",
    "4ms",
    "--periods",
    "3",
    "--threads",
    "1",
];

fn cotenant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cotenant")).args(args).output().expect("cotenant runs")
}

fn periods(variant: &str) -> Vec<(u64, f64, f64)> {
    let out = cotenant(&[&FIGURE_4[..], &["--variant", variant, "--json"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!v["events"].as_array().unwrap().is_empty());
    v["periods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (p["index"].as_u64().unwrap(), p["ran_ms"].as_f64().unwrap(), p["throttled_ms"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn figure_4_runs_8_ms_and_is_throttled_2_ms_in_the_third_period_under_baseline_only() {
    assert_eq!(periods("baseline"), [(1, 10.0, 0.0), (2, 10.0, 0.0), (3, 8.0, 2.0)]);
    assert_eq!(periods("slush"), [(1, 10.0, 0.0), (2, 10.0, 0.0), (3, 10.0, 0.0)]);
}

#[test]
fn the_timeline_shows_the_refills_the_ticks_and_the_throttle() {
    let out = cotenant(&[&FIGURE_4[..], &["--timeline"]].concat());
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("refill (leftover 3.00 ms)"), "{text}");
    assert!(text.contains("asked 8.00, got 2.00") && text.contains("THROTTLED"), "{text}");
    assert!(text.contains("33.3 % of periods throttled"), "{text}");
}

#[test]
fn bad_input_is_named() {
    let out = cotenant(&[&FIGURE_4[..], &["--tick-phase", "5ms"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("phase must be below the tick"));
    let out = cotenant(&["sim", "bandwidth", "--period", "10ms"]);
    assert_eq!(out.status.code(), Some(2), "--quota is required");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--quota"));
}

/// `sim neighbours` on a small simulated host: the lab's table, a verdict per configuration,
/// and the files of `--out` (results, CSV, report, charts).
#[test]
fn neighbours_prints_the_labs_table_and_writes_its_files() {
    let dir = std::env::temp_dir().join(format!("cotenant-sim-test-{}", std::process::id()));
    let out = cotenant(&[
        "sim",
        "neighbours",
        "--cpus",
        "4",
        "--processes",
        "1,2",
        "--load",
        "1.5",
        "--setting",
        "per-process",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--repeats",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| cgroup per process | 150% | 2 | adaptive |"), "{text}");
    assert!(text.contains("cgroup per process, load 150%, P=2: adaptive service p99"), "{text}");
    for file in ["results.json", "results.csv", "report.md", "service-max-per-process-load150.svg"] {
        assert!(dir.join("sim-neighbours").join(file).is_file(), "{file} missing");
    }
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sim-neighbours/results.json")).unwrap())
            .unwrap();
    assert_eq!(results["rows"].as_array().unwrap().len(), 2 * 5 * 2, "P × pools × repeats");
    assert_eq!(results["host"]["simulated"], true);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn neighbours_refuses_what_it_cannot_simulate() {
    // Usage errors: exit 2, as clap's own.
    let out = cotenant(&["sim", "neighbours", "--pools", "fixed", "--repeats", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pools: fixed is not simulated"));
    let out = cotenant(&["sim", "neighbours", "--duration", "1s", "--warmup", "2s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--warmup"));
    // A service time that rounds to 0 ns is named before any run.
    let out = cotenant(&["sim", "neighbours", "--service-ms", "0.0000001", "--processes", "1"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--service-ms"));
    // So is a host too large to simulate, before the cases that would fit run.
    let out = cotenant(&["sim", "neighbours", "--cpus", "4096", "--duration", "300s", "--processes", "1,2"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("4096 CPUs, one cgroup, load 1, 1 processes, ignorant: ")
            && stderr.contains("at most"),
        "{stderr}"
    );
}

/// `sim validate` against a real run's results (a 2-CPU `lab neighbours` run, trimmed to one
/// configuration): one row of three ratios, real beside simulated.
#[test]
fn validate_compares_a_real_runs_ratios_with_the_simulated_ones() {
    let real = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/sim/lab-neighbours-results.json");
    let out = cotenant(&["sim", "validate", "--real", real, "--repeats", "2", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total"], 3);
    let row = &v["compared"][0];
    assert_eq!(
        (row["setting"].as_str(), row["load"].as_f64(), row["processes"].as_u64()),
        (Some("one cgroup"), Some(1.0), Some(2))
    );
    for ratio in ["p99", "max", "throughput"] {
        assert!(
            row["real"][ratio].as_f64().unwrap() > 0.0 && row["simulated"][ratio].as_f64().unwrap() > 0.0
        );
    }
    let out = cotenant(&["sim", "validate", "--real", "Cargo.toml"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Cargo.toml: not JSON"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sim table2`: per period, baseline throttles more as the period shrinks; slush never.
#[test]
fn table2_prints_throttled_ratios_per_period_and_variant() {
    let out = cotenant(&["sim", "table2", "--duration", "5s", "--seeds", "2", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ratio = |period: u64, variant: &str| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["period_ms"] == period && r["variant"] == variant)
            .map(|r| r["throttled_ratio_median"].as_f64().unwrap())
            .unwrap()
    };
    assert!(ratio(10, "baseline") > 0.2 && ratio(10, "baseline") >= ratio(100, "baseline"));
    for period in [100, 50, 10] {
        assert!(ratio(period, "slush") <= 0.01);
    }
    let text =
        String::from_utf8_lossy(&cotenant(&["sim", "table2", "--duration", "1s", "--seeds", "1"]).stdout)
            .to_string();
    assert!(text.contains("| 10 ms | baseline |") && text.contains("49 %, 14608 ms"), "{text}");
    let out = cotenant(&["sim", "table2", "--duration", "50ms"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--duration 50ms is shorter than the longest period")
    );
}

/// The `all` and `mainline` variants from the command line: a same-value configuration write
/// throttles `baseline` and is a no-op under `all`; `--out` draws the timeline.
#[test]
fn bandwidth_variants_writes_blocking_and_the_timeline_chart() {
    let ratio = |variant: &str, extra: &[&str]| {
        let args = [
            &[
                "sim",
                "bandwidth",
                "--period",
                "100ms",
                "--quota",
                "300ms",
                "--threads",
                "3",
                "--periods",
                "30",
            ][..],
            &["--variant", variant, "--json"],
            extra,
        ]
        .concat();
        let out = cotenant(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (v["throttled_ratio"].as_f64().unwrap(), v)
    };
    let writes = ["--update-every", "1s"];
    let (baseline, v) = ratio("baseline", &writes);
    assert!(baseline > 0.0);
    assert!(v["events"].as_array().unwrap().iter().any(|e| e["kind"] == "update" && e["noop"] == false));
    let (all, v) = ratio("all", &writes);
    assert_eq!(all, 0.0);
    assert!(v["events"].as_array().unwrap().iter().any(|e| e["kind"] == "update" && e["noop"] == true));
    let (_, v) = ratio("mainline", &["--run", "2ms", "--sleep", "8ms"]);
    assert!(v["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "block" && e["returned_ms"].as_f64() > Some(0.0)));
    let out = cotenant(&["sim", "bandwidth", "--quota", "10ms", "--run", "2ms"]);
    assert!(!out.status.success(), "--run without --sleep is refused");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--sleep"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = std::env::temp_dir().join(format!("cotenant-sim-timeline-{}", std::process::id()));
    let out = cotenant(&[&FIGURE_4[..], &["--out", dir.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(dir.join("bandwidth-timeline.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("global pool") && svg.contains("local pool, CPU 0"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn neighbours_takes_a_scheduler_model() {
    let out = cotenant(&[
        "sim",
        "neighbours",
        "--cpus",
        "2",
        "--processes",
        "2",
        "--pools",
        "ignorant,adaptive",
        "--duration",
        "2s",
        "--warmup",
        "1s",
        "--repeats",
        "1",
        "--scheduler",
        "linux",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let model = v["host"]["model"].as_str().unwrap_or_default();
    assert!(model.starts_with("Linux 6.6"), "{model:?}");
    let out = cotenant(&["sim", "neighbours", "--scheduler", "bsd"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--scheduler"));
}

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

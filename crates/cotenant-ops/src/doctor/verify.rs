//! `cotenant doctor --verify BEFORE.json`: applies nothing. The operator saves a report before a
//! change (`--json`), applies the remedy it printed, and runs the doctor again with `--verify`:
//! it measures as usual and compares the process's run-queue wait with the saved report's, and
//! says which of the remedy commands printed before it no longer prints.
//!
//! A saved file rather than a state the doctor keeps itself: nothing is written anywhere (root
//! runs the doctor too), and the operator chooses what "before" is.
//!
//! [`read_baseline`] reads the file (the only I/O here); [`parse_baseline`] and [`compare`] are
//! pure and tested on recorded reports.

use super::Report;
use serde::Serialize;
use serde_json::Value;
use std::{fs, io::Read as _, os::unix::fs::OpenOptionsExt as _, path::Path};

/// The most bytes read from a baseline: a report is a few kB, so a bigger file is not one.
const MAX_BASELINE_BYTES: u64 = 16 << 20;
/// After / before below this: the wait went down. The margin is for sampling noise: two
/// samples of an unchanged host differ by some percent.
const LOWER: f64 = 0.8;
/// After / before above this: the wait went up.
const HIGHER: f64 = 1.25;

/// A process's run-queue wait over one sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Wait {
    /// Run-queue wait per second of sample, all threads (ms).
    pub wait_ms_per_s: Option<f64>,
    /// Run-queue wait / time on a CPU.
    pub wait_fraction: Option<f64>,
}

/// What a saved report says, as far as the comparison needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    /// The file it was read from.
    pub file: String,
    /// The process it diagnosed.
    pub pid: Option<u32>,
    /// Its command name.
    pub comm: Option<String>,
    /// Its run-queue wait then.
    pub wait: Wait,
    /// The command lines its findings printed (`commands`).
    pub commands: Vec<String>,
}

/// The comparison, part of the report (`verify` in `--json`; `null` without `--verify`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verification {
    /// The baseline file.
    pub baseline: String,
    /// Whether the baseline is of the same process (pid and command name).
    pub same_process: bool,
    /// The run-queue wait before the change (the baseline's).
    pub before: Wait,
    /// The run-queue wait now.
    pub after: Wait,
    /// after / before of the wait fraction (of the wait per second when a fraction is missing
    /// or zero); `null` when neither can be compared.
    pub ratio: Option<f64>,
    /// `lower` (ratio below 0.8), `higher` (above 1.25), `about the same`, or `unknown`.
    pub outcome: &'static str,
    /// Commands printed before and not now: applied, or no longer needed.
    pub resolved: Vec<String>,
    /// Commands printed before and again now.
    pub still_printed: Vec<String>,
    /// One line saying all of it.
    pub summary: String,
}

/// Reads a saved `cotenant doctor --pid PID --json` report. The message of an error says what
/// is wrong with the file (the caller names it).
pub fn read_baseline(path: &Path) -> Result<Baseline, String> {
    // O_NONBLOCK: a FIFO given by mistake must not hang the command at open; it changes
    // nothing for a regular file.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot open it: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot stat it: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file: give the saved output of `cotenant doctor --pid PID --json`".into());
    }
    let mut text = String::new();
    file.take(MAX_BASELINE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if text.len() as u64 > MAX_BASELINE_BYTES {
        return Err(format!("larger than {} MiB, which no doctor report is", MAX_BASELINE_BYTES >> 20));
    }
    parse_baseline(&path.display().to_string(), &text)
}

/// Parses a saved report: it must be a doctor report (`schema_version`) of a process (with
/// `measurements.process`).
pub fn parse_baseline(file: &str, text: &str) -> Result<Baseline, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        format!("not JSON ({e}): give the saved output of `cotenant doctor --pid PID --json`")
    })?;
    if !v.get("schema_version").is_some_and(Value::is_u64) {
        return Err("not a `cotenant doctor --json` report (no schema_version)".into());
    }
    let process = &v["measurements"]["process"];
    if !process.is_object() {
        return Err("the report has no process measurements (a report of the host, or of a missing \
                    process): save one made with --pid and --json"
            .into());
    }
    let secs = v["duration_ms"].as_u64().filter(|ms| *ms > 0).map(|ms| ms as f64 / 1000.0);
    let wait = Wait {
        wait_ms_per_s: process["wait_ms"].as_f64().zip(secs).map(|(w, s)| round3(w / s)),
        wait_fraction: process["wait_fraction"].as_f64(),
    };
    let commands: Vec<String> = v["findings"]
        .as_array()
        .map(|findings| {
            findings
                .iter()
                .filter_map(|f| f["commands"].as_array())
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(Baseline {
        file: file.to_owned(),
        pid: v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()),
        comm: v["comm"].as_str().map(str::to_owned),
        wait,
        commands,
    })
}

/// The run-queue wait a report measured.
pub fn wait_of(report: &Report) -> Wait {
    let secs = report.duration_ms as f64 / 1000.0;
    match &report.measurements.process {
        Some(p) => Wait {
            wait_ms_per_s: (secs > 0.0).then(|| round3(p.wait_ms / secs)),
            wait_fraction: p.wait_fraction,
        },
        None => Wait::default(),
    }
}

/// Compares the report made now with the baseline. Pure.
pub fn compare(baseline: &Baseline, now: &Report) -> Verification {
    let before = baseline.wait;
    let after = wait_of(now);
    let same_process = baseline.pid == now.pid && (baseline.comm.is_none() || baseline.comm == now.comm);
    let ratio_of = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if x > 0.0 => Some(round3(y / x)),
        _ => None,
    };
    let ratio = ratio_of(before.wait_fraction, after.wait_fraction)
        .or_else(|| ratio_of(before.wait_ms_per_s, after.wait_ms_per_s));
    let outcome = match ratio {
        None => "unknown",
        Some(r) if r < LOWER => "lower",
        Some(r) if r > HIGHER => "higher",
        Some(_) => "about the same",
    };
    let printed_now: Vec<&String> = now.findings.iter().flat_map(|f| &f.commands).collect();
    let (still_printed, resolved): (Vec<String>, Vec<String>) =
        baseline.commands.iter().cloned().partition(|c| printed_now.contains(&c));
    let mut summary = format!(
        "against {}: run-queue wait {} → {} of run time, {} → {} ms per s: {outcome}",
        baseline.file,
        number(before.wait_fraction, 2),
        number(after.wait_fraction, 2),
        number(before.wait_ms_per_s, 1),
        number(after.wait_ms_per_s, 1),
    );
    if let Some(r) = ratio {
        summary.push_str(&format!(" ({r:.2}x)"));
    }
    summary.push('.');
    if !resolved.is_empty() {
        summary.push_str(&format!(" No longer printed: {}.", resolved.join("; ")));
    }
    if !still_printed.is_empty() {
        summary.push_str(&format!(" Printed again: {}.", still_printed.join("; ")));
    }
    if !same_process {
        let pid = baseline.pid.map_or("?".to_owned(), |p| p.to_string());
        let comm = baseline.comm.as_deref().unwrap_or("?");
        summary.push_str(&format!(
            " The baseline is of process {pid} ({comm}), not this one: the numbers may not compare."
        ));
    }
    Verification {
        baseline: baseline.file.clone(),
        same_process,
        before,
        after,
        ratio,
        outcome,
        resolved,
        still_printed,
        summary,
    }
}

fn number(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.decimals$}"))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::analyze::{Finding, Measurements, ProcessFacts, Severity};

    /// A saved report, as `--json` writes it (trimmed to what the comparison reads, plus noise).
    fn saved(pid: u32, wait_ms: f64, wait_fraction: f64, commands: &[&str]) -> String {
        serde_json::json!({
            "schema_version": 1,
            "pid": pid,
            "comm": "service",
            "duration_ms": 2000,
            "summary": "cpu-contention: ...",
            "findings": [
                {"kind": "cpu-contention", "commands": []},
                {"kind": "busy-sibling-cgroup", "commands": commands},
            ],
            "measurements": {
                "process": {"wait_ms": wait_ms, "wait_fraction": wait_fraction, "run_ms": 900.0}
            },
        })
        .to_string()
    }

    fn report(pid: u32, wait_ms: f64, wait_fraction: Option<f64>, commands: &[&str]) -> Report {
        let finding = Finding {
            kind: "busy-sibling-cgroup",
            severity: Severity::High,
            title: String::new(),
            evidence: vec![],
            recommendation: String::new(),
            commands: commands.iter().map(|c| c.to_string()).collect(),
            score: 0.0,
        };
        Report {
            schema_version: 1,
            pid: Some(pid),
            comm: Some("service".into()),
            duration_ms: 1000,
            root: "/".into(),
            partial: false,
            error: None,
            summary: String::new(),
            findings: vec![finding],
            measurements: Measurements {
                process: Some(ProcessFacts { pid, wait_ms, wait_fraction, ..ProcessFacts::default() }),
                ..Measurements::default()
            },
            not_read: vec![],
            unreadable_processes: 0,
            cooperating_neighbours: None,
            verify: None,
        }
    }

    const IDLE_B: &str = "cotenant cgroup set /sys/fs/cgroup/cpu/b --idle";

    #[test]
    fn a_saved_report_is_read_back() {
        let b = parse_baseline("before.json", &saved(42, 1000.0, 0.98, &[IDLE_B])).unwrap();
        assert_eq!((b.pid, b.comm.as_deref()), (Some(42), Some("service")));
        assert_eq!(b.wait, Wait { wait_ms_per_s: Some(500.0), wait_fraction: Some(0.98) });
        assert_eq!(b.commands, [IDLE_B]);
    }

    #[test]
    fn what_is_not_a_process_report_is_refused_and_said() {
        for (text, says) in [
            ("", "not JSON"),
            ("[1, 2]", "no schema_version"),
            ("{\"schema_version\": 1, \"measurements\": {\"process\": null}}", "no process measurements"),
        ] {
            let e = parse_baseline("x.json", text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_wait_went_down_once_the_remedy_was_applied() {
        let b = parse_baseline("before.json", &saved(42, 1000.0, 0.98, &[IDLE_B])).unwrap();
        let v = compare(&b, &report(42, 10.0, Some(0.01), &[]));
        assert_eq!(v.outcome, "lower");
        assert_eq!(v.ratio, Some(0.01));
        assert_eq!(v.after, Wait { wait_ms_per_s: Some(10.0), wait_fraction: Some(0.01) });
        assert!(v.same_process && v.still_printed.is_empty());
        assert_eq!(v.resolved, [IDLE_B]);
        let said = "0.98 → 0.01 of run time, 500.0 → 10.0 ms per s: lower";
        assert!(v.summary.contains(said), "{}", v.summary);
        assert!(v.summary.contains(&format!("No longer printed: {IDLE_B}.")), "{}", v.summary);
    }

    #[test]
    fn an_unchanged_wait_and_a_remedy_printed_again_are_said() {
        let b = parse_baseline("before.json", &saved(42, 1000.0, 0.98, &[IDLE_B])).unwrap();
        let v = compare(&b, &report(42, 450.0, Some(0.9), &[IDLE_B]));
        assert_eq!(v.outcome, "about the same");
        assert_eq!(v.still_printed, [IDLE_B]);
        assert!(v.resolved.is_empty());
        let worse = compare(&b, &report(42, 900.0, Some(1.5), &[IDLE_B]));
        assert_eq!(worse.outcome, "higher");
        // No fraction now (the process did not run): the wait per second decides.
        let v = compare(&b, &report(42, 100.0, None, &[]));
        assert_eq!((v.outcome, v.ratio), ("lower", Some(0.2)));
        // Nothing comparable at all.
        let zero = Baseline { wait: Wait::default(), ..b.clone() };
        assert_eq!(compare(&zero, &report(42, 100.0, Some(0.1), &[])).outcome, "unknown");
    }

    #[test]
    fn another_process_is_compared_but_said() {
        let b = parse_baseline("before.json", &saved(41, 1000.0, 0.98, &[])).unwrap();
        let v = compare(&b, &report(42, 10.0, Some(0.01), &[]));
        assert!(!v.same_process);
        assert!(v.summary.contains("The baseline is of process 41 (service)"), "{}", v.summary);
    }
}

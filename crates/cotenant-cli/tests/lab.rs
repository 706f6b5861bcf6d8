//! The lab as a user runs it: a `--quick` smoke run of each experiment (only `neighbours`
//! exists so far), and an interrupted run that must leave no worker process behind.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
                .map(|c| {
                    let c = String::from_utf8_lossy(&c);
                    c.contains("lab-worker") && c.contains(&needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn neighbours_quick_runs_every_pool_kind_and_writes_its_results() {
    let out = std::env::temp_dir().join(format!("cotenant-lab-test-{}", std::process::id()));
    let output =
        cotenant().args(["lab", "neighbours", "--quick", "--json", "--out"]).arg(&out).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let aggregates = results["aggregates"].as_array().unwrap();
    assert_eq!(aggregates.len(), 8, "P = 1, 2 times four pool kinds");
    for a in aggregates {
        assert_eq!(a["median"]["completed_fraction"], 1.0, "every offered item ran: {a}");
        assert!(a["median"]["service_p99_us"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(results["verdicts"].as_array().unwrap().len(), 2);
    let dir: PathBuf = out.join("neighbours");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Verdict") && report.contains("| 2 | adaptive |"), "{report}");
    assert!(dir.join("results.json").exists());
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn bad_lab_arguments_are_usage_errors_naming_the_argument() {
    let output = cotenant().args(["lab", "neighbours", "--load", "0"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("--load") && err.contains("more than 0"), "{err}");
}

#[test]
fn an_interrupted_run_leaves_no_worker_behind() {
    let mut lab = cotenant()
        .args(["lab", "neighbours", "--seconds", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = lab.id();
    let start = Instant::now();
    while workers_of(pid).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30), "the lab never started a worker");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill with a pid we own and a valid signal.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
    let status = lab.wait().unwrap();
    assert!(!status.success());
    // The kernel kills the workers when the lab dies (PR_SET_PDEATHSIG); give it a moment.
    let start = Instant::now();
    while !workers_of(pid).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "workers left behind: {:?}", workers_of(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
}

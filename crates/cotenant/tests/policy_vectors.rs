//! Replays every `testdata/policy/*.json` vector (format in its README) and checks each
//! decision. A new case is a new file, not a new test.

use std::path::{Path, PathBuf};

use cotenant::policy::{Policy, PolicyState, Sample};
use serde_json::Value;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/policy")
}

fn u64_field(sample: &Value, name: &str) -> u64 {
    sample[name].as_u64().unwrap_or_else(|| panic!("sample field {name} missing or not an integer: {sample}"))
}

fn opt_u64(sample: &Value, name: &str) -> Option<u64> {
    match &sample[name] {
        Value::Null => None,
        v => Some(v.as_u64().unwrap_or_else(|| panic!("sample field {name} is not an integer: {v}"))),
    }
}

fn parse_sample(v: &Value) -> Sample {
    Sample {
        elapsed_ns: u64_field(v, "elapsed_ns"),
        threads: u64_field(v, "threads") as u32,
        cpus: u64_field(v, "cpus") as u32,
        quota_cpus: v["quota_cpus"].as_f64(),
        self_ns: u64_field(v, "self_ns"),
        busy_ns: u64_field(v, "busy_ns"),
        idle_ns: u64_field(v, "idle_ns"),
        procs_running: opt_u64(v, "procs_running").map(|n| n as u32),
        throttled_ns: opt_u64(v, "throttled_ns").unwrap_or(0),
        workers_busy_ns: u64_field(v, "workers_busy_ns"),
        workers_cpu_ns: opt_u64(v, "workers_cpu_ns"),
        workers_runq_wait_ns: opt_u64(v, "workers_runq_wait_ns"),
        queued: u64_field(v, "queued") as u32,
    }
}

fn parse_policy(v: &Value) -> Policy {
    match v["kind"].as_str() {
        Some("adaptive") => Policy::adaptive(),
        Some("adaptive(tokens)") => Policy::adaptive().sharing_host_tokens(),
        Some("share") => Policy::share(v["overcommit"].as_f64().expect("share needs overcommit")),
        Some("fixed") => Policy::fixed(v["n"].as_u64().expect("fixed needs n") as usize),
        other => panic!("unknown policy kind {other:?}"),
    }
}

/// Replays one vector; returns a description of the first mismatch.
fn replay(path: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let case: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    let policy = parse_policy(&case["policy"]);
    let mut state = PolicyState::new(case["initial_target"].as_u64().ok_or("no initial_target")? as u32);
    let steps = case["steps"].as_array().ok_or("no steps")?;
    for (i, step) in steps.iter().enumerate() {
        let sample = parse_sample(&step["sample"]);
        let before = state.target;
        let decision = policy.decide(&sample, &mut state);
        let (want_target, want_reason) =
            (step["target"].as_u64().unwrap_or(0) as u32, step["reason"].as_str());
        if decision.target != want_target || Some(decision.reason.as_str()) != want_reason {
            return Err(format!(
                "step {i}: from {before}, {policy} decided {} ({}), the vector says {want_target} ({})",
                decision.target,
                decision.reason.as_str(),
                want_reason.unwrap_or("?")
            ));
        }
    }
    Ok(steps.len())
}

#[test]
fn every_policy_vector_replays() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .expect("testdata/policy exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 5, "expected the policy vectors, found {paths:?}");
    let failures: Vec<String> = paths
        .iter()
        .filter_map(|p| replay(p).err().map(|e| format!("{}: {e}", p.file_name().unwrap().to_string_lossy())))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_wrong_expectation_is_reported_with_the_step() {
    let path = vectors_dir().join("recorded-2cpu-busy-neighbour.json");
    let text = std::fs::read_to_string(&path).unwrap();
    // The recording's only contention decision (2 -> 1): claim it stayed at 2.
    let broken = text.replacen(
        "\"target\": 1, \"reason\": \"contention\"",
        "\"target\": 2, \"reason\": \"contention\"",
        1,
    );
    assert_ne!(broken, text, "the recording should contain a contention step");
    let tmp = std::env::temp_dir().join(format!("cotenant-broken-vector-{}.json", std::process::id()));
    std::fs::write(&tmp, broken).unwrap();
    let error = replay(&tmp).unwrap_err();
    std::fs::remove_file(&tmp).unwrap();
    assert!(error.contains("decided 1 (contention), the vector says 2"), "{error}");
}

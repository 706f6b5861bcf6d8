//! Replays every `testdata/policy/*.json` vector (format in its README) and checks each
//! decision; `go/policy_vectors_test.go` replays the same files, so the two ports cannot drift.
//! A new case is a new file, not a new test. Unknown fields are refused on both sides: a
//! misspelt field would otherwise be read as its default and the vector would test less than
//! it says.

use std::path::{Path, PathBuf};

use cotenant::policy::{AdaptiveConfig, Policy, PolicyState, Reason, Sample};
use serde_json::{Map, Value};

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/policy")
}

/// The object `v` (named `what` in errors), with every key among `allowed`.
fn object<'a>(v: &'a Value, what: &str, allowed: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let map = v.as_object().ok_or_else(|| format!("{what} is not an object: {v}"))?;
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => {
            Err(format!("{what} has an unknown field {unknown:?} (allowed: {})", allowed.join(", ")))
        }
        None => Ok(map),
    }
}

fn u64_field(sample: &Map<String, Value>, name: &str) -> Result<u64, String> {
    sample
        .get(name)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("sample field {name} missing or not an integer"))
}

fn u32_field(sample: &Map<String, Value>, name: &str) -> Result<u32, String> {
    u32::try_from(u64_field(sample, name)?).map_err(|_| format!("sample field {name} is above u32"))
}

fn opt_u64(sample: &Map<String, Value>, name: &str) -> Result<Option<u64>, String> {
    match sample.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| format!("sample field {name} is not an integer: {v}")),
    }
}

const SAMPLE_FIELDS: [&str; 13] = [
    "elapsed_ns",
    "threads",
    "cpus",
    "quota_cpus",
    "self_ns",
    "busy_ns",
    "idle_ns",
    "procs_running",
    "throttled_ns",
    "workers_busy_ns",
    "workers_cpu_ns",
    "workers_runq_wait_ns",
    "queued",
];

fn parse_sample(v: &Value) -> Result<Sample, String> {
    let s = object(v, "sample", &SAMPLE_FIELDS)?;
    let mut sample = Sample::default();
    sample.elapsed_ns = u64_field(s, "elapsed_ns")?;
    sample.threads = u32_field(s, "threads")?;
    sample.cpus = u32_field(s, "cpus")?;
    sample.quota_cpus = s.get("quota_cpus").and_then(Value::as_f64);
    sample.self_ns = u64_field(s, "self_ns")?;
    sample.busy_ns = u64_field(s, "busy_ns")?;
    sample.idle_ns = u64_field(s, "idle_ns")?;
    sample.procs_running = opt_u64(s, "procs_running")?.map(|n| n as u32);
    sample.throttled_ns = opt_u64(s, "throttled_ns")?.unwrap_or(0);
    sample.workers_busy_ns = u64_field(s, "workers_busy_ns")?;
    sample.workers_cpu_ns = opt_u64(s, "workers_cpu_ns")?;
    sample.workers_runq_wait_ns = opt_u64(s, "workers_runq_wait_ns")?;
    sample.queued = u32_field(s, "queued")?;
    Ok(sample)
}

const CONFIG_FIELDS: [&str; 12] = [
    "wait_threads",
    "wait_fraction",
    "throttled_fraction",
    "max_decrease",
    "idle_cpus",
    "neighbour_cpus",
    "neighbour_memory",
    "saturated_fraction",
    "probe_wait_min",
    "probe_wait_max",
    "borrow",
    "neighbours_share_tokens",
];

/// The default configuration with the fields of `v` (a partial `AdaptiveConfig`) replaced.
fn parse_config(v: &Value) -> Result<AdaptiveConfig, String> {
    let fields = object(v, "config", &CONFIG_FIELDS)?;
    let mut c = AdaptiveConfig::default();
    for (name, value) in fields {
        let float = || value.as_f64().ok_or_else(|| format!("config.{name} is not a number: {value}"));
        let int = || {
            value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("config.{name} is not a u32: {value}"))
        };
        let boolean = || value.as_bool().ok_or_else(|| format!("config.{name} is not a boolean: {value}"));
        match name.as_str() {
            "wait_threads" => c.wait_threads = float()?,
            "wait_fraction" => c.wait_fraction = float()?,
            "throttled_fraction" => c.throttled_fraction = float()?,
            "max_decrease" => c.max_decrease = float()?,
            "idle_cpus" => c.idle_cpus = float()?,
            "neighbour_cpus" => c.neighbour_cpus = float()?,
            "neighbour_memory" => c.neighbour_memory = int()?,
            "saturated_fraction" => c.saturated_fraction = float()?,
            "probe_wait_min" => c.probe_wait_min = int()?,
            "probe_wait_max" => c.probe_wait_max = int()?,
            "borrow" => c.borrow = boolean()?,
            "neighbours_share_tokens" => c.neighbours_share_tokens = boolean()?,
            other => unreachable!("object() refused {other}"),
        }
    }
    Ok(c)
}

fn parse_policy(v: &Value) -> Result<Policy, String> {
    let p = object(v, "policy", &["kind", "overcommit", "n", "config"])?;
    let policy = match p.get("kind").and_then(Value::as_str) {
        Some("adaptive") => match p.get("config") {
            Some(config) => Policy::adaptive_with(parse_config(config)?),
            None => Policy::adaptive(),
        },
        Some("adaptive(tokens)") => Policy::adaptive().sharing_host_tokens(),
        Some("share") => {
            Policy::share(p.get("overcommit").and_then(Value::as_f64).ok_or("share needs overcommit")?)
        }
        Some("fixed") => Policy::fixed(p.get("n").and_then(Value::as_u64).ok_or("fixed needs n")? as usize),
        other => return Err(format!("unknown policy kind {other:?}")),
    };
    policy.validate()?;
    Ok(policy)
}

/// Replays one vector's text; returns the reasons decided, or the first mismatch.
fn replay(text: &str) -> Result<Vec<Reason>, String> {
    let case: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let fields =
        object(&case, "the vector", &["description", "source", "policy", "initial_target", "steps"])?;
    let policy = parse_policy(fields.get("policy").ok_or("no policy")?)?;
    let initial = fields.get("initial_target").and_then(Value::as_u64).ok_or("no initial_target")?;
    let mut state = PolicyState::new(initial as u32);
    let steps = fields.get("steps").and_then(Value::as_array).ok_or("no steps")?;
    if steps.is_empty() {
        return Err("no steps".into());
    }
    let mut reasons = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let step = object(step, &format!("step {i}"), &["sample", "target", "reason"])?;
        let sample = parse_sample(step.get("sample").ok_or(format!("step {i}: no sample"))?)
            .map_err(|e| format!("step {i}: {e}"))?;
        let before = state.target();
        let decision = policy.decide(&sample, &mut state);
        let want_target = step.get("target").and_then(Value::as_u64).ok_or(format!("step {i}: no target"))?;
        let want_reason = step.get("reason").and_then(Value::as_str).ok_or(format!("step {i}: no reason"))?;
        if u64::from(decision.target) != want_target || decision.reason.as_str() != want_reason {
            return Err(format!(
                "step {i}: from {before}, {policy} decided {} ({}), the vector says {want_target} ({want_reason})",
                decision.target,
                decision.reason.as_str(),
            ));
        }
        reasons.push(decision.reason);
    }
    Ok(reasons)
}

fn vector_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .expect("testdata/policy exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn every_policy_vector_replays_and_together_they_reach_every_reason() {
    let paths = vector_paths();
    assert!(paths.len() >= 10, "expected the policy vectors, found {paths:?}");
    let mut reached = Vec::new();
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_name().unwrap().to_string_lossy();
        match std::fs::read_to_string(path).map_err(|e| e.to_string()).and_then(|text| replay(&text)) {
            Ok(reasons) => reached.extend(reasons),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let all = [
        Reason::Fixed,
        Reason::Share,
        Reason::Quota,
        Reason::Contention,
        Reason::Idle,
        Reason::Probe,
        Reason::Steady,
        Reason::Hold,
    ];
    let missing: Vec<&str> = all.iter().filter(|r| !reached.contains(r)).map(|r| r.as_str()).collect();
    assert!(missing.is_empty(), "no vector reaches the reasons {missing:?}");
}

fn recorded_vector() -> String {
    std::fs::read_to_string(vectors_dir().join("recorded-2cpu-busy-neighbour.json")).unwrap()
}

#[test]
fn a_wrong_expectation_is_reported_with_the_step() {
    let text = recorded_vector();
    // The recording's only contention decision (2 -> 1): claim it stayed at 2.
    let broken = text.replacen(
        "\"target\": 1, \"reason\": \"contention\"",
        "\"target\": 2, \"reason\": \"contention\"",
        1,
    );
    assert_ne!(broken, text, "the recording should contain a contention step");
    let error = replay(&broken).unwrap_err();
    assert!(error.contains("decided 1 (contention), the vector says 2"), "{error}");
}

#[test]
fn unknown_fields_are_refused_everywhere() {
    let text = recorded_vector();
    for (from, to, field) in [
        ("\"steps\":", "\"stpes\": [], \"steps\":", "stpes"),
        ("\"kind\": \"adaptive\"", "\"kind\": \"adaptive\", \"confg\": {}", "confg"),
        ("\"queued\":", "\"queue\": 1, \"queued\":", "queue"),
        ("\"target\":", "\"targt\": 1, \"target\":", "targt"),
    ] {
        let broken = text.replacen(from, to, 1);
        assert_ne!(broken, text, "{from} not found in the recording");
        let error = replay(&broken).unwrap_err();
        assert!(error.contains(&format!("unknown field \"{field}\"")), "{field}: {error}");
    }
    let error =
        parse_policy(&serde_json::json!({"kind": "adaptive", "config": {"wait_thread": 1.0}})).unwrap_err();
    assert!(error.contains("unknown field \"wait_thread\""), "{error}");
}

#[test]
fn the_defaults_match_the_shared_defaults_file() {
    let path = vectors_dir().join("defaults/adaptive.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: Value = serde_json::from_str(&text).unwrap();
    let fields = object(&file, "defaults", &["description", "config"]).unwrap();
    let config = fields.get("config").expect("defaults/adaptive.json has a config");
    let listed = object(config, "config", &CONFIG_FIELDS).unwrap();
    assert_eq!(listed.len(), CONFIG_FIELDS.len(), "the defaults file must list every field");
    assert_eq!(
        parse_config(config).unwrap(),
        AdaptiveConfig::default(),
        "AdaptiveConfig::default() differs from {} (change both, and go/adaptive.go)",
        path.display()
    );
    // And the file's values are not the defaults by accident of parse_config starting from
    // them: each field, set to another value, is seen.
    for name in CONFIG_FIELDS {
        let mut changed = config.clone();
        let v = &mut changed[name];
        *v = match v {
            Value::Bool(b) => Value::Bool(!*b),
            Value::Number(n) if n.is_u64() => Value::from(n.as_u64().unwrap() + 1),
            Value::Number(n) => Value::from(n.as_f64().unwrap() + 0.125),
            other => panic!("{name}: unexpected {other}"),
        };
        assert_ne!(parse_config(&changed).unwrap(), AdaptiveConfig::default(), "{name} is not read");
    }
}

//! Writes the simulated sample sequences of `testdata/policy/` (the recorded ones are written
//! by hand from real runs and are not touched). Each vector is a policy, a starting target and
//! a list of samples, each with the target and reason the policy must answer; the Rust runner
//! (`tests/policy_vectors.rs`) and, later, the Go port replay them.
//!
//! `cargo run -p cotenant --example policy_vectors -- testdata/policy`

use std::fmt::Write as _;

use cotenant::internal::policy_sim::{Grouping, Host, Tenant};
use cotenant::policy::{AdaptiveConfig, Policy, PolicyState, Sample};

/// Simulates `targets` saturated tenants on `cpus` CPUs for `periods` and records tenant
/// `record`'s samples and decisions.
fn simulate(
    policy: &Policy,
    policy_json: &str,
    cpus: u32,
    targets: &[u32],
    record: usize,
    periods: usize,
    description: &str,
) -> String {
    let mut host = Host::new(cpus, Grouping::Threads);
    for &t in targets {
        host.tenants.push(Tenant::saturated(policy.clone(), cpus, t));
    }
    let mut steps = Vec::new();
    for _ in 0..periods {
        // Re-run the recorded tenant's decision on a copy to capture its sample: the
        // simulator does not expose samples, so rebuild the same one here.
        let before: Vec<PolicyState> = host.tenants.iter().map(|t| t.state.clone()).collect();
        let outcome = host.step();
        let total: f64 = outcome.iter().map(|o| o.cpus).sum();
        let o = outcome[record];
        let runnable = f64::from(before[record].target.min(cpus));
        let period = host.period_ns as f64;
        let sample = Sample {
            elapsed_ns: host.period_ns,
            threads: cpus,
            cpus,
            quota_cpus: None,
            self_ns: (o.cpus * period) as u64,
            busy_ns: (total * period) as u64,
            idle_ns: ((f64::from(cpus) - total).max(0.0) * period) as u64,
            procs_running: None,
            throttled_ns: 0,
            workers_busy_ns: (runnable * period) as u64,
            workers_cpu_ns: Some((o.cpus * period) as u64),
            workers_runq_wait_ns: None,
            queued: 1,
        };
        let mut check = before[record].clone();
        let decision = policy.decide(&sample, &mut check);
        assert_eq!(check, host.tenants[record].state, "the rebuilt sample must reproduce the simulation");
        steps.push(format!(
            "    {{\"sample\": {}, \"target\": {}, \"reason\": \"{}\"}}",
            sample.to_json(),
            decision.target,
            decision.reason.as_str()
        ));
    }
    let mut out = String::new();
    writeln!(out, "{{").unwrap();
    writeln!(out, "  \"description\": \"{description}\",").unwrap();
    writeln!(out, "  \"source\": \"simulated (cotenant::internal::policy_sim, Grouping::Threads), regenerate with examples/policy_vectors.rs\",").unwrap();
    writeln!(out, "  \"policy\": {policy_json},").unwrap();
    writeln!(out, "  \"initial_target\": {},", targets[record]).unwrap();
    writeln!(out, "  \"steps\": [\n{}\n  ]", steps.join(",\n")).unwrap();
    writeln!(out, "}}").unwrap();
    out
}

/// Replays hand-written `samples` from `initial` and records each decision: for rules the
/// simulator cannot produce (a quota, throttling).
fn scripted(
    policy: &Policy,
    policy_json: &str,
    initial: u32,
    samples: &[Sample],
    description: &str,
) -> String {
    let mut state = PolicyState::new(initial);
    let steps: Vec<String> = samples
        .iter()
        .map(|sample| {
            let decision = policy.decide(sample, &mut state);
            format!(
                "    {{\"sample\": {}, \"target\": {}, \"reason\": \"{}\"}}",
                sample.to_json(),
                decision.target,
                decision.reason.as_str()
            )
        })
        .collect();
    let mut out = String::new();
    writeln!(out, "{{").unwrap();
    writeln!(out, "  \"description\": \"{description}\",").unwrap();
    writeln!(out, "  \"source\": \"scripted samples, decisions by the Rust policy, regenerate with examples/policy_vectors.rs\",").unwrap();
    writeln!(out, "  \"policy\": {policy_json},").unwrap();
    writeln!(out, "  \"initial_target\": {initial},").unwrap();
    writeln!(out, "  \"steps\": [\n{}\n  ]", steps.join(",\n")).unwrap();
    writeln!(out, "}}").unwrap();
    out
}

/// One 10 ms period on 4 CPUs of a pool of 4 threads that runs `running` workers, alone on
/// the host, with work queued; `quota` and `throttled_ms` as given.
fn alone(running: u32, quota: Option<f64>, throttled_ms: u64) -> Sample {
    let period = 10_000_000;
    let used = u64::from(running) * period;
    Sample {
        elapsed_ns: period,
        threads: 4,
        cpus: 4,
        quota_cpus: quota,
        self_ns: used,
        busy_ns: used,
        idle_ns: 4 * period - used,
        procs_running: Some(running),
        throttled_ns: throttled_ms * 1_000_000,
        workers_busy_ns: used,
        workers_cpu_ns: Some(used),
        workers_runq_wait_ns: Some(0),
        queued: 3,
    }
}

/// Constants unlike the defaults in every field the simulated cases exercise, so that a port
/// that reads one of them wrongly (or ignores it) fails.
fn tuned() -> (AdaptiveConfig, &'static str) {
    let config = AdaptiveConfig {
        wait_threads: 1.0,
        wait_fraction: 0.05,
        max_decrease: 0.25,
        idle_cpus: 1.0,
        neighbour_cpus: 1.0,
        neighbour_memory: 2,
        saturated_fraction: 0.8,
        probe_wait_min: 2,
        probe_wait_max: 16,
        ..AdaptiveConfig::default()
    };
    let json = "{\"kind\": \"adaptive\", \"config\": {\"wait_threads\": 1.0, \"wait_fraction\": 0.05, \
                \"max_decrease\": 0.25, \"idle_cpus\": 1.0, \"neighbour_cpus\": 1.0, \"neighbour_memory\": 2, \
                \"saturated_fraction\": 0.8, \"probe_wait_min\": 2, \"probe_wait_max\": 16}}";
    (config, json)
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "testdata/policy".to_owned());
    let (tuned_config, tuned_json) = tuned();
    let cases = [
        (
            "share-lock-in-small-process",
            Policy::share(1.0),
            "{\"kind\": \"share\", \"overcommit\": 1.0}",
            vec![16, 1],
            1,
            "Process B of the lock-in: A ran alone with 16 workers on 16 CPUs, B starts with 1. Under share(1), B's share is small because it has one worker, so it keeps one worker.",
        ),
        (
            "share-lock-in-big-process",
            Policy::share(1.0),
            "{\"kind\": \"share\", \"overcommit\": 1.0}",
            vec![16, 1],
            0,
            "Process A of the lock-in: it keeps 16 workers while B, with queued work, stays at 1.",
        ),
        (
            "adaptive-escapes-lock-in-small-process",
            Policy::adaptive(),
            "{\"kind\": \"adaptive\"}",
            vec![16, 1],
            1,
            "The lock-in start under adaptive, seen by B: it probes for more workers while the neighbours use more CPUs than it does, and reaches 8 of 16.",
        ),
        (
            "adaptive-escapes-lock-in-big-process",
            Policy::adaptive(),
            "{\"kind\": \"adaptive\"}",
            vec![16, 1],
            0,
            "The lock-in start under adaptive, seen by A: it gives back the workers that wait each time B probes, down to 8 of 16.",
        ),
    ];
    let more_cases = [
        (
            "adaptive-tuned-small-process",
            Policy::adaptive_with(tuned_config.clone()),
            tuned_json,
            vec![16, 1],
            1,
            "The lock-in start under adaptive with every tunable constant changed, seen by B (parity of the configuration between ports).",
        ),
        (
            "adaptive-tuned-big-process",
            Policy::adaptive_with(tuned_config),
            tuned_json,
            vec![16, 1],
            0,
            "The lock-in start under adaptive with every tunable constant changed, seen by A.",
        ),
        (
            "adaptive-tokens-two-processes",
            Policy::adaptive().sharing_host_tokens(),
            "{\"kind\": \"adaptive(tokens)\"}",
            vec![4, 4],
            0,
            "Two processes that share host CPU tokens, starting at 4 workers each on 16 CPUs: each counts the other as absent and grows into the idle CPUs until its workers wait.",
        ),
        (
            "fixed-two-processes",
            Policy::fixed(8),
            "{\"kind\": \"fixed\", \"n\": 8}",
            vec![8, 8],
            0,
            "fixed(8) next to another fixed(8) on 16 CPUs: the target never moves.",
        ),
    ];
    for (name, policy, json, targets, record, description) in cases.into_iter().chain(more_cases) {
        let text = simulate(&policy, json, 16, &targets, record, 40, description);
        write(&dir, name, &text);
    }
    let quota_samples = [
        alone(4, Some(2.0), 0), // a quota of 2 CPUs appears: quota
        alone(2, Some(2.0), 0), // hold
        alone(2, Some(2.0), 2), // throttled 20 % of the period: contention
        alone(1, Some(2.0), 0), // hold
        alone(1, Some(2.0), 0), // idle CPUs, work queued: grow back to the quota
        alone(2, Some(2.0), 0), // hold
        alone(2, Some(2.0), 0), // at the cap: steady
        alone(2, None, 0),      // the quota is lifted: grow into the idle CPUs
        alone(4, None, 0),      // hold
        alone(4, None, 0),      // steady at every thread
    ];
    let text = scripted(
        &Policy::adaptive(),
        "{\"kind\": \"adaptive\"}",
        4,
        &quota_samples,
        "A pool of 4 alone on 4 CPUs under a quota that appears, throttles it and is lifted: the quota, hold, contention (throttling), idle and steady rules.",
    );
    write(&dir, "adaptive-quota-appears-and-goes", &text);
}

fn write(dir: &str, name: &str, text: &str) {
    let path = format!("{dir}/{name}.json");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    println!("wrote {path}");
}

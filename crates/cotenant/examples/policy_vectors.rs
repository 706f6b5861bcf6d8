//! Writes the simulated sample sequences of `testdata/policy/` (the recorded ones are written
//! by hand from real runs and are not touched). Each vector is a policy, a starting target and
//! a list of samples, each with the target and reason the policy must answer; the Rust runner
//! (`tests/policy_vectors.rs`) and, later, the Go port replay them.
//!
//! `cargo run -p cotenant --example policy_vectors -- testdata/policy`

use std::fmt::Write as _;

use cotenant::policy::sim::{Grouping, Host, Tenant};
use cotenant::policy::{Policy, PolicyState, Sample};

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
    writeln!(out, "  \"source\": \"simulated (cotenant::policy::sim, Grouping::Threads), regenerate with examples/policy_vectors.rs\",").unwrap();
    writeln!(out, "  \"policy\": {policy_json},").unwrap();
    writeln!(out, "  \"initial_target\": {},", targets[record]).unwrap();
    writeln!(out, "  \"steps\": [\n{}\n  ]", steps.join(",\n")).unwrap();
    writeln!(out, "}}").unwrap();
    out
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "testdata/policy".to_owned());
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
    for (name, policy, json, targets, record, description) in cases {
        let text = simulate(&policy, json, 16, &targets, record, 40, description);
        let path = format!("{dir}/{name}.json");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
        println!("wrote {path}");
    }
}

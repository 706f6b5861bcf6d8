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
        let runnable = f64::from(before[record].target().min(cpus));
        let period = host.period_ns as f64;
        // No quota, throttling, `procs_running` or schedstat in the simulation: defaults.
        let mut sample = Sample::default();
        sample.elapsed_ns = host.period_ns;
        sample.threads = cpus;
        sample.cpus = cpus;
        sample.self_ns = (o.cpus * period) as u64;
        sample.busy_ns = (total * period) as u64;
        sample.idle_ns = ((f64::from(cpus) - total).max(0.0) * period) as u64;
        sample.workers_busy_ns = (runnable * period) as u64;
        sample.workers_cpu_ns = Some((o.cpus * period) as u64);
        sample.queued = 1;
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
    let mut sample = Sample::default();
    sample.elapsed_ns = period;
    sample.threads = 4;
    sample.cpus = 4;
    sample.quota_cpus = quota;
    sample.self_ns = used;
    sample.busy_ns = used;
    sample.idle_ns = 4 * period - used;
    sample.procs_running = Some(running);
    sample.throttled_ns = throttled_ms * 1_000_000;
    sample.workers_busy_ns = used;
    sample.workers_cpu_ns = Some(used);
    sample.workers_runq_wait_ns = Some(0);
    sample.queued = 3;
    sample
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

/// Simulates `targets` saturated tenants on 16 CPUs for 40 periods and writes tenant
/// `record`'s samples and decisions as the vector `name`.
fn write_simulated(
    dir: &str,
    name: &str,
    (policy, policy_json): (&Policy, &str),
    targets: &[u32],
    record: usize,
    description: &str,
) {
    write(dir, name, &simulate(policy, policy_json, 16, targets, record, 40, description));
}

/// The lock-in start under `policy` (A ran alone with 16 workers on 16 CPUs, B starts with 1)
/// seen by each process: `<prefix>-small-process` records B, `<prefix>-big-process` A.
fn lock_in(dir: &str, prefix: &str, (policy, policy_json): (Policy, &str), [b, a]: [&str; 2]) {
    write_simulated(dir, &format!("{prefix}-small-process"), (&policy, policy_json), &[16, 1], 1, b);
    write_simulated(dir, &format!("{prefix}-big-process"), (&policy, policy_json), &[16, 1], 0, a);
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "testdata/policy".to_owned());
    let (tuned_config, tuned_json) = tuned();
    lock_in(
        &dir,
        "share-lock-in",
        (Policy::share(1.0), "{\"kind\": \"share\", \"overcommit\": 1.0}"),
        [
            "Process B of the lock-in: A ran alone with 16 workers on 16 CPUs, B starts with 1. Under share(1), B's share is small because it has one worker, so it keeps one worker.",
            "Process A of the lock-in: it keeps 16 workers while B, with queued work, stays at 1.",
        ],
    );
    lock_in(
        &dir,
        "adaptive-escapes-lock-in",
        (Policy::adaptive(), "{\"kind\": \"adaptive\"}"),
        [
            "The lock-in start under adaptive, seen by B: it probes for more workers while the neighbours use more CPUs than it does, and reaches 8 of 16.",
            "The lock-in start under adaptive, seen by A: it gives back the workers that wait each time B probes, down to 8 of 16.",
        ],
    );
    lock_in(
        &dir,
        "adaptive-tuned",
        (Policy::adaptive_with(tuned_config), tuned_json),
        [
            "The lock-in start under adaptive with every tunable constant changed, seen by B (parity of the configuration between ports).",
            "The lock-in start under adaptive with every tunable constant changed, seen by A.",
        ],
    );
    write_simulated(
        &dir,
        "adaptive-tokens-two-processes",
        (&Policy::adaptive().sharing_host_tokens(), "{\"kind\": \"adaptive(tokens)\"}"),
        &[4, 4],
        0,
        "Two processes that share host CPU tokens, starting at 4 workers each on 16 CPUs: each counts the other as absent and grows into the idle CPUs until its workers wait.",
    );
    write_simulated(
        &dir,
        "fixed-two-processes",
        (&Policy::fixed(8), "{\"kind\": \"fixed\", \"n\": 8}"),
        &[8, 8],
        0,
        "fixed(8) next to another fixed(8) on 16 CPUs: the target never moves.",
    );
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

//! Prints the simulator tables of `docs/policy.md`: how `share` and `adaptive` split a host
//! between processes, period by period, in the scenarios the issue names (lock-in after one
//! process ran alone, P processes, a non-cooperating neighbour, steady load).
//!
//! `cargo run --release -p cotenant --example policy_sim`

use cotenant::internal::policy_sim::{jain, Grouping, Host, Tenant};
use cotenant::policy::{AdaptiveConfig, Policy};

/// Periods per simulated second at the default 10 ms period.
const PER_SECOND: usize = 100;

struct Run {
    jain_at_1s: f64,
    jain_last: f64,
    /// Periods until Jain's index first reaches 0.95 and stays there (None: never).
    converged_after: Option<usize>,
    changes_per_s_steady: f64,
    targets_at_1s: Vec<u32>,
    cpus_at_1s: Vec<f64>,
}

/// `tenants` saturated processes on `cpus` CPUs; tenant 0 starts at `first` workers, the others
/// at `others` (the lock-in scenario: A ran alone, so it has all; B starts small).
fn run(policy: &Policy, cpus: u32, grouping: Grouping, targets: &[u32], seconds: usize) -> Run {
    let mut host = Host::new(cpus, grouping);
    for &target in targets {
        host.tenants.push(Tenant::saturated(policy.clone(), cpus, target));
    }
    let periods = seconds * PER_SECOND;
    let mut jains = Vec::with_capacity(periods);
    let mut changes_steady = 0usize;
    let mut last_targets: Vec<u32> = targets.to_vec();
    let mut at_1s = (Vec::new(), Vec::new());
    for period in 0..periods {
        let outcome = host.step();
        let shares: Vec<f64> = outcome.iter().map(|o| o.cpus).collect();
        jains.push(jain(&shares));
        let now: Vec<u32> = host.tenants.iter().map(|t| t.state.target()).collect();
        if period >= PER_SECOND {
            changes_steady += now.iter().zip(&last_targets).filter(|(a, b)| a != b).count();
        }
        if period == PER_SECOND - 1 {
            at_1s = (outcome.iter().map(|o| o.target).collect(), shares.clone());
        }
        last_targets = now;
    }
    let converged_after = (0..periods).find(|&p| jains[p..].iter().all(|&j| j >= 0.95));
    let steady_seconds = (seconds - 1) as f64 * targets.len() as f64;
    Run {
        jain_at_1s: jains[PER_SECOND - 1],
        jain_last: jains[periods - 1],
        converged_after,
        changes_per_s_steady: changes_steady as f64 / steady_seconds,
        targets_at_1s: at_1s.0,
        cpus_at_1s: at_1s.1,
    }
}

fn main() {
    let policies =
        [("share(1)", Policy::share(1.0)), ("adaptive", Policy::adaptive_with(AdaptiveConfig::default()))];
    println!("| scenario | policy | Jain at 1 s | Jain at 10 s | fair (≥0.95 for good) after | target changes/s per process after 1 s | targets at 1 s | CPUs at 1 s |");
    println!("|---|---|---|---|---|---|---|---|");
    let scenarios: Vec<(String, u32, Grouping, Vec<u32>)> = vec![
        (
            "A alone had 16 of 16 CPUs, B starts with 1 (one cgroup)".into(),
            16,
            Grouping::Threads,
            vec![16, 1],
        ),
        ("same, one cgroup per process".into(), 16, Grouping::Tenants, vec![16, 1]),
        ("A had 2 of 2 CPUs, B starts with 1".into(), 2, Grouping::Threads, vec![2, 1]),
        ("A had 64 of 64, B starts with 1".into(), 64, Grouping::Threads, vec![64, 1]),
        ("both start with 16 of 16".into(), 16, Grouping::Threads, vec![16, 16]),
        ("3 processes on 12 CPUs: 12, 1, 1".into(), 12, Grouping::Threads, vec![12, 1, 1]),
        ("4 processes on 16 CPUs, all start with 16".into(), 16, Grouping::Threads, vec![16, 16, 16, 16]),
        ("one process alone on 16 CPUs, starts with 1".into(), 16, Grouping::Threads, vec![1]),
    ];
    for (name, cpus, grouping, targets) in scenarios {
        for (label, policy) in &policies {
            let r = run(policy, cpus, grouping, &targets, 10);
            println!(
                "| {name} | {label} | {:.3} | {:.3} | {} | {:.2} | {:?} | {} |",
                r.jain_at_1s,
                r.jain_last,
                r.converged_after.map_or("never".to_owned(), |p| format!("{} ms", p * 10)),
                r.changes_per_s_steady,
                r.targets_at_1s,
                r.cpus_at_1s.iter().map(|c| format!("{c:.1}")).collect::<Vec<_>>().join(", "),
            );
        }
    }
}

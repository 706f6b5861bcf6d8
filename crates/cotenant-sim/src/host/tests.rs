//! The host simulator's unit tests: single items, determinism, fairness, preemption, Figure 7
//! at 16 CPUs, host tokens and input checks.

use cotenant::Policy;

use super::*;

fn process(policy: Policy, threads: u32, rate: f64, service: u64, arrivals: Arrivals) -> ProcessConfig {
    ProcessConfig { policy, threads, rate, service, arrivals, uses_tokens: false, uses_leases: false }
}

fn host(cpus: u32, fairness: Fairness, processes: Vec<ProcessConfig>, duration: u64) -> HostConfig {
    HostConfig {
        cpus,
        fairness,
        processes,
        duration,
        period: 10 * MS,
        sched: SchedParams::linux(cpus),
        seed: 1,
        warmup: 0,
        spare_tokens: 0,
        submit_ns: 0,
        running_reweight: Default::default(),
        group_shares: Default::default(),
        scheduler: SchedulerModel::Idealised,
    }
}

/// Seed 000 Figure 7's setting: `processes` identical processes with pools of `cpus`
/// threads, each offered `load` of its fair share in 5 ms items.
fn figure_7(cpus: u32, processes: u32, policy: &Policy, load: f64, fairness: Fairness) -> HostConfig {
    let rate = load * f64::from(cpus) / f64::from(processes) / 0.005;
    let p = process(policy.clone(), cpus, rate, 5 * MS, Arrivals::Poisson);
    let mut config = host(cpus, fairness, vec![p; processes as usize], 5_000 * MS);
    config.warmup = 1_000 * MS;
    config
}

fn worst(run: &HostRun) -> u64 {
    run.processes.iter().map(|p| quantile(&p.service, 1.0)).max().unwrap_or(0)
}

fn throughput(run: &HostRun) -> f64 {
    run.processes.iter().map(|p| p.throughput_per_s).sum()
}

#[test]
fn alone_on_a_cpu_an_item_takes_its_service_time() {
    let p = process(Policy::fixed(1), 1, 50.0, 5 * MS, Arrivals::Uniform);
    let run = simulate(&host(1, Fairness::Threads, vec![p], 1_000 * MS)).unwrap();
    let only = &run.processes[0];
    assert_eq!((only.offered, only.completed), (50, 50));
    assert!(only.service.iter().all(|&s| s == 5 * MS), "{:?}", &only.service[..3]);
    assert!(only.end_to_end.iter().all(|&s| s == 5 * MS));
    assert_eq!(only.cpu_ns, 50 * 5 * MS);
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let config = figure_7(8, 4, &Policy::adaptive(), 1.0, Fairness::Processes);
    let run = simulate(&config).unwrap();
    assert_eq!(run, simulate(&config).unwrap());
    let other = simulate(&HostConfig { seed: 2, ..config }).unwrap();
    assert_ne!(run.processes[0].service, other.processes[0].service);
}

#[test]
fn every_item_runs_and_cpu_time_adds_up() {
    for fairness in [Fairness::Threads, Fairness::Processes] {
        for policy in [Policy::fixed(4), Policy::share(1.0), Policy::adaptive()] {
            let config = figure_7(4, 3, &policy, 1.5, fairness);
            let run = simulate(&config).unwrap();
            for p in &run.processes {
                assert_eq!(p.offered, p.completed, "{policy} {fairness:?}");
                assert_eq!(p.cpu_ns, p.completed * 5 * MS, "{policy} {fairness:?}");
                assert!(p.service.iter().all(|&s| s >= 5 * MS));
            }
            let cpu: u64 = run.processes.iter().map(|p| p.cpu_ns).sum();
            assert!(cpu <= 4 * run.simulated, "{policy} {fairness:?}");
        }
    }
}

/// Two CPUs, a pool of 8 busy threads and a pool of 1: per thread, the single thread gets
/// 2/9 of the CPUs; per process (a cgroup each), a whole CPU.
#[test]
fn fairness_is_per_thread_in_one_cgroup_and_per_process_across_cgroups() {
    let saturated =
        |threads: u32| process(Policy::fixed(threads as usize), threads, 10_000.0, 5 * MS, Arrivals::Uniform);
    for (fairness, expected) in [(Fairness::Threads, 2.0 / 9.0), (Fairness::Processes, 1.0)] {
        let config = host(2, fairness, vec![saturated(8), saturated(1)], 100 * MS);
        let run = simulate(&config).unwrap();
        let small = run.processes[1].cpu_ns as f64 / run.simulated as f64;
        assert!(
            (small / expected - 1.0).abs() < 0.1,
            "{fairness:?}: {small:.3} CPUs, expected {expected:.3}"
        );
    }
}

/// One CPU: a 100 ms item starts at 0; 1 ms items of another process arrive every 10 ms.
/// Each short item's worker wakes with the smaller virtual runtime and preempts the long
/// one, so it finishes in about its service time.
#[test]
fn a_woken_thread_preempts_a_cpu_hog() {
    let hog = process(Policy::fixed(1), 1, 1.0, 100 * MS, Arrivals::Uniform);
    let short = process(Policy::fixed(1), 1, 100.0, MS, Arrivals::Uniform);
    let run = simulate(&host(1, Fairness::Threads, vec![hog, short], 50 * MS)).unwrap();
    let quick = &run.processes[1];
    assert_eq!(quick.completed, 5);
    assert!(quantile(&quick.service, 1.0) <= 2 * MS, "{:?}", quick.service);
    assert!(quantile(&run.processes[0].service, 1.0) >= 105 * MS);
}

/// Seed 000 Figure 7 at 16 CPUs and 8 processes (issue 10 item 2): at no throughput cost,
/// adaptive pools cut the service p99 at least 5x against ignorant ones in every cell, and
/// the worst service time at least 5x at full load in per-process cgroups (the issue's
/// criterion), 3x in one cgroup (4.9x for this seed; 2.7-6.5x over seeds) and 2x in
/// overload. `RESULTS.md` "simulator" has the per-seed figures and why the others fall short.
#[test]
fn figure_7_at_16_cpus_adaptive_cuts_latency_at_no_throughput_cost() {
    let cells = [
        (Fairness::Processes, 1.0, 5.0),
        (Fairness::Threads, 1.0, 3.0),
        (Fairness::Processes, 1.5, 2.0),
        (Fairness::Threads, 1.5, 2.0),
    ];
    for (fairness, load, max_cut) in cells {
        let ignorant = simulate(&figure_7(16, 8, &Policy::fixed(16), load, fairness)).unwrap();
        let adaptive = simulate(&figure_7(16, 8, &Policy::adaptive(), load, fairness)).unwrap();
        let median_p99 = |run: &HostRun| {
            let mut v: Vec<u64> = run.processes.iter().map(|p| quantile(&p.service, 0.99)).collect();
            v.sort_unstable();
            v[v.len() / 2]
        };
        let cell = format!(
            "{fairness:?} at {load}: p99 {} vs {}, max {} vs {}, throughput {:.3}x",
            median_p99(&ignorant),
            median_p99(&adaptive),
            worst(&ignorant),
            worst(&adaptive),
            throughput(&adaptive) / throughput(&ignorant)
        );
        assert!(median_p99(&ignorant) >= 5 * median_p99(&adaptive), "{cell}");
        assert!(worst(&ignorant) as f64 >= max_cut * worst(&adaptive) as f64, "{cell}");
        assert!(throughput(&adaptive) >= 0.95 * throughput(&ignorant), "{cell}");
    }
}

#[test]
fn with_host_tokens_no_item_waits_for_a_cpu_and_none_is_lost() {
    // Every process shares the host's CPU tokens (`cotenant::tokens`): at most 16 items run
    // at once, so each runs on a CPU of its own from start to end, in either setting and
    // even in overload; the pools stay work-conserving, so throughput is ignorant's.
    for (fairness, load) in [(Fairness::Threads, 1.0), (Fairness::Processes, 1.0), (Fairness::Threads, 1.5)] {
        let ignorant = simulate(&figure_7(16, 8, &Policy::fixed(16), load, fairness)).unwrap();
        let mut config = figure_7(16, 8, &Policy::adaptive(), load, fairness);
        for p in &mut config.processes {
            p.uses_tokens = true;
        }
        let tokens = simulate(&config).unwrap();
        let cell = format!("{fairness:?} at {load}");
        assert_eq!(worst(&tokens), 5 * MS, "{cell}: an item waited for a CPU");
        assert!(worst(&ignorant) >= 10 * worst(&tokens), "{cell}");
        assert!(throughput(&tokens) >= 0.99 * throughput(&ignorant), "{cell}");
        let offered: u64 = tokens.processes.iter().map(|p| p.offered).sum();
        let completed: u64 = tokens.processes.iter().map(|p| p.completed).sum();
        assert_eq!(offered, completed, "{cell}: every item ran");
    }
}

#[test]
fn a_spare_token_lets_one_more_task_run_than_cpus() {
    // One CPU, a pool of 2 workers, 5 ms items arriving every 3.3 ms for 10 ms: with one token per
    // CPU they run one after another (5 ms each); with a spare, two share the CPU.
    let run = |spare| {
        let mut p = process(Policy::fixed(2), 2, 300.0, 5 * MS, Arrivals::Uniform);
        p.uses_tokens = true;
        let mut config = host(1, Fairness::Threads, vec![p], 10 * MS);
        config.spare_tokens = spare;
        simulate(&config).unwrap()
    };
    let (exact, spare) = (run(0), run(1));
    for run in [&exact, &spare] {
        assert_eq!(run.processes[0].completed, run.processes[0].offered);
    }
    assert_eq!(worst(&exact), 5 * MS);
    assert!(worst(&spare) > 5 * MS, "two items shared the CPU: {}", worst(&spare));
}

#[test]
fn bad_inputs_are_named() {
    let p = process(Policy::fixed(1), 1, 10.0, MS, Arrivals::Poisson);
    let mut config = host(0, Fairness::Threads, vec![p.clone()], 100 * MS);
    assert!(simulate(&config).unwrap_err().contains("cpus"));
    config.cpus = 1;
    config.processes[0].rate = f64::NAN;
    assert!(simulate(&config).unwrap_err().contains("process 0: rate"));
    config.processes[0].rate = 1.0;
    config.processes[0].policy = Policy::share(-1.0);
    assert!(simulate(&config).unwrap_err().contains("process 0: Policy::share"));
    config.processes.clear();
    assert!(simulate(&config).unwrap_err().contains("at least one process"));
}

#[test]
fn a_controller_samples_every_period_under_contention_coasts_alone_and_naps_when_idle() {
    let ten_s = 10_000 * MS;
    // Two adaptive pools overloading 2 CPUs: each sees the other, never calm, sampled every
    // period (1000 periods in 10 s, a few more while the backlog drains).
    let contended = simulate(&host(
        2,
        Fairness::Threads,
        vec![process(Policy::adaptive(), 2, 600.0, 5 * MS, Arrivals::Uniform); 2],
        ten_s,
    ))
    .unwrap();
    for p in &contended.processes {
        assert!(p.samples >= 990, "sampled every period: {}", p.samples);
    }
    // One adaptive pool alone, saturated: steady at every worker with no neighbour, so it
    // coasts, sampled every fourth period (`coast::MAX_STRIDE`) once calm.
    let alone = simulate(&host(
        2,
        Fairness::Threads,
        vec![process(Policy::adaptive(), 2, 600.0, 5 * MS, Arrivals::Uniform)],
        ten_s,
    ))
    .unwrap();
    let samples = alone.processes[0].samples;
    assert!((250..400).contains(&samples), "coasting: one sample per four periods, got {samples}");
    assert!(alone.processes[0].targets.len() >= 990, "its target is still recorded for every period");
    // One pool with an item every 500 ms: idle for a nap's ten periods after each, its
    // controller naps until the next item (about 12 samples per item, not 50).
    let idle = simulate(&host(
        2,
        Fairness::Threads,
        vec![process(Policy::adaptive(), 2, 2.0, 5 * MS, Arrivals::Uniform)],
        ten_s,
    ))
    .unwrap();
    let p = &idle.processes[0];
    assert_eq!(p.completed, 20);
    assert!(p.samples <= 20 * 14, "napping between items: {} samples", p.samples);
    assert_eq!(worst(&idle), 5 * MS, "an item that wakes a napping controller runs at once");
}

#[test]
fn a_submitting_thread_queues_each_item_after_its_own_cpu_time() {
    for scheduler in [SchedulerModel::Idealised, SchedulerModel::Linux] {
        let p = process(Policy::fixed(1), 1, 50.0, 5 * MS, Arrivals::Uniform);
        let config =
            HostConfig { submit_ns: 10_000, scheduler, ..host(1, Fairness::Threads, vec![p], 1_000 * MS) };
        let run = simulate(&config).unwrap();
        let only = &run.processes[0];
        assert_eq!((only.offered, only.completed), (50, 50), "{scheduler:?}");
        // Alone on its CPU: the submitting thread runs 10 µs, then the worker the item's 5 ms.
        assert!(only.service.iter().all(|&s| s == 5 * MS), "{scheduler:?}");
        assert!(
            only.end_to_end.iter().all(|&s| s == 5 * MS + 10_000),
            "{scheduler:?}: {:?}",
            &only.end_to_end[..3]
        );
        assert_eq!(
            only.cpu_ns,
            50 * (5 * MS + 10_000),
            "{scheduler:?}: the process's CPU time counts the submits"
        );
    }
}

#[test]
fn with_submitting_threads_every_item_runs_once() {
    for scheduler in [SchedulerModel::Idealised, SchedulerModel::Linux] {
        for fairness in [Fairness::Threads, Fairness::Processes] {
            for policy in [Policy::fixed(4), Policy::adaptive()] {
                let config =
                    HostConfig { submit_ns: 20_000, scheduler, ..figure_7(4, 3, &policy, 1.5, fairness) };
                let run = simulate(&config).unwrap();
                for p in &run.processes {
                    let label = format!("{scheduler:?} {fairness:?} {policy}");
                    assert_eq!(p.offered, p.completed, "{label}");
                    // Each submit queues at least one item: between 0 and one submit per item.
                    assert!(p.cpu_ns >= p.completed * 5 * MS, "{label}");
                    assert!(p.cpu_ns <= p.completed * (5 * MS + 20_000), "{label}");
                    assert!(p.service.iter().all(|&s| s >= 5 * MS), "{label}");
                }
            }
        }
    }
}

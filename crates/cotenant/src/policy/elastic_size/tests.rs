//! Unit tests of the elastic sizing: growth with a backlog, Little's law without one, shrinking,
//! the task estimate, utilisation feedback, and the settings' validation.

use super::*;

const MS: u64 = 1_000_000;

/// A period of 10 ms in which `tasks` tasks of `cpu_ms` CPU and `wait_ms` blocked finished.
fn period(cpus: u32, tasks: u64, cpu_ms: f64, wait_ms: f64, arrivals: u64, queued: u32) -> ElasticSample {
    let cpu = (cpu_ms * MS as f64) as u64;
    let wait = (wait_ms * MS as f64) as u64;
    ElasticSample {
        elapsed_ns: 10 * MS,
        cpus,
        tasks,
        sampled: tasks,
        wall_ns: tasks * (cpu + wait),
        cpu_ns: tasks * cpu,
        runq_ns: 0,
        arrivals,
        queued,
        idle_ns: 0,
    }
}

#[test]
fn with_a_backlog_the_pool_grows_to_the_seeds_formula() {
    // Seed 002's example, at U = 0.8: 8 CPUs, 50 ms waiting, 5 ms computing: 70.4 → 71
    // (the pool rounds up: a fraction of a thread short leaves CPUs idle).
    let mut config = ElasticConfig::new(1, 256);
    config.utilization = 0.8;
    let mut state = ElasticState::new(1);
    let decision = decide(&config, &period(8, 10, 5.0, 50.0, 10, 100), &mut state);
    assert_eq!((decision.size, decision.reason), (71, ElasticReason::Grow));
    assert!((state.wait_compute_ratio().unwrap() - 10.0).abs() < 1e-9);
}

#[test]
fn without_a_backlog_littles_law_bounds_the_size() {
    // 500 tasks/s of 50 ms each: L = 25, with 1.5 headroom 37.5 → 38, below the formula's 4 × (1 + 9) = 40.
    let config = ElasticConfig::new(1, 256);
    let mut state = ElasticState::new(1);
    let decision = decide(&config, &period(4, 5, 5.0, 45.0, 5, 0), &mut state);
    assert_eq!((decision.size, decision.reason), (38, ElasticReason::Grow));
}

#[test]
fn cpu_bound_tasks_get_one_thread_per_cpu_the_policy_allows() {
    // (No idle CPU in these samples: feedback never grows the pool.)
    let config = ElasticConfig::new(1, 64);
    let mut state = ElasticState::new(1);
    assert_eq!(decide(&config, &period(2, 20, 1.0, 0.0, 20, 50), &mut state).size, 2);
    // The CPU policy gives a CPU back to a neighbour: the wanted size follows at once,
    // the pool shrinks after the hysteresis.
    let mut waited = 0;
    loop {
        let decision = decide(&config, &period(1, 10, 1.0, 0.0, 10, 50), &mut state);
        assert_eq!(decision.wanted, 1);
        waited += 1;
        if decision.reason == ElasticReason::Shrink {
            assert_eq!(decision.size, 1);
            break;
        }
        assert_eq!((decision.size, decision.reason), (2, ElasticReason::Hold));
    }
    assert_eq!(waited, config.shrink_after);
}

#[test]
fn run_queue_wait_is_not_counted_as_blocking() {
    // Tasks that compute 5 ms and wait 45 ms for a CPU (a busy host) are CPU-bound.
    let config = ElasticConfig::new(1, 256);
    let mut state = ElasticState::new(1);
    let mut sample = period(2, 10, 5.0, 0.0, 10, 100);
    sample.runq_ns = 10 * 45 * MS;
    sample.wall_ns += sample.runq_ns;
    assert_eq!(decide(&config, &sample, &mut state).size, 2);
    assert_eq!(state.wait_compute_ratio(), Some(0.0));
}

#[test]
fn before_any_task_finished_a_backlog_doubles_the_size() {
    let config = ElasticConfig::new(2, 20);
    let mut state = ElasticState::new(2);
    let sizes: Vec<u32> =
        (0..5).map(|_| decide(&config, &period(2, 0, 0.0, 0.0, 0, 10), &mut state).size).collect();
    assert_eq!(sizes, [4, 8, 16, 20, 20]);
    // No backlog and no estimate: keep what we have.
    let decision = decide(&config, &period(2, 0, 0.0, 0.0, 0, 0), &mut state);
    assert_eq!((decision.size, decision.reason), (20, ElasticReason::Steady));
}

#[test]
fn shrinking_keeps_the_largest_size_wanted_while_waiting() {
    let mut config = ElasticConfig::new(1, 100);
    config.shrink_after = 3;
    let mut state = ElasticState::new(40);
    state.compute_ns = Some(1e6);
    state.wait_ns = 9e6; // W/C = 9: at most 20 threads on 2 CPUs
    let wanted: Vec<(u32, ElasticReason)> = [2u64, 6, 3]
        .iter()
        .map(|&arrivals| {
            // 10 ms tasks, `arrivals` per 10 ms, no backlog: L × 1.5 = arrivals × 1.5.
            let d = decide(&config, &period(2, arrivals, 1.0, 9.0, arrivals, 0), &mut state);
            (d.size, d.reason)
        })
        .collect();
    assert_eq!(wanted, [(40, ElasticReason::Hold), (40, ElasticReason::Hold), (9, ElasticReason::Shrink)]);
}

#[test]
fn a_single_slow_task_moves_the_estimate_only_a_little() {
    let config = ElasticConfig::new(1, 1000);
    let mut state = ElasticState::new(1);
    decide(&config, &period(2, 100, 1.0, 9.0, 100, 10), &mut state);
    let before = state.wait_compute_ratio().unwrap();
    decide(&config, &period(2, 1, 1.0, 999.0, 1, 10), &mut state);
    let after = state.wait_compute_ratio().unwrap();
    assert!((before - 9.0).abs() < 1e-9);
    assert!(after < before + 0.05 * 990.0, "moved from {before} to {after}");
}

#[test]
fn sizes_stay_within_min_and_max_for_any_input() {
    let config = ElasticConfig::new(3, 7);
    for (cpu_ms, wait_ms, queued) in [(0.0, 5.0, 9), (1.0, 1e6, 9), (1.0, 0.0, 0), (0.0, 0.0, 0)] {
        let mut state = ElasticState::new(3);
        for _ in 0..60 {
            let d = decide(&config, &period(64, 3, cpu_ms, wait_ms, 3, queued), &mut state);
            assert!((3..=7).contains(&d.size), "{d:?} for cpu {cpu_ms} wait {wait_ms}");
        }
    }
}

/// A closed loop with a backlog on `cpus` CPUs: tasks block `wait_ms` and compute 1 ms;
/// `size` threads keep `min(cpus, size × saturation(size))` CPUs busy, where queueing for
/// the CPUs makes the formula's size fill only about 70 % of them.
fn backlog_period(cpus: u32, size: u32, wait_ms: f64) -> ElasticSample {
    let formula = f64::from(cpus) * (1.0 + wait_ms);
    let used = (f64::from(cpus) * (0.7 * f64::from(size) / formula).min(1.0)).min(f64::from(cpus));
    let elapsed = 100 * MS; // long enough that every period finishes whole tasks
    let tasks = (used * 100.0).round() as u64;
    ElasticSample {
        elapsed_ns: elapsed,
        cpus,
        tasks,
        sampled: tasks,
        wall_ns: tasks * ((1.0 + wait_ms) * MS as f64) as u64,
        cpu_ns: tasks * MS,
        runq_ns: 0,
        arrivals: tasks,
        queued: 100,
        idle_ns: ((f64::from(cpus) - used).max(0.0) * elapsed as f64) as u64,
    }
}

#[test]
fn utilisation_feedback_fills_the_cpus_the_formula_leaves_idle_and_keeps_the_size() {
    let config = ElasticConfig::new(1, 1000);
    let mut state = ElasticState::new(1);
    let mut sizes = Vec::new();
    for _ in 0..200 {
        let sample = backlog_period(2, state.size, 20.0);
        sizes.push(decide(&config, &sample, &mut state).size);
    }
    // The formula says 2 × 21 = 42 threads; they fill 70 % of the CPUs; full needs 60.
    assert!(sizes.contains(&42), "{sizes:?}");
    let last = *sizes.last().unwrap();
    assert!((60..=120).contains(&last), "settled at {last}: {sizes:?}");
    assert!(sizes[150..].iter().all(|&s| s == last), "stable once full: {sizes:?}");
}

#[test]
fn utilisation_feedback_stops_when_growing_does_not_help() {
    // CPUs that cannot be filled (the tasks serialise on a lock): 1 of 2 stays idle.
    let config = ElasticConfig::new(1, 1000);
    let mut state = ElasticState::new(1);
    let mut sizes = Vec::new();
    for _ in 0..400 {
        let mut sample = backlog_period(2, state.size, 20.0);
        sample.tasks = sample.tasks.min(100);
        sample.sampled = sample.tasks;
        sample.cpu_ns = sample.tasks * MS;
        sample.wall_ns = sample.tasks * 21 * MS;
        sample.idle_ns = 100 * MS; // one CPU stays idle whatever the pool does (a lock)
        sizes.push(decide(&config, &sample, &mut state).size);
    }
    let last = *sizes.last().unwrap();
    assert!(state.fill.plateau, "{sizes:?}");
    assert!(last <= 4 * 42, "crept to {last}: {sizes:?}");
    assert!(sizes[300..].iter().all(|&s| s == last), "{sizes:?}");
}

#[test]
fn estimates_come_from_the_sampled_tasks_and_feedback_counts_every_task() {
    let config = ElasticConfig::new(1, 1000);
    let mut state = ElasticState::new(40);
    // 160 tasks finish in each 10 ms period, 10 of them measured: 1 ms CPU, 9 ms blocked.
    let mut sample = period(16, 10, 1.0, 9.0, 160, 5);
    sample.tasks = 160;
    sample.idle_ns = 40 * MS; // 4 CPUs idle: only the tasks' CPU use can make the window full
                              // The first period grows the pool to the formula's 16 × (1 + 9) = 160 and starts a
                              // measuring window; the window ends WINDOW_PERIODS later.
    for _ in 0..=WINDOW_PERIODS {
        decide(&config, &sample, &mut state);
    }
    assert!((state.wait_compute_ratio().unwrap() - 9.0).abs() < 1e-9, "W/C from the 10 measured");
    // The window counted every task: 160 × 1 ms per 10 ms is all 16 CPUs (the sampled
    // tasks alone would be 1 CPU, and the pool would double): full, the size holds.
    assert!(state.fill.full);
    assert_eq!(state.size, 160);
}

#[test]
fn bad_settings_are_named() {
    assert!(ElasticConfig::new(0, 4).validate().unwrap_err().contains("min"));
    assert!(ElasticConfig::new(5, 4).validate().unwrap_err().contains("max (4)"));
    let mut config = ElasticConfig::new(1, 4);
    config.utilization = 1.5;
    assert!(config.validate().unwrap_err().contains("utilization"));
}

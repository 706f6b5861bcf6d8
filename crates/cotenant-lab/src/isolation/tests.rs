//! Unit tests of `lab isolation`'s pure parts: the CPU split, the medians and ratios, the
//! verdicts (on medians and run by run) and table, the scenarios chosen, and the doctor's lines.

use super::*;

fn run(p99: f64, b: f64) -> RunFigures {
    RunFigures {
        latency_us: [p99 / 4.0, p99 / 2.0, p99, p99 * 2.0],
        completed: 100,
        errors: 0,
        b_chunks_per_s: b,
    }
}

#[test]
fn the_cpus_split_in_halves_with_at_least_one_each() {
    assert_eq!(split_cpus(2), ("0".into(), "1".into()));
    assert_eq!(split_cpus(22), ("0-10".into(), "11-21".into()));
    assert_eq!(split_cpus(1), ("0".into(), "1".into()), "one CPU: the scenario needs two");
}

#[test]
fn ratios_are_to_the_baseline_and_to_the_unisolated_batch() {
    let aggs = [
        aggregate(Scenario::Baseline, &[run(1000.0, f64::NAN)]),
        aggregate(Scenario::Unisolated, &[run(8000.0, 100.0), run(6000.0, 120.0), run(7000.0, 110.0)]),
        aggregate(Scenario::Background, &[run(1100.0, 99.0)]),
    ];
    assert_eq!(aggs[1].latency_us[2], 7000.0);
    assert_eq!(aggs[1].p99_range_us, (6000.0, 8000.0));
    assert_eq!(ratios(&aggs, &aggs[1]), (7.0, 1.0));
    let (p99, tput) = ratios(&aggs, &aggs[2]);
    assert!((p99 - 1.1).abs() < 1e-9 && (tput - 0.9).abs() < 1e-9);
    let v = verdicts(&aggs);
    assert_eq!(v[0], "unisolated: A's p99 7.00x baseline's; B keeps 100% of its unisolated throughput");
    assert!(v.last().unwrap().ends_with(": met"), "{v:?}");
    let t = table(&aggs);
    assert!(
        t.contains(
            "| baseline | 0.25 | 0.50 | 1.00 (1.00–1.00) | 2.00 | 1.00x | — | 0 | 0.40 / 1.50 / 2.30 |"
        ),
        "{t}"
    );
}

#[test]
fn baseline_and_unisolated_always_run_and_missing_controllers_skip_their_scenarios() {
    assert_eq!(chosen_scenarios(&[], true, true), SCENARIOS.to_vec());
    assert_eq!(
        chosen_scenarios(&[Scenario::Background], true, true),
        vec![Scenario::Baseline, Scenario::Unisolated, Scenario::Background]
    );
    let without = chosen_scenarios(&[], false, false);
    assert!(!without.contains(&Scenario::Pinned));
    assert!(!without.contains(&Scenario::CgroupIdle) && !without.contains(&Scenario::BackgroundCgroupIdle));
    assert!(!without.contains(&Scenario::CgroupSetIdle), "cgroup set --idle needs cpu.idle too");
    assert!(without.contains(&Scenario::BackgroundOneCgroup), "needs no controller beyond cpu");
}

#[test]
fn doctor_lines_count_each_top_finding_over_the_repeats() {
    let d = |scenario, top: &str| Diagnosis { scenario, top: top.into(), summary: format!("{top}: ...") };
    let diagnoses = [
        d(Scenario::Unisolated, "cpu-pressure"),
        d(Scenario::Unisolated, "cpu-contention"),
        d(Scenario::Baseline, "nothing-wrong"),
        d(Scenario::Unisolated, "cpu-contention"),
    ];
    let lines = doctor_lines(&[Scenario::Baseline, Scenario::Unisolated, Scenario::Idle], &diagnoses);
    assert_eq!(
        lines,
        vec![
            "baseline: nothing-wrong 1/1 — \"nothing-wrong: ...\"".to_owned(),
            "unisolated: cpu-contention 2/3, cpu-pressure 1/3 — \"cpu-pressure: ...\"".to_owned(),
        ]
    );
}

#[test]
fn cgroup_set_idle_is_a_scenario_of_its_own_with_b_made_idle_by_the_command() {
    assert_eq!(Scenario::CgroupSetIdle.name(), "cgroup-set-idle");
    assert_eq!(Scenario::CgroupSetIdle.b_cgroup(), BCgroup::OwnIdleByCgroupSet);
    assert_eq!(Scenario::CgroupSetIdle.batch_args(), Scenario::CgroupIdle.batch_args());
    assert!(Scenario::CgroupSetIdle.needs_cpu_idle() && Scenario::CgroupIdle.needs_cpu_idle());
    assert!(!Scenario::Idle.needs_cpu_idle());
    // Right after cgroup-idle in the table, and chosen alone with the two references.
    let at = SCENARIOS.iter().position(|s| *s == Scenario::CgroupSetIdle).unwrap();
    assert_eq!(SCENARIOS[at - 1], Scenario::CgroupIdle);
    assert_eq!(
        chosen_scenarios(&[Scenario::CgroupSetIdle], false, true),
        vec![Scenario::Baseline, Scenario::Unisolated, Scenario::CgroupSetIdle]
    );
    // Every scenario has a distinct name (they key the rows).
    let mut names: Vec<&str> = SCENARIOS.iter().map(|s| s.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), SCENARIOS.len());
}

#[test]
fn cgroup_set_idle_is_judged_run_by_run_four_of_five() {
    let aggs = [
        aggregate(Scenario::Baseline, &[run(1000.0, f64::NAN)]),
        aggregate(Scenario::Unisolated, &[run(8000.0, 100.0)]),
    ];
    // p99 ≤ 1.2 ms and B ≥ 90 chunks/s: the fourth run fails on A, the fifth on B.
    let runs = [run(1100.0, 95.0), run(1200.0, 90.0), run(900.0, 99.0), run(1300.0, 99.0), run(1000.0, 80.0)];
    assert_eq!(runs_meeting_targets(&aggs, &runs), Some(3));
    let line = run_verdict(Scenario::CgroupSetIdle, &aggs, &runs, 5, &[]).unwrap();
    let head = "cgroup-set-idle (B's cgroup made idle by `cotenant cgroup set --idle`)";
    assert!(line.starts_with(head), "{line}");
    assert!(line.ends_with("in 3 of 5 runs (target at least 4): NOT met"), "{line}");
    let line = run_verdict(Scenario::CgroupSetIdle, &aggs, &runs[..4], 4, &[]).unwrap();
    assert!(line.ends_with("in 3 of 4 runs (target at least 4): NOT met"), "{line}");
    // A failed run (4 figures of 5 repeats) counts as one that missed.
    let line = run_verdict(Scenario::CgroupSetIdle, &aggs, &runs[..4], 5, &[]).unwrap();
    assert!(line.ends_with("in 3 of 5 runs (target at least 4): NOT met"), "{line}");
    let good = [run(1100.0, 95.0), run(1200.0, 90.0), run(900.0, 99.0), run(1000.0, 99.0), run(1000.0, 80.0)];
    let line = run_verdict(Scenario::CgroupSetIdle, &aggs, &good, 5, &[]).unwrap();
    assert!(line.ends_with("in 4 of 5 runs (target at least 4): met"), "{line}");
    // B unisolated judged by the same targets: named, and called out when it meets them too.
    let line = run_verdict(Scenario::CgroupSetIdle, &aggs, &good, 5, &runs).unwrap();
    assert!(line.ends_with("met (B unisolated: 3 of 5 runs)"), "{line}");
    let line = run_verdict(Scenario::CgroupSetIdle, &aggs, &good, 5, &good).unwrap();
    assert!(line.contains("but B unisolated met the same targets in 4 of 5 runs"), "{line}");
    // One quick run must meet it alone; other scenarios have no such line.
    let one = run_verdict(Scenario::CgroupSetIdle, &aggs, &good[..1], 1, &[]).unwrap();
    assert!(one.ends_with("1 of 1 runs (target at least 1): met"), "{one}");
    assert_eq!(run_verdict(Scenario::CgroupIdle, &aggs, &good, 5, &[]), None);
    assert_eq!(run_verdict(Scenario::CgroupSetIdle, &aggs, &[], 0, &[]), None);
    // Without the references nothing can be judged, and the line says so.
    let line = run_verdict(Scenario::CgroupSetIdle, &aggs[..1], &good, 5, &[]).unwrap();
    assert!(line.ends_with("cannot be judged without baseline and unisolated runs"), "{line}");
}

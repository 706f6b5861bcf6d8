//! Unit tests of `lab isolation`'s pure parts: the CPU split, the medians and ratios, the
//! verdicts and table, the scenarios chosen, and the doctor's lines.

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

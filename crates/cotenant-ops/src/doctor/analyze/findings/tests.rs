//! Unit tests of [`rank`].

use super::*;

fn f(kind: &'static str, severity: Severity, score: f64) -> Finding {
    Finding {
        kind,
        severity,
        title: kind.into(),
        evidence: vec![],
        recommendation: String::new(),
        commands: vec![],
        score,
    }
}

fn kinds(v: &[Finding]) -> Vec<&'static str> {
    v.iter().map(|f| f.kind).collect()
}

#[test]
fn contention_leads_over_everything_but_sample_throttling() {
    let ranked = rank(vec![
        f("cpu-pressure", Severity::Medium, 0.4),
        f("migrations", Severity::Low, 50.0),
        f("cpu-contention", Severity::High, 0.48),
        f("low-weight", Severity::Medium, 10.0),
    ]);
    assert_eq!(kinds(&ranked), ["cpu-contention", "low-weight", "cpu-pressure", "migrations"]);
    let ranked = rank(vec![
        f("cpu-contention", Severity::High, 4.0),
        f("throttling", Severity::High, 640.0),
        f("throttling", Severity::Low, 10_000.0),
    ]);
    assert_eq!(kinds(&ranked), ["throttling", "cpu-contention", "throttling"]);
    assert_eq!(ranked[0].severity, Severity::High);
}

#[test]
fn past_throttling_does_not_lead_and_nothing_wrong_does() {
    let ranked = rank(vec![f("throttling", Severity::Low, 1.0), f("migrations", Severity::Low, 12.0)]);
    assert_eq!(kinds(&ranked), ["nothing-wrong", "throttling", "migrations"]);
    assert_eq!(kinds(&rank(vec![])), ["nothing-wrong"]);
}

#[test]
fn missing_process_leads() {
    let ranked =
        rank(vec![f("cpu-pressure", Severity::Medium, 0.9), f("process-not-found", Severity::High, 0.0)]);
    assert_eq!(kinds(&ranked), ["process-not-found", "cpu-pressure"]);
}

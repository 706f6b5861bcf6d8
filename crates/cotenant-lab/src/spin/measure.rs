//! The runs of `lab spin`, repeat by repeat: the three scenarios (strategies interleaved), the
//! sessions sweep and the uncontended runs; each run's row goes to the outcome as it is measured.

use crate::Outcome;

use super::aggregate::{row_of, Measured};
use super::model::Strategy;
use super::plan::{Plan, Scenario};
use super::session::run_once;

/// Runs every part of `plan`, `repeats` times, pushing each run's row to `outcome`.
pub(super) fn measure(plan: &Plan, outcome: &mut Outcome) -> anyhow::Result<Measured> {
    let mut measured = Measured::default();
    for repeat in 0..plan.repeats {
        run_scenarios(plan, repeat, &mut measured, outcome)?;
        run_sweep(plan, repeat, &mut measured, outcome)?;
        run_uncontended(plan, repeat, &mut measured, outcome)?;
    }
    Ok(measured)
}

/// Part 1: the three scenarios, strategies interleaved within each repeat.
fn run_scenarios(
    plan: &Plan,
    repeat: usize,
    measured: &mut Measured,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let repeats = plan.repeats;
    for (si, scenario) in Scenario::ALL.iter().enumerate() {
        for (ki, &strategy) in Strategy::ALL.iter().enumerate() {
            eprintln!("lab spin: repeat {}/{repeats}, {}, {}", repeat + 1, scenario.name(), strategy.name());
            let spec = plan.scenario_spec(*scenario, strategy);
            let result = run_once(&spec)?;
            let row = row_of(
                &result,
                "scenario",
                scenario.name(),
                strategy,
                plan.sessions,
                spec.cpus.len(),
                repeat,
            );
            measured.record_scenario(si, ki, *scenario, strategy, repeat, result);
            outcome.rows.push(row);
        }
    }
    Ok(())
}

/// Part 2: throughput against sessions, restricted, boosted throughout.
fn run_sweep(
    plan: &Plan,
    repeat: usize,
    measured: &mut Measured,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let (repeats, restricted) = (plan.repeats, plan.restricted);
    for &k in plan.per_cpu {
        let s = k * restricted;
        for &strategy in &Strategy::ALL {
            eprintln!(
                "lab spin: repeat {}/{repeats}, {s} sessions on {restricted} CPU(s), {}",
                repeat + 1,
                strategy.name()
            );
            let spec = plan.sweep_spec(k, strategy);
            let result = run_once(&spec)?;
            measured.record_sweep(k, strategy, &result);
            outcome.rows.push(row_of(
                &result,
                "sessions",
                &format!("{k} per CPU"),
                strategy,
                s,
                restricted,
                repeat,
            ));
        }
    }
    Ok(())
}

/// Part 3: uncontended, one session per allowed CPU.
fn run_uncontended(
    plan: &Plan,
    repeat: usize,
    measured: &mut Measured,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    for &strategy in &Strategy::ALL {
        let spec = plan.uncontended_spec(strategy);
        let result = run_once(&spec)?;
        measured.record_uncontended(strategy, &result);
        outcome.rows.push(row_of(
            &result,
            "uncontended",
            "uncontended",
            strategy,
            plan.allowed.len(),
            plan.allowed.len(),
            repeat,
        ));
    }
    Ok(())
}

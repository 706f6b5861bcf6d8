//! Seed 003's isolation experiment, extended (issue 6): tenant A, a real HTTP server doing
//! about 200 µs of CPU work per request on a pool sized to the CPU count, next to tenant B, a
//! CPU-bound batch job on every CPU, under every isolation option; A driven by the open-loop
//! load generator (`loadgen.rs`), B's throughput counted. The tenants are `tenants.rs`.
//!
//! Each run: A and B in their own `cotenant-lab-*` cgroups (equal weights unless the scenario
//! says otherwise) → A listens → B starts → after a warm-up, the load runs for the run's
//! length while B counts its chunks over the same window → B reports, A is stopped. Both
//! tenants are the lab's children (`runner::LabChild`), with deadlines: a run whose tenant
//! hangs or fails is recorded as failed and the others go on. The reduction to tables and
//! verdicts is pure (`aggregate`, `verdicts`) and unit-tested.
//!
//! | file | what it owns |
//! |---|---|
//! | `plan.rs` | pure: the scenarios, which of them run on this host, the pinned CPU split, the doctor's sample |
//! | `one_run.rs` | one run: both tenants started in their cgroups, the load, the doctor, B's report |
//! | `report.rs` | pure: runs reduced to medians per scenario, the ratios, table, verdicts (run by run for `cgroup-set-idle`) and doctor lines |
//!
//! `run` (here) goes through them: plan, every run repeat by repeat, rows as they are measured
//! (typed as `RunRow` and `MeasuredRow`), then the report.

mod one_run;
mod plan;
mod report;
#[cfg(test)]
mod tests;

pub use plan::{chosen_scenarios, doctor_sample, split_cpus, BCgroup, Scenario, SCENARIOS};
pub use report::{
    aggregate, doctor_lines, ratios, run_verdict, runs_meeting_targets, table, verdicts, Aggregate,
    Diagnosis, RunFigures, B_TARGET, P99_TARGET,
};

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::runner;
use super::{Chart, Lab, Outcome, Series};
use crate::args::LabArgs;

use one_run::{has_cpu_idle, run_once, Config, OneRun};

/// Requests per second offered to A (about 0.4 CPU of work at 200 µs each).
pub const RATE: f64 = 2000.0;
/// CPU work per request (µs).
pub const WORK_US: u64 = 200;
/// Keep-alive connections of the load generator.
pub const CONNECTIONS: usize = 16;
/// Between B's start and the load's: B at full speed, A's pool idle.
const WARM_UP: Duration = Duration::from_millis(500);

/// The configuration of one run as its row records it: the whole row of a run that failed
/// ([`super::failed_row`]), and the first keys of every other.
#[derive(Debug, Serialize)]
struct RunRow {
    /// The scenario's name (`baseline`, `baseline-pinned`, ...).
    scenario: &'static str,
    /// Which repeat this is, from 0.
    repeat: usize,
}

/// The row of a run that ended: its configuration, A's load and latencies, B's throughput, how
/// each tenant ran and the doctor's finding about A.
#[derive(Debug, Serialize)]
struct MeasuredRow {
    /// The run's configuration, its keys side by side with the figures'.
    #[serde(flatten)]
    run: RunRow,
    /// Requests per second offered to A.
    rate_per_s: f64,
    /// CPU work per request (µs).
    work_us: u64,
    /// Length of the load (s).
    seconds: f64,
    /// CPUs others kept busy just before the run (CPUs, over 300 ms).
    host_busy_cpus_before: f64,
    /// A's median latency (µs).
    p50_us: f64,
    /// A's 95th percentile latency (µs).
    p95_us: f64,
    /// A's 99th percentile latency (µs).
    p99_us: f64,
    /// A's 99.9th percentile latency (µs).
    p999_us: f64,
    /// Requests A answered (count).
    completed: u64,
    /// Requests due that were not answered: failed, or still unanswered at the end (count).
    errors: u64,
    /// B's chunks of work per second over the load's window (null when A ran alone).
    b_chunks_per_s: Option<f64>,
    /// How B's threads were scheduled (empty without B).
    b_ran_as: String,
    /// How the load generator's threads were scheduled.
    client_ran_as: String,
    /// The kind of the doctor's top finding about A (`cpu-contention`, `nothing-wrong`, ...).
    doctor_top: String,
    /// The doctor's one-line summary.
    doctor_summary: String,
}

/// Runs the experiment.
pub fn run(lab: &Lab, args: &LabArgs) -> anyhow::Result<Outcome> {
    let layout = match lab.cgroups_for("isolation") {
        Ok(layout) => layout,
        Err(skipped) => return Ok(*skipped),
    };
    let config = Config {
        seconds: args.seconds.map_or(if args.quick { 1.0 } else { 5.0 }, |s| s as f64),
        rate: RATE,
        client: args.client_priority,
    };
    let repeats = args.repeats.unwrap_or(if args.quick { 1 } else { 5 }) as usize;
    let has_cpu_idle = has_cpu_idle(layout);
    let scenarios = chosen_scenarios(&args.scenarios, layout.has_cpuset(), has_cpu_idle);
    let mut outcome = Outcome::default();
    let mut runs: Vec<Vec<RunFigures>> = vec![Vec::new(); scenarios.len()];
    let mut priorities = Vec::new();
    let mut diagnoses = Vec::new();
    let mut clients: Vec<String> = Vec::new();
    // Repeats are interleaved (every scenario once, then again) so that a slow drift in the
    // host's background noise spreads over all scenarios instead of biasing one.
    for repeat in 0..repeats {
        for (i, &scenario) in scenarios.iter().enumerate() {
            let busy_before = lab.quiet_check();
            eprintln!("lab isolation: repeat {}/{repeats}, {}", repeat + 1, scenario.name());
            let run_row = RunRow { scenario: scenario.name(), repeat };
            let OneRun { figures, b_ran_as, client_ran_as, diagnosis } =
                match run_once(lab, layout, scenario, &config) {
                    Ok(one) => one,
                    // A failed run (a tenant hung or crashed) gets its row; the others go on.
                    Err(e) => match runner::failed_run(&e) {
                        Some(why) => {
                            eprintln!("lab isolation: the run failed and is recorded as such: {why}");
                            outcome.rows.push(super::failed_row(super::row_of(&run_row), &why));
                            continue;
                        }
                        None => return Err(e),
                    },
                };
            let [p50_us, p95_us, p99_us, p999_us] = figures.latency_us;
            let row = MeasuredRow {
                run: run_row,
                rate_per_s: config.rate,
                work_us: WORK_US,
                seconds: config.seconds,
                host_busy_cpus_before: busy_before,
                p50_us,
                p95_us,
                p99_us,
                p999_us,
                completed: figures.completed,
                errors: figures.errors,
                // NaN (A ran alone) is written as null.
                b_chunks_per_s: (!figures.b_chunks_per_s.is_nan()).then_some(figures.b_chunks_per_s),
                b_ran_as: b_ran_as.clone(),
                client_ran_as: client_ran_as.clone(),
                doctor_top: diagnosis.top.clone(),
                doctor_summary: diagnosis.summary.clone(),
            };
            if !clients.contains(&client_ran_as) {
                clients.push(client_ran_as);
            }
            outcome.rows.push(super::row_of(&row));
            runs[i].push(figures);
            diagnoses.push(diagnosis);
            if repeat == 0 && !b_ran_as.is_empty() {
                priorities.push(format!("{}: {b_ran_as}", scenario.name()));
            }
        }
    }
    // A scenario whose every run failed has no figures (its failed rows are in the report).
    let aggregates: Vec<Aggregate> = scenarios
        .iter()
        .zip(&runs)
        .filter(|(_, runs)| !runs.is_empty())
        .map(|(&scenario, runs)| aggregate(scenario, runs))
        .collect();
    let mut report = format!(
        "Tenant A: an HTTP/1.1 server (tiny_http) doing {WORK_US} µs of CPU work per request on a pool of one \
         worker per CPU, offered {RATE} requests/s open loop over {CONNECTIONS} keep-alive loopback connections \
         (latency from each request's intended send time). Tenant B: CPU-bound chunks on every CPU. Each in its \
         own cgroup (sibling cgroups of equal weight) unless the scenario says otherwise; {:.0} s runs after a {} ms warm-up, {repeats} repeats \
         interleaved, medians.\n\n",
        config.seconds,
        WARM_UP.as_millis()
    );
    report.push_str(&table(&aggregates));
    if !layout.has_cpuset() {
        report.push_str("\nThe pinned scenario was skipped: no cpuset controller.\n");
    }
    if !has_cpu_idle {
        report.push_str("\nThe cgroup-idle scenarios were skipped: this kernel's cgroups have no cpu.idle (Linux 5.15+).\n");
    }
    if scenarios.contains(&Scenario::CgroupSetIdle) && has_cpu_idle {
        report.push_str(
            "\n`cgroup-set-idle`: B's cgroup made idle by the code of `cotenant cgroup set --idle` (the \
             remedy `cotenant doctor` prints for a busy sibling cgroup), judged run by run in the verdicts.\n",
        );
    }
    let _ = writeln!(report, "\nB ran as: {}.", priorities.join("; "));
    let _ = writeln!(
        report,
        "\nThe load generator's threads ran as: {} (`--client-priority`; realtime stands in for a client on \
         another host, which B cannot delay).",
        clients.join("; ")
    );
    let _ = writeln!(
        report,
        "\n`cotenant doctor --pid <A>` during each run ({} s in the middle of the load), top finding per \
         repeat:\n",
        doctor_sample(Duration::from_secs_f64(config.seconds)).as_secs_f64()
    );
    for line in doctor_lines(&scenarios, &diagnoses) {
        let _ = writeln!(report, "- {line}");
    }
    outcome.report = report;
    outcome.verdicts = verdicts(&aggregates);
    let unisolated: &[RunFigures] =
        scenarios.iter().position(|&s| s == Scenario::Unisolated).map_or(&[], |i| runs[i].as_slice());
    outcome.verdicts.extend(
        scenarios
            .iter()
            .zip(&runs)
            .filter_map(|(&scenario, runs)| run_verdict(scenario, &aggregates, runs, repeats, unisolated)),
    );
    outcome.charts = vec![Chart {
        file_stem: "percentiles".into(),
        title: "tenant A's latency by percentile".into(),
        x_label: "percentile (50, 95, 99, 99.9)".into(),
        y_label: "latency (ms)".into(),
        log_y: true,
        beside: Vec::new(),
        series: aggregates
            .iter()
            .map(|a| Series {
                name: a.scenario.name().into(),
                points: [50.0, 95.0, 99.0, 99.9]
                    .iter()
                    .zip(a.latency_us)
                    .map(|(&p, v)| (p, v / 1000.0))
                    .collect(),
            })
            .collect(),
    }];
    outcome.summary = serde_json::to_value(&aggregates)?;
    Ok(outcome)
}

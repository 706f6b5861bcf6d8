//! The reduction of `lab isolation`, pure: one run's figures, a scenario's medians over its
//! repeats, the ratios to the baseline and the unisolated batch, the table, the verdicts (on
//! medians, and run by run for `cgroup-set-idle`), and the doctor's findings tallied per
//! scenario.

use std::fmt::Write as _;

use serde::Serialize;

use cotenant_ops::stats::median;

use super::plan::Scenario;

/// One run's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunFigures {
    /// A's latency percentiles (µs): p50, p95, p99, p99.9.
    pub latency_us: [f64; 4],
    /// Requests answered / failed / due.
    pub completed: u64,
    /// Failed requests.
    pub errors: u64,
    /// B's chunks per second in the load window (NaN when A ran alone).
    pub b_chunks_per_s: f64,
}

/// A scenario over its repeats: medians.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Aggregate {
    /// The scenario.
    pub scenario: Scenario,
    /// Repeats.
    pub repeats: usize,
    /// Median of each percentile (µs).
    pub latency_us: [f64; 4],
    /// Smallest and largest p99 over repeats (µs).
    pub p99_range_us: (f64, f64),
    /// Median of B's throughput.
    pub b_chunks_per_s: f64,
    /// Errors over all repeats.
    pub errors: u64,
}

/// Reduces one scenario's runs (at least one).
pub fn aggregate(scenario: Scenario, runs: &[RunFigures]) -> Aggregate {
    let pick = |f: &dyn Fn(&RunFigures) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
    let p99s: Vec<f64> = runs.iter().map(|r| r.latency_us[2]).collect();
    Aggregate {
        scenario,
        repeats: runs.len(),
        latency_us: [0, 1, 2, 3].map(|i| pick(&|r| r.latency_us[i])),
        p99_range_us: (
            p99s.iter().copied().fold(f64::INFINITY, f64::min),
            p99s.iter().copied().fold(0.0, f64::max),
        ),
        b_chunks_per_s: pick(&|r| r.b_chunks_per_s),
        errors: runs.iter().map(|r| r.errors).sum(),
    }
}

fn find(aggregates: &[Aggregate], scenario: Scenario) -> Option<&Aggregate> {
    aggregates.iter().find(|a| a.scenario == scenario)
}

/// A's p99 over the baseline's, and B's throughput over the unisolated one's.
pub fn ratios(aggregates: &[Aggregate], a: &Aggregate) -> (f64, f64) {
    let p99 = find(aggregates, Scenario::Baseline).map_or(f64::NAN, |b| a.latency_us[2] / b.latency_us[2]);
    let tput =
        find(aggregates, Scenario::Unisolated).map_or(f64::NAN, |u| a.b_chunks_per_s / u.b_chunks_per_s);
    (p99, tput)
}

/// The verdict lines: what isolated A and what it cost B.
pub fn verdicts(aggregates: &[Aggregate]) -> Vec<String> {
    let mut out = Vec::new();
    for a in aggregates.iter().filter(|a| a.scenario.batch_args().is_some()) {
        let (p99, tput) = ratios(aggregates, a);
        out.push(format!(
            "{}: A's p99 {:.2}x baseline's; B keeps {:.0}% of its unisolated throughput",
            a.scenario.name(),
            p99,
            tput * 100.0
        ));
    }
    for bg in aggregates.iter().filter(|a| a.scenario.is_background_pool()) {
        let (p99, tput) = ratios(aggregates, bg);
        let holds = p99 <= 1.2 && tput >= 0.9;
        out.push(format!(
            "{}: A's p99 {p99:.2}x baseline's (target at most 1.2x), B {:.0}% of unisolated (target at least 90%): {}",
            bg.scenario.name(),
            tput * 100.0,
            if holds { "met" } else { "NOT met" }
        ));
    }
    out
}

/// A's p99 at most this many times the baseline's (median) in the targets' lines.
pub const P99_TARGET: f64 = 1.2;
/// B's throughput at least this share of its unisolated one (median) in the targets' lines:
/// the table's reference for B, B next to an A it does not yield to.
pub const B_TARGET: f64 = 0.9;

/// How many of a scenario's runs meet both targets, each run against the baseline's median
/// p99 and the unisolated median throughput; `None` without a baseline or unisolated run.
pub fn runs_meeting_targets(aggregates: &[Aggregate], runs: &[RunFigures]) -> Option<usize> {
    let base_p99 = find(aggregates, Scenario::Baseline)?.latency_us[2];
    let b_ref = find(aggregates, Scenario::Unisolated)?.b_chunks_per_s;
    if !(base_p99 > 0.0 && b_ref > 0.0) {
        return None;
    }
    // NaN (B did not run) compares false: such a run does not meet the target.
    let meets =
        |r: &&RunFigures| r.latency_us[2] / base_p99 <= P99_TARGET && r.b_chunks_per_s / b_ref >= B_TARGET;
    Some(runs.iter().filter(meets).count())
}

/// The run-by-run verdict of a scenario judged so ([`Scenario::judged_per_run`]): A's p99 within
/// [`P99_TARGET`] of the baseline's and B at [`B_TARGET`] of its unisolated throughput in at
/// least 4 runs of 5 (four fifths, rounded up, of the `repeats` tried: a failed run counts as
/// one that missed); `None` for other scenarios or without repeats. `unisolated` are B's
/// unisolated runs, judged by the same targets: when they meet them too, the line says that on
/// this host the targets do not tell the remedy from no remedy.
pub fn run_verdict(
    scenario: Scenario,
    aggregates: &[Aggregate],
    runs: &[RunFigures],
    repeats: usize,
    unisolated: &[RunFigures],
) -> Option<String> {
    if !scenario.judged_per_run() || repeats == 0 {
        return None;
    }
    let repeats = repeats.max(runs.len());
    let needed = (4 * repeats).div_ceil(5);
    let head = format!(
        "{} (B's cgroup made idle by `cotenant cgroup set --idle`): A's p99 at most {P99_TARGET}x the \
         baseline's and B at least {:.0}% of its unisolated throughput",
        scenario.name(),
        B_TARGET * 100.0
    );
    let control = match runs_meeting_targets(aggregates, unisolated) {
        Some(u) if !unisolated.is_empty() && u >= needed => format!(
            "; but B unisolated met the same targets in {u} of {repeats} runs: on this host they do \
             not tell the remedy from no remedy"
        ),
        Some(u) if !unisolated.is_empty() => format!(" (B unisolated: {u} of {repeats} runs)"),
        _ => String::new(),
    };
    Some(match runs_meeting_targets(aggregates, runs) {
        Some(met) => format!(
            "{head} in {met} of {repeats} runs (target at least {needed}): {}{control}",
            if met >= needed { "met" } else { "NOT met" }
        ),
        None => format!("{head}: cannot be judged without baseline and unisolated runs"),
    })
}

/// The Markdown table, with the seed's figures beside ours.
pub fn table(aggregates: &[Aggregate]) -> String {
    let mut out = String::from(
        "| scenario | p50 ms | p95 ms | p99 ms (range) | p99.9 ms | p99 vs baseline | \
         B throughput vs unisolated | errors | noisy-neighbour course (22 CPUs) p50 / p95 / p99 ms |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for a in aggregates {
        let (p99, tput) = ratios(aggregates, a);
        let ms = |us: f64| us / 1000.0;
        let seed = a
            .scenario
            .seed_figures()
            .map_or("—".to_owned(), |s| format!("{:.2} / {:.2} / {:.2}", s[0], s[1], s[2]));
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.2} | {:.2} ({:.2}–{:.2}) | {:.2} | {:.2}x | {} | {} | {} |",
            a.scenario.name(),
            ms(a.latency_us[0]),
            ms(a.latency_us[1]),
            ms(a.latency_us[2]),
            ms(a.p99_range_us.0),
            ms(a.p99_range_us.1),
            ms(a.latency_us[3]),
            p99,
            if tput.is_nan() { "—".to_owned() } else { format!("{:.0}%", tput * 100.0) },
            a.errors,
            seed
        );
    }
    out
}

/// What `doctor --pid <A>` said during one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The scenario.
    pub scenario: Scenario,
    /// The top finding's kind (`cpu-contention`, `nothing-wrong`, ...).
    pub top: String,
    /// The report's one-line summary.
    pub summary: String,
}

/// One line per scenario: the top finding of each repeat's diagnosis, the most frequent first
/// with its count, and the first repeat's summary.
pub fn doctor_lines(scenarios: &[Scenario], diagnoses: &[Diagnosis]) -> Vec<String> {
    let mut out = Vec::new();
    for &scenario in scenarios {
        let mine: Vec<&Diagnosis> = diagnoses.iter().filter(|d| d.scenario == scenario).collect();
        let Some(first) = mine.first() else { continue };
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for d in &mine {
            match counts.iter_mut().find(|(k, _)| *k == d.top) {
                Some((_, n)) => *n += 1,
                None => counts.push((&d.top, 1)),
            }
        }
        // Stable: ties keep the order of first appearance.
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        let tally: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}/{}", mine.len())).collect();
        out.push(format!("{}: {} — \"{}\"", scenario.name(), tally.join(", "), first.summary));
    }
    out
}

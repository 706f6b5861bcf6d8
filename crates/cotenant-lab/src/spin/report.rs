//! The report of `lab spin`, pure: the tables (scenarios, sessions sweep, uncontended), the
//! timeline charts, the verdicts against issue 8's acceptance, and the JSON summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;

use crate::{Chart, Outcome, Series};

use super::aggregate::{increase, median, ms, Cell, Measured};
use super::model::Strategy;
use super::plan::{Plan, Scenario};
use super::BOOSTED_NICE;

/// The seed's figures: P99.9 increase under `taskset` + `nice` (its Figures 2b and 3b).
const SEED_INCREASE_SPIN: f64 = 21.68;
const SEED_INCREASE_BACKOFF: f64 = 0.07;

/// What the scenario table found, for the verdicts and the summary.
struct ScenarioFigures {
    /// The summary's `scenarios`: one object per scenario and strategy.
    summary_cells: Vec<serde_json::Value>,
    /// Per strategy, the inverted scenario's P99.9 increase: over the whole run, in the nice window.
    increases: BTreeMap<&'static str, (f64, f64)>,
    /// Per strategy, the nice window against the same strategy restricted without inversion.
    inversion_effects: BTreeMap<&'static str, f64>,
}

/// Writes `measured` into `outcome`: the report, the charts, the verdicts and the summary.
pub(super) fn report(plan: &Plan, measured: &Measured, outcome: &mut Outcome) {
    let mut report = String::new();
    write_header(&mut report, plan, &measured.refused);
    let figures = write_scenarios(&mut report, &measured.cells);
    let sweep_json = write_sweep(&mut report, plan, &measured.sweep);
    let (spin_free, backoff_free) = write_uncontended(&mut report, plan, &measured.uncontended);
    push_charts(outcome, &measured.timelines);
    push_verdicts(outcome, &figures, &measured.refused, spin_free, backoff_free);
    outcome.summary = summary(plan, measured, &figures, &sweep_json);
    outcome.report = report;
}

/// The heading: what ran and how latency is measured, and why a figure may mislead (a
/// contended baseline, a refused boost).
fn write_header(report: &mut String, plan: &Plan, refused: &Option<String>) {
    let (sessions, restricted, boosted, repeats) =
        (plan.sessions, plan.restricted, plan.boosted, plan.repeats);
    let (allowed, scenario_time, round_trip) = (&plan.allowed, plan.scenario_time, plan.round_trip);
    let _ = write!(
        report,
        "## Snapshot waits under restriction and priority inversion\n\n\
         {sessions} sessions; unrestricted = all {n} allowed CPUs, restricted = {restricted} CPU(s) ({per} sessions per CPU); \
         inverted = restricted with {boosted} session(s) at nice {BOOSTED_NICE} from {a:.1} s to {b:.1} s of a {d:.1} s run. \
         Latency = end to end, as the MongoDB tail-latency paper's YCSB clients saw it: \
         a {rtt} µs sleep standing for the client's round trip, then \
         the transaction (begin, snapshot, update of about 40 µs, commit); \"transaction alone\" leaves the round trip out. \
         \"CPUs used\" is the process's CPU time over the run's wall time: how busy the sessions keep the CPUs they may use \
         (`--round-trip-us` sets it). \
         Medians of {repeats} run(s), strategies interleaved. \"P99.9 increase\" is against the same strategy's \
         unrestricted run, as the paper's; \"the inversion alone\" compares the nice window with the same \
         strategy restricted without inversion.\n\n",
        n = allowed.len(),
        per = sessions / restricted,
        a = (scenario_time / 3).as_secs_f64(),
        b = (scenario_time * 2 / 3).as_secs_f64(),
        d = scenario_time.as_secs_f64(),
        rtt = round_trip.as_micros(),
    );
    if allowed.len() < 4 * restricted {
        let _ = writeln!(
            report,
            "On this host even the unrestricted run has more sessions than CPUs ({sessions} on {}), \
             so its baseline is already contended; the MongoDB tail-latency paper's was not \
             (40 sessions on 112 cores).\n",
            allowed.len()
        );
    }
    if let Some(why) = refused {
        let _ = writeln!(report, "**The nice -20 boost was refused** ({why}): the inverted rows equal the restricted ones. Run as root (or with CAP_SYS_NICE) to reproduce the inversion.\n");
    }
}

/// The scenario table (medians per scenario and strategy, increases against unrestricted) and
/// the seed's figures.
fn write_scenarios(report: &mut String, cells: &BTreeMap<(usize, usize), Cell>) -> ScenarioFigures {
    report.push_str("| scenario | strategy | transactions/s | CPUs used | mean ms | p50 ms | p99 ms | p99.9 ms | max ms | P99.9 increase | p99.9 in the nice window ms | increase in the window | the inversion alone | transaction alone: p99.9 ms | increase |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut summary_cells = Vec::new();
    let mut increases = std::collections::BTreeMap::new();
    let mut inversion_effects = std::collections::BTreeMap::new();
    for (si, scenario) in Scenario::ALL.iter().enumerate() {
        for (ki, strategy) in Strategy::ALL.iter().enumerate() {
            let Some(cell) = cells.get(&(si, ki)) else { continue };
            let p999 = median(cell.p999.clone());
            let base = cells.get(&(0, ki)).map_or(f64::NAN, |c| median(c.p999.clone()));
            let inc = increase(base, p999);
            let window_p999 = median(cell.window_p999.clone());
            let window_inc = increase(base, window_p999);
            // The nice window against the same strategy restricted without inversion.
            let inversion_alone =
                increase(cells.get(&(1, ki)).map_or(f64::NAN, |c| median(c.p999.clone())), window_p999);
            if *scenario == Scenario::Inverted {
                increases.insert(strategy.name(), (inc, window_inc));
                inversion_effects.insert(strategy.name(), inversion_alone);
            }
            let server_p999 = median(cell.server_p999.clone());
            let server_inc = increase(
                cells.get(&(0, ki)).map_or(f64::NAN, |c| median(c.server_p999.clone())),
                server_p999,
            );
            let _ = writeln!(
                report,
                "| {} | {} | {:.0} | {:.2} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {} | {} | {} | {} | {:.3} | {} |",
                scenario.name(),
                strategy.name(),
                median(cell.throughput.clone()),
                median(cell.cpus_used.clone()),
                median(cell.mean.clone()),
                median(cell.p50.clone()),
                median(cell.p99.clone()),
                p999,
                median(cell.max.clone()),
                if si == 0 { "—".into() } else { format!("{:+.0}%", inc * 100.0) },
                if window_p999.is_finite() { format!("{window_p999:.3}") } else { "—".into() },
                if window_inc.is_finite() { format!("{:+.0}%", window_inc * 100.0) } else { "—".into() },
                if inversion_alone.is_finite() {
                    format!("{:+.0}%", inversion_alone * 100.0)
                } else {
                    "—".into()
                },
                server_p999,
                if si == 0 { "—".into() } else { format!("{:+.0}%", server_inc * 100.0) },
            );
            summary_cells.push(serde_json::json!({
                "scenario": scenario, "strategy": strategy, "throughput": median(cell.throughput.clone()),
                "cpus_used": median(cell.cpus_used.clone()), "mean_ms": median(cell.mean.clone()),
                "p50_ms": median(cell.p50.clone()), "p99_ms": median(cell.p99.clone()), "p999_ms": p999,
                "max_ms": median(cell.max.clone()), "window_p999_ms": window_p999,
                "transaction_p999_ms": server_p999,
                "p999_increase": if si == 0 { serde_json::Value::Null } else { serde_json::json!(inc) },
                "window_p999_increase": if window_inc.is_finite() { serde_json::json!(window_inc) } else { serde_json::Value::Null },
            }));
        }
    }
    let _ = writeln!(
        report,
        "\nThe MongoDB tail-latency paper (40 sessions on 10 cores, 4 at nice -20): \
         P99.9 +{:.0}% with WiredTiger's spinning, +{:.0}% with back-off.\n",
        SEED_INCREASE_SPIN * 100.0,
        SEED_INCREASE_BACKOFF * 100.0
    );
    ScenarioFigures { summary_cells, increases, inversion_effects }
}

/// The sessions sweep's table; returns the summary's `sessions_sweep`.
fn write_sweep(report: &mut String, plan: &Plan, sweep: &super::aggregate::Sweep) -> Vec<serde_json::Value> {
    let (per_cpu, restricted) = (plan.per_cpu, plan.restricted);
    report.push_str(
        "## Throughput against sessions (restricted, boosted sessions at nice -20 throughout; \
         the MongoDB tail-latency paper's Figure 4)\n\n| sessions per CPU | sessions |",
    );
    for strategy in Strategy::ALL {
        let _ = write!(report, " {} tx/s | {} p99.9 ms |", strategy.name(), strategy.name());
    }
    report.push_str("\n|---:|---:|");
    report.push_str(&"---:|---:|".repeat(Strategy::ALL.len()));
    report.push('\n');
    let mut sweep_json = Vec::new();
    for &k in per_cpu {
        let _ = write!(report, "| {k} | {} |", k * restricted);
        let mut tput = Vec::new();
        for strategy in Strategy::ALL {
            let (t, p) = sweep.get(&(k, strategy as usize)).cloned().unwrap_or_default();
            let _ = write!(report, " {:.0} | {:.3} |", median(t.clone()), median(p.clone()));
            tput.push((strategy.name(), median(t), median(p)));
        }
        report.push('\n');
        sweep_json.push(serde_json::json!({"per_cpu": k, "sessions": k * restricted,
            "strategies": tput.iter().map(|(n, t, p)| serde_json::json!({"strategy": n, "throughput": t, "p999_ms": p})).collect::<Vec<_>>()}));
    }
    sweep_json
}

/// The uncontended table; returns spin's and backoff's median throughputs.
fn write_uncontended(
    report: &mut String,
    plan: &Plan,
    uncontended: &BTreeMap<usize, Vec<f64>>,
) -> (f64, f64) {
    let allowed = &plan.allowed;
    let spin_free = median(uncontended.get(&(Strategy::Spin as usize)).cloned().unwrap_or_default());
    let backoff_free = median(uncontended.get(&(Strategy::Backoff as usize)).cloned().unwrap_or_default());
    let _ = write!(
        report,
        "\n## Uncontended ({} sessions on {} CPUs, no boost, no round trip: transactions back to back)\n\n| strategy | transactions/s | vs spin |\n|---|---:|---:|\n",
        allowed.len(),
        allowed.len()
    );
    for strategy in Strategy::ALL {
        let t = median(uncontended.get(&(strategy as usize)).cloned().unwrap_or_default());
        let _ = writeln!(report, "| {} | {t:.0} | {:.2} |", strategy.name(), t / spin_free);
    }
    (spin_free, backoff_free)
}

/// One timeline chart per strategy of the inverted scenario, and one of every strategy's p99.9.
fn push_charts(outcome: &mut Outcome, timelines: &[(Strategy, Vec<Histogram<u64>>)]) {
    // Charts: the inverted scenario's timeline, per strategy, and the p99.9 of all together.
    let percentile_series = |hists: &[Histogram<u64>], q: f64, name: &str| Series {
        name: name.into(),
        points: hists
            .iter()
            .enumerate()
            .filter(|(_, h)| !h.is_empty())
            .map(|(s, h)| (s as f64 + 0.5, ms(h.value_at_quantile(q))))
            .collect(),
    };
    for (strategy, hists) in timelines {
        outcome.charts.push(Chart {
            file_stem: format!("timeline-{}", strategy.name()),
            title: format!(
                "{}: latency per second, restricted + nice -20 in the middle third",
                strategy.name()
            ),
            x_label: "second".into(),
            y_label: "latency (ms)".into(),
            log_y: true,
            beside: Vec::new(),
            series: vec![
                percentile_series(hists, 0.5, "p50"),
                percentile_series(hists, 0.99, "p99"),
                percentile_series(hists, 0.999, "p99.9"),
                percentile_series(hists, 1.0, "max"),
            ],
        });
    }
    outcome.charts.push(Chart {
        file_stem: "timeline-p999".into(),
        title: "p99.9 per second, restricted + nice -20 in the middle third".into(),
        x_label: "second".into(),
        y_label: "p99.9 latency (ms)".into(),
        log_y: true,
        beside: Vec::new(),
        series: timelines.iter().map(|(s, h)| percentile_series(h, 0.999, s.name())).collect(),
    });
}

/// The verdicts against issue 8's acceptance.
fn push_verdicts(
    outcome: &mut Outcome,
    figures: &ScenarioFigures,
    refused: &Option<String>,
    spin_free: f64,
    backoff_free: f64,
) {
    let (increases, inversion_effects) = (&figures.increases, &figures.inversion_effects);
    // Verdicts against issue 8's acceptance. "Under restriction and inversion" is while the
    // inversion lasts: the P99.9 of the transactions that began in the nice window (the
    // whole-run figure, two thirds of it without inversion, is given beside).
    let (spin_inc, spin_window) = increases.get("spin").copied().unwrap_or((f64::NAN, f64::NAN));
    let (backoff_inc, backoff_window) = increases.get("backoff").copied().unwrap_or((f64::NAN, f64::NAN));
    let not_measured =
        refused.as_ref().map(|why| format!("not measured: the nice -20 boost was refused ({why})"));
    let judge = |met: bool| match &not_measured {
        Some(why) => why.clone(),
        None if met => "met".to_owned(),
        None => "NOT met".to_owned(),
    };
    outcome.verdicts.push(format!(
        "spin: P99.9 {:+.0}% while restricted and inverted ({:+.0}% over the whole run) against unrestricted (target: an order of magnitude, +900% or more): {}",
        spin_window * 100.0,
        spin_inc * 100.0,
        judge(spin_window >= 9.0)
    ));
    outcome.verdicts.push(format!(
        "backoff: P99.9 {:+.0}% while restricted and inverted ({:+.0}% over the whole run) against unrestricted (target: at most +20%): {}",
        backoff_window * 100.0,
        backoff_inc * 100.0,
        judge(backoff_window <= 0.2)
    ));
    outcome.verdicts.push(format!(
        "the inversion alone (nice window against restricted, same strategy): {}",
        Strategy::ALL
            .iter()
            .map(|s| format!(
                "{} {:+.0}%",
                s.name(),
                inversion_effects.get(s.name()).copied().unwrap_or(f64::NAN) * 100.0
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let ratio = backoff_free / spin_free;
    outcome.verdicts.push(format!(
        "backoff's uncontended throughput is {:.1}% of spin's (target: within 5%): {}",
        ratio * 100.0,
        if ratio >= 0.95 { "met" } else { "NOT met" }
    ));
}

/// The JSON summary.
fn summary(
    plan: &Plan,
    measured: &Measured,
    figures: &ScenarioFigures,
    sweep_json: &[serde_json::Value],
) -> serde_json::Value {
    let (sessions, restricted, boosted, repeats) =
        (plan.sessions, plan.restricted, plan.boosted, plan.repeats);
    let (allowed, scenario_time) = (&plan.allowed, plan.scenario_time);
    let (refused, uncontended) = (&measured.refused, &measured.uncontended);
    let (summary_cells, increases) = (&figures.summary_cells, &figures.increases);
    serde_json::json!({
        "sessions": sessions, "restricted_cpus": restricted, "allowed_cpus": allowed.len(), "boosted": boosted,
        "seconds": scenario_time.as_secs_f64(), "repeats": repeats, "boost_refused": refused,
        "scenarios": summary_cells, "sessions_sweep": sweep_json,
        "uncontended": Strategy::ALL.iter().map(|s| serde_json::json!({"strategy": s,
            "throughput": median(uncontended.get(&(*s as usize)).cloned().unwrap_or_default())})).collect::<Vec<_>>(),
        "p999_increase": increases.iter().map(|(name, (run, window))| (name.to_string(),
            serde_json::json!({"whole_run": run, "nice_window": window}))).collect::<serde_json::Map<_, _>>(),
        "seed_p999_increase": {"spin": SEED_INCREASE_SPIN, "backoff": SEED_INCREASE_BACKOFF},
    })
}

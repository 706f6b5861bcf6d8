//! The report of a plan: the verdict lines (ratios of medians between pool kinds, and the
//! targets of the async items), the Markdown table and the charts. Pure: shared with
//! `cotenant sim neighbours`.

use std::fmt::Write as _;

use super::aggregate::{Aggregate, RunFigures};
use super::plan::{kind_name, Plan, Setting};
use crate::args::PoolKind;
use crate::{Chart, Series};

/// `a / b`, NaN when `b` is not positive (a figure to divide by that is missing or 0).
pub(super) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// The aggregate of `kind` at this setting, load and P (`share` at factor 1, the seed's).
pub(super) fn find_kind(
    aggregates: &[Aggregate],
    setting: Setting,
    load: f64,
    processes: u32,
    kind: PoolKind,
) -> Option<&Aggregate> {
    aggregates.iter().find(|a| {
        a.key.setting == setting
            && a.key.load == load
            && a.key.processes == processes
            && a.key.kind == kind
            && (kind != PoolKind::Share || a.key.share_factor == 1.0)
    })
}

/// The verdict line for one setting, load and P: adaptive against ignorant and optimal (and
/// share's throughput under overload), from the medians.
pub fn verdict(aggregates: &[Aggregate], setting: Setting, load: f64, processes: u32) -> Option<String> {
    verdict_of(PoolKind::Adaptive, aggregates, setting, load, processes)
}

/// [`verdict`]'s line for `subject` (adaptive, or tokens: adaptive pools sharing host CPU tokens) in
/// the place of adaptive.
pub fn verdict_of(
    subject: PoolKind,
    aggregates: &[Aggregate],
    setting: Setting,
    load: f64,
    processes: u32,
) -> Option<String> {
    let find = |kind| find_kind(aggregates, setting, load, processes, kind);
    let (ours, ignorant) = (find(subject)?, find(PoolKind::Ignorant)?);
    let mut line = format!(
        "{}, load {:.0}%, P={processes}: {} service p99 {:.2}x ignorant's",
        setting.name(),
        load * 100.0,
        kind_name(subject),
        ratio(ours.median.service_p99_us, ignorant.median.service_p99_us)
    );
    if let Some(optimal) = find(PoolKind::Optimal) {
        let _ = write!(
            line,
            " and {:.2}x optimal's; max {:.2}x ignorant's and {:.2}x optimal's",
            ratio(ours.median.service_p99_us, optimal.median.service_p99_us),
            ratio(ours.median.service_max_us, ignorant.median.service_max_us),
            ratio(ours.median.service_max_us, optimal.median.service_max_us),
        );
    }
    let _ = write!(
        line,
        "; end-to-end p99 {:.2}x ignorant's; throughput {:.2}x ignorant's",
        ratio(ours.median.e2e_p99_us, ignorant.median.e2e_p99_us),
        ratio(ours.median.throughput_per_s, ignorant.median.throughput_per_s),
    );
    if let Some(share) = find(PoolKind::Share) {
        let _ = write!(
            line,
            " (share: {:.2}x)",
            ratio(share.median.throughput_per_s, ignorant.median.throughput_per_s)
        );
    }
    Some(line)
}

/// The verdict line of `go-neighbours` for one setting, load and P: the cotenant controller
/// against Go's default GOMAXPROCS (and the static split, when it ran), from the medians.
pub fn go_verdict(aggregates: &[Aggregate], setting: Setting, load: f64, processes: u32) -> Option<String> {
    let kinds = [PoolKind::GoCotenant, PoolKind::GoDefault, PoolKind::GoOptimal];
    against_default(aggregates, setting, load, processes, kinds)
}

/// The verdict line of `neighbours --items async` for one setting, load and P: the cotenant
/// executor against tokio's default runtime (and the static split, when it ran), from the
/// medians.
pub fn async_verdict(
    aggregates: &[Aggregate],
    setting: Setting,
    load: f64,
    processes: u32,
) -> Option<String> {
    let kinds = [PoolKind::CotenantAsync, PoolKind::TokioDefault, PoolKind::TokioOptimal];
    against_default(aggregates, setting, load, processes, kinds)
}

/// The line of a runtime's comparison: `ours` against the runtime's `default` (and its static
/// `split`, when it ran), from the medians.
fn against_default(
    aggregates: &[Aggregate],
    setting: Setting,
    load: f64,
    processes: u32,
    [ours, default, split]: [PoolKind; 3],
) -> Option<String> {
    let find = |kind| find_kind(aggregates, setting, load, processes, kind);
    let (controlled, base) = (find(ours)?, find(default)?);
    let (name, base_name) = (kind_name(ours), kind_name(default));
    let mut line = format!(
        "{}, load {:.0}%, P={processes}: {name} service p99 {:.2}x {base_name}'s",
        setting.name(),
        load * 100.0,
        ratio(controlled.median.service_p99_us, base.median.service_p99_us)
    );
    if let Some(static_split) = find(split) {
        let _ = write!(
            line,
            " and {:.2}x {}'s",
            ratio(controlled.median.service_p99_us, static_split.median.service_p99_us),
            kind_name(split)
        );
    }
    let _ = write!(
        line,
        "; end-to-end p99 {:.2}x {base_name}'s; throughput {:.2}x {base_name}'s",
        ratio(controlled.median.e2e_p99_us, base.median.e2e_p99_us),
        ratio(controlled.median.throughput_per_s, base.median.throughput_per_s),
    );
    Some(line)
}

/// A figure an async target compares.
#[derive(Debug, Clone, Copy)]
enum Figure {
    ServiceP99,
    EndToEndP99,
    Throughput,
}

impl Figure {
    fn name(self) -> &'static str {
        match self {
            Figure::ServiceP99 => "service p99",
            Figure::EndToEndP99 => "end-to-end p99",
            Figure::Throughput => "throughput",
        }
    }

    fn of(self, figures: &RunFigures) -> f64 {
        match self {
            Figure::ServiceP99 => figures.service_p99_us,
            Figure::EndToEndP99 => figures.e2e_p99_us,
            Figure::Throughput => figures.throughput_per_s,
        }
    }
}

/// What the cotenant executor should show against tokio, in one cgroup at P = 2: at `load`,
/// its `figure` over `against`'s at most `bound` (`at_most`) or at least `bound`.
struct AsyncTarget {
    load: f64,
    figure: Figure,
    against: PoolKind,
    bound: f64,
    at_most: bool,
}

/// The async items' targets: a service tail at full load within 1.2x of the static split's and
/// 0.6x of tokio's default's; at 70 %, an end-to-end tail no longer than tokio's default's; under
/// the 150 % overload, at least 0.97x its throughput.
const ASYNC_TARGETS: [AsyncTarget; 4] = [
    AsyncTarget {
        load: 1.0,
        figure: Figure::ServiceP99,
        against: PoolKind::TokioOptimal,
        bound: 1.2,
        at_most: true,
    },
    AsyncTarget {
        load: 1.0,
        figure: Figure::ServiceP99,
        against: PoolKind::TokioDefault,
        bound: 0.6,
        at_most: true,
    },
    AsyncTarget {
        load: 0.7,
        figure: Figure::EndToEndP99,
        against: PoolKind::TokioDefault,
        bound: 1.0,
        at_most: true,
    },
    AsyncTarget {
        load: 1.5,
        figure: Figure::Throughput,
        against: PoolKind::TokioDefault,
        bound: 0.97,
        at_most: false,
    },
];

/// The processes of the async targets' runs (in one cgroup).
const ASYNC_TARGET_PROCESSES: u32 = 2;

/// One line per async target, from the medians: the ratio, the bound and "met" or "not met";
/// "not measured" when the run has no such configuration (that load, one cgroup, P = 2) or a
/// figure to divide by is 0.
pub fn async_acceptance(aggregates: &[Aggregate]) -> Vec<String> {
    let (setting, processes) = (Setting::OneCgroup, ASYNC_TARGET_PROCESSES);
    ASYNC_TARGETS
        .iter()
        .map(|target| {
            let find = |kind: PoolKind| find_kind(aggregates, setting, target.load, processes, kind);
            let against = kind_name(target.against);
            let head = format!(
                "{}, load {:.0}%, P={processes}, target: cotenant-async {}",
                setting.name(),
                target.load * 100.0,
                target.figure.name()
            );
            let bound =
                format!("({} {:.2}x)", if target.at_most { "at most" } else { "at least" }, target.bound);
            let measured = find(PoolKind::CotenantAsync).zip(find(target.against)).map(|(ours, theirs)| {
                ratio(target.figure.of(&ours.median), target.figure.of(&theirs.median))
            });
            match measured {
                Some(r) if r.is_finite() => {
                    let met = if target.at_most { r <= target.bound } else { r >= target.bound };
                    let said = if met { "met" } else { "not met" };
                    format!("{head} {r:.2}x {against}'s {bound}: {said}")
                }
                Some(_) => format!("{head} against {against}'s {bound}: not measured ({against}'s is 0)"),
                None => format!("{head} against {against}'s {bound}: not measured (no such run)"),
            }
        })
        .collect()
}

/// The Markdown table of `aggregates`.
pub fn table(aggregates: &[Aggregate]) -> String {
    let mut out = String::from(
        "| setting | load | P | pool | service p99 ms | service max ms | end-to-end p99 ms | throughput /s | completed | repeats |\n\
         |---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for a in aggregates {
        let spread =
            |m: f64, lo: f64, hi: f64| format!("{:.1} ({:.1}–{:.1})", m / 1000.0, lo / 1000.0, hi / 1000.0);
        let _ = writeln!(
            out,
            "| {} | {:.0}% | {} | {} | {} | {} | {} | {:.1} | {:.0}% | {} |",
            a.key.setting.name(),
            a.key.load * 100.0,
            a.key.processes,
            a.key.pool_name(),
            spread(a.median.service_p99_us, a.min.service_p99_us, a.max.service_p99_us),
            spread(a.median.service_max_us, a.min.service_max_us, a.max.service_max_us),
            spread(a.median.e2e_p99_us, a.min.e2e_p99_us, a.max.e2e_p99_us),
            a.median.throughput_per_s,
            a.median.completed_fraction * 100.0,
            a.repeats
        );
    }
    out.push_str("\nMedians over repeats, (min–max) in brackets.\n");
    out
}

/// Per setting and load: service p99 and max (log) and throughput against P, one line per pool.
pub fn charts(aggregates: &[Aggregate], plan: &Plan) -> Vec<Chart> {
    let mut charts = Vec::new();
    if plan.processes.len() < 2 {
        return charts;
    }
    for &setting in &plan.settings {
        for &load in &plan.loads {
            let slug = format!(
                "{}-load{:.0}",
                if setting == Setting::OneCgroup { "one-cgroup" } else { "per-process" },
                load * 100.0
            );
            let series = |f: fn(&RunFigures) -> f64| -> Vec<Series> {
                plan.pools
                    .iter()
                    .map(|&(kind, factor)| {
                        let mine = aggregates.iter().filter(|a| {
                            a.key.setting == setting
                                && a.key.load == load
                                && a.key.kind == kind
                                && a.key.share_factor == factor
                        });
                        let name = mine.clone().next().map(|a| a.key.pool_name()).unwrap_or_default();
                        Series {
                            name,
                            points: mine.map(|a| (f64::from(a.key.processes), f(&a.median))).collect(),
                        }
                    })
                    .collect()
            };
            charts.push(Chart {
                file_stem: format!("service-p99-{slug}"),
                title: format!("service p99, {}, load {:.0}%", setting.name(), load * 100.0),
                x_label: "processes (P)".into(),
                y_label: "service p99 (ms)".into(),
                log_y: true,
                beside: Vec::new(),
                series: series(|r| r.service_p99_us / 1000.0),
            });
            charts.push(Chart {
                file_stem: format!("service-max-{slug}"),
                title: format!("service max, {}, load {:.0}%", setting.name(), load * 100.0),
                x_label: "processes (P)".into(),
                y_label: "worst service time (ms)".into(),
                log_y: true,
                beside: Vec::new(),
                series: series(|r| r.service_max_us / 1000.0),
            });
            charts.push(Chart {
                file_stem: format!("throughput-{slug}"),
                title: format!("throughput, {}, load {:.0}%", setting.name(), load * 100.0),
                x_label: "processes (P)".into(),
                y_label: "items per second, all processes".into(),
                log_y: false,
                beside: Vec::new(),
                series: series(|r| r.throughput_per_s),
            });
        }
    }
    charts
}

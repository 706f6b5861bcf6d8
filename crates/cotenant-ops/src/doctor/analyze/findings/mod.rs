//! Steps 2 and 3: what a [`Finding`] is, the helpers the rules share, and [`rank`]. The rules
//! themselves are one file per family: process missing, throttling, contention, a busy sibling
//! cgroup (with its remedy command), oversized pool, weights and cpusets, load (pressure,
//! overcommit), placement (migrations, NUMA).

mod contention;
mod load;
mod placement;
mod pool;
mod process;
mod sibling;
#[cfg(test)]
mod tests;
mod throttling;
mod weights;

pub(super) use contention::find_contention;
pub(super) use load::{find_overcommit, find_pressure};
pub(super) use placement::{find_migrations, find_numa};
pub(super) use pool::find_oversized_pool;
pub(super) use process::find_process_missing;
pub(super) use sibling::find_busy_sibling;
pub(super) use throttling::find_throttling;
pub(super) use weights::find_weight_and_cpusets;

use super::Context;
use crate::doctor::snapshot::Proc;
use cotenant::internal::procfs::cpulist::CpuSet;
use serde::Serialize;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// For information.
    Info,
    /// Worth knowing; unlikely to explain a bad tail alone.
    Low,
    /// Likely to hurt the tail.
    Medium,
    /// Hurting now: the most likely cause.
    High,
}

/// One piece of evidence: where it was read, what it is, its value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// The file (a glob for per-thread files, e.g. `/proc/42/task/*/schedstat`).
    pub file: String,
    /// What the number is.
    pub what: String,
    /// The number, with its unit.
    pub value: String,
}

/// A diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable kebab-case id (`docs/doctor.md` lists them).
    pub kind: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// One line.
    pub title: String,
    /// The numbers behind it.
    pub evidence: Vec<Evidence>,
    /// What to do.
    pub recommendation: String,
    /// Exact command lines that carry out the recommendation, alternatives with the preferred
    /// first (`cotenant cgroup set ...`, then `systemctl set-property ...`); empty when the
    /// recommendation is not a command.
    pub commands: Vec<String>,
    /// Orders findings of the same kind and severity (bigger first); not serialized.
    #[serde(skip)]
    pub score: f64,
}

fn ev(file: impl Into<String>, what: impl Into<String>, value: impl Into<String>) -> Evidence {
    Evidence { file: file.into(), what: what.into(), value: value.into() }
}

/// The CPUs of `others` that land on `ours`: a process allowed on 4 CPUs of which 1 is ours is
/// counted for a quarter (the scheduler spreads it).
fn on_our_cpus(p: &Proc, cpus: f64, ours: Option<&CpuSet>) -> f64 {
    match (ours, &p.allowed) {
        (Some(ours), Some(theirs)) if theirs.count() > 0 => {
            cpus * ours.intersection(theirs).count() as f64 / theirs.count() as f64
        }
        _ => cpus,
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn proc_file(cx: &Context<'_>, rest: &str) -> String {
    format!("/proc/{}/{rest}", cx.pid.unwrap_or(0))
}

/// The processes on our CPUs, busiest first, with the CPU they put there.
fn neighbours<'a>(cx: &'a Context<'_>) -> Vec<(&'a Proc, f64)> {
    cx.others
        .iter()
        .map(|(p, cpus)| (*p, on_our_cpus(p, *cpus, cx.allowed.as_ref())))
        .filter(|(_, c)| *c >= 0.005)
        .collect()
}

/// Order of kinds at equal severity: what explains the others comes first (throttling before
/// contention: a throttled thread also shows run-queue wait).
const KIND_ORDER: &[&str] = &[
    "process-not-found",
    "process-unreadable",
    "throttling",
    "cpu-contention",
    "busy-sibling-cgroup",
    "oversized-pool",
    "low-weight",
    "cpuset-overlap",
    "numa-remote-memory",
    "cpu-pressure",
    "host-overcommitted",
    "migrations",
];

/// Ranks findings, most likely cause first: by severity, then [`KIND_ORDER`], then score.
/// Throttling that grew during the sample and contention are always High, so they lead when
/// present (throttling first). When nothing is Medium or worse, a `nothing-wrong` finding leads.
pub fn rank(mut findings: Vec<Finding>) -> Vec<Finding> {
    let order = |k: &str| KIND_ORDER.iter().position(|x| *x == k).unwrap_or(KIND_ORDER.len());
    findings.sort_by(|a, b| {
        b.severity.cmp(&a.severity).then(order(a.kind).cmp(&order(b.kind))).then(b.score.total_cmp(&a.score))
    });
    if !findings.iter().any(|f| f.severity >= Severity::Medium) {
        findings.insert(
            0,
            Finding {
                kind: "nothing-wrong",
                severity: Severity::Info,
                title: "No sign of CPU interference during the sample".into(),
                evidence: Vec::new(),
                recommendation:
                    "Nothing to change on the CPU side. If the tail is still bad, sample again while \
                     it is bad (interference comes and goes), or look beyond CPUs (I/O, memory, locks)."
                        .into(),
                commands: Vec::new(),
                score: 0.0,
            },
        );
    }
    findings
}

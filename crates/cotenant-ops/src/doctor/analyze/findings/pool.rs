//! `oversized-pool`: more busy threads than cotenant's CPU count for the process.

use super::{ev, Finding, Severity};
use crate::doctor::analyze::Measurements;

pub(in crate::doctor::analyze) fn find_oversized_pool(m: &Measurements) -> Option<Finding> {
    let p = m.process.as_ref()?;
    let count = m.cpus.threads?;
    if p.busy_threads <= count {
        return None;
    }
    let limit = m.cpus.limit.map_or("?".into(), cotenant::cpus::cpus_word);
    Some(Finding {
        kind: "oversized-pool",
        severity: Severity::Medium,
        title: format!(
            "{} busy threads for a CPU count of {count} ({limit}, bound by {})",
            p.busy_threads,
            m.cpus.binding.as_deref().unwrap_or("?")
        ),
        evidence: vec![
            ev(
                format!("/proc/{}/task/*/schedstat", p.pid),
                "threads that ran ≥5% of the sample",
                p.busy_threads.to_string(),
            ),
            ev(format!("/proc/{}/task", p.pid), "threads in all", p.threads.to_string()),
            ev(
                m.cpus.binding_file.clone().unwrap_or_else(|| "cotenant cpus".into()),
                "cotenant CPU count (floor)",
                count.to_string(),
            ),
            ev(
                format!("/proc/{}/task/*/schedstat", p.pid),
                "run-queue wait as a fraction of run time",
                p.wait_fraction.map_or("-".into(), |f| format!("{f:.2}")),
            ),
        ],
        recommendation: format!(
            "More runnable threads than CPUs queue behind each other (and, under a quota, get throttled). \
             Size the pool to {count} (`cotenant cpus --pid {}`; `cotenant run` sets GOMAXPROCS, \
             RAYON_NUM_THREADS, ...) or use cotenant::Pool's adaptive policy.",
            p.pid
        ),
        commands: Vec::new(),
        score: p.busy_threads as f64 / count.max(1) as f64,
    })
}

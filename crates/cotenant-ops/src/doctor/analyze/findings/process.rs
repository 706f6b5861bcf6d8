//! `process-not-found` and `process-unreadable`: the process asked about could not be
//! diagnosed.

use super::{ev, Finding, Severity};
use crate::doctor::analyze::Context;

pub(in crate::doctor::analyze) fn find_process_missing(cx: &Context<'_>) -> Option<Finding> {
    let t = cx.after.target.as_ref()?;
    let (kind, title, why) = if !t.exists {
        (
            "process-not-found",
            format!("Process {} does not exist (or exited during the sample)", t.pid),
            "no such directory",
        )
    } else if !t.readable {
        ("process-unreadable", format!("Process {}'s files cannot be read", t.pid), "see not_read")
    } else if !cx.before.target.as_ref().is_some_and(|b| b.exists && b.readable) {
        ("process-not-found", format!("Process {} appeared during the sample", t.pid), "missing at the start")
    } else {
        return None;
    };
    Some(Finding {
        kind,
        severity: Severity::High,
        title,
        evidence: vec![ev(format!("/proc/{}", t.pid), "the process directory", why)],
        recommendation: if kind == "process-not-found" {
            "Check the pid (e.g. `pgrep -f NAME`); the report below covers the host only.".into()
        } else {
            "Run doctor as the process's user or as root (another user's /proc files are not readable \
             without ptrace permission); the report below covers only what could be read."
                .into()
        },
        commands: Vec::new(),
        score: 0.0,
    })
}

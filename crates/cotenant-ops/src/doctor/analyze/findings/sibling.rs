//! `busy-sibling-cgroup`: the process waits for CPUs while a CPU-bound process runs in a sibling
//! cgroup that is not marked idle; the remedy is the exact command that marks that cgroup idle
//! (or, where the kernel has no `cpu.idle`, lowers its weight), with the systemd and Kubernetes
//! equivalents.
//!
//! Why the cgroup and not the threads: the kernel picks a cgroup before a thread in it, so at
//! the level where the two cgroups meet the neighbour has its cgroup's full weight whatever its
//! threads' nice or `SCHED_IDLE` (seed 003; `docs/background.md`). Only the cgroup's own
//! setting ranks it below this process. "Sibling" means the neighbour's side below the lowest
//! common ancestor of the two cgroups ([`competing`]): that is the cgroup whose setting counts.
//!
//! [`competitors`] gathers the recorded facts from the snapshots; [`decide`] (pure) picks the
//! cgroups to name and the command for each; [`finding`] words it.

use super::{ev, on_our_cpus, proc_file, weights::competing, Finding, Severity};
use crate::cgroup_set::{shares_to_weight, WEIGHT_DEFAULT, WEIGHT_MAX};
use crate::doctor::analyze::{
    Context, Measurements, ProcessFacts, CONTENTION_MIN_WAIT_MS_PER_S, CONTENTION_WAIT_FRACTION,
    NEIGHBOUR_MIN_CPUS, OTHERS_BUSY_MIN_CPUS,
};
use std::collections::BTreeMap;

#[cfg(test)]
mod tests;

/// Most sibling cgroups named in one finding: the busiest, which explain the wait.
const MAX_SIBLINGS: usize = 3;

/// A cgroup competing with the diagnosed process's for its CPUs, as recorded.
#[derive(Debug, Clone, PartialEq)]
struct Competitor {
    /// Its path as in `/proc/<pid>/cgroup`: the neighbour's cgroup or ancestor just below the
    /// lowest common ancestor with ours.
    cgroup: String,
    /// Its directory (under the root read).
    dir: String,
    /// CPUs its processes used on our CPUs during the sample.
    cpus_on_ours: f64,
    /// Its busiest process: pid.
    busiest_pid: u32,
    /// ...its name.
    busiest_comm: String,
    /// ...and the CPUs it used (on all its CPUs).
    busiest_cpus: f64,
    /// `cpu.idle`; `None` when the kernel has no such file (before Linux 5.15).
    idle: Option<bool>,
    /// Its weight file's number (`cpu.shares` v1, `cpu.weight` v2).
    weight: Option<u64>,
    /// The weight of our side against it.
    our_weight: Option<u64>,
}

/// What to do to one competitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Mark it idle.
    Idle,
    /// Lower its weight to this (cgroup v2 units).
    Weight(u64),
}

/// The remedy for one competitor.
#[derive(Debug, Clone, PartialEq)]
struct Remedy {
    /// The competitor it is for.
    competitor: Competitor,
    /// What to change.
    action: Action,
    /// The command lines, `cotenant cgroup set` first, then `systemctl` for a systemd unit.
    commands: Vec<String>,
    /// The systemd unit the cgroup is, if it is one (and not a Kubernetes pod's).
    unit: Option<String>,
    /// Whether the cgroup belongs to a Kubernetes pod (`kubepods` in its path).
    kubernetes: bool,
}

pub(in crate::doctor::analyze) fn find_busy_sibling(cx: &Context<'_>, m: &Measurements) -> Option<Finding> {
    let p = m.process.as_ref()?;
    let wait_fraction = p.wait_fraction?;
    if wait_fraction < CONTENTION_WAIT_FRACTION || p.wait_ms / cx.secs < CONTENTION_MIN_WAIT_MS_PER_S {
        return None;
    }
    let t = cx.after.target.as_ref().filter(|t| t.exists && t.readable)?;
    let own = t.cpu_cgroup.as_deref()?;
    let v2 = cx.after.cpu_hierarchy.as_ref()?.version == "v2";
    let remedies = decide(v2, &competitors(cx, own));
    (!remedies.is_empty()).then(|| finding(cx, p, v2, &remedies))
}

/// The cgroups competing with `own`, one per entity below the common ancestor, with the CPU
/// their processes put on our CPUs. Neighbours in `own` itself or in an ancestor of it are
/// left out: no cgroup of theirs competes with ours.
fn competitors(cx: &Context<'_>, own: &str) -> Vec<Competitor> {
    let mut by_entity: BTreeMap<String, Competitor> = BTreeMap::new();
    for (proc_, cpus) in &cx.others {
        let Some(cg) = proc_.cpu_cgroup.as_deref().filter(|cg| *cg != own) else { continue };
        let (entity, weight, group) = competing(cx.after, cg, own);
        let Some(group) = group else { continue };
        let on_ours = on_our_cpus(proc_, *cpus, cx.allowed.as_ref());
        let c = by_entity.entry(entity.clone()).or_insert_with(|| Competitor {
            cgroup: entity.clone(),
            dir: group.dir.clone(),
            cpus_on_ours: 0.0,
            busiest_pid: proc_.pid,
            busiest_comm: proc_.comm.clone(),
            busiest_cpus: *cpus,
            idle: group.idle,
            weight,
            our_weight: competing(cx.after, own, &entity).1,
        });
        c.cpus_on_ours += on_ours;
        if *cpus > c.busiest_cpus {
            (c.busiest_pid, c.busiest_comm, c.busiest_cpus) = (proc_.pid, proc_.comm.clone(), *cpus);
        }
    }
    by_entity.into_values().collect()
}

/// The competitors to name, busiest first (at most [`MAX_SIBLINGS`]), and the remedy of each:
/// those whose processes put at least [`OTHERS_BUSY_MIN_CPUS`] on our CPUs, one of them at least
/// [`NEIGHBOUR_MIN_CPUS`], and not idle already. The bar for one process is low on purpose: a
/// CPU-bound process on a contended CPU uses only its share of it (two burners sharing our one
/// CPU with us use a quarter each), so what marks the cgroup is its total on our CPUs while we
/// wait. Pure.
fn decide(v2: bool, competitors: &[Competitor]) -> Vec<Remedy> {
    let mut busy: Vec<&Competitor> = competitors
        .iter()
        .filter(|c| c.cpus_on_ours >= OTHERS_BUSY_MIN_CPUS && c.busiest_cpus >= NEIGHBOUR_MIN_CPUS)
        .filter(|c| c.idle != Some(true))
        .collect();
    busy.sort_by(|a, b| b.cpus_on_ours.total_cmp(&a.cpus_on_ours).then_with(|| a.cgroup.cmp(&b.cgroup)));
    busy.into_iter().filter_map(|c| remedy(v2, c)).take(MAX_SIBLINGS).collect()
}

/// Idle where the kernel has `cpu.idle`; otherwise a tenth of our weight (a neighbour at 10
/// against 100 gets about a tenth of a contended CPU), or 1 when it is there already; nothing
/// when its weight is 1 already or unknown.
fn remedy(v2: bool, c: &Competitor) -> Option<Remedy> {
    let to_v2 = |w: u64| if v2 { w } else { shares_to_weight(w) };
    let action = match c.idle {
        Some(_) => Action::Idle,
        None => {
            let ours = c.our_weight.map_or(WEIGHT_DEFAULT, to_v2);
            let theirs = to_v2(c.weight?);
            let tenth = (ours / 10).clamp(1, WEIGHT_MAX);
            match theirs {
                t if t > tenth => Action::Weight(tenth),
                t if t > 1 => Action::Weight(1),
                _ => return None,
            }
        }
    };
    let flag = match action {
        Action::Idle => "--idle".to_owned(),
        Action::Weight(n) => format!("--weight {n}"),
    };
    let mut commands = vec![format!("cotenant cgroup set {} {flag}", shell_quote(&c.dir))];
    let kubernetes = c.cgroup.split('/').any(|part| part.starts_with("kubepods"));
    let unit = systemd_unit(&c.cgroup).filter(|_| !kubernetes);
    if let Some(unit) = &unit {
        let value = match action {
            Action::Idle => "idle".to_owned(),
            Action::Weight(n) => n.to_string(),
        };
        commands.push(format!("systemctl set-property {} CPUWeight={value}", shell_quote(unit)));
    }
    Some(Remedy { competitor: c.clone(), action, commands, unit, kubernetes })
}

/// The systemd unit a cgroup is: its last component, when that names a service, scope or slice.
fn systemd_unit(cgroup: &str) -> Option<String> {
    let last = cgroup.rsplit('/').next()?;
    [".service", ".scope", ".slice"]
        .iter()
        .any(|suffix| last.len() > suffix.len() && last.ends_with(suffix))
        .then(|| last.to_owned())
}

/// `text` as one shell word: as it is when it holds only characters no shell treats specially,
/// else in single quotes (systemd's escapes, such as `\x2d`, and spaces need them).
fn shell_quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._,:@%+=-".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The finding: the numbers behind it, and the remedy in plain words with its commands.
fn finding(cx: &Context<'_>, p: &ProcessFacts, v2: bool, remedies: &[Remedy]) -> Finding {
    let weight_file = if v2 { "cpu.weight" } else { "cpu.shares" };
    let mut evidence = vec![ev(
        proc_file(cx, "task/*/schedstat"),
        "run-queue wait as a fraction of run time",
        format!("{:.2} ({:.1} ms of wait per s)", p.wait_fraction.unwrap_or_default(), p.wait_ms / cx.secs),
    )];
    for r in remedies {
        let c = &r.competitor;
        // Names a process or a cgroup's owner chose: a line break in one must not forge a line
        // of the report.
        let cg = &crate::doctor::neighbours::shown(&c.cgroup);
        evidence.push(ev(
            "/proc/*/stat",
            format!("CPU used on this process's CPUs by processes in {cg}"),
            format!("{:.2} CPUs", c.cpus_on_ours),
        ));
        evidence.push(ev(
            format!("/proc/{}/stat", c.busiest_pid),
            format!(
                "busiest process in {cg}: pid {} ({})",
                c.busiest_pid,
                crate::doctor::neighbours::shown(&c.busiest_comm)
            ),
            format!("{:.2} CPU", c.busiest_cpus),
        ));
        evidence.push(ev(
            format!("{}/cpu.idle", c.dir),
            format!("cpu.idle of {cg}"),
            match c.idle {
                Some(_) => "0 (not idle)".to_owned(),
                None => "absent (cpu.idle needs Linux 5.15 or later)".to_owned(),
            },
        ));
        if let (Some(theirs), Some(ours)) = (c.weight, c.our_weight) {
            evidence.push(ev(
                format!("{}/{weight_file}", c.dir),
                format!("weight of {cg} against this process's side"),
                format!("{theirs} against {ours}"),
            ));
        }
    }
    let first = &remedies[0];
    let c = &first.competitor;
    let more = match remedies.len() {
        1 => String::new(),
        n => format!(" ({} more below)", n - 1),
    };
    let title = format!(
        "Sibling cgroup {} keeps {:.2} CPUs of this process's CPUs busy and is not marked idle \
         (busiest: pid {} {}){more}",
        crate::doctor::neighbours::shown(&c.cgroup),
        c.cpus_on_ours,
        c.busiest_pid,
        crate::doctor::neighbours::shown(&c.busiest_comm)
    );
    Finding {
        kind: "busy-sibling-cgroup",
        severity: Severity::High,
        title,
        evidence,
        recommendation: recommendation(cx, v2, remedies),
        commands: remedies.iter().flat_map(|r| r.commands.iter().cloned()).collect(),
        score: c.cpus_on_ours,
    }
}

/// The remedy in plain words: what the change does, the commands' order, systemd's and
/// Kubernetes' equivalents, and how to check the effect.
fn recommendation(cx: &Context<'_>, v2: bool, remedies: &[Remedy]) -> String {
    let mut s = String::new();
    for r in remedies {
        let cg = &r.competitor.cgroup;
        match r.action {
            Action::Idle => s.push_str(&format!(
                "Mark {cg} idle: an idle cgroup runs only on CPU time its siblings leave, and this \
                 process's threads preempt it the moment they wake. "
            )),
            Action::Weight(n) => {
                let to_v2 = |w: u64| if v2 { w } else { shares_to_weight(w) };
                let ours = r.competitor.our_weight.map_or(WEIGHT_DEFAULT, to_v2);
                s.push_str(&format!(
                    "Lower the CPU weight of {cg} to {n} (this kernel has no cpu.idle, which needs \
                     Linux 5.15): under contention it then gets about {n} parts of a CPU for every \
                     {ours} of this process's side. "
                ));
            }
        }
        if let Some(unit) = &r.unit {
            let idle_note = match (r.action, v2) {
                (Action::Weight(_), _) => "",
                (Action::Idle, true) => " (CPUWeight=idle needs systemd 252 or later)",
                (Action::Idle, false) => {
                    " (CPUWeight=idle needs systemd 252 or later; on cgroup v1 systemd gives the unit \
                     the smallest cpu.shares instead of cpu.idle)"
                }
            };
            s.push_str(&format!(
                "It is the systemd unit {unit}: systemd may write its own setting over a direct write \
                 (on a reload or restart), and `systemctl set-property` makes the change part of the \
                 unit{idle_note}. "
            ));
        }
        if r.kubernetes {
            s.push_str(
                "It belongs to a Kubernetes pod, and a direct write is lost when the pod is recreated: \
                 in the pod spec, run the batch pod as BestEffort (no CPU requests or limits, the \
                 smallest weight) or with small CPU requests (the weight follows the requests). ",
            );
        }
    }
    s.push_str(
        "The kernel picks a cgroup before a thread in it, so no per-thread setting of those processes \
         (nice, SCHED_IDLE, a background pool) ranks them below this process; their cgroup's own \
         setting does. The change applies at once to every process in the cgroup and lasts until \
         the cgroup is removed (undo: --no-idle, or --weight 100). ",
    );
    if !remedies.iter().any(|r| r.kubernetes) {
        s.push_str(
            "Under Kubernetes the same comes from the batch pod's QoS: BestEffort, or small CPU \
             requests (there is no pod setting for cpu.idle). ",
        );
    }
    let pid = cx.pid.unwrap_or(0);
    s.push_str(&format!(
        "To check the effect: save this report with --json as BEFORE.json, apply the change, then \
         run `cotenant doctor --pid {pid} --verify BEFORE.json`."
    ));
    s
}

//! `low-weight` and `cpuset-overlap`: busy neighbours that outweigh the process under CFS, or
//! share its CPUs through their cpusets.

use super::{ev, neighbours, Finding, Severity};
use crate::doctor::{
    analyze::{Context, Measurements, NEIGHBOUR_MIN_CPUS, OTHERS_BUSY_MIN_CPUS},
    snapshot::{ancestors, CpuGroup, Snapshot},
};
use std::collections::BTreeMap;

#[cfg(test)]
mod tests;

/// The weight of the entity competing for a CPU on `path`'s side below the lowest common
/// ancestor with `other`: CFS compares siblings. A task directly in the common cgroup has the
/// default weight of a nice-0 task. Returns the entity's path, its weight and its group (`None`
/// when `path` is itself an ancestor of `other`: then a task of it competes, not a cgroup).
pub(super) fn competing<'a>(
    after: &'a Snapshot,
    path: &str,
    other: &str,
) -> (String, Option<u64>, Option<&'a CpuGroup>) {
    let ours = ancestors(path);
    let theirs = ancestors(other);
    let lca = ours.iter().find(|a| theirs.contains(a)).cloned().unwrap_or_else(|| "/".into());
    let entity = ours.iter().rev().find(|a| a.len() > lca.len() && a.starts_with(lca.as_str())).cloned();
    let default = match after.cpu_hierarchy.as_ref().map(|h| h.version) {
        Some("v2") => 100,
        _ => 1024,
    };
    match entity {
        Some(e) => {
            let g = after.cpu_groups.get(&e);
            (e, g.and_then(|g| g.weight), g)
        }
        None => (format!("{path} (a task of it)"), Some(default), None),
    }
}

pub(in crate::doctor::analyze) fn find_weight_and_cpusets(
    cx: &Context<'_>,
    m: &Measurements,
    so_far: &[Finding],
) -> Vec<Finding> {
    let mut out = Vec::new();
    let Some(t) = cx.after.target.as_ref().filter(|t| t.exists && t.readable) else { return out };
    let contention = so_far.iter().any(|f| f.kind == "cpu-contention");
    let sev = if contention { Severity::Medium } else { Severity::Low };
    let near = neighbours(cx);

    // Weight: per neighbour cgroup, the competing entities' weights.
    if let Some(own) = &t.cpu_cgroup {
        let mut by_cgroup: BTreeMap<String, f64> = BTreeMap::new();
        for (p, cpus) in &near {
            if let Some(cg) = p.cpu_cgroup.as_ref().filter(|cg| *cg != own) {
                *by_cgroup.entry(cg.clone()).or_insert(0.0) += cpus;
            }
        }
        let mut worst: Option<(String, f64, String, u64, u64, String, String)> = None;
        for (cg, cpus) in by_cgroup.iter().filter(|(_, c)| **c >= OTHERS_BUSY_MIN_CPUS) {
            let (_, our_w, our_g) = competing(cx.after, own, cg);
            let (their_e, their_w, their_g) = competing(cx.after, cg, own);
            let (Some(ow), Some(tw)) = (our_w, their_w) else { continue };
            if tw > ow && worst.as_ref().is_none_or(|w| tw as f64 / ow as f64 > w.4 as f64 / w.3 as f64) {
                let file = |g: Option<&CpuGroup>| g.map_or("-".into(), |g| g.dir.clone());
                worst = Some((cg.clone(), *cpus, their_e.clone(), ow, tw, file(our_g), file(their_g)));
            }
        }
        if let Some((cg, cpus, their_e, ow, tw, our_dir, their_dir)) = worst {
            let name =
                if m.cpus.cgroup_version.as_deref() == Some("v2") { "cpu.weight" } else { "cpu.shares" };
            out.push(Finding {
                kind: "low-weight",
                severity: sev,
                title: format!("A busier neighbour has more CPU weight: {tw} for {their_e} against {ow} for this process"),
                evidence: vec![
                    ev(format!("{our_dir}/{name}"), "this process's competing weight", ow.to_string()),
                    ev(format!("{their_dir}/{name}"), format!("weight of {their_e}"), tw.to_string()),
                    ev("/proc/*/stat", format!("CPU used by processes in {cg} on our CPUs"), format!("{cpus:.2} CPUs")),
                ],
                recommendation: format!(
                    "Under contention CFS splits CPU time by weight: this process gets at most {ow}/({ow}+{tw}) of \
                     a contended CPU. Raise its {name} or lower the neighbour's (a neighbour at weight \
                     10 against 100 recovers most of the lost tail latency, not all of it)."
                ),
                commands: Vec::new(),
                score: tw as f64 / ow.max(1) as f64,
            });
        }
    }

    // Cpusets: other cpuset cgroups with busy processes whose CPUs overlap ours.
    if let (Some(own), Some(ours)) = (&t.cpuset_cgroup, cx.allowed.as_ref()) {
        let mut by_cgroup: BTreeMap<String, f64> = BTreeMap::new();
        for (p, cpus) in &near {
            if let Some(cg) = p.cpuset_cgroup.as_ref().filter(|cg| *cg != own) {
                *by_cgroup.entry(cg.clone()).or_insert(0.0) += cpus;
            }
        }
        let own_g = cx.after.cpuset_groups.get(own);
        let mut evidence = Vec::new();
        let mut total = 0.0;
        for (cg, cpus) in by_cgroup.iter().filter(|(_, c)| **c >= NEIGHBOUR_MIN_CPUS) {
            let Some(g) = cx.after.cpuset_groups.get(cg) else { continue };
            let Some(set) = g.cpus.as_ref().filter(|s| !s.intersection(ours).is_empty()) else { continue };
            total += cpus;
            evidence.push(ev(
                &g.file,
                format!("cpuset of {cg} (its processes use {cpus:.2} CPUs on ours)"),
                set.to_string(),
            ));
        }
        if !evidence.is_empty() {
            let own_file = own_g.map_or("-".into(), |g| g.file.clone());
            evidence.insert(
                0,
                ev(own_file, format!("cpuset of this process's cgroup {own} ∩ affinity"), ours.to_string()),
            );
            out.push(Finding {
                kind: "cpuset-overlap",
                severity: sev,
                title: format!(
                    "{} other cgroup(s) with busy processes share CPUs {ours}",
                    evidence.len() - 1
                ),
                evidence,
                recommendation:
                    "Give latency-sensitive and batch tenants disjoint cpusets (cpuset.cpus) for full \
                     isolation (the service's p99 back to what it is alone), at the price of CPUs \
                     one cannot lend the other; otherwise use weights."
                        .into(),
                commands: Vec::new(),
                score: total,
            });
        }
    }
    out
}

//! `migrations` and `numa-remote-memory`: where the threads run and where their memory is.

use super::{ev, pct, proc_file, Finding, Severity};
use crate::doctor::analyze::{Context, Measurements, MIGRATIONS_PER_THREAD_S, NUMA_REMOTE_MIN};

pub(in crate::doctor::analyze) fn find_migrations(cx: &Context<'_>, m: &Measurements) -> Option<Finding> {
    let p = m.process.as_ref()?;
    let rate = p.migrations_per_s?;
    let busy = p.busy_threads.max(1) as f64;
    if m.cpus.allowed_count.unwrap_or(1) <= 1 || rate / busy < MIGRATIONS_PER_THREAD_S {
        return None;
    }
    Some(Finding {
        kind: "migrations",
        severity: Severity::Low,
        title: format!(
            "Threads migrate between CPUs {rate:.0} times per second ({:.0} per busy thread)",
            rate / busy
        ),
        evidence: vec![
            ev(
                proc_file(cx, "task/*/sched"),
                "se.nr_migrations per second (all threads)",
                format!("{rate:.1}"),
            ),
            ev(proc_file(cx, "task/*/schedstat"), "busy threads", p.busy_threads.to_string()),
            ev(proc_file(cx, "task/*/stat"), "CPUs its threads were seen on", p.ran_on.clone()),
        ],
        // Seed 003's "needs pinning" signature, said in plain words.
        recommendation: "Frequent migrations with a healthy CPU profile and a poor tail are the signature \
             of a service that needs pinning: pin workers (cotenant Pool::builder().pin_workers(true), \
             taskset, or a cpuset) so caches stay warm; a pinned service can even beat running alone, \
             through warm caches."
            .into(),
        commands: Vec::new(),
        score: rate / busy,
    })
}

pub(in crate::doctor::analyze) fn find_numa(cx: &Context<'_>, m: &Measurements) -> Option<Finding> {
    let n = m.numa.as_ref()?;
    let remote = n.remote_fraction?;
    if n.nodes < 2 || remote < NUMA_REMOTE_MIN {
        return None;
    }
    let mut evidence =
        vec![ev(proc_file(cx, "numa_maps"), "share of resident memory on other nodes", pct(remote))];
    for (node, bytes) in &n.bytes_per_node {
        evidence.push(ev(
            proc_file(cx, "numa_maps"),
            format!("memory on node {node}"),
            format!("{:.1} MiB", *bytes as f64 / 1048576.0),
        ));
    }
    let local: Vec<String> = n.local_nodes.iter().map(u32::to_string).collect();
    evidence.push(ev(proc_file(cx, "task/*/stat"), "nodes of the CPUs it ran on", local.join(",")));
    Some(Finding {
        kind: "numa-remote-memory",
        severity: Severity::Medium,
        title: format!("{} of its memory is on another NUMA node than its CPUs", pct(remote)),
        evidence,
        recommendation:
            "Bind memory with the CPUs: numactl --cpunodebind=N --membind=N, or cpuset.mems with \
             cpuset.cpus (podman --cpuset-mems)."
                .into(),
        commands: Vec::new(),
        score: remote,
    })
}

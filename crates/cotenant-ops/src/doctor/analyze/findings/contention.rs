//! `cpu-contention`: the process's threads waited for a CPU while other processes used its
//! CPUs.

use super::{ev, neighbours, proc_file, Finding, Severity};
use crate::doctor::analyze::{
    Context, Measurements, CONTENTION_MIN_WAIT_MS_PER_S, CONTENTION_WAIT_FRACTION, OTHERS_BUSY_MIN_CPUS,
};

pub(in crate::doctor::analyze) fn find_contention(cx: &Context<'_>, m: &Measurements) -> Option<Finding> {
    let p = m.process.as_ref()?;
    let wait_fraction = p.wait_fraction?;
    let wait_per_s = p.wait_ms / cx.secs;
    if wait_fraction < CONTENTION_WAIT_FRACTION || wait_per_s < CONTENTION_MIN_WAIT_MS_PER_S {
        return None;
    }
    let near = neighbours(cx);
    let others: f64 = near.iter().map(|(_, c)| c).sum();
    if others < OTHERS_BUSY_MIN_CPUS {
        return None; // its own threads, not neighbours: see oversized-pool
    }
    let allowed = m.cpus.allowed.clone().unwrap_or_else(|| "?".into());
    let mut evidence = vec![
        ev(
            proc_file(cx, "task/*/schedstat"),
            "run-queue wait during the sample (all threads)",
            format!("{:.1} ms over {:.2} s", p.wait_ms, cx.secs),
        ),
        ev(
            proc_file(cx, "task/*/schedstat"),
            "run-queue wait as a fraction of run time",
            format!("{wait_fraction:.2} (wait {:.1} ms / run {:.1} ms)", p.wait_ms, p.run_ms),
        ),
    ];
    for t in p.top_threads.iter().filter(|t| t.wait_ms > 0.0).take(3) {
        evidence.push(ev(
            format!("/proc/{}/task/{}/schedstat", p.pid, t.tid),
            format!("thread {} ({}) run-queue wait", t.tid, t.comm),
            format!(
                "{:.1} ms ({} of its run time)",
                t.wait_ms,
                t.wait_fraction.map_or("-".into(), |f| format!("{f:.2}"))
            ),
        ));
    }
    if let Some(inv) = p.involuntary_switches_per_s {
        evidence.push(ev(
            proc_file(cx, "task/*/status"),
            "involuntary context switches (preemptions)",
            format!("{inv:.0}/s"),
        ));
    }
    evidence.push(ev(
        "/proc/*/stat",
        format!("CPU used by other processes on CPUs {allowed}"),
        format!("{others:.2} CPUs"),
    ));
    for (n, cpus) in near.iter().take(3) {
        let cg = n.cpu_cgroup.as_deref().map_or(String::new(), |c| format!(" in cgroup {c}"));
        evidence.push(ev(
            format!("/proc/{}/stat", n.pid),
            format!("pid {} ({}){cg}", n.pid, n.comm),
            format!("{cpus:.2} CPU"),
        ));
    }
    if let Some(r) = m.host.runnable_per_cpu {
        evidence.push(ev("/proc/stat", "runnable threads per online CPU (procs_running)", format!("{r:.2}")));
    }
    let top = near.first().map_or(String::new(), |(n, _)| format!(" (busiest: pid {} {})", n.pid, n.comm));
    Some(Finding {
        kind: "cpu-contention",
        severity: Severity::High,
        title: format!(
            "CPU contention: its threads waited {:.0}% as long as they ran, while other processes used {others:.2} CPUs of its CPUs {allowed}{top}",
            wait_fraction * 100.0
        ),
        evidence,
        // The order of the remedies is seed 003's decision tree; the text names none of the
        // sources (users have no seed numbers).
        recommendation: "Neighbours share this process's CPUs. If the tail matters more \
             than the neighbour's throughput: give the neighbour a low weight (cpu.weight 10 against 100, \
             cpu.shares 102 against 1024) or, when it has a cgroup of its own, mark that cgroup idle (cpu.idle = 1, Linux 5.15+; \
             it lowers every process in it); SCHED_IDLE threads (a cotenant background pool) rank below \
             yours only inside your own cgroup (docs/background.md); for a hard latency budget give each tenant a disjoint cpuset (cpuset.cpus), accepting idle CPUs. \
             Equal weights mean default fairness: the neighbour gets as much CPU as you."
            .into(),
        commands: Vec::new(),
        score: wait_fraction,
    })
}

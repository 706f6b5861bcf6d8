//! Step 1: the two snapshots into [`Measurements`], deltas over the sample and the facts
//! that do not change.

use super::{
    CgroupFacts, Consumer, Context, Measurements, NumaFacts, ProcessFacts, ThreadFacts, BUSY_THREAD_FRACTION,
};
use crate::doctor::snapshot::{ancestors, CpuGroup, Proc, Psi, Snapshot};
use cotenant::internal::procfs::cpulist::CpuSet;
use std::collections::BTreeMap;

/// Most threads and neighbours listed in the measurements.
const MAX_LISTED: usize = 10;

const NS_PER_MS: f64 = 1e6;

fn overlaps(p: &Proc, ours: Option<&CpuSet>) -> bool {
    match (ours, &p.allowed) {
        (Some(ours), Some(theirs)) => !ours.intersection(theirs).is_empty(),
        _ => true,
    }
}

fn psi_delta(before: Option<&Psi>, after: Option<&Psi>, secs: f64) -> (Option<f64>, Option<f64>) {
    let (Some(b), Some(a)) = (before, after) else { return (None, None) };
    let frac = |x: u64, y: u64| Some((y.saturating_sub(x) as f64 / 1e6 / secs).min(1.0));
    let some = frac(b.some.total_us, a.some.total_us);
    let full = match (b.full, a.full) {
        (Some(x), Some(y)) => frac(x.total_us, y.total_us),
        _ => None,
    };
    (some, full)
}

/// Deltas and facts.
pub(super) fn measure(cx: &Context<'_>) -> Measurements {
    let (before, after, secs) = (cx.before, cx.after, cx.secs);
    let mut m = Measurements::default();
    let target = after.target.as_ref().filter(|t| t.exists && t.readable);

    // CPUs.
    m.cpus.online = after.online.as_ref().map(|s| s.to_string());
    m.cpus.allowed = cx.allowed.as_ref().map(|s| s.to_string());
    m.cpus.allowed_count = cx.allowed.as_ref().map(CpuSet::count);
    if let Some(b) = target.and_then(|t| t.budget.as_ref()) {
        m.cpus.limit = Some(b.limit);
        m.cpus.threads = Some(b.threads);
        m.cpus.binding = Some(b.binding.clone());
        m.cpus.binding_cgroup = b.binding_cgroup.clone();
        m.cpus.binding_file = b.binding_file.clone();
        m.cpus.cgroup_version = Some(b.cgroup_version.clone());
    }

    // Host.
    if let (Some(sb), Some(sa)) = (&before.stat, &after.stat) {
        let prev: BTreeMap<u32, _> = sb.per_cpu.iter().copied().collect();
        let (mut busy, mut total) = (0u64, 0u64);
        for (id, t) in &sa.per_cpu {
            if cx.allowed.as_ref().is_some_and(|s| !s.contains(*id)) {
                continue;
            }
            let Some(p) = prev.get(id) else { continue };
            let b = t.busy().saturating_sub(p.busy());
            busy += b;
            total += b + t.idle_total().saturating_sub(p.idle_total());
        }
        let n = m.cpus.allowed_count.unwrap_or(sa.per_cpu.len() as u32) as f64;
        if total > 0 {
            m.host.busy_cpus = Some(round3(busy as f64 / total as f64 * n));
        }
    }
    let running = |s: &Snapshot| s.stat.as_ref().and_then(|st| st.procs_running).or(s.loadavg_running);
    if let (Some(rb), Some(ra)) = (running(before), running(after)) {
        // The snapshot reader is itself running when it reads the count.
        let own = if after.self_pid.is_some() { 1.0 } else { 0.0 };
        let runnable = ((rb + ra) as f64 / 2.0 - own).max(0.0);
        m.host.runnable = Some(round3(runnable));
        if let Some(n) = after.online.as_ref().map(CpuSet::count).filter(|n| *n > 0) {
            m.host.runnable_per_cpu = Some(round3(runnable / n as f64));
        }
    }
    let (some, full) = psi_delta(before.psi.as_ref(), after.psi.as_ref(), secs);
    m.host.psi_some = some.map(round3);
    m.host.psi_full = full.map(round3);
    m.host.psi_some_avg10 = after.psi.map(|p| p.some.avg10);

    // Process.
    if let (Some(t), Some(tb)) = (target, before.target.as_ref()) {
        let prev: BTreeMap<u32, _> = tb.threads.iter().map(|th| (th.tid, th)).collect();
        let mut p = ProcessFacts {
            pid: t.pid,
            comm: t.comm.clone(),
            threads: t.threads.len() as u32,
            ..Default::default()
        };
        let (mut run, mut wait) = (0u64, 0u64);
        let (mut mig, mut vol, mut invol) = (None::<u64>, None::<u64>, None::<u64>);
        let add = |acc: &mut Option<u64>, a: Option<u64>, b: Option<u64>| {
            if let (Some(a), Some(b)) = (a, b) {
                *acc = Some(acc.unwrap_or(0) + a.saturating_sub(b));
            }
        };
        let mut ran_on = CpuSet::new();
        let mut threads = Vec::new();
        for th in &t.threads {
            if let Some(cpu) = th.processor {
                ran_on.insert(cpu);
            }
            let Some(b) = prev.get(&th.tid) else { continue };
            if let Some(cpu) = b.processor {
                ran_on.insert(cpu);
            }
            let (Some(sa), Some(sb)) = (th.schedstat, b.schedstat) else { continue };
            let r = sa.on_cpu_ns.saturating_sub(sb.on_cpu_ns);
            let w = sa.run_delay_ns.saturating_sub(sb.run_delay_ns);
            run += r;
            wait += w;
            if r as f64 >= BUSY_THREAD_FRACTION * secs * 1e9 {
                p.busy_threads += 1;
            }
            add(&mut mig, th.migrations, b.migrations);
            add(&mut vol, th.voluntary, b.voluntary);
            add(&mut invol, th.involuntary, b.involuntary);
            threads.push(ThreadFacts {
                tid: th.tid,
                comm: th.comm.clone(),
                run_ms: round3(r as f64 / NS_PER_MS),
                wait_ms: round3(w as f64 / NS_PER_MS),
                wait_fraction: (r > 0).then(|| round3(w as f64 / r as f64)),
                migrations: th.migrations.zip(b.migrations).map(|(a, b)| a.saturating_sub(b)),
                cpu: th.processor,
            });
        }
        threads.sort_by(|a, b| b.wait_ms.total_cmp(&a.wait_ms).then(b.run_ms.total_cmp(&a.run_ms)));
        threads.truncate(MAX_LISTED);
        p.top_threads = threads;
        p.run_ms = round3(run as f64 / NS_PER_MS);
        p.wait_ms = round3(wait as f64 / NS_PER_MS);
        p.cpus_used = round3(run as f64 / 1e9 / secs);
        p.wait_fraction = (run > 0).then(|| round3(wait as f64 / run as f64));
        p.migrations_per_s = mig.map(|x| round3(x as f64 / secs));
        p.voluntary_switches_per_s = vol.map(|x| round3(x as f64 / secs));
        p.involuntary_switches_per_s = invol.map(|x| round3(x as f64 / secs));
        p.ran_on = ran_on.to_string();
        m.process = Some(p);

        // NUMA.
        if let Some(bytes) = &t.numa_bytes {
            let node_of = |cpu: u32| after.numa_nodes.iter().find(|(_, s)| s.contains(cpu)).map(|(n, _)| *n);
            let mut local: Vec<u32> = ran_on.iter().filter_map(node_of).collect();
            local.dedup();
            let total: u64 = bytes.values().sum();
            let remote: u64 = bytes.iter().filter(|(n, _)| !local.contains(n)).map(|(_, b)| *b).sum();
            m.numa = Some(NumaFacts {
                nodes: after.numa_nodes.len().max(1) as u32,
                remote_fraction: (total > 0 && !local.is_empty())
                    .then(|| round3(remote as f64 / total as f64)),
                local_nodes: local,
                bytes_per_node: bytes.iter().map(|(n, b)| (n.to_string(), *b)).collect(),
            });
        }
    }

    // Cgroups: the target's levels, or (host) every cgroup throttled during the sample.
    let cgroup_facts = |path: &str, a: &CpuGroup| {
        let b = before.cpu_groups.get(path);
        let mut f = CgroupFacts {
            cgroup: path.to_owned(),
            dir: a.dir.clone(),
            weight: a.weight,
            idle: a.idle,
            quota_cpus: a.quota.flatten().map(|q| round3(q.cpus())),
            ..Default::default()
        };
        if let Some(sa) = a.stat {
            f.periods_total = Some(sa.nr_periods);
            f.throttled_total = Some(sa.nr_throttled);
            f.throttled_ms_total = Some(round3(sa.throttled_ns as f64 / NS_PER_MS));
            f.throttled_ratio_total =
                (sa.nr_periods > 0).then(|| round3(sa.nr_throttled as f64 / sa.nr_periods as f64));
            if let Some(sb) = b.and_then(|b| b.stat) {
                let periods = sa.nr_periods.saturating_sub(sb.nr_periods);
                let throttled = sa.nr_throttled.saturating_sub(sb.nr_throttled);
                f.periods = Some(periods);
                f.throttled = Some(throttled);
                f.throttled_ms =
                    Some(round3(sa.throttled_ns.saturating_sub(sb.throttled_ns) as f64 / NS_PER_MS));
                f.throttled_ratio = (periods > 0).then(|| round3(throttled as f64 / periods as f64));
            }
        }
        f.pressure_some =
            psi_delta(b.and_then(|b| b.pressure.as_ref()), a.pressure.as_ref(), secs).0.map(round3);
        f
    };
    match target.and_then(|t| t.cpu_cgroup.as_deref()) {
        Some(cg) => {
            for path in ancestors(cg) {
                if let Some(a) = after.cpu_groups.get(&path) {
                    m.cgroups.push(cgroup_facts(&path, a));
                }
            }
        }
        None if cx.pid.is_none() => {
            for (path, a) in &after.cpu_groups {
                let f = cgroup_facts(path, a);
                if f.throttled.unwrap_or(0) > 0 {
                    m.cgroups.push(f);
                }
            }
        }
        None => {}
    }

    // Top consumers.
    m.top_consumers = cx
        .others
        .iter()
        .filter(|(_, cpus)| *cpus > 0.0)
        .take(MAX_LISTED)
        .map(|(p, cpus)| Consumer {
            pid: p.pid,
            comm: p.comm.clone(),
            cpus: round3(*cpus),
            cgroup: p.cpu_cgroup.clone(),
            allowed: p.allowed.as_ref().map(|s| s.to_string()),
            overlaps: overlaps(p, cx.allowed.as_ref()),
        })
        .collect();
    m
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

//! Pure: two snapshots and the time between them in, ranked findings out. No file, clock or
//! process is touched here, so every rule is tested on recorded numbers (`testdata/doctor/`).
//!
//! Steps:
//! 1. [`measure`] turns the two snapshots into [`Measurements`]: deltas over the sample
//!    (run-queue wait, CPU use, throttling, pressure, migrations) and the facts that do not
//!    change (CPUs, NUMA placement).
//! 2. Each `find_*` function reads the measurements and returns at most a few [`Finding`]s,
//!    with the evidence (file, what, value) and the recommendation of seed 003's decision tree:
//!    shared CPUs with equal weights → `cpu.weight` or `cpuset.cpus`; high migrations → pin;
//!    cross-node memory → bind memory; plus the cotenant-specific ones (quota throttling,
//!    an oversized pool).
//! 3. [`rank`] orders them: the most likely cause of tail latency first.

use super::snapshot::{ancestors, CpuGroup, Proc, Psi, Snapshot};
use cotenant::procfs::cpulist::CpuSet;
use serde::Serialize;
use std::{collections::BTreeMap, time::Duration};

/// Run-queue wait above this fraction of the threads' own run time is contention: a request
/// needing 200 µs of CPU then waits ≥ 20 µs on average, and the tail far more (seed 003: the
/// unisolated p99 was 10× baseline while the service itself was unchanged).
pub const CONTENTION_WAIT_FRACTION: f64 = 0.10;
/// ...and above this much wait per second of sample (ms): below it the fraction is noise
/// from a process that barely ran.
pub const CONTENTION_MIN_WAIT_MS_PER_S: f64 = 5.0;
/// Other processes using at least this many CPUs on our CPUs count as busy neighbours: a
/// quarter of a CPU is enough to delay every request that lands behind it.
pub const OTHERS_BUSY_MIN_CPUS: f64 = 0.25;
/// A neighbour (process or cgroup) using at least this much CPU is worth naming.
pub const NEIGHBOUR_MIN_CPUS: f64 = 0.1;
/// Throttled in at least 1 period in 20: each throttled period can hold a request for up to
/// the rest of the period (100 ms by default), which dominates any p99.
pub const THROTTLE_RATIO_MIN: f64 = 0.05;
/// PSI `some` above this fraction of the sample: some runnable task waited for a CPU at least
/// 10% of the time.
pub const PSI_SOME_MIN: f64 = 0.10;
/// More than this many runnable threads per CPU is an overcommitted host: every newly
/// runnable thread waits behind at least one other.
pub const OVERCOMMIT_RUNNABLE_PER_CPU: f64 = 1.5;
/// A thread running at least this fraction of the sample counts as busy.
pub const BUSY_THREAD_FRACTION: f64 = 0.05;
/// Migrations per busy thread per second above which the working set rarely stays warm
/// (seed 003: pinning beat the baseline by 22% through warm caches alone).
pub const MIGRATIONS_PER_THREAD_S: f64 = 10.0;
/// Memory on other nodes than the ones the process runs on, above which it pays the
/// interconnect (seed 003 quotes numastat's other_node above ~10% of local).
pub const NUMA_REMOTE_MIN: f64 = 0.10;
/// Most threads and neighbours listed in the measurements.
const MAX_LISTED: usize = 10;

const NS_PER_MS: f64 = 1e6;

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
    /// Orders findings of the same kind and severity (bigger first); not serialized.
    #[serde(skip)]
    pub score: f64,
}

fn ev(file: impl Into<String>, what: impl Into<String>, value: impl Into<String>) -> Evidence {
    Evidence { file: file.into(), what: what.into(), value: value.into() }
}

/// The CPUs part of the measurements.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpusFacts {
    /// Online CPUs (`0-3`).
    pub online: Option<String>,
    /// CPUs the process may run on (online ∩ cpuset ∩ affinity); the online CPUs for the host.
    pub allowed: Option<String>,
    /// How many.
    pub allowed_count: Option<u32>,
    /// cotenant's limit (fractional CPUs).
    pub limit: Option<f64>,
    /// cotenant's thread count (floor).
    pub threads: Option<u32>,
    /// What binds: online, affinity, cpuset, quota.
    pub binding: Option<String>,
    /// The cgroup whose quota binds.
    pub binding_cgroup: Option<String>,
    /// The file of the binding value.
    pub binding_file: Option<String>,
    /// none, v1, v2, hybrid.
    pub cgroup_version: Option<String>,
}

/// The host over the sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostFacts {
    /// Busy CPUs (of the allowed ones) from `/proc/stat`.
    pub busy_cpus: Option<f64>,
    /// Runnable threads (mean of the two snapshots, without doctor itself).
    pub runnable: Option<f64>,
    /// Runnable threads per online CPU.
    pub runnable_per_cpu: Option<f64>,
    /// PSI `some` over the sample, as a fraction of the time.
    pub psi_some: Option<f64>,
    /// PSI `full` over the sample.
    pub psi_full: Option<f64>,
    /// PSI `some avg10`, percent (the kernel's own average).
    pub psi_some_avg10: Option<f64>,
}

/// One thread over the sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadFacts {
    /// Thread id.
    pub tid: u32,
    /// Name.
    pub comm: String,
    /// Time on a CPU, ms.
    pub run_ms: f64,
    /// Run-queue wait, ms.
    pub wait_ms: f64,
    /// wait / run (`null` when it did not run).
    pub wait_fraction: Option<f64>,
    /// Migrations during the sample.
    pub migrations: Option<u64>,
    /// The CPU it last ran on.
    pub cpu: Option<u32>,
}

/// The process over the sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessFacts {
    /// Its pid.
    pub pid: u32,
    /// Its name.
    pub comm: String,
    /// Threads.
    pub threads: u32,
    /// Threads that ran at least 5% of the sample.
    pub busy_threads: u32,
    /// CPUs used (run time / sample time).
    pub cpus_used: f64,
    /// Run time of all threads, ms.
    pub run_ms: f64,
    /// Run-queue wait of all threads, ms.
    pub wait_ms: f64,
    /// wait / run.
    pub wait_fraction: Option<f64>,
    /// Migrations per second, all threads.
    pub migrations_per_s: Option<f64>,
    /// Voluntary context switches per second, all threads.
    pub voluntary_switches_per_s: Option<f64>,
    /// Involuntary context switches (preemptions) per second.
    pub involuntary_switches_per_s: Option<f64>,
    /// The CPUs its threads were seen on.
    pub ran_on: String,
    /// The threads that waited most (at most 10).
    pub top_threads: Vec<ThreadFacts>,
}

/// A cgroup: the process's own and its ancestors (leaf first), or for the host those that
/// were throttled during the sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CgroupFacts {
    /// Path as in `/proc/<pid>/cgroup`.
    pub cgroup: String,
    /// Its directory.
    pub dir: String,
    /// cpu.shares / cpu.weight.
    pub weight: Option<u64>,
    /// Quota in CPUs (`null`: none, or not read).
    pub quota_cpus: Option<f64>,
    /// Periods elapsed during the sample.
    pub periods: Option<u64>,
    /// Periods throttled during the sample.
    pub throttled: Option<u64>,
    /// Time throttled during the sample, ms.
    pub throttled_ms: Option<f64>,
    /// throttled / periods during the sample.
    pub throttled_ratio: Option<f64>,
    /// Periods since creation.
    pub periods_total: Option<u64>,
    /// Periods throttled since creation.
    pub throttled_total: Option<u64>,
    /// Time throttled since creation, ms.
    pub throttled_ms_total: Option<f64>,
    /// throttled / periods since creation.
    pub throttled_ratio_total: Option<f64>,
    /// v2 `cpu.pressure` some over the sample, fraction of the time.
    pub pressure_some: Option<f64>,
}

/// A process using CPU during the sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Consumer {
    /// Its pid.
    pub pid: u32,
    /// Its name.
    pub comm: String,
    /// CPUs it used during the sample.
    pub cpus: f64,
    /// Its cpu cgroup.
    pub cgroup: Option<String>,
    /// CPUs it may run on.
    pub allowed: Option<String>,
    /// Whether they overlap the diagnosed process's CPUs.
    pub overlaps: bool,
}

/// NUMA placement.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NumaFacts {
    /// Nodes on the host.
    pub nodes: u32,
    /// Nodes of the CPUs the process ran on.
    pub local_nodes: Vec<u32>,
    /// Resident bytes per node (keys are node ids).
    pub bytes_per_node: BTreeMap<String, u64>,
    /// Share of memory on other nodes.
    pub remote_fraction: Option<f64>,
}

/// Everything measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measurements {
    /// CPUs.
    pub cpus: CpusFacts,
    /// The host.
    pub host: HostFacts,
    /// The process (`null` for the host).
    pub process: Option<ProcessFacts>,
    /// Cgroups.
    pub cgroups: Vec<CgroupFacts>,
    /// Top CPU consumers other than the process (at most 10).
    pub top_consumers: Vec<Consumer>,
    /// NUMA placement (`null` without a process or `numa_maps`).
    pub numa: Option<NumaFacts>,
}

/// Internal facts the findings need beyond the serialized measurements.
struct Context<'a> {
    before: &'a Snapshot,
    after: &'a Snapshot,
    secs: f64,
    pid: Option<u32>,
    allowed: Option<CpuSet>,
    /// CPU used during the sample by process, every process but the target and doctor.
    others: Vec<(&'a Proc, f64)>,
}

/// Measures and diagnoses: the findings ranked, most likely cause first.
pub fn analyze(before: &Snapshot, after: &Snapshot, elapsed: Duration) -> (Measurements, Vec<Finding>) {
    let cx = context(before, after, elapsed);
    let m = measure(&cx);
    let mut findings = Vec::new();
    findings.extend(find_process_missing(&cx));
    findings.extend(find_throttling(&cx, &m));
    findings.extend(find_contention(&cx, &m));
    findings.extend(find_oversized_pool(&m));
    findings.extend(find_weight_and_cpusets(&cx, &m, &findings));
    findings.extend(find_pressure(&cx, &m));
    findings.extend(find_overcommit(&m));
    findings.extend(find_migrations(&cx, &m));
    findings.extend(find_numa(&cx, &m));
    (m, rank(findings))
}

fn context<'a>(before: &'a Snapshot, after: &'a Snapshot, elapsed: Duration) -> Context<'a> {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let pid = after.target.as_ref().map(|t| t.pid);
    let target = after.target.as_ref().filter(|t| t.exists && t.readable);
    let allowed = target
        .and_then(|t| t.budget.as_ref().map(|b| b.allowed.clone()).or_else(|| t.allowed.clone()))
        .or_else(|| after.online.clone());
    let tck = after.clk_tck.max(1) as f64;
    let prev: BTreeMap<u32, &Proc> = before.processes.iter().map(|p| (p.pid, p)).collect();
    let mut others: Vec<(&Proc, f64)> = after
        .processes
        .iter()
        .filter(|p| Some(p.pid) != pid && Some(p.pid) != after.self_pid)
        .filter_map(|p| {
            let b = prev.get(&p.pid)?;
            (b.comm == p.comm || b.cpu_ticks <= p.cpu_ticks).then_some(())?;
            let cpus = p.cpu_ticks.saturating_sub(b.cpu_ticks) as f64 / tck / secs;
            Some((p, cpus))
        })
        .collect();
    others.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.pid.cmp(&b.0.pid)));
    Context { before, after, secs, pid, allowed, others }
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
fn measure(cx: &Context<'_>) -> Measurements {
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

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn proc_file(cx: &Context<'_>, rest: &str) -> String {
    format!("/proc/{}/{rest}", cx.pid.unwrap_or(0))
}

fn find_process_missing(cx: &Context<'_>) -> Option<Finding> {
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
        score: 0.0,
    })
}

fn find_throttling(cx: &Context<'_>, m: &Measurements) -> Vec<Finding> {
    let leaf = m.cgroups.first().map(|c| c.cgroup.clone());
    let mut out = Vec::new();
    for c in &m.cgroups {
        let file = format!("{}/cpu.stat", c.dir);
        let quota = c.quota_cpus.map_or("none read".to_owned(), cotenant::cpus::cpus_word);
        let whose = match (&leaf, cx.pid) {
            (_, None) => format!("cgroup {}", c.cgroup),
            (Some(l), Some(_)) if *l == c.cgroup => format!("its own cgroup {}", c.cgroup),
            _ => format!("ancestor cgroup {}", c.cgroup),
        };
        let threads = m
            .cpus
            .threads
            .map_or(String::new(), |t| format!(" ({t} thread{})", if t == 1 { "" } else { "s" }));
        let totals = |e: &mut Vec<Evidence>| {
            e.push(ev(&file, "nr_periods since creation", c.periods_total.unwrap_or(0).to_string()));
            e.push(ev(&file, "nr_throttled since creation", c.throttled_total.unwrap_or(0).to_string()));
            e.push(ev(
                &file,
                "throttled time since creation",
                format!("{:.1} ms", c.throttled_ms_total.unwrap_or(0.0)),
            ));
            e.push(ev(
                &file,
                "throttled ratio since creation",
                c.throttled_ratio_total.map_or("-".into(), pct),
            ));
            e.push(ev(&c.dir, "CPU quota", quota.clone()));
        };
        let (Some(periods), Some(throttled), Some(ratio)) = (c.periods, c.throttled, c.throttled_ratio)
        else {
            continue;
        };
        if throttled > 0 && ratio >= THROTTLE_RATIO_MIN {
            let ms = c.throttled_ms.unwrap_or(0.0);
            let mut evidence = vec![
                ev(&file, "nr_periods during the sample", periods.to_string()),
                ev(&file, "nr_throttled during the sample", throttled.to_string()),
                ev(&file, "throttled time during the sample", format!("{ms:.1} ms in {:.2} s", cx.secs)),
                ev(&file, "throttled ratio during the sample", pct(ratio)),
            ];
            totals(&mut evidence);
            out.push(Finding {
                kind: "throttling",
                severity: Severity::High,
                title: format!(
                    "CPU quota throttling at {whose}: {throttled} of {periods} periods throttled ({}) during the sample",
                    pct(ratio)
                ),
                evidence,
                recommendation: format!(
                    "The quota of {whose} ({quota}) runs out before the end of its period and every thread \
                     below it stops until the next one: a request caught there waits up to a whole period. \
                     Size thread pools to the quota{threads} with `cotenant run` or cotenant::Pool (never more \
                     runnable threads than the quota pays for), raise the quota ({}), or allow short bursts \
                     (cpu.max.burst / cpu.cfs_burst_us).",
                    if c.dir.is_empty() { "cpu.max".into() } else { c.dir.clone() }
                ),
                score: ms,
            });
        } else if c.throttled_total.unwrap_or(0) > 0
            && c.throttled_ratio_total.is_some_and(|r| r >= THROTTLE_RATIO_MIN)
        {
            let mut evidence = vec![ev(&file, "nr_throttled during the sample", throttled.to_string())];
            totals(&mut evidence);
            out.push(Finding {
                kind: "throttling",
                severity: Severity::Low,
                title: format!(
                    "{whose} was throttled in the past ({} of periods since creation), not during the sample",
                    pct(c.throttled_ratio_total.unwrap_or(0.0))
                ),
                evidence,
                recommendation: format!(
                    "Throttling comes in bursts: run doctor again while the latency is bad. If it recurs, size \
                     pools to the quota ({quota}{threads}) or raise it."
                ),
                score: c.throttled_ms_total.unwrap_or(0.0),
            });
        }
    }
    out
}

/// The processes on our CPUs, busiest first, with the CPU they put there.
fn neighbours<'a>(cx: &'a Context<'_>) -> Vec<(&'a Proc, f64)> {
    cx.others
        .iter()
        .map(|(p, cpus)| (*p, on_our_cpus(p, *cpus, cx.allowed.as_ref())))
        .filter(|(_, c)| *c >= 0.005)
        .collect()
}

fn find_contention(cx: &Context<'_>, m: &Measurements) -> Option<Finding> {
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
        recommendation: "Neighbours share this process's CPUs (seed 003's decision tree). If the tail matters more \
             than the neighbour's throughput: give the neighbour a low weight (cpu.weight 10 against 100, \
             cpu.shares 102 against 1024) or, when it has a cgroup of its own, mark that cgroup idle (cpu.idle = 1, Linux 5.15+; \
             it lowers every process in it); SCHED_IDLE threads (a cotenant background pool) rank below \
             yours only inside your own cgroup (docs/background.md); for a hard latency budget give each tenant a disjoint cpuset (cpuset.cpus), accepting idle CPUs. \
             Equal weights mean default fairness: the neighbour gets as much CPU as you."
            .into(),
        score: wait_fraction,
    })
}

fn find_oversized_pool(m: &Measurements) -> Option<Finding> {
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
        score: p.busy_threads as f64 / count.max(1) as f64,
    })
}

/// The weight of the entity competing for a CPU on `path`'s side below the lowest common
/// ancestor with `other`: CFS compares siblings. A task directly in the common cgroup has the
/// default weight of a nice-0 task.
fn competing<'a>(
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

fn find_weight_and_cpusets(cx: &Context<'_>, m: &Measurements, so_far: &[Finding]) -> Vec<Finding> {
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
                     a contended CPU. Raise its {name} or lower the neighbour's (seed 003: 10 against 100 \
                     recovered most of the tail)."
                ),
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
                title: format!("{} other cgroup(s) with busy processes share CPUs {ours}", evidence.len() - 1),
                evidence,
                recommendation: "Give latency-sensitive and batch tenants disjoint cpusets (cpuset.cpus) for full \
                     isolation (seed 003: p99 back to baseline), at the price of CPUs one cannot lend the other; \
                     otherwise use weights."
                    .into(),
                score: total,
            });
        }
    }
    out
}

fn find_pressure(cx: &Context<'_>, m: &Measurements) -> Option<Finding> {
    let cg = m.cgroups.first().filter(|c| c.pressure_some.is_some());
    let (file, some) = match cg {
        Some(c) => (format!("{}/cpu.pressure", c.dir), c.pressure_some?),
        None => ("/proc/pressure/cpu".to_owned(), m.host.psi_some?),
    };
    if some < PSI_SOME_MIN {
        return None;
    }
    let mut evidence =
        vec![ev(&file, "some: share of the sample a runnable task waited for a CPU", pct(some))];
    if let (Some(h), true) = (m.host.psi_some, cg.is_some()) {
        evidence.push(ev("/proc/pressure/cpu", "host some during the sample", pct(h)));
    }
    if let Some(a) = m.host.psi_some_avg10 {
        evidence.push(ev("/proc/pressure/cpu", "host some avg10", format!("{a:.2}%")));
    }
    if let Some(f) = m.host.psi_full {
        evidence.push(ev("/proc/pressure/cpu", "host full during the sample", pct(f)));
    }
    Some(Finding {
        kind: "cpu-pressure",
        severity: Severity::Medium,
        title: format!("CPU pressure: runnable tasks waited for a CPU {} of the sample", pct(some)),
        evidence,
        recommendation: if cx.pid.is_some() {
            "Tasks wait for CPUs: see the contention, weight and cpuset findings for who and what to change."
                .into()
        } else {
            "The host has more runnable work than CPUs: run `cotenant doctor --pid PID` on the latency-sensitive \
             service to see whether it is the one waiting, and give batch work a low weight or SCHED_IDLE."
                .into()
        },
        score: some,
    })
}

fn find_overcommit(m: &Measurements) -> Option<Finding> {
    let r = m.host.runnable_per_cpu?;
    if r < OVERCOMMIT_RUNNABLE_PER_CPU {
        return None;
    }
    let mut evidence = vec![
        ev(
            "/proc/stat",
            "runnable threads (procs_running, mean of the two snapshots)",
            format!("{:.1}", m.host.runnable.unwrap_or(0.0)),
        ),
        ev("/sys/devices/system/cpu/online", "online CPUs", m.cpus.online.clone().unwrap_or_default()),
        ev("/proc/stat", "runnable threads per online CPU", format!("{r:.2}")),
    ];
    if let Some(b) = m.host.busy_cpus {
        evidence.push(ev(
            "/proc/stat",
            "busy CPUs during the sample (of the allowed ones)",
            format!("{b:.2}"),
        ));
    }
    Some(Finding {
        kind: "host-overcommitted",
        severity: Severity::Medium,
        title: format!("The host is overcommitted: {r:.1} runnable threads per CPU"),
        evidence,
        recommendation:
            "More threads want to run than there are CPUs: size pools to the CPUs they really have \
             (`cotenant run`, cotenant::Pool) and move batch work to SCHED_IDLE or a low weight."
                .into(),
        score: r,
    })
}

fn find_migrations(cx: &Context<'_>, m: &Measurements) -> Option<Finding> {
    let p = m.process.as_ref()?;
    let rate = p.migrations_per_s?;
    let busy = p.busy_threads.max(1) as f64;
    if m.cpus.allowed_count.unwrap_or(1) <= 1 || rate / busy < MIGRATIONS_PER_THREAD_S {
        return None;
    }
    Some(Finding {
        kind: "migrations",
        severity: Severity::Low,
        title: format!("Threads migrate between CPUs {rate:.0} times per second ({:.0} per busy thread)", rate / busy),
        evidence: vec![
            ev(proc_file(cx, "task/*/sched"), "se.nr_migrations per second (all threads)", format!("{rate:.1}")),
            ev(proc_file(cx, "task/*/schedstat"), "busy threads", p.busy_threads.to_string()),
            ev(proc_file(cx, "task/*/stat"), "CPUs its threads were seen on", p.ran_on.clone()),
        ],
        recommendation: "Frequent migrations plus a healthy CPU profile plus a poor tail is seed 003's \"needs \
             pinning\" signature: pin workers (cotenant Pool::builder().pin_workers(true), taskset, or a cpuset) \
             so caches stay warm."
            .into(),
        score: rate / busy,
    })
}

fn find_numa(cx: &Context<'_>, m: &Measurements) -> Option<Finding> {
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
        score: remote,
    })
}

/// Order of kinds at equal severity: what explains the others comes first (throttling before
/// contention: a throttled thread also shows run-queue wait).
const KIND_ORDER: &[&str] = &[
    "process-not-found",
    "process-unreadable",
    "throttling",
    "cpu-contention",
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
                score: 0.0,
            },
        );
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(kind: &'static str, severity: Severity, score: f64) -> Finding {
        Finding { kind, severity, title: kind.into(), evidence: vec![], recommendation: String::new(), score }
    }

    fn kinds(v: &[Finding]) -> Vec<&'static str> {
        v.iter().map(|f| f.kind).collect()
    }

    #[test]
    fn contention_leads_over_everything_but_sample_throttling() {
        let ranked = rank(vec![
            f("cpu-pressure", Severity::Medium, 0.4),
            f("migrations", Severity::Low, 50.0),
            f("cpu-contention", Severity::High, 0.48),
            f("low-weight", Severity::Medium, 10.0),
        ]);
        assert_eq!(kinds(&ranked), ["cpu-contention", "low-weight", "cpu-pressure", "migrations"]);
        let ranked = rank(vec![
            f("cpu-contention", Severity::High, 4.0),
            f("throttling", Severity::High, 640.0),
            f("throttling", Severity::Low, 10_000.0),
        ]);
        assert_eq!(kinds(&ranked), ["throttling", "cpu-contention", "throttling"]);
        assert_eq!(ranked[0].severity, Severity::High);
    }

    #[test]
    fn past_throttling_does_not_lead_and_nothing_wrong_does() {
        let ranked = rank(vec![f("throttling", Severity::Low, 1.0), f("migrations", Severity::Low, 12.0)]);
        assert_eq!(kinds(&ranked), ["nothing-wrong", "throttling", "migrations"]);
        assert_eq!(kinds(&rank(vec![])), ["nothing-wrong"]);
    }

    #[test]
    fn missing_process_leads() {
        let ranked =
            rank(vec![f("cpu-pressure", Severity::Medium, 0.9), f("process-not-found", Severity::High, 0.0)]);
        assert_eq!(kinds(&ranked), ["process-not-found", "cpu-pressure"]);
    }

    #[test]
    fn competing_entities_are_siblings_below_the_common_ancestor() {
        use super::super::snapshot::{CpuGroup, Hierarchy};
        let mut s = Snapshot {
            cpu_hierarchy: Some(Hierarchy {
                version: "v1",
                mount: cotenant::procfs::mountinfo::CgroupMount {
                    root: "/".into(),
                    mount_point: "/sys/fs/cgroup/cpu".into(),
                    is_v2: false,
                    super_options: vec![],
                },
            }),
            ..Snapshot::default()
        };
        for (p, w) in [("/a", 512), ("/a/b", 2048), ("/c", 1024), ("/a/d", 4096)] {
            s.cpu_groups.insert(p.into(), CpuGroup { weight: Some(w), ..Default::default() });
        }
        assert_eq!(competing(&s, "/a/b", "/c").0, "/a");
        assert_eq!(competing(&s, "/a/b", "/c").1, Some(512));
        assert_eq!(competing(&s, "/a/b", "/a/d").1, Some(2048));
        assert_eq!(competing(&s, "/a", "/a/d").1, Some(1024)); // a task of /a: nice-0 weight
    }
}

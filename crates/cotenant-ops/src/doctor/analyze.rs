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
//!    an oversized pool, a busy sibling cgroup with the `cotenant cgroup set` line that marks
//!    it idle).
//! 3. [`rank`] orders them: the most likely cause of tail latency first.
//!
//! Where: this file holds the pipeline and the thresholds every rule uses; `analyze/facts.rs`
//! the measurement types, `analyze/measure.rs` step 1, `analyze/findings/` steps 2 and 3 (the
//! finding types and ranking in its `mod.rs`, one file per family of findings).

mod facts;
mod findings;
mod measure;

pub use facts::{
    CgroupFacts, Consumer, CpusFacts, HostFacts, Measurements, NumaFacts, ProcessFacts, ThreadFacts,
};
pub use findings::{rank, Evidence, Finding, Severity};

use super::snapshot::{Proc, Snapshot};
use cotenant::internal::procfs::cpulist::CpuSet;
use findings::{
    find_busy_sibling, find_contention, find_migrations, find_numa, find_overcommit, find_oversized_pool,
    find_pressure, find_process_missing, find_throttling, find_weight_and_cpusets,
};
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
    let m = measure::measure(&cx);
    let mut findings = Vec::new();
    findings.extend(find_process_missing(&cx));
    findings.extend(find_throttling(&cx, &m));
    findings.extend(find_contention(&cx, &m));
    findings.extend(find_busy_sibling(&cx, &m));
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

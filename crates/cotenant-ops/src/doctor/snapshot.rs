//! One snapshot of everything `doctor` looks at, read from a root directory standing in for `/`
//! (the system, or a fixture tree under `testdata/doctor/`), into plain structs.
//!
//! Tolerant by design: every file that cannot be read or parsed becomes a [`NotRead`] (file and
//! reason) and an absent value, never an error. The files of other processes, which may exit
//! while they are read, are only counted ([`Snapshot::unreadable_processes`]).
//!
//! The formats the library does not parse are parsed here, by small pure functions in
//! `snapshot/parse.rs`: PSI files
//! (`/proc/pressure/cpu`, v2 `cpu.pressure`), `/proc/<pid>/task/<tid>/sched`
//! (`se.nr_migrations`), the context-switch lines of `status`, and `numa_maps`.
//!
//! This file holds the data types (what a snapshot is); `snapshot/read.rs` reads them
//! ([`take`]).

mod parse;
mod read;
#[cfg(test)]
mod tests;

pub use parse::{parse_numa_maps, parse_psi, parse_sched_migrations, status_number};
pub use read::{ancestors, take, DEFAULT_CLK_TCK};

use cotenant::internal::procfs::{
    cgroupfs::CpuStat, cgroupfs::Quota, cpulist::CpuSet, mountinfo::CgroupMount, schedstat::TaskSchedstat,
    stat::Stat,
};
use std::collections::BTreeMap;

/// A file that could not be read or parsed, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NotRead {
    /// The file (or what was being looked for), as opened (under the root).
    pub file: String,
    /// Why, in words.
    pub reason: String,
}

/// PSI (`/proc/pressure/cpu`, `cpu.pressure`): the `some` and `full` lines.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Psi {
    /// Some runnable task waited for a CPU.
    pub some: PsiLine,
    /// Every non-idle task waited (reported by newer kernels; 0 for the host CPU line).
    pub full: Option<PsiLine>,
}

/// One PSI line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PsiLine {
    /// Percent of the last 10 s.
    pub avg10: f64,
    /// Percent of the last 60 s.
    pub avg60: f64,
    /// Total stall time, µs, since boot (or the cgroup's creation).
    pub total_us: u64,
}

/// Where a controller's hierarchy is mounted (as the host names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// `v1` or `v2`.
    pub version: &'static str,
    /// The mount, from mountinfo.
    pub mount: CgroupMount,
}

/// A cgroup of the cpu hierarchy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuGroup {
    /// Its directory, under the root.
    pub dir: String,
    /// `cpu.shares` (v1) or `cpu.weight` (v2).
    pub weight: Option<u64>,
    /// `cpu.idle` is 1 (v1 and v2, Linux 5.15+); `None` when the file does not exist or could
    /// not be read.
    pub idle: Option<bool>,
    /// `Some(None)` = unlimited; `None` = not read.
    pub quota: Option<Option<Quota>>,
    /// `cpu.stat`.
    pub stat: Option<CpuStat>,
    /// v2 `cpu.pressure`.
    pub pressure: Option<Psi>,
}

/// A cgroup of the cpuset hierarchy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpusetGroup {
    /// The effective-cpus file read.
    pub file: String,
    /// Its CPUs, if read.
    pub cpus: Option<CpuSet>,
}

/// One process of the host (a neighbour candidate).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Proc {
    /// Its pid.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// Thread count.
    pub threads: u64,
    /// `Cpus_allowed_list`.
    pub allowed: Option<CpuSet>,
    /// Its cgroup in the cpu hierarchy.
    pub cpu_cgroup: Option<String>,
    /// Its cgroup in the cpuset hierarchy.
    pub cpuset_cgroup: Option<String>,
}

/// One thread of the target.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thread {
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// `task/<tid>/schedstat`.
    pub schedstat: Option<TaskSchedstat>,
    /// `se.nr_migrations` from `task/<tid>/sched`.
    pub migrations: Option<u64>,
    /// `voluntary_ctxt_switches` from `task/<tid>/status`.
    pub voluntary: Option<u64>,
    /// `nonvoluntary_ctxt_switches`.
    pub involuntary: Option<u64>,
    /// The CPU it last ran on (`stat` field 39).
    pub processor: Option<u32>,
}

/// What `cotenant::cpus` says about the target.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The CPUs it may run on.
    pub allowed: CpuSet,
    /// The fractional limit.
    pub limit: f64,
    /// The thread count (floor).
    pub threads: u32,
    /// `online`, `affinity`, `cpuset` or `quota`.
    pub binding: String,
    /// The cgroup whose quota binds.
    pub binding_cgroup: Option<String>,
    /// The file the binding value came from.
    pub binding_file: Option<String>,
    /// `none`, `v1`, `v2`, `hybrid`.
    pub cgroup_version: String,
}

/// The process being diagnosed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Target {
    /// Its pid.
    pub pid: u32,
    /// Whether `/proc/<pid>` exists.
    pub exists: bool,
    /// Whether its `stat` could be read (false: gone or not permitted).
    pub readable: bool,
    /// Command name.
    pub comm: String,
    /// Its threads.
    pub threads: Vec<Thread>,
    /// `Cpus_allowed_list`.
    pub allowed: Option<CpuSet>,
    /// Its cgroup in the cpu hierarchy.
    pub cpu_cgroup: Option<String>,
    /// Its cgroup in the cpuset hierarchy.
    pub cpuset_cgroup: Option<String>,
    /// Resident memory per NUMA node, bytes (`numa_maps`).
    pub numa_bytes: Option<BTreeMap<u32, u64>>,
    /// The CPU budget, if `cotenant::cpus` could compute it.
    pub budget: Option<Budget>,
}

/// Everything read at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The pid of the process taking the snapshot, on the live system (left out of the
    /// neighbours); `None` for a fixture.
    pub self_pid: Option<u32>,
    /// Clock ticks per second of `stat` times.
    pub clk_tck: u64,
    /// `/sys/devices/system/cpu/online`.
    pub online: Option<CpuSet>,
    /// `/proc/stat`.
    pub stat: Option<Stat>,
    /// Runnable tasks from `/proc/loadavg` (used when `/proc/stat` lacks `procs_running`).
    pub loadavg_running: Option<u64>,
    /// `/proc/pressure/cpu`.
    pub psi: Option<Psi>,
    /// NUMA nodes and their CPUs.
    pub numa_nodes: Vec<(u32, CpuSet)>,
    /// Every process that could be read.
    pub processes: Vec<Proc>,
    /// Processes whose files could not be read (exited, or not permitted).
    pub unreadable_processes: u32,
    /// The cpu hierarchy.
    pub cpu_hierarchy: Option<Hierarchy>,
    /// The cpuset hierarchy.
    pub cpuset_hierarchy: Option<Hierarchy>,
    /// cpu cgroups by path (as in `/proc/<pid>/cgroup`).
    pub cpu_groups: BTreeMap<String, CpuGroup>,
    /// cpuset cgroups by path.
    pub cpuset_groups: BTreeMap<String, CpusetGroup>,
    /// The process diagnosed, if any.
    pub target: Option<Target>,
    /// What could not be read.
    pub not_read: Vec<NotRead>,
}

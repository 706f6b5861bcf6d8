//! The measurements: what two snapshots say about the CPUs, the host, the process, its
//! cgroups, its neighbours and its NUMA placement (the `measurements` object of `--json`).

use serde::Serialize;
use std::collections::BTreeMap;

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
    /// `cpu.idle` is 1 (`null`: no such file, before Linux 5.15).
    pub idle: Option<bool>,
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

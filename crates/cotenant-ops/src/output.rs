//! The `cotenant cpus --json` shape, also what the C ABI's `cotenant_cpus_json` returns (one
//! writer for both). Field names are a public interface: add fields, do not rename them.

use cotenant::cpus::{Limit, Rounding, SourceRow};
use serde::Serialize;

/// `cotenant cpus --json`.
#[derive(Debug, Serialize)]
pub struct CpusJson {
    /// min(allowed CPUs, every ancestor's quota / period), as a fraction.
    pub limit: f64,
    /// Rounded down (at least 1): the default thread count.
    pub threads: u32,
    /// Rounded up.
    pub threads_ceil: u32,
    /// Rounded to nearest, halves up.
    pub threads_nearest: u32,
    /// |online ∩ cpuset ∩ affinity|.
    pub allowed_cpus: u32,
    /// `online`, `affinity`, `cpuset` or `quota`.
    pub binding: &'static str,
    /// The file (or system call) the binding value came from.
    pub binding_path: Option<String>,
    /// For a quota, the cgroup whose quota binds.
    pub binding_cgroup: Option<String>,
    /// `none`, `v1`, `v2` or `hybrid`.
    pub cgroup_version: &'static str,
    /// The process asked about; `null` for the command itself.
    pub pid: Option<u32>,
    /// Every source, binding or not.
    pub sources: Vec<SourceJson>,
}

/// One source in `cotenant cpus --json`.
#[derive(Debug, Serialize)]
pub struct SourceJson {
    /// `online`, `affinity`, `cpuset`, `quota` or `burst`.
    pub kind: &'static str,
    /// `null` when the source is absent.
    pub path: Option<String>,
    /// For a quota, the cgroup it belongs to.
    pub cgroup: Option<String>,
    /// The value as read, or why the source is absent.
    pub value: String,
    /// Whether this source sets the limit.
    pub binds: bool,
}

impl CpusJson {
    /// The explanation of `b`, for process `pid` (`None`: the caller itself).
    pub fn new(b: &Limit, pid: Option<u32>) -> Self {
        CpusJson {
            limit: b.limit(),
            threads: b.threads(Rounding::Floor),
            threads_ceil: b.threads(Rounding::Ceil),
            threads_nearest: b.threads(Rounding::Nearest),
            allowed_cpus: b.allowed_cpus(),
            binding: b.binding().as_str(),
            binding_path: b.binding_origin().map(|o| o.to_string()),
            binding_cgroup: b.binding_level().map(|l| l.cgroup.clone()),
            cgroup_version: b.cgroup_version(),
            pid,
            sources: b.sources().into_iter().map(SourceJson::from).collect(),
        }
    }
}

impl From<SourceRow> for SourceJson {
    fn from(r: SourceRow) -> Self {
        SourceJson {
            kind: r.kind,
            path: r.origin.map(|o| o.to_string()),
            cgroup: r.cgroup,
            value: r.value,
            binds: r.binds,
        }
    }
}

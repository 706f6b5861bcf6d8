//! cotenant: share a Linux host's CPUs without hurting each other's tail latency.
//!
//! Today the crate answers the first question of seed 000 §3: **how many CPUs should this
//! process use?** ([`cpus`]), taking into account the online CPUs, the affinity mask, the cgroup
//! cpuset and the CPU quota of the process's cgroup and every ancestor, on cgroup v1 and v2.
//!
//! | module | what it owns |
//! |---|---|
//! | [`cpus`] | [`cpus::CpuBudget`]: the CPU count, every source it came from, cheap refresh |
//! | [`procfs`] | pure parsers for the `/proc` and cgroup-fs formats (no I/O) |

pub mod cpus;
pub mod procfs;

pub use cpus::{CpuBudget, Rounding};

//! cotenant: share a Linux host's CPUs without hurting each other's tail latency.
//!
//! Two questions from seed 000: **how many CPUs should this process use?** ([`cpus`]: online
//! CPUs, affinity, cpuset, and the quota of the process's cgroup and every ancestor, on cgroup
//! v1 and v2), and **how many of its threads should run right now?** ([`Pool`]: a thread pool
//! that parks the workers its neighbours and its quota do not leave room for).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let pool = cotenant::Pool::builder().build()?; // adaptive, one thread per allowed CPU
//! let task = pool.spawn(|| (1..=10u64).sum::<u64>());
//! assert_eq!(task.join()?, 55); // `?` works with anyhow and boxed errors alike
//! # Ok(())
//! # }
//! ```
//!
//! | module | what it owns |
//! |---|---|
//! | [`cpus`] | [`cpus::Limit`]: the CPU count, every source it came from, cheap refresh |
//! | [`pool`] | [`Pool`], [`Builder`], [`Task`], [`Full`]: the friendly pool |
//! | [`policy`] | [`Policy`]: pure decisions from a [`policy::Sample`] |
//! | [`metrics`] | [`Metrics`]: a pool's counters, Display and Prometheus text |
//! | [`health`] | seed 002's four pool health alerts over a sliding window (pure) |
//! | [`sizing`] | pool sizes for work that waits: the utilisation formula, Little's law (seed 002) |
//! | [`tokens`] | host CPU tokens: cooperating pools never run more tasks at once than CPUs |
//! | [`wait`] | adaptive waiting: [`wait::Backoff`], [`wait::Signal`], [`wait::Event`] (seed 004) |
//!
//! The parsers, the sampler, the user-space CPU budget's pool and the policy simulator are
//! internals (`cotenant::internal`, hidden, no stability promise) shared with cotenant's own
//! command, lab and simulator.

#[cfg(not(loom))]
pub mod advisor;
mod affinity;
pub mod cpus;
pub mod health;
#[doc(hidden)]
pub mod internal;
mod kfile;
pub mod metrics;
pub mod policy;
pub mod pool;
pub mod sizing;
mod sync;
#[cfg(not(loom))]
pub mod tokens;
pub mod wait;

// Inside the crate the internals keep their short paths (`crate::procfs`, ...).
#[cfg(not(loom))]
use internal::sampler;
#[cfg_attr(loom, allow(unused_imports))] // the budget's pool is compiled out of loom builds
use internal::{bandwidth, procfs};

pub use cpus::Rounding;

/// The old name of [`cpus::Limit`] ("budget" also named the CPU-time quota of
/// [`Builder::cpu_budget`]).
#[deprecated(since = "0.2.0", note = "renamed `cotenant::cpus::Limit`")]
pub type CpuBudget = cpus::Limit;
pub use metrics::Metrics;
pub use metrics::{BudgetMetrics, ElasticMetrics};
pub use policy::Policy;
#[cfg(not(loom))]
pub use pool::checkpoint;
pub use pool::{
    background_current_thread, Background, BuildError, Builder, Full, JoinError, Panic, Placement, Pool,
    Task, TrySpawnError,
};

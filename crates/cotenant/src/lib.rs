//! cotenant: share a Linux host's CPUs without hurting each other's tail latency.
//!
//! Two questions from the friendlypool paper ("Reducing Tail Latencies Through Environment- and
//! Neighbour-aware Thread Management", Jeffery, Jensen and Mortier, 2024): **how many CPUs
//! should this process use?** ([`cpus`]: online
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
//! | [`pool`] | [`Pool`], [`Builder`], [`Task`], [`Full`]: the friendly pool, for closures and futures ([`Pool::spawn_future`], [`block_on()`]) |
//! | [`policy`] | [`Policy`]: pure decisions from a [`policy::Sample`] |
//! | [`metrics`] | [`Metrics`]: a pool's counters and task-time histograms, Display; [`metrics::Registry`]: every pool, the CPU limit and the token sets as one Prometheus exposition |
//! | [`health`] | four pool health alerts over a sliding window (pure), from "Thread Pool Sizing and the Contention Cliff" |
//! | [`sizing`] | pool sizes for work that waits: the utilisation formula, Little's law (the same chapter) |
//! | [`tokens`] | host CPU tokens: cooperating pools never run more tasks at once than CPUs |
//! | [`wait`] | adaptive waiting: [`wait::Backoff`], [`wait::Signal`], [`wait::Event`] (after "Inducing Huge Tail Latency on a MongoDB deployment") |
//!
//! The parsers, the sampler, the user-space CPU budget's pool and the policy simulator are
//! internals (`cotenant::internal`, hidden, no stability promise) shared with cotenant's own
//! command, lab and simulator.
//!
//! # Platforms
//!
//! cotenant reads Linux: `/proc`, `/sys`, cgroup v1 and v2, `sched_getaffinity(2)`, schedstat,
//! System V semaphores. On every other system the crate builds all the same, with the same
//! API, and works with a fallback, so that a program or a crate that uses it builds everywhere
//! (developed on macOS or Windows, deployed on Linux) and does the plain thing where it cannot
//! see more:
//!
//! | part | on Linux | on other systems |
//! |---|---|---|
//! | [`cpus`] | online ∩ cpuset ∩ affinity, and every cgroup quota up to the root | the count of `std::thread::available_parallelism`; [`cpus::Limit::sources`] says so, and why each other source is absent |
//! | [`Pool`] | the adaptive policy follows the host every period | a fixed target, every worker: the controller has nothing to sample, and a pool whose sampling fails keeps all its workers ([`Metrics::sample_errors`] counts the periods) |
//! | [`tokens`] | host CPU tokens shared by cooperating processes | none: opening a set fails with "host CPU tokens need Linux (System V semaphores)", and default pools run without ([`Metrics::host_tokens`] says `unavailable`) |
//! | [`advisor`] | advice from the host's counters | every thread, the reading failures counted |
//! | [`wait`] | the standard library's threads, `Mutex` and `Condvar` | the same |
//! | pinned workers ([`Builder::pin_workers`]) | one CPU each | unpinned, reported in [`Metrics::degradations`] |
//! | [`Builder::cpu_budget`], [`Builder::elastic`] | thread CPU clocks and run-queue waits | the POSIX CPU clocks where the system has them (macOS, the BSDs), no run-queue wait: an elastic pool takes the wait for blocked time |
//!
//! Linux builds compile the fallback with `RUSTFLAGS="--cfg cotenant_force_fallback"` (it is
//! built and tested that way, since only the Linux target is at hand where cotenant is
//! developed).

#[cfg(not(loom))]
pub mod advisor;
mod affinity;
mod block_on;
pub mod cpus;
mod env_switch;
pub mod health;
#[doc(hidden)]
pub mod internal;
mod kfile;
pub mod metrics;
pub mod policy;
pub mod pool;
pub mod sizing;
mod sync;
mod sys;
#[cfg(not(loom))]
pub mod tokens;
pub mod wait;

// Inside the crate the internals keep their short paths (`crate::procfs`, ...).
#[cfg(not(loom))]
use internal::sampler;
#[cfg_attr(loom, allow(unused_imports))] // the budget's pool is compiled out of loom builds
use internal::{bandwidth, procfs};

pub use block_on::block_on;
pub use cpus::Rounding;

/// The old name of [`cpus::Limit`] ("budget" also named the CPU-time quota of
/// [`Builder::cpu_budget`]).
#[deprecated(since = "0.2.0", note = "renamed `cotenant::cpus::Limit`")]
pub type CpuBudget = cpus::Limit;
pub use metrics::Metrics;
pub use metrics::{BudgetMetrics, ElasticMetrics, Histogram};
pub use policy::Policy;
#[cfg(not(loom))]
pub use pool::checkpoint;
#[cfg(not(loom))]
pub use pool::Scope;
pub use pool::{
    background_current_thread, Background, BuildError, Builder, Full, JoinError, Panic, Placement, Pool,
    Task, TrySpawnError,
};
pub use pool::{JoinTimeoutError, ShutdownTimeout, Woken};

//! Internals shared with cotenant's own command, lab, simulator, benchmarks and tests: the
//! `/proc` and cgroup-fs parsers, the per-period CPU sampler, the user-space CPU budget's
//! global pool, the policy simulator, when the controller samples a pool (`coast`, for the
//! event simulator), the format of the status records that pools publish for
//! `cotenant top`, and the scan that tells live records from stale ones (Linux only).
//! **Not part of the API**: hidden from the
//! documentation and free to change in any release. Users reach what these do through
//! [`crate::cpus`], [`crate::Pool`] and [`crate::Builder::cpu_budget`].

pub mod bandwidth;
/// How often the controller samples a pool (`policy::coast`): the decision the event
/// simulator (`cotenant-sim`) replays.
pub mod coast {
    pub use crate::policy::coast::{
        is_calm, may_coast, next_stride, tokens_quiet, MAX_STRIDE, NAP_AFTER_PERIODS,
    };
}
pub mod policy_sim;
pub mod procfs;
#[cfg(not(loom))]
pub mod sampler;
pub mod status_record;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
pub mod status_scan;

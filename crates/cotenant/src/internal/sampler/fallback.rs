//! The host sampler outside Linux (`crate::sys`'s fallback): there is no `/proc/stat`,
//! `/proc/loadavg` or cgroup to read, so no sampler can be built. [`HostSampler::system`] fails
//! saying so, and its callers take the path they take whenever sampling fails: a dynamic pool
//! keeps every worker (a fixed target, `Metrics::sample_errors` counting the periods), an
//! advisor advises every thread.

use std::convert::Infallible;

use super::{HostCounters, SampleError};

/// Why there is no sampler here.
const UNAVAILABLE: &str = "the host CPU sampler needs Linux (/proc/stat, /proc/loadavg and the cgroup \
                           files); this build of cotenant runs its fallback for other systems";

/// Reads [`HostCounters`] for the calling process: never built on this system
/// ([`HostSampler::system`] says why), so none of its methods can be called.
#[derive(Debug)]
pub struct HostSampler {
    never: Infallible,
}

impl HostSampler {
    /// Always an error: there are no host counters to read on this system.
    pub fn system() -> Result<Self, SampleError> {
        Err(SampleError(UNAVAILABLE.to_owned()))
    }

    /// Where busy time comes from (no sampler exists here).
    pub fn busy_source(&self) -> String {
        let never = self.never;
        match never {}
    }

    /// Takes a reading (no sampler exists here).
    pub fn read(&mut self) -> Result<HostCounters, SampleError> {
        let never = self.never;
        match never {}
    }
}

//! Helpers shared by the integration tests.
// Each test crate uses a different part of the support code.
#[allow(dead_code, unused_imports)]
pub mod affinity;
#[allow(dead_code, unused_imports)]
pub mod cgroup;

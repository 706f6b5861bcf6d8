//! Helpers shared by the integration tests.
pub mod cgroup;

//! Test cgroups (`cotenant-test-<pid>-<name>`): the lab's cgroup module from `cotenant-ops`.

use cotenant_ops::cgroup as shared;

use std::io::{self, Write};

/// The kernel's error number behind a cgroup error (`cgroupfs` wraps it in a message naming
/// the file, where `io::Error::raw_os_error` cannot see it).
#[allow(unused_imports)] // used by some of the test crates that include this module
pub use cotenant_ops::cgroupfs::os_error;
pub use shared::{layout, Cgroup as TestCgroup, Layout};

/// The prefix of every cgroup the tests create.
pub const PREFIX: &str = "cotenant-test-";

/// Prints why a test is skipped, past the test harness's output capture.
pub fn skip(test: &str, reason: &str) {
    let _ = writeln!(io::stderr(), "{test}: SKIPPED: {reason}");
}

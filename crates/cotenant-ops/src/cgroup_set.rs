//! `cotenant cgroup set`: changes a cgroup's CPU quota, period and burst, writing only the files
//! whose values differ.
//!
//! Seed 001 §III-A2 and §IV-A2 ("no-op updates"): every write of a CPU bandwidth setting, even of
//! the value already there, makes the kernel reset the cgroup's local runtime pools and refill
//! its global pool, which can throttle it; container runtimes and system daemons rewrite
//! unchanged quotas regularly. The seed's fix turns an unchanged update into a no-op inside the
//! kernel; this command does it from user space:
//!
//! 1. [`resolve()`]: the directory, absolute or relative to the cpu controller's mount point
//!    (from `/proc/self/mountinfo`, under a root that tests point at a fixture).
//! 2. [`read_current`]: the version (`cpu.max` → v2, `cpu.cfs_quota_us` → v1) and the current
//!    quota, period and burst, read through the directory opened by [`crate::cgroupfs`].
//! 3. [`desired`] (pure): `--cpus`/`--period`/`--burst` as target values, checked against the
//!    kernel's rules (quota ≥ 1 ms, burst ≤ quota) before anything is written.
//! 4. [`plan()`] (pure): the writes, none when everything matches, in an order the kernel accepts
//!    at every step (it checks each write against the values then in place).
//! 5. [`apply()`]: each write, then a read-back that must show the value written.
//!
//! All times are in microseconds, as in the files.
//!
//! Every file is read and written through one [`ControlDir`](crate::cgroupfs::ControlDir)
//! (issue 34): the directory must be on a cgroup file system, and neither it nor a control
//! file may be a symbolic link, so a wrong or hostile path makes root write nothing. The
//! integration tests' fixture trees are plain files, so one test hook relaxes the file-system
//! check, and only that: with the hidden fixture root `--root DIR` given and
//! [`FIXTURE_HOOK_VAR`]`=1` in the environment, a directory below DIR may be on any file
//! system ([`FileSystems::FixtureTree`]). Without `--root` the variable is ignored; links are
//! refused either way.
//!
//! | file | what it owns |
//! |---|---|
//! | `request.rs` | parsing `--cpus`/`--period`, and [`desired`]: the request made concrete and checked |
//! | `resolve.rs` | [`resolve()`]: CGROUP to a directory, and opening it through [`crate::cgroupfs`] |
//! | `read.rs` | [`read_current`]: the version and current settings, from the control files |
//! | `plan.rs` | [`plan()`] (pure): the writes that differ, in an order the kernel accepts |
//! | `apply.rs` | [`apply()`]: each write, then its read-back |
//! | `error.rs` | [`Error`]: why `set` could not do its job |

use crate::cgroupfs::FileSystems;
use std::path::PathBuf;

mod apply;
mod error;
mod plan;
mod read;
mod request;
mod resolve;
#[cfg(test)]
mod tests;

pub use self::apply::apply;
pub use self::error::Error;
pub use self::plan::plan;
pub use self::read::read_current;
pub use self::request::{desired, parse_cpus, parse_period};
use self::resolve::open_dir;
pub use self::resolve::resolve;
pub use crate::values::parse_micros;

/// The test hook: `1` lets a directory below a `--root` fixture root be a plain tree of files
/// on any file system (see the module docs). Ignored without `--root`.
pub const FIXTURE_HOOK_VAR: &str = "COTENANT_TEST_CGROUP_FIXTURE";

/// The kernel's smallest quota: 1 ms (`min_cfs_quota_period`, which also bounds the quota).
pub const MIN_QUOTA_US: u64 = 1_000;
/// The kernel's shortest period: 1 ms.
pub const MIN_PERIOD_US: u64 = 1_000;
/// The kernel's longest period: 1 s (`max_cfs_quota_period`).
pub const MAX_PERIOD_US: u64 = 1_000_000;

/// v2 `"<quota|max> <period>"`.
const V2_MAX: &str = "cpu.max";
/// v2 burst.
const V2_BURST: &str = "cpu.max.burst";
/// v1 period.
const V1_PERIOD: &str = "cpu.cfs_period_us";
/// v1 quota (`-1` = unlimited).
const V1_QUOTA: &str = "cpu.cfs_quota_us";
/// v1 burst.
const V1_BURST: &str = "cpu.cfs_burst_us";

/// The cgroup version of a directory, told by its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `cpu.cfs_period_us`, `cpu.cfs_quota_us`, `cpu.cfs_burst_us`.
    V1,
    /// `cpu.max`, `cpu.max.burst`.
    V2,
}

impl Version {
    /// `"v1"` or `"v2"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }

    fn burst_file(self) -> &'static str {
        match self {
            Version::V1 => V1_BURST,
            Version::V2 => V2_BURST,
        }
    }
}

/// A cgroup's CPU bandwidth settings, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMax {
    /// Which files hold them.
    pub version: Version,
    /// CPU time per period; `None` = unlimited.
    pub quota_us: Option<u64>,
    /// The period.
    pub period_us: u64,
    /// The burst; `None` when the kernel has no burst file (before Linux 5.14).
    pub burst_us: Option<u64>,
}

/// `--cpus`: a number of CPUs, or no limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cpus {
    /// `max`: unlimited.
    Max,
    /// A positive, finite number of CPUs (quota = CPUs × period).
    Limit(f64),
}

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    /// `--cpus`.
    pub cpus: Cpus,
    /// `--period`; `None` keeps the current one.
    pub period_us: Option<u64>,
    /// `--burst`; `None` leaves it as it is.
    pub burst_us: Option<u64>,
}

/// The target values: a [`Request`] made concrete against the current settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desired {
    /// `None` = unlimited.
    pub quota_us: Option<u64>,
    /// The period.
    pub period_us: u64,
    /// `None` = leave the burst as it is.
    pub burst_us: Option<u64>,
}

/// One file to write: its name in the cgroup directory, the text it holds now and the new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// e.g. `cpu.max`.
    pub file: &'static str,
    /// The current value, as the kernel prints it.
    pub old: String,
    /// The text to write.
    pub new: String,
}

/// A resolved CGROUP: the directory, and the file systems it may be on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The cgroup directory.
    pub dir: PathBuf,
    /// [`FileSystems::CgroupOnly`], unless the fixture hook applies (see [`resolve()`]).
    pub file_systems: FileSystems,
}

/// What `set` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The cgroup directory.
    pub dir: PathBuf,
    /// The writes made, in order (empty: unchanged).
    pub writes: Vec<Write>,
    /// The settings now in place.
    pub now: CpuMax,
}

/// The whole command on a resolved directory: open it (refused unless on a cgroup file system
/// or an allowed fixture, and not a symbolic link), read, decide, write what differs, verify.
pub fn set(target: &Target, request: &Request) -> Result<Applied, Error> {
    let dir = open_dir(target)?;
    let current = read_current(&dir)?;
    let want = desired(&target.dir, &current, request)?;
    let writes = plan(&current, &want);
    apply(&dir, &writes)?;
    let now = CpuMax {
        version: current.version,
        quota_us: want.quota_us,
        period_us: want.period_us,
        burst_us: want.burst_us.or(current.burst_us),
    };
    Ok(Applied { dir: target.dir.clone(), writes, now })
}

//! `cotenant cgroup set`: changes a cgroup's CPU quota, period and burst, whether it is idle,
//! and its CPU weight, writing only the files whose values differ.
//!
//! Seed 001 §III-A2 and §IV-A2 ("no-op updates"): every write of a CPU bandwidth setting, even of
//! the value already there, makes the kernel reset the cgroup's local runtime pools and refill
//! its global pool, which can throttle it; container runtimes and system daemons rewrite
//! unchanged quotas regularly. The seed's fix turns an unchanged update into a no-op inside the
//! kernel; this command does it from user space:
//!
//! 1. [`resolve()`]: the directory, absolute or relative to the cpu controller's mount point
//!    (from `/proc/self/mountinfo`, under a root that tests point at a fixture).
//! 2. [`read_current`] and [`read_scheduling`]: the version (`cpu.max` → v2,
//!    `cpu.cfs_quota_us` → v1), the current quota, period and burst, `cpu.idle` and the weight
//!    (`cpu.shares` v1, `cpu.weight` v2), read through the directory opened by
//!    [`crate::cgroupfs`].
//! 3. [`check`], [`desired`] and [`desired_scheduling`] (pure): the request checked on its own
//!    (something to set, `--idle` not with `--weight`), then made concrete against the current
//!    settings and the kernel's rules (quota ≥ 1 ms, burst ≤ quota, no weight for an idle
//!    cgroup, the files present) before anything is written.
//! 4. [`plan()`] and [`plan_scheduling`] (pure): the writes, none when everything matches, in an
//!    order the kernel accepts at every step (it checks each write against the values then in
//!    place).
//! 5. [`apply()`]: each write, then a read-back that must show the value written.
//!
//! `--idle` and `--weight` are seed 003's remedy for a batch job in a sibling cgroup of a
//! latency-sensitive service (issue 37): the kernel picks a cgroup before a thread, so only the
//! cgroup's own knob ranks the batch job below the service. `--weight N` is in cgroup v2 units
//! (1..=10000, default 100); on v1 it becomes `cpu.shares` as systemd converts `CPUWeight=`
//! ([`weight_to_shares`]).
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
//! | `request.rs` | parsing `--cpus`/`--period`, [`check`], and [`desired`] / [`desired_scheduling`]: the request made concrete and checked |
//! | `weight.rs` | parsing `--weight`, and the v2 weight ↔ v1 shares conversions (pure) |
//! | `resolve.rs` | [`resolve()`]: CGROUP to a directory, and opening it through [`crate::cgroupfs`] |
//! | `read.rs` | [`read_current`], [`read_scheduling`]: the version and current settings, from the control files |
//! | `plan.rs` | [`plan()`], [`plan_scheduling`] (pure): the writes that differ, in an order the kernel accepts |
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
mod weight;

pub use self::apply::apply;
pub use self::error::Error;
pub use self::plan::{plan, plan_scheduling};
pub use self::read::{read_current, read_scheduling};
pub use self::request::{check, desired, desired_scheduling, parse_cpus, parse_period};
use self::resolve::open_dir;
pub use self::resolve::resolve;
pub use self::weight::{
    parse_weight, shares_to_weight, weight_to_shares, SHARES_DEFAULT, SHARES_MAX, SHARES_MIN, WEIGHT_DEFAULT,
    WEIGHT_MAX, WEIGHT_MIN,
};
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
/// v1 and v2: `1` = the cgroup is idle (Linux 5.15+).
const IDLE: &str = "cpu.idle";
/// v1 weight.
const V1_SHARES: &str = "cpu.shares";
/// v2 weight.
const V2_WEIGHT: &str = "cpu.weight";

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

    /// The file that holds the weight: `cpu.shares` (v1) or `cpu.weight` (v2).
    pub fn weight_file(self) -> &'static str {
        match self {
            Version::V1 => V1_SHARES,
            Version::V2 => V2_WEIGHT,
        }
    }

    /// What the weight file holds by default: 1024 shares (v1) or weight 100 (v2). The kernel
    /// also puts this value back when a cgroup stops being idle (`sched_group_set_idle`).
    pub fn default_weight_value(self) -> u64 {
        match self {
            Version::V1 => SHARES_DEFAULT,
            Version::V2 => WEIGHT_DEFAULT,
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

/// A cgroup's CPU scheduling settings, as read: whether it is idle, and its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduling {
    /// Which files hold them.
    pub version: Version,
    /// Whether `cpu.idle` is 1; `None` when the kernel has no `cpu.idle` (before Linux 5.15).
    pub idle: Option<bool>,
    /// The weight file's number as the kernel prints it: `cpu.shares` (v1) or `cpu.weight`
    /// (v2); `None` when the cgroup has no weight file (the v2 root).
    pub weight: Option<u64>,
}

/// What the user asked for. Every field left `None` leaves its files alone.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Request {
    /// `--cpus`; `None` leaves the quota and period as they are.
    pub cpus: Option<Cpus>,
    /// `--period` (only with `cpus`); `None` keeps the current one.
    pub period_us: Option<u64>,
    /// `--burst` (only with `cpus`); `None` leaves it as it is.
    pub burst_us: Option<u64>,
    /// `--idle` (`Some(true)`) or `--no-idle` (`Some(false)`).
    pub idle: Option<bool>,
    /// `--weight`, in cgroup v2 units: [`WEIGHT_MIN`]..=[`WEIGHT_MAX`], default
    /// [`WEIGHT_DEFAULT`] (converted to `cpu.shares` on v1 by [`weight_to_shares`]).
    pub weight: Option<u64>,
}

impl Request {
    /// Whether it asks for nothing at all.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_none() && self.idle.is_none() && self.weight.is_none()
    }
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

/// The target scheduling settings: a [`Request`]'s `--idle`/`--no-idle` and `--weight` made
/// concrete for the cgroup's version; `None` leaves a file alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DesiredScheduling {
    /// `cpu.idle`.
    pub idle: Option<bool>,
    /// The weight file's new number: v1 `cpu.shares` (converted), v2 `cpu.weight`.
    pub weight: Option<u64>,
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
    /// The bandwidth settings now in place.
    pub now: CpuMax,
    /// Idle and weight now, read back after the writes (the kernel changes the weight when a
    /// cgroup enters or leaves idle).
    pub scheduling: Scheduling,
}

impl Applied {
    /// Whether the writes took the cgroup out of idle: the kernel then put its weight back to
    /// the default ([`Version::default_weight_value`]).
    pub fn left_idle(&self) -> bool {
        self.writes.iter().any(|w| w.file == IDLE && w.new == "0" && w.old == "1")
    }
}

/// The whole command on a resolved directory: check the request, open the directory (refused
/// unless on a cgroup file system or an allowed fixture, and not a symbolic link), read, decide,
/// write what differs, verify.
pub fn set(target: &Target, request: &Request) -> Result<Applied, Error> {
    check(request)?;
    let dir = open_dir(target)?;
    let current = read_current(&dir)?;
    let scheduling = read_scheduling(&dir, current.version)?;
    let want = desired(&target.dir, &current, request)?;
    let want_scheduling = desired_scheduling(&target.dir, &scheduling, request)?;
    let mut writes = plan(&current, &want);
    writes.extend(plan_scheduling(&scheduling, &want_scheduling));
    apply(&dir, &writes)?;
    let now = CpuMax {
        version: current.version,
        quota_us: want.quota_us,
        period_us: want.period_us,
        burst_us: want.burst_us.or(current.burst_us),
    };
    // Read back rather than predicted: entering or leaving idle changes the weight too.
    let scheduling = if writes.is_empty() { scheduling } else { read_scheduling(&dir, current.version)? };
    Ok(Applied { dir: target.dir.clone(), writes, now, scheduling })
}

//! `cotenant cgroup set`: changes a cgroup's CPU quota, period and burst, writing only the files
//! whose values differ.
//!
//! Seed 001 §III-A2 and §IV-A2 ("no-op updates"): every write of a CPU bandwidth setting, even of
//! the value already there, makes the kernel reset the cgroup's local runtime pools and refill
//! its global pool, which can throttle it; container runtimes and system daemons rewrite
//! unchanged quotas regularly. The seed's fix turns an unchanged update into a no-op inside the
//! kernel; this command does it from user space:
//!
//! 1. [`resolve`]: the directory, absolute or relative to the cpu controller's mount point
//!    (from `/proc/self/mountinfo`, under a root that tests point at a fixture).
//! 2. [`read_current`]: the version (`cpu.max` → v2, `cpu.cfs_quota_us` → v1) and the current
//!    quota, period and burst, read through the directory opened by [`crate::cgroupfs`].
//! 3. [`desired`] (pure): `--cpus`/`--period`/`--burst` as target values, checked against the
//!    kernel's rules (quota ≥ 1 ms, burst ≤ quota) before anything is written.
//! 4. [`plan`] (pure): the writes, none when everything matches, in an order the kernel accepts
//!    at every step (it checks each write against the values then in place).
//! 5. [`apply`]: each write, then a read-back that must show the value written.
//!
//! All times are in microseconds, as in the files.
//!
//! Every file is read and written through one [`ControlDir`] (issue 34): the directory must be
//! on a cgroup file system, and neither it nor a control file may be a symbolic link, so a
//! wrong or hostile path makes root write nothing. The integration tests' fixture trees are
//! plain files, so one test hook relaxes the file-system check, and only that: with the hidden
//! fixture root `--root DIR` given and [`FIXTURE_HOOK_VAR`]`=1` in the environment, a
//! directory below DIR may be on any file system ([`FileSystems::FixtureTree`]). Without
//! `--root` the variable is ignored; links are refused either way.

use crate::cgroupfs::{os_error, ControlDir, FileSystems};
use cotenant::procfs::{cgroupfs, mountinfo};
use std::{
    fmt, fs, io,
    path::{Component, Path, PathBuf},
};

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
    /// [`FileSystems::CgroupOnly`], unless the fixture hook applies (see [`resolve`]).
    pub file_systems: FileSystems,
}

/// What `set` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The cgroup directory.
    pub dir: PathBuf,
    /// The writes made, in order (empty: unchanged).
    pub writes: Vec<Write>,
    /// The settings now in place.
    pub now: CpuMax,
}

/// Why `set` could not do its job. Each names the directory or file and the values involved.
#[derive(Debug)]
pub enum Error {
    /// A relative CGROUP that climbs out of the mount (`..`).
    OutsideMount(PathBuf),
    /// A relative CGROUP, but the cpu controller's mount cannot be found.
    NoMount(String),
    /// The directory does not exist.
    NoSuchCgroup(PathBuf),
    /// The path exists but is not a directory.
    NotADirectory(PathBuf),
    /// Neither `cpu.max` nor `cpu.cfs_quota_us`.
    NoCpuFiles(PathBuf),
    /// A file did not parse.
    Read { file: PathBuf, why: String },
    /// The directory or a file was refused by [`crate::cgroupfs`] (a symbolic link, not on a
    /// cgroup file system) or could not be opened, read or written; the message names it.
    Access(io::Error),
    /// `--burst` on a kernel without a burst file.
    NoBurstFile(PathBuf),
    /// CPUs × period rounds below the kernel's 1 ms minimum.
    QuotaTooSmall { cpus: f64, period_us: u64 },
    /// `--burst` is more than the quota.
    BurstAboveQuota { burst_us: u64, quota_us: u64 },
    /// No `--burst`, but the cgroup's current burst is more than the new quota.
    CurrentBurstAboveQuota { file: PathBuf, burst_us: u64, quota_us: u64 },
    /// EACCES or EPERM on a write.
    PermissionDenied(PathBuf),
    /// EINVAL on a write.
    Refused { file: PathBuf, value: String },
    /// The read-back shows something else than what was written.
    Mismatch { file: PathBuf, written: String, read: String },
    /// A failure after some writes succeeded: the cgroup is left part-way.
    AfterWrites { done: Vec<String>, error: Box<Error> },
}

impl Error {
    /// Whether the arguments, not the host, are at fault (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::OutsideMount(_)
                | Error::QuotaTooSmall { .. }
                | Error::BurstAboveQuota { .. }
                | Error::CurrentBurstAboveQuota { .. }
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::OutsideMount(p) => {
                write!(
                    f,
                    "{}: a relative cgroup path must stay below the cpu controller's mount",
                    p.display()
                )
            }
            Error::NoMount(why) => write!(f, "cannot resolve a relative cgroup path: {why}"),
            Error::NoSuchCgroup(d) => write!(f, "no such cgroup: {}", d.display()),
            Error::NotADirectory(d) => write!(f, "{} is not a directory", d.display()),
            Error::NoCpuFiles(d) => {
                write!(f, "{} has no cpu controller files ({V2_MAX} or {V1_QUOTA})", d.display())
            }
            Error::Read { file, why } => write!(f, "{}: {why}", file.display()),
            Error::Access(why) => write!(f, "{why}"),
            Error::NoBurstFile(file) => {
                write!(f, "--burst: {} does not exist (CPU burst needs Linux 5.14 or later)", file.display())
            }
            Error::QuotaTooSmall { cpus, period_us } => write!(
                f,
                "--cpus {cpus} with a {period_us} µs period gives a quota of {} µs \
                 ({cpus} × {period_us} = {}), below the kernel's 1 ms minimum ({MIN_QUOTA_US} µs): \
                 raise --cpus or --period",
                (cpus * *period_us as f64).round(),
                // Three decimals at most: 0.005 × 100000 is 500, not 500.00000000000006.
                (cpus * *period_us as f64 * 1e3).round() / 1e3
            ),
            Error::BurstAboveQuota { burst_us, quota_us } => write!(
                f,
                "--burst {burst_us} µs is more than the quota ({quota_us} µs); the kernel requires \
                 burst ≤ quota"
            ),
            Error::CurrentBurstAboveQuota { file, burst_us, quota_us } => write!(
                f,
                "the cgroup's current burst ({burst_us} µs, {}) is more than the new quota \
                 ({quota_us} µs), which the kernel would refuse: give --burst at most {quota_us}us",
                file.display()
            ),
            Error::PermissionDenied(file) => {
                write!(f, "{}: permission denied (needs root, or a delegated cgroup)", file.display())
            }
            Error::Refused { file, value } => write!(
                f,
                "{}: the kernel refused {value:?} (invalid argument: out of range, or a \
                 child/parent cgroup's quota conflicts)",
                file.display()
            ),
            Error::Mismatch { file, written, read } => {
                write!(f, "{}: wrote {written:?} but read back {read:?}", file.display())
            }
            Error::AfterWrites { done, error } => {
                write!(f, "{error} (already written: {})", done.join(", "))
            }
        }
    }
}

impl std::error::Error for Error {}

/// Parses `--cpus`: `max`, or a positive finite number.
pub fn parse_cpus(text: &str) -> Result<Cpus, String> {
    let t = text.trim();
    if t == "max" {
        return Ok(Cpus::Max);
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(Cpus::Limit(v)),
        _ => Err(format!("expected a positive number of CPUs (e.g. 1.5) or `max`, got {text:?}")),
    }
}

pub use crate::values::parse_micros;

/// Parses `--period`: a duration between the kernel's 1 ms and 1 s.
pub fn parse_period(text: &str) -> Result<u64, String> {
    let us = parse_micros(text)?;
    if !(MIN_PERIOD_US..=MAX_PERIOD_US).contains(&us) {
        return Err(format!("the period must be between 1ms and 1s (the kernel's range), got {text}"));
    }
    Ok(us)
}

/// Resolves CGROUP: an absolute path is taken as it is; a relative one is joined to the mount
/// point of the cpu controller's hierarchy (v1 `cpu` if mounted, else the v2 mount), as read
/// from `<root>/proc/self/mountinfo` and placed under `root`.
///
/// The directory must be on a cgroup file system, unless [`FIXTURE_HOOK_VAR`] is `1`, `root`
/// is a fixture root (not `/`) and the directory lies below it, with no `..`.
pub fn resolve(cgroup: &Path, root: &Path) -> Result<Target, Error> {
    let hook = std::env::var_os(FIXTURE_HOOK_VAR).is_some_and(|v| v.as_os_str() == "1");
    resolve_with(cgroup, root, hook)
}

/// [`resolve`], told whether the fixture hook's variable is set.
fn resolve_with(cgroup: &Path, root: &Path, fixture_hook: bool) -> Result<Target, Error> {
    let dir = resolve_dir(cgroup, root)?;
    let in_fixture = fixture_hook
        && root != Path::new("/")
        && dir.starts_with(root)
        && !dir.components().any(|c| c == Component::ParentDir);
    let file_systems = if in_fixture { FileSystems::FixtureTree } else { FileSystems::CgroupOnly };
    Ok(Target { dir, file_systems })
}

/// The directory CGROUP names (see [`resolve`]).
fn resolve_dir(cgroup: &Path, root: &Path) -> Result<PathBuf, Error> {
    if cgroup.is_absolute() {
        return Ok(cgroup.to_owned());
    }
    if cgroup.components().any(|c| c == Component::ParentDir) {
        return Err(Error::OutsideMount(cgroup.to_owned()));
    }
    let file = root.join("proc/self/mountinfo");
    let text = fs::read_to_string(&file)
        .map_err(|e| Error::NoMount(format!("cannot read {}: {e}", file.display())))?;
    let mounts = mountinfo::parse_cgroup_mounts(&text)
        .map_err(|e| Error::NoMount(format!("{}: {e}", file.display())))?;
    let mount = mounts.iter().find(|m| m.has_controller("cpu")).or_else(|| mounts.iter().find(|m| m.is_v2));
    let Some(mount) = mount else {
        return Err(Error::NoMount(format!(
            "no cgroup hierarchy with the cpu controller in {} (give an absolute path)",
            file.display()
        )));
    };
    Ok(root.join(mount.mount_point.trim_start_matches('/')).join(cgroup))
}

/// Opens the target's directory with the checks of [`crate::cgroupfs`].
fn open_dir(target: &Target) -> Result<ControlDir, Error> {
    ControlDir::open_with(&target.dir, target.file_systems).map_err(|e| match os_error(&e) {
        Some(libc::ENOENT) => Error::NoSuchCgroup(target.dir.clone()),
        Some(libc::ENOTDIR) => Error::NotADirectory(target.dir.clone()),
        _ => Error::Access(e),
    })
}

/// Reads a control file; `Ok(None)` when it does not exist.
fn read_file(dir: &ControlDir, name: &str) -> Result<Option<String>, Error> {
    match dir.read(name) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Access(e)),
    }
}

/// Parses the text of a control file.
fn parse_file<T>(
    dir: &ControlDir,
    name: &str,
    text: &str,
    parse: impl FnOnce(&str) -> Result<T, cotenant::procfs::ParseError>,
) -> Result<T, Error> {
    parse(text).map_err(|e| Error::Read { file: dir.path().join(name), why: e.to_string() })
}

/// Reads a file that must exist, and parses it.
fn read_parsed<T>(
    dir: &ControlDir,
    name: &str,
    parse: impl FnOnce(&str) -> Result<T, cotenant::procfs::ParseError>,
) -> Result<T, Error> {
    let text = read_file(dir, name)?.ok_or_else(|| Error::NoSuchCgroup(dir.path().to_owned()))?;
    parse_file(dir, name, &text, parse)
}

/// Reads a burst file, if the kernel has one.
fn read_burst(dir: &ControlDir, name: &'static str) -> Result<Option<u64>, Error> {
    match read_file(dir, name)? {
        None => Ok(None),
        Some(text) => parse_file(dir, name, &text, |t| cgroupfs::parse_number(name, t)).map(Some),
    }
}

/// Reads the current settings of a cgroup directory.
pub fn read_current(dir: &ControlDir) -> Result<CpuMax, Error> {
    if let Some(text) = read_file(dir, V2_MAX)? {
        let (quota_us, period_us) = parse_file(dir, V2_MAX, &text, parse_cpu_max_fields)?;
        Ok(CpuMax { version: Version::V2, quota_us, period_us, burst_us: read_burst(dir, V2_BURST)? })
    } else if let Some(quota) = read_file(dir, V1_QUOTA)? {
        Ok(CpuMax {
            version: Version::V1,
            period_us: read_parsed(dir, V1_PERIOD, cgroupfs::parse_cfs_period)?,
            quota_us: parse_file(dir, V1_QUOTA, &quota, cgroupfs::parse_cfs_quota)?,
            burst_us: read_burst(dir, V1_BURST)?,
        })
    } else {
        Err(Error::NoCpuFiles(dir.path().to_owned()))
    }
}

/// `cpu.max` as (quota, period): unlike [`cgroupfs::parse_cpu_max`], keeps the period of `max`.
fn parse_cpu_max_fields(text: &str) -> Result<(Option<u64>, u64), cotenant::procfs::ParseError> {
    let quota = cgroupfs::parse_cpu_max(text)?;
    // Valid, so two fields and a non-zero period.
    let period = text.split_ascii_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    Ok((quota.map(|q| q.quota_us), period))
}

/// Makes a request concrete: the quota from CPUs × period (the current period unless
/// `--period`), and the kernel's rules checked: quota ≥ 1 ms, burst ≤ quota (`--burst`'s, or
/// the current one when it stays), `--burst` only where a burst file exists. `dir` is only
/// for the messages.
pub fn desired(dir: &Path, current: &CpuMax, request: &Request) -> Result<Desired, Error> {
    let period_us = request.period_us.unwrap_or(current.period_us);
    let quota_us = match request.cpus {
        Cpus::Max => None,
        Cpus::Limit(cpus) => {
            let quota = (cpus * period_us as f64).round();
            if quota < MIN_QUOTA_US as f64 {
                return Err(Error::QuotaTooSmall { cpus, period_us });
            }
            // Saturates for absurd values; the kernel refuses those (EINVAL, explained).
            Some(quota as u64)
        }
    };
    let burst_file = dir.join(current.version.burst_file());
    if request.burst_us.is_some() && current.burst_us.is_none() {
        return Err(Error::NoBurstFile(burst_file));
    }
    if let Some(quota_us) = quota_us {
        match (request.burst_us, current.burst_us) {
            (Some(burst_us), _) if burst_us > quota_us => {
                return Err(Error::BurstAboveQuota { burst_us, quota_us })
            }
            (None, Some(burst_us)) if burst_us > quota_us => {
                return Err(Error::CurrentBurstAboveQuota { file: burst_file, burst_us, quota_us })
            }
            _ => {}
        }
    }
    Ok(Desired { quota_us, period_us, burst_us: request.burst_us })
}

/// The writes that take `current` to `desired`: none when everything matches (seed 001
/// §IV-A2), otherwise one per differing file.
///
/// v2: `cpu.max` (quota and period together), `cpu.max.burst`. v1: `cpu.cfs_period_us`,
/// `cpu.cfs_quota_us`, `cpu.cfs_burst_us`. The kernel checks each write against the values
/// in place at that moment, so the order matters:
///
/// - the burst goes last, unless the current burst exceeds the new quota (the quota write
///   would be refused): then first. Either way burst ≤ quota holds at every step, given
///   burst ≤ quota before and after.
/// - v1: the period goes before the quota, unless the period shrinks: then after. The quota
///   per period in between is then never above both the old and the new one (v1 refuses a
///   child cgroup more CPUs than its parent).
///
/// A burst in `desired` assumes the burst file exists ([`desired`] checks it).
pub fn plan(current: &CpuMax, desired: &Desired) -> Vec<Write> {
    let mut core = Vec::new();
    let quota_differs = current.quota_us != desired.quota_us;
    let period_differs = current.period_us != desired.period_us;
    match current.version {
        Version::V2 => {
            if quota_differs || period_differs {
                core.push(Write {
                    file: V2_MAX,
                    old: v2_max_text(current.quota_us, current.period_us),
                    new: v2_max_text(desired.quota_us, desired.period_us),
                });
            }
        }
        Version::V1 => {
            let period = period_differs.then(|| Write {
                file: V1_PERIOD,
                old: current.period_us.to_string(),
                new: desired.period_us.to_string(),
            });
            let quota = quota_differs.then(|| Write {
                file: V1_QUOTA,
                old: v1_quota_text(current.quota_us),
                new: v1_quota_text(desired.quota_us),
            });
            if desired.period_us < current.period_us {
                core.extend(quota.into_iter().chain(period));
            } else {
                core.extend(period.into_iter().chain(quota));
            }
        }
    }
    let burst = desired.burst_us.filter(|&b| current.burst_us != Some(b)).map(|b| Write {
        file: current.version.burst_file(),
        old: current.burst_us.map_or_else(String::new, |o| o.to_string()),
        new: b.to_string(),
    });
    let Some(burst) = burst else { return core };
    let old_burst = current.burst_us.unwrap_or(0);
    let quota_write_sees_big_burst = quota_differs && desired.quota_us.is_some_and(|q| old_burst > q);
    if quota_write_sees_big_burst {
        core.insert(0, burst);
    } else {
        core.push(burst);
    }
    core
}

fn v2_max_text(quota_us: Option<u64>, period_us: u64) -> String {
    format!("{} {period_us}", quota_us.map_or_else(|| "max".to_owned(), |q| q.to_string()))
}

fn v1_quota_text(quota_us: Option<u64>) -> String {
    quota_us.map_or_else(|| "-1".to_owned(), |q| q.to_string())
}

/// Makes the writes in order, each followed by a read-back that must show the value written
/// (compared field by field, ignoring white space).
pub fn apply(dir: &ControlDir, writes: &[Write]) -> Result<(), Error> {
    for (i, w) in writes.iter().enumerate() {
        let result = write_one(dir, w).and_then(|()| read_back(dir, w));
        if let Err(error) = result {
            if i == 0 {
                return Err(error);
            }
            let done = writes[..i].iter().map(|d| format!("{} {:?}", d.file, d.new)).collect();
            return Err(Error::AfterWrites { done, error: Box::new(error) });
        }
    }
    Ok(())
}

/// One write, as one `write(2)` of the whole text to the existing file (never created, never
/// through a symbolic link).
fn write_one(dir: &ControlDir, w: &Write) -> Result<(), Error> {
    let file = dir.path().join(w.file);
    dir.write(w.file, &w.new).map_err(|why| match os_error(&why) {
        Some(libc::EACCES | libc::EPERM) => Error::PermissionDenied(file),
        Some(libc::EINVAL) => Error::Refused { file, value: w.new.clone() },
        Some(libc::ENOENT) => Error::NoSuchCgroup(dir.path().to_owned()),
        _ => Error::Access(why),
    })
}

fn read_back(dir: &ControlDir, w: &Write) -> Result<(), Error> {
    let read = read_file(dir, w.file)?.ok_or_else(|| Error::NoSuchCgroup(dir.path().to_owned()))?;
    if read.split_ascii_whitespace().eq(w.new.split_ascii_whitespace()) {
        Ok(())
    } else {
        let file = dir.path().join(w.file);
        Err(Error::Mismatch { file, written: w.new.clone(), read: read.trim().to_owned() })
    }
}

/// The whole command on a resolved directory: open it (refused unless on a cgroup file system
/// or an allowed fixture, and not a symbolic link), read, decide, write what differs, verify.
pub fn set(target: &Target, request: &Request) -> Result<Outcome, Error> {
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
    Ok(Outcome { dir: target.dir.clone(), writes, now })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroupfs::testing::PrivateDir;

    fn v1(quota: Option<u64>, period: u64, burst: Option<u64>) -> CpuMax {
        CpuMax { version: Version::V1, quota_us: quota, period_us: period, burst_us: burst }
    }

    fn v2(quota: Option<u64>, period: u64, burst: Option<u64>) -> CpuMax {
        CpuMax { version: Version::V2, ..v1(quota, period, burst) }
    }

    fn want(quota: Option<u64>, period: u64, burst: Option<u64>) -> Desired {
        Desired { quota_us: quota, period_us: period, burst_us: burst }
    }

    fn files(writes: &[Write]) -> Vec<(&str, &str)> {
        writes.iter().map(|w| (w.file, w.new.as_str())).collect()
    }

    fn request(cpus: Cpus, period: Option<u64>, burst: Option<u64>) -> Request {
        Request { cpus, period_us: period, burst_us: burst }
    }

    #[test]
    fn plan_writes_nothing_when_everything_matches() {
        for cur in
            [v1(Some(150_000), 100_000, Some(0)), v2(None, 100_000, None), v2(Some(5_000), 10_000, Some(0))]
        {
            let d = want(cur.quota_us, cur.period_us, cur.burst_us);
            assert!(plan(&cur, &d).is_empty(), "{cur:?}");
            // Leaving the burst alone is also no write.
            assert!(plan(&cur, &Desired { burst_us: None, ..d }).is_empty());
        }
    }

    #[test]
    fn plan_v2_writes_cpu_max_once_for_quota_or_period() {
        let cur = v2(None, 100_000, Some(0));
        let w = plan(&cur, &want(Some(150_000), 100_000, None));
        assert_eq!(w, vec![Write { file: "cpu.max", old: "max 100000".into(), new: "150000 100000".into() }]);
        let w = plan(&cur, &want(None, 50_000, None));
        assert_eq!(files(&w), [("cpu.max", "max 50000")]);
        let w = plan(&cur, &want(Some(75_000), 50_000, Some(20_000)));
        assert_eq!(files(&w), [("cpu.max", "75000 50000"), ("cpu.max.burst", "20000")]);
        let w = plan(&cur, &want(None, 100_000, Some(20_000)));
        assert_eq!(files(&w), [("cpu.max.burst", "20000")]);
        assert_eq!(w[0].old, "0");
    }

    #[test]
    fn plan_v1_writes_only_differing_files() {
        let cur = v1(None, 100_000, Some(0));
        assert_eq!(files(&plan(&cur, &want(Some(150_000), 100_000, None))), [("cpu.cfs_quota_us", "150000")]);
        assert_eq!(files(&plan(&cur, &want(None, 200_000, Some(0)))), [("cpu.cfs_period_us", "200000")]);
        let back = plan(&v1(Some(150_000), 100_000, None), &want(None, 100_000, None));
        assert_eq!(back, vec![Write { file: "cpu.cfs_quota_us", old: "150000".into(), new: "-1".into() }]);
    }

    #[test]
    fn plan_v1_orders_period_and_quota_so_the_ratio_never_overshoots() {
        // Period grows: period first (150000/200000 in between, below both).
        let cur = v1(Some(150_000), 100_000, None);
        assert_eq!(
            files(&plan(&cur, &want(Some(300_000), 200_000, None))),
            [("cpu.cfs_period_us", "200000"), ("cpu.cfs_quota_us", "300000")]
        );
        // Period shrinks: quota first (75000/100000 in between, not 150000/50000).
        assert_eq!(
            files(&plan(&cur, &want(Some(75_000), 50_000, None))),
            [("cpu.cfs_quota_us", "75000"), ("cpu.cfs_period_us", "50000")]
        );
    }

    #[test]
    fn plan_puts_the_burst_first_only_when_the_old_burst_exceeds_the_new_quota() {
        // Lowering the quota below the old burst: the burst must shrink first.
        let cur = v1(Some(100_000), 100_000, Some(50_000));
        assert_eq!(
            files(&plan(&cur, &want(Some(30_000), 100_000, Some(10_000)))),
            [("cpu.cfs_burst_us", "10000"), ("cpu.cfs_quota_us", "30000")]
        );
        // Raising both: the quota first, so the new burst fits.
        let cur = v2(Some(50_000), 100_000, Some(10_000));
        assert_eq!(
            files(&plan(&cur, &want(Some(200_000), 100_000, Some(150_000)))),
            [("cpu.max", "200000 100000"), ("cpu.max.burst", "150000")]
        );
    }

    #[test]
    fn desired_uses_the_current_period_and_rounds_the_quota() {
        let cur = v2(None, 100_000, Some(0));
        let d = desired(Path::new("/cg"), &cur, &request(Cpus::Limit(1.5), None, None)).unwrap();
        assert_eq!(d, want(Some(150_000), 100_000, None));
        let d =
            desired(Path::new("/cg"), &cur, &request(Cpus::Limit(0.333_333_3), Some(10_000), None)).unwrap();
        assert_eq!(d.quota_us, Some(3_333));
        let d = desired(Path::new("/cg"), &cur, &request(Cpus::Max, Some(50_000), Some(0))).unwrap();
        assert_eq!(d, want(None, 50_000, Some(0)));
    }

    #[test]
    fn desired_enforces_the_kernel_rules() {
        let dir = Path::new("/cg");
        let cur = v1(None, 100_000, Some(0));
        let e = desired(dir, &cur, &request(Cpus::Limit(0.005), None, None)).unwrap_err();
        assert!(matches!(e, Error::QuotaTooSmall { .. }) && e.is_usage());
        let text = e.to_string();
        assert!(text.contains("500 µs") && text.contains("1 ms minimum"), "{text}");
        // 0.00999 × 100000 = 999 µs is too little; 0.01 → 1000 µs is the minimum.
        assert!(desired(dir, &cur, &request(Cpus::Limit(0.00999), None, None)).is_err());
        assert_eq!(
            desired(dir, &cur, &request(Cpus::Limit(0.01), None, None)).unwrap().quota_us,
            Some(1_000)
        );
        let e = desired(dir, &cur, &request(Cpus::Limit(1.0), None, Some(200_000))).unwrap_err();
        assert!(matches!(e, Error::BurstAboveQuota { burst_us: 200_000, quota_us: 100_000 }), "{e}");
        assert!(desired(dir, &cur, &request(Cpus::Limit(1.0), None, Some(100_000))).is_ok());
        // An unlimited quota bounds no burst.
        assert!(desired(dir, &cur, &request(Cpus::Max, None, Some(200_000))).is_ok());
        // The current burst must fit under a new, smaller quota.
        let big = v1(None, 100_000, Some(80_000));
        let e = desired(dir, &big, &request(Cpus::Limit(0.5), None, None)).unwrap_err();
        assert!(matches!(e, Error::CurrentBurstAboveQuota { .. }), "{e}");
        assert!(e.to_string().contains("/cg/cpu.cfs_burst_us"), "{e}");
        // No burst file: --burst is an error, no --burst is fine.
        let old = v2(None, 100_000, None);
        let e = desired(dir, &old, &request(Cpus::Max, None, Some(0))).unwrap_err();
        assert!(matches!(e, Error::NoBurstFile(_)) && e.to_string().contains("cpu.max.burst"), "{e}");
        assert!(desired(dir, &old, &request(Cpus::Limit(2.0), None, None)).is_ok());
    }

    #[test]
    fn parse_cpus_accepts_max_and_positive_numbers() {
        assert_eq!(parse_cpus("max"), Ok(Cpus::Max));
        assert_eq!(parse_cpus("1.5"), Ok(Cpus::Limit(1.5)));
        assert_eq!(parse_cpus("0.01"), Ok(Cpus::Limit(0.01)));
        for bad in ["0", "-1", "NaN", "inf", "", "two", "-0"] {
            let e = parse_cpus(bad).unwrap_err();
            assert!(e.contains("positive number of CPUs"), "{bad}: {e}");
        }
    }

    #[test]
    fn parse_micros_and_period_take_units() {
        assert_eq!(parse_micros("100ms"), Ok(100_000));
        assert_eq!(parse_micros("0.1s"), Ok(100_000));
        assert_eq!(parse_micros("50000us"), Ok(50_000));
        assert_eq!(parse_micros("50000µs"), Ok(50_000));
        assert_eq!(parse_micros("0ms"), Ok(0));
        assert_eq!(parse_micros("0"), Ok(0), "zero needs no unit");
        assert!(parse_micros("5").unwrap_err().contains("needs a unit"));
        assert_eq!(parse_micros("1.5ms"), Ok(1_500));
        for bad in ["100", "ms", "-1ms", "x s", "NaNs", "1e400s"] {
            assert!(parse_micros(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_period("1ms"), Ok(1_000));
        assert_eq!(parse_period("1s"), Ok(1_000_000));
        for bad in ["999us", "2s", "0s", "1.001s"] {
            let e = parse_period(bad).unwrap_err();
            assert!(e.contains("period") && e.contains("1ms and 1s"), "{bad}: {e}");
        }
    }

    #[test]
    fn resolve_joins_relative_paths_to_the_cpu_mount() {
        let tmp = PrivateDir::new("cgroup-set-unit");
        let root = &tmp.0;
        fs::create_dir_all(root.join("proc/self")).unwrap();
        let resolve = |cgroup: &str| resolve_with(Path::new(cgroup), root, false).map(|t| t.dir);
        let hybrid = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        fs::write(root.join("proc/self/mountinfo"), hybrid).unwrap();
        assert_eq!(resolve("a/b").unwrap(), root.join("sys/fs/cgroup/cpu,cpuacct/a/b"));
        let v2_only = "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        fs::write(root.join("proc/self/mountinfo"), v2_only).unwrap();
        assert_eq!(resolve("x").unwrap(), root.join("sys/fs/cgroup/x"));
        fs::write(root.join("proc/self/mountinfo"), "").unwrap();
        assert!(matches!(resolve("x"), Err(Error::NoMount(_))));
        assert_eq!(resolve("/abs/cg").unwrap(), Path::new("/abs/cg"));
        assert!(matches!(resolve("../x"), Err(Error::OutsideMount(_))));
    }

    #[test]
    fn the_fixture_hook_applies_only_below_a_given_root() {
        let root = Path::new("/fixtures/case");
        let rule = |cgroup: &str, root: &Path, hook: bool| {
            resolve_with(Path::new(cgroup), root, hook).unwrap().file_systems
        };
        assert_eq!(rule("/fixtures/case/cg", root, true), FileSystems::FixtureTree);
        assert_eq!(rule("/fixtures/case", root, true), FileSystems::FixtureTree);
        // The variable without a fixture root, or a root without the variable, relaxes nothing.
        assert_eq!(rule("/fixtures/case/cg", root, false), FileSystems::CgroupOnly);
        assert_eq!(rule("/fixtures/case/cg", Path::new("/"), true), FileSystems::CgroupOnly);
        // Nor does it reach outside the root, or climb out of it.
        assert_eq!(rule("/proc/sys/kernel", root, true), FileSystems::CgroupOnly);
        assert_eq!(rule("/fixtures/cases/cg", root, true), FileSystems::CgroupOnly);
        assert_eq!(rule("/fixtures/case/../../proc/sys/kernel", root, true), FileSystems::CgroupOnly);
    }

    #[test]
    fn set_writes_a_plain_tree_only_as_a_fixture() {
        let tmp = PrivateDir::new("cgroup-set-unit");
        fs::write(tmp.0.join("cpu.cfs_quota_us"), "-1\n").unwrap();
        fs::write(tmp.0.join("cpu.cfs_period_us"), "100000\n").unwrap();
        let half = request(Cpus::Limit(0.5), None, None);
        let real = Target { dir: tmp.0.clone(), file_systems: FileSystems::CgroupOnly };
        let e = set(&real, &half).unwrap_err();
        assert!(matches!(e, Error::Access(_)) && !e.is_usage(), "{e}");
        let expected = format!("{} is not on a cgroup file system (statfs type", tmp.0.display());
        assert!(e.to_string().starts_with(&expected), "{e}");
        assert_eq!(fs::read_to_string(tmp.0.join("cpu.cfs_quota_us")).unwrap(), "-1\n");

        let fixture = Target { file_systems: FileSystems::FixtureTree, ..real };
        let done = set(&fixture, &half).unwrap();
        assert_eq!(files(&done.writes), [("cpu.cfs_quota_us", "50000")]);
        assert_eq!(fs::read_to_string(tmp.0.join("cpu.cfs_quota_us")).unwrap(), "50000");
    }

    #[test]
    fn set_refuses_a_symlinked_control_file_even_in_a_fixture() {
        let tmp = PrivateDir::new("cgroup-set-unit");
        let cg = tmp.0.join("cg");
        fs::create_dir(&cg).unwrap();
        // A valid quota: only the link can stop the write (issue 34: a link to pid_max).
        let target = tmp.0.join("pid_max");
        fs::write(&target, "-1\n").unwrap();
        std::os::unix::fs::symlink(&target, cg.join("cpu.cfs_quota_us")).unwrap();
        fs::write(cg.join("cpu.cfs_period_us"), "100000\n").unwrap();
        let fixture = Target { dir: cg.clone(), file_systems: FileSystems::FixtureTree };
        let e = set(&fixture, &request(Cpus::Limit(0.5), None, None)).unwrap_err();
        assert!(matches!(&e, Error::Access(why) if os_error(why) == Some(libc::ELOOP)), "{e}");
        let expected = format!("{} is a symbolic link", cg.join("cpu.cfs_quota_us").display());
        assert!(e.to_string().starts_with(&expected), "{e}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "-1\n", "the link's target was written");
    }
}

//! `Probe`: every file `cpus` reads, under a root that tests replace with a fixture tree.
//!
//! Detection happens in two phases:
//! 1. **Resolve** (once): parse `/proc/<pid>/cgroup` and `/proc/self/mountinfo`, decide which
//!    hierarchy holds the cpu and cpuset controllers, walk the ancestors, and record the exact
//!    files to read in a [`Plan`].
//! 2. **Read** (at detection and on every [`Limit::refresh`]): read only the numbers those
//!    files hold (online CPUs, affinity, cpuset, each level's quota). The files are opened once,
//!    at resolve, and re-read with `pread` at offset 0: the kernel regenerates a cgroup or sysfs
//!    file's text on every read from offset 0 (checked on a live cgroup by the `refresh` test in
//!    `cotenant-cli/tests/real_cgroups.rs`), and skipping the path lookup, open and close makes a
//!    refresh several times cheaper (measured in RESULTS.md). A file missing at resolve stays
//!    absent until the next detection.
//!
//! For another process, membership comes from `/proc/<pid>/cgroup` but mounts from *our own*
//! `/proc/self/mountinfo`: the kernel shows the other process's cgroup paths relative to the
//! reader's cgroup namespace, and the mount points must be ones the reader can open.
//!
//! Outside Linux (`crate::sys`'s fallback) the running system has none of these files: the
//! system probe answers with `std::thread::available_parallelism` instead (a plan that re-reads
//! only that count, see [`parallelism_limit`]). A probe with a root still reads the copy of a
//! Linux system's files under it, on any system.

use super::{derive, hierarchy, hierarchy::CgroupVersion, Error, Limit, Origin, QuotaLevel, Source};
use crate::procfs::{
    cgroup, cgroupfs, cgroupfs::Quota, cpulist, cpulist::CpuSet, mountinfo, status, ParseError,
};
use std::{
    fs::File,
    io,
    path::{Path, PathBuf},
    sync::Arc,
};

/// Reads the sources of a [`Limit`] from the system, or from a copy of its files.
///
/// ```
/// // Tests point a probe at a fixture tree holding `proc/` and `sys/`.
/// let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/cpus/v1-quota-1.5");
/// let budget = cotenant::cpus::Probe::with_root(root).detect()?;
/// assert_eq!(budget.limit(), 1.5);
/// assert_eq!(budget.threads(cotenant::cpus::Rounding::Floor), 1);
/// # Ok::<(), cotenant::cpus::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Probe {
    root: PathBuf,
}

impl Probe {
    /// The running system: `/proc` and `/sys` as they are. On systems other than Linux, where
    /// there are none, its budget is `std::thread::available_parallelism`'s count (see the
    /// [module documentation](super), "Systems other than Linux").
    pub fn system() -> Self {
        Probe { root: PathBuf::from("/") }
    }

    /// A copy of a system's files under `root`: `/proc` is read from `root/proc`, `/sys` (and so
    /// `/sys/fs/cgroup` and every cgroup mount point named in mountinfo) from under `root`.
    /// Affinity is then read from `Cpus_allowed_list` rather than the system call.
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        Probe { root: root.into() }
    }

    /// The budget of the calling process.
    pub fn detect(&self) -> Result<Limit, Error> {
        self.detect_target(None)
    }

    /// The budget of process `pid`.
    pub fn detect_pid(&self, pid: u32) -> Result<Limit, Error> {
        self.detect_target(Some(pid))
    }

    fn is_system(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Maps a path as the host names it onto this probe's root.
    fn path(&self, host_path: &str) -> PathBuf {
        self.root.join(host_path.trim_start_matches('/'))
    }

    fn detect_target(&self, pid: Option<u32>) -> Result<Limit, Error> {
        if crate::sys::FALLBACK && self.is_system() {
            return parallelism_limit(pid);
        }
        let proc_dir = match pid {
            None => self.path("/proc/self"),
            Some(pid) => {
                let dir = self.path(&format!("/proc/{pid}"));
                if !dir.is_dir() {
                    return Err(Error::NoSuchProcess { pid, path: dir });
                }
                dir
            }
        };
        // Without these two files no cgroup can be found; the reason goes into the absent
        // sources. For another process a vanished cgroup file means the process exited.
        let mut unreadable = Vec::new();
        let memberships = match parse_optional(&proc_dir.join("cgroup"), cgroup::parse)? {
            Ok(m) => m,
            Err(_) if pid.is_some() && !proc_dir.is_dir() => {
                return Err(Error::NoSuchProcess { pid: pid.unwrap_or_default(), path: proc_dir });
            }
            Err(reason) => {
                unreadable.push(reason);
                Vec::new()
            }
        };
        let mounts = match parse_optional(&self.path("/proc/self/mountinfo"), mountinfo::parse_cgroup_mounts)?
        {
            Ok(m) => m,
            Err(reason) => {
                unreadable.push(reason);
                Vec::new()
            }
        };
        let explain = |reason: String| match unreadable.is_empty() {
            true => reason,
            false => format!("{reason} ({})", unreadable.join("; ")),
        };

        let affinity = if pid.is_none() && self.is_system() {
            AffinityFrom::Syscall
        } else {
            AffinityFrom::Status(Handle::open(proc_dir.join("status"))?)
        };
        let cpu = self.locate_cpu(&memberships, &mounts)?.map_err(explain);
        let cpuset = self.locate_cpuset(&memberships, &mounts)?.map_err(explain);

        let (quota_levels, levels, weight, quota_absent) = match &cpu {
            Ok(place) => {
                let levels = place.levels();
                let files = levels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| self.level_files(place.version, &l.dir, i + 1 == levels.len()))
                    .collect::<Result<_, _>>()?;
                let weight = match place.version {
                    CgroupVersion::V1 => self.read_number(&place.leaf_dir(), "cpu.shares")?,
                    CgroupVersion::V2 => self.read_number(&place.leaf_dir(), "cpu.weight")?,
                };
                (files, levels, weight, None)
            }
            Err(reason) => (Vec::new(), Vec::new(), absent(reason), Some(reason.clone())),
        };

        let plan = Plan {
            online: OnlineFrom::File(Handle::open(self.path("/sys/devices/system/cpu/online"))?),
            affinity,
            cpuset,
            cpu_version: cpu.as_ref().ok().map(|p| p.version),
            quota_levels,
        };
        let limits = plan.read_limits()?;
        let derived = derive(&limits.online, &limits.cpuset, &limits.affinity, &limits.quotas)?;

        let mut quotas = Vec::with_capacity(levels.len());
        for ((level, files), quota) in levels.iter().zip(&plan.quota_levels).zip(limits.quotas) {
            let burst_file = match files.version {
                CgroupVersion::V1 => "cpu.cfs_burst_us",
                CgroupVersion::V2 => "cpu.max.burst",
            };
            quotas.push(QuotaLevel {
                cgroup: level.cgroup.clone(),
                version: files.version,
                quota,
                burst: self.read_number(&level.dir, burst_file)?,
            });
        }

        Ok(Limit {
            plan,
            online: limits.online,
            affinity: limits.affinity,
            cpuset: limits.cpuset,
            quotas,
            quota_absent,
            weight,
            derived,
        })
    }

    /// The cpu controller: v1 wins when the process has a v1 cpu hierarchy (hybrid hosts);
    /// otherwise v2, if the cpu controller is enabled there.
    fn locate_cpu(
        &self,
        memberships: &[cgroup::Membership],
        mounts: &[mountinfo::CgroupMount],
    ) -> Result<Result<hierarchy::ControllerPlace, String>, Error> {
        let v1 = match hierarchy::locate_v1("cpu", memberships, mounts) {
            Ok(place) => return Ok(Ok(place)),
            Err(reason) => reason,
        };
        let v2 = match hierarchy::locate_v2(memberships, mounts) {
            Ok(place) => match self.v2_lacks(&place, "cpu")? {
                None => return Ok(Ok(place)),
                Some(reason) => reason,
            },
            Err(reason) => reason,
        };
        Ok(Err(format!("no CPU quota: {v1}, and {v2}")))
    }

    /// The cpuset file: v1 `cpuset.effective_cpus` of the process's cgroup, or v2
    /// `cpuset.cpus.effective` of the nearest level that has the controller enabled.
    fn locate_cpuset(
        &self,
        memberships: &[cgroup::Membership],
        mounts: &[mountinfo::CgroupMount],
    ) -> Result<Result<CpusetFile, String>, Error> {
        let v1 = match hierarchy::locate_v1("cpuset", memberships, mounts) {
            Ok(place) => {
                let dir = place.leaf_dir();
                // `cpuset.effective_cpus` exists since Linux 4.x; older kernels only have `cpus`.
                let mut reasons = Vec::new();
                for name in ["cpuset.effective_cpus", "cpuset.cpus"] {
                    let file = Handle::open(self.path(&format!("{dir}/{name}")))?;
                    match &file.file {
                        Ok(_) => return Ok(Ok(CpusetFile { file, version: CgroupVersion::V1 })),
                        Err(reason) => reasons.push(reason.clone()),
                    }
                }
                reasons.join(", and ")
            }
            Err(reason) => reason,
        };
        let v2 = match hierarchy::locate_v2(memberships, mounts) {
            Ok(place) => match self.v2_lacks(&place, "cpuset")? {
                Some(reason) => reason,
                None => {
                    for level in place.levels() {
                        let file = Handle::open(self.path(&format!("{}/cpuset.cpus.effective", level.dir)))?;
                        if file.file.is_ok() {
                            return Ok(Ok(CpusetFile { file, version: CgroupVersion::V2 }));
                        }
                    }
                    format!("no cpuset.cpus.effective from {} up to its mount root", place.leaf_dir())
                }
            },
            Err(reason) => reason,
        };
        Ok(Err(format!("no cpuset: {v1}, and {v2}")))
    }

    /// `Some(reason)` when the v2 hierarchy's `cgroup.controllers` (at the mount root) does not
    /// list `controller`; `None` when it does, or when the file is missing (then each level's
    /// files are tried, and those that are missing are recorded as absent).
    fn v2_lacks(
        &self,
        place: &hierarchy::ControllerPlace,
        controller: &str,
    ) -> Result<Option<String>, Error> {
        let file = self.path(&format!("{}/cgroup.controllers", place.mount.mount_point));
        match read_text(&file)? {
            FileText::Missing(_) => Ok(None),
            FileText::Text(t) if t.split_ascii_whitespace().any(|c| c == controller) => Ok(None),
            FileText::Text(t) => Ok(Some(format!(
                "the cgroup v2 hierarchy has no {controller} controller ({} lists {:?})",
                file.display(),
                t.trim()
            ))),
        }
    }

    fn level_files(
        &self,
        version: CgroupVersion,
        dir: &str,
        is_mount_root: bool,
    ) -> Result<LevelFiles, Error> {
        let open = |name: &str| Handle::open(self.path(&format!("{dir}/{name}")));
        Ok(match version {
            CgroupVersion::V1 => LevelFiles {
                version,
                quota: open("cpu.cfs_quota_us")?,
                period: Some(open("cpu.cfs_period_us")?),
            },
            CgroupVersion::V2 => {
                let mut quota = open("cpu.max")?;
                if let (true, Err(reason)) = (is_mount_root, &mut quota.file) {
                    // The common case, not a problem: say so rather than "does not exist".
                    *reason = "the root of a cgroup v2 tree has no cpu.max (no quota)".to_owned();
                }
                LevelFiles { version, quota, period: None }
            }
        })
    }

    fn read_number(&self, dir: &str, name: &'static str) -> Result<Source<u64>, Error> {
        let path = self.path(&format!("{dir}/{name}"));
        read_source(&Handle::open(path)?, |t| cgroupfs::parse_number(name, t))
    }
}

/// The files a budget re-reads on refresh, resolved once.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    online: OnlineFrom,
    affinity: AffinityFrom,
    cpuset: Result<CpusetFile, String>,
    cpu_version: Option<CgroupVersion>,
    quota_levels: Vec<LevelFiles>,
}

/// Where the online CPUs are read from.
#[derive(Debug, Clone)]
enum OnlineFrom {
    /// `/sys/devices/system/cpu/online`.
    File(Handle),
    /// `std::thread::available_parallelism`'s count, as CPUs `0..n` (the fallback of systems
    /// other than Linux, where no file is read).
    Parallelism,
}

#[derive(Debug, Clone)]
enum AffinityFrom {
    Syscall,
    Status(Handle),
    /// Not read, for this reason (the fallback of systems other than Linux).
    Unread(String),
}

#[derive(Debug, Clone)]
struct CpusetFile {
    file: Handle,
    version: CgroupVersion,
}

#[derive(Debug, Clone)]
struct LevelFiles {
    version: CgroupVersion,
    /// v1 `cpu.cfs_quota_us` or v2 `cpu.max`.
    quota: Handle,
    /// v1 `cpu.cfs_period_us`; v2 keeps the period in `cpu.max`.
    period: Option<Handle>,
}

/// The numbers a refresh reads.
pub(super) struct Limits {
    pub online: Source<CpuSet>,
    pub affinity: Source<CpuSet>,
    pub cpuset: Source<CpuSet>,
    pub quotas: Vec<Source<Option<Quota>>>,
}

impl Plan {
    pub(super) fn read_limits(&self) -> Result<Limits, Error> {
        let online = match &self.online {
            OnlineFrom::File(file) => read_source(file, cpulist::parse)?,
            OnlineFrom::Parallelism => parallelism_source()?,
        };
        let affinity = match &self.affinity {
            AffinityFrom::Syscall => match own_affinity() {
                Ok(set) => Source::Present { origin: Origin::Syscall("sched_getaffinity(2)"), value: set },
                Err(error) => return Err(Error::Syscall { name: "sched_getaffinity(2)", error }),
            },
            AffinityFrom::Status(file) => match read_source(file, status::parse_cpus_allowed)? {
                Source::Present { origin, value: Some(set) } => Source::Present { origin, value: set },
                Source::Present { .. } => {
                    absent(&format!("{} has no Cpus_allowed_list", file.path.display()))
                }
                Source::Absent { reason } => Source::Absent { reason },
            },
            AffinityFrom::Unread(reason) => absent(reason),
        };
        let cpuset = match &self.cpuset {
            Ok(c) => read_source(&c.file, cpulist::parse)?,
            Err(reason) => absent(reason),
        };
        let quotas = self.quota_levels.iter().map(read_quota).collect::<Result<_, _>>()?;
        Ok(Limits { online, affinity, cpuset, quotas })
    }

    pub(super) fn cgroup_version(&self) -> &'static str {
        let cpuset = self.cpuset.as_ref().ok().map(|c| c.version);
        match (self.cpu_version, cpuset) {
            (None, None) => "none",
            (Some(a), Some(b)) if a != b => "hybrid",
            (Some(v), _) | (None, Some(v)) => v.as_str(),
        }
    }

    /// The plan of the fallback for systems other than Linux: the online CPUs are
    /// `std::thread::available_parallelism`'s count, every other source is absent with the
    /// reason.
    fn parallelism() -> Self {
        Plan {
            online: OnlineFrom::Parallelism,
            affinity: AffinityFrom::Unread(fallback_reason("thread affinity masks are")),
            cpuset: Err(fallback_reason("cgroup cpusets are")),
            cpu_version: None,
            quota_levels: Vec::new(),
        }
    }

    #[cfg(test)]
    pub(super) fn empty_for_tests() -> Self {
        Plan {
            online: OnlineFrom::File(Handle { path: PathBuf::new(), file: Err(String::new()) }),
            affinity: AffinityFrom::Syscall,
            cpuset: Err(String::new()),
            cpu_version: None,
            quota_levels: Vec::new(),
        }
    }
}

fn read_quota(files: &LevelFiles) -> Result<Source<Option<Quota>>, Error> {
    let Some(period_file) = &files.period else {
        return read_source(&files.quota, cgroupfs::parse_cpu_max);
    };
    let quota_us = match read_source(&files.quota, cgroupfs::parse_cfs_quota)? {
        Source::Present { value: Some(q), .. } => q,
        // Unlimited or absent: the period does not matter, so it is not read (refresh is hot).
        Source::Present { origin, value: None } => return Ok(Source::Present { origin, value: None }),
        Source::Absent { reason } => return Ok(Source::Absent { reason }),
    };
    Ok(match read_source(period_file, cgroupfs::parse_cfs_period)? {
        Source::Present { value: period_us, .. } => Source::Present {
            origin: Origin::File(files.quota.path.clone()),
            value: Some(Quota { quota_us, period_us }),
        },
        Source::Absent { reason } => Source::Absent { reason },
    })
}

fn absent<T>(reason: &str) -> Source<T> {
    Source::Absent { reason: reason.to_owned() }
}

/// A file's text, or why it is missing.
enum FileText {
    Text(String),
    Missing(String),
}

/// A file opened once and re-read from offset 0 on every read, or why it could not be opened.
#[derive(Debug, Clone)]
struct Handle {
    path: PathBuf,
    file: Result<Arc<File>, String>,
}

impl Handle {
    /// Opens `path`. A missing file (or directory, or permission) is recorded in the handle,
    /// since that makes a source absent rather than the detection fail; other errors are errors.
    fn open(path: PathBuf) -> Result<Handle, Error> {
        let file = match File::open(&path) {
            Ok(f) => Ok(Arc::new(f)),
            Err(e) => {
                Err(missing_reason(&path, &e).ok_or_else(|| Error::Read { path: path.clone(), error: e })?)
            }
        };
        Ok(Handle { path, file })
    }

    /// The whole text, read from offset 0 (`kfile::read_at_zero`: one `pread` for a small file).
    fn read(&self) -> Result<FileText, Error> {
        let file = match &self.file {
            Ok(f) => f,
            Err(reason) => return Ok(FileText::Missing(reason.clone())),
        };
        let mut bytes = Vec::new();
        if let Err(e) = crate::kfile::read_at_zero(file, &mut bytes) {
            return match missing_reason(&self.path, &e) {
                Some(reason) => Ok(FileText::Missing(reason)),
                None => Err(Error::Read { path: self.path.clone(), error: e }),
            };
        }
        Ok(FileText::Text(String::from_utf8_lossy(&bytes).into_owned()))
    }
}

/// The reason an I/O error makes a source absent, or `None` when it is a real error.
fn missing_reason(path: &Path, e: &io::Error) -> Option<String> {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => {
            Some(format!("{} does not exist", path.display()))
        }
        io::ErrorKind::PermissionDenied => {
            Some(format!("{} is not readable (permission denied)", path.display()))
        }
        // ENODEV: the cgroup was removed after the file was opened.
        _ if crate::sys::file_vanished(e) => Some(format!("{} disappeared", path.display())),
        _ => None,
    }
}

/// Reads a file that is read once, at resolve, sequentially (mountinfo can be large, and
/// positional reads past offset 0 make the kernel re-walk a seq_file).
fn read_text(path: &Path) -> Result<FileText, Error> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(FileText::Text(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) => match missing_reason(path, &e) {
            Some(reason) => Ok(FileText::Missing(reason)),
            None => Err(Error::Read { path: path.to_owned(), error: e }),
        },
    }
}

fn read_source<T>(
    file: &Handle,
    parse: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Result<Source<T>, Error> {
    match file.read()? {
        FileText::Text(text) => match parse(&text) {
            Ok(value) => Ok(Source::Present { origin: Origin::File(file.path.clone()), value }),
            Err(error) => Err(Error::Parse { path: file.path.clone(), error }),
        },
        FileText::Missing(reason) => Ok(Source::Absent { reason }),
    }
}

/// Parses a file read once at resolve; `Ok(Err(reason))` when it is missing.
fn parse_optional<T>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Result<Result<T, String>, Error> {
    match read_text(path)? {
        FileText::Text(text) => {
            parse(&text).map(Ok).map_err(|error| Error::Parse { path: path.to_owned(), error })
        }
        FileText::Missing(reason) => Ok(Err(reason)),
    }
}

/// The calling thread's affinity mask, read in a buffer sized from the kernel (`crate::affinity`:
/// hosts with more than 1024 CPUs too).
fn own_affinity() -> io::Result<CpuSet> {
    let mut set = CpuSet::new();
    crate::affinity::current_thread_cpus()?.into_iter().for_each(|cpu| set.insert(cpu));
    Ok(set)
}

/// Where the fallback's count comes from, as its origin and in its reasons.
const PARALLELISM: &str = "std::thread::available_parallelism";

/// Why a source is absent in the fallback for systems other than Linux: `what` ("cgroup
/// cpusets are") is read on Linux only.
fn fallback_reason(what: &str) -> String {
    format!(
        "not read: {what} read on Linux only, and this build of cotenant runs its fallback for other \
         systems (the CPU count is {PARALLELISM})"
    )
}

/// The online CPUs of the fallback: `std::thread::available_parallelism`'s count `n`, as CPUs
/// `0..n` (the ids are only a numbering: the standard library gives a count).
fn parallelism_source() -> Result<Source<CpuSet>, Error> {
    let count =
        std::thread::available_parallelism().map_err(|error| Error::Syscall { name: PARALLELISM, error })?;
    // Bounded as a mask is (`affinity::MAX_MASK_BITS`): no real count comes near it, and a
    // CPU set is a bitmap.
    let count = count.get().min(crate::affinity::MAX_MASK_BITS);
    let mut set = CpuSet::new();
    (0..count as u32).for_each(|cpu| set.insert(cpu));
    Ok(Source::Present { origin: Origin::Syscall(PARALLELISM), value: set })
}

/// The calling process's [`Limit`] on systems other than Linux (`crate::sys`'s fallback), where
/// the system probe reads no file: the online CPUs are `std::thread::available_parallelism`'s
/// count and bind; the cpuset, the affinity mask, the quota and the weight are absent, each
/// saying why. Another process's count (`pid` not this process's) is not known there: an
/// error says so.
fn parallelism_limit(pid: Option<u32>) -> Result<Limit, Error> {
    if let Some(pid) = pid.filter(|&pid| pid != std::process::id()) {
        return Err(Error::Undetermined {
            reason: format!(
                "the CPU count of process {pid} is unknown: cotenant reads another process's CPUs from \
                 Linux's /proc, and this build runs its fallback for other systems (it knows only its \
                 own count, from {PARALLELISM})"
            ),
        });
    }
    let plan = Plan::parallelism();
    let limits = plan.read_limits()?;
    let derived = derive(&limits.online, &limits.cpuset, &limits.affinity, &limits.quotas)?;
    Ok(Limit {
        plan,
        online: limits.online,
        affinity: limits.affinity,
        cpuset: limits.cpuset,
        quotas: Vec::new(),
        quota_absent: Some(fallback_reason("cgroup CPU quotas are")),
        weight: Source::Absent { reason: fallback_reason("cgroup CPU weights are") },
        derived,
    })
}

//! The CPU count a process should really use, and where that number comes from.
//!
//! The friendlypool paper ("Reducing Tail Latencies Through Environment- and Neighbour-aware
//! Thread Management", Jeffery, Jensen and Mortier, 2024) asks for one language-independent
//! answer to "how many CPUs may this process use?". The answer is the smallest of:
//!
//! 1. the online CPUs (`/sys/devices/system/cpu/online`);
//! 2. the cpuset of the process's cgroup (v1 `cpuset.effective_cpus`, v2 `cpuset.cpus.effective`);
//! 3. its affinity mask (`sched_getaffinity(2)`, or `Cpus_allowed_list` for another process);
//! 4. the CPU quota (`quota / period`) of its cgroup **and of every ancestor** up to the mount
//!    root, since a parent's limit binds its children as surely as their own.
//!
//! The first three are sets of CPUs and intersect; the quota is a fraction of CPUs. The result is
//! a [`Limit`], which keeps every source with the file it came from, says which one binds,
//! rounds the fractional limit to a thread count ([`Rounding`]), and can be re-read cheaply
//! ([`Limit::refresh`]): the paths are resolved once, only the numbers are read again.
//!
//! A missing file or controller makes its source [`Source::Absent`] (recorded, not an error);
//! a file that exists but cannot be parsed is an [`Error`] naming the file and the text.
//!
//! **Systems other than Linux.** There is no `/proc`, `/sys` or cgroup to read there, so
//! [`detect`] answers with the count of `std::thread::available_parallelism`: its [`Limit`]
//! has that many online CPUs (numbered `0..n`, read from
//! [`Origin::Syscall`]`("std::thread::available_parallelism")`), binds on
//! [`Constraint::Online`], and lists the cpuset, the affinity mask, the quota and the weight as
//! absent, each saying why ([`Limit::sources`] shows it all). [`detect_pid`] knows only the
//! calling process there. A [`Probe::with_root`] still reads a copy of a Linux system's files,
//! on any system. (Linux builds compile this fallback under `--cfg cotenant_force_fallback`.)
//!
//! ```no_run
//! let budget = cotenant::cpus::detect()?;
//! println!("{} threads ({} CPUs, bound by {})", budget.threads(Default::default()),
//!          budget.limit(), budget.binding());
//! # Ok::<(), cotenant::cpus::Error>(())
//! ```

mod hierarchy;
mod probe;

pub use hierarchy::CgroupVersion;
pub use probe::Probe;

use crate::procfs::{cgroupfs::Quota, cpulist::CpuSet, ParseError};
use std::{fmt, io, path::PathBuf, str::FromStr};

/// The budget of the calling process. Same as `Probe::system().detect()`.
pub fn detect() -> Result<Limit, Error> {
    Probe::system().detect()
}

/// The budget of process `pid`, read through `/proc/<pid>`. On systems other than Linux only
/// the calling process's is known (another pid is an [`Error::Undetermined`] saying why).
pub fn detect_pid(pid: u32) -> Result<Limit, Error> {
    Probe::system().detect_pid(pid)
}

/// How many threads this process should run CPU-bound work on: the CPU limit of [`detect`]
/// (affinity, cpuset and every CPU quota up to the cgroup root) rounded down
/// ([`Rounding::Floor`], the default), at least 1. Never fails, like `num_cpus::get()`: when
/// detection fails it returns what `std::thread::available_parallelism` says, or 1.
///
/// A drop-in for `num_cpus::get()` that counts the CPU quota of every ancestor cgroup (a
/// container limited to 1.5 CPUs on a 64-CPU host gets 1, where `num_cpus` says 64). Recent
/// Rust's `available_parallelism()` reads the quotas too and agrees on the cases the README's
/// table measures; this one also says why ([`detect`]) and lets you round up. It reads the files
/// again on every call (a few reads; keep the number, or keep a [`Limit`] and
/// [`refresh`](Limit::refresh) it, where it is asked for often). Use [`detect`] for the reason
/// behind the number, or another [`Rounding`].
///
/// ```
/// let threads = cotenant::cpus::get();
/// assert!(threads >= 1);
/// if let Ok(limit) = cotenant::cpus::detect() {
///     assert_eq!(threads, limit.threads(cotenant::Rounding::Floor) as usize);
/// }
/// ```
#[must_use]
pub fn get() -> usize {
    match detect() {
        Ok(limit) => (limit.threads(Rounding::default()) as usize).max(1),
        Err(_) => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
    }
}

/// How a fractional CPU limit becomes a thread count. Whatever the rounding, the count is at
/// least 1 and at most the number of allowed CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Rounding {
    /// Round down (the default): never more runnable threads than the quota pays for, so a
    /// CPU-bound pool is not throttled. 1.5 CPUs gives 1 thread.
    #[default]
    Floor,
    /// Round up: use the fraction too, accepting some throttling. 1.5 CPUs gives 2 threads.
    Ceil,
    /// Round to the nearest, halves up. 1.5 gives 2, 1.4 gives 1.
    Nearest,
}

impl Rounding {
    /// `"floor"`, `"ceil"` or `"nearest"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rounding::Floor => "floor",
            Rounding::Ceil => "ceil",
            Rounding::Nearest => "nearest",
        }
    }
}

impl FromStr for Rounding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "floor" => Ok(Rounding::Floor),
            "ceil" => Ok(Rounding::Ceil),
            "nearest" => Ok(Rounding::Nearest),
            _ => Err(format!("unknown rounding {s:?} (expected floor, ceil or nearest)")),
        }
    }
}

/// The kinds of constraint that can bind a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constraint {
    /// The online CPUs: nothing else restricts the process. (On systems other than Linux:
    /// `std::thread::available_parallelism`'s count, the only source there.)
    Online,
    /// The process's affinity mask (e.g. `taskset`).
    Affinity,
    /// The cgroup cpuset.
    Cpuset,
    /// A CPU quota, of the process's cgroup or of an ancestor.
    Quota,
}

impl Constraint {
    /// `"online"`, `"affinity"`, `"cpuset"` or `"quota"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Constraint::Online => "online",
            Constraint::Affinity => "affinity",
            Constraint::Cpuset => "cpuset",
            Constraint::Quota => "quota",
        }
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a value was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file (as actually opened, so under the probe's root).
    File(PathBuf),
    /// A system call, e.g. `sched_getaffinity(2)`, or the standard library's
    /// `std::thread::available_parallelism` (on systems other than Linux).
    Syscall(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(p) => write!(f, "{}", p.display()),
            Origin::Syscall(s) => f.write_str(s),
        }
    }
}

/// A value with where it came from, or the reason it is absent.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Source<T> {
    /// The value was read.
    Present {
        /// Where from.
        origin: Origin,
        /// What was read.
        value: T,
    },
    /// There is no such source for this process (no controller, no file, no permission).
    Absent {
        /// Why, in words.
        reason: String,
    },
}

impl<T> Source<T> {
    /// The value, if present.
    pub fn value(&self) -> Option<&T> {
        match self {
            Source::Present { value, .. } => Some(value),
            Source::Absent { .. } => None,
        }
    }

    /// The origin, if present.
    pub fn origin(&self) -> Option<&Origin> {
        match self {
            Source::Present { origin, .. } => Some(origin),
            Source::Absent { .. } => None,
        }
    }
}

/// The quota of one cgroup on the walk from the process's cgroup to the mount root.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct QuotaLevel {
    /// The cgroup path, as in `/proc/<pid>/cgroup`.
    pub cgroup: String,
    /// Which hierarchy it is in.
    pub version: CgroupVersion,
    /// `Present(None)` for no limit (`-1`, `max`); `Absent` when the files are missing.
    pub quota: Source<Option<Quota>>,
    /// `cpu.cfs_burst_us` / `cpu.max.burst`, read when the budget is detected (not on refresh).
    pub burst: Source<u64>,
}

/// The CPU count a process should use: every source, the fractional limit, and which
/// constraint binds. (Formerly `CpuBudget`; "budget" in cotenant now means only the CPU-time
/// quota of `Builder::cpu_budget`.)
#[derive(Debug, Clone)]
pub struct Limit {
    plan: probe::Plan,
    online: Source<CpuSet>,
    affinity: Source<CpuSet>,
    cpuset: Source<CpuSet>,
    quotas: Vec<QuotaLevel>,
    quota_absent: Option<String>,
    weight: Source<u64>,
    derived: Derived,
}

/// What follows from the sources: computed by [`derive`], a pure function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Derived {
    allowed: u32,
    /// The limit as an exact fraction `num / den`, so rounding is exact.
    num: u64,
    den: u64,
    binding: Constraint,
    /// For [`Constraint::Quota`], the index of the binding level in `quotas`.
    binding_level: Option<usize>,
}

impl Limit {
    /// The number of CPUs the process may run on: online ∩ cpuset ∩ affinity.
    pub fn allowed_cpus(&self) -> u32 {
        self.derived.allowed
    }

    /// The CPUs the process may run on, by id: online ∩ cpuset ∩ affinity (the sources that
    /// could be read).
    pub fn allowed_set(&self) -> CpuSet {
        [&self.online, &self.cpuset, &self.affinity]
            .into_iter()
            .filter_map(Source::value)
            .fold(None, |acc: Option<CpuSet>, set| {
                Some(acc.map_or_else(|| set.clone(), |prev| prev.intersection(set)))
            })
            .unwrap_or_default()
    }

    /// The CPU limit as a fraction: min(allowed CPUs, every ancestor's quota / period).
    pub fn limit(&self) -> f64 {
        self.derived.num as f64 / self.derived.den as f64
    }

    /// The thread count for `rounding`: at least 1, at most [`allowed_cpus`](Self::allowed_cpus).
    pub fn threads(&self, rounding: Rounding) -> u32 {
        let (n, d) = (self.derived.num as u128, self.derived.den as u128);
        let t = match rounding {
            Rounding::Floor => n / d,
            Rounding::Ceil => n.div_ceil(d),
            Rounding::Nearest => (2 * n + d) / (2 * d),
        };
        (t.min(self.derived.allowed as u128) as u32).max(1)
    }

    /// Which constraint binds.
    pub fn binding(&self) -> Constraint {
        self.derived.binding
    }

    /// Where the binding value was read from.
    pub fn binding_origin(&self) -> Option<&Origin> {
        match self.derived.binding {
            Constraint::Online => self.online.origin(),
            Constraint::Affinity => self.affinity.origin(),
            Constraint::Cpuset => self.cpuset.origin(),
            Constraint::Quota => self.binding_level().and_then(|l| l.quota.origin()),
        }
    }

    /// For a quota, the cgroup level that binds (the process's own cgroup or an ancestor).
    pub fn binding_level(&self) -> Option<&QuotaLevel> {
        self.derived.binding_level.map(|i| &self.quotas[i])
    }

    /// The online CPUs.
    pub fn online(&self) -> &Source<CpuSet> {
        &self.online
    }

    /// The affinity mask.
    pub fn affinity(&self) -> &Source<CpuSet> {
        &self.affinity
    }

    /// The cgroup's effective cpuset.
    pub fn cpuset(&self) -> &Source<CpuSet> {
        &self.cpuset
    }

    /// The quota of the process's cgroup and of each ancestor, leaf first. Empty when there is
    /// no CPU controller; [`quota_absent_reason`](Self::quota_absent_reason) then says why.
    pub fn quotas(&self) -> &[QuotaLevel] {
        &self.quotas
    }

    /// Why no quota could be read at all, if so.
    pub fn quota_absent_reason(&self) -> Option<&str> {
        self.quota_absent.as_deref()
    }

    /// The cgroup's CPU weight: `cpu.shares` (v1) or `cpu.weight` (v2). For information: a
    /// weight is a lower bound under contention, not a limit.
    pub fn weight(&self) -> &Source<u64> {
        &self.weight
    }

    /// Which cgroup versions the budget was read from: `"none"`, `"v1"`, `"v2"`, or `"hybrid"`
    /// when the cpu and cpuset controllers came from different versions.
    pub fn cgroup_version(&self) -> &'static str {
        self.plan.cgroup_version()
    }

    /// Re-reads the numbers (affinity, cpusets, quotas) through the paths resolved when the
    /// budget was detected; cheap enough to call every clock tick. It does not notice the
    /// process moving to another cgroup: detect again for that.
    pub fn refresh(&mut self) -> Result<(), Error> {
        // Derive from the new numbers before storing any of them, so that a failed refresh
        // leaves the budget as it was rather than half-updated.
        let r = self.plan.read_limits()?;
        self.derived = derive(&r.online, &r.cpuset, &r.affinity, &r.quotas)?;
        for (level, quota) in self.quotas.iter_mut().zip(r.quotas) {
            level.quota = quota;
        }
        (self.online, self.affinity, self.cpuset) = (r.online, r.affinity, r.cpuset);
        Ok(())
    }

    /// Every source as a row for display: kind, origin, value in words, and whether it binds.
    pub fn sources(&self) -> Vec<SourceRow> {
        let mut rows = Vec::new();
        let set_row = |kind, s: &Source<CpuSet>, c| SourceRow {
            kind,
            origin: s.origin().cloned(),
            cgroup: None,
            value: match s {
                Source::Present { value, .. } => format!("{} ({value})", cpus_word(value.count() as f64)),
                Source::Absent { reason } => format!("absent: {reason}"),
            },
            binds: self.derived.binding == c,
        };
        rows.push(set_row("online", &self.online, Constraint::Online));
        rows.push(set_row("cpuset", &self.cpuset, Constraint::Cpuset));
        rows.push(set_row("affinity", &self.affinity, Constraint::Affinity));
        if let Some(reason) = &self.quota_absent {
            rows.push(SourceRow::absent("quota", reason));
        }
        for (i, level) in self.quotas.iter().enumerate() {
            let value = match &level.quota {
                Source::Present { value: Some(q), .. } => {
                    format!("{} ({} µs per {} µs)", cpus_word(q.cpus()), q.quota_us, q.period_us)
                }
                Source::Present { value: None, .. } => "unlimited".to_owned(),
                Source::Absent { reason } => format!("absent: {reason}"),
            };
            rows.push(SourceRow {
                kind: "quota",
                origin: level.quota.origin().cloned(),
                cgroup: Some(level.cgroup.clone()),
                value,
                binds: self.derived.binding_level == Some(i),
            });
        }
        for level in &self.quotas {
            if let Source::Present { origin, value } = &level.burst {
                rows.push(SourceRow {
                    kind: "burst",
                    origin: Some(origin.clone()),
                    cgroup: Some(level.cgroup.clone()),
                    value: format!("{value} µs"),
                    binds: false,
                });
            }
        }
        rows.push(match &self.weight {
            Source::Present { origin, value } => SourceRow {
                kind: "weight",
                origin: Some(origin.clone()),
                cgroup: self.quotas.first().map(|l| l.cgroup.clone()),
                value: value.to_string(),
                binds: false,
            },
            Source::Absent { reason } => SourceRow::absent("weight", reason),
        });
        rows
    }
}

/// One source of a budget, for display (`cotenant cpus --explain`, `--json`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SourceRow {
    /// `online`, `cpuset`, `affinity`, `quota`, `burst` or `weight`.
    pub kind: &'static str,
    /// Where it was read from; `None` when absent.
    pub origin: Option<Origin>,
    /// For cgroup sources, the cgroup path.
    pub cgroup: Option<String>,
    /// The value in words (`"2 CPUs (0-1)"`, `"1.5 CPUs (150000 µs per 100000 µs)"`).
    pub value: String,
    /// Whether this source binds.
    pub binds: bool,
}

impl SourceRow {
    fn absent(kind: &'static str, reason: &str) -> Self {
        SourceRow { kind, origin: None, cgroup: None, value: format!("absent: {reason}"), binds: false }
    }
}

/// A CPU amount in words: `"1 CPU"`, `"0.5 CPU"`, `"1.5 CPUs"`, `"2 CPUs"` (at most three
/// decimals, no trailing zeros).
pub fn cpus_word(x: f64) -> String {
    let s = format!("{x:.3}");
    let n = s.trim_end_matches('0').trim_end_matches('.');
    format!("{n} CPU{}", if x > 1.0 { "s" } else { "" })
}

/// Combines the sources: intersects the CPU sets (online, then cpuset, then affinity), then
/// takes the smallest quota. A constraint binds when it strictly lowers the value found so far,
/// so ties go to the broader source (a cpuset equal to the online CPUs does not bind) and, among
/// quotas, to the level nearest the process.
fn derive(
    online: &Source<CpuSet>,
    cpuset: &Source<CpuSet>,
    affinity: &Source<CpuSet>,
    quotas: &[Source<Option<Quota>>],
) -> Result<Derived, Error> {
    let mut allowed: Option<CpuSet> = None;
    let mut binding = Constraint::Online;
    for (constraint, source) in
        [(Constraint::Online, online), (Constraint::Cpuset, cpuset), (Constraint::Affinity, affinity)]
    {
        let Some(set) = source.value() else { continue };
        let next = match &allowed {
            None => set.clone(),
            Some(prev) => prev.intersection(set),
        };
        if allowed.as_ref().is_none_or(|prev| next.count() < prev.count()) {
            binding = constraint;
        }
        allowed = Some(next);
    }
    let Some(allowed) = allowed else {
        return Err(Error::Undetermined {
            reason: "neither the online CPUs, the cpuset nor the affinity mask could be read".into(),
        });
    };
    if allowed.is_empty() {
        return Err(Error::Undetermined {
            reason: format!(
                "the online CPUs ({}), the cpuset ({}) and the affinity mask ({}) have no CPU in common",
                show(online),
                show(cpuset),
                show(affinity)
            ),
        });
    }
    let count = allowed.count();
    let (mut num, mut den, mut binding_level) = (count as u64, 1u64, None);
    for (i, quota) in quotas.iter().enumerate() {
        if let Some(Some(q)) = quota.value() {
            // q.quota / q.period < num / den, exactly.
            if (q.quota_us as u128) * (den as u128) < (num as u128) * (q.period_us as u128) {
                (num, den, binding_level) = (q.quota_us, q.period_us, Some(i));
                binding = Constraint::Quota;
            }
        }
    }
    Ok(Derived { allowed: count, num, den, binding, binding_level })
}

fn show(s: &Source<CpuSet>) -> String {
    match s {
        Source::Present { value, .. } => value.to_string(),
        Source::Absent { .. } => "absent".into(),
    }
}

/// Why no budget could be produced.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file exists but does not have the expected format.
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong, with the offending text.
        error: ParseError,
    },
    /// A file exists but could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: io::Error,
    },
    /// A system call failed unexpectedly.
    Syscall {
        /// Its name, e.g. `sched_getaffinity(2)`.
        name: &'static str,
        /// The error.
        error: io::Error,
    },
    /// There is no process with this pid (or its `/proc` entry is not visible).
    NoSuchProcess {
        /// The pid asked for.
        pid: u32,
        /// The directory that was looked for.
        path: PathBuf,
    },
    /// The sources that were read do not determine a CPU count.
    Undetermined {
        /// Why.
        reason: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parse { path, error } => write!(f, "{}: {error}", path.display()),
            Error::Read { path, error } => write!(f, "cannot read {}: {error}", path.display()),
            Error::NoSuchProcess { pid, path } => {
                write!(f, "no process with pid {pid} ({} does not exist)", path.display())
            }
            Error::Syscall { name, error } => write!(f, "{name} failed: {error}"),
            Error::Undetermined { reason } => f.write_str(reason),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Parse { error, .. } => Some(error),
            Error::Read { error, .. } | Error::Syscall { error, .. } => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;

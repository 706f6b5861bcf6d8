//! [`Error`]: why `cotenant cgroup set` could not do its job, and its messages, each naming the
//! directory or file and the values involved.

use super::{IDLE, MIN_QUOTA_US, V1_QUOTA, V1_SHARES, V2_MAX, V2_WEIGHT, WEIGHT_MAX, WEIGHT_MIN};
use std::{fmt, io, path::PathBuf};

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
    Read {
        /// The file's path.
        file: PathBuf,
        /// What is wrong with its text.
        why: String,
    },
    /// The directory or a file was refused by [`crate::cgroupfs`] (a symbolic link, not on a
    /// cgroup file system) or could not be opened, read or written; the message names it.
    Access(io::Error),
    /// `--burst` on a kernel without a burst file.
    NoBurstFile(PathBuf),
    /// CPUs × period rounds below the kernel's 1 ms minimum.
    QuotaTooSmall {
        /// The `--cpus` asked for.
        cpus: f64,
        /// The period the quota is for (`--period`, or the current one).
        period_us: u64,
    },
    /// `--burst` is more than the quota.
    BurstAboveQuota {
        /// The `--burst` asked for.
        burst_us: u64,
        /// The new quota.
        quota_us: u64,
    },
    /// No `--burst`, but the cgroup's current burst is more than the new quota.
    CurrentBurstAboveQuota {
        /// The burst file.
        file: PathBuf,
        /// The burst it holds now.
        burst_us: u64,
        /// The new quota.
        quota_us: u64,
    },
    /// EACCES or EPERM on a write.
    PermissionDenied(PathBuf),
    /// EINVAL on a write.
    Refused {
        /// The file written.
        file: PathBuf,
        /// The text the kernel refused.
        value: String,
    },
    /// The read-back shows something else than what was written.
    Mismatch {
        /// The file written.
        file: PathBuf,
        /// The text written.
        written: String,
        /// The text read back, trimmed.
        read: String,
    },
    /// Neither `--cpus`, `--idle`, `--no-idle` nor `--weight`.
    NothingRequested,
    /// `--period` or `--burst` without `--cpus` (the flag named).
    NeedsCpus(&'static str),
    /// `--idle` with `--weight`: the kernel gives an idle cgroup the smallest weight and
    /// refuses a weight for it while it is idle.
    IdleWithWeight,
    /// A weight outside 1..=10000.
    WeightOutOfRange(u64),
    /// `--idle` or `--no-idle`, but the cgroup has no `cpu.idle` (the file named).
    NoIdleFile(PathBuf),
    /// `--weight`, but the cgroup has no weight file (the file named).
    NoWeightFile(PathBuf),
    /// `--weight` without `--no-idle` on a cgroup that is idle (its `cpu.idle` named).
    WeightWhileIdle(PathBuf),
    /// A failure after some writes succeeded: the cgroup is left part-way.
    AfterWrites {
        /// The writes that succeeded, in order, each as `<file> "<text>"`.
        done: Vec<String>,
        /// The failure that stopped the rest.
        error: Box<Error>,
    },
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
                | Error::NothingRequested
                | Error::NeedsCpus(_)
                | Error::IdleWithWeight
                | Error::WeightOutOfRange(_)
                | Error::WeightWhileIdle(_)
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
            Error::Refused { file, value } => {
                // EINVAL means something different for each file.
                let why = match file.file_name().and_then(|n| n.to_str()) {
                    Some(IDLE) => "the root cgroup cannot be made idle",
                    Some(V1_SHARES | V2_WEIGHT) => {
                        "out of range, the root cgroup has no weight, or the cgroup is idle"
                    }
                    _ => "out of range, or a child/parent cgroup's quota conflicts",
                };
                write!(f, "{}: the kernel refused {value:?} (invalid argument: {why})", file.display())
            }
            Error::Mismatch { file, written, read } => {
                write!(f, "{}: wrote {written:?} but read back {read:?}", file.display())
            }
            Error::NothingRequested => {
                write!(f, "nothing to set: give --cpus, --idle, --no-idle or --weight")
            }
            Error::NeedsCpus(flag) => {
                write!(f, "{flag} needs --cpus (the quota it goes with): give --cpus too, `max` for no limit")
            }
            Error::IdleWithWeight => write!(
                f,
                "--idle with --weight: the kernel gives an idle cgroup the smallest weight and refuses \
                 a weight for it while it is idle; give one or the other"
            ),
            Error::WeightOutOfRange(w) => write!(
                f,
                "--weight {w}: a CPU weight is a whole number from {WEIGHT_MIN} to {WEIGHT_MAX} (cgroup v2 \
                 units; the default is 100)"
            ),
            Error::NoIdleFile(file) => write!(
                f,
                "{} does not exist: marking a cgroup idle needs Linux 5.15 or later, with the cpu \
                 controller on this cgroup (cgroup v2: enabled in its parent's cgroup.subtree_control); \
                 without it, lower the cgroup's weight instead (--weight 10)",
                file.display()
            ),
            Error::NoWeightFile(file) => write!(
                f,
                "{} does not exist: this cgroup has no CPU weight (the cgroup v2 root has none, and \
                 the cpu controller must be enabled for it)",
                file.display()
            ),
            Error::WeightWhileIdle(file) => write!(
                f,
                "--weight: the cgroup is idle ({} is 1) and the kernel refuses a weight for an idle \
                 cgroup: add --no-idle to leave idle and set the weight",
                file.display()
            ),
            Error::AfterWrites { done, error } => {
                write!(f, "{error} (already written: {})", done.join(", "))
            }
        }
    }
}

impl std::error::Error for Error {}

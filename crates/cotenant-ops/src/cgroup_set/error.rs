//! [`Error`]: why `cotenant cgroup set` could not do its job, and its messages, each naming the
//! directory or file and the values involved.

use super::{MIN_QUOTA_US, V1_QUOTA, V2_MAX};
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

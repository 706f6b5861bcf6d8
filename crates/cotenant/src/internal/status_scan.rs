//! Reading a status folder: which of the records there ([`super::status_record`]) belong to
//! live writers, and removing those that do not. This module owns the rules by which a reader
//! trusts the folder ([`check_dir`]), reads a record without following a link, tells a live
//! writer from a dead one ([`liveness_of`]) and removes a stale record ([`scan`] with `clean`).
//! Two kinds of readers share them: `cotenant top` and the doctor (through
//! `cotenant_ops::status`), and the pools' own publisher (`pool/control/status.rs`), which sweeps
//! its user's folder once per process, so that records left by processes that exited without
//! dropping their pools do not pile up when nobody runs `cotenant top`.
//!
//! **Liveness.** A record is shown only if `/proc/<pid>/stat` exists, its start time (field 22)
//! equals the record's, and the process is not a zombie ([`liveness_of`]). Otherwise the writer
//! is gone (or its pid was reused) and the record is stale: a cleaning scan removes it if it is
//! a regular file owned by the reader (checked with `lstat` just before, and only if it is
//! still the file that was read), and ignores it otherwise. A process that is killed thus
//! disappears from the view at the next scan; a new process that got the same pid writes its
//! own record at its next tick. A record written in another PID namespace than the reader's
//! (containers that share `/dev/shm` but not their processes) names a pid the reader cannot
//! look up: it is neither shown nor removed, only counted; so is a stale record whose
//! namespace (or the reader's) is unknown, which is left in place.
//!
//! **Folder.** Trusted only if it is a real folder (not a symbolic link), owned by the user
//! whose pools write there, with no group or other write bit: anyone else who could write it
//! could fake a neighbour or make a cleaning scan remove what it points at. The folder is
//! checked by path and then used by path (no `openat` on a held descriptor): between the two,
//! only its owner could replace it (`/dev/shm` is sticky, and the folder is the owner's alone),
//! and a reader trusts that owner's records anyway, so the window gives nobody anything.
//!
//! Linux only (a reader needs `/proc/<pid>/stat`), and built under `--cfg loom` too: nothing
//! here touches the pool's atomics.

use std::fs;
use std::io::{self, Read as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::status_record::{self, ProcessRecord};

/// A temporary file older than this whose writer's pid does not exist here is a leftover: a
/// writer renames its temporary file at once (the age spares one being written by a process of
/// another PID namespace, whose pid means nothing here).
const LEFTOVER_TEMP_AGE: Duration = Duration::from_secs(10);

/// The effective user id of this process: the owner of what it creates and may remove.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// A record whose writer is alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRecord {
    /// The record.
    pub record: ProcessRecord,
    /// The writer's CPU time so far (utime + stime, clock ticks), read with its liveness.
    pub cpu_ticks: u64,
    /// How long ago it was written (`None`: the record does not say).
    pub age: Option<Duration>,
}

/// What one scan of the folder found.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// The folder scanned.
    pub dir: PathBuf,
    /// The folder does not exist (yet): no pool has published there.
    pub missing: bool,
    /// The records of live writers, by pid.
    pub live: Vec<LiveRecord>,
    /// Pids whose stale records (or leftover temporary files) this scan removed.
    pub removed: Vec<u32>,
    /// Pids of records written in another PID namespace: neither shown nor removed.
    pub other_namespace: Vec<u32>,
    /// Records that could not be read or were ignored, one sentence each naming the file.
    pub problems: Vec<String>,
}

/// Whether a record's writer is alive, from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Alive, with its CPU time so far (clock ticks).
    Alive {
        /// utime + stime.
        cpu_ticks: u64,
    },
    /// Gone: no such process, a zombie, or another process with the same pid.
    Gone,
    /// Cannot tell (a stat line of a format we do not know): neither shown nor removed.
    Unknown,
}

/// The liveness rule, pure: `stat` is the text of `/proc/<pid>/stat` (`None`: the process does
/// not exist) and `start_time` the record's.
pub fn liveness_of(stat: Option<&str>, start_time: u64) -> Liveness {
    let Some(stat) = stat else { return Liveness::Gone };
    match status_record::start_time_from_stat(stat) {
        None => Liveness::Unknown,
        Some(started) if started != start_time => Liveness::Gone,
        Some(_) => match crate::internal::procfs::pidstat::parse(stat) {
            Ok(parsed) if matches!(parsed.state, 'Z' | 'X' | 'x') => Liveness::Gone,
            Ok(parsed) => Liveness::Alive { cpu_ticks: parsed.cpu_ticks },
            Err(_) => Liveness::Unknown,
        },
    }
}

/// [`liveness_of`] process `pid`, reading `<proc_root>/<pid>/stat` (`/proc` on a live host).
pub fn liveness(proc_root: &Path, pid: u32, start_time: u64) -> Liveness {
    match fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) {
        Ok(text) => liveness_of(Some(&text), start_time),
        // ESRCH: the process exited while we read.
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            liveness_of(None, start_time)
        }
        Err(_) => Liveness::Unknown,
    }
}

/// Refuses a folder that others could write (see the module documentation). `Err` is a
/// sentence naming the folder and what is wrong with it.
pub fn check_dir(dir: &Path, meta: &fs::Metadata, owner: u32) -> Result<(), String> {
    let why = if meta.file_type().is_symlink() {
        Some("it is a symbolic link".to_owned())
    } else if !meta.is_dir() {
        Some("it is not a folder".to_owned())
    } else if meta.uid() != owner {
        Some(format!("it is owned by uid {}, not {owner}", meta.uid()))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!("its mode {:04o} lets others write in it", meta.mode() & 0o7777))
    } else {
        None
    };
    match why {
        Some(why) => Err(format!("the status folder {} is not trusted: {why}", dir.display())),
        None => Ok(()),
    }
}

/// The identity of a file read, so that a removal takes the same file or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    uid: u32,
}

/// Reads the record at `path` without following a link or blocking on a FIFO: a regular file
/// of at most `MAX_RECORD_BYTES`, parsed. `Err` is a sentence naming the file.
fn read_record(path: &Path) -> Result<(ProcessRecord, FileId), String> {
    let shown = path.display();
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => format!("{shown}: a symbolic link, ignored"),
            _ => format!("{shown}: cannot open: {e}"),
        })?;
    let meta = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file, ignored"));
    }
    if meta.len() > status_record::MAX_RECORD_BYTES {
        return Err(format!("{shown}: {} bytes, too large for a status record, ignored", meta.len()));
    }
    let mut text = String::new();
    (&mut file)
        .take(status_record::MAX_RECORD_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let record = status_record::parse(&shown.to_string(), &text).map_err(|e| e.to_string())?;
    Ok((record, FileId { dev: meta.dev(), ino: meta.ino(), uid: meta.uid() }))
}

/// Removes `path` if it is still the regular file `id` and ours (`uid`); whether it did.
fn remove_if_same(path: &Path, id: FileId, uid: u32) -> bool {
    match fs::symlink_metadata(path) {
        Ok(meta)
            if meta.file_type().is_file()
                && meta.dev() == id.dev
                && meta.ino() == id.ino
                && meta.uid() == uid
                && id.uid == uid =>
        {
            fs::remove_file(path).is_ok()
        }
        _ => false,
    }
}

/// The reader's PID namespace (`<proc_root>/self/ns/pid`), if it can be read.
fn own_pid_ns(proc_root: &Path) -> Option<u64> {
    let target = fs::read_link(proc_root.join("self").join("ns").join("pid")).ok()?;
    status_record::pid_ns_from_link(target.to_str()?)
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (the clock records are stamped with).
fn monotonic_ns() -> Option<u64> {
    // `crate::sys` rather than `sampler::clock_ns` (the same call): the sampler is not built
    // under loom, and this module is.
    crate::sys::clock_ns(libc::CLOCK_MONOTONIC)
}

/// An error about the folder itself, naming it: `doing` says what failed ("cannot list").
fn folder_error(dir: &Path, doing: &str, error: &io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{doing} the status folder {}: {error}", dir.display()))
}

/// Scans `dir`, which must belong to `owner` ([`check_dir`]), keeping the records of live
/// writers (liveness read under `proc_root`, `/proc` on a live host). With `clean`, stale
/// records and leftover temporary files owned by this process's user are removed.
///
/// Fails only on the folder itself (it cannot be read or listed, or is not trusted: the kind
/// is then `PermissionDenied`), with a message naming it; a record that cannot be read is one
/// of [`Scan::problems`].
pub fn scan(dir: &Path, owner: u32, proc_root: &Path, clean: bool) -> io::Result<Scan> {
    let mut scan = Scan { dir: dir.to_path_buf(), ..Scan::default() };
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            scan.missing = true;
            return Ok(scan);
        }
        Err(e) => return Err(folder_error(dir, "cannot read", &e)),
        Ok(meta) => check_dir(dir, &meta, owner)
            .map_err(|why| io::Error::new(io::ErrorKind::PermissionDenied, why))?,
    }
    let me = euid();
    let now_ns = monotonic_ns();
    let our_ns = own_pid_ns(proc_root);
    let entries = fs::read_dir(dir).map_err(|e| folder_error(dir, "cannot list", &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| folder_error(dir, "cannot list", &e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        let path = entry.path();
        if let Some(pid) = status_record::pid_of_temp_file_name(&name) {
            // A temporary file of a writer that died half-way; one of a live writer is its own.
            let dead = !proc_root.join(pid.to_string()).exists();
            if clean && dead {
                if let Ok(meta) = fs::symlink_metadata(&path) {
                    let old =
                        meta.modified().ok().and_then(|at| at.elapsed().ok()) >= Some(LEFTOVER_TEMP_AGE);
                    let id = FileId { dev: meta.dev(), ino: meta.ino(), uid: meta.uid() };
                    if old && remove_if_same(&path, id, me) {
                        scan.removed.push(pid);
                    }
                }
            }
            continue;
        }
        let Some(pid) = status_record::pid_of_file_name(&name) else { continue };
        let (record, id) = match read_record(&path) {
            Ok(read) => read,
            Err(problem) => {
                scan.problems.push(problem);
                continue;
            }
        };
        if record.pid != pid {
            scan.problems.push(format!("{}: says pid {}, ignored", path.display(), record.pid));
            continue;
        }
        if id.uid != owner {
            scan.problems.push(format!("{}: owned by uid {}, not {owner}, ignored", path.display(), id.uid));
            continue;
        }
        if record.pid_ns.zip(our_ns).is_some_and(|(theirs, ours)| theirs != ours) {
            scan.other_namespace.push(pid);
            continue;
        }
        match liveness(proc_root, pid, record.start_time) {
            Liveness::Alive { cpu_ticks } => {
                let age = now_ns
                    .filter(|_| record.written_ns != 0)
                    .map(|now| Duration::from_nanos(now.saturating_sub(record.written_ns)));
                scan.live.push(LiveRecord { record, cpu_ticks, age });
            }
            // Removed only when both namespaces are known (and, above, the same): a record
            // without one may be a live process's of another namespace, whose pid means
            // nothing here.
            Liveness::Gone if record.pid_ns.is_none() || our_ns.is_none() => {
                if clean {
                    scan.problems.push(format!(
                        "{}: pid {pid} is not running here, but the PID namespace it was written in \
                         is unknown, left in place",
                        path.display()
                    ));
                }
            }
            Liveness::Gone => {
                if clean && remove_if_same(&path, id, me) {
                    scan.removed.push(pid);
                }
            }
            Liveness::Unknown => scan
                .problems
                .push(format!("{}: cannot tell whether pid {pid} is alive, ignored", path.display())),
        }
    }
    scan.live.sort_by_key(|live| live.record.pid);
    scan.removed.sort_unstable();
    scan.other_namespace.sort_unstable();
    Ok(scan)
}

// The scan against fixture trees is tested where `top` and the doctor call it
// (`cotenant_ops::status`), the publisher's sweep in `pool/control/status.rs`; here, what only
// needs this process's own `/proc` entries.
#[cfg(test)]
mod tests {
    use super::*;

    fn own_start_time() -> u64 {
        let stat = fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
        status_record::start_time_from_stat(&stat).expect("field 22 of /proc/self/stat")
    }

    #[test]
    fn this_process_is_alive_and_a_pid_above_the_kernel_s_limit_is_not() {
        let proc_root = Path::new("/proc");
        let start = own_start_time();
        assert!(matches!(liveness(proc_root, std::process::id(), start), Liveness::Alive { .. }));
        assert_eq!(
            liveness(proc_root, std::process::id(), start.wrapping_add(1)),
            Liveness::Gone,
            "a reused pid"
        );
        // PID_MAX_LIMIT is 2^22: no process ever has a larger pid.
        assert_eq!(liveness(proc_root, 4_194_304 + 7, start), Liveness::Gone);
    }

    #[test]
    fn a_folder_that_is_not_one_is_an_error_naming_it() {
        let error = scan(Path::new("/proc/self/stat"), euid(), Path::new("/proc"), false).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        let message = error.to_string();
        assert!(message.contains("/proc/self/stat") && message.contains("not a folder"), "{message}");
        let missing =
            scan(Path::new("/proc/self/no-such-folder"), euid(), Path::new("/proc"), false).unwrap();
        assert!(missing.missing && missing.live.is_empty());
    }
}

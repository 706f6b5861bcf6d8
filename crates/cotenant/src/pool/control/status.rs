//! Step 5 of the control thread: this process's status record (`crate::internal::status_record`),
//! which `cotenant top` and the doctor read. The control thread knows every registered pool, so
//! it writes the record, at most every `PUBLISH_EVERY` and only at a tick it makes anyway: a
//! napping controller is not woken for it, and the record of an idle process stays as last
//! written (its pools idle, which is what it says). The thread removes the record when the last
//! pool has unregistered, under the lock in which it saw the registry empty, so that a thread
//! started after it cannot see its own record removed.
//!
//! Where: [`status_record::dir_from`] (`COTENANT_STATUS_DIR`, else `/dev/shm/cotenant-status-<uid>`,
//! else `$XDG_RUNTIME_DIR/cotenant-status`, else nowhere). The folder is created with mode 0700
//! and then checked with `lstat`: a real folder (not a symbolic link), owned by this user, with
//! no group or other write bit; anything else turns publishing off for the thread's life, with
//! one warning (another user who made the folder first must not receive our records, nor make
//! us write through a link). In a folder only we can write, a record is written to a temporary
//! file (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600) renamed over the last one.
//!
//! The first time a process finds its folder trusted, it also sweeps it once
//! (`status_scan::scan`, cleaning): a process that exits without dropping its pools (a test
//! binary, `process::exit`, a kill) leaves its record behind, and without a reader that cleans
//! (`cotenant top`) such records would pile up for ever. With the sweep, the next process of
//! the same user that publishes removes them, so the folder holds at most the records of live
//! processes plus those of processes that died since. The sweep follows the readers' rules:
//! only regular files of this user whose writer is gone (start time, not a zombie), never a
//! record of another PID namespace, never a live writer's; one that fails changes nothing for
//! publishing.
//!
//! A write that fails is counted (`publish_failures` in the next record that is written),
//! warned about once per process, and never reaches a pool; the folder is looked up again at the
//! next publication (someone may have removed it). `COTENANT_STATUS=off` turns it all off.
//! Only Linux publishes: a reader needs `/proc/<pid>/stat` to tell a live writer from a dead one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::Entry;
use crate::internal::status_record::{self, PoolRecord};
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
use crate::internal::status_scan;

/// A publication problem was logged (once per process: a host whose folder is unusable would
/// otherwise log it at every controller start).
static WARNED: AtomicBool = AtomicBool::new(false);

fn warn_once(message: &str) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!("cotenant: {message}; pools are not affected");
    }
}

/// The control thread's publisher: where the record goes, and when it is due.
pub(super) struct Publisher {
    state: State,
    /// When the next record is due (`None`: at the first chance).
    next_at: Option<Instant>,
    /// Records that could not be written so far.
    failures: u64,
}

enum State {
    /// The folder is to be looked up (first, and again after a failed write).
    Unresolved,
    /// Records go there.
    #[cfg_attr(any(not(target_os = "linux"), cotenant_force_fallback), allow(dead_code))]
    On(Target),
    /// Nothing is published for the life of this thread.
    Off,
}

/// Where this process's record goes, and what it says about the process.
#[cfg_attr(any(not(target_os = "linux"), cotenant_force_fallback), allow(dead_code))]
struct Target {
    dir: std::path::PathBuf,
    pid: u32,
    start_time: u64,
    pid_ns: Option<u64>,
    comm: String,
}

impl Publisher {
    pub(super) fn new() -> Publisher {
        Publisher { state: State::Unresolved, next_at: None, failures: 0 }
    }

    /// Whether a record is due at `now`.
    pub(super) fn due(&self, now: Instant) -> bool {
        !matches!(self.state, State::Off) && self.next_at.is_none_or(|at| now >= at)
    }

    /// The pools' part of the record, read under the registry lock (counters only: no system
    /// call). A pool that is gone is left out.
    pub(super) fn collect(entries: &[Entry]) -> Vec<PoolRecord> {
        entries
            .iter()
            .filter_map(|entry| {
                let pool = entry.pool.upgrade()?;
                let metrics = pool.snapshot();
                let tokens = pool.host_tokens.as_ref();
                let token_holds = pool
                    .workers
                    .iter()
                    .filter(|worker| worker.token_hold.load(std::sync::atomic::Ordering::Relaxed) != 0)
                    .count();
                Some(PoolRecord {
                    name: pool.name.to_string(),
                    policy: entry.policy.to_string(),
                    threads: metrics.elastic.as_ref().map_or(metrics.threads, |elastic| elastic.live) as u64,
                    target: metrics.target as u64,
                    running: metrics.running as u64,
                    queued: metrics.queued as u64,
                    completed: metrics.completed,
                    tokens: metrics.host_tokens.as_str().to_owned(),
                    token_set: tokens.map(|t| t.set().name().to_owned()),
                    token_count: tokens.map(|t| t.set().count()),
                    token_holds: token_holds as u64,
                    token_waits: tokens.map(|t| t.waiting_workers()),
                    p99_queue_wait_ns: metrics.queue_wait.as_ref().and_then(|h| h.quantile_ns(0.99)),
                })
            })
            .collect()
    }

    /// Writes the record of `pools` now (called without the registry lock). Never fails: a
    /// failure is counted, warned about once, the previous record removed, and the folder
    /// looked up again next time.
    pub(super) fn publish(&mut self, pools: Vec<PoolRecord>, now: Instant) {
        self.next_at = Some(now + status_record::PUBLISH_EVERY);
        if matches!(self.state, State::Unresolved) {
            self.state = resolve();
        }
        let State::On(target) = &self.state else { return };
        if let Err(error) = target.write(pools, self.failures) {
            self.failures = self.failures.saturating_add(1);
            warn_once(&format!("cannot write the status record in {}: {error}", target.dir.display()));
            // The last record written would go stale (and outlive the pools, since `remove`
            // knows no folder once the state is unresolved): remove it now.
            target.remove();
            self.state = State::Unresolved;
        }
    }

    /// Removes the record (the last pool has gone). Nothing to do if none was written.
    pub(super) fn remove(&mut self) {
        if let State::On(target) = &self.state {
            target.remove();
        }
        self.state = State::Unresolved;
        self.next_at = None;
    }
}

/// Looks up and checks the folder, and reads what the record says about this process.
#[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
fn resolve() -> State {
    State::Off
}

/// Looks up and checks the folder, and reads what the record says about this process.
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
fn resolve() -> State {
    use std::os::unix::fs::DirBuilderExt as _;

    if let Some(value) = std::env::var_os(status_record::STATUS_ENV) {
        match status_record::env_says_off(&value.to_string_lossy()) {
            Ok(true) => return State::Off,
            Ok(false) => {}
            Err(why) => warn_once(&format!("{why}; the status record stays on")),
        }
    }
    // SAFETY: geteuid cannot fail. The effective user: the one that owns what we create.
    let uid = unsafe { libc::geteuid() };
    let dir = match status_record::dir_from(
        uid,
        std::env::var_os(status_record::STATUS_DIR_ENV).as_deref(),
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
        std::path::Path::new(status_record::DEV_SHM).is_dir(),
    ) {
        Ok(Some(dir)) => dir,
        Ok(None) => return State::Off, // no place for records on this host: nothing to say
        Err(why) => {
            warn_once(&format!("{why}; no status record is published"));
            return State::Off;
        }
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => {
            // Perhaps a parent is missing for now: looked up again at the next publication.
            warn_once(&format!("cannot create the status folder {}: {error}", dir.display()));
            return State::Unresolved;
        }
    }
    // The readers' own rule (`status_scan::check_dir`), on the folder itself, not a link to it.
    let trusted = match std::fs::symlink_metadata(&dir) {
        Ok(meta) => status_scan::check_dir(&dir, &meta, uid),
        Err(error) => Err(format!("cannot read the status folder {}: {error}", dir.display())),
    };
    if let Err(why) = trusted {
        warn_once(&format!("{why}; no status record is published"));
        return State::Off;
    }
    // Once per process (see the module documentation): the records of this user's processes
    // that died without dropping their pools.
    static SWEPT: AtomicBool = AtomicBool::new(false);
    if !SWEPT.swap(true, Ordering::Relaxed) {
        sweep(&dir, uid);
    }
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let Some(start_time) = status_record::start_time_from_stat(&stat) else {
        warn_once("cannot read this process's start time in /proc/self/stat; no status record is published");
        return State::Off;
    };
    let comm = crate::procfs::pidstat::parse(&stat).map(|s| s.comm).unwrap_or_default();
    let pid_ns = std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|target| target.to_str().and_then(status_record::pid_ns_from_link));
    State::On(Target { dir, pid: std::process::id(), start_time, pid_ns, comm })
}

/// Removes the stale records of user `uid` from `dir`, a folder already trusted: a cleaning
/// scan under `/proc`, whose result is dropped (what it removed is nobody's business here, and
/// a folder it cannot list is found again by the write that follows).
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
fn sweep(dir: &std::path::Path, uid: u32) {
    let _ = status_scan::scan(dir, uid, std::path::Path::new("/proc"), true);
}

#[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
impl Target {
    fn write(&self, _pools: Vec<PoolRecord>, _failures: u64) -> std::io::Result<()> {
        Ok(())
    }

    fn remove(&self) {}
}

#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
impl Target {
    /// Writes the record: a new temporary file renamed over the last record.
    fn write(&self, pools: Vec<PoolRecord>, failures: u64) -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;

        let record = status_record::ProcessRecord {
            pid: self.pid,
            start_time: self.start_time,
            pid_ns: self.pid_ns,
            comm: self.comm.clone(),
            written_ns: crate::sampler::clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0),
            publish_failures: failures,
            pools,
        };
        let text = status_record::render(&record);
        let temp = self.dir.join(status_record::temp_file_name(self.pid));
        let open = || {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&temp)
        };
        let mut file = match open() {
            // Left by a write of ours that failed half-way (or by a dead process with our
            // pid): nobody else can write this folder, so it is ours to remove.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(&temp)?;
                open()?
            }
            other => other?,
        };
        let written = file.write_all(text.as_bytes());
        drop(file);
        if let Err(error) =
            written.and_then(|()| std::fs::rename(&temp, self.dir.join(status_record::file_name(self.pid))))
        {
            let _ = std::fs::remove_file(&temp);
            return Err(error);
        }
        Ok(())
    }

    /// Removes the record (a reader would drop it anyway once this process is gone).
    fn remove(&self) {
        let _ = std::fs::remove_file(self.dir.join(status_record::file_name(self.pid)));
    }
}

#[cfg(all(test, target_os = "linux", not(cotenant_force_fallback)))]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;

    /// A fresh private folder from `mkdtemp`, removed when dropped.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            let template = std::env::temp_dir().join("cotenant-status-test-XXXXXX");
            let mut bytes = std::ffi::CString::new(template.into_os_string().into_encoded_bytes())
                .expect("no NUL in the temp folder's path")
                .into_bytes_with_nul();
            // SAFETY: a NUL-terminated buffer ending in "XXXXXX\0", which mkdtemp rewrites in place.
            let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
            assert!(!made.is_null(), "mkdtemp: {}", std::io::Error::last_os_error());
            bytes.pop();
            TempDir(std::path::PathBuf::from(String::from_utf8(bytes).expect("a UTF-8 temp path")))
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn target_in(dir: &std::path::Path) -> Target {
        Target { dir: dir.to_path_buf(), pid: 4242, start_time: 77, pid_ns: Some(5), comm: "tester".into() }
    }

    #[test]
    fn a_record_is_written_whole_private_and_read_back_then_removed() {
        let dir = TempDir::new();
        let target = target_in(&dir.0);
        let pool = PoolRecord { name: "p".into(), threads: 2, target: 1, ..PoolRecord::default() };
        target.write(vec![pool.clone()], 3).unwrap();
        // A temporary file left by a failed write does not stop the next one.
        std::fs::write(dir.0.join(".4242.status.tmp"), "half a rec").unwrap();
        target.write(vec![pool.clone()], 3).unwrap();
        let path = dir.0.join("4242.status");
        let record = status_record::parse("4242.status", &std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!((record.pid, record.start_time, record.pid_ns), (4242, 77, Some(5)));
        assert_eq!(record.comm, "tester");
        assert_eq!((record.publish_failures, record.pools), (3, vec![pool]));
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert!(!dir.0.join(".4242.status.tmp").exists(), "renamed, not left behind");
        target.remove();
        assert!(!path.exists());
    }

    #[test]
    fn a_symbolic_link_at_the_record_is_replaced_not_followed() {
        let dir = TempDir::new();
        let victim = dir.0.join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, dir.0.join("4242.status")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.0.join(".4242.status.tmp")).unwrap();
        target_in(&dir.0).write(Vec::new(), 0).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert!(std::fs::symlink_metadata(dir.0.join("4242.status")).unwrap().file_type().is_file());
    }

    /// `pid`'s start time, from its `/proc/<pid>/stat` (`None`: cannot be read).
    fn start_time_of(pid: u32) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        status_record::start_time_from_stat(&stat)
    }

    #[test]
    fn the_sweep_removes_the_records_of_dead_writers_and_only_those() {
        use crate::internal::status_record::ProcessRecord;

        let dir = TempDir::new();
        let publish = |record: &ProcessRecord| {
            std::fs::write(dir.0.join(status_record::file_name(record.pid)), status_record::render(record))
                .unwrap();
        };
        let me = std::process::id();
        let our_ns = std::fs::read_link("/proc/self/ns/pid")
            .ok()
            .and_then(|link| status_record::pid_ns_from_link(link.to_str()?))
            .expect("this process's PID namespace");
        let ours = ProcessRecord {
            pid: me,
            start_time: start_time_of(me).expect("this process's start time"),
            pid_ns: Some(our_ns),
            ..ProcessRecord::default()
        };
        // PID_MAX_LIMIT is 2^22: no process ever has this pid, so its writer is surely gone.
        let dead = ProcessRecord {
            pid: 4_194_304 + 7,
            start_time: 1,
            pid_ns: Some(our_ns),
            ..ProcessRecord::default()
        };
        // The same, but without its namespace: it may be another namespace's, so it stays.
        let unknown = ProcessRecord { pid: 4_194_304 + 9, start_time: 1, ..ProcessRecord::default() };
        // Written in another PID namespace (no namespace's inode is 1): not ours to judge.
        let foreign =
            ProcessRecord { pid: 4_194_304 + 8, start_time: 1, pid_ns: Some(1), ..ProcessRecord::default() };
        for record in [&ours, &dead, &foreign, &unknown] {
            publish(record);
        }
        // Another live process's record (our parent's, where its start time can be read).
        let parent = std::os::unix::process::parent_id();
        let theirs = start_time_of(parent).filter(|_| parent != 0 && parent != me).map(|start_time| {
            ProcessRecord { pid: parent, start_time, pid_ns: Some(our_ns), ..ProcessRecord::default() }
        });
        if let Some(theirs) = &theirs {
            publish(theirs);
        }

        sweep(&dir.0, status_scan::euid());

        let exists = |pid: u32| dir.0.join(status_record::file_name(pid)).exists();
        assert!(!exists(dead.pid), "a dead writer's record is removed");
        assert!(exists(me), "a live writer's record stays");
        assert!(exists(foreign.pid), "another namespace's record stays");
        assert!(exists(unknown.pid), "a record of an unknown namespace stays");
        if let Some(theirs) = &theirs {
            assert!(exists(theirs.pid), "another live process's record stays");
        }
        let after = status_scan::scan(&dir.0, status_scan::euid(), std::path::Path::new("/proc"), false)
            .expect("the folder stays readable");
        assert!(after.live.iter().any(|live| live.record.pid == me), "{after:?}");
        assert_eq!(after.other_namespace, vec![foreign.pid]);
    }

    #[test]
    fn publishing_waits_for_its_interval() {
        let mut publisher = Publisher::new();
        let now = Instant::now();
        assert!(publisher.due(now), "the first record at the first chance");
        publisher.next_at = Some(now + status_record::PUBLISH_EVERY);
        assert!(!publisher.due(now));
        assert!(publisher.due(now + status_record::PUBLISH_EVERY));
        publisher.state = State::Off;
        assert!(!publisher.due(now + status_record::PUBLISH_EVERY * 10), "off stays off");
    }
}

//! The status records of this user's cooperating pools, as `cotenant top` and the doctor read
//! them. The scan itself (the folder checked before it is trusted, each record read without
//! following a link and parsed by the library's own parser, only the records of live writers
//! kept, stale ones removed) lives in the library, `cotenant::internal::status_scan`, whose
//! module documentation states the liveness and ownership rules: the pools' publisher sweeps
//! its user's folder with it once per process, so `top` is no longer the only one that cleans.
//! This module re-exports it, with [`scan`] and [`check_dir`] answering in `anyhow` for the
//! command, and adds what only the command and the doctor need: where a user's records are
//! ([`dir_for_user`]).
//!
//! In short: a record is shown only while its writer lives (same start time, not a zombie); a
//! stale one is removed by a cleaning scan only if it is a regular file owned by the reader and
//! still the file that was read; a record of another PID namespace is neither shown nor
//! removed; a folder is trusted only if it is a real folder owned by the writers' user that
//! nobody else can write.
//!
//! The rest is pure, for tests fed by recorded values: the CPU share between two readings
//! ([`CpuMeter`]), the order of the view ([`sort_by_cpu`]) and the doctor's cooperating
//! neighbours ([`cooperating_neighbours`]).

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cotenant::internal::status_record::{self, PoolRecord, ProcessRecord};
use cotenant::internal::status_scan;
use serde::Serialize;

pub use cotenant::internal::status_scan::{euid, liveness, liveness_of, LiveRecord, Liveness, Scan};

/// The folder where user `uid`'s pools publish (the library's rule, `status_record::dir_from`,
/// with this process's environment): `COTENANT_STATUS_DIR`, else
/// `/dev/shm/cotenant-status-<uid>`, else `$XDG_RUNTIME_DIR/cotenant-status`; `None` where the
/// host has none of them.
pub fn dir_for_user(uid: u32) -> anyhow::Result<Option<PathBuf>> {
    status_record::dir_from(
        uid,
        std::env::var_os(status_record::STATUS_DIR_ENV).as_deref(),
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
        Path::new(status_record::DEV_SHM).is_dir(),
    )
    .map_err(anyhow::Error::msg)
}

/// Refuses a folder that others could write ([`status_scan::check_dir`], whose module
/// documentation gives the rule); the error names the folder and what is wrong with it.
pub fn check_dir(dir: &Path, meta: &fs::Metadata, owner: u32) -> anyhow::Result<()> {
    status_scan::check_dir(dir, meta, owner).map_err(anyhow::Error::msg)
}

/// Scans `dir`, which must belong to `owner` ([`check_dir`]), keeping the records of live
/// writers (liveness read under `proc_root`, `/proc` on a live host). With `clean`, stale
/// records and leftover temporary files owned by this process's user are removed
/// ([`status_scan::scan`]; its errors name the folder).
pub fn scan(dir: &Path, owner: u32, proc_root: &Path, clean: bool) -> anyhow::Result<Scan> {
    status_scan::scan(dir, owner, proc_root, clean).map_err(anyhow::Error::from)
}

/// One pool as `cotenant top` shows it (`--json`: field names documented in `docs/top.md`;
/// added to, never renamed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolView {
    /// The pool's name.
    pub name: String,
    /// Its policy.
    pub policy: String,
    /// Its threads (an elastic pool's alive now).
    pub threads: u64,
    /// Workers allowed to run.
    pub target: u64,
    /// Workers running tasks.
    pub running: u64,
    /// Tasks queued.
    pub queued: u64,
    /// Tasks completed.
    pub completed: u64,
    /// Host-token state: off, unavailable, alone, engaged.
    pub tokens: String,
    /// The token set it shares.
    pub token_set: Option<String>,
    /// That set's tokens.
    pub token_count: Option<u32>,
    /// Its workers holding a token now.
    pub token_holds: u64,
    /// Its workers waiting for a token now.
    pub token_waits: Option<u64>,
    /// 99th percentile of queue wait since the pool started (ns).
    pub p99_queue_wait_ns: Option<u64>,
}

impl From<&PoolRecord> for PoolView {
    fn from(pool: &PoolRecord) -> Self {
        PoolView {
            name: pool.name.clone(),
            policy: pool.policy.clone(),
            threads: pool.threads,
            target: pool.target,
            running: pool.running,
            queued: pool.queued,
            completed: pool.completed,
            tokens: pool.tokens.clone(),
            token_set: pool.token_set.clone(),
            token_count: pool.token_count,
            token_holds: pool.token_holds,
            token_waits: pool.token_waits,
            p99_queue_wait_ns: pool.p99_queue_wait_ns,
        }
    }
}

/// One process as `cotenant top` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessView {
    /// Its pid.
    pub pid: u32,
    /// Its command name.
    pub command: String,
    /// Its start time (clock ticks after boot), which tells it from a later process of the
    /// same pid.
    pub start_time: u64,
    /// Its CPU use between the last two readings, in % of one CPU (`None`: one reading only).
    pub cpu_percent: Option<f64>,
    /// How long ago its record was written, ms.
    pub record_age_ms: Option<u64>,
    /// Records it failed to write.
    pub publish_failures: u64,
    /// Its pools.
    pub pools: Vec<PoolView>,
}

impl ProcessView {
    /// The view of `live`, with the CPU share measured by the caller.
    pub fn new(live: &LiveRecord, cpu_percent: Option<f64>) -> Self {
        let record = &live.record;
        ProcessView {
            pid: record.pid,
            command: record.comm.clone(),
            start_time: record.start_time,
            cpu_percent,
            record_age_ms: live.age.map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX)),
            publish_failures: record.publish_failures,
            pools: record.pools.iter().map(PoolView::from).collect(),
        }
    }
}

/// Orders the view: most CPU first, processes not measured yet last, then by pid.
pub fn sort_by_cpu(processes: &mut [ProcessView]) {
    processes.sort_by(|a, b| {
        let cpu = |p: &ProcessView| p.cpu_percent.filter(|c| c.is_finite());
        let by_cpu = match (cpu(a), cpu(b)) {
            (Some(x), Some(y)) => y.total_cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        by_cpu.then(a.pid.cmp(&b.pid))
    });
}

/// The CPU share of a process between two readings of its CPU time, in % of one CPU.
pub fn cpu_percent(
    ticks_before: u64,
    ticks_now: u64,
    elapsed: Duration,
    ticks_per_second: u64,
) -> Option<f64> {
    if elapsed.is_zero() || ticks_per_second == 0 {
        return None;
    }
    let cpu_seconds = ticks_now.saturating_sub(ticks_before) as f64 / ticks_per_second as f64;
    Some(100.0 * cpu_seconds / elapsed.as_secs_f64())
}

/// The CPU share of each writer between one scan and the next: keyed by pid and start time,
/// so that a reused pid starts afresh.
#[derive(Debug, Clone)]
pub struct CpuMeter {
    ticks_per_second: u64,
    last: HashMap<(u32, u64), (u64, Instant)>,
}

impl CpuMeter {
    /// A meter for a kernel counting `ticks_per_second` (`sysconf(_SC_CLK_TCK)`, see
    /// [`clock_ticks_per_second`]).
    pub fn new(ticks_per_second: u64) -> Self {
        CpuMeter { ticks_per_second, last: HashMap::new() }
    }

    /// The views of `live` read `at`, each with its CPU share since the previous call (`None`
    /// for a process seen for the first time). Forgets the processes no longer there.
    pub fn views(&mut self, live: &[LiveRecord], at: Instant) -> Vec<ProcessView> {
        let mut next = HashMap::with_capacity(live.len());
        let views = live
            .iter()
            .map(|l| {
                let key = (l.record.pid, l.record.start_time);
                let cpu = self.last.get(&key).and_then(|&(ticks, then)| {
                    cpu_percent(ticks, l.cpu_ticks, at.saturating_duration_since(then), self.ticks_per_second)
                });
                next.insert(key, (l.cpu_ticks, at));
                ProcessView::new(l, cpu)
            })
            .collect();
        self.last = next;
        views
    }
}

/// Clock ticks per second of `/proc/<pid>/stat`'s CPU times (100 when the system does not say).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// A process that shares a host CPU token set with the one diagnosed: its pools cooperate
/// with it (the tokens bound the tasks they run at once together).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Neighbour {
    /// Its pid.
    pub pid: u32,
    /// Its command name.
    pub command: String,
    /// The token sets it shares with the process diagnosed.
    pub token_sets: Vec<String>,
    /// Its pools on those sets, by name.
    pub pools: Vec<String>,
    /// Their threads, added up.
    pub threads: u64,
    /// Their targets, added up.
    pub target: u64,
}

/// The processes among `records` whose pools share a token set with a pool of `pid`'s record,
/// by pid (pure: the caller passes live records). Empty when `pid` has no record or no set.
pub fn cooperating_neighbours(records: &[ProcessRecord], pid: u32) -> Vec<Neighbour> {
    let sets: BTreeSet<&str> = records
        .iter()
        .filter(|r| r.pid == pid)
        .flat_map(|r| r.pools.iter().filter_map(|p| p.token_set.as_deref()))
        .collect();
    let mut neighbours: Vec<Neighbour> = records
        .iter()
        .filter(|r| r.pid != pid)
        .filter_map(|r| {
            let shared: Vec<&PoolRecord> =
                r.pools.iter().filter(|p| p.token_set.as_deref().is_some_and(|s| sets.contains(s))).collect();
            if shared.is_empty() {
                return None;
            }
            let token_sets: BTreeSet<String> = shared.iter().filter_map(|p| p.token_set.clone()).collect();
            Some(Neighbour {
                pid: r.pid,
                command: r.comm.clone(),
                token_sets: token_sets.into_iter().collect(),
                pools: shared.iter().map(|p| p.name.clone()).collect(),
                threads: shared.iter().map(|p| p.threads).sum(),
                target: shared.iter().map(|p| p.target).sum(),
            })
        })
        .collect();
    neighbours.sort_by_key(|n| n.pid);
    neighbours
}

/// The doctor's question for a live process: the cooperating neighbours of `pid`, from the
/// records in its user's folder (read under `root`, `/` on a live host; nothing is removed).
/// No folder, or none for this host: no neighbours.
pub fn neighbours_of(root: &Path, pid: u32) -> anyhow::Result<Vec<Neighbour>> {
    let proc_root = root.join("proc");
    let owner = fs::metadata(proc_root.join(pid.to_string()))
        .with_context(|| format!("process {pid} is not running"))?
        .uid();
    let Some(dir) = dir_for_user(owner)? else { return Ok(Vec::new()) };
    let dir = root.join(dir.strip_prefix("/").unwrap_or(dir.as_path()));
    let scan = scan(&dir, owner, &proc_root, false)?;
    let records: Vec<ProcessRecord> = scan.live.into_iter().map(|live| live.record).collect();
    Ok(cooperating_neighbours(&records, pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc/<pid>/stat` line with this start time, state and utime + stime.
    fn stat(pid: u32, state: char, ticks: u64, start: u64) -> String {
        // Fields 3.. after the name: state, then 4-13, utime (14), stime, 16-21, start (22), 23, 24.
        let fields_7_to_13 = "0 -1 4194560 100 0 0 0";
        format!(
            "{pid} (worker (x)) {state} 1 {pid} {pid} {fields_7_to_13} {ticks} 0 0 0 20 0 3 0 {start} 1 2\n"
        )
    }

    fn record(pid: u32, start_time: u64, pools: &[(&str, Option<&str>)]) -> ProcessRecord {
        ProcessRecord {
            pid,
            start_time,
            comm: format!("p{pid}"),
            pools: pools
                .iter()
                .map(|&(name, set)| PoolRecord {
                    name: name.into(),
                    threads: 2,
                    target: 1,
                    tokens: if set.is_some() { "engaged".into() } else { "off".into() },
                    token_set: set.map(str::to_owned),
                    token_count: set.map(|_| 2),
                    ..PoolRecord::default()
                })
                .collect(),
            pid_ns: Some(111),
            ..ProcessRecord::default()
        }
    }

    #[test]
    fn a_writer_is_alive_only_with_the_same_start_time_and_not_a_zombie() {
        assert_eq!(liveness_of(Some(&stat(7, 'S', 42, 1000)), 1000), Liveness::Alive { cpu_ticks: 42 });
        assert_eq!(liveness_of(Some(&stat(7, 'R', 42, 1001)), 1000), Liveness::Gone, "a reused pid");
        assert_eq!(liveness_of(Some(&stat(7, 'Z', 42, 1000)), 1000), Liveness::Gone, "a zombie");
        assert_eq!(liveness_of(None, 1000), Liveness::Gone, "no such process");
        assert_eq!(liveness_of(Some("7 (cut"), 1000), Liveness::Unknown);
    }

    /// A fixture: a private status folder and a fake `/proc`, removed when dropped.
    struct Fixture {
        root: PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            use std::os::unix::fs::DirBuilderExt as _;
            let root = crate::private_dir::fresh_temp("cotenant-status-test").expect("mkdtemp");
            // 0700 whatever the umask: a folder others may write is refused.
            fs::DirBuilder::new().mode(0o700).create(root.join("status")).unwrap();
            fs::create_dir(root.join("proc")).unwrap();
            // The reader's PID namespace, 111, that of every record of `record()`: a stale
            // record is removed only when both namespaces are known and the same.
            fs::create_dir_all(root.join("proc").join("self").join("ns")).unwrap();
            std::os::unix::fs::symlink("pid:[111]", root.join("proc").join("self").join("ns").join("pid"))
                .unwrap();
            Fixture { root }
        }

        fn dir(&self) -> PathBuf {
            self.root.join("status")
        }

        fn proc(&self) -> PathBuf {
            self.root.join("proc")
        }

        fn process(&self, pid: u32, state: char, ticks: u64, start: u64) {
            fs::create_dir_all(self.proc().join(pid.to_string())).unwrap();
            fs::write(self.proc().join(pid.to_string()).join("stat"), stat(pid, state, ticks, start))
                .unwrap();
        }

        fn publish(&self, record: &ProcessRecord) {
            fs::write(self.dir().join(status_record::file_name(record.pid)), status_record::render(record))
                .unwrap();
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    #[test]
    fn a_scan_keeps_live_writers_and_removes_the_records_of_dead_ones() {
        let fixture = Fixture::new();
        fixture.process(10, 'S', 5, 100);
        fixture.process(11, 'S', 5, 999); // pid 11 was reused by a process that started later
        fixture.process(12, 'Z', 5, 300);
        for (pid, start) in [(10, 100), (11, 110), (12, 300), (13, 130)] {
            fixture.publish(&record(pid, start, &[("p", Some("web"))]));
        }
        let leftover = fixture.dir().join(".13.status.tmp");
        fs::write(&leftover, "half").unwrap();
        let a_minute_ago = std::time::SystemTime::now() - Duration::from_secs(60);
        fs::File::options().write(true).open(&leftover).unwrap().set_modified(a_minute_ago).unwrap();
        fs::write(fixture.dir().join(".15.status.tmp"), "being written").unwrap(); // new: spared
        fs::write(fixture.dir().join("14.status"), "not a record\n").unwrap();
        fs::write(fixture.dir().join("notes.txt"), "ignored").unwrap();

        let looked = scan(&fixture.dir(), euid(), &fixture.proc(), false).unwrap();
        assert_eq!(looked.live.iter().map(|l| l.record.pid).collect::<Vec<_>>(), vec![10]);
        assert!(looked.removed.is_empty(), "a scan without cleaning removes nothing");
        assert!(fixture.dir().join("11.status").exists());
        assert_eq!(looked.problems.len(), 1, "{:?}", looked.problems);
        assert!(looked.problems[0].contains("14.status") && looked.problems[0].contains("line 1"));

        let cleaned = scan(&fixture.dir(), euid(), &fixture.proc(), true).unwrap();
        assert_eq!(cleaned.live.len(), 1);
        assert_eq!(cleaned.removed, vec![11, 12, 13, 13], "three stale records and a temporary file");
        for gone in ["11.status", "12.status", "13.status", ".13.status.tmp"] {
            assert!(!fixture.dir().join(gone).exists(), "{gone}");
        }
        assert!(fixture.dir().join(".15.status.tmp").exists(), "a temporary file just written stays");
        assert!(fixture.dir().join("10.status").exists() && fixture.dir().join("14.status").exists());
    }

    #[test]
    fn a_stale_record_without_its_pid_namespace_is_left_in_place() {
        let fixture = Fixture::new();
        fixture.publish(&ProcessRecord { pid_ns: None, ..record(40, 400, &[]) }); // no pid 40 here
        let cleaned = scan(&fixture.dir(), euid(), &fixture.proc(), true).unwrap();
        assert!(cleaned.removed.is_empty());
        assert!(fixture.dir().join("40.status").exists(), "perhaps another namespace's live process");
        assert_eq!(cleaned.problems.len(), 1, "{:?}", cleaned.problems);
        assert!(cleaned.problems[0].contains("namespace"), "{:?}", cleaned.problems);
    }

    #[test]
    fn a_record_of_another_pid_namespace_is_neither_shown_nor_removed() {
        let fixture = Fixture::new(); // the reader's namespace is 111
        fixture.process(30, 'S', 1, 300);
        fixture.process(31, 'S', 1, 310);
        fixture.publish(&ProcessRecord { pid_ns: Some(222), ..record(30, 300, &[]) });
        fixture.publish(&ProcessRecord { pid_ns: Some(111), ..record(31, 310, &[]) });
        fixture.publish(&ProcessRecord { pid_ns: Some(222), ..record(32, 320, &[]) }); // no such pid here
        let scanned = scan(&fixture.dir(), euid(), &fixture.proc(), true).unwrap();
        assert_eq!(scanned.live.iter().map(|l| l.record.pid).collect::<Vec<_>>(), vec![31]);
        assert_eq!(scanned.other_namespace, vec![30, 32]);
        assert!(scanned.removed.is_empty());
        assert!(fixture.dir().join("32.status").exists(), "not ours to judge");
    }

    #[test]
    fn a_symbolic_link_is_neither_read_nor_removed() {
        let fixture = Fixture::new();
        let elsewhere = fixture.root.join("elsewhere");
        fs::write(&elsewhere, status_record::render(&record(20, 1, &[]))).unwrap();
        std::os::unix::fs::symlink(&elsewhere, fixture.dir().join("20.status")).unwrap();
        let scanned = scan(&fixture.dir(), euid(), &fixture.proc(), true).unwrap();
        assert!(scanned.live.is_empty() && scanned.removed.is_empty());
        assert!(scanned.problems[0].contains("symbolic link"), "{:?}", scanned.problems);
        assert!(elsewhere.exists() && fs::symlink_metadata(fixture.dir().join("20.status")).is_ok());
    }

    #[test]
    fn an_untrusted_or_missing_folder_is_said_so() {
        let fixture = Fixture::new();
        let missing = scan(&fixture.root.join("nothing-here"), euid(), &fixture.proc(), true).unwrap();
        assert!(missing.missing && missing.live.is_empty());
        let wrong_owner = scan(&fixture.dir(), euid().wrapping_add(1), &fixture.proc(), true).unwrap_err();
        assert!(format!("{wrong_owner:#}").contains("not trusted: it is owned by uid"), "{wrong_owner:#}");
        let link = fixture.root.join("link");
        std::os::unix::fs::symlink(fixture.dir(), &link).unwrap();
        let linked = scan(&link, euid(), &fixture.proc(), true).unwrap_err();
        assert!(format!("{linked:#}").contains("symbolic link"), "{linked:#}");
    }

    #[test]
    fn cpu_share_is_measured_between_readings_and_sorted_most_first() {
        assert_eq!(cpu_percent(100, 150, Duration::from_millis(500), 100), Some(100.0));
        assert_eq!(cpu_percent(100, 110, Duration::from_secs(1), 100), Some(10.0));
        assert_eq!(cpu_percent(100, 90, Duration::from_secs(1), 100), Some(0.0), "never negative");
        assert_eq!(cpu_percent(1, 2, Duration::ZERO, 100), None);

        let at = Instant::now();
        let live =
            |pid: u32, ticks: u64| LiveRecord { record: record(pid, 1, &[]), cpu_ticks: ticks, age: None };
        let mut meter = CpuMeter::new(100);
        let first = meter.views(&[live(1, 0), live(2, 0)], at);
        assert!(first.iter().all(|v| v.cpu_percent.is_none()), "one reading: no share yet");
        let mut second = meter.views(&[live(1, 10), live(2, 40), live(3, 0)], at + Duration::from_secs(1));
        sort_by_cpu(&mut second);
        let order: Vec<(u32, Option<f64>)> = second.iter().map(|v| (v.pid, v.cpu_percent)).collect();
        assert_eq!(order, vec![(2, Some(40.0)), (1, Some(10.0)), (3, None)]);
    }

    #[test]
    fn neighbours_are_the_processes_sharing_a_token_set() {
        let records = [
            record(1, 1, &[("api", Some("web")), ("batch", None)]),
            record(2, 1, &[("worker", Some("web")), ("other", Some("elsewhere"))]),
            record(3, 1, &[("lonely", Some("elsewhere"))]),
            record(4, 1, &[("plain", None)]),
        ];
        let found = cooperating_neighbours(&records, 1);
        assert_eq!(
            found,
            vec![Neighbour {
                pid: 2,
                command: "p2".into(),
                token_sets: vec!["web".into()],
                pools: vec!["worker".into()],
                threads: 2,
                target: 1,
            }]
        );
        assert_eq!(cooperating_neighbours(&records, 2).iter().map(|n| n.pid).collect::<Vec<_>>(), vec![1, 3]);
        assert!(cooperating_neighbours(&records, 4).is_empty(), "no set, no neighbours");
        assert!(cooperating_neighbours(&records, 99).is_empty(), "no record, no neighbours");
    }
}

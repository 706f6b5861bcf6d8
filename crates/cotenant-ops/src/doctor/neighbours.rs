//! The process's cooperating neighbours: the other live processes whose pools share a host CPU
//! token set with one of its pools, named from the status records that pools publish
//! (`crate::status`, read as `cotenant top` reads them; `docs/top.md`).
//!
//! The doctor scans the folder itself rather than calling `status::neighbours_of` because the
//! report must tell apart three answers that an empty list would blur: the process publishes no
//! record (it runs no pool that publishes, so nobody can be named), it publishes one and shares
//! its token sets with nobody, or the records could not be read. The last one is a line of the
//! report, never a failed diagnosis. Nothing is removed: a stale record is `top`'s to clean, and
//! the doctor, often run as root, writes nothing anywhere.

use crate::status::{self, Neighbour};
use cotenant::internal::status_record::ProcessRecord;
use serde::Serialize;
use std::{fs, os::unix::fs::MetadataExt as _, path::Path};

/// How every text line about the neighbours starts, whatever the answer.
pub const LABEL: &str = "cooperating neighbours (sharing host CPU tokens)";

/// What the status records say about the process's cooperating neighbours
/// (`cooperating_neighbours` in `--json`, documented in `docs/doctor.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cooperation {
    /// The status folder read; `null` when the host has none (no `/dev/shm` and no
    /// `$XDG_RUNTIME_DIR`) or it could not be told.
    pub status_dir: Option<String>,
    /// Whether the process publishes a live status record there, i.e. runs a cotenant pool that
    /// publishes one.
    pub published: bool,
    /// The other live processes whose pools share a token set with one of its pools, by pid;
    /// empty when it shares its sets with nobody or publishes no record.
    pub neighbours: Vec<Neighbour>,
    /// Why the records could not be read (a sentence naming the folder); `null` when they were.
    pub error: Option<String>,
}

impl Cooperation {
    /// The answer when the records could not be read.
    pub fn failed(status_dir: Option<&Path>, error: String) -> Self {
        Cooperation {
            status_dir: status_dir.map(|d| d.display().to_string()),
            published: false,
            neighbours: Vec::new(),
            error: Some(error),
        }
    }

    /// The answer for `pid` from the live `records` read in `dir` (pure; `None`: the host has
    /// no status folder, and `records` is then empty).
    pub fn from_records(dir: Option<&Path>, records: &[ProcessRecord], pid: u32) -> Self {
        Cooperation {
            status_dir: dir.map(|d| d.display().to_string()),
            published: records.iter().any(|r| r.pid == pid),
            neighbours: status::cooperating_neighbours(records, pid),
            error: None,
        }
    }

    /// The one line of the text report about process `pid`'s neighbours (pure).
    pub fn line(&self, pid: u32) -> String {
        if let Some(error) = &self.error {
            // The folder is named whatever the error's own wording.
            return match &self.status_dir {
                Some(dir) if !error.contains(dir.as_str()) => {
                    format!("{LABEL}: cannot tell: {} (status folder {dir})", shown(error))
                }
                _ => format!("{LABEL}: cannot tell: {}", shown(error)),
            };
        }
        if !self.published {
            let where_ = match &self.status_dir {
                Some(dir) => format!("none in {}", shown(dir)),
                None => "this host has no status folder: no /dev/shm and no $XDG_RUNTIME_DIR".to_owned(),
            };
            return format!(
                "{LABEL}: process {pid} runs no cotenant pool that publishes a status record ({where_}), \
                 so as far as the records show it cooperates with nobody through host CPU tokens"
            );
        }
        if self.neighbours.is_empty() {
            return format!("{LABEL}: none");
        }
        let named: Vec<String> = self.neighbours.iter().map(neighbour).collect();
        format!("{LABEL}: {}", named.join(", "))
    }
}

/// `pid 4243 batch (set web: pools a, b; target 2 of 4 threads)`.
fn neighbour(n: &Neighbour) -> String {
    let who = if n.command.is_empty() {
        format!("pid {}", n.pid)
    } else {
        format!("pid {} {}", n.pid, shown(&n.command))
    };
    let list = |one: &str, many: &str, names: &[String]| {
        let names: Vec<String> = names.iter().map(|s| shown(s)).collect();
        format!("{} {}", if names.len() == 1 { one } else { many }, names.join(", "))
    };
    format!(
        "{who} ({}: {}; target {} of {} threads)",
        list("set", "sets", n.token_sets.as_slice()),
        list("pool", "pools", n.pools.as_slice()),
        n.target,
        n.threads
    )
}

/// A name from a record as one line: another process wrote it, and a line break in it would
/// forge a line of the report, so control characters are shown escaped.
pub(crate) fn shown(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.escape_debug().to_string()
    } else {
        text.to_owned()
    }
}

/// The cooperating neighbours of live process `pid`, from the records in its owner's status
/// folder (`status::dir_for_user`: `$COTENANT_STATUS_DIR`, else
/// `/dev/shm/cotenant-status-<uid>`, else `$XDG_RUNTIME_DIR/cotenant-status`), read under
/// `root` (`/` on a live host; a fixture tree in tests). Never fails: what went wrong is
/// [`Cooperation::error`].
pub fn look(root: &Path, pid: u32) -> Cooperation {
    let proc_root = root.join("proc");
    // The owner's folder, which the owner alone may write: a record elsewhere could be faked.
    let owner = match fs::metadata(proc_root.join(pid.to_string())) {
        Ok(meta) => meta.uid(),
        Err(e) => {
            return Cooperation::failed(None, format!("cannot tell which user process {pid} runs as: {e}"))
        }
    };
    let dir = match status::dir_for_user(owner) {
        Ok(Some(dir)) => dir,
        Ok(None) => return Cooperation::from_records(None, &[], pid),
        Err(e) => {
            return Cooperation::failed(None, format!("cannot tell where status records are kept: {e:#}"))
        }
    };
    // Under a fixture root the folder is read there too, like `/proc` and `/sys`.
    let dir = root.join(dir.strip_prefix("/").unwrap_or(dir.as_path()));
    look_in(&dir, owner, &proc_root, pid)
}

/// [`look`] in folder `dir`, which must belong to `owner`, with the writers' liveness read
/// under `proc_root`.
pub fn look_in(dir: &Path, owner: u32, proc_root: &Path, pid: u32) -> Cooperation {
    match status::scan(dir, owner, proc_root, false) {
        Ok(scan) => {
            let records: Vec<ProcessRecord> = scan.live.into_iter().map(|live| live.record).collect();
            Cooperation::from_records(Some(dir), &records, pid)
        }
        // The scan's errors name the folder ("the status folder ... is not trusted: ...").
        Err(e) => Cooperation::failed(Some(dir), format!("{e:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant::internal::status_record::{self, PoolRecord};
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    use std::path::PathBuf;

    /// A record of `pid` whose pools are `(name, token set, target, threads)`.
    fn record(pid: u32, comm: &str, pools: &[(&str, Option<&str>, u64, u64)]) -> ProcessRecord {
        ProcessRecord {
            pid,
            start_time: 1000 + u64::from(pid),
            comm: comm.into(),
            pools: pools
                .iter()
                .map(|&(name, set, target, threads)| PoolRecord {
                    name: name.into(),
                    threads,
                    target,
                    tokens: if set.is_some() { "engaged".into() } else { "off".into() },
                    token_set: set.map(str::to_owned),
                    token_count: set.map(|_| 2),
                    ..PoolRecord::default()
                })
                .collect(),
            ..ProcessRecord::default()
        }
    }

    const DIR: &str = "/dev/shm/cotenant-status-1000";

    #[test]
    fn the_line_names_the_neighbours_with_their_sets_pools_and_targets() {
        let records = [
            record(4242, "api", &[("cpu", Some("web"), 2, 2), ("io", None, 8, 8)]),
            record(4243, "batch", &[("work", Some("web"), 1, 2), ("more", Some("web"), 1, 2)]),
            record(4250, "report gen", &[("only", Some("web"), 1, 1), ("other", Some("night"), 3, 3)]),
            record(4260, "elsewhere", &[("x", Some("night"), 1, 1)]),
        ];
        let c = Cooperation::from_records(Some(Path::new(DIR)), &records, 4242);
        assert!(c.published && c.error.is_none());
        assert_eq!(c.neighbours.iter().map(|n| n.pid).collect::<Vec<_>>(), [4243, 4250]);
        assert_eq!(
            c.line(4242),
            "cooperating neighbours (sharing host CPU tokens): \
             pid 4243 batch (set web: pools work, more; target 2 of 4 threads), \
             pid 4250 report gen (set web: pool only; target 1 of 1 threads)"
        );
        // Two shared sets, and a name that would break the line.
        let records = [
            record(1, "a", &[("p", Some("web"), 1, 1), ("q", Some("night"), 1, 1)]),
            record(2, "evil\nline", &[("p\n2", Some("web"), 1, 1), ("q", Some("night"), 1, 1)]),
        ];
        let line = Cooperation::from_records(Some(Path::new(DIR)), &records, 1).line(1);
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(
            line.ends_with(r"pid 2 evil\nline (sets night, web: pools p\n2, q; target 2 of 2 threads)"),
            "{line}"
        );
    }

    #[test]
    fn a_process_sharing_its_sets_with_nobody_has_none() {
        let records = [
            record(4242, "api", &[("cpu", Some("web"), 2, 2)]),
            record(4243, "batch", &[("work", Some("night"), 1, 2)]),
        ];
        let c = Cooperation::from_records(Some(Path::new(DIR)), &records, 4242);
        assert!(c.published && c.neighbours.is_empty());
        assert_eq!(c.line(4242), "cooperating neighbours (sharing host CPU tokens): none");
        // Pools without host tokens publish too, and share nothing.
        let c = Cooperation::from_records(
            Some(Path::new(DIR)),
            &[record(4242, "api", &[("a", None, 1, 1)])],
            4242,
        );
        assert_eq!(c.line(4242), "cooperating neighbours (sharing host CPU tokens): none");
    }

    #[test]
    fn a_process_without_a_record_runs_no_pool_that_publishes() {
        let records = [record(4243, "batch", &[("work", Some("web"), 1, 2)])];
        let c = Cooperation::from_records(Some(Path::new(DIR)), &records, 4242);
        assert!(!c.published && c.neighbours.is_empty());
        let line = c.line(4242);
        assert!(
            line.starts_with("cooperating neighbours (sharing host CPU tokens): process 4242 "),
            "{line}"
        );
        assert!(line.contains("runs no cotenant pool that publishes a status record"), "{line}");
        assert!(line.contains(&format!("none in {DIR}")), "{line}");
        assert!(line.contains("cooperates with nobody through host CPU tokens"), "{line}");
        let nowhere = Cooperation::from_records(None, &[], 4242).line(4242);
        assert!(nowhere.contains("this host has no status folder"), "{nowhere}");
    }

    #[test]
    fn records_that_cannot_be_read_are_one_line_naming_the_folder() {
        let c = Cooperation::failed(Some(Path::new(DIR)), "permission denied".into());
        assert_eq!(c.line(1), format!("{LABEL}: cannot tell: permission denied (status folder {DIR})"));
        let said = format!("the status folder {DIR} is not trusted: it is a symbolic link");
        let c = Cooperation::failed(Some(Path::new(DIR)), said.clone());
        assert_eq!(c.line(1), format!("{LABEL}: cannot tell: {said}"), "the folder named once");
        assert!(!c.published && c.neighbours.is_empty());
    }

    /// A private root with a fake `/proc` and a status folder, removed when dropped.
    struct Tree(PathBuf);

    impl Tree {
        fn new() -> Tree {
            let root = crate::private_dir::fresh_temp("cotenant-doctor-neighbours-test").expect("mkdtemp");
            // 0700 whatever the umask: a folder others may write is refused.
            fs::DirBuilder::new().mode(0o700).create(root.join("status")).unwrap();
            Tree(root)
        }

        fn status(&self) -> PathBuf {
            self.0.join("status")
        }

        fn proc(&self) -> PathBuf {
            self.0.join("proc")
        }

        /// A live process `pid` (sleeping) with the start time of [`record`]'s.
        fn alive(&self, pid: u32) {
            let dir = self.proc().join(pid.to_string());
            fs::create_dir_all(&dir).unwrap();
            // Fields 3 to 24: state, 4-13, utime, stime, 16-21, start time (22), 23, 24.
            let start = 1000 + u64::from(pid);
            let stat = format!(
                "{pid} (p{pid}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 5 5 0 0 20 0 1 0 {start} 1 2\n"
            );
            fs::write(dir.join("stat"), stat).unwrap();
        }

        fn publish(&self, record: &ProcessRecord) {
            fs::write(
                self.status().join(status_record::file_name(record.pid)),
                status_record::render(record),
            )
            .unwrap();
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn only_live_writers_are_named_and_nothing_is_removed() {
        let tree = Tree::new();
        for pid in [10, 11] {
            tree.alive(pid);
        }
        tree.publish(&record(10, "api", &[("cpu", Some("web"), 2, 2)]));
        tree.publish(&record(11, "batch", &[("work", Some("web"), 1, 2)]));
        tree.publish(&record(12, "gone", &[("work", Some("web"), 1, 2)])); // no /proc/12: dead
        let c = look_in(&tree.status(), status::euid(), &tree.proc(), 10);
        assert_eq!(c.error, None);
        assert!(c.published);
        assert_eq!(c.neighbours.iter().map(|n| n.pid).collect::<Vec<_>>(), [11]);
        assert_eq!(c.status_dir.as_deref(), Some(tree.status().to_str().unwrap()));
        assert!(tree.status().join("12.status").exists(), "the doctor removes no stale record");
        // A live process without a record of its own.
        tree.alive(13);
        assert!(!look_in(&tree.status(), status::euid(), &tree.proc(), 13).published);
    }

    #[test]
    fn a_missing_folder_is_no_record_and_an_untrusted_one_an_error() {
        let tree = Tree::new();
        tree.alive(10);
        let missing = look_in(&tree.0.join("nothing-here"), status::euid(), &tree.proc(), 10);
        assert!(!missing.published && missing.error.is_none(), "{missing:?}");
        fs::set_permissions(tree.status(), fs::Permissions::from_mode(0o777)).unwrap();
        let open = look_in(&tree.status(), status::euid(), &tree.proc(), 10);
        let error = open.error.as_deref().expect("an error");
        assert!(error.contains("not trusted") && error.contains(tree.status().to_str().unwrap()), "{error}");
        assert!(open.line(10).contains(tree.status().to_str().unwrap()));
    }

    #[test]
    fn a_live_process_s_folder_is_read_under_the_root() {
        // No record anywhere under a fresh root: the process publishes none (or, where the
        // environment names a relative folder, the records cannot be read); never a panic.
        let tree = Tree::new();
        tree.alive(10);
        let c = look(&tree.0, 10);
        assert!(!c.published && c.neighbours.is_empty(), "{c:?}");
        let gone = look(&tree.0, 99);
        assert!(gone.error.as_deref().is_some_and(|e| e.contains("process 99")), "{gone:?}");
    }
}

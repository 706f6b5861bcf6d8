//! `cotenant doctor`: why is this process (or this host) slow on shared CPUs? Seed 003's
//! diagnostic sequence in one command, with evidence.
//!
//! Data flow: [`snapshot::take`] reads every file once (host, processes, cgroups, the target's
//! threads) → wait the sample duration → take a second snapshot → [`analyze::analyze`] (pure)
//! turns the pair into measurements and ranked findings → [`Report`] → [`render`] prints text or
//! JSON (schema in `docs/doctor.md`). [`diagnose`] is the whole pipeline, for the CLI and the lab.
//! With `--verify BEFORE.json` the CLI adds [`verify::compare`]'s comparison with a report saved
//! before a change ([`Report::verify`]); the doctor itself never changes anything. For a live
//! process, [`diagnose`] also names its cooperating neighbours from the status records pools
//! publish ([`neighbours::look`], [`Report::cooperating_neighbours`]).
//!
//! Nothing here fails: a file that cannot be read is listed in [`Report::not_read`] and the
//! findings that needed it are left out; a process that does not exist gives a host report with
//! a `process-not-found` finding first.

pub mod analyze;
pub mod neighbours;
pub mod render;
pub mod snapshot;
pub mod verify;

use analyze::{Finding, Measurements};
use serde::Serialize;
use snapshot::NotRead;
use std::{collections::BTreeSet, path::PathBuf, time::Duration, time::Instant};

/// The version of the `--json` shape (`docs/doctor.md`): bumped only by an incompatible
/// change, which the stability promise rules out; fields are added, never renamed.
pub const SCHEMA_VERSION: u32 = 1;

/// What to diagnose and how.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// The process; `None` for the whole host.
    pub pid: Option<u32>,
    /// Time between the two snapshots.
    pub duration: Duration,
    /// The directory standing in for `/` (a fixture tree in tests).
    pub root: PathBuf,
}

/// The diagnosis: findings ranked (most likely cause first), the measurements behind them, and
/// what could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The process diagnosed; `null` for the host.
    pub pid: Option<u32>,
    /// Its command name, when known.
    pub comm: Option<String>,
    /// The sample's real length, ms.
    pub duration_ms: u64,
    /// The root the files were read from (`/` on a live host).
    pub root: String,
    /// Whether something could not be read (see `not_read`), or the process is missing.
    pub partial: bool,
    /// Why the diagnosis of the process could not be made, if it could not.
    pub error: Option<String>,
    /// One line naming the top finding.
    pub summary: String,
    /// Ranked, most likely cause first; never empty.
    pub findings: Vec<Finding>,
    /// The numbers.
    pub measurements: Measurements,
    /// Files that could not be read, and why.
    pub not_read: Vec<NotRead>,
    /// Other processes whose files could not be read (exited or not permitted).
    pub unreadable_processes: u32,
    /// The processes whose pools share a host CPU token set with the process's, from the
    /// status records pools publish; `null` for the host, for a process that could not be
    /// diagnosed, and in reports of recorded snapshots ([`report`] reads no records).
    pub cooperating_neighbours: Option<neighbours::Cooperation>,
    /// The comparison with a report saved before a change (`--verify`); `null` without it.
    pub verify: Option<verify::Verification>,
}

impl Report {
    /// One line naming the top finding: `"cpu-contention: ..."`.
    pub fn summary(&self) -> String {
        match self.findings.first() {
            Some(f) => format!("{}: {}", f.kind, f.title),
            None => "nothing-wrong: no finding".into(),
        }
    }

    /// Whether the process asked about could not be diagnosed (missing or unreadable).
    pub fn process_missing(&self) -> bool {
        self.findings.iter().any(|f| matches!(f.kind, "process-not-found" | "process-unreadable"))
    }
}

/// Samples for `opts.duration` and diagnoses; for a live process, names its cooperating
/// neighbours too. Never fails.
pub fn diagnose(opts: &DoctorOptions) -> Report {
    let start = Instant::now();
    let before = snapshot::take(&opts.root, opts.pid);
    std::thread::sleep(opts.duration.saturating_sub(start.elapsed()));
    let after = snapshot::take(&opts.root, opts.pid);
    let elapsed = start.elapsed();
    let mut r = report(opts, &before, &after, elapsed);
    // Read after the sample, so that a pool started during it is seen; a process that is gone
    // has no neighbours to name.
    if let Some(pid) = opts.pid.filter(|_| !r.process_missing()) {
        r.cooperating_neighbours = Some(neighbours::look(&opts.root, pid));
    }
    r
}

/// The report of two snapshots taken `elapsed` apart (pure; the tests call it on fixtures).
pub fn report(
    opts: &DoctorOptions,
    before: &snapshot::Snapshot,
    after: &snapshot::Snapshot,
    elapsed: Duration,
) -> Report {
    let (measurements, findings) = analyze::analyze(before, after, elapsed);
    let mut seen = BTreeSet::new();
    let not_read: Vec<NotRead> = before
        .not_read
        .iter()
        .chain(&after.not_read)
        .filter(|n| seen.insert((n.file.clone(), n.reason.clone())))
        .cloned()
        .collect();
    let error = findings
        .iter()
        .find(|f| matches!(f.kind, "process-not-found" | "process-unreadable"))
        .map(|f| f.title.clone());
    let comm = after.target.as_ref().map(|t| t.comm.clone()).filter(|c| !c.is_empty());
    let mut r = Report {
        schema_version: SCHEMA_VERSION,
        pid: opts.pid,
        comm,
        duration_ms: elapsed.as_millis() as u64,
        root: opts.root.display().to_string(),
        partial: !not_read.is_empty() || error.is_some(),
        error,
        summary: String::new(),
        findings,
        measurements,
        not_read,
        unreadable_processes: after.unreadable_processes,
        cooperating_neighbours: None,
        verify: None,
    };
    r.summary = r.summary();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const PID: u32 = 4242;

    fn case(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/doctor").join(name)
    }

    /// The report of a fixture case: `before/` and `after/`, or one root used twice, 1 s apart.
    fn fixture(name: &str, pid: Option<u32>) -> Report {
        let dir = case(name);
        let (b, a) = if dir.join("before").is_dir() {
            (dir.join("before"), dir.join("after"))
        } else {
            (dir.clone(), dir)
        };
        let opts = DoctorOptions { pid, duration: Duration::from_secs(1), root: a.clone() };
        report(&opts, &snapshot::take(&b, pid), &snapshot::take(&a, pid), Duration::from_secs(1))
    }

    fn kinds(r: &Report) -> Vec<&'static str> {
        r.findings.iter().map(|f| f.kind).collect()
    }

    fn evidence<'a>(r: &'a Report, kind: &str, what: &str) -> &'a str {
        let f =
            r.findings.iter().find(|f| f.kind == kind).unwrap_or_else(|| panic!("no {kind}: {:?}", kinds(r)));
        let e = f.evidence.iter().find(|e| e.what.contains(what));
        &e.unwrap_or_else(|| panic!("{kind} has no evidence {what:?}: {:#?}", f.evidence)).value
    }

    #[test]
    fn fixture_v1_contention() {
        let r = fixture("v1-contention", Some(PID));
        assert_eq!(kinds(&r)[0], "cpu-contention", "{}", render::text(&r));
        assert!(r.summary.starts_with("cpu-contention: "), "{}", r.summary);
        let p = r.measurements.process.as_ref().unwrap();
        // 300 ms + 0 ms of wait for 400 ms + 0 ms of run: 0.75.
        assert_eq!((p.wait_ms, p.run_ms, p.wait_fraction), (300.0, 400.0, Some(0.75)));
        assert_eq!((p.threads, p.busy_threads), (2, 1));
        assert_eq!(p.migrations_per_s, Some(40.0));
        assert_eq!(p.involuntary_switches_per_s, Some(150.0));
        assert_eq!(p.voluntary_switches_per_s, Some(1.0));
        assert!(evidence(&r, "cpu-contention", "run-queue wait during").starts_with("300.0 ms"));
        assert_eq!(evidence(&r, "cpu-contention", "CPU used by other processes"), "1.60 CPUs");
        // /batch's 2048 shares against /victim's 1024, and their cpusets overlap.
        assert!(
            kinds(&r).contains(&"low-weight") && kinds(&r).contains(&"cpuset-overlap"),
            "{:?}",
            kinds(&r)
        );
        assert_eq!(evidence(&r, "low-weight", "this process's competing weight"), "1024");
        // The busy sibling /batch, on a kernel without cpu.idle: the weight remedy, a tenth of
        // ours (1024 shares = weight 100), right after the contention.
        assert_eq!(kinds(&r)[1], "busy-sibling-cgroup", "{}", render::text(&r));
        let sibling = &r.findings[1];
        assert_eq!(sibling.commands.len(), 1, "{:?}", sibling.commands);
        let command = &sibling.commands[0];
        assert!(
            command.starts_with("cotenant cgroup set ")
                && command.contains("/after/sys/fs/cgroup/cpu/batch")
                && command.ends_with(" --weight 10"),
            "{command}"
        );
        let idle = evidence(&r, "busy-sibling-cgroup", "cpu.idle of /batch");
        assert_eq!(idle, "absent (cpu.idle needs Linux 5.15 or later)");
        assert!(render::text(&r).contains(&format!("$ {command}")));
        assert!(kinds(&r).contains(&"cpu-pressure"));
        assert_eq!(r.measurements.host.psi_some, Some(0.6));
        assert_eq!(r.measurements.top_consumers[0].pid, 5000);
        assert!(r.measurements.top_consumers[0].overlaps);
        assert_eq!(r.measurements.cpus.binding.as_deref(), Some("online"));
        let n = r.measurements.numa.as_ref().unwrap();
        assert_eq!((n.nodes, n.remote_fraction), (1, Some(0.0)));
        assert!(!kinds(&r).contains(&"numa-remote-memory"));
        assert!(r.error.is_none() && !r.process_missing());
    }

    #[test]
    fn fixture_v2_throttling_at_the_ancestor_ranks_before_contention() {
        let r = fixture("v2-throttling", Some(PID));
        let k = kinds(&r);
        assert_eq!(k[0], "throttling", "{}", render::text(&r));
        assert_eq!(k[1], "cpu-contention", "{k:?}");
        let top = &r.findings[0];
        assert!(top.title.contains("ancestor cgroup /app"), "{}", top.title);
        assert_eq!(evidence(&r, "throttling", "nr_throttled during"), "9");
        assert_eq!(evidence(&r, "throttling", "nr_periods during"), "10");
        assert_eq!(evidence(&r, "throttling", "ratio during"), "90.0%");
        assert!(evidence(&r, "throttling", "throttled time during").starts_with("720.0 ms"));
        assert_eq!(evidence(&r, "throttling", "CPU quota"), "0.2 CPU");
        assert!(top.evidence[0].file.ends_with("sys/fs/cgroup/app/cpu.stat"), "{:?}", top.evidence[0]);
        // Two busy threads for a budget of 1 (floor of 0.2 is at least 1).
        assert!(k.contains(&"oversized-pool"), "{k:?}");
        assert_eq!(r.measurements.cpus.threads, Some(1));
        assert_eq!(r.measurements.cpus.binding_cgroup.as_deref(), Some("/app"));
        // Levels leaf first, with the sample's deltas; v2 pressure of the leaf.
        let levels: Vec<&str> = r.measurements.cgroups.iter().map(|c| c.cgroup.as_str()).collect();
        assert_eq!(levels, ["/app/worker", "/app", "/"]);
        assert_eq!(r.measurements.cgroups[0].pressure_some, Some(0.8));
        assert_eq!(r.measurements.cgroups[1].throttled_ratio_total, Some(0.264));
        // NUMA: threads on node 0, 300 of 1000 pages on node 1.
        assert!(k.contains(&"numa-remote-memory"), "{k:?}");
        assert_eq!(r.measurements.numa.as_ref().unwrap().remote_fraction, Some(0.3));
    }

    #[test]
    fn fixture_without_cgroup_controllers_is_a_partial_report() {
        let r = fixture("no-cgroup-controllers", Some(PID));
        assert_eq!(kinds(&r), ["nothing-wrong"], "{}", render::text(&r));
        assert!(r.partial);
        let text = render::text(&r);
        for missing in ["no cpu controller", "no cpuset controller", "pressure/cpu", "system/node"] {
            assert!(text.contains(missing), "{missing} not in:\n{text}");
        }
        assert!(r.measurements.cgroups.is_empty());
        assert_eq!(r.measurements.cpus.allowed.as_deref(), Some("0-1"));
    }

    #[test]
    fn fixture_with_unreadable_pid_files() {
        let r = fixture("unreadable-pid-files", Some(PID));
        assert_eq!(kinds(&r)[0], "process-unreadable");
        assert!(r.process_missing() && r.partial);
        assert!(r.not_read.iter().any(|n| n.file.ends_with("proc/4242/stat")), "{:?}", r.not_read);
        assert!(r.measurements.process.is_none());
    }

    #[test]
    fn fixture_missing_pid_gives_a_host_report() {
        let r = fixture("v1-contention", Some(777));
        assert_eq!(kinds(&r)[0], "process-not-found");
        assert!(r.error.as_deref().unwrap().contains("777"));
        assert!(r.measurements.host.psi_some.is_some() && !r.measurements.top_consumers.is_empty());
        assert!(r.not_read.iter().any(|n| n.file.ends_with("proc/777")));
    }

    #[test]
    fn fixture_host_mode() {
        let r = fixture("v2-throttling", None);
        assert_eq!(kinds(&r)[0], "throttling", "{}", render::text(&r));
        assert!(r.findings[0].title.contains("cgroup /app"));
        assert!(r.measurements.process.is_none());
        // Only the throttled cgroup is listed for the host.
        let levels: Vec<&str> = r.measurements.cgroups.iter().map(|c| c.cgroup.as_str()).collect();
        assert_eq!(levels, ["/app"]);
    }

    /// Users have no seed numbers and no issue tracker: no finding, evidence, remedy or line of
    /// the report, as text or as JSON, names one. Every fixture case is rendered, with a pid and
    /// for the host; the fixture root's own path is masked (a checkout may live under any name).
    #[test]
    fn reports_name_no_source_document_or_issue() {
        let cases = [
            ("v1-contention", Some(PID)),
            ("v1-contention", Some(777)),
            ("v1-contention", None),
            ("v2-throttling", Some(PID)),
            ("v2-throttling", None),
            ("no-cgroup-controllers", Some(PID)),
            ("no-cgroup-controllers", None),
            ("unreadable-pid-files", Some(PID)),
        ];
        let mut kinds_seen = BTreeSet::new();
        for (name, pid) in cases {
            let r = fixture(name, pid);
            kinds_seen.extend(kinds(&r));
            let root = case(name).display().to_string();
            for output in [render::text(&r), render::json(&r)] {
                let output = output.replace(&root, "<root>");
                for line in output.lines() {
                    let lower = line.to_lowercase();
                    for word in ["seed", "issue", "§"] {
                        assert!(!lower.contains(word), "{name}, pid {pid:?}: says {word:?}: {line}");
                    }
                }
            }
        }
        // The remedies that once named a source are among those checked.
        for kind in ["cpu-contention", "low-weight", "cpuset-overlap", "migrations", "throttling"] {
            assert!(kinds_seen.contains(kind), "no fixture gives {kind}: {kinds_seen:?}");
        }
    }

    /// The neighbours' line comes right after the findings, before the numbers, and the JSON
    /// carries the same answer with the documented fields.
    #[test]
    fn the_cooperating_neighbours_follow_the_findings() {
        use cotenant::internal::status_record::{PoolRecord, ProcessRecord};
        let pool = |name: &str| PoolRecord {
            name: name.into(),
            threads: 2,
            target: 1,
            tokens: "engaged".into(),
            token_set: Some("web".into()),
            token_count: Some(2),
            ..PoolRecord::default()
        };
        let records = [
            ProcessRecord { pid: PID, comm: "victim".into(), pools: vec![pool("api")], ..Default::default() },
            ProcessRecord {
                pid: 5001,
                comm: "batch".into(),
                pools: vec![pool("work")],
                ..Default::default()
            },
        ];
        let mut r = fixture("v1-contention", Some(PID));
        let dir = Path::new("/dev/shm/cotenant-status-1000");
        r.cooperating_neighbours = Some(neighbours::Cooperation::from_records(Some(dir), &records, PID));
        let text = render::text(&r);
        let line = "cooperating neighbours (sharing host CPU tokens): \
                    pid 5001 batch (set web: pool work; target 1 of 2 threads)";
        let at = text.find(line).unwrap_or_else(|| panic!("no neighbours line in:\n{text}"));
        let last_finding = r.findings.last().unwrap();
        let finding_at = text.find(&format!("{}: {}", last_finding.kind, last_finding.title)).unwrap();
        assert!(finding_at < at && at < text.find("Measurements:").unwrap(), "{text}");
        assert_eq!(text.matches(neighbours::LABEL).count(), 1, "one line");

        let v: serde_json::Value = serde_json::from_str(&render::json(&r)).unwrap();
        let c = &v["cooperating_neighbours"];
        assert_eq!(c["status_dir"], "/dev/shm/cotenant-status-1000");
        assert_eq!((c["published"].as_bool(), c["error"].is_null()), (Some(true), true), "{c}");
        let n = &c["neighbours"][0];
        assert_eq!((n["pid"].as_u64(), n["command"].as_str()), (Some(5001), Some("batch")), "{n}");
        assert_eq!((n["threads"].as_u64(), n["target"].as_u64()), (Some(2), Some(1)), "{n}");
        assert_eq!((n["token_sets"][0].as_str(), n["pools"][0].as_str()), (Some("web"), Some("work")));

        // For the host there is no process to name neighbours of: no line.
        let host = fixture("v1-contention", None);
        assert!(!render::text(&host).contains(neighbours::LABEL));
    }

    #[test]
    fn json_has_the_documented_top_level_fields() {
        let r = fixture("v1-contention", Some(PID));
        let v: serde_json::Value = serde_json::from_str(&render::json(&r)).unwrap();
        for key in [
            "schema_version",
            "pid",
            "comm",
            "duration_ms",
            "root",
            "partial",
            "error",
            "summary",
            "findings",
            "measurements",
            "not_read",
            "unreadable_processes",
            "cooperating_neighbours",
            "verify",
        ] {
            assert!(v.get(key).is_some(), "no {key}");
        }
        let f = &v["findings"][0];
        assert!(v["verify"].is_null());
        assert!(v["cooperating_neighbours"].is_null(), "a recorded report reads no status records");
        for key in ["kind", "severity", "title", "evidence", "recommendation", "commands"] {
            assert!(f.get(key).is_some(), "finding has no {key}");
        }
        assert_eq!(f["severity"], "high");
        assert!(f.get("score").is_none());
        for key in ["cpus", "host", "process", "cgroups", "top_consumers", "numa"] {
            assert!(v["measurements"].get(key).is_some(), "measurements has no {key}");
        }
    }
}

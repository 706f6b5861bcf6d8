//! `cotenant doctor` end to end: CPU contention from spinning neighbours, quota throttling in a
//! real `cotenant-test-<pid>-*` cgroup, a pid that does not exist, fixture roots without cgroup
//! controllers or with unreadable pid files, and bad usage.
//!
//! Every child is killed and reaped by a guard's `Drop`, every cgroup removed by its own, on
//! every path (success, failed assertion, panic). The heavy tests hold one lock, so that one
//! test's spinners never blur another's measurement; thresholds are generous (the findings'
//! own), never timing-exact.

mod support;

use serde_json::Value;
use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::{Mutex, MutexGuard},
    thread,
    time::Duration,
};
use support::affinity::{bind, first_allowed_cpu};
use support::cgroup::{layout, skip, TestCgroup, PREFIX};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_cotenant"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/doctor").join(name)
}

/// One CPU-heavy test at a time.
fn heavy() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Child processes killed and reaped when dropped.
#[derive(Default)]
struct Children(Vec<Child>);

impl Children {
    fn push(&mut self, child: Child) -> u32 {
        let pid = child.id();
        self.0.push(child);
        pid
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A shell busy loop: one CPU-bound process, no dependency beyond `sh`.
fn spinner() -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "while :; do :; done"]).stdin(Stdio::null()).stdout(Stdio::null());
    cmd
}

fn doctor(args: &[&str]) -> Output {
    Command::new(bin()).arg("doctor").args(args).output().expect("cotenant doctor runs")
}

fn json_of(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!("bad JSON ({e}): {text}\nstderr: {}", String::from_utf8_lossy(&out.stderr))
    })
}

fn kinds(v: &Value) -> Vec<String> {
    v["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap().to_owned()).collect()
}

fn no_panic(out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn contention_from_spinning_neighbours_is_the_top_finding() {
    let _lock = heavy();
    let mut kids = Children::default();
    // Plain processes in one cgroup: in separate cgroups of equal weight, group fairness would
    // give the lone victim a whole CPU's share and hide the contention this test is about.
    // All on one CPU: wherever CI runs the tests (a host with more CPUs than the quota of its
    // cgroup lets them use, say), the victim then shares that CPU with two busy neighbours.
    let cpu = first_allowed_cpu();
    let victim = kids.push(spinner().spawn().expect("spawn the victim"));
    bind(victim, cpu);
    for _ in 0..2 {
        let neighbour = kids.push(spinner().spawn().expect("spawn a neighbour"));
        bind(neighbour, cpu);
    }
    thread::sleep(Duration::from_millis(300));
    let out = doctor(&["--pid", &victim.to_string(), "--duration", "1s", "--json"]);
    no_panic(&out);
    assert!(out.status.success(), "{out:?}");
    let v = json_of(&out);
    let pretty = serde_json::to_string_pretty(&v).unwrap();
    // Throttling of the cgroup the tests run in (CI inside a CPU quota) ranks first by design,
    // as the cause that explains the rest; every other finding ranks below the contention.
    let findings = v["findings"].as_array().unwrap();
    let at = findings.iter().position(|f| f["kind"] == "cpu-contention");
    let at = at.unwrap_or_else(|| panic!("no cpu-contention finding: {pretty}"));
    assert!(
        findings[..at].iter().all(|f| f["kind"] == "throttling"),
        "ranked above the contention: {pretty}"
    );
    let top = &findings[at];
    let evidence = top["evidence"].as_array().unwrap();
    let wait = evidence
        .iter()
        .find(|e| e["what"].as_str().unwrap().contains("run-queue wait"))
        .expect("wait evidence");
    assert!(wait["file"].as_str().unwrap().contains(&format!("/proc/{victim}/task/")), "{wait}");
    let p = &v["measurements"]["process"];
    assert!(p["wait_fraction"].as_f64().unwrap() >= 0.10, "{p}");
    assert_eq!(v["pid"], victim);
    let summary = v["summary"].as_str().unwrap();
    assert!(summary.starts_with(&format!("{}: ", findings[0]["kind"].as_str().unwrap())), "{summary}");
}

#[test]
fn quota_throttling_is_the_top_finding() {
    const TEST: &str = "quota_throttling_is_the_top_finding";
    let layout = match layout() {
        Ok(l) => l,
        Err(reason) => return skip(TEST, &reason),
    };
    let _lock = heavy();
    let cg = match TestCgroup::create(&layout, PREFIX, "doctor-throttled", false, None) {
        Ok(cg) => cg,
        Err(e) => return skip(TEST, &format!("cannot create a test cgroup: {e}")),
    };
    TestCgroup::set_quota(&layout, cg.cpu_dir(false), Some(20_000), 100_000).expect("set a 0.2 CPU quota");
    let mut kids = Children::default(); // dropped (killed) before the cgroup is removed
    let mut cmd = cg.command(Path::new("sh"), &["-c", "while :; do :; done"], None);
    let pid = kids.push(cmd.stdin(Stdio::null()).stdout(Stdio::null()).spawn().expect("spawn the spinner"));
    thread::sleep(Duration::from_millis(300));
    let out = doctor(&["--pid", &pid.to_string(), "--duration", "1s", "--json"]);
    no_panic(&out);
    assert!(out.status.success(), "{out:?}");
    let v = json_of(&out);
    let top = &v["findings"][0];
    assert_eq!(top["kind"], "throttling", "{}", serde_json::to_string_pretty(&v).unwrap());
    assert!(top["title"].as_str().unwrap().contains(&cg.cgroup_path), "{}", top["title"]);
    let whats: Vec<&str> =
        top["evidence"].as_array().unwrap().iter().map(|e| e["what"].as_str().unwrap()).collect();
    for what in
        ["nr_periods during the sample", "nr_throttled during the sample", "throttled time during the sample"]
    {
        assert!(whats.contains(&what), "{whats:?}");
    }
    let level = &v["measurements"]["cgroups"][0];
    assert_eq!(level["cgroup"], cg.cgroup_path.as_str());
    assert!(level["throttled"].as_u64().unwrap() >= 1, "{level}");
    assert_eq!(level["quota_cpus"].as_f64(), Some(0.2));
}

/// A pid with no `/proc` entry.
fn missing_pid() -> u32 {
    (2_000_000_000u32..).find(|p| !Path::new(&format!("/proc/{p}")).exists()).unwrap()
}

#[test]
fn a_missing_pid_is_named_and_the_host_is_still_reported() {
    let pid = missing_pid();
    let out = doctor(&["--pid", &pid.to_string(), "--duration", "100ms"]);
    no_panic(&out);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("process {pid}")) && err.contains("does not exist"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("process-not-found") && text.contains("Measurements:"), "{text}");

    let out = doctor(&["--pid", &pid.to_string(), "--duration", "100ms", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    assert_eq!(kinds(&v)[0], "process-not-found");
    assert_eq!(v["partial"], true);
    assert!(v["error"].as_str().unwrap().contains(&pid.to_string()));
    assert!(v["measurements"]["host"].is_object() && v["measurements"]["cpus"]["online"].is_string());
    assert!(v["measurements"]["process"].is_null());
}

#[test]
fn a_root_without_cgroup_controllers_gives_a_partial_report() {
    let root = fixture("no-cgroup-controllers");
    let out = doctor(&["--root", root.to_str().unwrap(), "--pid", "4242", "--duration", "100ms", "--json"]);
    no_panic(&out);
    assert!(out.status.success(), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["partial"], true);
    let not_read: Vec<String> = v["not_read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| format!("{}: {}", n["file"].as_str().unwrap(), n["reason"].as_str().unwrap()))
        .collect();
    assert!(
        not_read.iter().any(|n| n.contains("cgroup.controllers") && n.contains("no cpu controller")),
        "{not_read:?}"
    );
    assert!(not_read.iter().any(|n| n.contains("pressure/cpu")), "{not_read:?}");
    assert_eq!(kinds(&v), ["nothing-wrong"]);

    // The same in text, and for the host.
    let out = doctor(&["--root", root.to_str().unwrap(), "--duration", "100ms"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("not read: ") && text.contains("no cpu controller"), "{text}");
}

#[test]
fn unreadable_pid_files_give_a_clear_message() {
    let root = fixture("unreadable-pid-files");
    let out = doctor(&["--root", root.to_str().unwrap(), "--pid", "4242", "--duration", "100ms", "--json"]);
    no_panic(&out);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v = json_of(&out);
    assert_eq!(kinds(&v)[0], "process-unreadable");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("process 4242"), "{err}");
}

#[test]
fn bad_usage_exits_2() {
    for args in [
        &["--duration", "10ms"][..],
        &["--duration", "61s"],
        &["--duration", "soon"],
        &["--pid", "0"],
        &["--pid", "-3"],
        &["--root", "/nonexistent/cotenant-doctor"],
    ] {
        let out = doctor(args);
        no_panic(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}

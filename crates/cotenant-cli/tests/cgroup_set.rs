//! `cotenant cgroup set` end to end: fixture cgroups (plain `cpu.max` / `cpu.cfs_*` files in a
//! fresh temp directory, v1 and v2) where an unchanged request must not touch any file (mtimes
//! checked) and a change writes only the differing file; bad input; and, as root on a host
//! with a v1 cpu hierarchy at /sys/fs/cgroup/cpu, a real cgroup.
//!
//! Every directory is removed by a guard's `Drop`, on every path (success, failed assertion).

use serde_json::Value;
use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, SystemTime},
};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_cotenant"))
}

fn set(args: &[&str]) -> Output {
    Command::new(bin()).args(["cgroup", "set"]).args(args).output().expect("cotenant cgroup set runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON ({e}): {text}\nstderr: {}", stderr(out)))
}

/// A directory removed (with everything in it) when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cotenant-cgroup-set-{}-{n}-{name}", std::process::id()));
        fs::create_dir_all(&dir).expect("create the fixture directory");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }

    /// Writes the files and sets their mtimes to an old, known instant.
    fn files(&self, files: &[(&str, &str)]) {
        for (name, text) in files {
            let path = self.0.join(name);
            fs::write(&path, text).unwrap();
            fs::File::options().write(true).open(&path).unwrap().set_modified(old()).unwrap();
        }
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.0.join(name)).unwrap()
    }

    fn mtime(&self, name: &str) -> SystemTime {
        fs::metadata(self.0.join(name)).unwrap().modified().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// 2001-09-09: long before any test runs.
fn old() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000)
}

fn v1_fixture(quota: &str, period: &str, burst: &str) -> TempDir {
    let d = TempDir::new("v1");
    d.files(&[("cpu.cfs_quota_us", quota), ("cpu.cfs_period_us", period), ("cpu.cfs_burst_us", burst)]);
    d
}

fn v2_fixture(max: &str, burst: &str) -> TempDir {
    let d = TempDir::new("v2");
    d.files(&[("cpu.max", max), ("cpu.max.burst", burst)]);
    d
}

#[test]
fn unchanged_v2_reports_unchanged_and_writes_nothing() {
    let d = v2_fixture("150000 100000\n", "0\n");
    let out = set(&[d.arg(), "--cpus", "1.5", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["action"], "unchanged", "{v}");
    assert_eq!(v["version"], "v2");
    assert_eq!(v["writes"].as_array().unwrap().len(), 0);
    assert_eq!((v["cpus"].as_f64(), v["quota_us"].as_u64()), (Some(1.5), Some(150_000)));
    assert_eq!((v["period_us"].as_u64(), v["burst_us"].as_u64()), (Some(100_000), Some(0)));
    assert_eq!(v["cgroup"], d.arg());
    // The same values spelled differently, and the human output.
    let out = set(&[d.arg(), "--cpus", "1.5", "--period", "0.1s", "--burst", "0us"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.trim(),
        format!("{}: unchanged (quota 150000 µs per 100000 µs period = 1.50 CPUs)", d.arg())
    );
    for f in ["cpu.max", "cpu.max.burst"] {
        assert_eq!(d.mtime(f), old(), "{f} was written");
    }
    assert_eq!(d.read("cpu.max"), "150000 100000\n");
}

#[test]
fn unchanged_v1_reports_unchanged_and_writes_nothing() {
    let d = v1_fixture("-1\n", "100000\n", "0\n");
    let out = set(&[d.arg(), "--cpus", "max", "--period", "100ms", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["action"], "unchanged", "{v}");
    assert_eq!(v["version"], "v1");
    assert!(v["cpus"].is_null() && v["quota_us"].is_null(), "{v}");
    for f in ["cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.cfs_burst_us"] {
        assert_eq!(d.mtime(f), old(), "{f} was written");
    }
}

#[test]
fn a_v2_change_writes_only_cpu_max() {
    let d = v2_fixture("max 100000\n", "0\n");
    let out = set(&[d.arg(), "--cpus", "1.5"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.trim(), format!("{}: updated cpu.max: \"max 100000\" → \"150000 100000\"", d.arg()));
    assert_eq!(d.read("cpu.max"), "150000 100000");
    assert_ne!(d.mtime("cpu.max"), old());
    assert_eq!(d.mtime("cpu.max.burst"), old(), "the burst was not asked to change");
    // Now the same request is a no-op.
    let v = json_of(&set(&[d.arg(), "--cpus", "1.5", "--json"]));
    assert_eq!(v["action"], "unchanged", "{v}");
}

#[test]
fn a_v1_change_writes_only_the_differing_files() {
    let d = v1_fixture("150000\n", "100000\n", "0\n");
    let out = set(&[d.arg(), "--cpus", "1.5", "--period", "200ms", "--burst", "0ms", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["action"], "updated", "{v}");
    let writes: Vec<(&str, &str, &str)> = v["writes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["file"].as_str().unwrap(), w["old"].as_str().unwrap(), w["new"].as_str().unwrap()))
        .collect();
    assert_eq!(writes, [("cpu.cfs_period_us", "100000", "200000"), ("cpu.cfs_quota_us", "150000", "300000")]);
    assert_eq!((d.read("cpu.cfs_period_us"), d.read("cpu.cfs_quota_us")), ("200000".into(), "300000".into()));
    assert_eq!(d.mtime("cpu.cfs_burst_us"), old(), "the burst did not change");
    assert_eq!((v["quota_us"].as_u64(), v["period_us"].as_u64()), (Some(300_000), Some(200_000)));

    // Only the burst.
    let out = set(&[d.arg(), "--cpus", "1.5", "--burst", "20ms", "--json"]);
    let v = json_of(&out);
    assert_eq!(v["writes"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["writes"][0]["file"], "cpu.cfs_burst_us");
    assert_eq!(d.read("cpu.cfs_burst_us"), "20000");
    assert_eq!(v["burst_us"], 20_000);
}

#[test]
fn a_relative_path_resolves_below_the_cpu_mount_of_the_root() {
    let root = TempDir::new("root");
    fs::create_dir_all(root.path().join("proc/self")).unwrap();
    fs::write(
        root.path().join("proc/self/mountinfo"),
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
         41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
    )
    .unwrap();
    let dir = root.path().join("sys/fs/cgroup/cpu/app");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("cpu.cfs_quota_us"), "-1").unwrap();
    fs::write(dir.join("cpu.cfs_period_us"), "100000").unwrap();
    let out = set(&["--root", root.arg(), "app", "--cpus", "0.5", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["cgroup"], dir.to_str().unwrap());
    assert!(v["burst_us"].is_null(), "no burst file: {v}");
    assert_eq!(fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap(), "50000");
    // --burst without a burst file (kernel < 5.14).
    let out = set(&["--root", root.arg(), "app", "--cpus", "0.5", "--burst", "1ms"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("cpu.cfs_burst_us does not exist"), "{}", stderr(&out));
}

#[test]
fn bad_input_is_refused_and_named() {
    let d = v2_fixture("max 100000\n", "0\n");
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--cpus", "0"], 2, "--cpus"),
        (&["--cpus", "-1"], 2, "--cpus"),
        (&["--cpus", "NaN"], 2, "--cpus"),
        (&["--cpus", "1", "--period", "2s"], 2, "--period"),
        (&["--cpus", "1", "--period", "500us"], 2, "--period"),
        (&["--cpus", "0.005"], 2, "1 ms minimum"),
        (&["--cpus", "1", "--burst", "200ms"], 2, "--burst 200000 µs is more than the quota (100000 µs)"),
    ];
    for (args, code, needle) in cases {
        let mut all = vec![d.arg()];
        all.extend_from_slice(args);
        let out = set(&all);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {out:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
    for f in ["cpu.max", "cpu.max.burst"] {
        assert_eq!(d.mtime(f), old(), "{f} was written after bad input");
    }

    let missing = d.path().join("no-such-cgroup");
    let out = set(&[missing.to_str().unwrap(), "--cpus", "1"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains(&format!("no such cgroup: {}", missing.display())), "{}", stderr(&out));

    let empty = TempDir::new("empty");
    let out = set(&[empty.arg(), "--cpus", "1"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr(&out)
            .contains(&format!("{} has no cpu controller files (cpu.max or cpu.cfs_quota_us)", empty.arg())),
        "{}",
        stderr(&out)
    );

    let garbage = v2_fixture("lots\n", "0\n");
    let out = set(&[garbage.arg(), "--cpus", "1"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("cpu.max") && stderr(&out).contains("lots"), "{}", stderr(&out));
}

/// Real cgroup directories (child after parent), removed in reverse order when dropped.
struct RealCgroups(Vec<PathBuf>);

impl Drop for RealCgroups {
    fn drop(&mut self) {
        for dir in self.0.iter().rev() {
            if let Err(e) = fs::remove_dir(dir) {
                eprintln!("cannot remove {}: {e}", dir.display());
            }
        }
    }
}

#[test]
fn a_real_v1_cgroup_is_set_once_then_left_alone() {
    const TEST: &str = "a_real_v1_cgroup_is_set_once_then_left_alone";
    let mount = Path::new("/sys/fs/cgroup/cpu");
    if unsafe { libc::geteuid() } != 0 {
        return eprintln!("{TEST}: SKIPPED: not root");
    }
    if !mount.join("cpu.cfs_quota_us").exists() {
        return eprintln!("{TEST}: SKIPPED: no cgroup v1 cpu hierarchy at {}", mount.display());
    }
    let name = format!("cotenant-test-{}-set", std::process::id());
    let dir = mount.join(&name);
    let mut guard = RealCgroups(vec![]);
    if let Err(e) = fs::create_dir(&dir) {
        return eprintln!("{TEST}: SKIPPED: cannot create {}: {e}", dir.display());
    }
    guard.0.push(dir.clone());
    let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap().trim().to_owned();

    let out = set(&[dir.to_str().unwrap(), "--cpus", "1.5", "--period", "100ms", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["action"], "updated", "{v}");
    assert_eq!((read("cpu.cfs_quota_us"), read("cpu.cfs_period_us")), ("150000".into(), "100000".into()));

    // Again, by the path relative to the mount (resolved through /proc/self/mountinfo).
    let out = set(&[&name, "--cpus", "1.5", "--period", "100ms", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v = json_of(&out);
    assert_eq!(v["action"], "unchanged", "{v}");
    assert_eq!(v["writes"].as_array().unwrap().len(), 0);
    assert_eq!(read("cpu.cfs_quota_us"), "150000");

    if dir.join("cpu.cfs_burst_us").exists() {
        // A burst, then a smaller quota and burst: the kernel accepts the burst only first.
        let ok = set(&[dir.to_str().unwrap(), "--cpus", "1", "--burst", "50ms"]);
        assert!(ok.status.success(), "{ok:?}");
        let refused = set(&[dir.to_str().unwrap(), "--cpus", "0.3"]);
        assert_eq!(refused.status.code(), Some(2), "{refused:?}");
        assert!(stderr(&refused).contains("current burst (50000 µs"), "{}", stderr(&refused));
        let out = set(&[dir.to_str().unwrap(), "--cpus", "0.3", "--burst", "10ms", "--period", "50ms"]);
        assert!(out.status.success(), "{out:?}");
        let got = (read("cpu.cfs_quota_us"), read("cpu.cfs_period_us"), read("cpu.cfs_burst_us"));
        assert_eq!(got, ("15000".into(), "50000".into(), "10000".into()));
    }

    // A child asking for more than its parent: v1 refuses it, and the message says why.
    let child = dir.join("child");
    fs::create_dir(&child).expect("create the child cgroup");
    guard.0.push(child.clone());
    let out = set(&[child.to_str().unwrap(), "--cpus", "2"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("the kernel refused"), "{}", stderr(&out));
}

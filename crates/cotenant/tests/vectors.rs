//! Runs every shared CPU-count vector in `testdata/cpus/*/` (see its README) through
//! `cpus::Probe::with_root`. A new case is a new directory, not a new test.

use cotenant::cpus::{Origin, Probe, Rounding};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/cpus")
}

/// The path as the host names it: the origin with the fixture root taken off.
fn host_path(origin: &Origin, root: &Path) -> String {
    match origin {
        Origin::File(p) => format!("/{}", p.strip_prefix(root).unwrap_or(p).display()),
        Origin::Syscall(s) => s.to_string(),
    }
}

fn check(case: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(case.join("expected.json")).map_err(|e| e.to_string())?;
    let want: Value = serde_json::from_str(&text).map_err(|e| format!("expected.json: {e}"))?;
    let probe = Probe::with_root(case);
    let got = match want["pid"].as_u64() {
        Some(pid) => probe.detect_pid(pid as u32),
        None => probe.detect(),
    };
    if let Some(err) = want.get("error") {
        let msg = match got {
            Ok(b) => return Err(format!("expected an error, got limit {}", b.limit())),
            Err(e) => e.to_string(),
        };
        let contains = err["contains"].as_str().unwrap_or_default();
        if !msg.contains(contains) {
            return Err(format!("error {msg:?} does not contain {contains:?}"));
        }
        if let Some(file) = err["file"].as_str() {
            let full = case.join(file.trim_start_matches('/'));
            if !msg.contains(&full.display().to_string()) {
                return Err(format!("error {msg:?} does not name {}", full.display()));
            }
        }
        return Ok(());
    }
    let b = got.map_err(|e| format!("unexpected error: {e}"))?;
    let mut diffs = Vec::new();
    // limit is compared as a number: JSON 2 equals 2.0.
    if want["limit"].as_f64() != Some(b.limit()) {
        diffs.push(format!("limit: want {}, got {}", want["limit"], b.limit()));
    }
    let mut cmp = |what: &str, got: Value| {
        if want[what] != got && !(want[what].is_null() && what.starts_with("binding_")) {
            diffs.push(format!("{what}: want {}, got {got}", want[what]));
        }
    };
    cmp("threads", b.threads(Rounding::Floor).into());
    cmp("threads_ceil", b.threads(Rounding::Ceil).into());
    cmp("threads_nearest", b.threads(Rounding::Nearest).into());
    cmp("allowed_cpus", b.allowed_cpus().into());
    cmp("binding", b.binding().as_str().into());
    cmp("cgroup_version", b.cgroup_version().into());
    cmp("binding_path", b.binding_origin().map(|o| host_path(o, case)).into());
    cmp("binding_cgroup", b.binding_level().map(|l| l.cgroup.clone()).into());
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs.join("; "))
    }
}

#[test]
fn every_vector_passes() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .expect("testdata/cpus exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expected.json").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() >= 15, "only {} vectors", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| check(c).err().map(|e| format!("{}: {e}", c.file_name().unwrap().to_string_lossy())))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn refresh_rereads_the_numbers() {
    // Copy a vector, detect, change the quota on disk, refresh: the new quota is seen through the
    // paths resolved at detection.
    let tmp = std::env::temp_dir().join(format!("cotenant-vectors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    copy_dir(&vectors_dir().join("v2-parent-lower"), &tmp);
    let mut b = Probe::with_root(&tmp).detect().unwrap();
    assert_eq!(b.limit(), 1.0);
    std::fs::write(tmp.join("sys/fs/cgroup/kubepods.slice/cpu.max"), "max 100000\n").unwrap();
    b.refresh().unwrap();
    assert_eq!((b.limit(), b.binding_level().unwrap().cgroup.as_str()), (2.0, "/kubepods.slice/pod.slice"));
    std::fs::write(tmp.join("sys/fs/cgroup/kubepods.slice/pod.slice/cpu.max"), "oops\n").unwrap();
    let err = b.refresh().unwrap_err().to_string();
    assert!(err.contains("pod.slice/cpu.max") && err.contains("oops"), "{err}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

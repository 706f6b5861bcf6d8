//! Unit tests of `cotenant cgroup set`: the plan, the request's checks, parsing, resolving,
//! and `set` on fixture trees.

use super::resolve::resolve_with;
use super::*;
use crate::cgroupfs::{os_error, testing::PrivateDir};
use std::{fs, path::Path};

fn v1(quota: Option<u64>, period: u64, burst: Option<u64>) -> CpuMax {
    CpuMax { version: Version::V1, quota_us: quota, period_us: period, burst_us: burst }
}

fn v2(quota: Option<u64>, period: u64, burst: Option<u64>) -> CpuMax {
    CpuMax { version: Version::V2, ..v1(quota, period, burst) }
}

fn want(quota: Option<u64>, period: u64, burst: Option<u64>) -> Desired {
    Desired { quota_us: quota, period_us: period, burst_us: burst }
}

fn files(writes: &[Write]) -> Vec<(&str, &str)> {
    writes.iter().map(|w| (w.file, w.new.as_str())).collect()
}

fn request(cpus: Cpus, period: Option<u64>, burst: Option<u64>) -> Request {
    Request { cpus, period_us: period, burst_us: burst }
}

#[test]
fn plan_writes_nothing_when_everything_matches() {
    for cur in
        [v1(Some(150_000), 100_000, Some(0)), v2(None, 100_000, None), v2(Some(5_000), 10_000, Some(0))]
    {
        let d = want(cur.quota_us, cur.period_us, cur.burst_us);
        assert!(plan(&cur, &d).is_empty(), "{cur:?}");
        // Leaving the burst alone is also no write.
        assert!(plan(&cur, &Desired { burst_us: None, ..d }).is_empty());
    }
}

#[test]
fn plan_v2_writes_cpu_max_once_for_quota_or_period() {
    let cur = v2(None, 100_000, Some(0));
    let w = plan(&cur, &want(Some(150_000), 100_000, None));
    assert_eq!(w, vec![Write { file: "cpu.max", old: "max 100000".into(), new: "150000 100000".into() }]);
    let w = plan(&cur, &want(None, 50_000, None));
    assert_eq!(files(&w), [("cpu.max", "max 50000")]);
    let w = plan(&cur, &want(Some(75_000), 50_000, Some(20_000)));
    assert_eq!(files(&w), [("cpu.max", "75000 50000"), ("cpu.max.burst", "20000")]);
    let w = plan(&cur, &want(None, 100_000, Some(20_000)));
    assert_eq!(files(&w), [("cpu.max.burst", "20000")]);
    assert_eq!(w[0].old, "0");
}

#[test]
fn plan_v1_writes_only_differing_files() {
    let cur = v1(None, 100_000, Some(0));
    assert_eq!(files(&plan(&cur, &want(Some(150_000), 100_000, None))), [("cpu.cfs_quota_us", "150000")]);
    assert_eq!(files(&plan(&cur, &want(None, 200_000, Some(0)))), [("cpu.cfs_period_us", "200000")]);
    let back = plan(&v1(Some(150_000), 100_000, None), &want(None, 100_000, None));
    assert_eq!(back, vec![Write { file: "cpu.cfs_quota_us", old: "150000".into(), new: "-1".into() }]);
}

#[test]
fn plan_v1_orders_period_and_quota_so_the_ratio_never_overshoots() {
    // Period grows: period first (150000/200000 in between, below both).
    let cur = v1(Some(150_000), 100_000, None);
    assert_eq!(
        files(&plan(&cur, &want(Some(300_000), 200_000, None))),
        [("cpu.cfs_period_us", "200000"), ("cpu.cfs_quota_us", "300000")]
    );
    // Period shrinks: quota first (75000/100000 in between, not 150000/50000).
    assert_eq!(
        files(&plan(&cur, &want(Some(75_000), 50_000, None))),
        [("cpu.cfs_quota_us", "75000"), ("cpu.cfs_period_us", "50000")]
    );
}

#[test]
fn plan_puts_the_burst_first_only_when_the_old_burst_exceeds_the_new_quota() {
    // Lowering the quota below the old burst: the burst must shrink first.
    let cur = v1(Some(100_000), 100_000, Some(50_000));
    assert_eq!(
        files(&plan(&cur, &want(Some(30_000), 100_000, Some(10_000)))),
        [("cpu.cfs_burst_us", "10000"), ("cpu.cfs_quota_us", "30000")]
    );
    // Raising both: the quota first, so the new burst fits.
    let cur = v2(Some(50_000), 100_000, Some(10_000));
    assert_eq!(
        files(&plan(&cur, &want(Some(200_000), 100_000, Some(150_000)))),
        [("cpu.max", "200000 100000"), ("cpu.max.burst", "150000")]
    );
}

#[test]
fn desired_uses_the_current_period_and_rounds_the_quota() {
    let cur = v2(None, 100_000, Some(0));
    let d = desired(Path::new("/cg"), &cur, &request(Cpus::Limit(1.5), None, None)).unwrap();
    assert_eq!(d, want(Some(150_000), 100_000, None));
    let d = desired(Path::new("/cg"), &cur, &request(Cpus::Limit(0.333_333_3), Some(10_000), None)).unwrap();
    assert_eq!(d.quota_us, Some(3_333));
    let d = desired(Path::new("/cg"), &cur, &request(Cpus::Max, Some(50_000), Some(0))).unwrap();
    assert_eq!(d, want(None, 50_000, Some(0)));
}

#[test]
fn desired_enforces_the_kernel_rules() {
    let dir = Path::new("/cg");
    let cur = v1(None, 100_000, Some(0));
    let e = desired(dir, &cur, &request(Cpus::Limit(0.005), None, None)).unwrap_err();
    assert!(matches!(e, Error::QuotaTooSmall { .. }) && e.is_usage());
    let text = e.to_string();
    assert!(text.contains("500 µs") && text.contains("1 ms minimum"), "{text}");
    // 0.00999 × 100000 = 999 µs is too little; 0.01 → 1000 µs is the minimum.
    assert!(desired(dir, &cur, &request(Cpus::Limit(0.00999), None, None)).is_err());
    assert_eq!(desired(dir, &cur, &request(Cpus::Limit(0.01), None, None)).unwrap().quota_us, Some(1_000));
    let e = desired(dir, &cur, &request(Cpus::Limit(1.0), None, Some(200_000))).unwrap_err();
    assert!(matches!(e, Error::BurstAboveQuota { burst_us: 200_000, quota_us: 100_000 }), "{e}");
    assert!(desired(dir, &cur, &request(Cpus::Limit(1.0), None, Some(100_000))).is_ok());
    // An unlimited quota bounds no burst.
    assert!(desired(dir, &cur, &request(Cpus::Max, None, Some(200_000))).is_ok());
    // The current burst must fit under a new, smaller quota.
    let big = v1(None, 100_000, Some(80_000));
    let e = desired(dir, &big, &request(Cpus::Limit(0.5), None, None)).unwrap_err();
    assert!(matches!(e, Error::CurrentBurstAboveQuota { .. }), "{e}");
    assert!(e.to_string().contains("/cg/cpu.cfs_burst_us"), "{e}");
    // No burst file: --burst is an error, no --burst is fine.
    let old = v2(None, 100_000, None);
    let e = desired(dir, &old, &request(Cpus::Max, None, Some(0))).unwrap_err();
    assert!(matches!(e, Error::NoBurstFile(_)) && e.to_string().contains("cpu.max.burst"), "{e}");
    assert!(desired(dir, &old, &request(Cpus::Limit(2.0), None, None)).is_ok());
}

#[test]
fn parse_cpus_accepts_max_and_positive_numbers() {
    assert_eq!(parse_cpus("max"), Ok(Cpus::Max));
    assert_eq!(parse_cpus("1.5"), Ok(Cpus::Limit(1.5)));
    assert_eq!(parse_cpus("0.01"), Ok(Cpus::Limit(0.01)));
    for bad in ["0", "-1", "NaN", "inf", "", "two", "-0"] {
        let e = parse_cpus(bad).unwrap_err();
        assert!(e.contains("positive number of CPUs"), "{bad}: {e}");
    }
}

#[test]
fn parse_micros_and_period_take_units() {
    assert_eq!(parse_micros("100ms"), Ok(100_000));
    assert_eq!(parse_micros("0.1s"), Ok(100_000));
    assert_eq!(parse_micros("50000us"), Ok(50_000));
    assert_eq!(parse_micros("50000µs"), Ok(50_000));
    assert_eq!(parse_micros("0ms"), Ok(0));
    assert_eq!(parse_micros("0"), Ok(0), "zero needs no unit");
    assert!(parse_micros("5").unwrap_err().contains("needs a unit"));
    assert_eq!(parse_micros("1.5ms"), Ok(1_500));
    for bad in ["100", "ms", "-1ms", "x s", "NaNs", "1e400s"] {
        assert!(parse_micros(bad).is_err(), "{bad}");
    }
    assert_eq!(parse_period("1ms"), Ok(1_000));
    assert_eq!(parse_period("1s"), Ok(1_000_000));
    for bad in ["999us", "2s", "0s", "1.001s"] {
        let e = parse_period(bad).unwrap_err();
        assert!(e.contains("period") && e.contains("1ms and 1s"), "{bad}: {e}");
    }
}

#[test]
fn resolve_joins_relative_paths_to_the_cpu_mount() {
    let tmp = PrivateDir::new("cgroup-set-unit");
    let root = &tmp.0;
    fs::create_dir_all(root.join("proc/self")).unwrap();
    let resolve = |cgroup: &str| resolve_with(Path::new(cgroup), root, false).map(|t| t.dir);
    let hybrid = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                  41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
    fs::write(root.join("proc/self/mountinfo"), hybrid).unwrap();
    assert_eq!(resolve("a/b").unwrap(), root.join("sys/fs/cgroup/cpu,cpuacct/a/b"));
    let v2_only = "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
    fs::write(root.join("proc/self/mountinfo"), v2_only).unwrap();
    assert_eq!(resolve("x").unwrap(), root.join("sys/fs/cgroup/x"));
    fs::write(root.join("proc/self/mountinfo"), "").unwrap();
    assert!(matches!(resolve("x"), Err(Error::NoMount(_))));
    assert_eq!(resolve("/abs/cg").unwrap(), Path::new("/abs/cg"));
    assert!(matches!(resolve("../x"), Err(Error::OutsideMount(_))));
}

#[test]
fn the_fixture_hook_applies_only_below_a_given_root() {
    let root = Path::new("/fixtures/case");
    let rule = |cgroup: &str, root: &Path, hook: bool| {
        resolve_with(Path::new(cgroup), root, hook).unwrap().file_systems
    };
    assert_eq!(rule("/fixtures/case/cg", root, true), FileSystems::FixtureTree);
    assert_eq!(rule("/fixtures/case", root, true), FileSystems::FixtureTree);
    // The variable without a fixture root, or a root without the variable, relaxes nothing.
    assert_eq!(rule("/fixtures/case/cg", root, false), FileSystems::CgroupOnly);
    assert_eq!(rule("/fixtures/case/cg", Path::new("/"), true), FileSystems::CgroupOnly);
    // Nor does it reach outside the root, or climb out of it.
    assert_eq!(rule("/proc/sys/kernel", root, true), FileSystems::CgroupOnly);
    assert_eq!(rule("/fixtures/cases/cg", root, true), FileSystems::CgroupOnly);
    assert_eq!(rule("/fixtures/case/../../proc/sys/kernel", root, true), FileSystems::CgroupOnly);
}

#[test]
fn set_writes_a_plain_tree_only_as_a_fixture() {
    let tmp = PrivateDir::new("cgroup-set-unit");
    fs::write(tmp.0.join("cpu.cfs_quota_us"), "-1\n").unwrap();
    fs::write(tmp.0.join("cpu.cfs_period_us"), "100000\n").unwrap();
    let half = request(Cpus::Limit(0.5), None, None);
    let real = Target { dir: tmp.0.clone(), file_systems: FileSystems::CgroupOnly };
    let e = set(&real, &half).unwrap_err();
    assert!(matches!(e, Error::Access(_)) && !e.is_usage(), "{e}");
    let expected = format!("{} is not on a cgroup file system (statfs type", tmp.0.display());
    assert!(e.to_string().starts_with(&expected), "{e}");
    assert_eq!(fs::read_to_string(tmp.0.join("cpu.cfs_quota_us")).unwrap(), "-1\n");

    let fixture = Target { file_systems: FileSystems::FixtureTree, ..real };
    let done = set(&fixture, &half).unwrap();
    assert_eq!(files(&done.writes), [("cpu.cfs_quota_us", "50000")]);
    assert_eq!(fs::read_to_string(tmp.0.join("cpu.cfs_quota_us")).unwrap(), "50000");
}

#[test]
fn set_refuses_a_symlinked_control_file_even_in_a_fixture() {
    let tmp = PrivateDir::new("cgroup-set-unit");
    let cg = tmp.0.join("cg");
    fs::create_dir(&cg).unwrap();
    // A valid quota: only the link can stop the write (issue 34: a link to pid_max).
    let target = tmp.0.join("pid_max");
    fs::write(&target, "-1\n").unwrap();
    std::os::unix::fs::symlink(&target, cg.join("cpu.cfs_quota_us")).unwrap();
    fs::write(cg.join("cpu.cfs_period_us"), "100000\n").unwrap();
    let fixture = Target { dir: cg.clone(), file_systems: FileSystems::FixtureTree };
    let e = set(&fixture, &request(Cpus::Limit(0.5), None, None)).unwrap_err();
    assert!(matches!(&e, Error::Access(why) if os_error(why) == Some(libc::ELOOP)), "{e}");
    let expected = format!("{} is a symbolic link", cg.join("cpu.cfs_quota_us").display());
    assert!(e.to_string().starts_with(&expected), "{e}");
    assert_eq!(fs::read_to_string(&target).unwrap(), "-1\n", "the link's target was written");
}

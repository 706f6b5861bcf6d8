//! Unit tests of `cotenant cgroup set`: the plans (bandwidth, idle and weight), the request's
//! checks, parsing, resolving, and `set` on fixture trees (v1 and v2, already-set no-ops,
//! missing files).

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
    Request { cpus: Some(cpus), period_us: period, burst_us: burst, ..Request::default() }
}

fn sched(version: Version, idle: Option<bool>, weight: Option<u64>) -> Scheduling {
    Scheduling { version, idle, weight }
}

fn idle_weight(idle: Option<bool>, weight: Option<u64>) -> Request {
    Request { idle, weight, ..Request::default() }
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

#[test]
fn check_refuses_requests_that_cannot_be_made_whatever_the_cgroup() {
    assert!(matches!(check(&Request::default()), Err(Error::NothingRequested)));
    let e = check(&Request { period_us: Some(50_000), idle: Some(true), ..Request::default() }).unwrap_err();
    assert!(matches!(e, Error::NeedsCpus("--period")) && e.is_usage(), "{e}");
    let e = check(&idle_weight(Some(true), Some(10))).unwrap_err();
    assert!(matches!(e, Error::IdleWithWeight) && e.is_usage(), "{e}");
    assert!(e.to_string().contains("--idle with --weight"), "{e}");
    for w in [0, 10_001] {
        let e = check(&idle_weight(None, Some(w))).unwrap_err();
        assert!(matches!(e, Error::WeightOutOfRange(_)) && e.to_string().contains("1 to 10000"), "{e}");
    }
    // Leaving idle and setting a weight together is the way to weigh an idle cgroup.
    assert!(check(&idle_weight(Some(false), Some(10))).is_ok());
    assert!(check(&idle_weight(Some(true), None)).is_ok());
    assert!(check(&request(Cpus::Max, Some(100_000), Some(0))).is_ok());
}

#[test]
fn desired_without_cpus_keeps_the_bandwidth() {
    let cur = v1(Some(50_000), 100_000, Some(0));
    let d = desired(Path::new("/cg"), &cur, &idle_weight(Some(true), None)).unwrap();
    assert_eq!(d, want(Some(50_000), 100_000, None));
    assert!(plan(&cur, &d).is_empty());
}

#[test]
fn desired_scheduling_converts_the_weight_for_v1_as_systemd_does() {
    let dir = Path::new("/cg");
    let ten = idle_weight(None, Some(10));
    let d = desired_scheduling(dir, &sched(Version::V1, Some(false), Some(1024)), &ten);
    assert_eq!(d.unwrap(), DesiredScheduling { idle: None, weight: Some(102) });
    let d = desired_scheduling(dir, &sched(Version::V2, Some(false), Some(100)), &ten);
    assert_eq!(d.unwrap(), DesiredScheduling { idle: None, weight: Some(10) });
}

#[test]
fn desired_scheduling_enforces_the_kernel_rules() {
    let dir = Path::new("/cg");
    // No cpu.idle (before Linux 5.15): --idle is an error naming the file and what is needed.
    let old = sched(Version::V2, None, Some(100));
    let e = desired_scheduling(dir, &old, &idle_weight(Some(true), None)).unwrap_err();
    assert!(matches!(e, Error::NoIdleFile(_)) && !e.is_usage(), "{e}");
    let text = e.to_string();
    assert!(text.starts_with("/cg/cpu.idle does not exist") && text.contains("Linux 5.15"), "{text}");
    // ...but --no-idle asks for what holds already: nothing to write.
    let d = desired_scheduling(dir, &old, &idle_weight(Some(false), None)).unwrap();
    assert_eq!(d, DesiredScheduling::default());
    // No weight file (the v2 root).
    let root = sched(Version::V2, Some(false), None);
    let e = desired_scheduling(dir, &root, &idle_weight(None, Some(10))).unwrap_err();
    assert!(matches!(e, Error::NoWeightFile(_)) && e.to_string().contains("/cg/cpu.weight"), "{e}");
    // An idle cgroup takes a weight only together with --no-idle.
    let idle = sched(Version::V1, Some(true), Some(3));
    let e = desired_scheduling(dir, &idle, &idle_weight(None, Some(10))).unwrap_err();
    assert!(matches!(e, Error::WeightWhileIdle(_)) && e.is_usage(), "{e}");
    assert!(e.to_string().contains("add --no-idle"), "{e}");
    let d = desired_scheduling(dir, &idle, &idle_weight(Some(false), Some(10))).unwrap();
    assert_eq!(d, DesiredScheduling { idle: Some(false), weight: Some(102) });
}

#[test]
fn plan_scheduling_writes_nothing_when_already_set() {
    for cur in [
        sched(Version::V1, Some(true), Some(3)),
        sched(Version::V2, Some(false), Some(10)),
        sched(Version::V1, Some(false), Some(102)),
    ] {
        // An idle cgroup takes no weight; a plain one is asked for the weight it has.
        let weight = if cur.idle == Some(false) { cur.weight } else { None };
        let same = DesiredScheduling { idle: cur.idle, weight };
        assert!(plan_scheduling(&cur, &same).is_empty(), "{cur:?}");
        assert!(plan_scheduling(&cur, &DesiredScheduling::default()).is_empty());
    }
}

#[test]
fn plan_scheduling_writes_idle_and_weight_in_an_order_the_kernel_accepts() {
    let v1_plain = sched(Version::V1, Some(false), Some(1024));
    let w = plan_scheduling(&v1_plain, &DesiredScheduling { idle: Some(true), weight: None });
    assert_eq!(w, vec![Write { file: "cpu.idle", old: "0".into(), new: "1".into() }]);
    let w = plan_scheduling(&v1_plain, &DesiredScheduling { idle: Some(false), weight: Some(102) });
    assert_eq!(files(&w), [("cpu.shares", "102")]);
    assert_eq!(w[0].old, "1024");
    // Leaving idle: cpu.idle first (no weight while idle), and the weight written even when it
    // equals the default the kernel restores, its old value being that default.
    let v2_idle = sched(Version::V2, Some(true), Some(1));
    let w = plan_scheduling(&v2_idle, &DesiredScheduling { idle: Some(false), weight: Some(100) });
    assert_eq!(files(&w), [("cpu.idle", "0"), ("cpu.weight", "100")]);
    assert_eq!((w[0].old.as_str(), w[1].old.as_str()), ("1", "100"));
    let w = plan_scheduling(&v2_idle, &DesiredScheduling { idle: Some(false), weight: None });
    assert_eq!(files(&w), [("cpu.idle", "0")]);
}

/// A fixture cgroup directory of plain files, as `set` reads them through the fixture hook.
fn fixture(files: &[(&str, &str)]) -> (PrivateDir, Target) {
    let tmp = PrivateDir::new("cgroup-set-unit");
    for (name, text) in files {
        fs::write(tmp.0.join(name), text).unwrap();
    }
    let target = Target { dir: tmp.0.clone(), file_systems: FileSystems::FixtureTree };
    (tmp, target)
}

#[test]
fn set_marks_a_v1_fixture_idle_once_then_leaves_it_alone() {
    let (tmp, target) = fixture(&[
        ("cpu.cfs_quota_us", "-1\n"),
        ("cpu.cfs_period_us", "100000\n"),
        ("cpu.shares", "1024\n"),
        ("cpu.idle", "0\n"),
    ]);
    let done = set(&target, &idle_weight(Some(true), None)).unwrap();
    assert_eq!(files(&done.writes), [("cpu.idle", "1")]);
    assert_eq!(done.scheduling.idle, Some(true));
    assert!(!done.left_idle());
    assert_eq!(fs::read_to_string(tmp.0.join("cpu.idle")).unwrap(), "1");
    assert_eq!(fs::read_to_string(tmp.0.join("cpu.cfs_quota_us")).unwrap(), "-1\n", "the quota was written");
    let again = set(&target, &idle_weight(Some(true), None)).unwrap();
    assert!(again.writes.is_empty(), "{:?}", again.writes);
    let back = set(&target, &idle_weight(Some(false), Some(10))).unwrap();
    assert_eq!(files(&back.writes), [("cpu.idle", "0"), ("cpu.shares", "102")]);
    assert!(back.left_idle());
    assert_eq!(back.scheduling, Scheduling { version: Version::V1, idle: Some(false), weight: Some(102) });
}

#[test]
fn set_weighs_a_v2_fixture_and_combines_with_cpus() {
    let (tmp, target) = fixture(&[
        ("cpu.max", "max 100000\n"),
        ("cpu.max.burst", "0\n"),
        ("cpu.weight", "100\n"),
        ("cpu.idle", "0\n"),
    ]);
    let both = Request { weight: Some(10), ..request(Cpus::Limit(0.5), None, None) };
    let done = set(&target, &both).unwrap();
    assert_eq!(files(&done.writes), [("cpu.max", "50000 100000"), ("cpu.weight", "10")]);
    assert_eq!(fs::read_to_string(tmp.0.join("cpu.weight")).unwrap(), "10");
    assert!(set(&target, &both).unwrap().writes.is_empty());
    // The kernel's refusal of a weight for an idle cgroup is caught before any write.
    fs::write(tmp.0.join("cpu.idle"), "1\n").unwrap();
    let e = set(&target, &idle_weight(None, Some(20))).unwrap_err();
    assert!(matches!(e, Error::WeightWhileIdle(_)), "{e}");
    assert_eq!(fs::read_to_string(tmp.0.join("cpu.weight")).unwrap(), "10");
}

#[test]
fn set_names_a_missing_cpu_idle() {
    let (tmp, target) = fixture(&[("cpu.max", "max 100000\n"), ("cpu.weight", "100\n")]);
    let e = set(&target, &idle_weight(Some(true), None)).unwrap_err();
    let expected = format!("{} does not exist", tmp.0.join("cpu.idle").display());
    assert!(e.to_string().starts_with(&expected), "{e}");
    assert!(!tmp.0.join("cpu.idle").exists(), "a control file was created");
    // Without cpu.idle no cgroup is idle: --no-idle has nothing to do.
    assert!(set(&target, &idle_weight(Some(false), None)).unwrap().writes.is_empty());
}

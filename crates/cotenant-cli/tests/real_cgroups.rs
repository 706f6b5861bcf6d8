//! `cotenant cpus --json` inside real cgroups: every scenario of issue 2's table (quota 0.5, 1,
//! 1.5 and 3 CPUs, a parent quota of 1 over an unlimited child, cpuset {0}, `taskset -c 0`, a
//! 10 ms period), on cgroup v1 or v2, whichever holds this host's cpu controller.
//!
//! Each scenario's expectation is capped by a baseline measured the same way in an unlimited
//! test cgroup, so the tests stay right inside a container that has a quota of its own. They
//! skip, printing why, where the process is not root or there is no writable cgroup file system.

mod support;

use serde_json::Value;
use std::{path::Path, sync::OnceLock};
use support::affinity::first_allowed_cpu;
use support::cgroup::{layout, os_error, skip, Layout, TestCgroup, PREFIX};

const PERIOD_US: u64 = 100_000;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_cotenant"))
}

fn cpus_json(cg: &TestCgroup, affinity: Option<usize>) -> Value {
    let out = cg.run(bin(), &["cpus", "--json"], affinity).expect("cotenant cpus --json runs");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON ({e}): {out}"))
}

/// The host layout and the limit of an unlimited test cgroup, or why the tests skip.
fn setup() -> Result<&'static (Layout, f64), String> {
    static SETUP: OnceLock<Result<(Layout, f64), String>> = OnceLock::new();
    SETUP
        .get_or_init(|| {
            let layout = layout()?;
            // Not being allowed to create cgroups skips the tests; any other failure is a bug.
            let cg = match TestCgroup::create(&layout, PREFIX, "baseline", false, None) {
                Ok(cg) => cg,
                Err(e)
                    if matches!(
                        os_error(&e),
                        Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::EBUSY)
                    ) =>
                {
                    return Err(format!("cannot create a test cgroup: {e}"));
                }
                Err(e) => panic!("creating the baseline test cgroup: {e}"),
            };
            let limit = cpus_json(&cg, None)["limit"].as_f64().ok_or("baseline has no limit")?;
            Ok((layout, limit))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The setup, or `None` after printing why `test` skips.
fn setup_or_skip(test: &str) -> Option<(&'static Layout, f64)> {
    match setup() {
        Ok((layout, baseline)) => Some((layout, *baseline)),
        Err(reason) => {
            skip(test, &reason);
            None
        }
    }
}

/// What a scenario expects before the baseline cap.
struct Want {
    limit: f64,
    binding: &'static str,
    /// For a quota: whether the binding quota is the top cgroup's (not the child's).
    binds_at_top: bool,
}

/// Checks the output against `want`, capped by `baseline`: when the baseline is lower, the
/// scenario's own constraint does not bind and only the limit and thread counts are checked.
fn check(test: &str, got: &Value, want: Want, baseline: f64, cg: &TestCgroup) {
    let limit = want.limit.min(baseline);
    let json = serde_json::to_string_pretty(got).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(got["limit"].as_f64().unwrap(), limit), "{test}: limit, want {limit}\n{json}");
    let floor = (limit.floor() as u64).max(1);
    let ceil = (limit.ceil() as u64).max(1);
    assert_eq!(got["threads"].as_u64(), Some(floor), "{test}: threads (floor)\n{json}");
    assert_eq!(got["threads_ceil"].as_u64(), Some(ceil), "{test}: threads_ceil\n{json}");
    if want.limit < baseline {
        assert_eq!(got["binding"].as_str(), Some(want.binding), "{test}: binding\n{json}");
    }
    if want.limit < baseline && want.binding == "quota" {
        let top = cg.cgroup_path.trim_end_matches("/child");
        let cgroup = if want.binds_at_top { top.to_owned() } else { cg.cgroup_path.clone() };
        assert!(
            got["binding_cgroup"].as_str().is_some_and(|c| c.ends_with(&cgroup)),
            "{test}: binding_cgroup, want one ending in {cgroup}\n{json}"
        );
        let dir = cg.cpu_dir(!want.binds_at_top).display().to_string();
        assert!(
            got["binding_path"].as_str().is_some_and(|p| p.starts_with(&dir)),
            "{test}: binding_path, want a file in {dir}\n{json}"
        );
    }
}

/// Sets a quota; `false` (after printing why the test skips) when cgroup v1 refuses it because
/// it exceeds the quota of the directory above (a container whose own cgroup has a quota).
fn set_quota(test: &str, layout: &Layout, dir: &Path, quota_us: Option<u64>, period_us: u64) -> bool {
    match TestCgroup::set_quota(layout, dir, quota_us, period_us) {
        Ok(()) => true,
        Err(e) if os_error(&e) == Some(libc::EINVAL) && matches!(layout, Layout::V1 { .. }) => {
            skip(
                test,
                &format!(
                    "cgroup v1 refused quota {quota_us:?} in {} (above its parent's?): {e}",
                    dir.display()
                ),
            );
            false
        }
        Err(e) => panic!("{test}: setting quota {quota_us:?} in {}: {e}", dir.display()),
    }
}

/// One scenario: a test cgroup (optionally with an unlimited child) with a quota on the top.
fn quota_scenario(test: &str, quota_us: u64, period_us: u64, child: bool, want_limit: f64) {
    let Some((layout, baseline)) = setup_or_skip(test) else { return };
    let cg = TestCgroup::create(layout, PREFIX, test, child, None).expect("create test cgroup");
    if !set_quota(test, layout, cg.cpu_dir(false), Some(quota_us), period_us) {
        return;
    }
    let got = cpus_json(&cg, None);
    check(test, &got, Want { limit: want_limit, binding: "quota", binds_at_top: true }, baseline, &cg);
}

#[test]
fn quota_half_cpu() {
    quota_scenario("quota-0.5", 50_000, PERIOD_US, false, 0.5);
}

#[test]
fn quota_one_cpu() {
    quota_scenario("quota-1", 100_000, PERIOD_US, false, 1.0);
}

#[test]
fn quota_one_and_a_half_cpus() {
    quota_scenario("quota-1.5", 150_000, PERIOD_US, false, 1.5);
}

#[test]
fn quota_above_the_cpu_count_is_bound_by_the_cpus() {
    // 3 CPUs on this 2-CPU host; on any host, one CPU more than the baseline allows.
    let test = "quota-above";
    let Some((layout, baseline)) = setup_or_skip(test) else { return };
    let over = baseline.ceil() + 1.0;
    let cg = TestCgroup::create(layout, PREFIX, test, false, None).expect("create test cgroup");
    if !set_quota(test, layout, cg.cpu_dir(false), Some((over * PERIOD_US as f64) as u64), PERIOD_US) {
        return;
    }
    let got = cpus_json(&cg, None);
    check(test, &got, Want { limit: over, binding: "quota", binds_at_top: true }, baseline, &cg);
    assert_ne!(got["binding"].as_str(), Some("quota"), "{test}: a quota above the CPUs must not bind");
}

#[test]
fn parent_quota_binds_an_unlimited_child() {
    quota_scenario("parent-1", 100_000, PERIOD_US, true, 1.0);
}

#[test]
fn child_quota_below_parent_binds() {
    let test = "child-lower";
    let Some((layout, baseline)) = setup_or_skip(test) else { return };
    let cg = TestCgroup::create(layout, PREFIX, test, true, None).expect("create test cgroup");
    if !set_quota(test, layout, cg.cpu_dir(false), Some(150_000), PERIOD_US)
        || !set_quota(test, layout, cg.cpu_dir(true), Some(50_000), PERIOD_US)
    {
        return;
    }
    let got = cpus_json(&cg, None);
    check(test, &got, Want { limit: 0.5, binding: "quota", binds_at_top: false }, baseline, &cg);
}

#[test]
fn ten_millisecond_period() {
    quota_scenario("period-10ms", 15_000, 10_000, false, 1.5);
}

#[test]
fn cpuset_of_one_cpu() {
    let test = "cpuset-0";
    let Some((layout, baseline)) = setup_or_skip(test) else { return };
    if matches!(layout, Layout::V1 { cpuset: None, .. } | Layout::V2 { cpuset: false, .. }) {
        return skip(test, "no cpuset controller available");
    }
    let cpu = first_allowed_cpu();
    let cg = TestCgroup::create(layout, PREFIX, test, false, Some(&cpu.to_string()))
        .expect("create cpuset cgroup");
    let got = cpus_json(&cg, None);
    check(test, &got, Want { limit: 1.0, binding: "cpuset", binds_at_top: true }, baseline, &cg);
}

#[test]
fn taskset_one_cpu() {
    let test = "taskset-0";
    let Some((layout, baseline)) = setup_or_skip(test) else { return };
    let cg = TestCgroup::create(layout, PREFIX, test, false, None).expect("create test cgroup");
    let got = cpus_json(&cg, Some(first_allowed_cpu()));
    check(test, &got, Want { limit: 1.0, binding: "affinity", binds_at_top: true }, baseline, &cg);
}

#[test]
fn explain_names_the_binding_ancestor_and_its_file() {
    let test = "explain-ancestor";
    let Some((layout, baseline)) = setup_or_skip(test) else { return };
    if baseline <= 1.0 {
        return skip(test, "the baseline is 1 CPU already: a quota of 1 would not bind");
    }
    let cg = TestCgroup::create(layout, PREFIX, test, true, None).expect("create test cgroup");
    if !set_quota(test, layout, cg.cpu_dir(false), Some(100_000), PERIOD_US) {
        return;
    }
    let out = cg.run(bin(), &["cpus", "--explain"], None).expect("cotenant cpus --explain runs");
    let top = cg.cgroup_path.trim_end_matches("/child");
    let file = match layout {
        Layout::V1 { .. } => cg.cpu_dir(false).join("cpu.cfs_quota_us"),
        Layout::V2 { .. } => cg.cpu_dir(false).join("cpu.max"),
    };
    let headline = out.lines().next().unwrap_or_default();
    assert!(
        headline.contains(&format!("ancestor cgroup {top}")),
        "{test}: headline names the ancestor\n{out}"
    );
    assert!(
        headline.contains(&file.display().to_string()),
        "{test}: headline names {}\n{out}",
        file.display()
    );
    let marked = out.lines().find(|l| l.starts_with('*')).unwrap_or_default();
    assert!(
        marked.contains(top) && marked.contains(&file.display().to_string()),
        "{test}: table marks it\n{out}"
    );
}

#[test]
fn refresh_sees_a_quota_change_on_the_live_cgroup_file_system() {
    // `Limit::refresh` re-reads files it opened at detection with pread at offset 0; this
    // checks that cgroupfs regenerates their text, as the fixture test cannot.
    let test = "refresh";
    let Some((layout, baseline)) = setup_or_skip(test) else { return };
    if baseline <= 1.0 {
        return skip(test, "the baseline is 1 CPU already: quotas of 1 and 0.5 would not both bind");
    }
    let cg = TestCgroup::create(layout, PREFIX, test, true, None).expect("create test cgroup");
    let (top, child) = (cg.cpu_dir(false).to_owned(), cg.cpu_dir(true).to_owned());
    if !set_quota(test, layout, &top, Some(100_000), PERIOD_US) {
        return;
    }
    let mut sleeper = cg.command(Path::new("sleep"), &["30"], None).spawn().expect("spawn sleep");
    let result = std::panic::catch_unwind(|| {
        let mut budget = cotenant::cpus::detect_pid(sleeper.id()).expect("detect the sleeper");
        assert_eq!(budget.limit(), 1.0, "{test}: before");
        TestCgroup::set_quota(layout, &child, Some(50_000), PERIOD_US).expect("child quota");
        budget.refresh().expect("refresh");
        assert_eq!(budget.limit(), 0.5, "{test}: after the child's quota was set");
        assert!(budget.binding_level().unwrap().cgroup.ends_with("/child"), "{test}: the child binds");
        TestCgroup::set_quota(layout, &child, None, PERIOD_US).expect("child unlimited");
        TestCgroup::set_quota(layout, &top, Some(150_000), PERIOD_US).expect("top quota");
        budget.refresh().expect("refresh");
        assert_eq!(budget.limit(), 1.5f64.min(baseline), "{test}: after both changed");
    });
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    drop(cg);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

//! Unit tests of `busy-sibling-cgroup` on recorded facts: [`decide`] over competitors as the
//! snapshots would give them, and the whole analysis over hand-made snapshots of a service in
//! `/a` and two burners in `/b` (v1, two CPUs, one second apart).

use super::*;
use crate::doctor::analyze::analyze;
use crate::doctor::snapshot::{CpuGroup, Hierarchy, Proc, Snapshot, Target, Thread};
use cotenant::internal::procfs::{cpulist, mountinfo::CgroupMount, schedstat::TaskSchedstat};
use std::time::Duration;

fn competitor(cgroup: &str, cpus: f64, idle: Option<bool>, weight: u64) -> Competitor {
    Competitor {
        cgroup: cgroup.into(),
        dir: format!("/sys/fs/cgroup/cpu{cgroup}"),
        cpus_on_ours: cpus,
        busiest_pid: 50,
        busiest_comm: "burn".into(),
        busiest_cpus: cpus.min(1.0),
        idle,
        weight: Some(weight),
        our_weight: Some(1024),
    }
}

#[test]
fn a_busy_sibling_not_idle_gets_the_idle_command() {
    let r = decide(false, &[competitor("/b", 2.0, Some(false), 1024)]);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].action, Action::Idle);
    assert_eq!(r[0].commands, ["cotenant cgroup set /sys/fs/cgroup/cpu/b --idle"]);
    assert!(r[0].unit.is_none() && !r[0].kubernetes);
}

#[test]
fn idle_quiet_or_lightly_used_siblings_get_nothing() {
    let idle = competitor("/b", 2.0, Some(true), 3);
    let quiet = competitor("/c", 0.2, Some(false), 1024);
    // Busy in sum, but only from many small processes, none worth naming.
    let spread = Competitor { busiest_cpus: 0.05, ..competitor("/d", 1.2, Some(false), 1024) };
    assert!(decide(false, &[idle, quiet, spread]).is_empty());
}

#[test]
fn without_cpu_idle_the_weight_goes_to_a_tenth_of_ours() {
    // v1: our 1024 shares are weight 100; theirs 2048 (200) → 10, converted back by the command.
    let r = decide(false, &[competitor("/b", 1.6, None, 2048)]);
    assert_eq!(r[0].action, Action::Weight(10));
    assert_eq!(r[0].commands, ["cotenant cgroup set /sys/fs/cgroup/cpu/b --weight 10"]);
    // Already at a tenth or below: 1; already at 1: nothing left to lower.
    let low = Competitor { weight: Some(10), ..competitor("/b", 1.6, None, 0) };
    let ours_100 = Competitor { our_weight: Some(100), ..low.clone() };
    assert_eq!(decide(true, &[ours_100])[0].action, Action::Weight(1));
    let lowest = Competitor { weight: Some(1), our_weight: Some(100), ..low };
    assert!(decide(true, &[lowest]).is_empty());
}

#[test]
fn the_busiest_siblings_come_first_and_at_most_three() {
    let all: Vec<Competitor> = [("/b", 0.5), ("/c", 1.5), ("/d", 0.9), ("/e", 0.7)]
        .iter()
        .map(|(cg, cpus)| competitor(cg, *cpus, Some(false), 1024))
        .collect();
    let decided = decide(false, &all);
    let named: Vec<&str> = decided.iter().map(|r| r.competitor.cgroup.as_str()).collect();
    assert_eq!(named, ["/c", "/d", "/e"]);
}

#[test]
fn systemd_units_get_systemctl_and_pods_get_kubernetes_advice() {
    let unit = competitor("/system.slice/batch.service", 1.0, Some(false), 1024);
    let r = &decide(true, &[unit])[0];
    assert_eq!(r.unit.as_deref(), Some("batch.service"));
    assert_eq!(
        r.commands,
        [
            "cotenant cgroup set /sys/fs/cgroup/cpu/system.slice/batch.service --idle",
            "systemctl set-property batch.service CPUWeight=idle"
        ]
    );
    // A pod's cgroups are systemd units too, but the kubelet owns them: no systemctl.
    let path = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice";
    let pod = competitor(path, 1.0, Some(false), 1024);
    let r = &decide(true, &[pod])[0];
    assert!(r.kubernetes && r.unit.is_none() && r.commands.len() == 1, "{r:?}");
    // systemd's escapes need quoting in a shell.
    let escaped = competitor("/system.slice/app\\x2dbatch.service", 1.0, Some(false), 1024);
    let r = &decide(true, &[escaped])[0];
    assert_eq!(r.commands[1], r"systemctl set-property 'app\x2dbatch.service' CPUWeight=idle");
}

#[test]
fn shell_quote_leaves_plain_paths_alone() {
    assert_eq!(shell_quote("/sys/fs/cgroup/cpu,cpuacct/a-b_c.d"), "/sys/fs/cgroup/cpu,cpuacct/a-b_c.d");
    assert_eq!(shell_quote("/a b"), "'/a b'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
    assert_eq!(shell_quote(""), "''");
    assert_eq!(systemd_unit("/a/b.service").as_deref(), Some("b.service"));
    assert_eq!(systemd_unit("/a/b"), None);
    assert_eq!(systemd_unit("/.slice"), None);
}

/// The snapshots of a service (pid 42, one thread) in `/a` that ran `run_ms` and waited
/// `wait_ms` over one second, next to two processes in `/b` burning a CPU each; `/b`'s
/// `cpu.idle` is `b_idle`.
fn sample(run_ms: u64, wait_ms: u64, b_idle: Option<bool>) -> (Snapshot, Snapshot) {
    let cpus = cpulist::parse("0-1").unwrap();
    let group = |dir: &str, idle: Option<bool>| CpuGroup {
        dir: format!("/sys/fs/cgroup/cpu{dir}"),
        weight: Some(1024),
        idle,
        ..CpuGroup::default()
    };
    let take = |ticks: u64, ns: u64, wait_ns: u64| {
        let burner = |pid: u32| Proc {
            pid,
            comm: "burn".into(),
            cpu_ticks: ticks,
            threads: 1,
            allowed: Some(cpus.clone()),
            cpu_cgroup: Some("/b".into()),
            cpuset_cgroup: None,
        };
        let thread = Thread {
            tid: 42,
            comm: "service".into(),
            schedstat: Some(TaskSchedstat { on_cpu_ns: ns, run_delay_ns: wait_ns, timeslices: 0 }),
            ..Thread::default()
        };
        let mut s = Snapshot {
            clk_tck: 100,
            online: Some(cpus.clone()),
            cpu_hierarchy: Some(Hierarchy {
                version: "v1",
                mount: CgroupMount {
                    root: "/".into(),
                    mount_point: "/sys/fs/cgroup/cpu".into(),
                    is_v2: false,
                    super_options: vec!["rw".into(), "cpu".into()],
                },
            }),
            processes: vec![burner(50), burner(51)],
            target: Some(Target {
                pid: 42,
                exists: true,
                readable: true,
                comm: "service".into(),
                threads: vec![thread],
                allowed: Some(cpus.clone()),
                cpu_cgroup: Some("/a".into()),
                ..Target::default()
            }),
            ..Snapshot::default()
        };
        let root = CpuGroup { dir: "/sys/fs/cgroup/cpu".into(), ..CpuGroup::default() };
        s.cpu_groups.insert("/".into(), root);
        s.cpu_groups.insert("/a".into(), group("/a", Some(false)));
        s.cpu_groups.insert("/b".into(), group("/b", b_idle));
        s
    };
    (take(1000, 0, 0), take(1100, run_ms * 1_000_000, wait_ms * 1_000_000))
}

fn busy_sibling(run_ms: u64, wait_ms: u64, b_idle: Option<bool>) -> Option<Finding> {
    let (before, after) = sample(run_ms, wait_ms, b_idle);
    let (_, findings) = analyze(&before, &after, Duration::from_secs(1));
    findings.into_iter().find(|f| f.kind == "busy-sibling-cgroup")
}

#[test]
fn the_analysis_names_the_sibling_and_prints_the_command() {
    let f = busy_sibling(500, 500, Some(false)).expect("a busy-sibling-cgroup finding");
    assert_eq!(f.severity, Severity::High);
    assert_eq!(f.commands, ["cotenant cgroup set /sys/fs/cgroup/cpu/b --idle"]);
    assert!(f.title.contains("Sibling cgroup /b keeps 2.00 CPUs"), "{}", f.title);
    let verify = "cotenant doctor --pid 42 --verify BEFORE.json";
    assert!(f.recommendation.contains(verify), "{}", f.recommendation);
    let idle = f.evidence.iter().find(|e| e.what == "cpu.idle of /b").expect("cpu.idle evidence");
    assert_eq!((idle.file.as_str(), idle.value.as_str()), ("/sys/fs/cgroup/cpu/b/cpu.idle", "0 (not idle)"));
    for text in [&f.title, &f.recommendation] {
        for word in ["seed", "issue", "§"] {
            assert!(!text.to_lowercase().contains(word), "says {word:?}: {text}");
        }
    }
}

#[test]
fn the_analysis_is_quiet_once_the_sibling_is_idle_or_the_wait_is_small() {
    assert!(busy_sibling(500, 500, Some(true)).is_none(), "idle already");
    assert!(busy_sibling(900, 20, Some(false)).is_none(), "2% wait is no contention");
    // No cpu.idle on this kernel: the weight instead.
    let f = busy_sibling(500, 500, None).expect("a finding");
    assert_eq!(f.commands, ["cotenant cgroup set /sys/fs/cgroup/cpu/b --weight 10"]);
}

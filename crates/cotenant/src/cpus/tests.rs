//! Unit tests of the CPU budget: which source binds, the quota of the nearest level on ties,
//! and how a fractional budget rounds to a thread count.

use super::*;
use crate::procfs::cpulist;

fn set(list: &str) -> Source<CpuSet> {
    Source::Present { origin: Origin::Syscall("test"), value: cpulist::parse(list).unwrap() }
}

fn absent() -> Source<CpuSet> {
    Source::Absent { reason: "test".into() }
}

fn level(quota: Option<(u64, u64)>) -> Source<Option<Quota>> {
    Source::Present {
        origin: Origin::Syscall("test"),
        value: quota.map(|(quota_us, period_us)| Quota { quota_us, period_us }),
    }
}

fn budget(derived: Derived) -> Limit {
    Limit {
        plan: probe::Plan::empty_for_tests(),
        online: absent(),
        affinity: absent(),
        cpuset: absent(),
        quotas: vec![],
        quota_absent: None,
        weight: Source::Absent { reason: "test".into() },
        derived,
    }
}

#[test]
fn the_narrowest_cpu_set_binds_and_ties_go_to_the_broader_source() {
    let d = derive(&set("0-3"), &set("0-3"), &set("0-3"), &[]).unwrap();
    assert_eq!((d.allowed, d.binding), (4, Constraint::Online));
    let d = derive(&set("0-3"), &set("0"), &set("0"), &[]).unwrap();
    assert_eq!((d.allowed, d.binding), (1, Constraint::Cpuset));
    let d = derive(&set("0-3"), &set("0-3"), &set("2"), &[]).unwrap();
    assert_eq!((d.allowed, d.binding), (1, Constraint::Affinity));
    let d = derive(&absent(), &absent(), &set("1,3"), &[]).unwrap();
    assert_eq!((d.allowed, d.binding), (2, Constraint::Affinity));
}

#[test]
fn the_smallest_quota_of_any_level_binds_nearest_level_on_ties() {
    let levels = [level(None), level(Some((100_000, 100_000))), level(Some((50_000, 50_000)))];
    let d = derive(&set("0-3"), &absent(), &absent(), &levels).unwrap();
    assert_eq!((d.num, d.den, d.binding, d.binding_level), (100_000, 100_000, Constraint::Quota, Some(1)));
    let above = [level(Some((800_000, 100_000)))];
    let d = derive(&set("0-3"), &absent(), &absent(), &above).unwrap();
    assert_eq!((d.num, d.den, d.binding), (4, 1, Constraint::Online));
}

#[test]
fn no_cpus_at_all_is_undetermined() {
    assert!(matches!(derive(&absent(), &absent(), &absent(), &[]), Err(Error::Undetermined { .. })));
    let err = derive(&set("0-1"), &set("2-3"), &absent(), &[]).unwrap_err();
    assert!(err.to_string().contains("no CPU in common"), "{err}");
}

#[test]
fn rounding_is_exact_and_clamped() {
    let cases = [
        // (num, den, allowed) -> (floor, ceil, nearest)
        ((50_000, 100_000, 2), (1, 1, 1)),
        ((150_000, 100_000, 2), (1, 2, 2)),
        ((149_999, 100_000, 2), (1, 2, 1)),
        ((299_999, 100_000, 4), (2, 3, 3)),
        ((2, 1, 2), (2, 2, 2)),
        ((0, 100_000, 2), (1, 1, 1)),
        ((u64::MAX, 1, 8), (8, 8, 8)),
    ];
    for ((num, den, allowed), want) in cases {
        let b = budget(Derived { allowed, num, den, binding: Constraint::Quota, binding_level: None });
        let got = (b.threads(Rounding::Floor), b.threads(Rounding::Ceil), b.threads(Rounding::Nearest));
        assert_eq!(got, want, "{num}/{den} on {allowed}");
    }
}

#[test]
fn rounding_parses() {
    assert_eq!("ceil".parse::<Rounding>(), Ok(Rounding::Ceil));
    assert!("up".parse::<Rounding>().unwrap_err().contains("floor, ceil or nearest"));
}

//! Unit tests of [`competing`].

use super::*;

#[test]
fn competing_entities_are_siblings_below_the_common_ancestor() {
    use crate::doctor::snapshot::{CpuGroup, Hierarchy};
    let mut s = Snapshot {
        cpu_hierarchy: Some(Hierarchy {
            version: "v1",
            mount: cotenant::internal::procfs::mountinfo::CgroupMount {
                root: "/".into(),
                mount_point: "/sys/fs/cgroup/cpu".into(),
                is_v2: false,
                super_options: vec![],
            },
        }),
        ..Snapshot::default()
    };
    for (p, w) in [("/a", 512), ("/a/b", 2048), ("/c", 1024), ("/a/d", 4096)] {
        s.cpu_groups.insert(p.into(), CpuGroup { weight: Some(w), ..Default::default() });
    }
    assert_eq!(competing(&s, "/a/b", "/c").0, "/a");
    assert_eq!(competing(&s, "/a/b", "/c").1, Some(512));
    assert_eq!(competing(&s, "/a/b", "/a/d").1, Some(2048));
    assert_eq!(competing(&s, "/a", "/a/d").1, Some(1024)); // a task of /a: nice-0 weight
}

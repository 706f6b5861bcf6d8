//! Where a process's CPU controllers live: the v1-or-v2 choice per controller, the cgroup
//! directory below the right mount, and the ancestor walk up to the mount's root.
//!
//! Pure: it works on parsed `/proc/<pid>/cgroup` and mountinfo records and returns paths as the
//! host names them; the probe maps them onto its root and does the reading.

use crate::procfs::{cgroup::Membership, mountinfo::CgroupMount};

/// The two cgroup versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// cgroup v1: one hierarchy per controller (or group of co-mounted controllers).
    V1,
    /// cgroup v2: the single unified hierarchy.
    V2,
}

impl CgroupVersion {
    /// `"v1"` or `"v2"`.
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        }
    }
}

/// A controller's place for one process: the hierarchy version, the process's cgroup in it, and
/// the mount through which that cgroup is visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerPlace {
    /// Which hierarchy holds the controller.
    pub version: CgroupVersion,
    /// The process's cgroup path, as in `/proc/<pid>/cgroup`.
    pub cgroup: String,
    /// The mount the cgroup is reached through.
    pub mount: CgroupMount,
}

/// One cgroup on the walk from a process's cgroup up to the mount root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// The cgroup path, as in `/proc/<pid>/cgroup` (e.g. `/kubepods/pod1`).
    pub cgroup: String,
    /// Its directory as the host names it (e.g. `/sys/fs/cgroup/cpu/kubepods/pod1`).
    pub dir: String,
}

/// Finds v1 controller `name` (`"cpu"`, `"cpuset"`): the process's cgroup in the hierarchy that
/// binds it, and a mount of that hierarchy through which the cgroup is visible. `Err` says why
/// there is none (a reason, not a failure: the source is then absent).
pub fn locate_v1(
    name: &str,
    memberships: &[Membership],
    mounts: &[CgroupMount],
) -> Result<ControllerPlace, String> {
    let Some(member) = memberships.iter().find(|m| m.has_controller(name)) else {
        return Err(format!("the process is in no cgroup v1 hierarchy with the {name} controller"));
    };
    let candidates: Vec<&CgroupMount> = mounts.iter().filter(|m| m.has_controller(name)).collect();
    if candidates.is_empty() {
        return Err(format!("no cgroup v1 {name} hierarchy is mounted"));
    }
    visible_through(&member.path, &candidates)
        .map(|mount| ControllerPlace { version: CgroupVersion::V1, cgroup: member.path.clone(), mount })
        .ok_or_else(|| not_visible(&member.path, &candidates))
}

/// Finds the process's cgroup in the v2 hierarchy and a mount through which it is visible.
/// Whether a given controller is enabled there is for the caller to check.
pub fn locate_v2(memberships: &[Membership], mounts: &[CgroupMount]) -> Result<ControllerPlace, String> {
    let Some(member) = memberships.iter().find(|m| m.is_v2()) else {
        return Err("the process is in no cgroup v2 hierarchy".into());
    };
    let candidates: Vec<&CgroupMount> = mounts.iter().filter(|m| m.is_v2).collect();
    if candidates.is_empty() {
        return Err("no cgroup v2 hierarchy is mounted".into());
    }
    visible_through(&member.path, &candidates)
        .map(|mount| ControllerPlace { version: CgroupVersion::V2, cgroup: member.path.clone(), mount })
        .ok_or_else(|| not_visible(&member.path, &candidates))
}

/// Of the mounts through which `cgroup` is visible, the one with the shortest root: when a
/// hierarchy is mounted more than once (a container's narrower mount can appear in the host's
/// mountinfo through mount propagation), the broadest view shows the most ancestors, and an
/// ancestor's quota binds as surely as the process's own.
fn visible_through(cgroup: &str, candidates: &[&CgroupMount]) -> Option<CgroupMount> {
    candidates
        .iter()
        .filter(|m| m.dir_of(cgroup).is_some())
        .min_by_key(|m| m.root.len())
        .map(|m| (*m).clone())
}

fn not_visible(cgroup: &str, candidates: &[&CgroupMount]) -> String {
    let roots: Vec<&str> = candidates.iter().map(|m| m.root.as_str()).collect();
    format!("cgroup {cgroup} is outside every mount of its hierarchy (mount roots: {})", roots.join(", "))
}

impl ControllerPlace {
    /// The process's cgroup and each ancestor up to and including the mount's root, leaf
    /// first. Ancestors above the mount root are invisible from here (inside a container, they
    /// belong to the host) and are not listed.
    pub fn levels(&self) -> Vec<Level> {
        let mut levels = Vec::new();
        let mut cgroup = self.cgroup.trim_end_matches('/').to_owned();
        loop {
            let path = if cgroup.is_empty() { "/" } else { cgroup.as_str() };
            let Some(dir) = self.mount.dir_of(path) else { break };
            levels.push(Level { cgroup: path.to_owned(), dir });
            match cgroup.rfind('/') {
                Some(i) if !cgroup.is_empty() => cgroup.truncate(i),
                _ => break,
            }
        }
        levels
    }

    /// The directory of the process's own cgroup (the place is only built when it is visible).
    pub fn leaf_dir(&self) -> String {
        self.mount.dir_of(&self.cgroup).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::{cgroup, mountinfo};

    fn place(cgroup_text: &str, mountinfo_text: &str, v1: Option<&str>) -> Result<ControllerPlace, String> {
        let m = cgroup::parse(cgroup_text).unwrap();
        let mounts = mountinfo::parse_cgroup_mounts(mountinfo_text).unwrap();
        match v1 {
            Some(name) => locate_v1(name, &m, &mounts),
            None => locate_v2(&m, &mounts),
        }
    }

    const MOUNTS: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
34 31 0:31 /kube /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";

    #[test]
    fn walks_every_ancestor_up_to_the_mount_root() {
        let p = place("1:cpu:/a/b\n", MOUNTS, Some("cpu")).unwrap();
        let dirs: Vec<_> = p.levels().into_iter().map(|l| (l.cgroup, l.dir)).collect();
        assert_eq!(
            dirs,
            vec![
                ("/a/b".into(), "/sys/fs/cgroup/cpu/a/b".into()),
                ("/a".into(), "/sys/fs/cgroup/cpu/a".into()),
                ("/".into(), "/sys/fs/cgroup/cpu".into()),
            ]
        );
    }

    #[test]
    fn stops_at_a_namespaced_mount_root() {
        let p = place("3:cpuset:/kube/pod/c\n", MOUNTS, Some("cpuset")).unwrap();
        let cgroups: Vec<_> = p.levels().into_iter().map(|l| l.cgroup).collect();
        assert_eq!(cgroups, vec!["/kube/pod/c", "/kube/pod", "/kube"]);
        assert_eq!(p.leaf_dir(), "/sys/fs/cgroup/cpuset/pod/c");
    }

    #[test]
    fn the_broadest_of_two_mounts_of_one_hierarchy_wins() {
        let two = "32 31 0:29 /kube/pod /ctr/sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                   33 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        let p = place("1:cpu:/kube/pod/c\n", two, Some("cpu")).unwrap();
        assert_eq!(p.levels().len(), 4, "/kube/pod/c, /kube/pod, /kube and / are all visible");
    }

    #[test]
    fn explains_what_is_missing() {
        assert!(place("1:cpu:/\n", MOUNTS, Some("cpuacct")).unwrap_err().contains("no cgroup v1 hierarchy"));
        assert!(place("3:cpuset:/other\n", MOUNTS, Some("cpuset")).unwrap_err().contains("outside"));
        assert!(place("1:cpu:/\n", "", Some("cpu")).unwrap_err().contains("mounted"));
        assert_eq!(place("0::/x\n", MOUNTS, None).unwrap().leaf_dir(), "/sys/fs/cgroup/unified/x");
    }
}

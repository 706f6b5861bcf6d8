//! [`resolve`]: CGROUP to a directory (absolute, or below the cpu controller's mount), with the
//! file systems it may be on; and opening it with the checks of [`crate::cgroupfs`].

use super::{Error, Target, FIXTURE_HOOK_VAR};
use crate::cgroupfs::{os_error, ControlDir, FileSystems};
use cotenant::internal::procfs::mountinfo;
use std::{
    fs,
    path::{Component, Path, PathBuf},
};

/// Resolves CGROUP: an absolute path is taken as it is; a relative one is joined to the mount
/// point of the cpu controller's hierarchy (v1 `cpu` if mounted, else the v2 mount), as read
/// from `<root>/proc/self/mountinfo` and placed under `root`.
///
/// The directory must be on a cgroup file system, unless [`FIXTURE_HOOK_VAR`] is `1`, `root`
/// is a fixture root (not `/`) and the directory lies below it, with no `..`.
pub fn resolve(cgroup: &Path, root: &Path) -> Result<Target, Error> {
    let hook = std::env::var_os(FIXTURE_HOOK_VAR).is_some_and(|v| v.as_os_str() == "1");
    resolve_with(cgroup, root, hook)
}

/// [`resolve`], told whether the fixture hook's variable is set.
pub(super) fn resolve_with(cgroup: &Path, root: &Path, fixture_hook: bool) -> Result<Target, Error> {
    let dir = resolve_dir(cgroup, root)?;
    let in_fixture = fixture_hook
        && root != Path::new("/")
        && dir.starts_with(root)
        && !dir.components().any(|c| c == Component::ParentDir);
    let file_systems = if in_fixture { FileSystems::FixtureTree } else { FileSystems::CgroupOnly };
    Ok(Target { dir, file_systems })
}

/// The directory CGROUP names (see [`resolve`]).
fn resolve_dir(cgroup: &Path, root: &Path) -> Result<PathBuf, Error> {
    if cgroup.is_absolute() {
        return Ok(cgroup.to_owned());
    }
    if cgroup.components().any(|c| c == Component::ParentDir) {
        return Err(Error::OutsideMount(cgroup.to_owned()));
    }
    let file = root.join("proc/self/mountinfo");
    let text = fs::read_to_string(&file)
        .map_err(|e| Error::NoMount(format!("cannot read {}: {e}", file.display())))?;
    let mounts = mountinfo::parse_cgroup_mounts(&text)
        .map_err(|e| Error::NoMount(format!("{}: {e}", file.display())))?;
    let mount = mounts.iter().find(|m| m.has_controller("cpu")).or_else(|| mounts.iter().find(|m| m.is_v2));
    let Some(mount) = mount else {
        return Err(Error::NoMount(format!(
            "no cgroup hierarchy with the cpu controller in {} (give an absolute path)",
            file.display()
        )));
    };
    Ok(root.join(mount.mount_point.trim_start_matches('/')).join(cgroup))
}

/// Opens the target's directory with the checks of [`crate::cgroupfs`].
pub(super) fn open_dir(target: &Target) -> Result<ControlDir, Error> {
    ControlDir::open_with(&target.dir, target.file_systems).map_err(|e| match os_error(&e) {
        Some(libc::ENOENT) => Error::NoSuchCgroup(target.dir.clone()),
        Some(libc::ENOTDIR) => Error::NotADirectory(target.dir.clone()),
        _ => Error::Access(e),
    })
}

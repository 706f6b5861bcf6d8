//! Listing and removing this user's token sets, and the name a creator records next to its
//! set's pipe: the System V half of `list.rs` (Linux only; the module documentation there says
//! what is listed, and how a name is trusted).

use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::list::{parse_sysvipc_sem, SetInfo, SysvSet};
use super::{error, foreign_ids, HostTokens, TokensError};

/// This user's token sets, and any set on the key of this process's default set.
pub fn list() -> Result<Vec<SetInfo>, TokensError> {
    let text = std::fs::read_to_string("/proc/sysvipc/sem")
        .map_err(|e| error(format!("reading /proc/sysvipc/sem: {e}")))?;
    let sets = parse_sysvipc_sem(&text).map_err(error)?;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let default_key = super::user_key(&super::default_set_name().0);
    let mut found = Vec::new();
    for set in sets {
        if set.uid != uid && set.key != default_key {
            continue;
        }
        if let Some(info) = describe(&set, default_key) {
            found.push(info);
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name).then(a.key.cmp(&b.key)));
    Ok(found)
}

/// What a listed set is; `None` for a set of this user that is not cotenant's.
fn describe(set: &SysvSet, default_key: i32) -> Option<SetInfo> {
    let handle = HostTokens::without_pipe(set.semid, 0, "(listed)");
    let path = super::wakeup::fifo_path(set.uid, set.key);
    let mut info = SetInfo {
        key: set.key,
        semid: set.semid,
        name: read_name(&path),
        owner: set.uid,
        creator: set.cuid,
        mode: set.mode & 0o777,
        tokens: None,
        free: None,
        waiting: None,
        members: None,
        leases: 0,
        refused: None,
    };
    // Judged from the kernel's list: a set another user made with mode 0600 cannot even be
    // read (IPC_STAT needs read permission), and it must be listed all the same.
    if let Some(why) = foreign_ids(set.uid, set.cuid, set.mode) {
        info.refused = Some(why);
        return Some(info);
    }
    let marker = if set.nsems >= 2 { handle.value(super::SEM_MAGIC).ok() } else { None };
    let never_initialised = handle.stat().is_ok_and(|ds| ds.sem_otime == 0);
    match marker {
        Some(m) if m == super::MAGIC as u32 && set.nsems >= super::NSEMS as u32 => {
            info.tokens = handle.value(super::SEM_COUNT).ok();
            info.free = handle.available().ok();
            info.waiting = handle.waiting().ok();
            info.members = handle.members().ok();
            info.leases = set.nsems - super::NSEMS as u32;
            if let Some(name) = &info.name {
                if handle.value(super::SEM_NAME).ok() != Some(u32::from(super::name_check(name))) {
                    info.refused = Some(format!("its recorded name {name:?} does not match the set"));
                }
            }
        }
        Some(m) if m == super::OLD_MAGIC as u32 => {
            info.refused = Some("made by an older cotenant (another layout); remove it".into());
        }
        // On the default key, created by a process that died before it initialised it:
        // `open` refuses it; listed so that it can be removed. (Elsewhere an uninitialised set
        // may be anybody's: `cotenant tokens remove NAME` removes one by its name.)
        Some(0) if never_initialised && set.nsems >= super::NSEMS as u32 && set.key == default_key => {
            info.refused = Some("never initialised (its creator died?); remove it".into());
        }
        // This user's set, not cotenant's: none of our business, unless it squats our key.
        _ if set.key != default_key => return None,
        _ => info.refused = Some("not a cotenant set".into()),
    }
    Some(info)
}

/// Removes the listed set with key `key`, its pipe and its recorded name. Refused while member
/// processes are counted, unless `force` (their pools then run without tokens); a set this user
/// did not create, or that is not cotenant's, is removed only with `force`.
pub fn remove(key: i32, force: bool) -> Result<(), TokensError> {
    let info = list()?.into_iter().find(|set| set.key == key).ok_or_else(|| {
        error(format!("no token set with key {:#010x} (see `cotenant tokens list`)", key as u32))
    })?;
    let label = info.name.clone().unwrap_or_else(|| format!("key {:#010x}", key as u32));
    if !force {
        if let Some(why) = &info.refused {
            return Err(error(format!("set {label}: {why}; not removed without --force")));
        }
        if let Some(members) = info.members.filter(|&m| m > 0) {
            return Err(error(format!(
                "set {label}: {members} member process(es) still use it; not removed without --force"
            )));
        }
    }
    let handle = HostTokens::without_pipe(info.semid, 0, &label);
    handle.remove_set()?;
    let path = super::wakeup::fifo_path(info.owner, key);
    remove_name(&path);
    super::wakeup::WakeUps::remove(&path)
        .map_err(|e| error(format!("set {label}: removing its pipe {}: {e}", path.display())))
}

/// The key of a listed set given by name or by key (`0x1234abcd`).
pub fn resolve(name_or_key: &str) -> Result<i32, TokensError> {
    if let Some(hex) = name_or_key.strip_prefix("0x") {
        return u32::from_str_radix(hex, 16)
            .map(|k| k as i32)
            .map_err(|_| error(format!("{name_or_key:?} is not a key (0x and 8 hex digits)")));
    }
    super::check_name(name_or_key)?;
    Ok(super::user_key(name_or_key))
}

fn name_path(pipe: &Path) -> PathBuf {
    let mut path = pipe.as_os_str().to_owned();
    path.push(".name");
    PathBuf::from(path)
}

/// Records `name` next to the set's pipe (`pipe`): created afresh, mode 0600, never through a
/// symlink; a stale file of ours is replaced.
pub(super) fn write_name(pipe: &Path, name: &str) -> io::Result<()> {
    let path = name_path(pipe);
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
    };
    let mut file = match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // Left by a removed set of the same key; `symlink_metadata` does not follow.
            let meta = std::fs::symlink_metadata(&path)?;
            // SAFETY: getuid cannot fail.
            if !meta.file_type().is_file() || meta.uid() != unsafe { libc::getuid() } {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "a file of another user is there",
                ));
            }
            std::fs::remove_file(&path)?;
            create()?
        }
        other => other?,
    };
    file.write_all(name.as_bytes())
}

/// The name recorded next to `pipe`, if a regular file of this user holds one.
fn read_name(pipe: &Path) -> Option<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(name_path(pipe))
        .ok()?;
    let meta = file.metadata().ok()?;
    // SAFETY: getuid cannot fail.
    if !meta.is_file() || meta.uid() != unsafe { libc::getuid() } || meta.mode() & 0o022 != 0 {
        return None;
    }
    let mut name = String::new();
    file.take(256).read_to_string(&mut name).ok()?;
    (!name.is_empty() && super::check_name(&name).is_ok()).then_some(name)
}

/// Removes the name recorded next to `pipe` (nothing if there is none).
pub(super) fn remove_name(pipe: &Path) {
    let _ = std::fs::remove_file(name_path(pipe));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys_resolve_and_bad_ones_say_why() {
        assert_eq!(resolve("0x0000002a").unwrap(), 42);
        assert_eq!(resolve("web").unwrap(), super::super::user_key("web"));
        assert!(resolve("0xzz").unwrap_err().to_string().contains("not a key"));
        assert!(resolve("").unwrap_err().to_string().contains("1 to 200 bytes"));
    }
}

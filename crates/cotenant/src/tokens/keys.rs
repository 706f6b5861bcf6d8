//! What a set is called and whether a set found on its key is ours: this user's System V key of
//! a name (hashed by `tokens::key`), the name check kept in the set, the path of its pipe, and
//! the creator, owner and mode a trusted set has.

use std::io;
use std::path::PathBuf;

use super::{error, wakeup, TokensError};

/// The key of this user's set `name`.
pub(super) fn user_key(name: &str) -> i32 {
    // SAFETY: getuid cannot fail.
    super::key(name, unsafe { libc::getuid() })
}

/// The id of the existing set on `name`'s key (`semget` without creating).
pub(super) fn existing(name: &str) -> io::Result<i32> {
    // SAFETY: plain system call on integers.
    let semid = unsafe { libc::semget(user_key(name), 0, 0) };
    if semid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(semid)
}

/// Why a set found on one of our keys is not to be trusted (`None`: this user made it, owns it,
/// and nobody else may read or write it).
pub(crate) fn foreign(ds: &libc::semid_ds) -> Option<String> {
    let perm = &ds.sem_perm;
    #[allow(clippy::unnecessary_cast)] // `mode` is a c_ushort on some targets, c_uint on others.
    foreign_ids(perm.uid, perm.cuid, perm.mode as u32)
}

/// [`foreign`] from a set's owner, creator and mode (as `/proc/sysvipc/sem` lists them).
pub(crate) fn foreign_ids(owner: u32, creator: u32, mode: u32) -> Option<String> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let mode = mode & 0o777;
    if creator != uid {
        Some(format!("created by uid {creator}, not by this user (uid {uid})"))
    } else if owner != uid {
        Some(format!("owned by uid {owner}, not by this user (uid {uid})"))
    } else if mode & 0o077 != 0 {
        Some(format!("mode {mode:04o} lets other users use it (cotenant makes sets 0600)"))
    } else {
        None
    }
}

/// A second, independent hash of a set's name, kept in the set (`SEM_NAME`, 1..=32767): tells
/// apart two names whose keys collide.
pub(super) fn name_check(name: &str) -> u16 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in format!("cotenant-name/{name}").bytes().rev() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash % 32767) as u16 + 1
}

pub(super) fn check_name(name: &str) -> Result<(), TokensError> {
    if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
        return Err(error(format!("name {name:?}: 1 to 200 bytes, no control characters")));
    }
    Ok(())
}

/// The named pipe of this user's set `name`.
pub(super) fn fifo_path(name: &str) -> PathBuf {
    // SAFETY: getuid cannot fail.
    wakeup::fifo_path(unsafe { libc::getuid() }, user_key(name))
}

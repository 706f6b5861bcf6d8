//! Which token sets exist for this user, and removing them (`cotenant tokens list | remove`).
//!
//! The kernel lists every System V semaphore set in `/proc/sysvipc/sem` (key, id, mode,
//! owner, creator); a set is shown when this user owns it and its marker says it is cotenant's
//! (either layout), or when it sits on the key of this process's default set (then whoever made
//! it, with why it is refused). A key does not tell its name: the creator of a named set writes
//! the name next to its pipe (`<pipe>.name`, mode 0600, never through a symlink, trusted only
//! when owned by this user).
//!
//! Outside Linux (`crate::sys`'s fallback) there are no System V semaphore sets: [`list`],
//! [`remove`] and [`resolve`] fail with the error of
//! [`HostTokens::open`](super::HostTokens::open) ("host CPU tokens need Linux (System V
//! semaphores)"); the parser and the types are the same everywhere.

#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
pub use super::listing::{list, remove, resolve};
#[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
pub use super::unsupported::{list, remove, resolve};

/// One row of `/proc/sysvipc/sem`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SysvSet {
    /// The System V key.
    pub key: i32,
    /// The set's id (what `ipcrm -s` takes).
    pub semid: i32,
    /// Permission bits (`perms`, octal in the file).
    pub mode: u32,
    /// Semaphores in the set.
    pub nsems: u32,
    /// Owner.
    pub uid: u32,
    /// Creator.
    pub cuid: u32,
}

/// Parses `/proc/sysvipc/sem` (pure): a header line, then one line per set with `key semid
/// perms nsems uid gid cuid cgid otime ctime`. A malformed line is an error naming it.
pub fn parse_sysvipc_sem(text: &str) -> Result<Vec<SysvSet>, String> {
    let mut lines = text.lines();
    match lines.next() {
        Some(header) if header.split_whitespace().next() == Some("key") => {}
        Some(header) => return Err(format!("/proc/sysvipc/sem: unexpected header {header:?}")),
        None => return Ok(Vec::new()),
    }
    let mut sets = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let bad = |what: &str| format!("/proc/sysvipc/sem: line {line:?}: {what}");
        if fields.len() < 8 {
            return Err(bad("fewer than 8 fields"));
        }
        let int = |i: usize, name: &str| {
            fields[i].parse::<i64>().map_err(|_| bad(&format!("{name} is not a number")))
        };
        let key = int(0, "key")?;
        sets.push(SysvSet {
            key: i32::try_from(key)
                .or_else(|_| u32::try_from(key).map(|k| k as i32))
                .map_err(|_| bad("key out of range"))?,
            semid: i32::try_from(int(1, "semid")?).map_err(|_| bad("semid out of range"))?,
            mode: u32::from_str_radix(fields[2], 8).map_err(|_| bad("perms is not octal"))?,
            nsems: u32::try_from(int(3, "nsems")?).map_err(|_| bad("nsems out of range"))?,
            uid: u32::try_from(int(4, "uid")?).map_err(|_| bad("uid out of range"))?,
            cuid: u32::try_from(int(6, "cuid")?).map_err(|_| bad("cuid out of range"))?,
        });
    }
    Ok(sets)
}

/// A token set as `cotenant tokens list` shows it. The counts are `None` for a refused set
/// (not read: they may mean anything).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SetInfo {
    /// The System V key.
    pub key: i32,
    /// The set's id.
    pub semid: i32,
    /// The name its creator recorded, if any.
    pub name: Option<String>,
    /// Owner uid.
    pub owner: u32,
    /// Creator uid.
    pub creator: u32,
    /// Permission bits.
    pub mode: u32,
    /// Tokens the set was created with.
    pub tokens: Option<u32>,
    /// Tokens nobody holds now.
    pub free: Option<u32>,
    /// Threads waiting for a token now.
    pub waiting: Option<u32>,
    /// Member processes (0 for a set of the older layout, which has no count).
    pub members: Option<u32>,
    /// CPU leases in the set.
    pub leases: u32,
    /// Why cotenant's pools refuse it, if they do.
    pub refused: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str =
        "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n\
        \x20 -98271372          3   600          8     0     0     0     0 1764171955 1764171950\n\
        \x20         0          4   666          1  1000  1000  1000  1000          0 1764171951\n";

    #[test]
    fn the_kernels_list_of_semaphore_sets_is_read_field_by_field() {
        let sets = parse_sysvipc_sem(SAMPLE).unwrap();
        assert_eq!(sets[0], SysvSet { key: -98271372, semid: 3, mode: 0o600, nsems: 8, uid: 0, cuid: 0 });
        assert_eq!((sets[1].mode, sets[1].uid, sets[1].cuid), (0o666, 1000, 1000));
        assert!(parse_sysvipc_sem("").unwrap().is_empty());
    }

    #[test]
    fn a_malformed_list_is_an_error_naming_the_line() {
        let e = parse_sysvipc_sem("key semid\n 1 2 9x9 4 0 0 0 0 0 0\n").unwrap_err();
        assert!(e.contains("perms is not octal") && e.contains("9x9"), "{e}");
        let e = parse_sysvipc_sem("key\n 1 2\n").unwrap_err();
        assert!(e.contains("fewer than 8"), "{e}");
        let e = parse_sysvipc_sem("nonsense\n").unwrap_err();
        assert!(e.contains("unexpected header"), "{e}");
    }

    /// Outside Linux, listing, removing and resolving say why there is nothing to list.
    #[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
    #[test]
    fn without_linux_listing_says_why() {
        let e = list().unwrap_err().to_string();
        assert!(e.contains("host CPU tokens need Linux (System V semaphores)"), "{e}");
        assert!(remove(42, true).unwrap_err().to_string().contains("need Linux"));
        assert!(resolve("web").unwrap_err().to_string().contains("need Linux"));
    }
}

//! The lab's processes on this host, found in `/proc`: workers whose lab is gone
//! ([`orphan_workers`], for `lab clean`) and labs running now ([`running_labs`]).

use std::path::Path;

/// The `--parent` of a lab worker's command line (`cotenant lab-worker ... --parent PID`, or
/// the Go worker's), if it is one.
pub fn worker_parent(cmdline: &[&str]) -> Option<u32> {
    let is_worker = matches!(cmdline.get(1), Some(&"lab-worker" | &"lab-tenant"))
        || cmdline.first().is_some_and(|a| a.ends_with("/goworker"));
    if !is_worker {
        return None;
    }
    let at = cmdline.iter().position(|a| *a == "--parent")?;
    cmdline.get(at + 1)?.parse().ok()
}

/// Lab workers whose lab is gone (its pid is not their parent any more): `(pid, command)`.
pub fn orphan_workers() -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&raw);
        let args: Vec<&str> = text.split('\0').filter(|a| !a.is_empty()).collect();
        let Some(parent) = worker_parent(&args) else { continue };
        let ppid = std::fs::read_to_string(entry.path().join("stat")).ok().and_then(|s| {
            s.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1)?.parse::<u32>().ok())
        });
        if ppid != Some(parent) {
            found.push((pid, args.join(" ")));
        }
    }
    found
}

/// Whether a command line is a running lab: the cotenant binary's `lab <experiment>`, but not
/// `lab clean`.
pub fn is_lab(cmdline: &[&str]) -> bool {
    let cotenant =
        cmdline.first().is_some_and(|p| Path::new(p).file_name() == Some(std::ffi::OsStr::new("cotenant")));
    cotenant && cmdline.get(1) == Some(&"lab") && cmdline.len() > 2 && !cmdline[2..].contains(&"clean")
}

/// This user's labs running now, but this process: `(pid, command)`.
pub fn running_labs() -> Vec<(u32, String)> {
    use std::os::unix::fs::MetadataExt as _;
    let me = std::process::id();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if pid == me || !entry.metadata().is_ok_and(|m| m.uid() == uid) {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&raw);
        let args: Vec<&str> = text.split('\0').filter(|a| !a.is_empty()).collect();
        if is_lab(&args) {
            found.push((pid, args.join(" ")));
        }
    }
    found
}

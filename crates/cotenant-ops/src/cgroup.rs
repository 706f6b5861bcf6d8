//! Real cgroups for the lab and the integration tests, and what the lab does on a signal.
//!
//! Cgroups are created under the mount root of the cpu and cpuset hierarchies, named
//! `<prefix><pid>-<name>` (`cotenant-lab-` for the lab, `cotenant-test-` for tests), and removed
//! on every exit path: when dropped (success, error or panic), on a signal (below), and at the
//! next run (those of dead processes are swept). Every control file is written through
//! `cgroupfs::write_control`: on a cgroup file system only, never through a symlink.
//!
//! What a signal undoes, and how, is [`crate::cleanup`]'s.

use cotenant::internal::procfs::{cgroup, mountinfo};
use std::{
    fs,
    io::{self, Write},
    os::{fd::AsRawFd, unix::process::CommandExt},
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use crate::cgroupfs::{self, write_control};
#[cfg(test)]
pub use crate::cleanup::recorded_temp_folders;
use crate::cleanup::{create_recorded, registry};
pub use crate::cleanup::{
    create_temp_folder, create_token_set, install_signal_cleanup, record_token_set, remove_temp_folders,
    remove_token_set, spawn_recorded, try_reap, RemoveTempFolders, STOPPING_MESSAGE,
};

/// The prefix of every cgroup the lab creates.
pub const LAB_PREFIX: &str = "cotenant-lab-";

/// Where this host keeps its cpu and cpuset controllers.
#[derive(Debug, Clone)]
pub enum Layout {
    /// cgroup v1: separate cpu and cpuset hierarchies (they may be the same mount).
    V1 {
        /// The mount point of the cpu hierarchy (one this process belongs to).
        cpu: PathBuf,
        /// The mount point of the cpuset hierarchy; `None` when no cpuset hierarchy this
        /// process belongs to is mounted.
        cpuset: Option<PathBuf>,
    },
    /// cgroup v2: one tree; cpu (and cpuset, when available) are enabled in the root's
    /// subtree_control and left enabled (harmless, and other users of the tree may rely on it).
    V2 {
        /// The mount point of the cgroup v2 tree.
        root: PathBuf,
        /// Whether the cpuset controller is available and was enabled in the root's
        /// subtree_control.
        cpuset: bool,
    },
}

impl Layout {
    /// Whether cgroups here can be given a CPU set (a cpuset controller is available).
    pub fn has_cpuset(&self) -> bool {
        match self {
            Layout::V1 { cpuset, .. } => cpuset.is_some(),
            Layout::V2 { cpuset, .. } => *cpuset,
        }
    }
}

/// The host's layout, or why real cgroups cannot be used here.
pub fn layout() -> Result<Layout, String> {
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: cannot create cgroups".into());
    }
    let text = fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("mountinfo: {e}"))?;
    let mounts = mountinfo::parse_cgroup_mounts(&text).map_err(|e| e.to_string())?;
    let own = cgroup::parse(&fs::read_to_string("/proc/self/cgroup").unwrap_or_default()).unwrap_or_default();
    let v1 = |c: &str| {
        // Only a hierarchy this process belongs to counts (the one `cpus` will read).
        own.iter().any(|m| m.has_controller(c)).then_some(())?;
        mounts.iter().find(|m| m.has_controller(c)).map(|m| PathBuf::from(&m.mount_point))
    };
    if let Some(cpu) = v1("cpu") {
        return Ok(Layout::V1 { cpu, cpuset: v1("cpuset") });
    }
    let Some(v2) = mounts.iter().find(|m| m.is_v2) else {
        return Err("no cgroup file system with a cpu controller is mounted".into());
    };
    let root = PathBuf::from(&v2.mount_point);
    let controllers = fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "cpu") {
        return Err(format!("cgroup v2 at {} has no cpu controller", root.display()));
    }
    // Enabling a controller for children fails (EBUSY) in a non-root cgroup that has processes.
    write_control(&root, "cgroup.subtree_control", "+cpu")
        .map_err(|e| format!("cannot enable the cpu controller in {}: {e}", root.display()))?;
    let cpuset = controllers.split_whitespace().any(|c| c == "cpuset")
        && write_control(&root, "cgroup.subtree_control", "+cpuset").is_ok();
    Ok(Layout::V2 { root, cpuset })
}

/// A cgroup (one directory per hierarchy) that is removed when dropped.
pub struct Cgroup {
    /// The directories, parent before child, in every hierarchy used.
    dirs: Vec<PathBuf>,
    /// The cpu-controller directories: the top cgroup, then the child if any.
    cpu_dirs: Vec<PathBuf>,
    /// The directories a process must join (the leaf in each hierarchy).
    leaves: Vec<PathBuf>,
    /// The cgroup path as `/proc/self/cgroup` will show it (relative to the hierarchy root).
    pub cgroup_path: String,
}

impl Cgroup {
    /// Creates `<prefix><pid>-<name>` (and `<name>/child` when `child` is true) in the cpu
    /// hierarchy, and in the cpuset hierarchy too when `cpuset` is given (its CPU list).
    pub fn create(
        layout: &Layout,
        prefix: &str,
        name: &str,
        child: bool,
        cpuset: Option<&str>,
    ) -> io::Result<Cgroup> {
        install_signal_cleanup()?;
        sweep_stale(layout, prefix);
        let top = format!("{prefix}{}-{name}", std::process::id());
        let mut cg = Cgroup { dirs: vec![], cpu_dirs: vec![], leaves: vec![], cgroup_path: String::new() };
        let mut make = |base: &Path, is_v1_cpuset: bool| -> io::Result<Vec<PathBuf>> {
            let mut made = vec![base.join(&top)];
            if child {
                made.push(made[0].join("child"));
            }
            for dir in &made {
                cg.mkdir(dir, is_v1_cpuset)?;
            }
            cg.leaves.push(made.last().unwrap().clone());
            Ok(made)
        };
        let cpu_dirs = match layout {
            Layout::V1 { cpu, cpuset: cpuset_mount } => {
                // cpu and cpuset may be co-mounted in one hierarchy: then one set of directories.
                let comounted = cpuset_mount.as_ref() == Some(cpu);
                let cpu_dirs = make(cpu, comounted)?;
                if let Some(list) = cpuset {
                    if !comounted {
                        let mount = cpuset_mount
                            .as_ref()
                            .ok_or_else(|| io::Error::other("no v1 cpuset hierarchy"))?;
                        make(mount, true)?;
                    }
                    write_control(cg.leaves.last().unwrap(), "cpuset.cpus", list)?;
                }
                cpu_dirs
            }
            Layout::V2 { root, .. } => {
                let cpu_dirs = make(root, false)?;
                if child {
                    write_control(&root.join(&top), "cgroup.subtree_control", "+cpu")?;
                }
                if let Some(list) = cpuset {
                    write_control(&cg.leaves[0], "cpuset.cpus", list)?;
                }
                cpu_dirs
            }
        };
        cg.cpu_dirs = cpu_dirs;
        cg.cgroup_path = format!("/{top}{}", if child { "/child" } else { "" });
        Ok(cg)
    }

    fn mkdir(&mut self, dir: &Path, is_v1_cpuset: bool) -> io::Result<()> {
        create_recorded(|| fs::create_dir(dir), |registry, _| registry.cgroups.push(dir.to_owned()))?;
        self.dirs.push(dir.to_owned());
        if is_v1_cpuset {
            // A v1 cpuset cgroup accepts no task until it has CPUs and memory nodes: inherit both.
            let parent = dir.parent().unwrap();
            write_control(dir, "cpuset.mems", fs::read_to_string(parent.join("cpuset.mems"))?.trim())?;
            write_control(dir, "cpuset.cpus", fs::read_to_string(parent.join("cpuset.cpus"))?.trim())?;
        }
        Ok(())
    }

    /// The cpu-controller directory of the top cgroup (`child = false`) or of the child.
    pub fn cpu_dir(&self, child: bool) -> &Path {
        &self.cpu_dirs[if child { 1 } else { 0 }]
    }

    /// Sets the quota of a cpu directory: `None` for unlimited.
    pub fn set_quota(layout: &Layout, dir: &Path, quota_us: Option<u64>, period_us: u64) -> io::Result<()> {
        match layout {
            Layout::V1 { .. } => {
                write_control(dir, "cpu.cfs_period_us", &period_us.to_string())?;
                write_control(dir, "cpu.cfs_quota_us", &quota_us.map_or("-1".into(), |q| q.to_string()))
            }
            Layout::V2 { .. } => write_control(
                dir,
                "cpu.max",
                &format!("{} {period_us}", quota_us.map_or("max".into(), |q| q.to_string())),
            ),
        }
    }

    /// Sets the CPU weight of a cpu directory, in cgroup v2 units (1..=10000, default 100;
    /// v1 `cpu.shares` gets `weight * 1024 / 100`).
    pub fn set_weight(layout: &Layout, dir: &Path, weight: u64) -> io::Result<()> {
        match layout {
            Layout::V1 { .. } => write_control(dir, "cpu.shares", &(weight * 1024 / 100).max(2).to_string()),
            Layout::V2 { .. } => write_control(dir, "cpu.weight", &weight.clamp(1, 10_000).to_string()),
        }
    }

    /// Marks a cpu directory idle or not (`cpu.idle`, Linux 5.15+, both versions): an idle
    /// cgroup competes with its siblings the way a `SCHED_IDLE` thread competes with others.
    pub fn set_idle(dir: &Path, idle: bool) -> io::Result<()> {
        write_control(dir, "cpu.idle", if idle { "1" } else { "0" })
    }

    /// Runs `program args` inside this cgroup (see [`command`](Self::command)) and returns its
    /// stdout; fails when the program does.
    #[allow(dead_code)] // used by the integration tests, which share this file
    pub fn run(&self, program: &Path, args: &[&str], affinity: Option<usize>) -> io::Result<String> {
        let out = self.command(program, args, affinity).output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "{} {args:?} failed ({}): {}",
                program.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A command that starts inside this cgroup (joined between fork and exec), optionally
    /// restricted to `affinity` (a CPU id).
    pub fn command(&self, program: &Path, args: &[&str], affinity: Option<usize>) -> Command {
        // Opened, with every check of `cgroupfs`, before the fork: the child only writes. One
        // that cannot be opened fails the spawn with its error number.
        let procs: Vec<Result<fs::File, i32>> = self
            .leaves
            .iter()
            .map(|leaf| {
                cgroupfs::ControlDir::open(leaf)
                    .and_then(|dir| dir.open_for_write("cgroup.procs"))
                    .map_err(|e| cgroupfs::os_error(&e).unwrap_or(libc::EINVAL))
            })
            .collect();
        let mut cmd = Command::new(program);
        cmd.args(args);
        // SAFETY: between fork and exec the closure calls only async-signal-safe functions
        // (write, sched_setaffinity) on memory prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                for opened in &procs {
                    let fd = match opened {
                        Ok(file) => file.as_raw_fd(),
                        Err(errno) => return Err(io::Error::from_raw_os_error(*errno)),
                    };
                    if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(io::Error::last_os_error());
                    }
                }
                if let Some(cpu) = affinity {
                    // CPU_SET past a cpu_set_t's 1024 CPUs would panic in the child: refused.
                    if cpu >= libc::CPU_SETSIZE as usize {
                        return Err(io::Error::from_raw_os_error(libc::EINVAL));
                    }
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        cmd
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Removed and unrecorded under the lock: a signal meanwhile waits, then finds only what
        // is left (and once it came, this waits and the signal thread removes them).
        let mut registry = registry();
        for dir in self.dirs.iter().rev() {
            remove(dir);
            registry.cgroups.retain(|d| d != dir);
        }
    }
}

/// Removes a cgroup of ours, first killing anything still in it (only our own children can be).
pub fn remove(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) if Instant::now() > deadline => {
                let _ = writeln!(io::stderr(), "cotenant: could not remove {}: {e}", dir.display());
                return;
            }
            Err(_) => {
                for pid in fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default().lines() {
                    if let Ok(pid) = pid.trim().parse::<i32>() {
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Removes `<prefix>*` cgroups left by processes that no longer exist (e.g. killed by SIGKILL),
/// or all of them with `even_live`; returns the directories removed.
pub fn sweep(layout: &Layout, prefix: &str, even_live: bool) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let bases: Vec<&PathBuf> = match layout {
        Layout::V1 { cpu, cpuset } => std::iter::once(cpu).chain(cpuset).collect(),
        Layout::V2 { root, .. } => vec![root],
    };
    for base in bases {
        let Ok(entries) = fs::read_dir(base) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix(prefix).and_then(|r| r.split('-').next()) else { continue };
            let alive = !pid.is_empty() && Path::new("/proc").join(pid).exists();
            if even_live || !alive {
                let top = entry.path();
                if let Ok(children) = fs::read_dir(&top) {
                    for c in children.flatten().filter(|c| c.path().is_dir()) {
                        remove(&c.path());
                        removed.push(c.path());
                    }
                }
                remove(&top);
                removed.push(top);
            }
        }
    }
    removed
}

fn sweep_stale(layout: &Layout, prefix: &str) {
    sweep(layout, prefix, false);
}

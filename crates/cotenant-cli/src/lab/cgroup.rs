//! Real cgroups for the lab and the integration tests, and what the lab does on a signal.
//!
//! Cgroups are created under the mount root of the cpu and cpuset hierarchies, named
//! `<prefix><pid>-<name>` (`cotenant-lab-` for the lab, `cotenant-test-` for tests), and removed
//! on every exit path: when dropped (success, error or panic), on a signal (below), and at the
//! next run (those of dead processes are swept). Every control file is written through
//! `cgroupfs::write_control`: on a cgroup file system only, never through a symlink.
//!
//! **Stopping on a signal.** Everything the lab makes that must not outlive it is made through
//! this module and recorded in one registry: its cgroups, its children (started by
//! `runner.rs`), the names of the host token sets it or its children may create, and the
//! folders made for one run only (the `mkdtemp` build folder `private_dir::cache_dir` falls back
//! to, removed at the end of the run by [`RemoveTempFolders`]).
//!
//! 1. [`install_signal_cleanup`] runs before the lab creates anything (`cmd/lab.rs`; tests get
//!    it with their first cgroup): SIGINT, SIGTERM, SIGHUP (a closed SSH session) and SIGQUIT
//!    go to a thread of its own.
//! 2. Every creation takes the registry's lock, refuses ("the lab is stopping") once a signal
//!    came, creates, records what it made, and only then releases the lock: the signal thread
//!    finds either nothing or the recorded object, never one made but not yet recorded.
//! 3. A child is unrecorded in the same locked step that reaps it ([`try_reap`]): the signal
//!    thread never kills a pid the kernel may have handed to another process.
//! 4. On a signal the thread takes the lock for good (nothing is created from then on), kills
//!    every child's process group and reaps it, removes every cgroup (killing whatever is still
//!    inside), then removes the token sets, now that no process of ours can recreate them
//!    (one whose members are still counted is another lab's and is kept), and the temporary
//!    folders, now that no child builds or runs in them, and exits as the signal would have
//!    (SIGQUIT: exit status 131, without the core dump).
//!
//! Shared with the integration tests through `#[path]` (the CLI has no library target), so it
//! depends only on `cotenant`, `libc`, `signal-hook` and `cgroupfs.rs` (included by path here
//! for the same reason).

use cotenant::procfs::{cgroup, mountinfo};
use std::{
    fs,
    io::{self, Write},
    os::{fd::AsRawFd, unix::process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, MutexGuard, OnceLock,
    },
    time::{Duration, Instant},
};

// The CLI's `cgroupfs.rs`, by path: the integration tests compile this file without the CLI's
// crate root, so `crate::cgroupfs` would not resolve there.
#[allow(dead_code)] // the lab uses only part of it
#[path = "../cgroupfs.rs"]
pub(crate) mod cgroupfs;

use cgroupfs::write_control;

/// What the lab has made that a signal must undo (see the module documentation).
struct Registry {
    /// Cgroup directories of ours that exist now, parents before children.
    cgroups: Vec<PathBuf>,
    /// Children started and not yet reaped, each the leader of its own process group.
    children: Vec<u32>,
    /// Names of the host token sets the lab or its children may create.
    token_sets: Vec<String>,
    /// Folders made for this run only, removed whole when it ends.
    temp_folders: Vec<PathBuf>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    cgroups: Vec::new(),
    children: Vec::new(),
    token_sets: Vec::new(),
    temp_folders: Vec::new(),
});

/// Set by the signal thread, under the registry's lock: nothing may be created any more.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// The message of a creation refused because a signal is stopping the lab.
pub const STOPPING_MESSAGE: &str = "the lab is stopping";

/// Waiting for a killed child to be reaped by the signal thread, at most.
const KILLED_CHILD_WAIT: Duration = Duration::from_secs(2);

fn registry() -> MutexGuard<'static, Registry> {
    // A panic while holding the lock leaves the lists as they were: still worth cleaning up.
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether a signal is stopping the lab (readable without the lock, which the signal thread
/// keeps).
fn stopping() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

/// Runs `create` under the registry's lock unless the lab is stopping, and records what it made
/// with `record` before the lock is released (step 2 of the protocol).
fn create_recorded<T, E: From<io::Error>>(
    create: impl FnOnce() -> Result<T, E>,
    record: impl FnOnce(&mut Registry, &T),
) -> Result<T, E> {
    let mut registry = registry();
    if stopping() {
        return Err(io::Error::other(STOPPING_MESSAGE).into());
    }
    let made = create()?;
    record(&mut registry, &made);
    Ok(made)
}

/// Records the host token set `name` (removed on a signal) before any child that may create it
/// starts; refused once the lab is stopping.
pub fn record_token_set(name: &str) -> io::Result<()> {
    create_recorded(|| Ok::<(), io::Error>(()), |registry, _| add_token_set(registry, name))
}

/// Creates (or opens) the host token set `name` with `create` under the registry's lock, and
/// records it: a signal meanwhile waits, then removes it.
pub fn create_token_set<T, E: From<io::Error>>(
    name: &str,
    create: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    create_recorded(create, |registry, _| add_token_set(registry, name))
}

fn add_token_set(registry: &mut Registry, name: &str) {
    if !registry.token_sets.iter().any(|n| n == name) {
        registry.token_sets.push(name.to_owned());
    }
}

/// Creates a folder for this run only with `create` (which returns its path) under the
/// registry's lock, and records it: removed whole when the run ends ([`RemoveTempFolders`]) or
/// on a signal; refused once the lab is stopping.
pub fn create_temp_folder<E: From<io::Error>>(
    create: impl FnOnce() -> Result<PathBuf, E>,
) -> Result<PathBuf, E> {
    create_recorded(create, |registry, dir| registry.temp_folders.push(dir.clone()))
}

/// Removes every folder recorded by [`create_temp_folder`], whole, and unrecords it; under the
/// registry's lock (a signal meanwhile waits, then finds none left).
pub fn remove_temp_folders() {
    let mut registry = registry();
    for dir in std::mem::take(&mut registry.temp_folders) {
        remove_folder(&dir);
    }
}

/// Calls [`remove_temp_folders`] when dropped: a lab run holds one from its start
/// (`cmd/lab.rs`), so that its temporary folders go however it ends (an error, a panic; on a
/// signal the signal thread removes them).
pub struct RemoveTempFolders;

impl Drop for RemoveTempFolders {
    fn drop(&mut self) {
        remove_temp_folders();
    }
}

/// The folders recorded by [`create_temp_folder`] and not removed yet.
#[cfg(test)]
pub fn recorded_temp_folders() -> Vec<PathBuf> {
    registry().temp_folders.clone()
}

/// Removes a folder of ours and everything in it (never following a symbolic link inside);
/// one already gone is no error.
fn remove_folder(dir: &Path) {
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            let _ = writeln!(io::stderr(), "cotenant: could not remove {}: {e}", dir.display());
        }
    }
}

/// Starts `command` as a recorded child (killed and reaped on a signal); the caller reaps it
/// with [`try_reap`], never with `Child::wait`.
pub fn spawn_recorded(command: &mut Command) -> io::Result<Child> {
    create_recorded(|| command.spawn(), |registry, child| registry.children.push(child.id()))
}

/// Reaps `child` if it has exited, and unrecords it in the same locked step (step 3).
pub fn try_reap(child: &mut Child) -> io::Result<Option<ExitStatus>> {
    let mut registry = registry();
    let reaped = child.try_wait();
    if !matches!(reaped, Ok(None)) {
        // Exited and reaped, or not ours to wait for any more: either way no pid to kill.
        let pid = child.id();
        registry.children.retain(|&p| p != pid);
    }
    reaped
}

/// The prefix of every cgroup the lab creates.
pub const LAB_PREFIX: &str = "cotenant-lab-";

/// Where this host keeps its cpu and cpuset controllers.
#[derive(Debug, Clone)]
pub enum Layout {
    /// cgroup v1: separate cpu and cpuset hierarchies (they may be the same mount).
    V1 { cpu: PathBuf, cpuset: Option<PathBuf> },
    /// cgroup v2: one tree; cpu (and cpuset, when available) are enabled in the root's
    /// subtree_control and left enabled (harmless, and other users of the tree may rely on it).
    V2 { root: PathBuf, cpuset: bool },
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

/// Hands SIGINT, SIGTERM, SIGHUP and SIGQUIT to a thread that undoes everything recorded
/// (step 4 of the module documentation), once per process; later calls do nothing. Call it
/// before creating anything. A signal ignored when the process started stays ignored: `nohup`
/// ignores SIGHUP, and a script's background job SIGINT and SIGQUIT, on purpose.
pub fn install_signal_cleanup() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
            let handled = [SIGINT, SIGTERM, SIGHUP, SIGQUIT].into_iter().filter(|&s| !ignored(s));
            let mut signals = signal_hook::iterator::Signals::new(handled)
                .map_err(|e| format!("installing the lab's signal handlers: {e}"))?;
            std::thread::Builder::new()
                .name("lab-signals".into())
                .spawn(move || {
                    if let Some(signal) = signals.forever().next() {
                        stop(signal);
                    }
                })
                .map(drop)
                .map_err(|e| format!("starting the lab's signal thread: {e}"))
        })
        .clone()
        .map_err(io::Error::other)
}

/// Whether `signal`'s disposition is "ignore" now.
fn ignored(signal: i32) -> bool {
    // SAFETY: sigaction with no new action only reads the current one into `current`, a plain
    // C struct for which all zeros is a valid value.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0 && current.sa_sigaction == libc::SIG_IGN
    }
}

/// Undoes everything recorded and exits as `signal` would have (step 4). Never returns: the
/// lock stays taken until the process is gone.
fn stop(signal: i32) -> ! {
    let mut registry = registry();
    STOPPING.store(true, Ordering::SeqCst);
    let children = std::mem::take(&mut registry.children);
    for &pid in &children {
        // SAFETY: kill has no memory effects; every recorded pid is a child not reaped yet, so
        // neither it nor its process group can belong to anyone else.
        unsafe {
            libc::kill(-(pid as i32), libc::SIGKILL);
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
    for &pid in &children {
        reap_killed(pid);
    }
    let cgroups = std::mem::take(&mut registry.cgroups);
    for dir in cgroups.iter().rev() {
        remove(dir);
    }
    let mut sets_removed = 0;
    for name in &registry.token_sets {
        match remove_token_set(name) {
            Ok(removed) => sets_removed += usize::from(removed),
            Err(why) => {
                let _ = writeln!(io::stderr(), "cotenant: {why}");
            }
        }
    }
    // Last: a killed child may have been building in one.
    let temp_folders = std::mem::take(&mut registry.temp_folders);
    for dir in &temp_folders {
        remove_folder(dir);
    }
    let name = signal_hook::low_level::signal_name(signal).unwrap_or("a signal");
    let _ = writeln!(
        io::stderr(),
        "cotenant: stopped by {name}: killed {} children, removed {} cgroups, {sets_removed} token sets \
         and {} temporary folders",
        children.len(),
        cgroups.len(),
        temp_folders.len()
    );
    if signal != libc::SIGQUIT {
        // The default action, raised again: the parent sees the lab killed by the signal (a
        // shell loop stops on Ctrl-C). SIGQUIT's would dump a core, of no use after cleanup.
        let _ = signal_hook::low_level::emulate_default_handler(signal);
    }
    std::process::exit(128 + signal)
}

/// Waits (a little) for a child killed by [`stop`] and reaps it.
fn reap_killed(pid: u32) {
    let deadline = Instant::now() + KILLED_CHILD_WAIT;
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only to `status`.
        let reaped = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
        // Reaped, or not a child any more (ECHILD): done. A child stuck in the kernel is left
        // to init once the lab is gone.
        if reaped != 0 || Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Removes this user's host token set `name` and its pipe; `Ok(false)`: there was none. A set
/// whose member count is not zero is kept (with the reason as the error): once the lab's own
/// processes are gone, its members are another lab's.
pub fn remove_token_set(name: &str) -> Result<bool, String> {
    use cotenant::tokens::{list, HostTokens};
    let key = list::resolve(name).map_err(|e| e.to_string())?;
    let listed = list::list().map_err(|e| e.to_string())?;
    if let Some(members) = listed.iter().find(|s| s.key == key).and_then(|s| s.members).filter(|&m| m > 0) {
        return Err(format!(
            "host token set {name} kept: {members} member process(es) still use it (another lab's?)"
        ));
    }
    HostTokens::remove_named(name).map_err(|e| e.to_string())
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

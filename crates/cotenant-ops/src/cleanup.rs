//! What must not outlive the lab (or a test), recorded in one registry and undone on a signal:
//! cgroups, children, host token sets and folders made for one run.
//!
//! **Stopping on a signal.** Everything the lab makes that must not outlive it is made through
//! this module and recorded in one registry: its cgroups, its children (started by
//! `runner/`), the names of the host token sets it or its children may create, and the
//! folders made for one run only (the `mkdtemp` build folder `private_dir::cache_dir` falls back
//! to, removed at the end of the run by [`RemoveTempFolders`]).
//!
//! 1. [`install_signal_cleanup`] runs before the lab creates anything (`cotenant-lab`'s `command.rs`; tests get
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
//! The cgroups themselves are [`crate::cgroup`]'s; it records them here.

use std::{
    fs,
    io::{self, Write},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, MutexGuard, OnceLock,
    },
    time::{Duration, Instant},
};

use crate::cgroup::remove;

/// What the lab has made that a signal must undo (see the module documentation).
pub(crate) struct Registry {
    /// Cgroup directories of ours that exist now, parents before children.
    pub(crate) cgroups: Vec<PathBuf>,
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

pub(crate) fn registry() -> MutexGuard<'static, Registry> {
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
pub(crate) fn create_recorded<T, E: From<io::Error>>(
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

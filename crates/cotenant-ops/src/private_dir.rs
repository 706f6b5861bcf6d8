//! Folders that only this user can write, for the programs the lab builds and then runs (as
//! root, often), and the one way files are written into them (issue 34: the lab built its
//! probes in `/tmp/cotenant-lab-go-<uid>`, a name any local user could create first, and
//! wrote them with `fs::write`, which follows a symbolic link planted at the file).
//!
//! A build folder is `<cache>/cotenant/<name>` ([`cache_dir`]), kept between runs so that an
//! unchanged build is not redone, where `<cache>` is the user's cache directory:
//! `$XDG_CACHE_HOME` if it is an absolute path, else `$HOME/.cache`.
//!
//! Who can change a folder decides who can change what is run from it, so each level is
//! checked with `lstat` before use, and anything else is refused with a message naming the
//! folder and what is wrong with it (nothing is ever chmod-ed or chown-ed). Where `<cache>`
//! fails step 1 (or there is no `<cache>`), the folder is a fresh one from `mkdtemp`
//! ([`fresh_temp`]) for this run only, and [`cache_dir`] says why on stderr; a folder that
//! fails step 2 is an error. That fresh folder is made and recorded through the lab's registry
//! (`lab/cgroup.rs`), which removes it when the lab ends, on a signal too: one new folder in
//! the temporary directory per lab run would otherwise pile up.
//!
//! 1. `<cache>` and every folder above it (after resolving symbolic links once, with
//!    `canonicalize`): owned by this user or by root, the only users who can rename what is
//!    inside. Writable only by its owner, except that a folder above `<cache>` may be writable
//!    by all if it is sticky (`/tmp`): there, others can add entries but not rename or remove
//!    ours. `<cache>` itself is never writable by others, sticky or not, since Go keeps its
//!    build cache (`go-build`) next to ours and that is not checked here.
//! 2. `<cache>/cotenant` and `<cache>/cotenant/<name>`: created with mode 0700 where missing;
//!    a real folder (not a symbolic link), owned by the effective user, with no group or
//!    other write bit. A folder someone else made first is refused, not adopted.
//!
//! Files go in with [`write_file`]: a new temporary file (`O_CREAT | O_EXCL | O_NOFOLLOW`)
//! renamed over the target, so a symbolic link at the target is replaced, never followed.
//! Compilers write their own outputs, which is safe once nobody else can write the folder.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStringExt as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context as _};

#[cfg(test)]
mod tests;
mod write;

pub use self::write::write_file;

/// The folder of cotenant's own caches inside the user's cache directory.
const APP_DIR: &str = "cotenant";
/// The mode of every folder created here: its owner only.
const PRIVATE_MODE: u32 = 0o700;
/// Write permission for the group and for others.
const GROUP_OR_OTHER_WRITE: u32 = 0o022;
/// Write permission for others.
const OTHER_WRITE: u32 = 0o002;
/// The sticky bit: in such a folder only an entry's owner (or the folder's, or root) may
/// rename or remove it.
const STICKY: u32 = 0o1000;

/// A private folder for `name` (one path component, e.g. `lab-go`) under the invoking user's
/// cache directory, created where missing and checked as the module doc says. Without
/// `$XDG_CACHE_HOME` or `$HOME`, or where the cache directory fails step 1 (another user's
/// `$HOME` kept by `sudo -E`, a CI container's `$HOME` owned by the runner's user), a fresh
/// temporary one for this run (see [`fresh_temp`]), saying why on stderr. A folder below it
/// that fails step 2 is an error: no other user could have made it. The temporary folder is
/// removed when the lab run ends (`lab::cgroup::RemoveTempFolders`, or the signal thread); it is
/// refused once a signal is stopping the lab.
pub fn cache_dir(name: &str) -> anyhow::Result<PathBuf> {
    cache_dir_from(user_cache(), name)
}

/// [`cache_dir`] with the user's cache directory given (`None`: there is none).
fn cache_dir_from(cache: Option<PathBuf>, name: &str) -> anyhow::Result<PathBuf> {
    check_one_component(name)?;
    let fallback = || crate::cleanup::create_temp_folder(|| fresh_temp(&format!("{APP_DIR}-{name}")));
    let Some(cache) = cache else { return fallback() };
    let cache = match trusted_cache_root(&cache) {
        Ok(resolved) => resolved,
        Err(why) => {
            let dir = fallback()?;
            eprintln!(
                "cotenant: warning: not building in the cache directory: {why:#}; building in {} \
                 instead, for this run only",
                dir.display()
            );
            return Ok(dir);
        }
    };
    cache_dir_under(&cache, name)
}

/// The user's cache directory by the environment (see [`user_cache_root`]), not checked; `None`:
/// there is none.
pub fn user_cache() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CACHE_HOME");
    let home = std::env::var_os("HOME");
    user_cache_root(xdg.as_deref(), home.as_deref())
}

/// Whether `path` is an existing folder that, like every folder above it, only this user or
/// root can change (step 1 of the module doc, nothing created): where tools that keep state
/// under `$HOME` or the cache directory (go) may be left to keep it.
pub fn is_trusted(path: &Path) -> bool {
    fs::canonicalize(path).is_ok_and(|resolved| check_chain(&resolved, path, true).is_ok())
}

/// The user's cache directory: `$XDG_CACHE_HOME` if absolute, else `$HOME/.cache` if `$HOME`
/// is absolute (the XDG rule, which Go's `os.UserCacheDir` follows too); `None`: neither.
fn user_cache_root(xdg_cache_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    let xdg_cache_home = xdg_cache_home.map(Path::new).filter(|p| p.is_absolute());
    let home = home.map(Path::new).filter(|p| p.is_absolute());
    xdg_cache_home.map(Path::to_path_buf).or_else(|| home.map(|h| h.join(".cache")))
}

/// [`cache_dir`] with the cache directory given, and no fallback: `<cache>/cotenant/<name>`,
/// with `<cache>` created (mode 0700) if missing. The path returned has its symbolic links
/// resolved.
pub fn cache_dir_under(cache: &Path, name: &str) -> anyhow::Result<PathBuf> {
    check_one_component(name)?;
    let cache = trusted_cache_root(cache)?;
    private_chain(&cache, name)
}

/// `cache` resolved, created (mode 0700) if missing, and checked: step 1 of the module doc.
/// Where it is missing, the folders above it are checked first, so that nothing is made in a
/// folder another user controls.
fn trusted_cache_root(cache: &Path) -> anyhow::Result<PathBuf> {
    if fs::symlink_metadata(cache).is_err() {
        if let Some(existing) = cache.ancestors().skip(1).find(|a| a.exists()) {
            let existing =
                fs::canonicalize(existing).with_context(|| format!("resolving {}", existing.display()))?;
            check_chain(&existing, cache, false)?;
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_MODE)
            .create(cache)
            .with_context(|| format!("creating the cache folder {}", cache.display()))?;
    }
    let resolved = fs::canonicalize(cache).with_context(|| format!("resolving {}", cache.display()))?;
    check_chain(&resolved, cache, true)?;
    Ok(resolved)
}

/// Checks `top` (a resolved path) and every folder above it: owned by us or root, and writable
/// only by its owner, or by all if sticky, except `top` when `top_is_cache` (never writable by
/// others). `cache` is the cache directory, for the message.
fn check_chain(top: &Path, cache: &Path, top_is_cache: bool) -> anyhow::Result<()> {
    let euid = effective_uid();
    for (i, dir) in top.ancestors().enumerate() {
        let meta = fs::symlink_metadata(dir).with_context(|| format!("checking {}", dir.display()))?;
        let rule = Rule { owners: Owners::UsOrRoot, sticky_may_be_open: i > 0 || !top_is_cache };
        if let Some(problem) = rule.problem(&meta, euid) {
            bail!(
                "{} {problem}; cotenant builds or runs programs from {}, so it refuses a folder \
                 another user can change (set XDG_CACHE_HOME to a folder only uid {euid} can write)",
                dir.display(),
                cache.display()
            );
        }
    }
    Ok(())
}

/// Makes (or reuses) `<cache>/cotenant/<name>`: step 2 of the module doc.
fn private_chain(cache: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let mut dir = cache.to_path_buf();
    for part in [APP_DIR, name] {
        dir.push(part);
        ensure_private(&dir)?;
    }
    Ok(dir)
}

/// Creates the folder `path` with mode 0700 if it is missing (its parent must exist), then
/// checks it is a real folder of the effective user that no group or other user can write:
/// step 2 of the module doc. An existing folder is reused only if it passes.
pub fn ensure_private(path: &Path) -> anyhow::Result<()> {
    match fs::DirBuilder::new().mode(PRIVATE_MODE).create(path) {
        Ok(()) => {}
        // Also a symbolic link or a file of that name: the check below says which.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
    }
    let meta = fs::symlink_metadata(path).with_context(|| format!("checking {}", path.display()))?;
    let euid = effective_uid();
    let rule = Rule { owners: Owners::Us, sticky_may_be_open: false };
    if let Some(problem) = rule.problem(&meta, euid) {
        bail!(
            "{} {problem}; cotenant builds or runs programs there, so it must be a folder only uid \
             {euid} can write (remove it to have it made afresh)",
            path.display()
        );
    }
    Ok(())
}

/// A new folder `<temp dir>/<prefix>-XXXXXX` made by `mkdtemp`: a random name that did not
/// exist, created with mode 0700, so no other user can have made it first or write in it.
pub fn fresh_temp(prefix: &str) -> anyhow::Result<PathBuf> {
    check_one_component(prefix)?;
    let template = std::env::temp_dir().join(format!("{prefix}-XXXXXX"));
    let mut bytes = template.into_os_string().into_vec();
    if bytes.contains(&0) {
        bail!("the temporary folder {:?} contains a NUL byte", std::env::temp_dir());
    }
    bytes.push(0);
    // SAFETY: `bytes` is a NUL-terminated buffer ending in "XXXXXX\0" that mkdtemp rewrites in
    // place (same length); it outlives the call.
    let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    let error = io::Error::last_os_error();
    bytes.pop();
    let path = PathBuf::from(OsString::from_vec(bytes));
    if made.is_null() {
        return Err(error).with_context(|| format!("creating a private folder {}", path.display()));
    }
    Ok(path)
}

/// Refuses a folder name that is not exactly one ordinary path component (`..`, `a/b`, "").
fn check_one_component(name: &str) -> anyhow::Result<()> {
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(part)), None) if part == name && !name.contains('\0') => Ok(()),
        _ => bail!("{name:?} is not a single folder name"),
    }
}

/// The effective user id: the user whose programs the lab runs.
fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Who may own a folder.
#[derive(Debug, Clone, Copy)]
enum Owners {
    /// The effective user only: the folders cotenant makes.
    Us,
    /// The effective user or root: the user's cache directory and the folders above it.
    UsOrRoot,
}

/// What a folder must be.
#[derive(Debug, Clone, Copy)]
struct Rule {
    owners: Owners,
    /// Whether a sticky folder may be writable by its group and others (`/tmp`).
    sticky_may_be_open: bool,
}

impl Rule {
    /// What is wrong with a folder of this `lstat` metadata, completing "<path> …"; `None`:
    /// nothing.
    fn problem(self, meta: &fs::Metadata, euid: u32) -> Option<String> {
        if meta.file_type().is_symlink() {
            return Some("is a symbolic link".into());
        }
        if !meta.is_dir() {
            return Some("is not a folder".into());
        }
        let uid = meta.uid();
        let owner_ok = uid == euid || (matches!(self.owners, Owners::UsOrRoot) && uid == 0);
        if !owner_ok {
            return Some(match self.owners {
                Owners::UsOrRoot if euid != 0 => format!("is owned by uid {uid}, not {euid} or root"),
                _ => format!("is owned by uid {uid}, not {euid}"),
            });
        }
        let mode = meta.mode() & 0o7777;
        let open = mode & GROUP_OR_OTHER_WRITE != 0;
        if open && !(self.sticky_may_be_open && mode & STICKY != 0) {
            let who = if mode & OTHER_WRITE != 0 { "others" } else { "its group" };
            return Some(format!("is writable by {who} (mode {mode:04o})"));
        }
        None
    }
}

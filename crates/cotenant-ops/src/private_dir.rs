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

use std::ffi::{CString, OsStr, OsString};
use std::fs;
use std::hash::{BuildHasher as _, Hasher as _};
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{anyhow, bail, Context as _};

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
/// How many temporary names [`write_file`] tries before giving up (each is new and random; a
/// clash means someone else is creating names in the folder).
const TEMP_NAME_ATTEMPTS: u32 = 16;

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
                "{} {problem}; the lab builds and runs programs under {}, so it refuses a folder \
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
            "{} {problem}; the lab builds and runs programs there, so it must be a folder only uid \
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

/// Writes `bytes` to `path` with permissions exactly `mode` (not reduced by the umask), by a
/// new temporary file in the same folder renamed over `path`: a symbolic link at `path` is
/// replaced, never followed, and a reader never sees half a file. The folder holding `path`
/// must not itself be a symbolic link (it is opened with `O_NOFOLLOW` and every step is taken
/// relative to that descriptor, so the folder cannot be swapped half-way); folders above it
/// may be.
pub fn write_file(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let Some(name) = path.file_name() else {
        bail!("cannot write {}: it does not end in a file name", path.display());
    };
    // Rebuilt from its components: a trailing slash would make O_NOFOLLOW follow a link.
    let folder: PathBuf = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.components().collect(),
        _ => PathBuf::from("."),
    };
    let folder_fd = open_folder(&folder)?;
    let dir = folder_fd.as_raw_fd();
    let c_name = c_string(name)?;
    let mode = mode & 0o7777;
    for _ in 0..TEMP_NAME_ATTEMPTS {
        let c_temp = c_string(&temp_name(name))?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let create_mode: libc::c_uint = mode;
        // SAFETY: `c_temp` is NUL-terminated and outlives the call; `dir` is an open
        // descriptor; the mode is the variadic argument O_CREAT requires.
        let fd = unsafe { libc::openat(dir, c_temp.as_ptr(), flags, create_mode) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::AlreadyExists {
                continue;
            }
            return Err(e).with_context(|| format!("creating a temporary file in {}", folder.display()));
        }
        // SAFETY: `fd` was just opened here and nothing else owns it.
        let mut file = unsafe { fs::File::from_raw_fd(fd) };
        // fchmod, unlike the mode given to openat, is not reduced by the umask.
        let written =
            file.write_all(bytes).and_then(|()| file.set_permissions(fs::Permissions::from_mode(mode)));
        drop(file);
        let result = written.and_then(|()| {
            // SAFETY: both names are NUL-terminated and outlive the call; `dir` is open.
            if unsafe { libc::renameat(dir, c_temp.as_ptr(), dir, c_name.as_ptr()) } == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
        if let Err(e) = result {
            // SAFETY: as for openat. If this fails too, a stray temporary file stays: harmless.
            let _ = unsafe { libc::unlinkat(dir, c_temp.as_ptr(), 0) };
            return Err(e).with_context(|| format!("writing {}", path.display()));
        }
        return Ok(());
    }
    bail!(
        "writing {}: no free temporary name in {} after {TEMP_NAME_ATTEMPTS} tries",
        path.display(),
        folder.display()
    )
}

/// Opens `folder` for use with `openat`, refusing a symbolic link.
fn open_folder(folder: &Path) -> anyhow::Result<fs::File> {
    fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(folder).map_err(
        |e| {
            // With O_DIRECTORY the kernel reports a final symbolic link as ENOTDIR, not ELOOP.
            let is_link = || fs::symlink_metadata(folder).is_ok_and(|m| m.file_type().is_symlink());
            if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) && is_link() {
                anyhow!("{} is a symbolic link; cotenant never writes through one", folder.display())
            } else {
                anyhow::Error::new(e).context(format!("opening the folder {}", folder.display()))
            }
        },
    )
}

/// `.<name>.<pid>-<counter>-<random>.tmp`: hidden, and unlikely to be taken (O_EXCL checks).
fn temp_name(name: &OsStr) -> OsString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Each RandomState has fresh keys from the operating system's random source.
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    let mut temp = OsString::from(".");
    temp.push(name);
    temp.push(format!(".{}-{}-{random:016x}.tmp", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    temp
}

/// `text` as a C string, or an error naming it if it holds a NUL byte.
fn c_string(text: &OsStr) -> anyhow::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| anyhow!("the file name {text:?} contains a NUL byte"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fresh private folder (from [`fresh_temp`]) removed when dropped, its path resolved.
    struct TempRoot(PathBuf);

    impl TempRoot {
        /// `None` (with the reason printed) where the system's temporary folder is not one the
        /// cache rules accept (e.g. `TMPDIR` inside another user's folder): the tests below
        /// would then fail for that reason, not for the one they test.
        fn new(test: &str) -> Option<TempRoot> {
            let made = fresh_temp("cotenant-private-dir-test").expect("mkdtemp in the temp folder");
            let root = TempRoot(fs::canonicalize(&made).expect("resolving a fresh folder"));
            match check_chain(&root.0, &root.0, true) {
                Ok(()) => Some(root),
                Err(e) => {
                    eprintln!("{test}: SKIPPED: the temporary folder is not trusted: {e:#}");
                    None
                }
            }
        }
    }

    impl Drop for TempRoot {
        fn drop(&mut self) {
            if let Err(e) = fs::remove_dir_all(&self.0) {
                eprintln!("cannot remove {}: {e}", self.0.display());
            }
        }
    }

    fn mode_of(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn the_cache_directory_is_xdg_cache_home_then_home() {
        let os = |s: &'static str| Some(OsStr::new(s));
        assert_eq!(user_cache_root(os("/x/cache"), os("/home/u")), Some(PathBuf::from("/x/cache")));
        assert_eq!(user_cache_root(os("relative"), os("/home/u")), Some(PathBuf::from("/home/u/.cache")));
        assert_eq!(user_cache_root(None, os("/home/u")), Some(PathBuf::from("/home/u/.cache")));
        assert_eq!(user_cache_root(os(""), os("home")), None, "relative or empty: no cache directory");
        assert_eq!(user_cache_root(None, None), None);
    }

    #[test]
    fn cache_folders_are_made_private_and_reused() {
        const TEST: &str = "cache_folders_are_made_private_and_reused";
        let Some(root) = TempRoot::new(TEST) else { return };
        let missing = root.0.join("missing");
        let cache = missing.join("cache");
        let dir = cache_dir_under(&cache, "lab-go").unwrap();
        let app = cache.join("cotenant");
        assert_eq!(dir, app.join("lab-go"));
        let made: [&Path; 4] = [&missing, &cache, &app, &dir];
        for made in made {
            let meta = fs::symlink_metadata(made).unwrap();
            assert!(meta.is_dir(), "{}", made.display());
            assert_eq!(meta.uid(), effective_uid(), "{}", made.display());
            assert_eq!(mode_of(made) & 0o077, 0, "{} has mode {:04o}", made.display(), mode_of(made));
        }
        fs::write(dir.join("kept"), "built").unwrap();
        assert_eq!(cache_dir_under(&cache, "lab-go").unwrap(), dir, "the same folder again");
        assert!(dir.join("kept").exists(), "a reused folder keeps its contents (the build cache)");
    }

    #[test]
    fn names_that_are_not_one_folder_are_refused() {
        const TEST: &str = "names_that_are_not_one_folder_are_refused";
        let Some(root) = TempRoot::new(TEST) else { return };
        for name in ["", "..", ".", "a/b", "/abs", "a/"] {
            let e = cache_dir_under(&root.0, name).unwrap_err();
            assert!(e.to_string().contains("is not a single folder name"), "{name:?}: {e:#}");
            assert!(fresh_temp(name).is_err(), "{name:?}");
        }
        assert!(!root.0.join("cotenant").exists(), "nothing was created for a bad name");
    }

    #[test]
    fn a_symlinked_folder_is_refused() {
        const TEST: &str = "a_symlinked_folder_is_refused";
        let Some(root) = TempRoot::new(TEST) else { return };
        let elsewhere = root.0.join("elsewhere");
        ensure_private(&elsewhere).unwrap();
        // The cotenant level: a link to a folder of our own is still refused.
        symlink(&elsewhere, root.0.join("cotenant")).unwrap();
        let e = cache_dir_under(&root.0, "lab-go").unwrap_err();
        let expected = format!("{} is a symbolic link", root.0.join("cotenant").display());
        assert!(e.to_string().starts_with(&expected), "{e:#}");
        assert!(!elsewhere.join("lab-go").exists(), "the link was followed");

        // The <name> level.
        fs::remove_file(root.0.join("cotenant")).unwrap();
        ensure_private(&root.0.join("cotenant")).unwrap();
        symlink(&elsewhere, root.0.join("cotenant").join("lab-go")).unwrap();
        let e = cache_dir_under(&root.0, "lab-go").unwrap_err();
        assert!(e.to_string().contains("lab-go is a symbolic link"), "{e:#}");
        // A dangling one too (mkdir says "exists" for it).
        fs::remove_file(root.0.join("cotenant").join("lab-go")).unwrap();
        symlink(root.0.join("nowhere"), root.0.join("cotenant").join("lab-go")).unwrap();
        let e = cache_dir_under(&root.0, "lab-go").unwrap_err();
        assert!(e.to_string().contains("lab-go is a symbolic link"), "{e:#}");
        assert!(!root.0.join("nowhere").exists(), "the dangling link was followed");
    }

    #[test]
    fn a_folder_others_can_write_is_refused_and_left_alone() {
        const TEST: &str = "a_folder_others_can_write_is_refused_and_left_alone";
        let Some(root) = TempRoot::new(TEST) else { return };
        let app = root.0.join("cotenant");
        fs::create_dir(&app).unwrap();
        for (mode, who) in [(0o777, "others"), (0o770, "its group"), (0o1777, "others")] {
            fs::set_permissions(&app, fs::Permissions::from_mode(mode)).unwrap();
            let e = cache_dir_under(&root.0, "lab-probes").unwrap_err();
            let expected = format!("{} is writable by {who} (mode {mode:04o})", app.display());
            assert!(e.to_string().starts_with(&expected), "{e:#}");
            assert_eq!(mode_of(&app), mode, "the folder's mode was changed");
            assert!(!app.join("lab-probes").exists());
        }
        // The cache directory itself, even sticky.
        fs::set_permissions(&app, fs::Permissions::from_mode(0o700)).unwrap();
        fs::set_permissions(&root.0, fs::Permissions::from_mode(0o1777)).unwrap();
        let e = cache_dir_under(&root.0, "lab-probes").unwrap_err();
        let expected = format!("{} is writable by others (mode 1777)", root.0.display());
        assert!(e.to_string().starts_with(&expected), "{e:#}");
        assert!(e.to_string().contains("set XDG_CACHE_HOME"), "{e:#}");
        fs::set_permissions(&root.0, fs::Permissions::from_mode(0o700)).unwrap();
        assert!(cache_dir_under(&root.0, "lab-probes").is_ok(), "and accepted once private");
    }

    #[test]
    fn a_folder_another_user_owns_is_refused() {
        const TEST: &str = "a_folder_another_user_owns_is_refused";
        const NOBODY: u32 = 65534;
        if effective_uid() != 0 {
            return eprintln!("{TEST}: SKIPPED: giving a folder to another user (chown) needs root");
        }
        let Some(root) = TempRoot::new(TEST) else { return };
        let cache = root.0.join("cache");
        let app = cache.join("cotenant");
        fs::DirBuilder::new().recursive(true).mode(0o700).create(&app).unwrap();
        std::os::unix::fs::chown(&app, Some(NOBODY), Some(NOBODY)).unwrap();
        let e = cache_dir_under(&cache, "lab-go").unwrap_err();
        let expected = format!("{} is owned by uid {NOBODY}, not 0", app.display());
        assert!(e.to_string().starts_with(&expected), "{e:#}");
        assert_eq!(fs::symlink_metadata(&app).unwrap().uid(), NOBODY, "the folder was taken over");
        assert!(!app.join("lab-go").exists());

        // The cache directory itself (another user's $HOME/.cache under sudo -E).
        fs::remove_dir(&app).unwrap();
        std::os::unix::fs::chown(&cache, Some(NOBODY), Some(NOBODY)).unwrap();
        let e = cache_dir_under(&cache, "lab-go").unwrap_err();
        let expected = format!("{} is owned by uid {NOBODY}, not 0", cache.display());
        assert!(e.to_string().starts_with(&expected), "{e:#}");
        assert!(!app.exists(), "nothing was created in it");
    }

    #[test]
    fn a_cache_directory_others_can_write_gives_a_fresh_folder_instead() {
        const TEST: &str = "a_cache_directory_others_can_write_gives_a_fresh_folder_instead";
        let Some(root) = TempRoot::new(TEST) else { return };
        let cache = root.0.join("cache");
        fs::create_dir(&cache).unwrap();
        fs::set_permissions(&cache, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!is_trusted(&cache) && is_trusted(&root.0) && !is_trusted(&root.0.join("missing")));
        let no_cache_directory = cache_dir_from(None, "lab-go").unwrap();
        for dir in [cache_dir_from(Some(cache.clone()), "lab-go").unwrap(), no_cache_directory] {
            assert!(!dir.starts_with(&root.0), "{} is in the untrusted folder", dir.display());
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with("cotenant-lab-go-"), "{}", dir.display());
            assert_eq!(mode_of(&dir) & 0o077, 0, "{} has mode {:04o}", dir.display(), mode_of(&dir));
            fs::remove_dir(&dir).unwrap();
        }
        assert_eq!(fs::read_dir(&cache).unwrap().count(), 0, "something was made in the untrusted folder");
        // A missing cache directory under a folder others can write is not made at all.
        let dir = cache_dir_from(Some(cache.join("xdg")), "lab-go").unwrap();
        assert!(!cache.join("xdg").exists(), "the cache directory was made in an untrusted folder");
        fs::remove_dir(&dir).unwrap();
        // A trusted one is used, and kept.
        let dir = cache_dir_from(Some(root.0.join("ok")), "lab-go").unwrap();
        assert_eq!(dir, root.0.join("ok").join("cotenant").join("lab-go"));
    }

    #[test]
    fn only_a_fallback_folder_is_recorded_for_removal_when_the_lab_ends() {
        const TEST: &str = "only_a_fallback_folder_is_recorded_for_removal_when_the_lab_ends";
        // Checked, not removed, here: removing every recorded folder would race with the other
        // tests that make one.
        let recorded = |dir: &Path| crate::cleanup::recorded_temp_folders().contains(&dir.to_path_buf());
        let fallback = cache_dir_from(None, "lab-test-recorded").unwrap();
        assert!(recorded(&fallback), "{} would be left behind", fallback.display());
        fs::remove_dir(&fallback).unwrap();
        let Some(root) = TempRoot::new(TEST) else { return };
        let kept = cache_dir_from(Some(root.0.join("cache")), "lab-test-recorded").unwrap();
        assert!(!recorded(&kept), "{} is a cache kept between runs", kept.display());
    }

    #[test]
    fn fresh_temporary_folders_are_new_and_private() {
        let a = fresh_temp("cotenant-private-dir-test").unwrap();
        let b = fresh_temp("cotenant-private-dir-test").unwrap();
        assert_ne!(a, b);
        for dir in [&a, &b] {
            assert!(dir.file_name().unwrap().to_string_lossy().starts_with("cotenant-private-dir-test-"));
            assert_eq!(mode_of(dir) & 0o077, 0, "{} has mode {:04o}", dir.display(), mode_of(dir));
            assert_eq!(fs::symlink_metadata(dir).unwrap().uid(), effective_uid());
            fs::remove_dir(dir).unwrap();
        }
    }

    #[test]
    fn a_symlink_at_the_file_is_replaced_and_its_target_untouched() {
        const TEST: &str = "a_symlink_at_the_file_is_replaced_and_its_target_untouched";
        let Some(root) = TempRoot::new(TEST) else { return };
        let target = root.0.join("precious");
        fs::write(&target, "keep me").unwrap();
        let path = root.0.join("probe.cpp");
        symlink(&target, &path).unwrap();
        write_file(&path, b"int main() {}", 0o644).unwrap();
        assert!(fs::symlink_metadata(&path).unwrap().file_type().is_file(), "still a link");
        assert_eq!(fs::read_to_string(&path).unwrap(), "int main() {}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep me", "written through the link");
        let mut names: Vec<String> =
            fs::read_dir(&root.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        names.sort();
        assert_eq!(names, ["precious", "probe.cpp"], "no temporary file left behind");
    }

    #[test]
    fn write_file_refuses_a_symlinked_folder() {
        const TEST: &str = "write_file_refuses_a_symlinked_folder";
        let Some(root) = TempRoot::new(TEST) else { return };
        let real = root.0.join("real");
        fs::create_dir(&real).unwrap();
        symlink(&real, root.0.join("link")).unwrap();
        let e = write_file(&root.0.join("link").join("report.md"), b"x", 0o644).unwrap_err();
        let expected = format!("{} is a symbolic link", root.0.join("link").display());
        assert!(e.to_string().starts_with(&expected), "{e:#}");
        assert_eq!(fs::read_dir(&real).unwrap().count(), 0, "written through the folder link");
    }

    #[test]
    fn write_file_sets_the_mode_asked_whatever_the_umask() {
        const TEST: &str = "write_file_sets_the_mode_asked_whatever_the_umask";
        let Some(root) = TempRoot::new(TEST) else { return };
        let path = root.0.join("go.mod");
        for mode in [0o640, 0o755, 0o600, 0o666] {
            write_file(&path, format!("mode {mode:o}").as_bytes(), mode).unwrap();
            assert_eq!(mode_of(&path), mode);
            assert_eq!(fs::read_to_string(&path).unwrap(), format!("mode {mode:o}"));
        }
        let folder = root.0.join("probe-go");
        fs::create_dir(&folder).unwrap();
        let e = write_file(&folder, b"x", 0o644).unwrap_err();
        let expected = format!("writing {}", folder.display());
        assert!(e.to_string().starts_with(&expected), "a folder in the way is an error: {e:#}");
        assert!(fs::symlink_metadata(&folder).unwrap().is_dir());
    }
}

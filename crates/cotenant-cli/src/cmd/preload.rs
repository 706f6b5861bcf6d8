//! Where `run --preload` and `env --preload` find the preload shim, `libcotenant_preload.so`
//! (its source is `preload/shim.rs`). In order:
//!
//! 1. `$COTENANT_PRELOAD_LIB`, when set (an error if it is not a file);
//! 2. next to the `cotenant` executable (a workspace build: `target/release/`);
//! 3. `../lib/cotenant/` from the executable's folder (where `make install` puts it);
//! 4. the copy built into the executable (`build.rs`), written on first use to a private
//!    cache folder, `<cache>/cotenant/preload-<hash>/libcotenant_preload.so`, where `<cache>`
//!    is `$XDG_CACHE_HOME` or `~/.cache` and `<hash>` the first 16 hex digits of a hash of the
//!    library's bytes (a new version goes to a new folder; an old one stays usable by programs
//!    still running with it).
//!
//! The cache folder is made and checked as the lab's build folders are
//! (`cotenant_ops::private_dir`): the cache directory and every folder above it owned by this
//! user or root and writable by no one else (sticky folders like `/tmp` above it excepted),
//! `cotenant` and `preload-<hash>` real folders (not symbolic links) of this user, made with
//! mode 0700. The library is written by a new file renamed over the old name, so a link there
//! is replaced, never followed; a file already there is used only if its bytes are exactly the
//! built-in ones, and rewritten otherwise. So no other user can choose what `LD_PRELOAD` loads
//! into the command, root's included, and no fixed name in a shared temporary folder is ever
//! used: where no such cache folder can be had, `--preload` fails and says why.
//!
//! The library a program loads must stay readable by it: when the command changes to another
//! user after starting (a server dropping privileges), point `COTENANT_PRELOAD_LIB` at an
//! installed copy that user can read, since the cache folder is its owner's only.

use std::ffi::OsString;
use std::fs;
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use cotenant_ops::private_dir;

/// Overrides where `--preload` looks for the shim.
pub const LIB_VAR: &str = "COTENANT_PRELOAD_LIB";
/// The shim's file name.
pub const LIB_NAME: &str = "libcotenant_preload.so";
/// The shim built into this executable by `build.rs`; empty when it could not be compiled.
pub static BUILT_IN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libcotenant_preload.so"));
/// Why [`BUILT_IN`] is empty, as `build.rs` found (unset when the shim was built).
const BUILT_IN_MISSING: Option<&str> = option_env!("COTENANT_PRELOAD_UNAVAILABLE");
/// The folder of the installed shim, relative to the executable's folder (`make install`).
const INSTALLED_DIR: &str = "../lib/cotenant";
/// The written copy's mode: a library, read (and mapped) by whoever the folder lets in.
const LIB_MODE: u32 = 0o644;

/// The shim for this process's `--preload`: looked for as the module doc says, in the
/// invoking user's cache directory for the built-in copy.
pub fn find_for_this_process() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("--preload: locating the cotenant executable")?;
    find(&exe, std::env::var_os(LIB_VAR), private_dir::user_cache(), BUILT_IN)
}

/// The shim, for the executable `exe`, the value of `$COTENANT_PRELOAD_LIB` (`override_path`),
/// the user's cache directory (`cache`: `None` if there is none) and the built-in library
/// (`built_in`: empty if there is none): an absolute path that `LD_PRELOAD` can hold. The error
/// says where it looked and what to do.
pub fn find(
    exe: &Path,
    override_path: Option<OsString>,
    cache: Option<PathBuf>,
    built_in: &[u8],
) -> anyhow::Result<PathBuf> {
    if let Some(path) = override_path {
        let path = PathBuf::from(path);
        anyhow::ensure!(path.is_file(), "--preload: {LIB_VAR}={} is not a file", path.display());
        return usable(absolute(&path)?);
    }
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [dir.join(LIB_NAME), dir.join(INSTALLED_DIR).join(LIB_NAME)];
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return usable(absolute(found)?);
    }
    let looked = candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" and ");
    if built_in.is_empty() {
        let why = BUILT_IN_MISSING.filter(|w| !w.is_empty()).unwrap_or("it was not compiled");
        bail!(
            "--preload is unavailable in this build of cotenant: there is no {LIB_NAME} in {looked}, \
             and none is built in ({why}); install cotenant with `make install`, or build the shim \
             with `cargo build --release -p cotenant-preload` and set {LIB_VAR} to its path"
        );
    }
    let Some(cache) = cache else {
        bail!(
            "--preload: there is no {LIB_NAME} in {looked}, and no cache folder to write the \
             built-in one to (neither XDG_CACHE_HOME nor HOME is an absolute path); set \
             XDG_CACHE_HOME to a folder only you can write, or {LIB_VAR} to the shim's path"
        );
    };
    let written = write_built_in(&cache, built_in).with_context(|| {
        format!(
            "--preload: there is no {LIB_NAME} in {looked}, and the built-in one cannot be kept \
             under {} (set XDG_CACHE_HOME to a folder only you can write, or {LIB_VAR} to the \
             shim's path)",
            cache.display()
        )
    })?;
    usable(written)
}

/// `<cache>/cotenant/preload-<hash>/libcotenant_preload.so` holding exactly `bytes`: the
/// folders made or checked by `private_dir`, and the file reused if its bytes are `bytes`,
/// (re)written by rename otherwise.
fn write_built_in(cache: &Path, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let dir = private_dir::cache_dir_under(cache, &folder_name(bytes))?;
    let path = dir.join(LIB_NAME);
    if !holds_exactly(&path, bytes) {
        private_dir::write_file(&path, bytes, LIB_MODE)?;
    }
    Ok(path)
}

/// `preload-<16 hex digits>`: the 64-bit FNV-1a hash of `bytes`. Not a defence (the bytes are
/// compared before a file is trusted): it only gives each build of the shim its own folder.
fn folder_name(bytes: &[u8]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = bytes.iter().fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    format!("preload-{hash:016x}")
}

/// Whether `path` is a regular file (not a symbolic link) whose bytes are exactly `bytes`.
/// Anything else, unreadable included, is `false`: the file is then written afresh.
fn holds_exactly(path: &Path, bytes: &[u8]) -> bool {
    let Ok(file) = fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64) {
        return false;
    }
    // One byte more than expected at most: a file that grew since the length check differs.
    let mut found = Vec::with_capacity(bytes.len());
    file.take(bytes.len() as u64 + 1).read_to_end(&mut found).is_ok() && found == bytes
}

/// An absolute, normalised path: `LD_PRELOAD` is read in the command's working directory.
fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    fs::canonicalize(path).with_context(|| format!("--preload: resolving {}", path.display()))
}

/// `path` if `LD_PRELOAD` can hold it: the dynamic loader splits that list on spaces and
/// colons, so a path with either would load something else, or nothing.
fn usable(path: PathBuf) -> anyhow::Result<PathBuf> {
    if path.as_os_str().as_bytes().iter().any(|b| matches!(b, b' ' | b':')) {
        bail!(
            "--preload: the shim's path {} contains a space or a colon, which LD_PRELOAD cannot \
             hold; copy {LIB_NAME} to a path without them and set {LIB_VAR} to it",
            path.display()
        );
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt as _};

    /// A fresh private folder (`mkdtemp`), removed with its contents when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            Scratch(private_dir::fresh_temp("cotenant-preload-test").expect("a temporary folder"))
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const FAKE_SHIM: &[u8] = b"\x7fELF not really a library, only bytes to compare";

    #[test]
    fn a_missing_shim_without_a_built_in_one_is_a_clear_error() {
        let error = find(Path::new("/nonexistent/bin/cotenant"), None, None, &[]).unwrap_err().to_string();
        assert!(error.contains("--preload is unavailable in this build"), "{error}");
        assert!(error.contains("/nonexistent/bin/libcotenant_preload.so"), "{error}");
        assert!(error.contains("/nonexistent/bin/../lib/cotenant/libcotenant_preload.so"), "{error}");
        assert!(error.contains("COTENANT_PRELOAD_LIB"), "{error}");
        let error = find(Path::new("/x/cotenant"), Some("/nonexistent.so".into()), None, FAKE_SHIM)
            .unwrap_err()
            .to_string();
        assert!(error.contains("COTENANT_PRELOAD_LIB=/nonexistent.so is not a file"), "{error}");
    }

    #[test]
    fn a_built_in_shim_needs_a_cache_folder() {
        let error = find(Path::new("/nonexistent/bin/cotenant"), None, None, FAKE_SHIM).unwrap_err();
        let error = format!("{error:#}");
        assert!(error.contains("no cache folder"), "{error}");
        assert!(error.contains("XDG_CACHE_HOME"), "{error}");
    }

    #[test]
    fn the_built_in_shim_is_written_once_into_private_folders_and_rewritten_if_changed() {
        let scratch = Scratch::new();
        let cache = scratch.0.join("cache");
        let exe = Path::new("/nonexistent/bin/cotenant");
        let path = find(exe, None, Some(cache.clone()), FAKE_SHIM).unwrap();
        let cache = fs::canonicalize(&cache).unwrap();
        assert_eq!(path, cache.join("cotenant").join(folder_name(FAKE_SHIM)).join(LIB_NAME));
        assert_eq!(fs::read(&path).unwrap(), FAKE_SHIM);
        for dir in [cache.clone(), cache.join("cotenant"), path.parent().unwrap().to_path_buf()] {
            let mode = fs::symlink_metadata(&dir).unwrap().mode() & 0o7777;
            assert_eq!(mode, 0o700, "{} has mode {mode:o}", dir.display());
        }

        // Reused as it is: the same file (same inode), not a new one.
        let inode = fs::metadata(&path).unwrap().ino();
        assert_eq!(find(exe, None, Some(cache.clone()), FAKE_SHIM).unwrap(), path);
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode, "an identical file is not rewritten");

        // Anything else under that name is replaced by the built-in bytes, a link included
        // (and the link's target is left alone).
        fs::write(&path, b"tampered").unwrap();
        assert_eq!(find(exe, None, Some(cache.clone()), FAKE_SHIM).unwrap(), path);
        assert_eq!(fs::read(&path).unwrap(), FAKE_SHIM);
        let elsewhere = scratch.0.join("elsewhere.so");
        fs::write(&elsewhere, b"someone else's").unwrap();
        fs::remove_file(&path).unwrap();
        symlink(&elsewhere, &path).unwrap();
        assert_eq!(find(exe, None, Some(cache.clone()), FAKE_SHIM).unwrap(), path);
        assert!(!fs::symlink_metadata(&path).unwrap().file_type().is_symlink(), "the link is replaced");
        assert_eq!(fs::read(&path).unwrap(), FAKE_SHIM);
        assert_eq!(fs::read(&elsewhere).unwrap(), b"someone else's", "never written through");
    }

    #[test]
    fn a_shim_next_to_the_executable_or_installed_comes_before_the_built_in_one() {
        let scratch = Scratch::new();
        let bin = scratch.0.join("bin");
        let installed = scratch.0.join("lib/cotenant");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(&installed).unwrap();
        let exe = bin.join("cotenant");
        let cache = Some(scratch.0.join("cache"));

        fs::write(installed.join(LIB_NAME), b"installed").unwrap();
        let found = find(&exe, None, cache.clone(), FAKE_SHIM).unwrap();
        assert_eq!(found, fs::canonicalize(installed.join(LIB_NAME)).unwrap());

        fs::write(bin.join(LIB_NAME), b"next to it").unwrap();
        let found = find(&exe, None, cache.clone(), FAKE_SHIM).unwrap();
        assert_eq!(found, fs::canonicalize(bin.join(LIB_NAME)).unwrap());

        let chosen = scratch.0.join("chosen.so");
        fs::write(&chosen, b"chosen").unwrap();
        let found = find(&exe, Some(chosen.clone().into_os_string()), cache, FAKE_SHIM).unwrap();
        assert_eq!(found, fs::canonicalize(&chosen).unwrap());
        assert!(!scratch.0.join("cache").exists(), "nothing written when a file was found");
    }

    #[test]
    fn a_path_ld_preload_cannot_hold_is_refused() {
        let scratch = Scratch::new();
        let spaced = scratch.0.join("with space.so");
        fs::write(&spaced, b"x").unwrap();
        let error = find(Path::new("/x/cotenant"), Some(spaced.into_os_string()), None, FAKE_SHIM)
            .unwrap_err()
            .to_string();
        assert!(error.contains("contains a space or a colon"), "{error}");
    }

    #[test]
    fn each_build_of_the_shim_gets_its_own_folder() {
        let name = folder_name(b"one");
        assert!(name.starts_with("preload-") && name.len() == "preload-".len() + 16, "{name}");
        assert_ne!(name, folder_name(b"two"));
        assert_eq!(name, folder_name(b"one"));
    }
}

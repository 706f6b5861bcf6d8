//! [`write_file`]: the one way files are written into a private folder, a new temporary file
//! renamed over the target, so a symbolic link there is replaced, never followed.

use std::ffi::{CString, OsStr, OsString};
use std::fs;
use std::hash::{BuildHasher as _, Hasher as _};
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{anyhow, bail, Context as _};

/// How many temporary names [`write_file`] tries before giving up (each is new and random; a
/// clash means someone else is creating names in the folder).
const TEMP_NAME_ATTEMPTS: u32 = 16;

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

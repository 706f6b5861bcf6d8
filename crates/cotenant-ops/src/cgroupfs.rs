//! The one way cotenant reads and writes a cgroup's control files: only on a cgroup file
//! system, never through a symbolic link, so that root pointed at a wrong or hostile path
//! writes nothing (issue 34: `cgroup set` used an absolute path as given, and a directory whose
//! `cpu.cfs_quota_us` was a symlink to `/proc/sys/kernel/pid_max` made root write there).
//!
//! A control file is opened in three steps, each closing one way a path can lead astray:
//!
//! 1. The directory is opened with `O_DIRECTORY | O_NOFOLLOW`: a directory that is itself a
//!    symbolic link is refused. Components above it may be links (`/sys/fs/cgroup/cpu` →
//!    `cpu,cpuacct` on many hosts): wherever they lead, step 2 checks where it ended.
//! 2. `fstatfs` on that descriptor must say cgroup v1 or v2 ([`CGROUP_SUPER_MAGIC`],
//!    [`CGROUP2_SUPER_MAGIC`]): a directory on tmpfs, ext4 or procfs is refused, whatever its
//!    files are called. A cgroup file system holds no symbolic links, hard links or files that
//!    anyone but the kernel made.
//! 3. The file is opened relative to that descriptor (`openat`) with `O_NOFOLLOW` and never
//!    `O_CREAT` (control files exist); its name must be a single path component. Nothing can
//!    swap the directory between the check and the write, and a symbolic link is refused.
//!
//! Test fixtures are plain files on an ordinary file system: [`FileSystems::FixtureTree`]
//! skips step 2 only (links are refused all the same). Every real read and write uses
//! [`FileSystems::CgroupOnly`]: [`write_control`], [`ensure_cgroupfs`], [`ControlDir::open`].
//!
//! Errors name the directory or file and what it is instead. Each keeps the [`io::ErrorKind`]
//! of the failure, and [`os_error`] gives the kernel's error number behind it (`EINVAL`,
//! `EBUSY`, `ENOENT`…), which [`io::Error::raw_os_error`] cannot see through the message.

use std::{
    ffi::CString,
    fmt, fs,
    io::{self, Read as _, Write as _},
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::{ffi::OsStrExt, fs::MetadataExt},
    },
    path::{Path, PathBuf},
};

/// `statfs` type of a cgroup v1 hierarchy (`CGROUP_SUPER_MAGIC` in `<linux/magic.h>`).
pub const CGROUP_SUPER_MAGIC: u32 = 0x0027_e0eb;
/// `statfs` type of the cgroup v2 hierarchy (`CGROUP2_SUPER_MAGIC` in `<linux/magic.h>`).
pub const CGROUP2_SUPER_MAGIC: u32 = 0x6367_7270;
/// `statfs` type of tmpfs (`TMPFS_MAGIC`), named in refusals and used by the tests.
pub const TMPFS_MAGIC: u32 = 0x0102_1994;

/// Which file systems a [`ControlDir`] may be on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileSystems {
    /// cgroup v1 or v2 only: every real read and write.
    CgroupOnly,
    /// Any file system: a tree of plain files that stands in for a cgroup in tests. Only the
    /// `statfs` check is skipped; symbolic links are refused all the same.
    FixtureTree,
}

/// A cgroup directory that passed the checks, open for reading and writing its control files.
#[derive(Debug)]
pub struct ControlDir {
    /// The descriptor every control file is opened relative to.
    fd: OwnedFd,
    /// The path it was opened by, for messages.
    path: PathBuf,
    /// Whether it passed the `statfs` check ([`FileSystems::CgroupOnly`]) or is a fixture.
    file_systems: FileSystems,
}

impl ControlDir {
    /// Opens a real cgroup directory: refused unless it is on a cgroup file system and not a
    /// symbolic link itself.
    pub fn open(dir: &Path) -> io::Result<ControlDir> {
        ControlDir::open_with(dir, FileSystems::CgroupOnly)
    }

    /// Opens `dir`, refusing a symbolic link, and (for [`FileSystems::CgroupOnly`]) anything
    /// not on a cgroup file system. A missing directory fails with `ENOENT`, a file that is
    /// not a directory with `ENOTDIR`, a symbolic link with `ELOOP` (see [`os_error`]).
    pub fn open_with(dir: &Path, file_systems: FileSystems) -> io::Result<ControlDir> {
        // A trailing slash would make the kernel follow a final symbolic link despite
        // O_NOFOLLOW: the path is opened as its components, which drop it (and `.`s).
        let plain: PathBuf = dir.components().collect();
        let c_dir = c_string(plain.as_os_str().as_bytes(), dir)?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated path that lives across the call; the result is checked.
        let raw = unsafe { libc::open(c_dir.as_ptr(), flags) };
        if raw < 0 {
            return Err(dir_open_error(dir, &plain, io::Error::last_os_error()));
        }
        // SAFETY: `raw` was just opened and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        if file_systems == FileSystems::CgroupOnly {
            let magic =
                fs_type(&fd).map_err(|e| with_path(&e, format!("{}: cannot statfs", dir.display())))?;
            if magic != CGROUP_SUPER_MAGIC && magic != CGROUP2_SUPER_MAGIC {
                let name = fs_name(magic).map(|n| format!(", {n}")).unwrap_or_default();
                return Err(refusal(
                    io::ErrorKind::InvalidInput,
                    None,
                    format!(
                        "{} is not on a cgroup file system (statfs type {magic:#x}{name}); cotenant \
                         writes only cgroup control files",
                        dir.display()
                    ),
                ));
            }
        }
        Ok(ControlDir { fd, path: dir.to_owned(), file_systems })
    }

    /// The directory's path, as given to [`open`](Self::open).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads a control file whole. A missing file fails with kind `NotFound` (`ENOENT`).
    pub fn read(&self, name: &str) -> io::Result<String> {
        let mut file = self.open_file(name, libc::O_RDONLY, "read")?;
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| with_path(&e, format!("{}: cannot read", self.path.join(name).display())))?;
        Ok(text)
    }

    /// Writes `value` to an existing control file in one `write(2)`, as the kernel takes it.
    /// The kernel's own refusals keep their error number (`EINVAL` for a value out of range,
    /// `EBUSY`, `EACCES`…: see [`os_error`]).
    pub fn write(&self, name: &str, value: &str) -> io::Result<()> {
        let mut file = self.open_file(name, libc::O_WRONLY, "write")?;
        let path = self.path.join(name);
        if self.file_systems == FileSystems::FixtureTree {
            // A control file takes each write whole, whatever it held; a fixture is a plain
            // file, emptied (after open_file's checks) so that a shorter value leaves no tail.
            file.set_len(0).map_err(|e| with_path(&e, format!("{}: cannot truncate", path.display())))?;
        }
        let written = loop {
            match file.write(value.as_bytes()) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match written {
            Ok(n) if n == value.len() => Ok(()),
            Ok(n) => Err(refusal(
                io::ErrorKind::WriteZero,
                None,
                format!("{}: wrote {n} of the {} bytes of {value:?}", path.display(), value.len()),
            )),
            Err(e) => Err(with_path(&e, format!("{}: cannot write {value:?}", path.display()))),
        }
    }

    /// Opens an existing control file for writing, with the checks of [`write`](Self::write),
    /// for a caller that must write later without allocating: a child that joins a cgroup
    /// between `fork` and `exec` writes to a `cgroup.procs` opened here before the fork. (A
    /// fixture's file is not emptied.)
    #[allow(dead_code)] // for lab/cgroup.rs, whose pre_exec writes cgroup.procs
    pub fn open_for_write(&self, name: &str) -> io::Result<fs::File> {
        self.open_file(name, libc::O_WRONLY, "write")
    }

    /// Opens `name` in this directory with `flags` plus `O_NOFOLLOW | O_CLOEXEC`; `verb`
    /// ("read", "write") is for messages. Refuses a name that is not one path component, a
    /// symbolic link, anything but a regular file, and a file with more than one name (a hard
    /// link could lead to any file of the same file system; control files have one).
    fn open_file(&self, name: &str, flags: libc::c_int, verb: &str) -> io::Result<fs::File> {
        let path = self.path.join(name);
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(refusal(
                io::ErrorKind::InvalidInput,
                None,
                format!(
                    "{}: {name:?} is not the name of a control file (one path component)",
                    self.path.display()
                ),
            ));
        }
        let c_name = c_string(name.as_bytes(), &path)?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: an open directory descriptor and a NUL-terminated name that lives across the
        // call; no O_CREAT, so no mode argument; the result is checked.
        let raw = unsafe { libc::openat(self.fd.as_raw_fd(), c_name.as_ptr(), flags) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ELOOP) {
                return Err(refusal(
                    e.kind(),
                    Some(libc::ELOOP),
                    format!("{} is a symbolic link; cotenant never {verb}s through one", path.display()),
                ));
            }
            return Err(with_path(&e, format!("{}: cannot {verb}", path.display())));
        }
        // SAFETY: `raw` was just opened and nothing else owns it.
        let file = fs::File::from(unsafe { OwnedFd::from_raw_fd(raw) });
        let meta = file.metadata().map_err(|e| with_path(&e, format!("{}: cannot stat", path.display())))?;
        if !meta.file_type().is_file() {
            return Err(refusal(
                io::ErrorKind::InvalidInput,
                None,
                format!(
                    "{} is not a regular file, as control files are; cotenant never {verb}s it",
                    path.display()
                ),
            ));
        }
        if meta.nlink() > 1 {
            return Err(refusal(
                io::ErrorKind::InvalidInput,
                None,
                format!(
                    "{} has {} hard links, a control file has one; cotenant never {verb}s it",
                    path.display(),
                    meta.nlink()
                ),
            ));
        }
        Ok(file)
    }
}

/// Fails unless `dir` is on a cgroup file system (v1 or v2) and not a symbolic link itself.
#[allow(dead_code)] // for callers that check a directory before they make anything in it
pub fn ensure_cgroupfs(dir: &Path) -> io::Result<()> {
    ControlDir::open(dir).map(drop)
}

/// Writes `value` to the control file `name` of the cgroup directory `dir`, with every check of
/// this module ([`ControlDir::open`], then [`ControlDir::write`]). `name` is one path
/// component, e.g. `cpu.max`; the file must exist.
pub fn write_control(dir: &Path, name: &str, value: &str) -> io::Result<()> {
    ControlDir::open(dir)?.write(name, value)
}

/// The kernel's error number behind an error of this module (or any plain OS error): `None`
/// for refusals of this module's own, such as a directory on the wrong file system.
pub fn os_error(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| e.get_ref()?.downcast_ref::<PathError>()?.errno)
}

/// An error of this module: the whole message, naming the path, and the error number behind
/// it, if the kernel gave one.
#[derive(Debug)]
struct PathError {
    message: String,
    errno: Option<i32>,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PathError {}

/// An error with this message, kind and error number.
fn refusal(kind: io::ErrorKind, errno: Option<i32>, message: String) -> io::Error {
    io::Error::new(kind, PathError { message, errno })
}

/// `e` behind a message naming the path (`"<what>: <e>"`), its kind and error number kept.
fn with_path(e: &io::Error, what: String) -> io::Error {
    refusal(e.kind(), os_error(e), format!("{what}: {e}"))
}

/// Explains a failed open of `dir` (opened as `plain`, without a trailing slash).
/// `O_DIRECTORY | O_NOFOLLOW` on a symbolic link fails with `ENOTDIR` (the kernel checks for a
/// directory first) or `ELOOP`: `lstat` tells, and a link is reported as `ELOOP` either way.
fn dir_open_error(dir: &Path, plain: &Path, e: io::Error) -> io::Error {
    let errno = e.raw_os_error();
    let is_link = || fs::symlink_metadata(plain).is_ok_and(|m| m.file_type().is_symlink());
    if matches!(errno, Some(libc::ELOOP | libc::ENOTDIR)) && is_link() {
        return refusal(
            io::Error::from_raw_os_error(libc::ELOOP).kind(),
            Some(libc::ELOOP),
            format!(
                "{} is a symbolic link; cotenant never follows one to a cgroup (give the directory \
                 it points to)",
                dir.display()
            ),
        );
    }
    match errno {
        Some(libc::ENOENT) => refusal(e.kind(), errno, format!("{} does not exist", dir.display())),
        Some(libc::ENOTDIR) => refusal(e.kind(), errno, format!("{} is not a directory", dir.display())),
        _ => with_path(&e, format!("{}: cannot open", dir.display())),
    }
}

/// `bytes` as a C string; a NUL byte in them is an error naming `path`.
fn c_string(bytes: &[u8], path: &Path) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        refusal(io::ErrorKind::InvalidInput, None, format!("{:?}: a path with a NUL byte", path.display()))
    })
}

/// The `statfs` type of the file system `fd` is on.
fn fs_type(fd: &OwnedFd) -> io::Result<u32> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fd` is open and `st` has room for a `statfs`, which a return of 0 fills.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: filled by the successful fstatfs above.
    let st = unsafe { st.assume_init() };
    // The magics are 32 bits; `f_type`'s width and sign differ between architectures.
    Ok(st.f_type as u32)
}

/// The name of a file system cotenant may be pointed at by mistake, for messages.
fn fs_name(magic: u32) -> Option<&'static str> {
    Some(match magic {
        TMPFS_MAGIC => "tmpfs",
        0x8584_58f6 => "ramfs",
        0xef53 => "ext2/3/4",
        0x5846_5342 => "xfs",
        0x9123_683e => "btrfs",
        0x794c_7630 => "overlayfs",
        0x9fa0 => "procfs",
        0x6265_6572 => "sysfs",
        0x6969 => "nfs",
        0x0102_1997 => "9p",
        _ => return None,
    })
}

/// Private directories for tests that write fixtures.
#[cfg(test)]
pub(crate) mod testing {
    use std::{
        fs, io,
        os::unix::fs::DirBuilderExt,
        path::{Path, PathBuf},
    };

    /// A directory made fresh (mode 0700, a random name that must not exist yet, so another
    /// user cannot have made it first), removed with everything in it when dropped.
    pub(crate) struct PrivateDir(pub(crate) PathBuf);

    impl PrivateDir {
        /// A new directory in `parent`, its name starting with `label`.
        pub(crate) fn new_in(parent: &Path, label: &str) -> PrivateDir {
            use std::hash::{BuildHasher, Hasher};
            for _ in 0..16 {
                // Each RandomState has fresh random keys: an unpredictable number.
                let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
                let dir = parent.join(format!("cotenant-{label}-{}-{random:016x}", std::process::id()));
                match fs::DirBuilder::new().mode(0o700).create(&dir) {
                    Ok(()) => return PrivateDir(dir),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => panic!("cannot create {}: {e}", dir.display()),
                }
            }
            panic!("no free name for a private directory in {}", parent.display());
        }

        /// A new directory in the system's temporary directory.
        pub(crate) fn new(label: &str) -> PrivateDir {
            PrivateDir::new_in(&std::env::temp_dir(), label)
        }
    }

    impl Drop for PrivateDir {
        fn drop(&mut self) {
            if let Err(e) = fs::remove_dir_all(&self.0) {
                eprintln!("cannot remove {}: {e}", self.0.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::PrivateDir;
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_symlinked_control_file_is_refused_and_its_target_untouched() {
        let tmp = PrivateDir::new("cgroupfs-test");
        let cg = tmp.0.join("cg");
        fs::create_dir(&cg).unwrap();
        let target = tmp.0.join("pid_max");
        fs::write(&target, "4194304\n").unwrap();
        symlink(&target, cg.join("cpu.cfs_quota_us")).unwrap();
        fs::write(cg.join("cpu.cfs_period_us"), "100000\n").unwrap();

        // Even where the file-system check is skipped (a fixture), the link is refused.
        let dir = ControlDir::open_with(&cg, FileSystems::FixtureTree).unwrap();
        let e = dir.write("cpu.cfs_quota_us", "50000").unwrap_err();
        assert_eq!(os_error(&e), Some(libc::ELOOP), "{e}");
        let expected = format!(
            "{} is a symbolic link; cotenant never writes through one",
            cg.join("cpu.cfs_quota_us").display()
        );
        assert_eq!(e.to_string(), expected);
        let e = dir.read("cpu.cfs_quota_us").unwrap_err();
        assert_eq!(os_error(&e), Some(libc::ELOOP), "{e}");
        // A real cgroup write refuses it too (here, for the file system first).
        assert!(write_control(&cg, "cpu.cfs_quota_us", "50000").is_err());
        assert_eq!(fs::read_to_string(&target).unwrap(), "4194304\n", "the link's target was written");

        // The same directory's plain file is written, whole, by one write (no old tail).
        dir.write("cpu.cfs_period_us", "5000").unwrap();
        assert_eq!(dir.read("cpu.cfs_period_us").unwrap(), "5000");
    }

    #[test]
    fn a_directory_on_tmpfs_is_refused() {
        const TEST: &str = "a_directory_on_tmpfs_is_refused";
        let shm = Path::new("/dev/shm");
        match ControlDir::open_with(shm, FileSystems::FixtureTree).and_then(|d| fs_type(&d.fd)) {
            Ok(TMPFS_MAGIC) => {}
            Ok(other) => {
                return eprintln!("{TEST}: SKIPPED: {} is not tmpfs (statfs type {other:#x})", shm.display())
            }
            Err(e) => return eprintln!("{TEST}: SKIPPED: {e}"),
        }
        let tmp = PrivateDir::new_in(shm, "cgroupfs-test");
        fs::write(tmp.0.join("cpu.max"), "max 100000\n").unwrap();
        let expected = format!(
            "{} is not on a cgroup file system (statfs type 0x1021994, tmpfs); cotenant writes only \
             cgroup control files",
            tmp.0.display()
        );
        let e = ensure_cgroupfs(&tmp.0).unwrap_err();
        assert_eq!(e.to_string(), expected);
        assert_eq!((e.kind(), os_error(&e)), (io::ErrorKind::InvalidInput, None));
        let e = write_control(&tmp.0, "cpu.max", "50000 100000").unwrap_err();
        assert_eq!(e.to_string(), expected);
        assert_eq!(fs::read_to_string(tmp.0.join("cpu.max")).unwrap(), "max 100000\n");
    }

    #[test]
    fn a_directory_that_is_a_symlink_is_refused() {
        let tmp = PrivateDir::new("cgroupfs-test");
        let real = tmp.0.join("real");
        fs::create_dir(&real).unwrap();
        fs::write(real.join("cpu.max"), "max 100000\n").unwrap();
        let link = tmp.0.join("link");
        symlink(&real, &link).unwrap();
        // A trailing slash would make the kernel follow the link: it is dropped.
        let slash = PathBuf::from(format!("{}/", link.display()));
        for (path, file_systems) in [
            (&link, FileSystems::CgroupOnly),
            (&link, FileSystems::FixtureTree),
            (&slash, FileSystems::FixtureTree),
        ] {
            let e = ControlDir::open_with(path, file_systems).unwrap_err();
            assert_eq!(os_error(&e), Some(libc::ELOOP), "{file_systems:?}: {e}");
            assert!(e.to_string().starts_with(&format!("{} is a symbolic link;", path.display())), "{e}");
        }
        assert!(write_control(&link, "cpu.max", "50000 100000").is_err());
        assert_eq!(fs::read_to_string(real.join("cpu.max")).unwrap(), "max 100000\n");
        // The refusal is the link's: the directory it points to opens as a fixture.
        assert!(ControlDir::open_with(&real, FileSystems::FixtureTree).is_ok());
    }

    #[test]
    fn names_must_be_single_existing_regular_files() {
        let tmp = PrivateDir::new("cgroupfs-test");
        fs::write(tmp.0.join("cpu.max"), "max 100000\n").unwrap();
        fs::create_dir(tmp.0.join("sub")).unwrap();
        let dir = ControlDir::open_with(&tmp.0, FileSystems::FixtureTree).unwrap();
        for bad in ["", ".", "..", "../cpu.max", "sub/cpu.max", "/etc/passwd"] {
            let e = dir.write(bad, "1").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}: {e}");
            assert!(e.to_string().contains("is not the name of a control file"), "{bad:?}: {e}");
        }
        assert_eq!(dir.write("cpu\0max", "1").unwrap_err().kind(), io::ErrorKind::InvalidInput);
        // Never created: a missing file keeps its error number.
        let e = dir.write("cpu.weight", "100").unwrap_err();
        assert_eq!((e.kind(), os_error(&e)), (io::ErrorKind::NotFound, Some(libc::ENOENT)), "{e}");
        assert!(
            e.to_string().starts_with(&format!("{}: cannot write", tmp.0.join("cpu.weight").display())),
            "{e}"
        );
        assert!(!tmp.0.join("cpu.weight").exists());
        // A directory, or a file with a second name, is not a control file.
        assert!(dir.read("sub").is_err());
        fs::hard_link(tmp.0.join("cpu.max"), tmp.0.join("other")).unwrap();
        let e = dir.write("cpu.max", "1 100000").unwrap_err();
        assert!(e.to_string().contains("has 2 hard links"), "{e}");
        assert_eq!(fs::read_to_string(tmp.0.join("other")).unwrap(), "max 100000\n");
    }

    #[test]
    fn a_missing_directory_or_a_file_is_named() {
        let tmp = PrivateDir::new("cgroupfs-test");
        let missing = tmp.0.join("missing");
        let e = ControlDir::open_with(&missing, FileSystems::FixtureTree).unwrap_err();
        assert_eq!((e.kind(), os_error(&e)), (io::ErrorKind::NotFound, Some(libc::ENOENT)), "{e}");
        assert_eq!(e.to_string(), format!("{} does not exist", missing.display()));
        let file = tmp.0.join("file");
        fs::write(&file, "").unwrap();
        let e = ControlDir::open_with(&file, FileSystems::FixtureTree).unwrap_err();
        assert_eq!(os_error(&e), Some(libc::ENOTDIR), "{e}");
        assert_eq!(e.to_string(), format!("{} is not a directory", file.display()));
    }

    #[test]
    fn a_real_cgroup_directory_passes() {
        const TEST: &str = "a_real_cgroup_directory_passes";
        let mounts = fs::read_to_string("/proc/self/mountinfo")
            .ok()
            .and_then(|text| cotenant::internal::procfs::mountinfo::parse_cgroup_mounts(&text).ok())
            .unwrap_or_default();
        // Octal escapes (`\040`) would need decoding: such a mount is skipped.
        let Some(mount) = mounts.iter().find(|m| !m.mount_point.contains('\\')) else {
            return eprintln!("{TEST}: SKIPPED: no cgroup file system mounted");
        };
        let dir = Path::new(&mount.mount_point);
        // Read-only: the check, and one read through the directory's descriptor.
        ensure_cgroupfs(dir).unwrap_or_else(|e| panic!("{e}"));
        let procs = ControlDir::open(dir).and_then(|d| d.read("cgroup.procs"));
        assert!(procs.is_ok(), "{}: {procs:?}", dir.display());
    }
}

//! `/proc/<pid>/mountinfo`: where each cgroup hierarchy is mounted, and which of its cgroups is
//! the mount's root.
//!
//! A line is `id parent major:minor root mount-point options [optional...] - fstype source
//! super-options` (proc(5)). For cgroups the `root` field matters: inside a container without a
//! cgroup namespace the hierarchy is mounted from the container's own cgroup
//! (`/docker/abc`), so a process's cgroup path must be translated relative to it.
//! Paths escape space, tab, newline and backslash as octal (`\040`).

use super::ParseError;

const FORMAT: &str = "/proc/<pid>/mountinfo";

/// One mount of a cgroup file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// The cgroup, relative to the hierarchy root, mounted at `mount_point`.
    pub root: String,
    /// Where it is mounted.
    pub mount_point: String,
    /// Whether the file system is `cgroup2`.
    pub is_v2: bool,
    /// For v1, the super options, which name the bound controllers (`rw,cpu,cpuacct`).
    pub super_options: Vec<String>,
}

impl CgroupMount {
    /// Whether v1 controller `name` is bound to this mount.
    pub fn has_controller(&self, name: &str) -> bool {
        !self.is_v2 && self.super_options.iter().any(|o| o == name)
    }

    /// The directory of cgroup `path` (as in `/proc/<pid>/cgroup`) below this mount, or `None`
    /// when the cgroup is not visible through it (not below the mount's root).
    pub fn dir_of(&self, path: &str) -> Option<String> {
        let rest = if self.root == "/" {
            path
        } else {
            let rest = path.strip_prefix(self.root.as_str())?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None; // "/docker/abc2" is not below "/docker/abc"
            }
            rest
        };
        if rest.split('/').any(|c| c == "..") {
            return None; // a cgroup outside the reader's namespace
        }
        let rest = rest.trim_end_matches('/');
        Some(format!("{}{}", self.mount_point.trim_end_matches('/'), rest))
    }
}

/// Parses the whole file and returns its cgroup mounts (v1 and v2), in file order. Lines of
/// other file systems are checked for shape only.
pub fn parse_cgroup_mounts(text: &str) -> Result<Vec<CgroupMount>, ParseError> {
    let mut mounts = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|&f| f == "-") else {
            return Err(ParseError::new(FORMAT, "no ' - ' separator", line));
        };
        // Six fields before the separator, then fstype, source and super options.
        if sep < 6 || fields.len() < sep + 4 {
            return Err(ParseError::new(FORMAT, "too few fields", line));
        }
        let fstype = fields[sep + 1];
        let is_v2 = match fstype {
            "cgroup2" => true,
            "cgroup" => false,
            _ => continue,
        };
        let super_options = fields[sep + 3].split(',').map(str::to_owned).collect();
        let (root, mount_point) = (unescape(fields[3]), unescape(fields[4]));
        // A path with a NUL (`\000`) cannot be opened: said here, where the error names this file.
        if root.contains('\0') || mount_point.contains('\0') {
            return Err(ParseError::new(FORMAT, "path contains a NUL byte", line));
        }
        mounts.push(CgroupMount { root, mount_point, is_v2, super_options });
    }
    Ok(mounts)
}

/// Undoes the kernel's octal escaping of `' '`, `'\t'`, `'\n'` and `'\\'` in paths.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') as u32 * 64 + (b[i + 2] - b'0') as u32 * 8 + (b[i + 3] - b'0') as u32;
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime shared:5 - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_v1_and_v2_mounts() {
        let m = parse_cgroup_mounts(HYBRID).unwrap();
        assert_eq!(m.len(), 4);
        assert!(m[0].has_controller("cpu") && !m[0].has_controller("cpuacct"));
        assert!(m[2].has_controller("cpuset"), "optional fields are skipped");
        assert!(m[3].is_v2 && !m[3].has_controller("cpu"));
    }

    #[test]
    fn translates_paths_below_a_namespaced_root() {
        let m = CgroupMount {
            root: "/docker/abc".into(),
            mount_point: "/sys/fs/cgroup/cpu".into(),
            is_v2: false,
            super_options: vec!["cpu".into()],
        };
        assert_eq!(m.dir_of("/docker/abc").as_deref(), Some("/sys/fs/cgroup/cpu"));
        assert_eq!(m.dir_of("/docker/abc/x/").as_deref(), Some("/sys/fs/cgroup/cpu/x"));
        assert_eq!(m.dir_of("/docker/abc2"), None);
        assert_eq!(m.dir_of("/other"), None);
        let root = CgroupMount { root: "/".into(), ..m };
        assert_eq!(root.dir_of("/").as_deref(), Some("/sys/fs/cgroup/cpu"));
        assert_eq!(root.dir_of("/../x"), None);
    }

    #[test]
    fn unescapes_octal() {
        assert_eq!(unescape(r"/a\040b\\c"), r"/a b\\c");
        assert_eq!(unescape(r"/a\134b"), r"/a\b");
        assert_eq!(unescape(r"\777"), r"\777");
        assert_eq!(unescape("\\04"), "\\04");
    }

    #[test]
    fn rejects_lines_without_separator() {
        let err = parse_cgroup_mounts("1 2 3:4 / /x rw cgroup cgroup rw\n").unwrap_err();
        assert!(err.to_string().contains("separator"), "{err}");
        let cut = parse_cgroup_mounts("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup\n").unwrap_err();
        assert!(cut.to_string().contains("too few fields"), "{cut}");
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let text = String::from_utf8_lossy(&bytes);
            if let Ok(mounts) = parse_cgroup_mounts(&text) {
                for m in mounts { let _ = m.dir_of(&text); }
            }
        }

        #[test]
        fn never_panics_on_line_shaped_input(root in "[/a-z\\\\0-9 ]{0,12}", fs in "cgroup2?|tmpfs") {
            let _ = parse_cgroup_mounts(&format!("1 2 0:1 {root} /m rw - {fs} x rw,cpu\n"));
        }
    }
}

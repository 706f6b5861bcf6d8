//! `/proc/<pid>/cgroup`: which cgroup a process belongs to in each hierarchy.
//!
//! Each line is `hierarchy-id:controllers:path`. A cgroup v1 hierarchy lists its controllers
//! (`4:cpu,cpuacct:/docker/abc`, or `name=systemd` for a named one); the cgroup v2 hierarchy is
//! the single line with id `0` and no controllers (`0::/user.slice`). The path is relative to the
//! hierarchy's root as seen from the reader's cgroup namespace (see cgroups(7)).

use super::ParseError;

const FORMAT: &str = "/proc/<pid>/cgroup";

/// One line of `/proc/<pid>/cgroup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The hierarchy id; `0` for cgroup v2.
    pub hierarchy_id: u32,
    /// The v1 controllers bound to the hierarchy (`["cpu", "cpuacct"]`); empty for v2.
    pub controllers: Vec<String>,
    /// The cgroup path, starting with `/`.
    pub path: String,
}

impl Membership {
    /// Whether this is the cgroup v2 (unified) line.
    pub fn is_v2(&self) -> bool {
        self.hierarchy_id == 0 && self.controllers.is_empty()
    }

    /// Whether v1 controller `name` (e.g. `"cpu"`) is bound to this hierarchy.
    pub fn has_controller(&self, name: &str) -> bool {
        self.controllers.iter().any(|c| c == name)
    }
}

/// Parses the whole file. Blank lines are skipped.
pub fn parse(text: &str) -> Result<Vec<Membership>, ParseError> {
    text.lines().filter(|l| !l.trim().is_empty()).map(parse_line).collect()
}

fn parse_line(line: &str) -> Result<Membership, ParseError> {
    // The path may itself contain ':', so split off the first two fields only.
    let mut fields = line.splitn(3, ':');
    let (Some(id), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
        return Err(ParseError::new(FORMAT, "expected hierarchy-id:controllers:path", line));
    };
    let hierarchy_id = id
        .parse::<u32>()
        .map_err(|_| ParseError::new(FORMAT, format!("hierarchy id {id:?} is not a number"), line))?;
    if !path.starts_with('/') {
        return Err(ParseError::new(FORMAT, "cgroup path does not start with '/'", line));
    }
    // A cgroup name cannot hold a NUL, and a path with one cannot be opened: said here, where
    // the error names this file, not later on a path built from it.
    if path.contains('\0') {
        return Err(ParseError::new(FORMAT, "cgroup path contains a NUL byte", line));
    }
    let controllers = controllers.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect();
    Ok(Membership { hierarchy_id, controllers, path: path.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_a_hybrid_host() {
        let text = "9:name=systemd:/\n4:cpu,cpuacct:/docker/abc\n3:cpuset:/\n0::/init.scope\n";
        let m = parse(text).unwrap();
        assert_eq!(m.len(), 4);
        assert!(m[1].has_controller("cpu") && m[1].has_controller("cpuacct"));
        assert!(!m[1].has_controller("cpuset"));
        assert_eq!(m[1].path, "/docker/abc");
        assert!(m[3].is_v2());
        assert_eq!(m[3].path, "/init.scope");
    }

    #[test]
    fn keeps_colons_in_paths() {
        let m = parse("0::/a:b\n").unwrap();
        assert_eq!(m[0].path, "/a:b");
    }

    #[test]
    fn rejects_malformed_lines() {
        assert!(parse("x::/\n").is_err());
        assert!(parse("0:/\n").is_err());
        assert!(parse("0::relative\n").unwrap_err().to_string().contains("relative"));
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&String::from_utf8_lossy(&bytes));
        }
    }
}

//! The Go worker of the `quota` and `go-neighbours` experiments (`lab-probes/goworker`),
//! embedded in the binary with the repository's Go package (`go/`, listed by `build.rs`) and
//! built with the host's Go toolchain on first use, into a cache directory under the system
//! temp directory. Go missing is not an error: the experiments report "not installed".

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const MAIN_GO: &str = include_str!("../../lab-probes/goworker/main.go");
const GO_MOD: &str = include_str!("../../lab-probes/goworker/go.mod");
// GO_PACKAGE: the files of `go/`, which the worker's go.mod replaces with ./cotenant-go.
include!(concat!(env!("OUT_DIR"), "/go_package.rs"));
/// Where the worker's go.mod expects the package.
const GO_PACKAGE_DIR: &str = "cotenant-go";

/// The Go worker, built on first use, or why it is not available.
#[derive(Debug, Clone)]
pub enum GoWorker {
    /// The built binary.
    Ready(PathBuf),
    /// No `go` on the PATH or in /usr/local/go/bin.
    NotInstalled,
    /// `go build` failed: its first lines.
    BuildFailed(String),
}

/// The first candidate for which `exists` holds.
pub fn pick_go(candidates: &[PathBuf], exists: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    candidates.iter().find(|c| exists(c)).cloned()
}

/// `go` on the PATH, then the usual install location.
fn go_binary() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).map(|d| d.join("go")).collect();
    candidates.push(PathBuf::from("/usr/local/go/bin/go"));
    pick_go(&candidates, |p| p.is_file())
}

/// Writes `text` to `path` unless it already holds exactly that.
fn write_if_changed(path: &Path, text: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    std::fs::write(path, text)
}

/// Writes the worker and the package into `dir`, removing package files that are no longer
/// embedded (a cache written by an older cotenant).
fn write_sources(dir: &Path) -> std::io::Result<()> {
    let package = dir.join(GO_PACKAGE_DIR);
    std::fs::create_dir_all(&package)?;
    write_if_changed(&dir.join("main.go"), MAIN_GO)?;
    write_if_changed(&dir.join("go.mod"), GO_MOD)?;
    for entry in std::fs::read_dir(&package)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !GO_PACKAGE.iter().any(|(embedded, _)| *embedded == name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    for (name, text) in GO_PACKAGE {
        write_if_changed(&package.join(name), text)?;
    }
    Ok(())
}

fn build() -> GoWorker {
    let Some(go) = go_binary() else { return GoWorker::NotInstalled };
    if GO_PACKAGE.is_empty() {
        return GoWorker::BuildFailed("this cotenant was built without the repository's go/ package".into());
    }
    // SAFETY: getuid has no preconditions.
    let dir = std::env::temp_dir().join(format!("cotenant-lab-go-{}", unsafe { libc::getuid() }));
    if let Err(e) = write_sources(&dir) {
        return GoWorker::BuildFailed(format!("cannot write {}: {e}", dir.display()));
    }
    let binary = dir.join("goworker");
    let mut command = Command::new(&go);
    command.args(["build", "-o"]).arg(&binary).arg(".").current_dir(&dir);
    // Never reach for the network (toolchain downloads), and keep a build cache even where
    // HOME is unset (CI containers).
    command.env("GOTOOLCHAIN", "local").env("GOFLAGS", "-mod=mod").env("GOPROXY", "off");
    if std::env::var_os("GOCACHE").is_none() && std::env::var_os("HOME").is_none() {
        command.env("GOCACHE", dir.join("cache"));
    }
    match command.output() {
        Ok(out) if out.status.success() => GoWorker::Ready(binary),
        Ok(out) => {
            let err = String::from_utf8_lossy(&out.stderr);
            GoWorker::BuildFailed(err.lines().take(3).collect::<Vec<_>>().join(" / "))
        }
        Err(e) => GoWorker::BuildFailed(format!("running {}: {e}", go.display())),
    }
}

/// The Go worker, built once per lab run.
pub fn go_worker() -> GoWorker {
    static BUILT: OnceLock<GoWorker> = OnceLock::new();
    BUILT.get_or_init(build).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_package_is_embedded_without_its_tests() {
        let names: Vec<&str> = GO_PACKAGE.iter().map(|(name, _)| *name).collect();
        assert!(names.contains(&"go.mod") && names.contains(&"controller.go"), "{names:?}");
        assert!(names.iter().all(|n| *n == "go.mod" || (n.ends_with(".go") && !n.ends_with("_test.go"))));
        let module = GO_PACKAGE.iter().find(|(name, _)| *name == "go.mod").map(|(_, text)| *text);
        assert!(module.is_some_and(|m| m.starts_with("module github.com/cotenant/cotenant/go")));
        assert!(GO_MOD.contains("replace github.com/cotenant/cotenant/go => ./cotenant-go"));
    }

    #[test]
    fn stale_package_files_are_removed_and_the_rest_written() {
        let dir = std::env::temp_dir().join(format!("cotenant-test-gobuild-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(GO_PACKAGE_DIR)).unwrap();
        std::fs::write(dir.join(GO_PACKAGE_DIR).join("gone.go"), "package cotenant").unwrap();
        write_sources(&dir).unwrap();
        assert!(!dir.join(GO_PACKAGE_DIR).join("gone.go").exists());
        assert_eq!(std::fs::read_to_string(dir.join(GO_PACKAGE_DIR).join("controller.go")).unwrap(), {
            GO_PACKAGE.iter().find(|(n, _)| *n == "controller.go").unwrap().1
        });
        assert_eq!(std::fs::read_to_string(dir.join("main.go")).unwrap(), MAIN_GO);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_first_existing_go_wins() {
        let c = [PathBuf::from("/a/go"), PathBuf::from("/b/go"), PathBuf::from("/c/go")];
        assert_eq!(pick_go(&c, |p| p.starts_with("/b") || p.starts_with("/c")), Some(PathBuf::from("/b/go")));
        assert_eq!(pick_go(&c, |_| false), None);
    }
}

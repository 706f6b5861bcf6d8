//! The Go worker of the `quota` experiment (`lab-probes/goworker`), embedded in the binary and
//! built with the host's Go toolchain on first use, into a cache directory under the system
//! temp directory. Go missing is not an error: the experiment reports "not installed".

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const MAIN_GO: &str = include_str!("../../lab-probes/goworker/main.go");
const GO_MOD: &str = include_str!("../../lab-probes/goworker/go.mod");

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

fn build() -> GoWorker {
    let Some(go) = go_binary() else { return GoWorker::NotInstalled };
    // SAFETY: getuid has no preconditions.
    let dir = std::env::temp_dir().join(format!("cotenant-lab-go-{}", unsafe { libc::getuid() }));
    let prepared = std::fs::create_dir_all(&dir)
        .and_then(|()| write_if_changed(&dir.join("main.go"), MAIN_GO))
        .and_then(|()| write_if_changed(&dir.join("go.mod"), GO_MOD));
    if let Err(e) = prepared {
        return GoWorker::BuildFailed(format!("cannot write {}: {e}", dir.display()));
    }
    let binary = dir.join("goworker");
    let mut command = Command::new(&go);
    command.args(["build", "-o"]).arg(&binary).arg(".").current_dir(&dir);
    // Never reach for the network (toolchain downloads), and keep a build cache even where
    // HOME is unset (CI containers).
    command.env("GOTOOLCHAIN", "local").env("GOFLAGS", "-mod=mod");
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
    fn the_first_existing_go_wins() {
        let c = [PathBuf::from("/a/go"), PathBuf::from("/b/go"), PathBuf::from("/c/go")];
        assert_eq!(pick_go(&c, |p| p.starts_with("/b") || p.starts_with("/c")), Some(PathBuf::from("/b/go")));
        assert_eq!(pick_go(&c, |_| false), None);
    }
}

//! The Go worker of the `quota` and `go-neighbours` experiments (`lab-probes/goworker`),
//! embedded in the binary with the repository's Go module (`go/`: its `go.mod` and the
//! packages in its subfolders, `cotenant/` and `cotenant/autostart/`, listed by `build.rs`
//! with `/`-separated paths) and built with the host's Go toolchain on first use. Go missing
//! is not an error: the experiments report "not installed".
//!
//! The lab runs the worker as root, so it is built in a folder only the invoking user can
//! write: `<cache>/cotenant/lab-go`, where `<cache>` is `$XDG_CACHE_HOME` or `~/.cache`
//! (checked, and made where missing, by [`private_dir::cache_dir`]; a fresh `mkdtemp` folder
//! without either), kept between runs so that unchanged sources are not rebuilt. Every source
//! is written with [`private_dir::write_file`], which replaces a symbolic link rather than
//! writing through it. Go's own build cache and settings stay where Go keeps them where those
//! are safe too, and move into the build folder where not ([`confine_go`]). `go build` is a
//! child of the lab like any other (`runner::run_bounded_output`): killed on a signal, and
//! after [`BUILD_DEADLINE`], which makes the build fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::Context as _;

use super::runner::{run_bounded_output, BUILD_DEADLINE};
use cotenant_ops::private_dir;

const MAIN_GO: &str = include_str!("../lab-probes/goworker/main.go");
const GO_MOD: &str = include_str!("../lab-probes/goworker/go.mod");
// GO_PACKAGE: the files of the module `go/` (paths relative to it, `/`-separated), which the
// worker's go.mod replaces with ./cotenant-go.
include!(concat!(env!("OUT_DIR"), "/go_package.rs"));
/// Where the worker's go.mod expects the module.
const GO_PACKAGE_DIR: &str = "cotenant-go";
/// The build folder's name in the user's cache directory (see [`private_dir::cache_dir`]).
const BUILD_DIR: &str = "lab-go";
/// The mode of the sources written (their folder is private; the mode is go's usual).
const SOURCE_MODE: u32 = 0o644;

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

/// Writes `text` to `path` unless it already is a plain file holding exactly that (so that
/// go sees unchanged sources and reuses its build). Anything else there, a symbolic link
/// included, is replaced, never written through.
fn write_if_changed(path: &Path, text: &str) -> anyhow::Result<()> {
    let is_plain_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
    if is_plain_file && std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    private_dir::write_file(path, text.as_bytes(), SOURCE_MODE)
}

/// Writes the worker and the module into `dir` (a private folder: see the module doc),
/// removing what is no longer embedded (a cache written by an older cotenant, whose package
/// files sat at the top of the module folder).
fn write_sources(dir: &Path) -> anyhow::Result<()> {
    let package = dir.join(GO_PACKAGE_DIR);
    private_dir::ensure_private(&package)?;
    write_if_changed(&dir.join("main.go"), MAIN_GO)?;
    write_if_changed(&dir.join("go.mod"), GO_MOD)?;
    remove_stale(&package, "")?;
    for (name, text) in GO_PACKAGE {
        write_if_changed(&module_file(&package, name)?, text)?;
    }
    Ok(())
}

/// Whether `rel` (a `/`-separated path in the module folder) is an embedded file.
fn embedded_file(rel: &str) -> bool {
    GO_PACKAGE.iter().any(|(name, _)| *name == rel)
}

/// Whether `rel` is a folder holding an embedded file.
fn embedded_folder(rel: &str) -> bool {
    GO_PACKAGE.iter().any(|(name, _)| name.strip_prefix(rel).is_some_and(|rest| rest.starts_with('/')))
}

/// Removes from `folder` (the module folder's `prefix`) everything that is neither an
/// embedded file nor a folder holding one. Entries are typed without following symbolic
/// links, so a planted link is removed, never followed, and a real folder is removed with
/// its contents (`remove_dir_all` does not follow links either).
fn remove_stale(folder: &Path, prefix: &str) -> anyhow::Result<()> {
    let entries = std::fs::read_dir(folder).with_context(|| format!("listing {}", folder.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", folder.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        let path = entry.path();
        let is_dir = entry.file_type().with_context(|| format!("checking {}", path.display()))?.is_dir();
        if is_dir && embedded_folder(&rel) {
            remove_stale(&path, &rel)?;
        } else if is_dir {
            std::fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        } else if !embedded_file(&rel) {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// The path of the embedded file `name` (`/`-separated, relative) under the module folder,
/// making its folders on the way with the same checks as the module folder (private, real
/// folders: a planted link is refused, not written through).
fn module_file(module: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let parts: Vec<&str> = name.split('/').collect();
    let plain = parts.iter().all(|part| !part.is_empty() && *part != "." && *part != "..");
    let Some((file, folders)) = parts.split_last().filter(|_| plain) else {
        anyhow::bail!("the embedded Go file {name:?} is not a plain relative path");
    };
    let mut path = module.to_path_buf();
    for folder in folders {
        path.push(folder);
        private_dir::ensure_private(&path)?;
    }
    path.push(file);
    Ok(path)
}

fn build() -> GoWorker {
    let Some(go) = go_binary() else { return GoWorker::NotInstalled };
    if GO_PACKAGE.is_empty() {
        return GoWorker::BuildFailed("this cotenant was built without the repository's go/ package".into());
    }
    let dir = match private_dir::cache_dir(BUILD_DIR) {
        Ok(dir) => dir,
        Err(e) => return GoWorker::BuildFailed(format!("no private folder to build in: {e:#}")),
    };
    if let Err(e) = write_sources(&dir) {
        return GoWorker::BuildFailed(format!("cannot write the sources in {}: {e:#}", dir.display()));
    }
    let binary = dir.join("goworker");
    let mut command = Command::new(&go);
    command.args(["build", "-o"]).arg(&binary).arg(".").current_dir(&dir);
    // Never reach for the network (module or toolchain downloads).
    command.env("GOFLAGS", "-mod=mod").env("GOPROXY", "off");
    confine_go(&mut command, &dir);
    match run_bounded_output(&mut command, BUILD_DEADLINE) {
        Ok(out) if out.status.success() => GoWorker::Ready(binary),
        Ok(out) => GoWorker::BuildFailed(out.stderr.lines().take(3).collect::<Vec<_>>().join(" / ")),
        // Not started, or killed at the deadline: the error names go and the deadline.
        Err(e) => GoWorker::BuildFailed(format!("{e:#}")),
    }
}

/// Keeps a `go` command from using anything another user could change. Go keeps its build
/// cache, GOPATH and `go env -w` settings under `$HOME` and the user's cache directory by
/// default (`<cache>/go-build`, `~/go`, `~/.config/go/env`): fine where both pass
/// [`private_dir`]'s checks, as they do for root's own `$HOME`. Where either does not
/// (another user's `$HOME` kept by `sudo -E`, a CI container's), or neither is set, the build
/// cache and GOPATH move into `dir` (a private folder) and the settings file is not read,
/// except for those the operator set explicitly in the environment. Also keeps the local
/// toolchain (no download of another).
pub(super) fn confine_go(command: &mut Command, dir: &Path) {
    command.env("GOTOOLCHAIN", "local");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let home_is_safe = home.as_deref().is_none_or(private_dir::is_trusted);
    let cache_is_safe = private_dir::user_cache().is_some_and(|cache| private_dir::is_trusted(&cache));
    if home_is_safe && cache_is_safe {
        return;
    }
    for (var, value) in [("GOCACHE", dir.join("gocache")), ("GOPATH", dir.join("gopath"))] {
        if std::env::var_os(var).is_none() {
            command.env(var, value);
        }
    }
    if std::env::var_os("GOENV").is_none() {
        command.env("GOENV", "off");
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

    /// The embedded text of `name`, a `/`-separated path in the module.
    fn embedded(name: &str) -> &'static str {
        GO_PACKAGE
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| *text)
            .unwrap_or_else(|| panic!("{name} is not embedded"))
    }

    #[test]
    fn the_go_module_is_embedded_without_its_tests() {
        let names: Vec<&str> = GO_PACKAGE.iter().map(|(name, _)| *name).collect();
        for name in ["go.mod", "cotenant/controller.go", "cotenant/set.go", "cotenant/autostart/autostart.go"]
        {
            assert!(names.contains(&name), "{name} is missing from {names:?}");
        }
        assert!(
            names.iter().all(|n| *n == "go.mod" || (n.ends_with(".go") && !n.ends_with("_test.go"))),
            "{names:?}"
        );
        assert!(embedded("go.mod").starts_with("module github.com/cotenant/cotenant/go\n"));
        assert!(GO_MOD.contains("replace github.com/cotenant/cotenant/go => ./cotenant-go"));
        // The import path ends in the package name: the module plus the package's folder.
        assert!(MAIN_GO.contains("\"github.com/cotenant/cotenant/go/cotenant\""));
    }

    #[test]
    fn stale_files_and_folders_are_removed_and_the_rest_written() {
        let dir = private_dir::fresh_temp("cotenant-test-gobuild").unwrap();
        let module = dir.join(GO_PACKAGE_DIR);
        private_dir::ensure_private(&module).unwrap();
        // The layout of an older cotenant (the package at the top of the module), a folder
        // nothing is embedded in, and a stale file beside embedded ones.
        std::fs::write(module.join("controller.go"), "package cotenant").unwrap();
        private_dir::ensure_private(&module.join("gone")).unwrap();
        std::fs::write(module.join("gone").join("gone.go"), "package gone").unwrap();
        private_dir::ensure_private(&module.join("cotenant")).unwrap();
        std::fs::write(module.join("cotenant").join("gone.go"), "package cotenant").unwrap();
        write_sources(&dir).unwrap();
        for stale in ["controller.go", "gone", "cotenant/gone.go"] {
            assert!(!module.join(stale).exists(), "{stale} is still there");
        }
        for (name, text) in GO_PACKAGE {
            assert_eq!(std::fs::read_to_string(module.join(name)).unwrap(), *text, "{name}");
        }
        assert_eq!(std::fs::read_to_string(dir.join("main.go")).unwrap(), MAIN_GO);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_planted_as_a_package_folder_is_removed_not_followed() {
        use std::os::unix::fs::symlink;
        let dir = private_dir::fresh_temp("cotenant-test-gobuild").unwrap();
        let outside = private_dir::fresh_temp("cotenant-test-gobuild-outside").unwrap();
        let module = dir.join(GO_PACKAGE_DIR);
        private_dir::ensure_private(&module).unwrap();
        symlink(&outside, module.join("cotenant")).unwrap();
        write_sources(&dir).unwrap();
        let meta = std::fs::symlink_metadata(module.join("cotenant")).unwrap();
        assert!(meta.file_type().is_dir(), "cotenant/ is still a link");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "written through the link");
        assert_eq!(
            std::fs::read_to_string(module.join("cotenant/controller.go")).unwrap(),
            embedded("cotenant/controller.go")
        );
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn only_plain_relative_paths_are_written() {
        let module = Path::new("/nonexistent-cotenant-module");
        for name in ["../escape.go", "a//b.go", "./a.go", "", "a/"] {
            let e = module_file(module, name).unwrap_err();
            assert!(format!("{e:#}").contains("not a plain relative path"), "{name:?}: {e:#}");
        }
        assert_eq!(module_file(module, "go.mod").unwrap(), module.join("go.mod"));
    }

    #[test]
    fn planted_symlinks_are_replaced_not_written_through() {
        use std::os::unix::fs::symlink;
        let dir = private_dir::fresh_temp("cotenant-test-gobuild").unwrap();
        let outside = private_dir::fresh_temp("cotenant-test-gobuild-outside").unwrap();
        // A link to a file that already holds the worker's source (kept as is before: go would
        // have built whatever the link came to point to), and one to a file it would overwrite.
        let same = outside.join("main.go");
        std::fs::write(&same, MAIN_GO).unwrap();
        symlink(&same, dir.join("main.go")).unwrap();
        let victim = outside.join("victim");
        std::fs::write(&victim, "root-owned data").unwrap();
        symlink(&victim, dir.join("go.mod")).unwrap();
        // And the package folder itself.
        symlink(&outside, dir.join(GO_PACKAGE_DIR)).unwrap();
        let e = write_sources(&dir).unwrap_err();
        assert!(format!("{e:#}").contains("is a symbolic link"), "{e:#}");
        assert!(!outside.join("cotenant").exists(), "the module was written through a link");

        std::fs::remove_file(dir.join(GO_PACKAGE_DIR)).unwrap();
        write_sources(&dir).unwrap();
        for (name, text) in [("main.go", MAIN_GO), ("go.mod", GO_MOD)] {
            let meta = std::fs::symlink_metadata(dir.join(name)).unwrap();
            assert!(meta.file_type().is_file(), "{name} is still a link");
            assert_eq!(std::fs::read_to_string(dir.join(name)).unwrap(), text);
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root-owned data", "written through");
        assert_eq!(std::fs::read_to_string(&same).unwrap(), MAIN_GO);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn the_first_existing_go_wins() {
        let c = [PathBuf::from("/a/go"), PathBuf::from("/b/go"), PathBuf::from("/c/go")];
        assert_eq!(pick_go(&c, |p| p.starts_with("/b") || p.starts_with("/c")), Some(PathBuf::from("/b/go")));
        assert_eq!(pick_go(&c, |_| false), None);
    }
}

//! Embeds the Go module of this repository (`go/`: its `go.mod` and every non-test `.go` file
//! of its packages, `go/cotenant/` and `go/cotenant/autostart/`) so that the lab can build its
//! Go worker with the cotenant controller on any host with a Go toolchain (`src/gobuild.rs`).
//! A list generated here rather than typed by hand, so that a file added to `go/` cannot be
//! forgotten. Names are paths relative to `go/`, `/`-separated. Where `go/` is absent (the
//! crate built on its own) the list is empty and the lab says the controller is unavailable.

use std::fmt::Write as _;
use std::path::Path;

/// Appends to `files` the `/`-separated path (under `prefix`) of every file of `dir` that the
/// worker's build needs, descending into its folders (not into symbolic links).
fn collect(dir: &Path, prefix: &str, files: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        if kind.is_dir() && name != "testdata" && !name.starts_with('.') {
            collect(&entry.path(), &rel, files);
        } else if kind.is_file()
            && (rel == "go.mod" || (name.ends_with(".go") && !name.ends_with("_test.go")))
        {
            files.push(rel);
        }
    }
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let go_dir = Path::new(&manifest).join("../../go");
    // A folder: cargo scans it all, subfolders included.
    println!("cargo:rerun-if-changed={}", go_dir.display());
    let mut files = Vec::new();
    collect(&go_dir, "", &mut files);
    files.sort();
    let mut out = String::from(
        "/// The Go module `go/`: (path relative to it, contents).\npub const GO_PACKAGE: &[(&str, &str)] = &[\n",
    );
    for name in &files {
        let path = go_dir.join(name).canonicalize().expect("a listed file exists");
        println!("cargo:rerun-if-changed={}", path.display());
        let _ = writeln!(out, "    ({name:?}, include_str!({:?})),", path.display().to_string());
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("go_package.rs");
    std::fs::write(&dest, out).expect("writing go_package.rs");
}

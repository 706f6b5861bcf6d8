//! Embeds the Go package of this repository (`go/`: its `go.mod` and every non-test `.go`
//! file) so that the lab can build its Go worker with the cotenant controller on any host
//! with a Go toolchain (`src/gobuild.rs`). A list generated here rather than typed by
//! hand, so that a file added to `go/` cannot be forgotten. Where `go/` is absent (the crate
//! built on its own) the list is empty and the lab says the controller is unavailable.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let go_dir = Path::new(&manifest).join("../../go");
    println!("cargo:rerun-if-changed={}", go_dir.display());
    let mut files: Vec<String> = match std::fs::read_dir(&go_dir) {
        Ok(entries) => entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name == "go.mod" || (name.ends_with(".go") && !name.ends_with("_test.go")))
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    let mut out = String::from(
        "/// The Go package `go/`: (file name, contents).\npub const GO_PACKAGE: &[(&str, &str)] = &[\n",
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

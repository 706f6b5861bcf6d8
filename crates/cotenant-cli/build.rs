//! Compiles the preload shim (`preload/shim.rs`) into `$OUT_DIR/libcotenant_preload.so`, which
//! the `cotenant` binary carries inside it (`src/cmd/preload.rs`): `cargo install` builds no
//! library of another crate, so without this `cotenant run --preload` would find no shim after
//! a `cargo install` alone.
//!
//! The shim is compiled with the compiler cargo gave this script (`$RUSTC`, for the target
//! cargo builds for, `$TARGET`), and the linker cargo chose for that target (`$RUSTC_LINKER`),
//! as a `cdylib` that needs nothing but `std`. `RUSTFLAGS` are deliberately not passed on: the
//! shim runs inside every program it is preloaded into, and flags meant for cotenant's own code
//! (coverage instrumentation, sanitizers) do not belong there.
//!
//! Where it cannot be compiled (a target other than Linux, a compiler or linker that fails),
//! the build goes on: a cargo warning says why, an empty file is embedded, and the reason is
//! handed to the CLI in `COTENANT_PRELOAD_UNAVAILABLE`, which `run --preload` then prints.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shim's source, relative to this crate.
const SHIM: &str = "preload/shim.rs";
/// The file the CLI embeds, in `OUT_DIR`.
const OUTPUT: &str = "libcotenant_preload.so";
/// Why nothing was embedded, for the CLI's message (unset when the shim was built).
const UNAVAILABLE_VAR: &str = "COTENANT_PRELOAD_UNAVAILABLE";
/// How many lines of the compiler's errors are repeated as cargo warnings.
const SHOWN_ERROR_LINES: usize = 20;

fn main() {
    println!("cargo:rerun-if-changed={SHIM}");
    println!("cargo:rerun-if-changed=build.rs");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    let output = out_dir.join(OUTPUT);
    // A library left by an earlier run must not be embedded if this one fails.
    let _ = std::fs::remove_file(&output);
    if let Err(why) = compile(&output) {
        let why = why.replace(['\n', '\r'], " ");
        println!(
            "cargo:warning=the preload shim is not built into cotenant ({why}); `cotenant run \
             --preload` will then need an installed libcotenant_preload.so or COTENANT_PRELOAD_LIB"
        );
        // include_bytes! needs a file: an empty one means "none" to the CLI.
        std::fs::write(&output, b"").expect("writing an empty placeholder into OUT_DIR");
        println!("cargo:rustc-env={UNAVAILABLE_VAR}={why}");
    }
}

/// Compiles the shim into `output`; the error says why it could not be, in one line.
fn compile(output: &Path) -> Result<(), String> {
    // The target's operating system, not this script's (the script runs on the build machine).
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        return Err(format!("the shim is for Linux and this build is for {target_os:?}"));
    }
    let target = std::env::var("TARGET").map_err(|_| "cargo did not say the target (TARGET)".to_owned())?;
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .ok_or_else(|| "cargo did not set CARGO_MANIFEST_DIR".to_owned())?;
    let source = Path::new(&manifest).join(SHIM);
    if !source.is_file() {
        return Err(format!("{} is missing", source.display()));
    }

    let mut command = Command::new(&rustc);
    command
        .args(["--crate-name", "cotenant_preload", "--crate-type", "cdylib", "--edition", "2021"])
        // panic=abort: the shim must never unwind into C code; no debug information keeps the
        // embedded copy small (std's own would otherwise be linked in).
        .args(["-C", "opt-level=2", "-C", "panic=abort", "-C", "debuginfo=0", "-C", "strip=debuginfo"])
        .arg("--target")
        .arg(&target)
        .arg("-o")
        .arg(output)
        .arg(&source);
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        let mut flag = OsString::from("linker=");
        flag.push(linker);
        command.arg("-C").arg(flag);
    }
    let shown = Path::new(&rustc).display().to_string();
    let result = command.output().map_err(|e| format!("cannot run {shown}: {e}"))?;
    if !result.status.success() {
        let stderr = String::from_utf8_lossy(&result.stderr);
        for line in stderr.lines().filter(|l| !l.trim().is_empty()).take(SHOWN_ERROR_LINES) {
            println!("cargo:warning=rustc: {line}");
        }
        let first_error =
            stderr.lines().find(|l| l.starts_with("error")).unwrap_or("no error message").trim().to_owned();
        return Err(format!("compiling {SHIM} with {shown} for {target} failed: {first_error}"));
    }
    // A target that links everything statically (crt-static) drops the cdylib with only a
    // warning: the command succeeds and writes nothing.
    match std::fs::metadata(output) {
        Ok(meta) if meta.len() > 0 => Ok(()),
        _ => Err(format!(
            "{shown} wrote no library for {target} (a target that cannot build a shared library?)"
        )),
    }
}

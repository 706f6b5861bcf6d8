//! Gives the shared library a SONAME, `libcotenant_ffi.so.<abi>`, on Linux: a program linked
//! against it then records that name, and keeps loading any installed library of the same ABI
//! version (`make install` puts the matching symlink beside the versioned file). The ABI version
//! is the major version from 1.0 on, and `0.<minor>` before (Cargo's rule: a 0.x minor release
//! may break the ABI, so 0.1 and 0.2 must not share a SONAME).
//!
//! The name keeps the crate's `cotenant_ffi` rather than a shorter `libcotenant.so`: renaming
//! the library target to `cotenant` would give it the same artifact names as the `cotenant`
//! crate of this workspace, and `-lcotenant_ffi` is what programs already link with.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The target's OS, not this script's: the script runs on the build machine.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".to_owned());
        let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_else(|_| "0".to_owned());
        let abi = if major == "0" { format!("0.{minor}") } else { major };
        // Only the cdylib: the static archive and the rlib have no SONAME.
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcotenant_ffi.so.{abi}");
    }
}

//! The committed `include/cotenant.h` is what cbindgen generates from `src/lib.rs` now.
//! `COTENANT_BLESS=1` rewrites it instead of failing.

use std::path::Path;

const REGENERATE: &str = "COTENANT_BLESS=1 cargo test -p cotenant-ffi --test header";

#[test]
fn the_committed_header_is_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    // From the source file alone: no `cargo metadata` run inside a test.
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen could not generate the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let path = dir.join("include/cotenant.h");
    if std::env::var_os("COTENANT_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("writing include/cotenant.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "header out of date: run `{REGENERATE}` ({} differs from what cbindgen generates from src/lib.rs)",
        path.display()
    );
}

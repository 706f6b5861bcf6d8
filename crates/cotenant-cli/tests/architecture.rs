//! ARCHITECTURE.md matches the tree (issue 35): its code map has a section for every crate,
//! the section names every top-level module of the crate (a file or folder directly under
//! `src/`), and every path it names exists. A module added, moved or removed without the map
//! fails here.
//!
//! The map's convention: a section per crate titled `` ### `crates/<name>` ... ``; in it, each
//! bullet that starts with backticked paths (`` - `pool/`, `tokens/` — ... ``) names them
//! relative to the crate's `src/`, or to the crate itself for `build.rs`, `tests/`,
//! `examples/`, `benches/`, `include/`, `lab-probes/` and `preload/` (the CLI's preload shim).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The crate sections of the code map: (crate name, section text).
fn sections(map: &str) -> Vec<(String, String)> {
    let code_map = map.split("\n## Code map").nth(1).expect("ARCHITECTURE.md has a \"## Code map\"");
    let code_map = code_map.split("\n## ").next().unwrap_or(code_map);
    code_map
        .split("\n### ")
        .skip(1)
        .filter_map(|section| {
            let title = section.lines().next()?;
            let name = title.strip_prefix("`crates/")?.split('`').next()?.trim_end_matches('/');
            Some((name.to_owned(), section.to_owned()))
        })
        .collect()
}

/// The backticked paths a bullet starts with (up to the first text that is not a path list).
fn bullet_paths(section: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for line in section.lines() {
        let Some(mut rest) = line.strip_prefix("- `") else { continue };
        while let Some((path, after)) = rest.split_once('`') {
            paths.push(path.to_owned());
            match after.trim_start().strip_prefix(", `") {
                Some(next) => rest = next,
                None => break,
            }
        }
    }
    paths
}

/// The crate's top-level modules: files and folders directly under `src/`, but the roots.
fn top_level_modules(krate: &Path) -> BTreeSet<String> {
    let src = krate.join("src");
    std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
        .map(|e| e.unwrap())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                Some(format!("{name}/"))
            } else if name.ends_with(".rs") && name != "lib.rs" && name != "main.rs" {
                // A file whose folder of children also exists is named by either.
                let stem = name.trim_end_matches(".rs");
                (!src.join(stem).is_dir()).then_some(name)
            } else {
                None
            }
        })
        .collect()
}

const CRATE_RELATIVE: [&str; 7] =
    ["build.rs", "tests/", "examples/", "benches/", "include/", "lab-probes/", "preload/"];

#[test]
fn the_code_map_names_every_crate_and_top_level_module_and_nothing_else() {
    let root = repo();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let sections = sections(&map);
    let mut problems = Vec::new();
    let crates: BTreeSet<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mapped: BTreeSet<String> = sections.iter().map(|(name, _)| name.clone()).collect();
    for missing in crates.difference(&mapped) {
        problems.push(format!("no section for crates/{missing}"));
    }
    for (name, section) in &sections {
        let krate = root.join("crates").join(name);
        if !crates.contains(name) {
            problems.push(format!("a section for crates/{name}, which does not exist"));
            continue;
        }
        let named = bullet_paths(section);
        for path in &named {
            let base = if CRATE_RELATIVE.iter().any(|p| path.starts_with(p)) {
                krate.clone()
            } else {
                krate.join("src")
            };
            if !base.join(path).exists() {
                problems.push(format!("crates/{name}: `{path}` does not exist"));
            }
        }
        for module in top_level_modules(&krate) {
            let stem = module.trim_end_matches('/').trim_end_matches(".rs");
            let listed =
                named.iter().any(|p| p == &module || p == &format!("{stem}.rs") || p == &format!("{stem}/"));
            if !listed {
                problems.push(format!("crates/{name}: the module `{module}` is not in the map"));
            }
        }
    }
    assert!(problems.is_empty(), "ARCHITECTURE.md and the tree differ:\n{}", problems.join("\n"));
}

#[test]
fn the_checker_sees_a_missing_module_and_a_stale_path() {
    let map = "# A\n## Code map\n### `crates/x` (lib)\n- `a.rs`, `b/` — things\n- `c.rs` — more\n\
               text with `d.rs` inside\n## Invariants\n- `e.rs` — not in the map\n";
    let sections = sections(map);
    assert_eq!(sections.len(), 1);
    assert_eq!(sections[0].0, "x");
    assert_eq!(bullet_paths(&sections[0].1), ["a.rs", "b/", "c.rs"]);
}

//! Words for users: `cotenant --help`, the help of every subcommand and nested subcommand, and
//! the doctor's report say what they mean in plain words. They name no source document by its
//! number ("seed"), no issue and no section sign: users have neither the documents' numbers nor
//! the issue tracker. (Code comments may name them; the text a user reads may not.)
//!
//! The subcommands are found from the help's own `Commands:` lists, recursively, so a new
//! subcommand is checked without editing this file. The lab's and the simulator's subcommands
//! exist with the default `lab` feature, which tests build with.
//!
//! The doctor runs here on fixture roots (`testdata/doctor/`, as `tests/doctor.rs` does): the
//! same root twice gives no deltas, so most findings need the two snapshots of a case;
//! `cotenant-ops`' unit test `reports_name_no_source_document_or_issue` renders those, remedies
//! included.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What user-facing text must not contain; the words are matched case-insensitively.
const FORBIDDEN: [&str; 3] = ["seed", "issue", "§"];

/// How deep subcommands nest at most (`cotenant tokens list` is two); a guard against a help
/// text that would list its own command.
const MAX_DEPTH: usize = 4;

fn cotenant(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cotenant"))
        .args(args)
        // Plain text: no colour codes around the headings this test looks for.
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .unwrap_or_else(|e| panic!("cotenant {args:?} cannot be started: {e}"))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// Every line of `text` that holds a forbidden word, each with the command that printed it.
fn offending_lines(command: &str, text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| {
            let lower = line.to_lowercase();
            FORBIDDEN.iter().any(|word| lower.contains(word))
        })
        .map(|line| format!("`{command}` prints: {}", line.trim()))
        .collect()
}

/// The subcommands a help text lists under its `Commands:` heading, clap's own `help` left out.
/// A name is indented by two spaces; a description that clap puts on the next line is
/// indented further, and a blank line or the next heading ends the list.
fn listed_subcommands(help: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_list = false;
    for line in help.lines() {
        if !in_list {
            in_list = line.trim_end() == "Commands:";
            continue;
        }
        if line.trim().is_empty() || !line.starts_with(' ') {
            break;
        }
        if line.starts_with("  ") && !line.starts_with("   ") {
            if let Some(name) = line.split_whitespace().next() {
                let name = name.trim_end_matches(',');
                if name != "help" {
                    names.push(name.to_owned());
                }
            }
        }
    }
    names
}

/// Runs `cotenant <path> --help`, records what it prints that it must not, and walks into the
/// subcommands it lists. `visited` collects every command path whose help was read.
fn walk(path: &[String], visited: &mut Vec<String>, offences: &mut Vec<String>) {
    let mut args = path.to_vec();
    args.push("--help".to_owned());
    let shown = format!("cotenant {}", args.join(" "));
    let out = cotenant(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "`{shown}` failed ({}): {stderr}", out.status);
    assert!(!stdout.trim().is_empty(), "`{shown}` printed no help");
    offences.extend(offending_lines(&shown, &stdout));
    offences.extend(offending_lines(&shown, &stderr));
    visited.push(path.join(" "));
    if path.len() >= MAX_DEPTH {
        return;
    }
    for name in listed_subcommands(&stdout) {
        let mut child = path.to_vec();
        child.push(name);
        walk(&child, visited, offences);
    }
}

#[test]
fn no_help_text_names_a_seed_an_issue_or_a_section() {
    let mut visited = Vec::new();
    let mut offences = Vec::new();
    walk(&[], &mut visited, &mut offences);

    // The walk found the command tree, not an empty list (a changed heading would hide it).
    let mut expected = vec!["cpus", "run", "env", "doctor", "size", "cgroup", "cgroup set", "tokens"];
    expected.extend(["tokens list", "tokens remove"]);
    if cfg!(feature = "lab") {
        expected.extend(["lab", "lab neighbours", "lab headline", "lab clean", "sim", "sim bandwidth"]);
        expected.extend(["sim table2", "sim neighbours", "sim validate"]);
    }
    for command in expected {
        assert!(
            visited.iter().any(|v| v == command),
            "`cotenant {command} --help` was not reached: {visited:?}"
        );
    }
    assert!(
        offences.is_empty(),
        "help texts must say what they mean in plain words, naming papers by title, never \
         {FORBIDDEN:?}:\n{}",
        offences.join("\n")
    );
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/doctor").join(name)
}

#[test]
fn the_doctor_names_no_seed_issue_or_section() {
    // (fixture root, pid): a process with findings, the host, a partial report, and a process
    // whose files cannot be read (exit 1, with a message on stderr).
    let runs: [(&str, Option<&str>); 5] = [
        ("v1-contention/after", Some("4242")),
        ("v2-throttling/after", Some("4242")),
        ("v2-throttling/after", None),
        ("no-cgroup-controllers", Some("4242")),
        ("unreadable-pid-files", Some("4242")),
    ];
    let mut offences = Vec::new();
    for (case, pid) in runs {
        let root = fixture(case);
        assert!(root.is_dir(), "fixture {} is missing", root.display());
        // A checkout may live under any name: its path is masked in what the doctor prints,
        // as given and as the kernel resolves it.
        let canonical = std::fs::canonicalize(&root).map(|c| c.display().to_string());
        let root = root.to_str().expect("the fixture path is UTF-8").to_owned();
        let mask = |text: &[u8]| {
            let text = String::from_utf8_lossy(text).replace(&root, "<root>");
            match &canonical {
                Ok(canonical) => text.replace(canonical.as_str(), "<root>"),
                Err(_) => text,
            }
        };
        for json in [false, true] {
            let mut args = strings(&["doctor", "--root", root.as_str(), "--duration", "100ms"]);
            if let Some(pid) = pid {
                args.extend(strings(&["--pid", pid]));
            }
            if json {
                args.push("--json".to_owned());
            }
            let shown = format!("cotenant {}", args.join(" ")).replace(&root, &format!("<{case}>"));
            let out = cotenant(&args);
            let stdout = mask(&out.stdout);
            let stderr = mask(&out.stderr);
            assert!(matches!(out.status.code(), Some(0 | 1)), "`{shown}` exited {}: {stderr}", out.status);
            assert!(!stderr.contains("panicked"), "`{shown}`: {stderr}");
            let report = stdout.contains("findings") || stdout.contains("Most likely");
            assert!(report, "`{shown}` printed no report: {stdout}");
            offences.extend(offending_lines(&shown, &stdout));
            offences.extend(offending_lines(&shown, &stderr));
        }
    }
    assert!(
        offences.is_empty(),
        "the doctor's report must say what it means in plain words, never {FORBIDDEN:?}:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_subcommand_list_is_read_as_clap_prints_it() {
    let help = "Usage: cotenant <COMMAND>\n\nCommands:\n  cpus    Print the count\n  \
                tokens  List sets\n  help    Print this message\n\nOptions:\n  -h, --help  Print help\n";
    assert_eq!(listed_subcommands(help), ["cpus", "tokens"]);
    let next_line = "Commands:\n  bandwidth\n          A long description\n  table2\n          More\n";
    assert_eq!(listed_subcommands(next_line), ["bandwidth", "table2"]);
    assert_eq!(offending_lines("c", "fine\nA Seed here\nissues\n§ 3\n").len(), 3);
}

//! `cotenant completions SHELL` and `cotenant man`: the shell completion scripts and the
//! manual page, generated from the same definitions as `--help`. Each script names the command
//! and its subcommands in its shell's own way; the page is roff with one title and a section per
//! subcommand; a shell cotenant has no script for is a usage error (exit 2) naming the argument.

use std::process::{Command, Output};

fn cotenant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cotenant")).args(args).output().expect("cotenant runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The script for `shell`, after checking that it was printed without complaint.
fn script(shell: &str) -> String {
    let out = cotenant(&["completions", shell]);
    assert!(out.status.success(), "completions {shell}: {:?} {}", out.status, stderr(&out));
    assert!(out.stderr.is_empty(), "completions {shell} printed on stderr: {}", stderr(&out));
    stdout(&out)
}

#[test]
fn every_shell_gets_a_script_naming_the_command_and_its_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let text = script(shell);
        assert!(text.contains("cotenant"), "{shell}: the command's name is missing");
        for sub in ["cpus", "run", "doctor", "tokens", "completions", "man"] {
            assert!(text.contains(sub), "{shell}: the subcommand {sub} is missing");
        }
    }
    // Each in its shell's own way of registering completions.
    assert!(script("bash").contains("complete -F _cotenant"), "bash registers a function");
    assert!(script("zsh").starts_with("#compdef cotenant"), "zsh's completion file header");
    assert!(script("fish").contains("complete -c cotenant"), "fish's complete command");
}

#[test]
fn a_shell_without_a_script_is_a_usage_error_naming_the_argument() {
    let out = cotenant(&["completions", "tcsh"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("tcsh") && err.contains("<SHELL>"), "names the value and the argument: {err}");
    assert!(err.contains("bash") && err.contains("powershell"), "lists the shells there are: {err}");
    assert!(out.stdout.is_empty(), "{}", stdout(&out));

    let out = cotenant(&["completions"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("<SHELL>"), "{}", stderr(&out));
}

#[test]
fn man_prints_one_roff_page_with_every_command() {
    let out = cotenant(&["man"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = stdout(&out);
    // clap_mangen starts every page with a preamble defining the apostrophe, then the title.
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq") || page.starts_with(".TH"),
        "{}",
        &page[..page.len().min(300)]
    );
    let titles: Vec<&str> = page.lines().filter(|l| l.starts_with(".TH ")).collect();
    assert_eq!(titles.len(), 1, "one page: {titles:?}");
    assert!(titles[0].starts_with(".TH cotenant 1"), "{}", titles[0]);
    assert!(page.contains("cpus"), "the cpus command is described");
    for section in
        ["NAME", "SYNOPSIS", "COMMANDS", "\"COTENANT CPUS\"", "\"COTENANT TOKENS LIST\"", "VERSION"]
    {
        assert!(page.contains(&format!("\n.SH {section}\n")), "no {section} section");
    }
    assert!(page.contains("\\-\\-preload"), "flags are listed (roff escapes their dashes)");
}

//! Issue 35: every usage error of every subcommand exits with 2 and names the argument at
//! fault, whether clap finds it or a check after parsing does (`src/usage.rs`); a failure of the
//! host or of the process asked about still exits with 1. The lab and the simulator
//! (`cotenant-lab`) are not covered here.

use std::path::Path;
use std::process::{Command, Output};

fn cotenant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cotenant")).args(args).output().expect("cotenant runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that `args` exit with 2, print nothing on stdout, and say each of `needles` (the
/// argument at fault first) on stderr.
fn refused(args: &[&str], needles: &[&str]) {
    let out = cotenant(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?} must be a usage error: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?} must name {needle:?}: {err}");
    }
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?} printed: {}", String::from_utf8_lossy(&out.stdout));
}

/// Asserts that `args` fail with 1 (not a usage error), saying each of `needles` on stderr.
fn failed(args: &[&str], needles: &[&str]) {
    let out = cotenant(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?} is a failure, not a usage error: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?} must say {needle:?}: {err}");
    }
}

/// A pid no process can have: pids are allocated below `/proc/sys/kernel/pid_max`, which can be
/// at most `PID_MAX_LIMIT`, 2^22 = 4194304 on 64-bit Linux (less on 32-bit).
const IMPOSSIBLE_PID: &str = "4194304";

#[test]
fn clap_usage_errors_exit_2() {
    refused(&["no-such-subcommand"], &["no-such-subcommand"]);
    refused(&["cpus", "--no-such-flag"], &["--no-such-flag"]);
    refused(&["cpus", "--fractional", "--json"], &["--fractional", "--json"]);
    refused(&["cpus", "--pid", "0"], &["--pid"]);
    refused(&["run"], &["CMD"]);
    refused(&["run", "--"], &["CMD"]);
    refused(&["size", "--pid", "0"], &["--pid"]);
    refused(&["size", "--duration", "1s", "--wait", "1ms", "--compute", "1ms"], &["--pid"]);
    refused(&["cgroup", "set", "app"], &["--cpus"]);
    refused(&["cgroup", "set", "app", "--cpus", "0"], &["--cpus"]);
    refused(&["tokens", "remove"], &["NAME"]);
}

#[test]
fn size_flag_combinations_are_usage_errors() {
    refused(&["size"], &["nothing to size", "--wait", "--rate"]);
    refused(&["size", "--rate", "500"], &["--latency is missing"]);
    refused(&["size", "--latency", "50ms"], &["--rate is missing"]);
    refused(&["size", "--cpus", "8", "--wait", "50ms"], &["--compute is missing"]);
    refused(&["size", "--compute", "5ms"], &["--wait is missing"]);
    refused(&["size", "--util", "0.8"], &["--wait is missing"]);
    refused(
        &["size", "--rate", "500", "--latency", "50ms", "--wait", "1ms", "--compute", "1ms"],
        &["--rate", "--wait", "not both"],
    );
    refused(&["size", "--pid", "1", "--rate", "500"], &["--pid measures W/C itself"]);
    refused(&["size", "--pid", "1", "--util", "0.5"], &["--pid measures W/C itself"]);
}

#[test]
fn size_inputs_the_arithmetic_refuses_are_usage_errors() {
    refused(
        &["size", "--wait", "1ms", "--compute", "0ms", "--cpus", "2"],
        &["compute must be a positive number"],
    );
    // 60000 CPUs × (1 + a day / 1 ns): far beyond any pool.
    refused(
        &["size", "--cpus", "60000", "--wait", "86400s", "--compute", "1ns"],
        &["check the inputs' units"],
    );
}

#[test]
fn a_root_that_is_no_directory_is_a_usage_error_everywhere() {
    let root = "/nonexistent/cotenant-usage-root";
    let said = format!("--root {root}: not a directory");
    refused(&["cpus", "--root", root], &[said.as_str()]);
    refused(&["env", "--root", root], &[said.as_str()]);
    refused(&["run", "--root", root, "--", "true"], &[said.as_str()]);
    refused(&["doctor", "--root", root, "--duration", "100ms"], &[said.as_str()]);
    refused(&["cgroup", "set", "--root", root, "app", "--cpus", "1"], &[said.as_str()]);
}

#[test]
fn cgroup_set_and_tokens_remove_refuse_bad_arguments_with_2() {
    // A relative path with `..` is refused before anything is read or written.
    refused(&["cgroup", "set", "../escape", "--cpus", "1"], &["cgroup set", "../escape"]);
    refused(&["tokens", "remove", "0xzz"], &["tokens remove", "0xzz"]);
}

#[test]
fn failures_of_the_host_or_the_process_asked_about_stay_1() {
    assert!(
        !Path::new("/proc").join(IMPOSSIBLE_PID).exists(),
        "pid {IMPOSSIBLE_PID} exists: pid_max is {:?}",
        std::fs::read_to_string("/proc/sys/kernel/pid_max")
    );
    failed(&["cpus", "--pid", IMPOSSIBLE_PID], &[format!("process {IMPOSSIBLE_PID}").as_str()]);
    failed(
        &["size", "--pid", IMPOSSIBLE_PID, "--cpus", "2", "--duration", "100ms"],
        &[format!("pid {IMPOSSIBLE_PID}").as_str()],
    );
    failed(
        &["cgroup", "set", "/nonexistent/cotenant-usage-cgroup", "--cpus", "1"],
        &["/nonexistent/cotenant-usage-cgroup"],
    );
    failed(&["tokens", "remove", "cotenant-usage-test-no-such-set"], &["no token set"]);
}

//! Unit tests of the runner: deadlines, a run's length, the stderr tail, failed runs, programs
//! run to their end, and the command lines of labs and workers.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::*;

#[test]
fn a_run_is_given_its_length_and_a_grace_of_at_least_30_s() {
    let s = Duration::from_secs;
    assert_eq!(worker_deadline(s(1), s(5)), s(1 + 5 + 30), "short runs: 30 s of grace");
    assert_eq!(worker_deadline(s(1), s(20)), s(1 + 20 + 40), "long runs: twice their length");
    assert_eq!(worker_deadline(Duration::ZERO, Duration::ZERO), s(30));
}

#[test]
fn a_run_lasts_until_its_latest_worker_ends() {
    let spec = |duration_ms: &str, offset_s: u64| WorkerSpec {
        program: PathBuf::from("/x/cotenant"),
        args: ["lab-worker", "--duration-ms", duration_ms, "--seed", "1"].map(String::from).to_vec(),
        cgroup: None,
        start_offset: Duration::from_secs(offset_s),
    };
    assert_eq!(spec("4000", 2).run_end(), Some(Duration::from_secs(6)));
    assert_eq!(spec("soon", 0).run_end(), None, "unreadable: unknown");
    let mut silent = spec("1", 0);
    silent.args.truncate(1);
    assert_eq!(silent.run_end(), None, "not given: unknown");
}

#[test]
fn the_tail_keeps_the_last_bytes_and_counts_the_rest() {
    let mut tail = Tail::new(8);
    tail.push(b"abc");
    assert_eq!(tail.text(), "abc");
    tail.push(b"defgh");
    assert_eq!(tail.text(), "abcdefgh", "exactly full: nothing lost");
    tail.push(b"ij");
    assert_eq!(tail.text(), "[2 earlier bytes not kept] cdefghij");
    tail.push(&[b'z'; 20]);
    assert_eq!(tail.text(), "[22 earlier bytes not kept] zzzzzzzz", "a write longer than the cap");
    let mut flood = Tail::new(STDERR_KEPT);
    for _ in 0..100 {
        flood.push(&[b'e'; 4096]);
    }
    assert_eq!(flood.kept.len(), STDERR_KEPT);
    assert_eq!(flood.dropped, (100 * 4096 - STDERR_KEPT) as u64);
}

#[test]
fn a_failed_run_is_told_from_an_error_that_ends_the_experiment() {
    let why = "lab child pid 7 did not finish within 3 s; killed";
    let failed = anyhow::Error::new(WorkerFailed(why.into())).context("tenant B");
    assert_eq!(
        failed_run(&failed).as_deref(),
        Some("tenant B: lab child pid 7 did not finish within 3 s; killed")
    );
    assert_eq!(failed_run(&anyhow::anyhow!("creating a lab cgroup")), None);
}

#[test]
fn a_program_run_to_its_end_gives_its_status_and_both_outputs() {
    let mut sh = Command::new("sh");
    sh.args(["-c", "printf out; printf 'first\\nsecond\\n' >&2; exit 3"]);
    let finished = run_bounded_output(&mut sh, PROBE_DEADLINE).unwrap();
    assert_eq!(finished.status.code(), Some(3), "a failure is returned, not an error");
    assert_eq!(finished.stdout, b"out");
    assert_eq!(finished.stderr, "first\nsecond\n");
}

#[test]
fn a_program_that_does_not_exist_is_not_installed_and_named() {
    let missing = "/nonexistent/cotenant-no-such-tool";
    let e = run_bounded_output(&mut Command::new(missing), BUILD_DEADLINE).unwrap_err();
    assert!(is_not_found(&e), "{e:#}");
    assert!(format!("{e:#}").starts_with(&format!("starting {missing}: ")), "{e:#}");
    assert!(!is_not_found(&anyhow::anyhow!("c++ failed")));
}

#[test]
fn a_program_past_its_deadline_is_killed_and_named_with_the_deadline() {
    // Never ends by itself: only the deadline can end it, however loaded the host.
    let mut sleeper = Command::new("sleep");
    sleeper.arg("3600");
    let e = run_bounded_output(&mut sleeper, Duration::from_secs(1)).unwrap_err();
    let text = format!("{e:#}");
    assert!(text.starts_with("running sleep: lab child pid "), "{text}");
    assert!(text.ends_with("did not finish within 1 s; killed"), "{text}");
    assert!(failed_run(&e).is_some(), "a timed-out program is a failed run: {text}");
}

#[test]
fn a_running_lab_is_recognised_by_its_command_line() {
    assert!(is_lab(&["/x/target/release/cotenant", "lab", "neighbours", "--quick"]));
    assert!(is_lab(&["cotenant", "lab", "--quick", "all"]));
    assert!(!is_lab(&["/x/cotenant", "lab", "clean"]), "lab clean is no lab");
    assert!(!is_lab(&["/x/cotenant", "lab"]));
    assert!(!is_lab(&["/x/deps/lab-0123abcd", "lab", "neighbours"]), "another program");
    assert!(!is_lab(&["/x/cotenant", "lab-worker", "--parent", "4"]));
    assert!(!is_lab(&[]));
}

#[test]
fn a_worker_is_recognised_by_its_command_line() {
    assert_eq!(worker_parent(&["/x/cotenant", "lab-worker", "--pool", "share", "--parent", "42"]), Some(42));
    assert_eq!(worker_parent(&["/root/.cache/cotenant/lab-go/goworker", "--parent", "7"]), Some(7));
    assert_eq!(worker_parent(&["/x/cotenant", "lab-tenant", "batch", "--parent", "9"]), Some(9));
    assert_eq!(worker_parent(&["/x/cotenant", "lab", "neighbours", "--parent", "42"]), None);
    assert_eq!(worker_parent(&["/x/cotenant", "lab-worker", "--parent"]), None);
    assert_eq!(worker_parent(&[]), None);
}

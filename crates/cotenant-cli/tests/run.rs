//! `cotenant run` and `cotenant env` end to end: the variables reach the command, the user's
//! own values win unless `--force`, the command keeps cotenant's pid, its exit status and a
//! signal death are passed on, and bad commands give clear errors; `--preload` makes
//! `sysconf(_SC_NPROCESSORS_ONLN)`, `get_nprocs()` and Python's `os.cpu_count()` answer the
//! count. Nothing here depends on timing.

use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_cotenant"))
}

fn cotenant(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("GOMAXPROCS")
        .env_remove("JAVA_TOOL_OPTIONS")
        .env_remove("LD_PRELOAD")
        .env_remove("COTENANT_CPUS")
        .output()
        .expect("cotenant starts")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What `cotenant cpus` says here: the value every variable must carry.
fn count() -> String {
    let out = cotenant(&["cpus"]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().to_owned()
}

fn env_of(out: &Output, name: &str) -> Option<String> {
    stdout(out).lines().find_map(|l| l.strip_prefix(&format!("{name}=")).map(str::to_owned))
}

#[test]
fn the_command_sees_the_count_in_every_variable() {
    let out = cotenant(&["run", "--", "env"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let n = count();
    for name in
        ["GOMAXPROCS", "RAYON_NUM_THREADS", "TOKIO_WORKER_THREADS", "OMP_NUM_THREADS", "COTENANT_CPUS"]
    {
        assert_eq!(env_of(&out, name).as_deref(), Some(n.as_str()), "{name}");
    }
    assert_eq!(env_of(&out, "JAVA_TOOL_OPTIONS"), Some(format!("-XX:ActiveProcessorCount={n}")));
    assert_eq!(env_of(&out, "LD_PRELOAD"), None);
}

#[test]
fn the_users_values_win_unless_forced() {
    let run = |force: bool| {
        let mut c = Command::new(bin());
        c.arg("run");
        if force {
            c.arg("--force");
        }
        c.args(["--", "env"]).env("GOMAXPROCS", "64").output().expect("cotenant starts")
    };
    assert_eq!(env_of(&run(false), "GOMAXPROCS").as_deref(), Some("64"));
    assert_eq!(env_of(&run(true), "GOMAXPROCS"), Some(count()));
}

#[test]
fn the_command_keeps_the_pid_of_cotenant() {
    let child = Command::new(bin())
        .args(["run", "--", "sh", "-c", "echo $$"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("cotenant starts");
    let pid = child.id();
    let out = child.wait_with_output().expect("it finishes");
    assert_eq!(stdout(&out).trim(), pid.to_string(), "exec, not fork");
}

#[test]
fn the_exit_status_and_a_signal_death_are_passed_on() {
    assert_eq!(cotenant(&["run", "--", "sh", "-c", "exit 7"]).status.code(), Some(7));
    let killed = cotenant(&["run", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(killed.status.signal(), Some(libc::SIGTERM), "{:?}", killed.status);
}

#[test]
fn a_missing_or_unrunnable_command_is_a_clear_error() {
    let out = cotenant(&["run"]);
    assert_eq!(out.status.code(), Some(2), "no command is a usage error");
    assert!(stderr(&out).contains("CMD"), "{}", stderr(&out));

    let out = cotenant(&["run", "--", "/nonexistent/cotenant-test-command"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("cannot run /nonexistent/cotenant-test-command"), "{}", stderr(&out));

    let dir = std::env::temp_dir().join(format!("cotenant-run-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("not-executable");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    let out = cotenant(&["run", "--", file.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(126));
    assert!(stderr(&out).contains("Permission denied"), "{}", stderr(&out));

    let out = cotenant(&["run", "--rounding", "up", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--rounding"), "{}", stderr(&out));
}

#[test]
fn print_runs_nothing() {
    let out = cotenant(&["run", "--print", "--", "sh", "-c", "exit 3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&format!("GOMAXPROCS={}", count())), "{}", stdout(&out));
    assert!(stdout(&out).contains("# would run: sh -c 'exit 3'"), "{}", stdout(&out));
}

#[test]
fn env_prints_export_lines_a_shell_can_eval() {
    let out = cotenant(&["env"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.lines().all(|l| l.starts_with("export ")), "{text}");
    let script = format!("{text}\necho \"$OMP_NUM_THREADS $JAVA_TOOL_OPTIONS\"");
    let shell = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert_eq!(stdout(&shell).trim(), format!("{0} -XX:ActiveProcessorCount={0}", count()));
}

/// The preload shim next to the binary under test (built here if `cargo test` did not).
fn preload_lib() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = bin().parent().expect("the binary has a directory");
        let lib = dir.join("libcotenant_preload.so");
        if !lib.is_file() {
            let release = dir.ends_with("release");
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "--locked", "-p", "cotenant-preload"]);
            if release {
                cargo.arg("--release");
            }
            let status = cargo.status().expect("cargo runs");
            assert!(status.success(), "building cotenant-preload failed");
        }
        assert!(lib.is_file(), "{} was not built", lib.display());
        lib.clone()
    })
}

#[test]
fn preload_answers_sysconf_online_and_leaves_conf_alone() {
    let lib = preload_lib();
    // getconf calls sysconf(_SC_NPROCESSORS_ONLN); nproc --all calls get_nprocs_conf, which
    // the shim leaves alone.
    let out = Command::new(bin())
        .args(["run", "--preload", "--", "sh", "-c", "getconf _NPROCESSORS_ONLN; getconf _NPROCESSORS_CONF"])
        .env("COTENANT_PRELOAD_LIB", lib)
        .env("COTENANT_CPUS", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(lines[0], "1", "ONLN answers the (user-set) count");
    let conf = Command::new("getconf").arg("_NPROCESSORS_CONF").output().unwrap();
    assert_eq!(lines[1], stdout(&conf).trim(), "CONF is left alone");
}

#[test]
fn preload_reaches_python_os_cpu_count_and_get_nprocs() {
    let lib = preload_lib();
    let script = "import ctypes, os; print(os.cpu_count(), ctypes.CDLL(None).get_nprocs())";
    let out = Command::new(bin())
        .args(["run", "--preload", "--", "python3", "-c", script])
        .env("COTENANT_PRELOAD_LIB", lib)
        .env("COTENANT_CPUS", "1")
        .output();
    match out {
        Ok(out) if out.status.code() == Some(127) => eprintln!("skipped: python3 not installed"),
        Ok(out) => {
            assert!(out.status.success(), "{}", stderr(&out));
            assert_eq!(stdout(&out).trim(), "1 1", "os.cpu_count() and get_nprocs()");
        }
        Err(e) => panic!("cotenant run: {e}"),
    }
}

#[test]
fn a_missing_preload_library_is_a_clear_error() {
    let out = Command::new(bin())
        .args(["run", "--preload", "--", "true"])
        .env("COTENANT_PRELOAD_LIB", "/nonexistent/libcotenant_preload.so")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("COTENANT_PRELOAD_LIB=/nonexistent/libcotenant_preload.so is not a file"));
}

//! `cotenant run` and `cotenant env` end to end: the variables reach the command, the user's
//! own values win unless `--force`, the command keeps cotenant's pid, its exit status and a
//! signal death are passed on, and bad commands give clear errors; when the count cannot be
//! determined the command still runs, unchanged, after one warning (issue 34), unless
//! `--strict`; `--preload` makes `sysconf(_SC_NPROCESSORS_ONLN)`, `get_nprocs()` and Python's
//! `os.cpu_count()` answer the count, resolves the C library's functions at load time and
//! passes every other `sysconf` name through; with no shim beside the executable or
//! installed, the copy built into the binary is written to a private cache folder and preloaded
//! from there (what `cargo install` alone gives). Nothing here depends on timing.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_cotenant"))
}

/// Every variable `cotenant run` may set (`VARIABLES` in `src/cmd/run.rs`, plus
/// `JAVA_TOOL_OPTIONS` and `LD_PRELOAD`): removed from what the tests inherit, so that the
/// user's own values cannot decide a test.
const SET_BY_RUN: [&str; 15] = [
    "COTENANT_CPUS",
    "GOMAXPROCS",
    "RAYON_NUM_THREADS",
    "TOKIO_WORKER_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "POLARS_MAX_THREADS",
    "JULIA_NUM_THREADS",
    "DOTNET_PROCESSOR_COUNT",
    "PYTHON_CPU_COUNT",
    "JAVA_TOOL_OPTIONS",
    "LD_PRELOAD",
];

/// `cotenant ARGS` with none of [`SET_BY_RUN`] inherited.
fn command(args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args);
    for name in SET_BY_RUN {
        c.env_remove(name);
    }
    c
}

fn cotenant(args: &[&str]) -> Output {
    command(args).output().expect("cotenant starts")
}

/// A case of `testdata/cpus/`, for `--root`.
fn fixture(case: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/cpus").join(case);
    assert!(dir.is_dir(), "{} is missing", dir.display());
    dir
}

/// A private directory (made fresh, mode 0700, under a random name no one else can have taken
/// first), removed with everything in it when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let parent = std::env::temp_dir();
        for _ in 0..16 {
            // Each RandomState has fresh random keys: an unpredictable number.
            let random = RandomState::new().build_hasher().finish();
            let dir = parent.join(format!("cotenant-run-test-{}-{random:016x}-{name}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return TempDir(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("cannot create {}: {e}", dir.display()),
            }
        }
        panic!("no free name for a test directory in {}", parent.display());
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
    for name in SET_BY_RUN.iter().filter(|&&name| name != "JAVA_TOOL_OPTIONS" && name != "LD_PRELOAD") {
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

    let dir = TempDir::new("unrunnable");
    let file = dir.path().join("not-executable");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    let out = cotenant(&["run", "--", file.to_str().unwrap()]);
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

#[test]
fn run_and_env_read_the_root_they_are_given() {
    // The hook the tests below use to make detection fail: a fixture tree whose count is known.
    let root = fixture("v1-cpuset");
    let out = cotenant(&["env", "--root", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).lines().any(|l| l == "export GOMAXPROCS=3"), "{}", stdout(&out));
    let out = cotenant(&["env", "--root", "/nonexistent/cotenant-root"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--root /nonexistent/cotenant-root: not a directory"), "{}", stderr(&out));
}

/// The fixture whose `cpu.max` holds `banana 100000`, and that file as the warning names it.
fn undeterminable() -> (PathBuf, String) {
    let root = fixture("malformed-cpu-max");
    let file = root.join("sys/fs/cgroup/app/cpu.max").display().to_string();
    (root, file)
}

/// Issue 34: a wrapper must not stop what it wraps.
#[test]
fn r34_run_starts_the_command_unchanged_when_the_count_cannot_be_determined() {
    let (root, file) = undeterminable();
    let out = cotenant(&["run", "--root", root.to_str().unwrap(), "--", "sh", "-c", "env; exit 7"]);
    assert_eq!(out.status.code(), Some(7), "the command's own status; stderr: {}", stderr(&out));
    for name in SET_BY_RUN {
        assert_eq!(env_of(&out, name), None, "{name} must not be set");
    }
    let warning = stderr(&out);
    assert_eq!(warning.lines().count(), 1, "one warning: {warning}");
    assert!(warning.starts_with("cotenant run: warning: could not determine the CPU count ("), "{warning}");
    assert!(warning.contains(&format!("({file}: ")), "names the file: {warning}");
    assert!(warning.contains("banana"), "and what was wrong: {warning}");
    assert!(warning.trim_end().ends_with("; running sh unchanged"), "{warning}");

    let killed = cotenant(&["run", "--root", root.to_str().unwrap(), "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(killed.status.signal(), Some(libc::SIGTERM), "{:?}", killed.status);

    let out = cotenant(&["run", "--print", "--root", root.to_str().unwrap(), "--", "sh", "-c", "exit 3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "# would run: sh -c 'exit 3'\n", "no variable to show");
    assert!(stderr(&out).trim_end().ends_with("; sh would run unchanged"), "{}", stderr(&out));
}

#[test]
fn r34_env_prints_nothing_when_the_count_cannot_be_determined() {
    let (root, file) = undeterminable();
    let out = cotenant(&["env", "--root", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "", "eval \"$(cotenant env)\" must change nothing");
    let warning = stderr(&out);
    assert_eq!(warning.lines().count(), 1, "one warning: {warning}");
    assert!(warning.starts_with("cotenant env: warning: could not determine the CPU count ("), "{warning}");
    assert!(warning.contains(&format!("({file}: ")), "names the file: {warning}");
}

#[test]
fn r34_strict_refuses_as_before() {
    let (root, file) = undeterminable();
    let out = cotenant(&["run", "--strict", "--root", root.to_str().unwrap(), "--", "sh", "-c", "echo ran"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), "", "the command must not run");
    assert!(stderr(&out).contains("cannot determine this process's CPU count"), "{}", stderr(&out));
    assert!(stderr(&out).contains(&file), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));

    let out = cotenant(&["env", "--strict", "--root", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert!(stderr(&out).contains(&file), "{}", stderr(&out));

    let help = cotenant(&["run", "--help"]);
    assert!(stdout(&help).contains("--strict"), "--strict is documented: {}", stdout(&help));
}

/// Python 3.13 reads `PYTHON_CPU_COUNT` before anything else: `cotenant run` sets it.
#[test]
fn python_3_13_reads_python_cpu_count() {
    let root = fixture("v1-cpuset");
    let script = "import os, sys; print(sys.version_info >= (3, 13), os.cpu_count())";
    let out = cotenant(&["run", "--root", root.to_str().unwrap(), "--", "python3", "-c", script]);
    match out.status.code() {
        Some(127) => eprintln!("skipped: python3 not installed"),
        _ if stdout(&out).starts_with("False ") => {
            eprintln!("skipped: python3 is older than 3.13 (no PYTHON_CPU_COUNT)")
        }
        _ => {
            assert!(out.status.success(), "{}", stderr(&out));
            assert_eq!(stdout(&out).trim(), "True 3", "os.cpu_count() is the fixture's count");
        }
    }
}

/// The preload shim next to the binary under test, built here every time: `cargo test` builds
/// no cdylib, so a shim left from an older build would be tested instead (cargo does nothing
/// when it is up to date).
fn preload_lib() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = bin().parent().expect("the binary has a directory");
        let lib = dir.join("libcotenant_preload.so");
        {
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
    // Python 3.13+ answers os.cpu_count() from PYTHON_CPU_COUNT (which `run` sets to the
    // detected count) without calling sysconf: unset it, so that the shim is what is tested.
    let shell = "unset PYTHON_CPU_COUNT; exec python3 -c \"$1\"";
    let out = Command::new(bin())
        .args(["run", "--preload", "--", "sh", "-c", shell, "sh", script])
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

/// What `cargo install` alone gives: a `cotenant` with no shim beside it, none installed in
/// `../lib/cotenant` and no `COTENANT_PRELOAD_LIB` writes the shim built into it to
/// `$HOME/.cache/cotenant/preload-<hash>/`, in folders of mode 0700, and preloads it from
/// there; the next run reuses that file, and a file that is not the built-in shim is rewritten.
#[test]
fn the_built_in_shim_is_written_to_a_private_cache_folder_and_preloaded() {
    // The executable copied alone into PREFIX/bin, as `cargo install --root PREFIX` leaves it.
    // `cp` writes the copy, not this process: a file this multi-threaded test process had open
    // for writing could be inherited by a child another test forks, and exec'ing it would then
    // fail with "text file busy".
    let prefix = TempDir::new("installed");
    let bin_dir = prefix.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    let exe = bin_dir.join("cotenant");
    let copied = Command::new("cp").arg(bin()).arg(&exe).status().expect("cp runs");
    assert!(copied.success(), "copying {} failed", bin().display());
    let home = TempDir::new("home");
    let run = || {
        let script = "printf '%s\\n' \"$LD_PRELOAD\"; getconf _NPROCESSORS_ONLN";
        let mut c = Command::new(&exe);
        c.args(["run", "--preload", "--", "sh", "-c", script]);
        for name in SET_BY_RUN {
            c.env_remove(name);
        }
        c.env_remove("COTENANT_PRELOAD_LIB").env_remove("XDG_CACHE_HOME").env("HOME", home.path());
        // A count the user set is kept by `run` and answered by the shim: 1 whatever the host.
        c.env("COTENANT_CPUS", "1");
        let out = c.output().expect("the copied cotenant starts");
        assert!(out.status.success(), "{:?}: {}", out.status, stderr(&out));
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "LD_PRELOAD and getconf's answer: {text}");
        assert_eq!(lines[1], "1", "sysconf(_SC_NPROCESSORS_ONLN) answered by the preloaded shim");
        PathBuf::from(lines[0])
    };

    let lib = run();
    let cache = std::fs::canonicalize(home.path()).unwrap().join(".cache");
    let folder = lib.parent().expect("the library is in a folder");
    assert_eq!(folder.parent(), Some(cache.join("cotenant").as_path()), "{}", lib.display());
    let name = folder.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("preload-") && name.len() == "preload-".len() + 16, "{name}");
    assert_eq!(lib.file_name().unwrap(), "libcotenant_preload.so");
    let built_in = std::fs::read(&lib).unwrap();
    assert!(built_in.starts_with(b"\x7fELF"), "a shared library is written");
    for dir in [cache.clone(), cache.join("cotenant"), folder.to_path_buf()] {
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert!(meta.is_dir(), "{} is a real folder", dir.display());
        assert_eq!(meta.mode() & 0o7777, 0o700, "{} has mode {:o}", dir.display(), meta.mode() & 0o7777);
    }

    let inode = std::fs::metadata(&lib).unwrap().ino();
    assert_eq!(run(), lib, "the same file next time");
    assert_eq!(std::fs::metadata(&lib).unwrap().ino(), inode, "reused, not rewritten");

    std::fs::write(&lib, b"not the built-in shim").unwrap();
    assert_eq!(run(), lib);
    assert_eq!(std::fs::read(&lib).unwrap(), built_in, "a changed file is rewritten before use");
}

/// A C program for the shim: its own `dlsym` (exported with `-rdynamic`, so the shim's
/// reference binds to it) logs each lookup on stderr and finds nothing, as a failed resolution
/// would; `main` logs that it started, then prints what `sysconf` and `get_nprocs` answer.
const SYSCONF_PROBE: &str = r#"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/sysinfo.h>

void *dlsym(void *handle, const char *name) {
    (void)handle;
    write(2, "dlsym ", 6);
    write(2, name, strlen(name));
    write(2, "\n", 1);
    return NULL;
}

int main(void) {
    write(2, "main\n", 5);
    printf("%ld %ld %ld %ld %d\n", sysconf(_SC_PAGESIZE), sysconf(_SC_NPROCESSORS_ONLN),
           sysconf(_SC_NPROCESSORS_CONF), sysconf(_SC_CLK_TCK), get_nprocs());
    return 0;
}
"#;

/// Issue 34: the shim resolves the C library's functions when it is loaded, never during a
/// call (a lazy `dlsym` can re-enter an allocator that is starting up), answers only the CPU
/// count, and passes every other `sysconf` name, `_SC_PAGESIZE` first, through even when the
/// resolution failed.
#[test]
fn r34_preload_resolves_at_load_and_passes_every_other_name_through() {
    if !Command::new("cc").arg("--version").output().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no C compiler (cc) to build the sysconf probe");
        return;
    }
    let lib = preload_lib();
    let dir = TempDir::new("sysconf-probe");
    std::fs::write(dir.path().join("probe.c"), SYSCONF_PROBE).unwrap();
    let cc = Command::new("cc")
        .args(["-O1", "-rdynamic", "-o", "probe", "probe.c"])
        .current_dir(dir.path())
        .output()
        .expect("cc runs");
    assert!(cc.status.success(), "cc failed: {}", stderr(&cc));
    let probe = |preload: bool, cpus: Option<&str>| {
        let mut c = Command::new(dir.path().join("probe"));
        c.env_remove("LD_PRELOAD").env_remove("COTENANT_CPUS");
        if preload {
            c.env("LD_PRELOAD", lib);
        }
        if let Some(n) = cpus {
            c.env("COTENANT_CPUS", n);
        }
        let out = c.output().expect("the probe runs");
        assert!(out.status.success(), "probe: {:?} {}", out.status, stderr(&out));
        out
    };

    let plain = probe(false, None);
    let plain_values: Vec<String> = stdout(&plain).split_whitespace().map(str::to_owned).collect();
    assert_eq!(plain_values.len(), 5, "{}", stdout(&plain));
    assert!(plain_values[0].parse::<i64>().is_ok_and(|p| p > 0), "page size {}", plain_values[0]);

    let shimmed = probe(true, Some("1"));
    let log = stderr(&shimmed);
    let lines: Vec<&str> = log.lines().collect();
    let main_at = lines.iter().position(|l| *l == "main").unwrap_or_else(|| panic!("no main: {log}"));
    assert!(lines[..main_at].contains(&"dlsym sysconf"), "resolved when loaded: {log}");
    assert!(!lines[main_at..].iter().any(|l| l.starts_with("dlsym")), "no lookup during a call: {log}");
    let shimmed_out = stdout(&shimmed);
    let values: Vec<&str> = shimmed_out.split_whitespace().collect();
    assert_eq!(
        values,
        [plain_values[0].as_str(), "1", plain_values[2].as_str(), plain_values[3].as_str(), "1"],
        "page size, ONLN, CONF, CLK_TCK, get_nprocs: only the CPU count is answered"
    );

    let unset = probe(true, None);
    assert_eq!(stdout(&unset), stdout(&plain), "without COTENANT_CPUS every call passes through");
}

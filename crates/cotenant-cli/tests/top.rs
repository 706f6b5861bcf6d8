//! `cotenant top` end to end: two cooperating pool processes (`cotenant lab-worker --pool
//! adaptive`, on a token set of their own, publishing into a private folder) are listed by
//! `top --once --json` with their targets and token counts, then seen as rows of the live view
//! in a real terminal (tmux), and gone from it once they are killed; `q` quits the view.
//!
//! Nothing here asserts a time: each wait polls up to a generous deadline, and the acceptance's
//! 2 s is measured and printed. The children, the tmux server, the token set and the folder are
//! removed however the test ends (a guard).

use std::os::unix::ffi::OsStringExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cotenant::tokens::HostTokens;
use serde_json::Value;

/// How long any wait may take before the test fails: far more than the view needs (its
/// refresh is 0.5 s), for a loaded test machine.
const DEADLINE: Duration = Duration::from_secs(10);
/// What the acceptance asks of the live view; measured and printed, not asserted.
const ACCEPTANCE: Duration = Duration::from_secs(2);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(100);

fn cotenant() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cotenant"))
}

/// A new folder only this user can use (`mkdtemp`, mode 0700).
fn private_dir() -> PathBuf {
    let template = std::env::temp_dir().join("cotenant-test-top-XXXXXX");
    let mut bytes = template.into_os_string().into_vec();
    bytes.push(0);
    // SAFETY: a NUL-terminated, writable template that mkdtemp fills in place.
    let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    assert!(!made.is_null(), "mkdtemp: {}", std::io::Error::last_os_error());
    bytes.pop();
    PathBuf::from(std::ffi::OsString::from_vec(bytes))
}

/// Everything the test starts or makes, undone when dropped (a failed assertion included).
struct Cleanup {
    children: Vec<Child>,
    tmux_socket: Option<String>,
    set: String,
    dir: PathBuf,
}

impl Cleanup {
    /// Kills and reaps the children (a zombie still has its `/proc/<pid>/stat`).
    fn kill_children(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.kill_children();
        if let Some(socket) = &self.tmux_socket {
            let _ = Command::new("tmux")
                .args(["-L", socket.as_str(), "kill-server"])
                .stderr(Stdio::null())
                .status();
        }
        let _ = HostTokens::remove_named(&self.set);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A cooperating pool process: the lab's worker with cotenant's default pool (adaptive, host
/// tokens on the set `COTENANT_TOKENS_SET` names), offered 0.3 CPU of 2 ms items for two
/// minutes (it is killed long before), publishing its status record into `dir`.
fn start_pool_process(set: &str, dir: &Path) -> Child {
    let start_ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos().to_string();
    let parent = std::process::id().to_string();
    cotenant()
        .args(["lab-worker", "--pool", "adaptive", "--processes", "2", "--threads", "2"])
        .args(["--load", "0.3", "--fair-cpus", "1", "--service-ms", "2", "--exact-cpu"])
        .args(["--duration-ms", "120000", "--start-at-ns", start_ns.as_str(), "--parent", parent.as_str()])
        .env(cotenant::tokens::DEFAULT_SET_ENV, set)
        .env_remove(cotenant::tokens::TOKENS_ENV)
        .env("COTENANT_STATUS_DIR", dir)
        .env_remove("COTENANT_STATUS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("cotenant lab-worker starts")
}

/// `cotenant top --once --json --dir DIR`: the processes it lists.
fn snapshot(dir: &Path) -> Vec<Value> {
    let out = cotenant().args(["top", "--once", "--json", "--dir"]).arg(dir).output().expect("cotenant runs");
    assert!(out.status.success(), "top --once --json: {}", String::from_utf8_lossy(&out.stderr));
    let value: Value = serde_json::from_slice(&out.stdout).expect("top --json prints JSON");
    value.as_array().expect("an array of processes").clone()
}

/// Polls `check` every `POLL` until it gives a value or `DEADLINE` passes; the value and when.
fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> (T, Duration) {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return (value, start.elapsed());
        }
        assert!(start.elapsed() < DEADLINE, "{what}: not within {DEADLINE:?}");
        std::thread::sleep(POLL);
    }
}

/// The set's token count as `cotenant tokens list --json` reads it from the semaphores.
fn listed_tokens(set: &str) -> Option<u64> {
    let out = cotenant().args(["tokens", "list", "--json"]).output().expect("cotenant runs");
    let sets: Value = serde_json::from_slice(&out.stdout).ok()?;
    sets.as_array()?.iter().find(|s| s["name"] == set)?["tokens"].as_u64()
}

/// Whether a line of the screen is a row of process `pid` (rows start with the pid).
fn shows(screen: &str, pid: u32) -> bool {
    let pid = pid.to_string();
    screen.lines().any(|line| line.split_whitespace().next() == Some(pid.as_str()))
}

#[test]
fn top_lists_two_cooperating_processes_and_drops_them_when_they_exit() {
    let tag = format!(
        "{}-{}",
        std::process::id(),
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
    );
    let mut cleanup = Cleanup {
        children: Vec::new(),
        tmux_socket: None,
        set: format!("cotenant-test-top-{}", std::process::id()),
        dir: private_dir(),
    };
    let dir = cleanup.dir.clone();
    let set = cleanup.set.clone();
    cleanup.children.push(start_pool_process(&set, &dir));
    cleanup.children.push(start_pool_process(&set, &dir));
    let pids: Vec<u32> = cleanup.children.iter().map(Child::id).collect();

    // 1. One snapshot lists both, engaged on the shared set, with their targets and tokens.
    let (listed, after) = wait_for("both processes listed by top --once --json, tokens engaged", || {
        let processes = snapshot(&dir);
        let ours: Vec<Value> =
            processes.into_iter().filter(|p| pids.iter().any(|&pid| p["pid"] == pid)).collect();
        let engaged = ours.len() == 2 && ours.iter().all(|p| p["pools"][0]["tokens"] == "engaged");
        engaged.then_some(ours)
    });
    eprintln!("top --once --json listed both processes after {after:?}");
    let tokens = listed_tokens(&set).expect("the shared set is listed by cotenant tokens list");
    for process in &listed {
        let pools = process["pools"].as_array().expect("pools");
        assert_eq!(pools.len(), 1, "{process}");
        let pool = &pools[0];
        assert_eq!(pool["name"], "lab", "{process}");
        assert_eq!(pool["token_set"], set.as_str(), "{process}");
        assert_eq!(pool["token_count"].as_u64(), Some(tokens), "the set's own count: {process}");
        let (threads, target) = (pool["threads"].as_u64().unwrap(), pool["target"].as_u64().unwrap());
        assert!((1..=threads).contains(&target), "target within 1..=threads: {process}");
        assert!(pool["token_holds"].as_u64().unwrap() <= tokens, "{process}");
        assert!(process["command"].as_str().is_some_and(|c| !c.is_empty()), "{process}");
    }

    // 2. The live view, in a real terminal.
    if Command::new("tmux").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        eprintln!("top_lists_two_cooperating_processes_and_drops_them_when_they_exit: SKIPPED: no tmux");
        return;
    }
    let socket = format!("cotenant-test-top-{tag}");
    cleanup.tmux_socket = Some(socket.clone());
    let tmux = |args: &[&str]| {
        Command::new("tmux").args(["-L", socket.as_str()]).args(args).output().expect("tmux runs")
    };
    // The pane stays after `top` exits, saying how it exited. Bounded in time, and the session
    // ends itself once this test's process is gone: if the test is killed before its guard
    // runs, neither `top` nor the tmux server outlives it for long.
    let shell = format!(
        "(while kill -0 {test_pid} 2>/dev/null; do sleep 1; done; tmux -L {socket} kill-server) & \
         timeout --foreground 120 '{}' top --dir '{}'; echo \"top exited: $?\"; sleep 60",
        env!("CARGO_BIN_EXE_cotenant"),
        dir.display(),
        test_pid = std::process::id(),
    );
    let started =
        tmux(&["-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "200", "-y", "50", shell.as_str()]);
    assert!(started.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&started.stderr));
    let screen = || String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned();

    let (_, seen) = wait_for("both rows on the live view", || {
        pids.iter().all(|&pid| shows(&screen(), pid)).then_some(())
    });
    eprintln!(
        "the live view showed both rows after {seen:?} (acceptance: within {ACCEPTANCE:?}: {})",
        if seen <= ACCEPTANCE { "met" } else { "NOT met" }
    );

    cleanup.kill_children();
    let (_, gone) = wait_for("neither row on the live view after the processes exited", || {
        let text = screen();
        pids.iter().all(|&pid| !shows(&text, pid)).then_some(())
    });
    eprintln!(
        "the live view dropped both rows {gone:?} after they exited (acceptance: within {ACCEPTANCE:?}: {})",
        if gone <= ACCEPTANCE { "met" } else { "NOT met" }
    );
    for pid in &pids {
        assert!(!dir.join(format!("{pid}.status")).exists(), "the stale record of {pid} was removed");
    }

    // 3. `q` quits, and the terminal is given back (the shell goes on to print the status).
    let quit = tmux(&["send-keys", "-t", "top", "q"]);
    assert!(quit.status.success(), "tmux send-keys: {}", String::from_utf8_lossy(&quit.stderr));
    wait_for("top to quit on q with status 0", || screen().contains("top exited: 0").then_some(()));
}

//! `cotenant size` end to end: seed 002's two examples, the CPU count defaulting to this
//! process's cotenant limit, and bad input (each error names the argument).

use serde_json::Value;
use std::process::{Command, Output};

fn size(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cotenant")).arg("size").args(args).output().expect("cotenant size runs")
}

fn json(args: &[&str]) -> Value {
    let out = size(&[args, &["--json"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_seeds_formula_example_gives_70_with_its_arithmetic() {
    let out = size(&["--cpus", "8", "--util", "0.8", "--wait", "50ms", "--compute", "5ms"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("70\n"), "{text}");
    assert!(
        text.contains(
            "8 CPUs × 0.8 utilization × (1 + 50 ms wait / 5 ms compute) = 8 × 0.8 × 11 = 70.4 → 70 threads"
        ),
        "{text}"
    );
    let v = json(&["--cpus", "8", "--util", "0.8", "--wait", "50ms", "--compute", "5ms"]);
    assert_eq!((v["method"].as_str(), v["threads"].as_u64()), (Some("utilization"), Some(70)));
    assert!((v["exact"].as_f64().unwrap() - 70.4).abs() < 1e-9);
    assert_eq!(v["cpus_source"], "--cpus");
}

#[test]
fn the_seeds_littles_law_example_gives_25() {
    let v = json(&["--rate", "500", "--latency", "50ms"]);
    assert_eq!((v["method"].as_str(), v["threads"].as_u64()), (Some("littles-law"), Some(25)));
    assert_eq!(v["arithmetic"], "L = λ × W = 500 requests/s × 50 ms = 25 → 25 threads");
    assert!(v.get("cpus_source").is_none());
}

#[test]
fn without_cpus_the_formula_uses_this_processs_limit() {
    let v = json(&["--wait", "0s", "--compute", "1ms"]);
    assert_eq!(v["cpus_source"], "cotenant cpus (this process's limit)");
    // CPU-bound work at full utilisation: about one thread per CPU of the limit.
    let cpus = Command::new(env!("CARGO_BIN_EXE_cotenant")).args(["cpus", "--json"]).output().unwrap();
    let limit = serde_json::from_slice::<Value>(&cpus.stdout).unwrap()["limit"].as_f64().unwrap();
    assert_eq!(v["threads"].as_u64().unwrap(), (limit.round() as u64).max(1));
}

#[test]
fn bad_input_is_refused_naming_the_argument() {
    let cases: [(&[&str], &str); 8] = [
        (&[], "nothing to size"),
        (&["--rate", "500", "--latency", "50ms", "--wait", "1ms"], "not both"),
        (&["--rate", "500"], "--latency is missing"),
        (&["--wait", "50ms"], "--compute is missing"),
        (&["--wait", "50", "--compute", "5ms"], "needs a unit"),
        (&["--util", "80", "--wait", "1ms", "--compute", "1ms"], "at most 1"),
        (&["--cpus=-2", "--wait", "1ms", "--compute", "1ms"], "--cpus"),
        (&["--wait", "1ms", "--compute", "0ms", "--cpus", "2"], "compute must be a positive number"),
    ];
    for (args, expected) in cases {
        let out = size(args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// `--pid`: a child `sleep` is one thread named `sleep` that never runs; `--json` has the
/// documented shape. The child is killed on every path (guard).
#[test]
fn a_running_process_is_grouped_and_sized() {
    struct Child(std::process::Child);
    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Child(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = child.0.id().to_string();
    // `spawn` returns once exec succeeded, but the loader and libc start-up still run before
    // `sleep` sleeps; on a busy host that CPU time can fall into the sample (seen in CI:
    // running_fraction 0.25). Sample only once the child is asleep ('S' in /proc/PID/stat).
    let asleep = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('S')))
            .unwrap_or(false)
    };
    let start = std::time::Instant::now();
    while !asleep() {
        assert!(start.elapsed() < std::time::Duration::from_secs(30), "the child never went to sleep");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let v = json(&["--pid", &pid, "--duration", "300ms", "--cpus", "2"]);
    assert_eq!(v["pid"].as_u64().unwrap().to_string(), pid);
    assert_eq!(v["cpus"], 2.0);
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{v}");
    let g = &groups[0];
    assert_eq!((g["pattern"].as_str(), g["threads"].as_u64()), (Some("sleep"), Some(1)));
    assert_eq!(g["running_fraction"], 0.0);
    assert!(g["wait_compute_ratio"].is_null() && g["recommended"].is_null(), "it never ran: {g}");
    assert_eq!(g["oversized"], false);
    let mixed = size(&["--pid", &pid, "--wait", "1ms"]);
    assert!(String::from_utf8_lossy(&mixed.stderr).contains("--pid measures W/C itself"));
}

#[test]
fn a_missing_process_is_named() {
    let out = size(&["--pid", "999999999", "--duration", "100ms", "--cpus", "2"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("pid 999999999") && stderr.contains("/proc/999999999/task"), "{stderr}");
}

/// Issue 9's acceptance: 8 threads that each sleep 45 ms and compute 5 ms (of their own CPU
/// time, so a busy host stretches the wall time, not the measurement) read W/C within 30 % of 9
/// and a recommendation within 30 % of the formula's, 2 CPUs × (1 + 9) = 20. The threads are
/// this test's own, named `iopool-<n>`, sampled by `cotenant size --pid <this process>`.
///
/// A 3 s window holds about 60 of a thread's cycles on a quiet host and fewer on a loaded one,
/// where a window that starts and ends mid-cycle, or a sample taken while the host held the
/// sampler up, can move one reading out of the band. The estimate has no bias for load to
/// push it off (run-queue waits count as neither W nor C): a reading out of the band is
/// taken again, up to `WINDOWS` times, and a wrong estimator misses in every one.
#[test]
fn eight_threads_of_45_ms_waiting_and_5_ms_computing_read_w_over_c_near_9() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid out-pointer for the call.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
    let stop = Arc::new(AtomicBool::new(false));
    // A thread takes its name itself, once it first runs (Rust's std names it from inside):
    // on a loaded host a sample taken before that counts it under its parent's name (found by
    // `make test` beside two busy threads: "threads: 7"). Each says when it runs.
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..8)
        .map(|n| {
            let stop = stop.clone();
            let started = started.clone();
            std::thread::Builder::new()
                .name(format!("iopool-{n}"))
                .spawn(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(45));
                        let start = thread_cpu();
                        while thread_cpu() - start < Duration::from_millis(5) {
                            std::hint::spin_loop();
                        }
                    }
                })
                .unwrap()
        })
        .collect();
    // Stop the threads on every path, the failing assertions' included.
    struct Stop(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
            for handle in self.1.drain(..) {
                let _ = handle.join();
            }
        }
    }
    let _stop = Stop(stop, workers);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while started.load(Ordering::SeqCst) < 8 {
        assert!(std::time::Instant::now() < deadline, "the 8 threads did not start within 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = std::process::id().to_string();
    // The band is the scheduler statistics' estimate's. Without them (no file, or `0 0 0` even
    // for this running thread) the tool counts state samples, about 3 of 30 per thread in a
    // window: far too few for ± 30 %.
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let precise = !schedstat.split_whitespace().all(|field| field == "0");
    const WINDOWS: usize = 3;
    let mut missed = Vec::new();
    for _ in 0..WINDOWS {
        let v = json(&["--pid", &pid, "--duration", "3s", "--cpus", "2"]);
        let groups = v["groups"].as_array().unwrap();
        let pool = groups
            .iter()
            .find(|g| g["pattern"] == "iopool-*")
            .unwrap_or_else(|| panic!("no iopool-* group: {v}"));
        assert_eq!(pool["threads"], 8, "{pool}");
        let ratio = pool["wait_compute_ratio"].as_f64().unwrap_or_else(|| panic!("no W/C: {pool}"));
        let recommended = pool["recommended"].as_f64().unwrap_or_else(|| panic!("no recommendation: {pool}"));
        if !precise {
            eprintln!("skipped the W/C band: this kernel keeps no scheduler statistics ({schedstat:?})");
            return;
        }
        if (9.0 * 0.7..=9.0 * 1.3).contains(&ratio) {
            assert!(
                (20.0 * 0.7..=20.0 * 1.3).contains(&recommended),
                "recommended {recommended}, formula 20 for W/C {ratio}: {pool}"
            );
            return;
        }
        eprintln!("W/C {ratio} out of 9 ± 30 % in this window: {pool}");
        missed.push(ratio);
    }
    panic!("W/C out of 9 ± 30 % in all {WINDOWS} windows of 3 s: {missed:?}");
}

//! `controller_cost`: the CPU that cotenant's adaptive controller thread uses, with the pool idle
//! and with the pool saturated.
//!
//! 1. Build an adaptive pool of `n` threads and find its controller thread by name, scanning
//!    `/proc/self/task/*/comm` (default `cotenant-ctl`). None found: an error, naming the threads
//!    that were seen.
//! 2. **Idle**: read the thread's CPU time, sleep for the window, read it again.
//! 3. **Saturated**: the same, while this thread keeps resubmitting small busy tasks for the whole
//!    window (the queue is bounded and blocks when full, so the pool stays saturated without the
//!    queue growing): the controller may work harder when the pool is busy.
//! 4. **Saturated, cooperating**: the same again while a second default pool of this process
//!    shares the default host-token set, so the measured pool is engaged (its workers take a
//!    token per task) and its controller decides every period (an engaged pool never coasts,
//!    `policy/coast.rs`). Where host tokens are unavailable, the row says why instead.
//! 5. Report each as "% of one CPU" = CPU time / wall time.
//!
//! Beside the controller, the same windows measure a **wake-up floor**: a thread of this
//! benchmark that wakes every controller period (a timed condition-variable wait, as the
//! controller sleeps) and does nothing else. What a thread pays just to wake up 100 times a
//! second on a busy host (the timer, the switch, cold caches) is the least any controller that
//! decides every clock tick can cost; the controller's cost above it is its own work.
//!
//! CPU time comes from fields 14 + 15 (utime + stime) of `/proc/self/task/<tid>/stat`, in clock
//! ticks (`sysconf(_SC_CLK_TCK)`, usually 100 Hz: a 10 ms resolution, so use windows of several
//! seconds). Where the kernel has schedstats, the nanosecond run time from
//! `/proc/self/task/<tid>/schedstat` is reported beside it.

use std::fs;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::peers::QUEUE_CAPACITY;
use cotenant::internal::procfs::{pidstat, schedstat};

/// Where this process's threads are listed.
const TASK_DIR: &str = "/proc/self/task";
/// The kernel keeps at most this many bytes of a thread's name in `comm`.
const COMM_LEN: usize = 15;
/// How long to look for the controller thread after building the pool (it names itself once it
/// has started).
const FIND_LIMIT: Duration = Duration::from_secs(1);
/// How long each task of the saturated phase keeps its worker busy.
const BUSY_TASK: Duration = Duration::from_micros(20);

/// CPU use of the controller thread(s) over one window.
struct Window {
    /// Wall time of the window.
    wall: Duration,
    /// utime + stime accrued, in clock ticks.
    ticks: u64,
    /// Nanoseconds on a CPU accrued, if schedstats are available.
    run_ns: Option<u64>,
}

/// Runs the measurement with windows of `seconds` and prints the table; `thread_name` is the
/// controller thread's name.
pub fn run(seconds: f64, threads: usize, thread_name: &str) -> Result<(), String> {
    let ticks_per_second = clock_ticks_per_second()?;
    let window = Duration::from_secs_f64(seconds);
    let pool = cotenant::Pool::builder()
        .policy(cotenant::Policy::adaptive())
        .threads(threads)
        .queue_capacity(QUEUE_CAPACITY)
        .on_full(cotenant::Full::Block)
        .build()
        .map_err(|e| format!("cotenant pool: {e}"))?;
    let floor = Floor::start(cotenant::pool::default_period())?;
    let measured = measure(&pool, window, thread_name, floor.tid);
    pool.shutdown();
    floor.stop();
    let Measured {
        tids,
        windows: [idle, saturated, floor_idle, floor_saturated],
        tasks_run,
        cooperating,
        decided,
    } = measured?;

    let tids = tids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    println!("## controller cost: thread `{thread_name}` (tid {tids}), adaptive pool of {threads} threads\n");
    println!(
        "| thread | pool | window | CPU time (stat) | % of one CPU (stat) \
         | CPU time (schedstat) | % of one CPU (schedstat) |\n|---|---|---:|---:|---:|---:|---:|"
    );
    let mut rows = vec![
        ("controller", "idle", &idle),
        ("controller", "saturated", &saturated),
        ("wake-up floor", "idle", &floor_idle),
        ("wake-up floor", "saturated", &floor_saturated),
    ];
    if let Cooperating::Measured { controller, floor, .. } = &cooperating {
        rows.insert(2, ("controller", "saturated, cooperating", controller));
        rows.push(("wake-up floor", "saturated, cooperating", floor));
    }
    for (thread, label, w) in rows {
        let wall = w.wall.as_secs_f64();
        let stat_seconds = w.ticks as f64 / ticks_per_second;
        let schedstat = match w.run_ns {
            Some(ns) => {
                let run_seconds = ns as f64 / 1e9;
                format!("{run_seconds:.4} s | {:.3} %", 100.0 * run_seconds / wall)
            }
            None => "n/a | n/a".to_owned(),
        };
        println!(
            "| {thread} | {label} | {wall:.2} s | {stat_seconds:.2} s ({} ticks) | {:.3} % | {schedstat} |",
            w.ticks,
            100.0 * stat_seconds / wall
        );
    }
    println!(
        "\n% of one CPU = the thread's CPU time / wall time. Resolution of the stat columns: one tick \
         ({ticks_per_second} Hz) = {:.3} % of one CPU over a {seconds} s window.",
        100.0 / ticks_per_second / seconds
    );
    println!("Saturated: {tasks_run} busy tasks of {} µs ran during the window.", BUSY_TASK.as_micros());
    let cooperating_decided = match &cooperating {
        Cooperating::Measured { decided, .. } => decided.to_string(),
        Cooperating::Unavailable(_) => "n/a".to_owned(),
    };
    println!(
        "Decisions of the measured pool per window (the samples its controller decided from; the wake-up \
         floor wakes every period, about {} times a window): idle {}, saturated {}, saturated and \
         cooperating {cooperating_decided}. A pool that coasts is sampled every two or four periods, \
         an idle process naps: fewer wake-ups than the floor's.",
        (window.as_secs_f64() / cotenant::pool::default_period().as_secs_f64()).round(),
        decided[0],
        decided[1],
    );
    match &cooperating {
        Cooperating::Measured { tasks_run, token_takes, .. } => println!(
            "Saturated, cooperating: a second default pool of this process shared the host-token set, so the \
             measured pool was engaged; {tasks_run} busy tasks ran, {token_takes} host tokens were taken."
        ),
        Cooperating::Unavailable(why) => println!("Saturated, cooperating: not measured ({why})."),
    }
    println!(
        "Wake-up floor: a thread that wakes every {:?} (the default controller period) and does nothing \
         else, measured in the same windows: what waking up alone costs on this host.",
        cotenant::pool::default_period()
    );
    Ok(())
}

/// The wake-up floor's thread: a timed wait of one period, again and again, until stopped.
struct Floor {
    tid: u32,
    stop: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: thread::JoinHandle<()>,
}

impl Floor {
    fn start(period: Duration) -> Result<Floor, String> {
        let stop = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let flag = Arc::clone(&stop);
        let thread = thread::Builder::new()
            .name("cotenant-floor".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                let _ = tid_tx.send(unsafe { libc::gettid() } as u32);
                let (lock, wake) = &*flag;
                let mut stopped = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                while !*stopped {
                    stopped = wake
                        .wait_timeout(stopped, period)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
            })
            .map_err(|e| format!("cannot start the wake-up floor's thread: {e}"))?;
        let tid = tid_rx.recv().map_err(|_| "the wake-up floor's thread did not start".to_owned())?;
        Ok(Floor { tid, stop, thread })
    }

    fn stop(self) {
        *self.stop.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.stop.1.notify_all();
        let _ = self.thread.join();
    }
}

/// The saturated window with the measured pool's host tokens engaged, or why there is none.
enum Cooperating {
    Measured { controller: Window, floor: Window, tasks_run: u64, token_takes: u64, decided: u64 },
    Unavailable(String),
}

/// What `measure` found: the controller's thread ids, the first windows (controller idle,
/// saturated; floor idle, saturated), the number of busy tasks run while saturated, the
/// cooperating window, and the pool's decisions in the idle and the saturated window.
struct Measured {
    tids: Vec<u32>,
    windows: [Window; 4],
    tasks_run: u64,
    cooperating: Cooperating,
    decided: [u64; 2],
}

/// How long the measured pool may take to engage once a second pool shares its set: the
/// controller engages a gated pool at its next decision, at most four periods away when the
/// pool coasts (`policy/coast.rs`).
const ENGAGE_LIMIT: Duration = Duration::from_secs(2);

/// Finds the controller, then measures the idle window, the saturated one and the saturated
/// one with cooperation engaged, for the controller and for the wake-up floor's thread
/// `floor`.
fn measure(
    pool: &cotenant::Pool,
    window: Duration,
    thread_name: &str,
    floor: u32,
) -> Result<Measured, String> {
    let tids = find_threads(thread_name)?;
    let decisions = || pool.metrics().decisions;
    let before_idle = decisions();
    let [idle, floor_idle] = observe([&tids, &[floor]], || thread::sleep(window))?;
    let before_saturated = decisions();
    let ran = Arc::new(AtomicU64::new(0));
    let [saturated, floor_saturated] = observe([&tids, &[floor]], || saturate(pool, window, &ran))?;
    let decided = [before_saturated - before_idle, decisions() - before_saturated];
    let tasks_run = ran.load(Ordering::Relaxed);
    let cooperating = cooperate(pool, window, &tids, floor)?;
    Ok(Measured {
        tids,
        windows: [idle, saturated, floor_idle, floor_saturated],
        tasks_run,
        cooperating,
        decided,
    })
}

/// Keeps `pool` saturated with small busy tasks for `window`, counting them in `ran`.
fn saturate(pool: &cotenant::Pool, window: Duration, ran: &Arc<AtomicU64>) {
    let start = Instant::now();
    while start.elapsed() < window {
        let ran = Arc::clone(ran);
        pool.execute(move || {
            busy_for(BUSY_TASK);
            ran.fetch_add(1, Ordering::Relaxed);
        });
    }
}

/// The saturated window again, with a second default pool of this process sharing the default
/// host-token set (a set is shared as soon as two pools use it, `tokens/set.rs`), so that the
/// measured pool's workers take tokens and its controller does the cooperating work.
fn cooperate(
    pool: &cotenant::Pool,
    window: Duration,
    tids: &[u32],
    floor: u32,
) -> Result<Cooperating, String> {
    let state = pool.metrics().host_tokens;
    if state != cotenant::metrics::TokenState::Alone {
        return Ok(Cooperating::Unavailable(format!(
            "the measured pool's host tokens are {}",
            state.as_str()
        )));
    }
    let partner = cotenant::Pool::builder()
        .threads(1)
        .name("cost-partner")
        .build()
        .map_err(|e| format!("second cotenant pool: {e}"))?;
    let start = Instant::now();
    while pool.metrics().host_tokens != cotenant::metrics::TokenState::Engaged {
        if start.elapsed() > ENGAGE_LIMIT {
            let state = pool.metrics().host_tokens;
            partner.shutdown();
            return Ok(Cooperating::Unavailable(format!(
                "the measured pool did not engage within {ENGAGE_LIMIT:?} of a second pool joining its set (still {})",
                state.as_str()
            )));
        }
        thread::sleep(Duration::from_millis(5));
    }
    let before = pool.metrics();
    let ran = Arc::new(AtomicU64::new(0));
    let windows = observe([tids, &[floor]], || saturate(pool, window, &ran));
    let after = pool.metrics();
    let token_takes = after.token_takes.saturating_sub(before.token_takes);
    let decided = after.decisions.saturating_sub(before.decisions);
    partner.shutdown();
    let [controller, floor] = windows?;
    Ok(Cooperating::Measured {
        controller,
        floor,
        tasks_run: ran.load(Ordering::Relaxed),
        token_takes,
        decided,
    })
}

/// The CPU time each group of threads accrues while `during` runs.
fn observe<const N: usize>(groups: [&[u32]; N], during: impl FnOnce()) -> Result<[Window; N], String> {
    let mut before = Vec::with_capacity(N);
    for tids in groups {
        before.push(cpu_time(tids)?);
    }
    let start = Instant::now();
    during();
    let wall = start.elapsed();
    let mut windows = Vec::with_capacity(N);
    for (tids, (ticks_before, ns_before)) in groups.into_iter().zip(before) {
        let (ticks_after, ns_after) = cpu_time(tids)?;
        windows.push(Window {
            wall,
            ticks: ticks_after.saturating_sub(ticks_before),
            run_ns: ns_before.zip(ns_after).map(|(before, after)| after.saturating_sub(before)),
        });
    }
    windows.try_into().map_err(|_| "one window per group of threads".to_owned())
}

/// utime + stime (ticks) and, where available, schedstat run time (ns), summed over `tids`.
fn cpu_time(tids: &[u32]) -> Result<(u64, Option<u64>), String> {
    let mut ticks = 0_u64;
    let mut run_ns = Some(0_u64);
    for tid in tids {
        let path = format!("{TASK_DIR}/{tid}/stat");
        let stat = fs::read_to_string(&path)
            .map_err(|e| format!("{path}: {e} (has the controller thread exited?)"))?;
        ticks += pidstat::parse(&stat).map_err(|e| format!("{path}: {e}"))?.cpu_ticks;
        // The run time (ns) where the kernel keeps scheduler statistics: finer than the ticks.
        let text = fs::read_to_string(format!("{TASK_DIR}/{tid}/schedstat")).ok();
        let ns = text.as_deref().and_then(|t| schedstat::parse_task(t).ok()).map(|s| s.on_cpu_ns);
        run_ns = run_ns.zip(ns).map(|(sum, ns)| sum + ns);
    }
    Ok((ticks, run_ns))
}

/// The ids of this process's threads named `name`, waiting up to [`FIND_LIMIT`] for one to
/// appear; an error naming the threads seen if none does.
fn find_threads(name: &str) -> Result<Vec<u32>, String> {
    // `comm` holds at most COMM_LEN bytes of the name.
    let wanted = name.get(..COMM_LEN).unwrap_or(name);
    let deadline = Instant::now() + FIND_LIMIT;
    loop {
        let (matching, seen) = scan_threads(wanted)?;
        if !matching.is_empty() {
            return Ok(matching);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no thread named `{name}` in this process after building an adaptive pool \
                 (threads seen: {}); is the controller named differently? (--ctl-thread NAME)",
                seen.join(", ")
            ));
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// One pass over `/proc/self/task`: the ids of the threads whose `comm` is `wanted`, and every
/// name seen (sorted, deduplicated).
fn scan_threads(wanted: &str) -> Result<(Vec<u32>, Vec<String>), String> {
    let entries = fs::read_dir(TASK_DIR).map_err(|e| format!("{TASK_DIR}: {e}"))?;
    let mut matching = Vec::new();
    let mut seen = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{TASK_DIR}: {e}"))?;
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // A thread can exit between the listing and this read: skip it.
        let Ok(comm) = fs::read_to_string(entry.path().join("comm")) else {
            continue;
        };
        let comm = comm.trim_end_matches('\n');
        if comm == wanted {
            matching.push(tid);
        }
        seen.push(comm.to_owned());
    }
    matching.sort_unstable();
    seen.sort();
    seen.dedup();
    Ok((matching, seen))
}

/// `sysconf(_SC_CLK_TCK)`: the unit of the stat CPU-time fields, per second.
fn clock_ticks_per_second() -> Result<f64, String> {
    // SAFETY: sysconf reads a configuration value; it has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        Ok(hz as f64)
    } else {
        Err("sysconf(_SC_CLK_TCK) failed".to_owned())
    }
}

/// Keeps the calling thread on the CPU for `duration`.
fn busy_for(duration: Duration) {
    let start = Instant::now();
    while start.elapsed() < duration {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_named_thread_of_this_process() {
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let handle = thread::Builder::new()
            .name("bench-find-me".to_owned())
            .spawn(move || {
                started_tx.send(()).unwrap();
                let _ = stop_rx.recv();
            })
            .unwrap();
        started_rx.recv().unwrap();
        let tids = find_threads("bench-find-me").unwrap();
        assert_eq!(tids.len(), 1);
        let (ticks, _) = cpu_time(&tids).unwrap();
        assert!(ticks < 1_000, "an idle thread used {ticks} ticks");
        stop_tx.send(()).unwrap();
        handle.join().unwrap();
    }

    #[test]
    fn a_missing_thread_is_an_error() {
        let err = find_threads("no-such-thread").unwrap_err();
        assert!(err.contains("no thread named `no-such-thread`"), "{err}");
    }
}

//! The two tenants of `lab isolation` (seed 003), as hidden modes of the binary
//! (`cotenant lab-tenant server|batch`), each started by the lab in its own cgroup.
//!
//! - **A, the server**: a real HTTP/1.1 server (tiny_http) whose one endpoint does about
//!   `--work-us` of CPU work (calibrated fib chunks) on a cotenant pool of `--threads` workers
//!   (fixed: "a worker pool sized to the CPU count"), pinned with `--pin`. It prints
//!   `port N` when it listens and serves until its stdin closes (the lab holds the other end).
//! - **B, the batch job**: CPU-bound chunks on every CPU, counted; it reports how many
//!   completed in the lab's measuring window. `--mode plain` runs one thread per CPU (at
//!   `--priority normal|nice|idle`), `adaptive` runs them on a cotenant adaptive pool (the
//!   cooperative scenario), `background` on a cotenant background pool (`SCHED_IDLE`).

use std::io::{BufRead, Read, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::workload::{calibrate, fib, CHUNK_FIB};
use crate::args::{BatchMode, BatchPriority, LabTenantArgs, TenantRole};

/// B's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchReport {
    /// Chunks completed inside the measuring window.
    pub chunks: u64,
    /// The window's length (s).
    pub seconds: f64,
    /// Chunks per second in the window.
    pub chunks_per_s: f64,
    /// How B's threads ran (`SCHED_IDLE`, nice 19, ...).
    pub priority: String,
}

/// `cotenant lab-tenant server|batch`: runs one tenant of `lab isolation` until the lab is
/// done with it; it dies with the lab (`PR_SET_PDEATHSIG`) and refuses to start once the lab
/// (`--parent`) is gone.
pub fn run(args: &LabTenantArgs) -> anyhow::Result<ExitCode> {
    // SAFETY: prctl with PR_SET_PDEATHSIG and a signal number has no memory effects.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } as u32 != args.parent {
        bail!("the lab (pid {}) is gone; not starting", args.parent);
    }
    match args.role {
        TenantRole::Server => server(args),
        TenantRole::Batch => batch(args),
    }
}

fn server(args: &LabTenantArgs) -> anyhow::Result<ExitCode> {
    let work = calibrate(Duration::from_micros(args.work_us));
    let threads = args.threads.unwrap_or_else(|| num_cpus::get().max(1));
    let pool = Arc::new(
        cotenant::Pool::builder()
            .policy(cotenant::Policy::fixed(threads))
            .threads(threads)
            .pin_workers(args.pin)
            .name("tenant-a")
            .build()
            .context("building tenant A's pool")?,
    );
    let server = Arc::new(
        tiny_http::Server::http("127.0.0.1:0").map_err(|e| anyhow::anyhow!("listening on loopback: {e}"))?,
    );
    let port = server.server_addr().to_ip().context("the server has no IP address")?.port();
    println!("port {port}");
    std::io::stdout().flush()?;
    // Serve until the lab closes our stdin.
    let done = Arc::new(AtomicBool::new(false));
    {
        let (done, server) = (done.clone(), server.clone());
        std::thread::spawn(move || {
            let _ = std::io::stdin().lock().read_to_end(&mut Vec::new());
            done.store(true, Ordering::SeqCst);
            server.unblock();
        });
    }
    while !done.load(Ordering::SeqCst) {
        let Ok(request) = server.recv() else { break };
        pool.execute(move || {
            let sum = work.work();
            let body = if sum == 42 { "!\n" } else { "ok\n" };
            let _ = request.respond(tiny_http::Response::from_string(body));
        });
    }
    pool.shutdown_now();
    Ok(ExitCode::from(cotenant_ops::exit::OK))
}

/// Lowers the calling thread (and the threads it starts after, which inherit it).
fn lower(priority: BatchPriority) -> anyhow::Result<&'static str> {
    match priority {
        BatchPriority::Normal => Ok("normal"),
        BatchPriority::Nice => {
            // SAFETY: setpriority only reads its arguments; PRIO_PROCESS with 0 is this thread.
            if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) } != 0 {
                bail!("nice 19: {}", std::io::Error::last_os_error());
            }
            Ok("nice 19")
        }
        BatchPriority::Idle => {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: param is valid plain data; pid 0 is the calling thread.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
                bail!("SCHED_IDLE: {}", std::io::Error::last_os_error());
            }
            Ok("SCHED_IDLE")
        }
    }
}

fn chunk() -> u64 {
    fib(std::hint::black_box(CHUNK_FIB))
}

fn batch(args: &LabTenantArgs) -> anyhow::Result<ExitCode> {
    let cpus = num_cpus::get().max(1);
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let from = UNIX_EPOCH + Duration::from_nanos(args.measure_from_ns);
    let window = Duration::from_millis(args.measure_ms);
    let mut priority = "normal".to_owned();
    let mut threads = Vec::new();
    let mut pool = None;
    match args.mode {
        BatchMode::Plain => {
            priority = lower(args.priority)?.to_owned();
            for _ in 0..cpus {
                let (count, stop) = (count.clone(), stop.clone());
                threads.push(std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::black_box(chunk());
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
        }
        BatchMode::Adaptive | BatchMode::Background => {
            let background = args.mode == BatchMode::Background;
            let policy =
                if background { cotenant::Policy::fixed(cpus) } else { cotenant::Policy::adaptive() };
            let built = Arc::new(
                cotenant::Pool::builder()
                    .policy(policy)
                    .threads(cpus)
                    .background(background)
                    .queue_capacity(2 * cpus)
                    .on_full(cotenant::Full::Block)
                    .name("tenant-b")
                    .build()
                    .context("building tenant B's pool")?,
            );
            if let Some(b) = &built.placement().background {
                priority = b.to_string();
            }
            // Feed it ~1 ms tasks; the queue's capacity makes the feeder wait when it is full.
            let (feeder_pool, count, stop) = (built.clone(), count.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                // The whole batch job runs in the background, its feeder too. (Before the
                // pool woke blocked submitters only at half a queue, this feeder woken at every
                // pop gave A 11x its alone p99; RESULTS.md "isolation".)
                if background {
                    cotenant::background_current_thread();
                }
                while !stop.load(Ordering::Relaxed) {
                    let (count, stop) = (count.clone(), stop.clone());
                    feeder_pool.execute(move || {
                        for _ in 0..50 {
                            if stop.load(Ordering::Relaxed) {
                                return;
                            }
                            std::hint::black_box(chunk());
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            }));
            pool = Some(built);
        }
    }
    sleep_until(from);
    let first = count.load(Ordering::Relaxed);
    sleep_until(from + window);
    let last = count.load(Ordering::Relaxed);
    stop.store(true, Ordering::SeqCst);
    if let Some(pool) = &pool {
        pool.shutdown_now();
    }
    for t in threads {
        let _ = t.join();
    }
    let seconds = window.as_secs_f64();
    let chunks = last - first;
    let report = BatchReport { chunks, seconds, chunks_per_s: chunks as f64 / seconds, priority };
    println!("{}", serde_json::to_string(&report)?);
    Ok(ExitCode::from(cotenant_ops::exit::OK))
}

fn sleep_until(at: SystemTime) {
    if let Ok(wait) = at.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
}

/// Reads the server's `port N` line.
pub fn read_port(stdout: &mut impl BufRead) -> anyhow::Result<u16> {
    let mut line = String::new();
    stdout.read_line(&mut line).context("reading tenant A's port")?;
    parse_port(&line)
}

/// `port N` → N.
pub fn parse_port(line: &str) -> anyhow::Result<u16> {
    line.trim()
        .strip_prefix("port ")
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("tenant A printed {:?}, not `port N`", line.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_line_is_parsed_or_named_in_the_error() {
        assert_eq!(parse_port("port 41234\n").unwrap(), 41234);
        let err = parse_port("listening\n").unwrap_err().to_string();
        assert!(err.contains("\"listening\""), "{err}");
        assert!(parse_port("port 99999").is_err());
    }
}

//! An open-loop HTTP/1.1 load generator for `lab isolation`: requests at a constant rate to a
//! loopback address, each latency measured from the request's *intended* send time, so a slow
//! server cannot slow the client down and hide its own slowness (no coordinated omission).
//!
//! Request `k` is due at `start + k / rate`. Each of `connections` threads owns one keep-alive
//! connection, takes the next due request, waits for its time, sends it and reads the answer;
//! when every connection is busy, the next request goes out late and its lateness counts.
//! Latencies go into an HDR histogram (µs, 3 significant digits). The run is bounded: requests
//! due after `duration` are not sent, and a request unanswered for [`REQUEST_TIMEOUT`] is an
//! error.
//!
//! Where the client runs matters as much as the server: on one host, the client's own threads
//! wait for a CPU behind the neighbour B like anyone else, and every such wait counts as A's
//! latency. [`ClientPriority::Realtime`] runs the connection threads at `SCHED_FIFO` 1 so
//! that they stand in for a client on another host (the lab's client is light: 2000 small
//! requests/s); on the test VM, with B at `SCHED_IDLE` in A's cgroup, A's p99 went from 13x
//! baseline (46x in a shorter check) to 1.4x (RESULTS.md, "The load generator's own
//! scheduling"); with B in a cgroup of its own nothing changed.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;

/// How long one request may take before it counts as an error.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How the load generator's connection threads are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ClientPriority {
    /// `SCHED_FIFO` priority 1 (needs root or `CAP_SYS_NICE`; otherwise normal, reason recorded).
    Realtime,
    /// The normal policy: the client competes for CPUs with the tenants.
    Normal,
}

/// What a run measured.
pub struct LoadResult {
    /// Latency from the intended send time to the end of the answer, µs.
    pub latency_us: Histogram<u64>,
    /// Requests answered.
    pub completed: u64,
    /// Requests that failed (connection error, timeout, bad answer).
    pub errors: u64,
    /// Requests due in the run.
    pub due: u64,
    /// How the connection threads ran: `SCHED_FIFO 1`, `normal`, or `normal (SCHED_FIFO
    /// refused: <error>)`.
    pub client_ran_as: String,
}

/// Applies `priority` to the calling thread; returns how it runs.
fn schedule_client_thread(priority: ClientPriority) -> String {
    match priority {
        ClientPriority::Normal => "normal".to_owned(),
        ClientPriority::Realtime => {
            let param = libc::sched_param { sched_priority: 1 };
            // SAFETY: plain syscall on the calling thread (0) with a valid parameter.
            // RESET_ON_FORK: nothing this thread might start inherits the real-time policy.
            let policy = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
            if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
                "SCHED_FIFO 1".to_owned()
            } else {
                format!("normal (SCHED_FIFO refused: {})", std::io::Error::last_os_error())
            }
        }
    }
}

/// Requests due in `duration` at `rate` per second.
pub fn due_requests(rate: f64, duration: Duration) -> u64 {
    if !rate.is_finite() || rate <= 0.0 {
        return 0;
    }
    (rate * duration.as_secs_f64()).floor() as u64
}

/// When request `k` is due, from the start.
pub fn due_at(k: u64, rate: f64) -> Duration {
    Duration::from_secs_f64(k as f64 / rate)
}

/// Sends `GET /` at `rate` per second to `addr` for `duration` over `connections` keep-alive
/// connections.
pub fn drive(
    addr: SocketAddr,
    rate: f64,
    duration: Duration,
    connections: usize,
    priority: ClientPriority,
) -> anyhow::Result<LoadResult> {
    let due = due_requests(rate, duration);
    let next = Arc::new(AtomicU64::new(0));
    // Connect first, one connection at a time, each answering one unmeasured request before
    // the next opens: a connection set up while the clock runs would count its handshake
    // against the server, and a server that hands connections to a thread pool (tiny_http
    // does) can leave a burst of new connections queued behind the busy ones until they close.
    let conns: Vec<BufReader<TcpStream>> = (0..connections.max(1))
        .map(|_| {
            let mut conn = connect(addr)?;
            request(&mut conn)?;
            Ok(conn)
        })
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("opening {connections} connections to {addr}"))?;
    let start = Instant::now() + Duration::from_millis(20);
    let workers: Vec<_> = conns
        .into_iter()
        .map(|conn| {
            let next = next.clone();
            std::thread::spawn(move || {
                let ran_as = schedule_client_thread(priority);
                (connection_loop(addr, conn, rate, due, start, &next), ran_as)
            })
        })
        .collect();
    let mut result = LoadResult {
        latency_us: new_histogram(),
        completed: 0,
        errors: 0,
        due,
        client_ran_as: String::new(),
    };
    let mut ran_as_all: Vec<String> = Vec::new();
    for worker in workers {
        let ((hist, completed, errors), ran_as) =
            worker.join().map_err(|_| anyhow::anyhow!("a load generator thread panicked"))?;
        if !ran_as_all.contains(&ran_as) {
            ran_as_all.push(ran_as);
        }
        result.latency_us.add(&hist).context("merging latency histograms")?;
        result.completed += completed;
        result.errors += errors;
    }
    // Every thread asks for the same policy; they differ only if the kernel refused some.
    result.client_ran_as = ran_as_all.join("; ");
    Ok(result)
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

fn connect(addr: SocketAddr) -> std::io::Result<BufReader<TcpStream>> {
    let stream = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    Ok(BufReader::new(stream))
}

fn connection_loop(
    addr: SocketAddr,
    conn: BufReader<TcpStream>,
    rate: f64,
    due: u64,
    start: Instant,
    next: &AtomicU64,
) -> (Histogram<u64>, u64, u64) {
    let mut hist = new_histogram();
    let (mut completed, mut errors) = (0, 0);
    let mut conn = Some(conn);
    loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        if k >= due {
            break;
        }
        let intended = start + due_at(k, rate);
        if let Some(wait) = intended.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let answered = match conn.as_mut() {
            Some(c) => request(c),
            None => Err(std::io::Error::other("not connected")),
        };
        match answered {
            Ok(()) => {
                completed += 1;
                let us = Instant::now().saturating_duration_since(intended).as_micros() as u64;
                hist.saturating_record(us.max(1));
            }
            Err(_) => {
                errors += 1;
                conn = connect(addr).ok();
            }
        }
    }
    (hist, completed, errors)
}

/// One request and its whole answer on a keep-alive connection.
fn request(conn: &mut BufReader<TcpStream>) -> std::io::Result<()> {
    conn.get_mut().write_all(b"GET / HTTP/1.1\r\nHost: cotenant-lab\r\n\r\n")?;
    let mut length = None;
    let mut line = String::new();
    let mut first = true;
    loop {
        line.clear();
        if conn.read_line(&mut line)? == 0 {
            return Err(std::io::Error::other("connection closed"));
        }
        if first {
            if !line.starts_with("HTTP/1.1 200") {
                return Err(std::io::Error::other(format!("unexpected status line {line:?}")));
            }
            first = false;
        } else if line == "\r\n" {
            break;
        } else if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
    }
    let length = length.ok_or_else(|| std::io::Error::other("answer without Content-Length"))?;
    let mut body = vec![0; length];
    std::io::Read::read_exact(conn, &mut body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_due_at_a_constant_rate_and_bounded_by_the_duration() {
        assert_eq!(due_requests(2000.0, Duration::from_secs(5)), 10_000);
        assert_eq!(due_requests(0.0, Duration::from_secs(5)), 0);
        assert_eq!(due_requests(f64::NAN, Duration::from_secs(5)), 0);
        assert_eq!(due_at(0, 2000.0), Duration::ZERO);
        assert_eq!(due_at(3, 2000.0), Duration::from_micros(1500));
    }

    #[test]
    fn a_realtime_client_thread_runs_fifo_or_says_why_not() {
        let (before, realtime, after, priority) = std::thread::spawn(|| {
            // SAFETY: sched_getscheduler/sched_getparam query the calling thread.
            let before = unsafe { libc::sched_getscheduler(0) };
            let realtime = schedule_client_thread(ClientPriority::Realtime);
            let after = unsafe { libc::sched_getscheduler(0) };
            let mut param = libc::sched_param { sched_priority: -1 };
            unsafe { libc::sched_getparam(0, &mut param) };
            (before, realtime, after, param.sched_priority)
        })
        .join()
        .unwrap();
        if realtime == "SCHED_FIFO 1" {
            assert_eq!(after, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK);
            assert_eq!(priority, 1);
        } else {
            assert!(realtime.starts_with("normal (SCHED_FIFO refused: "), "{realtime}");
            assert_eq!(after, before, "a refusal leaves the thread as it was");
        }
    }

    #[test]
    fn a_run_against_a_real_server_counts_every_request() {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let addr = server.server_addr().to_ip().unwrap();
        let server = Arc::new(server);
        let serving = {
            let server = server.clone();
            std::thread::spawn(move || {
                while let Ok(r) = server.recv() {
                    let _ = r.respond(tiny_http::Response::from_string("ok\n"));
                }
            })
        };
        let result = drive(addr, 500.0, Duration::from_millis(200), 4, ClientPriority::Realtime).unwrap();
        server.unblock();
        serving.join().unwrap();
        assert_eq!(result.due, 100);
        assert_eq!(result.completed + result.errors, 100, "every due request is accounted for");
        assert_eq!(result.latency_us.len(), result.completed);
        // Four threads asked alike: one answer, not four.
        let ran_as = &result.client_ran_as;
        assert!(
            ran_as == "SCHED_FIFO 1"
                || ran_as.starts_with("normal (SCHED_FIFO refused: ") && !ran_as.contains(';'),
            "{ran_as}"
        );
    }
}

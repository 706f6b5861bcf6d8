//! An HTTP service that runs its CPU work on a [`cotenant::Pool`] and serves its metrics from a
//! [`cotenant::metrics::Registry`]: the pool's counters, gauges and histograms of queue wait and
//! run time, the CPU limit of the process and what sets it, and the host-token sets the pool
//! shares, as one Prometheus exposition. tokio and axum do the I/O on one thread; the pool
//! computes on as many threads as the CPU quota and the host's neighbours leave room for.
//!
//! ```text
//! cargo run -p cotenant-examples --bin http_service              # serves 127.0.0.1:8080
//! curl 'http://127.0.0.1:8080/work?n=1000000'
//! curl http://127.0.0.1:8080/metrics
//! cargo run -p cotenant-examples --bin http_service -- --once    # one request to itself, then exits
//! ```

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use cotenant::metrics::Registry;
use cotenant::{Full, JoinError, Pool};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The pool's `pool` label in the Prometheus text (and its worker threads' name prefix).
const POOL_NAME: &str = "http-work";

/// The largest `n` one request may ask for: bounds its work, and keeps the sum within a `u64`.
const MAX_N: u64 = 1_000_000;

const USAGE: &str = "usage: http_service [--addr HOST:PORT] [--once]";

fn main() -> ExitCode {
    let result = parse_args().map_err(BoxError::from).and_then(run);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("http_service: {error}");
            ExitCode::FAILURE
        }
    }
}

/// What every handler shares: cheap to clone (an `Arc` and a registry, itself an `Arc`), as
/// axum clones the state for each request.
#[derive(Clone)]
struct AppState {
    /// Runs the CPU work of `/work`.
    pool: Arc<Pool>,
    /// Renders `/metrics`. It holds the pool weakly: registering does not keep it alive.
    registry: Registry,
}

struct Args {
    /// Listen on a free local port, check one request to itself, and exit.
    once: bool,
    addr: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { once: false, addr: "127.0.0.1:8080".to_owned() };
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--once" => args.once = true,
            "--addr" => args.addr = argv.next().ok_or(USAGE)?,
            other => return Err(format!("unknown argument {other:?} ({USAGE})")),
        }
    }
    Ok(args)
}

fn run(args: Args) -> Result<(), BoxError> {
    // One worker per CPU the process may use (the cgroup quota included), parked when the
    // neighbours or the quota leave no room for it. `Reject` rather than the default `Block`:
    // a full queue must not block the runtime's thread; the request gets a 503 instead. The
    // task histograms (off by default) on: this service exports its queue wait and run time.
    let pool = Arc::new(Pool::builder().name(POOL_NAME).on_full(Full::Reject).task_histograms(true).build()?);
    // A registry rather than `pool.metrics().to_prometheus(..)`: it adds the CPU limit and the
    // token sets, and a second pool registered here would share each family's HELP and TYPE
    // lines instead of repeating them (which strict parsers reject).
    let registry = Registry::new();
    registry.register(POOL_NAME, &pool)?;
    let state = AppState { pool: pool.clone(), registry };
    // Accepting connections and parsing requests needs little CPU: one runtime thread, so that
    // the CPUs go to the pool.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let result = runtime.block_on(serve(args, state));
    drop(runtime);
    pool.shutdown(); // runs what is queued, joins the workers
    result
}

async fn serve(args: Args, state: AppState) -> Result<(), BoxError> {
    let app = Router::new().route("/work", get(work)).route("/metrics", get(metrics)).with_state(state);
    let addr = if args.once { "127.0.0.1:0" } else { args.addr.as_str() };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| format!("cannot listen on {addr}: {error}"))?;
    let local = listener.local_addr()?;
    println!("http_service: listening on http://{local}");
    if !args.once {
        axum::serve(listener, app).with_graceful_shutdown(ctrl_c()).await?;
        return Ok(());
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });
    // The checks use blocking std I/O: off the runtime's one thread.
    let checked = tokio::task::spawn_blocking(move || check(local)).await?;
    let _ = stop.send(());
    server.await??;
    checked
}

/// Resolves at the first Ctrl-C (SIGINT): the server then finishes its requests and returns.
async fn ctrl_c() {
    match tokio::signal::ctrl_c().await {
        Ok(()) => println!("http_service: shutting down"),
        Err(error) => {
            eprintln!("http_service: cannot listen for Ctrl-C ({error}); serving until killed");
            std::future::pending::<()>().await;
        }
    }
}

/// `GET /work?n=N`: the sum of the squares of 1..=N, computed on the pool.
async fn work(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<String, (StatusCode, String)> {
    let n =
        parse_n(query.get("n").map(String::as_str)).map_err(|message| (StatusCode::BAD_REQUEST, message))?;
    // A `Task` is a future: awaiting it frees the runtime's thread for other requests while a
    // pool worker computes.
    let sum = state.pool.spawn(move || sum_of_squares(n)).await.map_err(|error| {
        let status = match error {
            JoinError::Rejected => StatusCode::SERVICE_UNAVAILABLE, // queue full, or shutting down
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, format!("{error}\n"))
    })?;
    Ok(format!("sum of squares 1..={n} = {sum}\n"))
}

/// `GET /metrics`: the registry's exposition in the Prometheus text format (families listed in
/// the repository's `docs/metrics.md`). Rendered on the runtime's thread, without
/// `spawn_blocking`: it reads the pool's counters and, at most every few seconds, a few small
/// kernel files (the CPU limit), which take microseconds and never wait on a disk.
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.registry.render())
}

fn parse_n(n: Option<&str>) -> Result<u64, String> {
    let n = n.ok_or_else(|| format!("missing n: ask for /work?n=N, N from 1 to {MAX_N}\n"))?;
    match n.parse::<u64>() {
        Ok(value) if (1..=MAX_N).contains(&value) => Ok(value),
        _ => Err(format!("n must be a whole number from 1 to {MAX_N}, got {n:?}\n")),
    }
}

fn sum_of_squares(n: u64) -> u64 {
    (1..=n).map(|i| i * i).sum()
}

/// `--once`: the service answers its three kinds of request as it should.
fn check(addr: SocketAddr) -> Result<(), BoxError> {
    let (status, body) = http_get(addr, "/work?n=1000")?;
    if status != 200 || body != "sum of squares 1..=1000 = 333833500\n" {
        return Err(format!("GET /work?n=1000: status {status}, body {body:?}").into());
    }
    println!("http_service: GET /work?n=1000 -> {}", body.trim_end());
    let (status, body) = http_get(addr, "/work?n=lots")?;
    if status != 400 || !body.contains("whole number") {
        return Err(format!("GET /work?n=lots: expected 400, got status {status}, body {body:?}").into());
    }
    let (status, body) = http_get(addr, "/metrics")?;
    if status != 200 {
        return Err(format!("GET /metrics: status {status}, body {body:?}").into());
    }
    // The registry's families: the histogram buckets, one queue wait counted for the one task
    // run (the request for n=lots was refused before reaching the pool), and the CPU limit's
    // own sample (not only its error counter, which is there even when the limit is not).
    let expected = [
        ("the queue-wait histogram's buckets", "\ncotenant_pool_queue_wait_seconds_bucket{".to_owned()),
        (
            "one task's queue wait",
            format!("\ncotenant_pool_queue_wait_seconds_count{{pool=\"{POOL_NAME}\"}} 1\n"),
        ),
        ("the CPU limit", "\ncotenant_cpu_limit ".to_owned()),
    ];
    for (what, text) in &expected {
        if !body.contains(text.as_str()) {
            return Err(format!("GET /metrics: no {what} ({text:?}) in {body:?}").into());
        }
    }
    println!("http_service: GET /metrics -> {} lines of Prometheus text", body.lines().count());
    Ok(())
}

/// One HTTP/1.1 GET written by hand (a real client would use a crate such as reqwest or
/// hyper's client): the status code and the body.
fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), BoxError> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?; // the server closes the connection after its answer
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("GET {path}: no end of headers in {response:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("GET {path}: no status code in {head:?}"))?;
    Ok((status, body.to_owned()))
}

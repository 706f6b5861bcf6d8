//! An HTTP service whose request handling runs on cotenant's executor: an axum `Router` served
//! by hyper, each connection a future spawned on a [`cotenant::Pool`], while one small tokio
//! runtime drives the sockets and timers (`cotenant_examples::tokio_on_cotenant`): by default
//! from inside the pool's idle workers (`--reactor workers`, `WorkerReactor`), or on a thread of
//! its own (`--reactor thread`, `IoDriver`). Accepting, parsing, the handlers and the answers
//! all run on the pool's active workers, as many as the CPU quota and the neighbours leave
//! room for.
//!
//! ```text
//! cargo run --release -p cotenant-examples --bin async_service             # serves 127.0.0.1:3000
//! curl http://127.0.0.1:3000/                                              # ok
//! curl 'http://127.0.0.1:3000/work?ms=5'                                   # about 5 ms of computing
//! cargo run -p cotenant-examples --bin async_service -- --once             # one request to itself
//! cargo run --release -p cotenant-examples --bin async_service -- --bench  # against plain tokio
//! cargo run --release -p cotenant-examples --bin async_service -- --bench \
//!     --seconds 3 --rounds 5 --connections 16 --work-ms 0                  # the defaults
//! ```
//!
//! `--bench` serves the same `Router` two ways in one process, on two loopback ports: on the
//! cotenant executor as above, and on a plain tokio multi-thread runtime (its default workers,
//! one per CPU) with the same hyper connection loop. One client thread (a tokio current-thread
//! runtime, keep-alive connections written by hand) loads one server at a time, the order
//! alternating each round, and a markdown table gives each server's requests/s (median, min,
//! max over the rounds), their ratio, and the p99 latency the client saw over all the rounds.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use cotenant::Pool;
use cotenant_examples::comparison::{render_table, round_order, summarize, verdict, Series};
use cotenant_examples::http_client;
use cotenant_examples::tokio_on_cotenant::{self, IoDriver, WorkerReactor};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The pool's name (its worker threads' name prefix).
const POOL_NAME: &str = "http";
const DEFAULT_ADDR: &str = "127.0.0.1:3000";
/// The most computing one `/work` request may ask for.
const MAX_WORK_MS: u64 = 100;
/// `--once` ends within this, whatever hangs.
const ONCE_GUARD: Duration = Duration::from_secs(10);
const MAX_SECONDS: f64 = 3600.0;
const MAX_ROUNDS: u64 = 100;
const MAX_CONNECTIONS: u64 = 1000;
/// `--reactor` when not given.
const DEFAULT_REACTOR: ReactorKind = ReactorKind::Workers;

const USAGE: &str = "usage: async_service [--addr HOST:PORT] [--reactor thread|workers]
       async_service --once [--reactor thread|workers]
       async_service --bench [--seconds S] [--rounds R] [--connections C] [--work-ms M] [--fixed-pool]
                             [--reactor thread|workers]";

fn main() -> ExitCode {
    let result = parse_args(std::env::args().skip(1)).map_err(BoxError::from).and_then(|mode| match mode {
        Mode::Help => {
            println!("{USAGE}");
            Ok(())
        }
        Mode::Serve { addr, reactor } => serve(&addr, reactor),
        Mode::Once { reactor } => once(reactor),
        Mode::Bench(args) => bench(&args),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("async_service: {error}");
            ExitCode::FAILURE
        }
    }
}

// ---- the service ----

/// What `/work` needs: how many turns of [`spin`] make a millisecond of computing here.
#[derive(Debug, Clone, Copy)]
struct Work {
    turns_per_ms: u64,
}

fn router(work: Work) -> Router {
    Router::new().route("/", get(root)).route("/work", get(compute)).with_state(work)
}

/// `GET /`: the cheapest answer, to measure the serving itself.
async fn root() -> &'static str {
    "ok"
}

/// `GET /work?ms=N`: about N ms of computing (at most [`MAX_WORK_MS`]), then an answer. It
/// computes inside the poll, on the pool's worker: the lightweight task's CPU-bound part.
async fn compute(
    State(work): State<Work>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<String, (StatusCode, String)> {
    let ms = parse_ms(query.get("ms").map(String::as_str))
        .map_err(|message| (StatusCode::BAD_REQUEST, message))?;
    std::hint::black_box(spin(ms.saturating_mul(work.turns_per_ms)));
    Ok(format!("ok: {ms} ms of computing\n"))
}

fn parse_ms(ms: Option<&str>) -> Result<u64, String> {
    let ms = ms.ok_or_else(|| format!("missing ms: ask for /work?ms=N, N from 0 to {MAX_WORK_MS}\n"))?;
    match ms.parse::<u64>() {
        Ok(value) if value <= MAX_WORK_MS => Ok(value),
        _ => Err(format!("ms must be a whole number of milliseconds from 0 to {MAX_WORK_MS}, got {ms:?}\n")),
    }
}

/// A plain loop of `turns` dependent multiply-adds (a step of a linear congruential
/// generator), which the compiler can neither skip nor vectorise.
fn spin(turns: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..turns {
        x = std::hint::black_box(
            x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407),
        );
    }
    x
}

/// Turns of [`spin`] per millisecond on this machine: a fixed amount of work per request,
/// rather than spinning on the clock, so that a preempted request does not do less of it. The
/// fastest of a few probes: a probe that was preempted is slower, never faster.
fn calibrate() -> Work {
    const PROBE: u64 = 1 << 18;
    let fastest = (0..5)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(spin(std::hint::black_box(PROBE)));
            start.elapsed()
        })
        .min()
        .unwrap_or(Duration::from_millis(1));
    let turns_per_ms = u128::from(PROBE) * 1_000_000 / fastest.as_nanos().max(1);
    Work { turns_per_ms: u64::try_from(turns_per_ms).unwrap_or(u64::MAX).max(1) }
}

// ---- serving ----

/// Where each connection's future runs.
#[derive(Clone)]
enum Executor {
    /// On the pool's workers, with the I/O runtime's handle entered around each poll.
    Cotenant { pool: Arc<Pool>, io: Handle },
    /// On a tokio runtime's workers.
    Tokio(Handle),
}

impl Executor {
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        // Dropping the handles detaches the tasks: each connection ends on its own.
        match self {
            Executor::Cotenant { pool, io } => drop(tokio_on_cotenant::spawn(pool, io, future)),
            Executor::Tokio(handle) => drop(handle.spawn(future)),
        }
    }
}

/// A listener on `addr` registered with the reactor of `handle`'s runtime. Bound with std and
/// converted, rather than `handle.block_on(TcpListener::bind(..))`, which is not allowed on a
/// thread that is already inside a runtime.
fn bind(handle: &Handle, addr: &str) -> Result<tokio::net::TcpListener, String> {
    let listener =
        std::net::TcpListener::bind(addr).map_err(|error| format!("cannot listen on {addr}: {error}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|error| format!("cannot make the socket on {addr} non-blocking: {error}"))?;
    let _entered = handle.enter(); // `from_std` registers with the runtime entered here
    tokio::net::TcpListener::from_std(listener)
        .map_err(|error| format!("cannot register the socket on {addr} with tokio: {error}"))
}

/// Accepts connections until `stop` resolves, each served by `router` on `executor`.
async fn accept_loop<S>(listener: tokio::net::TcpListener, router: Router, executor: Executor, stop: S)
where
    S: Future<Output = ()> + Send,
{
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut stop => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                // Answers go out at once rather than waiting for the client's ACK (as
                // axum::serve does).
                let _ = stream.set_nodelay(true);
                executor.spawn(serve_connection(stream, router.clone()));
            }
            Err(error) => {
                // Out of file descriptors, say: trying again at once would only spin.
                eprintln!("async_service: cannot accept a connection: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One connection, HTTP/1.1 with keep-alive, until the client closes it.
async fn serve_connection(stream: tokio::net::TcpStream, router: Router) {
    let connection = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(router));
    // An error is a client that went away mid-request or sent what is not HTTP (hyper has
    // answered what it could): the server has nothing to do but close the connection.
    let _ = connection.await;
}

/// Resolves when `stopped`'s sender sends or is dropped.
async fn until_sent(stopped: oneshot::Receiver<()>) {
    let _ = stopped.await;
}

/// Resolves at the first Ctrl-C (SIGINT).
async fn ctrl_c() {
    match tokio::signal::ctrl_c().await {
        Ok(()) => println!("async_service: shutting down"),
        Err(error) => {
            eprintln!("async_service: cannot listen for Ctrl-C ({error}); serving until killed");
            std::future::pending::<()>().await;
        }
    }
}

/// Who drives tokio's reactor and timers for the futures on the pool (`--reactor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReactorKind {
    /// A thread of its own (`IoDriver`): sockets and timers are served however busy the pool.
    Thread,
    /// The pool's idle workers (`WorkerReactor`): no hand-over per event, nothing driven while
    /// every allowed worker is busy.
    Workers,
}

impl ReactorKind {
    fn parse(text: &str) -> Result<ReactorKind, String> {
        match text {
            "thread" => Ok(ReactorKind::Thread),
            "workers" => Ok(ReactorKind::Workers),
            _ => Err(format!("--reactor: expected thread or workers, got {text:?}")),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ReactorKind::Thread => "tokio's I/O on a thread of its own",
            ReactorKind::Workers => "tokio's I/O driven by the pool's idle workers",
        }
    }
}

/// The reactor the pool's futures use: kept alive for as long as they run.
enum Reactor {
    Thread(IoDriver),
    Workers(WorkerReactor),
}

impl Reactor {
    fn handle(&self) -> &Handle {
        match self {
            Reactor::Thread(driver) => driver.handle(),
            Reactor::Workers(reactor) => reactor.handle(),
        }
    }
}

/// The pool, its reactor, and a listener on `addr` registered with that reactor.
fn start(addr: &str, kind: ReactorKind) -> Result<(Arc<Pool>, Reactor, tokio::net::TcpListener), BoxError> {
    start_with(addr, Pool::builder().name(POOL_NAME), kind)
}

/// The error of a listener whose address cannot be read.
fn listen_address_error(error: std::io::Error) -> String {
    format!("cannot read the address the server listens on: {error}")
}

/// `start` with the pool `builder` gives.
fn start_with(
    addr: &str,
    builder: cotenant::Builder,
    kind: ReactorKind,
) -> Result<(Arc<Pool>, Reactor, tokio::net::TcpListener), BoxError> {
    let (builder, io) = match kind {
        ReactorKind::Thread => (builder, Reactor::Thread(IoDriver::start()?)),
        ReactorKind::Workers => {
            let reactor = WorkerReactor::new()?;
            (reactor.park_workers(builder), Reactor::Workers(reactor))
        }
    };
    let pool = Arc::new(builder.build().map_err(|e| format!("cannot build the pool {POOL_NAME:?}: {e}"))?);
    let listener = bind(io.handle(), addr)?;
    Ok((pool, io, listener))
}

/// The accept loop of `listener` serving `app`, spawned on the pool like the connections it
/// spawns.
fn serve_on_pool<S>(
    pool: &Arc<Pool>,
    io: &Reactor,
    listener: tokio::net::TcpListener,
    app: Router,
    stop: S,
) -> cotenant::Task<()>
where
    S: Future<Output = ()> + Send + 'static,
{
    let executor = Executor::Cotenant { pool: Arc::clone(pool), io: io.handle().clone() };
    tokio_on_cotenant::spawn(pool, io.handle(), accept_loop(listener, app, executor, stop))
}

/// Default: serves `addr` until Ctrl-C.
fn serve(addr: &str, reactor: ReactorKind) -> Result<(), BoxError> {
    let (pool, io, listener) = start(addr, reactor)?;
    let local = listener.local_addr().map_err(listen_address_error)?;
    println!(
        "async_service: listening on http://{local}, requests handled on the cotenant pool {POOL_NAME:?} \
         ({} threads) with {}; Ctrl-C stops",
        pool.threads(),
        reactor.describe()
    );
    let server = serve_on_pool(&pool, &io, listener, router(calibrate()), ctrl_c());
    let served = cotenant::block_on(server);
    pool.shutdown(); // runs the polls already queued, joins the workers
    drop(io); // then the reactor: connections still open are closed
    served?;
    Ok(())
}

/// `--once`: a free local port, one real request to itself, a check of the answer, a clean stop.
fn once(reactor: ReactorKind) -> Result<(), BoxError> {
    // A guard, not a measurement: whatever hangs, the run ends with a message.
    std::thread::Builder::new().name("once-guard".to_owned()).spawn(|| {
        std::thread::sleep(ONCE_GUARD);
        eprintln!("async_service: --once did not finish within {} s", ONCE_GUARD.as_secs());
        std::process::exit(1);
    })?;
    let (pool, io, listener) = start("127.0.0.1:0", reactor)?;
    let local = listener.local_addr().map_err(listen_address_error)?;
    let (stop, stopped) = oneshot::channel::<()>();
    let server = serve_on_pool(&pool, &io, listener, router(calibrate()), until_sent(stopped));
    // Blocking std I/O, on a thread of its own as a client elsewhere would be.
    let client = std::thread::Builder::new()
        .name("once-client".to_owned())
        .spawn(move || http_client::get_once(local, "/", ONCE_GUARD))?;
    let answer = client.join().map_err(|_| "the client thread panicked".to_owned());
    let _ = stop.send(());
    let served = cotenant::block_on(server);
    pool.shutdown();
    drop(io);
    let (status, body) = answer??;
    served?;
    if status != 200 || body != "ok" {
        return Err(
            format!("GET / on {local}: expected 200 \"ok\", got status {status}, body {body:?}").into()
        );
    }
    println!(
        "async_service: GET / -> {status} {body:?}, handled on the cotenant executor (pool {POOL_NAME:?})"
    );
    Ok(())
}

// ---- the benchmark ----

/// `--bench`'s settings.
#[derive(Debug, Clone, PartialEq)]
struct BenchArgs {
    /// How long each server is loaded in each round.
    seconds: Duration,
    rounds: usize,
    /// Keep-alive connections, each sending its requests back to back.
    connections: usize,
    /// 0: `GET /`; else `GET /work?ms=M`.
    work_ms: u64,
    /// The cotenant server's pool runs every worker (`Policy::fixed`) instead of the default
    /// adaptive policy: the benchmark's client shares the process and its two CPUs, and the
    /// default pool sizes itself against it as against any neighbour; a fixed pool shows the
    /// executor's own cost.
    fixed_pool: bool,
    /// Who drives the cotenant server's reactor.
    reactor: ReactorKind,
}

impl Default for BenchArgs {
    fn default() -> Self {
        BenchArgs {
            seconds: Duration::from_secs(3),
            rounds: 5,
            connections: 16,
            work_ms: 0,
            fixed_pool: false,
            reactor: DEFAULT_REACTOR,
        }
    }
}

fn bench(args: &BenchArgs) -> Result<(), BoxError> {
    let builder = match args.fixed_pool {
        true => Pool::builder().name(POOL_NAME).policy(cotenant::Policy::fixed(cotenant::cpus::get())),
        false => Pool::builder().name(POOL_NAME),
    };
    let (pool, io, cotenant_listener) = start_with("127.0.0.1:0", builder, args.reactor)?;
    let policy = if args.fixed_pool { "fixed" } else { "default adaptive" };
    let runtime_error = |what: &str, error: std::io::Error| format!("cannot build {what}: {error}");
    let tokio_runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| runtime_error("the tokio multi-thread runtime", error))?;
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| runtime_error("the client's runtime", error))?;
    let tokio_listener = bind(tokio_runtime.handle(), "127.0.0.1:0")?;
    let addrs = [
        cotenant_listener.local_addr().map_err(listen_address_error)?,
        tokio_listener.local_addr().map_err(listen_address_error)?,
    ];
    let names = [
        format!(
            "cotenant executor ({} pool threads, {policy} policy, {})",
            pool.threads(),
            args.reactor.describe()
        ),
        format!("tokio multi-thread ({} workers)", tokio_runtime.metrics().num_workers()),
    ];
    let (stop_cotenant, cotenant_stopped) = oneshot::channel::<()>();
    let (stop_tokio, tokio_stopped) = oneshot::channel::<()>();
    // One calibration for both: the same work per request.
    let app = router(calibrate());
    let cotenant_server =
        serve_on_pool(&pool, &io, cotenant_listener, app.clone(), until_sent(cotenant_stopped));
    let tokio_server = tokio_runtime.spawn(accept_loop(
        tokio_listener,
        app,
        Executor::Tokio(tokio_runtime.handle().clone()),
        until_sent(tokio_stopped),
    ));
    let path = match args.work_ms {
        0 => "/".to_owned(),
        ms => format!("/work?ms={ms}"),
    };
    println!(
        "async_service: {} rounds of {} s per server, the order alternating; {} keep-alive connections \
         from one client thread sending GET {path} back to back (loopback)",
        args.rounds,
        args.seconds.as_secs_f64(),
        args.connections
    );
    let measured = measure(&client, args, &path, addrs);
    // Both servers stop, whatever the measurement gave.
    let _ = stop_cotenant.send(());
    let _ = stop_tokio.send(());
    let cotenant_served = cotenant::block_on(cotenant_server);
    let tokio_served = tokio_runtime.block_on(tokio_server);
    pool.shutdown();
    drop(tokio_runtime);
    drop(io);
    let series = measured?;
    cotenant_served?;
    tokio_served?;
    let [cotenant_series, tokio_series] = series;
    let [cotenant_name, tokio_name] = names;
    let rows = [summarize(cotenant_name, cotenant_series), summarize(tokio_name, tokio_series)];
    println!();
    print!("{}", render_table(&rows));
    println!();
    println!("{}", verdict(rows[0].median, rows[1].median));
    let metrics = pool.metrics();
    println!(
        "cotenant pool at the end: target {} of {} threads, {} decisions; the client's thread shares the \
         process and its CPUs, and the default pool counts it as a neighbour (--fixed-pool: every worker)",
        metrics.target, metrics.threads, metrics.decisions
    );
    Ok(())
}

/// A short round on each server, not counted (connections, caches and the pool's controller
/// warm up), then the measured rounds. Index 0 is the cotenant server, 1 the tokio one.
fn measure(
    client: &tokio::runtime::Runtime,
    args: &BenchArgs,
    path: &str,
    addrs: [SocketAddr; 2],
) -> Result<[Series; 2], String> {
    let run = |server: usize, duration: Duration| {
        client.block_on(http_client::run_round(addrs[server], path, args.connections, duration))
    };
    let warm_up = args.seconds.min(Duration::from_millis(500));
    for server in 0..2 {
        run(server, warm_up)?;
    }
    let mut series: [Series; 2] = Default::default();
    for round in 0..args.rounds {
        for server in round_order(round) {
            let measured = run(server, args.seconds)?;
            if measured.latencies_us.is_empty() {
                return Err(format!("round {}: no request was answered by {}", round + 1, addrs[server]));
            }
            series[server].rates.push(measured.rate());
            series[server].latencies_us.extend(measured.latencies_us);
        }
    }
    Ok(series)
}

// ---- arguments ----

#[derive(Debug, PartialEq)]
enum Mode {
    Serve { addr: String, reactor: ReactorKind },
    Once { reactor: ReactorKind },
    Bench(BenchArgs),
    Help,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Mode, String> {
    let mut args = args.into_iter();
    let (mut once, mut bench, mut addr) = (false, false, None::<String>);
    let mut bench_args = BenchArgs::default();
    let mut reactor = DEFAULT_REACTOR;
    // The first flag given that only `--bench` takes.
    let mut bench_flag = None::<String>;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--once" => once = true,
            "--bench" => bench = true,
            "--fixed-pool" => {
                bench_args.fixed_pool = true;
                bench_flag.get_or_insert_with(|| "--fixed-pool".to_owned());
            }
            "--addr" => addr = Some(value(&mut args, "--addr")?),
            "--reactor" => reactor = ReactorKind::parse(&value(&mut args, "--reactor")?)?,
            flag @ ("--seconds" | "--rounds" | "--connections" | "--work-ms") => {
                let text = value(&mut args, flag)?;
                match flag {
                    "--seconds" => bench_args.seconds = parse_seconds(&text)?,
                    "--rounds" => bench_args.rounds = parse_count(flag, &text, 1, MAX_ROUNDS)? as usize,
                    "--connections" => {
                        bench_args.connections = parse_count(flag, &text, 1, MAX_CONNECTIONS)? as usize
                    }
                    _ => bench_args.work_ms = parse_count(flag, &text, 0, MAX_WORK_MS)?,
                }
                if bench_flag.is_none() {
                    bench_flag = Some(flag.to_owned());
                }
            }
            "-h" | "--help" => return Ok(Mode::Help),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if once && bench {
        return Err("--once and --bench are two different runs: give one of them".to_owned());
    }
    if addr.is_some() && (once || bench) {
        return Err("--addr is for serving: --once and --bench listen on free local ports".to_owned());
    }
    match (once, bench, bench_flag) {
        (_, false, Some(flag)) => Err(format!("{flag} goes with --bench\n{USAGE}")),
        (true, false, None) => Ok(Mode::Once { reactor }),
        (_, true, _) => Ok(Mode::Bench(BenchArgs { reactor, ..bench_args })),
        (false, false, None) => {
            Ok(Mode::Serve { addr: addr.unwrap_or_else(|| DEFAULT_ADDR.to_owned()), reactor })
        }
    }
}

/// The value after `flag`.
fn value(args: &mut impl Iterator<Item = String>, flag: &str) -> Result<String, String> {
    args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
}

fn parse_count(flag: &str, text: &str, min: u64, max: u64) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("{flag}: expected a whole number from {min} to {max}, got {text:?}")),
    }
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= MAX_SECONDS => Ok(Duration::from_secs_f64(seconds)),
        _ => Err(format!(
            "--seconds: expected a number of seconds above 0 and at most {MAX_SECONDS}, got {text:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Mode, String> {
        parse_args(args.iter().map(|arg| (*arg).to_owned()))
    }

    #[test]
    fn the_modes_and_their_defaults() {
        assert_eq!(parse(&[]), Ok(Mode::Serve { addr: DEFAULT_ADDR.to_owned(), reactor: DEFAULT_REACTOR }));
        assert_eq!(
            parse(&["--addr", "0.0.0.0:80", "--reactor", "thread"]),
            Ok(Mode::Serve { addr: "0.0.0.0:80".to_owned(), reactor: ReactorKind::Thread })
        );
        assert_eq!(parse(&["--once"]), Ok(Mode::Once { reactor: DEFAULT_REACTOR }));
        assert_eq!(
            parse(&["--once", "--reactor", "workers"]),
            Ok(Mode::Once { reactor: ReactorKind::Workers })
        );
        assert_eq!(
            parse(&["--bench", "--reactor", "thread"]),
            Ok(Mode::Bench(BenchArgs { reactor: ReactorKind::Thread, ..BenchArgs::default() }))
        );
        assert_eq!(parse(&["--bench"]), Ok(Mode::Bench(BenchArgs::default())));
        assert_eq!(parse(&["--help"]), Ok(Mode::Help));
        assert_eq!(
            parse(&["--bench", "--seconds", "0.5", "--rounds", "3", "--connections", "4", "--work-ms", "2"]),
            Ok(Mode::Bench(BenchArgs {
                seconds: Duration::from_millis(500),
                rounds: 3,
                connections: 4,
                work_ms: 2,
                fixed_pool: false,
                reactor: DEFAULT_REACTOR,
            }))
        );
    }

    #[test]
    fn bad_arguments_are_named() {
        let cases: [(&[&str], &str); 11] = [
            (&["--reactor", "epoll"], "--reactor: expected thread or workers, got \"epoll\""),
            (&["--once", "--reactor"], "--reactor needs a value"),
            (&["--fast"], "unknown argument \"--fast\""),
            (&["--addr"], "--addr needs a value"),
            (&["--bench", "--rounds", "0"], "--rounds: expected a whole number from 1 to 100, got \"0\""),
            (&["--bench", "--connections", "many"], "--connections: expected"),
            (&["--bench", "--work-ms", "101"], "--work-ms: expected a whole number from 0 to 100"),
            (&["--bench", "--seconds", "-1"], "--seconds: expected"),
            (&["--rounds", "3"], "--rounds goes with --bench"),
            (&["--once", "--bench"], "two different runs"),
            (&["--once", "--addr", "127.0.0.1:1"], "--addr is for serving"),
        ];
        for (args, expected) in cases {
            let error = parse(args).unwrap_err();
            assert!(error.contains(expected), "{args:?}: {error:?} should contain {expected:?}");
        }
        assert!(parse(&["--bench", "--seconds", "NaN"]).is_err());
    }

    #[test]
    fn work_asks_for_a_bounded_whole_number_of_milliseconds() {
        assert_eq!(parse_ms(Some("0")), Ok(0));
        assert_eq!(parse_ms(Some("100")), Ok(100));
        assert!(parse_ms(None).unwrap_err().contains("missing ms"));
        for bad in ["101", "-1", "1.5", "lots", ""] {
            assert!(parse_ms(Some(bad)).unwrap_err().contains("whole number"), "{bad:?}");
        }
    }

    #[test]
    fn the_spin_loop_is_deterministic() {
        assert_eq!(spin(0), 0x9E37_79B9_7F4A_7C15);
        assert_eq!(spin(1000), spin(1000));
        assert_ne!(spin(1000), spin(1001));
    }
}

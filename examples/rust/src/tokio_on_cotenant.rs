//! Futures that use tokio's sockets and timers, run on a [`cotenant::Pool`]: one small tokio
//! current-thread runtime drives the I/O, the pool's workers do the polling. Two ways to drive
//! it:
//!
//! ```text
//!   WorkerReactor: the pool's idle worker waits in the runtime's block_on (epoll) ─event─►
//!                  queues the woken future's poll and runs it itself, no other thread involved
//!   IoDriver:      tokio-io thread, parked in epoll ──wake──► pool's queue ──futex──► a worker
//!   either way:    each poll inside `Handle::enter` ──register sockets, timers──► the reactor
//! ```
//!
//! Why this shape:
//!
//! - **tokio's reactor needs one thread at a time, not one per CPU.** A socket or a timer only
//!   has to be registered with a reactor that some thread drives: the pool's idle worker inside
//!   [`WorkerReactor`]'s `block_on` (through `cotenant::Builder::park_with`), or [`IoDriver`]'s
//!   thread while it waits for its stop signal. Waking one of cotenant's futures queues its next
//!   poll on the pool; from inside the hook, on the worker that saw the event.
//! - **Everything else runs on the pool.** Accepting, parsing requests, the handlers and writing
//!   the answers are polls of futures spawned with [`spawn`], so they run on the pool's active
//!   workers only: the service sizes itself from what its neighbours and its CPU quota leave it.
//!   tokio's multi-thread runtime would keep one worker per CPU busy whatever they do.
//! - **Entering the handle around each poll** ([`Entered`]) is what tokio asks of code running
//!   outside its threads: a socket or a timer created (or a listener accepting) inside the poll
//!   finds the runtime through the thread's current handle. Polling an existing socket needs
//!   nothing more, since each remembers its reactor.
//!
//! Which one: [`WorkerReactor`] saves a hand-over per event (requests that do little run 0.95-1.23x
//! as fast as on a plain tokio runtime in this repository's HTTP benchmark, against 0.76-0.80x
//! with [`IoDriver`]), but nobody drives the reactor while every worker the pool may run is
//! busy; [`IoDriver`] serves sockets and timers however busy the pool is.
//!
//! Not supported inside these futures: `tokio::spawn` and `tokio::task::spawn_blocking` would
//! run on whichever thread drives the runtime (with [`WorkerReactor`], a pool worker inside the
//! park hook): spawn on the pool with [`spawn`] instead. Blocking calls hold a pool worker for
//! as long as they block.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use cotenant::{Pool, Task};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The name of the thread that drives tokio's I/O and timers.
pub const THREAD_NAME: &str = "tokio-io";

/// A tokio current-thread runtime on a thread of its own ([`THREAD_NAME`]), whose only job is
/// to drive the reactor (sockets, signals) and the timers of the futures that use its
/// [`handle`](IoDriver::handle). Dropping it stops the runtime and joins the thread.
pub struct IoDriver {
    handle: Handle,
    /// Ends the runtime's `block_on` (sent, or dropped, by `Drop`).
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl IoDriver {
    /// Builds the runtime (I/O and time drivers enabled) and starts its thread.
    ///
    /// # Errors
    ///
    /// When the runtime cannot be built (the reactor's epoll instance) or the thread cannot be
    /// started; the error says which.
    pub fn start() -> io::Result<IoDriver> {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|error| {
                io::Error::new(error.kind(), format!("cannot build tokio's I/O runtime: {error}"))
            })?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn(move || {
                // A current-thread runtime drives its reactor and timers only while a thread is
                // inside its `block_on`: this one waits there, parked in epoll, until stopped.
                // An error means the sender was dropped, which is a stop too.
                let _ = runtime.block_on(stopped);
                // `runtime` is dropped here, on its own thread: sockets still registered get a
                // shutdown error, and the futures waiting on them are woken one last time.
            })
            .map_err(|error| {
                io::Error::new(error.kind(), format!("cannot start the {THREAD_NAME} thread: {error}"))
            })?;
        Ok(IoDriver { handle, stop: Some(stop), thread: Some(thread) })
    }

    /// The runtime's handle: pass it to [`spawn`] or [`Entered::new`], or enter it
    /// (`handle.enter()`) to create a tokio socket outside a future.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for IoDriver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(()); // fails only if the thread has already left `block_on`
        }
        if let Some(thread) = self.thread.take() {
            // Dropped on its own thread (by a future it drove): that thread cannot join itself,
            // and it is leaving `block_on` anyway.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join(); // its closure never panics; nothing to report
            }
        }
    }
}

/// A tokio current-thread runtime with no thread of its own: the pool's idle workers drive its
/// reactor and timers, one at a time, from inside its `block_on` ([`cotenant::Builder::park_with`]),
/// as tokio's own workers do. A socket's readiness then wakes its future on the worker that
/// polls it next, with no hand-over from an I/O thread: what an I/O thread costs per event (a
/// queue push, a futex wake, a context switch) is gone.
///
/// The price: while every worker the pool may run is busy, nobody waits in the reactor, so
/// sockets and timers wait until one runs out of tasks (tokio's multi-thread runtime does the
/// same when all its workers are busy; a worker that takes a task from the reactor hands it to
/// an idle one, so one long handler does not stop the others). A service whose handlers all
/// compute for long is better served by [`IoDriver`]'s thread.
///
/// ```no_run
/// let reactor = cotenant_examples::tokio_on_cotenant::WorkerReactor::new().unwrap();
/// let pool = reactor.park_workers(cotenant::Pool::builder()).build().unwrap();
/// let task = cotenant_examples::tokio_on_cotenant::spawn(&pool, reactor.handle(), async {
///     tokio::time::sleep(std::time::Duration::from_millis(1)).await;
/// });
/// task.join().unwrap();
/// ```
pub struct WorkerReactor {
    runtime: std::sync::Arc<tokio::runtime::Runtime>,
}

impl WorkerReactor {
    /// Builds the runtime (I/O and time drivers enabled).
    ///
    /// # Errors
    ///
    /// When the runtime cannot be built (the reactor's epoll instance).
    pub fn new() -> io::Result<WorkerReactor> {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|error| {
                io::Error::new(error.kind(), format!("cannot build tokio's I/O runtime: {error}"))
            })?;
        Ok(WorkerReactor { runtime: std::sync::Arc::new(runtime) })
    }

    /// The runtime's handle: pass it to [`spawn`] or [`Entered::new`].
    pub fn handle(&self) -> &Handle {
        self.runtime.handle()
    }

    /// `builder` whose idle workers wait in this runtime's `block_on`, driving its reactor. The
    /// pool holds the runtime until its last worker has exited.
    pub fn park_workers(&self, builder: cotenant::Builder) -> cotenant::Builder {
        let runtime = self.runtime.clone();
        builder.park_with(move |woken| runtime.block_on(woken))
    }
}

/// A future polled with a tokio runtime entered, so that the tokio sockets and timers it
/// creates find their reactor. See the module's documentation.
#[must_use = "a future does nothing unless polled"]
pub struct Entered<F> {
    handle: Handle,
    /// Boxed so that `Entered` is `Unpin` and needs no unsafe code to reach the inner future
    /// (one allocation per spawned future, not per poll).
    future: Pin<Box<F>>,
}

impl<F> Entered<F> {
    /// `future`, to be polled with `handle` entered.
    pub fn new(handle: Handle, future: F) -> Self {
        Entered { handle, future: Box::pin(future) }
    }
}

impl<F: Future> Future for Entered<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        // Costs a thread-local write and a reference count, once per poll.
        let _entered = this.handle.enter();
        this.future.as_mut().poll(cx)
    }
}

/// Spawns `future` on `pool`, polled with the runtime of `handle` (an [`IoDriver`]'s) entered:
/// the future may use tokio's sockets and timers, and runs only on the pool's active workers.
///
/// The returned [`Task`] is itself a future (`Result<T, cotenant::JoinError>`): await it, join
/// it, run it with `cotenant::block_on`, or drop it to detach the future.
pub fn spawn<F>(pool: &Pool, handle: &Handle, future: F) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    pool.spawn_future(Entered::new(handle.clone(), future))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    /// Only a guard against a hang: every test finishes long before it.
    const GUARD: Duration = Duration::from_secs(60);

    fn pool() -> Pool {
        Pool::builder()
            .name("tokio-test")
            .policy(cotenant::Policy::fixed(1))
            .host_tokens_off()
            .build()
            .expect("a one-worker pool")
    }

    /// What a future on `pool` reads from one connection to a tokio listener of `handle`'s
    /// runtime, to which a std client writes `message` and closes.
    fn one_connection(pool: &Pool, handle: &Handle, message: &[u8]) -> Vec<u8> {
        // A listener accepting from a future on the pool: its new sockets are created inside
        // the poll, which is what needs the handle entered.
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let listener = {
            let _entered = handle.enter();
            tokio::net::TcpListener::from_std(std_listener).unwrap()
        };
        let server = spawn(pool, handle, async move {
            let (stream, _) = listener.accept().await?;
            let mut received = Vec::new();
            let mut buf = [0u8; 16];
            loop {
                stream.readable().await?;
                match stream.try_read(&mut buf) {
                    Ok(0) => return Ok::<_, io::Error>(received), // the client closed its side
                    Ok(n) => received.extend_from_slice(&buf[..n]),
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                    Err(error) => return Err(error),
                }
            }
        });
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client.write_all(message).unwrap();
        drop(client);
        server.join_timeout(GUARD).expect("the server future finished").unwrap()
    }

    #[test]
    fn a_tokio_timer_fires_for_a_future_on_the_pool() {
        let driver = IoDriver::start().unwrap();
        let pool = pool();
        let task = spawn(&pool, driver.handle(), async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            "woken by the timer"
        });
        assert_eq!(task.join_timeout(GUARD).expect("the timer woke the future"), "woken by the timer");
    }

    #[test]
    fn a_tokio_listener_accepts_and_reads_on_the_pool() {
        let driver = IoDriver::start().unwrap();
        let pool = pool();
        let received = one_connection(&pool, driver.handle(), b"hello from std");
        assert_eq!(received, b"hello from std");
    }

    #[test]
    fn the_pools_idle_workers_drive_timers_and_sockets() {
        let reactor = WorkerReactor::new().unwrap();
        let pool = reactor
            .park_workers(
                Pool::builder().name("tokio-workers").policy(cotenant::Policy::fixed(2)).host_tokens_off(),
            )
            .build()
            .unwrap();
        for _ in 0..10 {
            let task = spawn(&pool, reactor.handle(), async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                "woken by the timer"
            });
            assert_eq!(task.join_timeout(GUARD).expect("the timer woke the future"), "woken by the timer");
        }
        let received = one_connection(&pool, reactor.handle(), b"hello, workers");
        assert_eq!(received, b"hello, workers");
        pool.shutdown();
    }

    #[test]
    fn dropping_the_driver_stops_its_runtime() {
        let driver = IoDriver::start().unwrap();
        let handle = driver.handle().clone();
        // Joins the thread: the runtime is gone, not merely asked to stop. A task spawned on a
        // runtime that has shut down is cancelled at once.
        drop(driver);
        let spawned = handle.spawn(async { 1 });
        assert!(cotenant::block_on(spawned).is_err());
    }
}

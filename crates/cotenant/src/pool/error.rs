//! What a submit does when the queue is full ([`Full`]), and why a pool could not be built
//! ([`BuildError`]), a task not queued ([`TrySpawnError`]), a task not joined in time
//! ([`JoinTimeoutError`]) or a pool not shut down in time ([`ShutdownTimeout`]).

use std::fmt;

use super::{JoinError, Pool, Task};

/// What a submit does when the queue is full (the rejection policies of "Thread Pool Sizing
/// and the Contention Cliff").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Full {
    /// Wait for room (the default: back-pressure on the producer, nothing lost). Waiting
    /// submitters are woken when the workers have drained the queue to half its capacity (one
    /// wake-up per half a queue of tasks, not one per task), and try again every 10 ms in any
    /// case. Submits waiting when the pool shuts down are rejected. A task of this pool that
    /// submits to its own full queue runs the new task itself rather than wait (it might be
    /// the only worker allowed to run, waiting for itself).
    #[default]
    Block,
    /// Run the task on the submitting thread, which slows the producer down by exactly the
    /// work it tried to add.
    CallerRuns,
    /// Refuse the task: [`Pool::spawn`] returns a task that fails with [`JoinError::Rejected`],
    /// [`Pool::execute`] drops it; both are counted in [`Metrics::rejected`].
    ///
    /// [`Pool::spawn`]: super::Pool::spawn
    /// [`JoinError::Rejected`]: super::JoinError::Rejected
    /// [`Pool::execute`]: super::Pool::execute
    /// [`Metrics::rejected`]: crate::metrics::Metrics::rejected
    Reject,
}

/// Why a pool could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A builder argument was out of range; the text says which and why.
    InvalidArgument(String),
    /// The operating system refused to start a worker thread (the threads already started
    /// were stopped and joined).
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::InvalidArgument(why) => write!(f, "invalid pool configuration: {why}"),
            BuildError::Spawn(error) => write!(f, "could not start a worker thread: {error}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Spawn(error) => Some(error),
            BuildError::InvalidArgument(_) => None,
        }
    }
}

/// Why [`Pool::try_spawn`] refused a task (the closure is dropped without running).
///
/// [`Pool::try_spawn`]: super::Pool::try_spawn
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrySpawnError {
    /// The queue was full.
    Full,
    /// The pool is shutting down or shut down.
    ShutDown,
}

impl fmt::Display for TrySpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySpawnError::Full => f.write_str("the pool's queue is full"),
            TrySpawnError::ShutDown => f.write_str("the pool is shut down"),
        }
    }
}

impl std::error::Error for TrySpawnError {}

/// Why [`Task::join_timeout`] returned no value.
///
/// Like `std::sync::mpsc::RecvTimeoutError`: either the time ran out (and the task is handed
/// back, so nothing is lost) or the task ended without a value.
#[non_exhaustive]
pub enum JoinTimeoutError<T> {
    /// The task had not finished when the time was up. Here is its handle: join it again, await
    /// it, or drop it to detach the task (it still runs).
    Timeout(Task<T>),
    /// The task finished without a value (it panicked, was cancelled or rejected), or its
    /// result was already taken.
    Failed(JoinError),
}

impl<T> JoinTimeoutError<T> {
    /// Whether the time ran out (the task is still queued or running).
    pub fn is_timeout(&self) -> bool {
        matches!(self, JoinTimeoutError::Timeout(_))
    }

    /// The task's handle, when the time ran out.
    pub fn into_task(self) -> Option<Task<T>> {
        match self {
            JoinTimeoutError::Timeout(task) => Some(task),
            JoinTimeoutError::Failed(_) => None,
        }
    }
}

// By hand: a derive would ask `T: Debug`, which a handle to a task never needs.
impl<T> fmt::Debug for JoinTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinTimeoutError::Timeout(task) => f.debug_tuple("Timeout").field(task).finish(),
            JoinTimeoutError::Failed(error) => f.debug_tuple("Failed").field(error).finish(),
        }
    }
}

impl<T> fmt::Display for JoinTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinTimeoutError::Timeout(_) => f.write_str("the task did not finish within the timeout"),
            JoinTimeoutError::Failed(error) => fmt::Display::fmt(error, f),
        }
    }
}

impl<T> std::error::Error for JoinTimeoutError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JoinTimeoutError::Failed(error) => Some(error),
            JoinTimeoutError::Timeout(_) => None,
        }
    }
}

/// [`Pool::shutdown_timeout`] ran out of time: some workers were still running tasks (the
/// queue is closed; what was queued still runs).
///
/// Dropping this error **detaches** the pool: its workers go on with the tasks they run and the
/// ones still queued, in the background, and exit when the queue is empty; a thread of the
/// pool's own (`<name>-shutdown`) then joins them and releases the pool's resources. No thread
/// is killed and no queued task is dropped. To wait longer, or to cancel what is still queued,
/// take the pool back with [`into_pool`](ShutdownTimeout::into_pool) and call
/// [`shutdown_timeout`](Pool::shutdown_timeout) or [`shutdown_now`](Pool::shutdown_now) on it.
pub struct ShutdownTimeout {
    /// Always `Some` until `into_pool` or `Drop` takes it. Boxed: a `Pool` is large, and an
    /// error travels by value.
    pool: Option<Box<Pool>>,
    running: usize,
    queued: usize,
}

impl ShutdownTimeout {
    #[cfg_attr(loom, allow(dead_code))]
    pub(super) fn new(pool: Pool, running: usize, queued: usize) -> ShutdownTimeout {
        ShutdownTimeout { pool: Some(Box::new(pool)), running, queued }
    }

    /// Worker threads that had not exited when the time was up.
    pub fn running_workers(&self) -> usize {
        self.running
    }

    /// Tasks still queued when the time was up (they still run, unless the pool taken back with
    /// [`into_pool`](ShutdownTimeout::into_pool) is shut down with `shutdown_now`).
    pub fn queued_tasks(&self) -> usize {
        self.queued
    }

    /// The pool, closed to new tasks, with its ordinary drop (which waits for the queue to
    /// drain) instead of the detaching drop of this error.
    pub fn into_pool(mut self) -> Pool {
        *self.pool.take().expect("the pool is only taken by into_pool, which consumes the error")
    }
}

#[cfg(not(loom))]
impl Drop for ShutdownTimeout {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            (*pool).detach();
        }
    }
}

impl fmt::Debug for ShutdownTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownTimeout")
            .field("running_workers", &self.running)
            .field("queued_tasks", &self.queued)
            .finish()
    }
}

impl fmt::Display for ShutdownTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the pool did not shut down in time: {} worker(s) still running, {} task(s) still queued (nothing was cancelled)",
            self.running, self.queued
        )
    }
}

impl std::error::Error for ShutdownTimeout {}

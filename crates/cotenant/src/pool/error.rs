//! What a submit does when the queue is full ([`Full`]), and why a pool could not be built
//! ([`BuildError`]) or a task not queued ([`TrySpawnError`]).

use std::fmt;

/// What a submit does when the queue is full (the rejection policies of seed 002).
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

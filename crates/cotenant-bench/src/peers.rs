//! `peers`: the pools under comparison, behind one small trait, [`Peer`].
//!
//! Each workload is a generic function over [`Peer`], so it is compiled once per pool: the
//! harness adds no boxing or dynamic dispatch on top of what each pool does itself. Pools that
//! have no join handle (rayon, crossbeam, threadpool, the reference) join through the default
//! [`Peer::spawn_join`]: the task sends its result on a one-slot channel made for it.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use clap::ValueEnum;

use crate::reference;

/// Capacity of the bounded queues, the same for cotenant's and the hand-written crossbeam pool.
pub const QUEUE_CAPACITY: usize = 4096;

/// How long a rayon shutdown waits for its threads to exit before it reports them as hung.
const EXIT_LIMIT: Duration = Duration::from_secs(10);

/// A boxed fire-and-forget task, for the hand-written crossbeam pool.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// The pools compared, in the order of a full run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PeerKind {
    /// cotenant's pool with `Policy::fixed(n)`
    #[value(name = "cotenant-fixed")]
    CotenantFixed,
    /// cotenant's default pool: `Policy::adaptive()`, n threads, the default host-token set
    /// (alone in this process: engaged only if another cotenant process shares it)
    #[value(name = "cotenant-adaptive")]
    CotenantAdaptive,
    /// the same with host tokens off (`Builder::host_tokens_off`)
    #[value(name = "cotenant-plain")]
    CotenantPlain,
    /// cotenant-adaptive with the task histograms on (`Builder::task_histograms(true)`; the
    /// default is off): run both in one run to see what timing every task costs
    #[value(name = "cotenant-hist")]
    CotenantHist,
    /// the adaptive pool sharing host CPU tokens (a private set of n tokens), with CPU leases
    #[value(name = "cotenant-tokens")]
    CotenantTokens,
    /// the same without CPU leases (`host_tokens_leases(false)`)
    #[value(name = "cotenant-tokens-noleases")]
    CotenantTokensNoLeases,
    /// a rayon `ThreadPool` of n threads, `spawn` (joined through a channel)
    #[value(name = "rayon")]
    Rayon,
    /// n threads looping on a `crossbeam_channel::bounded(4096)` receiver (joined through a channel)
    #[value(name = "crossbeam")]
    Crossbeam,
    /// the `threadpool` crate, n threads (joined through a channel)
    #[value(name = "threadpool")]
    Threadpool,
    /// tokio `spawn_blocking` on a runtime with 1 worker and at most n blocking threads
    #[value(name = "tokio-blocking")]
    TokioBlocking,
    /// the seed's friendlypool, re-implemented with its weaknesses (src/reference.rs)
    #[value(name = "reference")]
    Reference,
}

impl PeerKind {
    /// Every peer, in the order of a full run.
    pub const ALL: [PeerKind; 11] = [
        PeerKind::CotenantFixed,
        PeerKind::CotenantAdaptive,
        PeerKind::CotenantPlain,
        PeerKind::CotenantHist,
        PeerKind::CotenantTokens,
        PeerKind::CotenantTokensNoLeases,
        PeerKind::Rayon,
        PeerKind::Crossbeam,
        PeerKind::Threadpool,
        PeerKind::TokioBlocking,
        PeerKind::Reference,
    ];

    /// The name used on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::CotenantFixed => "cotenant-fixed",
            PeerKind::CotenantAdaptive => "cotenant-adaptive",
            PeerKind::CotenantPlain => "cotenant-plain",
            PeerKind::CotenantHist => "cotenant-hist",
            PeerKind::CotenantTokens => "cotenant-tokens",
            PeerKind::CotenantTokensNoLeases => "cotenant-tokens-noleases",
            PeerKind::Rayon => "rayon",
            PeerKind::Crossbeam => "crossbeam",
            PeerKind::Threadpool => "threadpool",
            PeerKind::TokioBlocking => "tokio-blocking",
            PeerKind::Reference => "reference",
        }
    }
}

/// One pool under comparison.
pub trait Peer {
    /// Submits `f` without waiting for it to run. May block while the pool's queue is full (the
    /// bounded pools) or until a worker takes the task (the reference).
    fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static;

    /// Runs `f` on the pool and returns its result once it has run.
    ///
    /// The default is for pools without a join handle: `f`'s result comes back on a one-slot
    /// channel made for this task.
    fn spawn_join<T, F>(&self, f: F) -> Result<T, String>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.execute(move || {
            // An error means the receiver is gone: no one is waiting for the result.
            let _ = tx.send(f());
        });
        rx.recv().map_err(|_| "the task never sent its result (it panicked or was dropped)".to_owned())
    }

    /// Runs what was submitted, stops the pool and joins its threads.
    fn shutdown(self) -> Result<(), String>;
}

/// cotenant's pool: bounded queue of [`QUEUE_CAPACITY`], submitters block when it is full.
pub struct CotenantPeer {
    /// The pool.
    pool: cotenant::Pool,
}

/// How a cotenant peer takes host CPU tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tokens {
    /// What `Pool::builder()` does: the default set, engaged only while shared.
    Default,
    /// No tokens (`Builder::host_tokens_off`).
    Off,
    /// A private set of one token per thread (nobody else takes them: the cost of the
    /// mechanism, not of waiting), with or without CPU leases.
    Private {
        /// `Builder::host_tokens_leases`.
        leases: bool,
    },
}

impl CotenantPeer {
    /// A pool of `threads` threads run by `policy`, taking host CPU tokens as `tokens` says,
    /// with task histograms on or off as `histograms` says (`None`: the builder's default).
    pub fn new(
        policy: cotenant::Policy,
        threads: usize,
        tokens: Tokens,
        histograms: Option<bool>,
    ) -> Result<Self, String> {
        let mut builder = cotenant::Pool::builder()
            .policy(policy)
            .threads(threads)
            .queue_capacity(QUEUE_CAPACITY)
            .on_full(cotenant::Full::Block)
            .name("bench");
        if tokens == Tokens::Off {
            builder = builder.host_tokens_off();
        }
        if let Some(on) = histograms {
            builder = builder.task_histograms(on);
        }
        if let Tokens::Private { leases } = tokens {
            let count =
                u32::try_from(threads).map_err(|_| format!("{threads} threads: too many for a token set"))?;
            // Private: removed when the pool drops its last reference, on every exit path.
            let set =
                cotenant::tokens::HostTokens::private(count).map_err(|e| format!("host tokens: {e}"))?;
            builder = builder.host_tokens(Arc::new(set)).host_tokens_leases(leases);
        }
        let pool = builder.build().map_err(|e| format!("cotenant pool: {e}"))?;
        Ok(Self { pool })
    }
}

impl Peer for CotenantPeer {
    fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.pool.execute(f);
    }

    fn spawn_join<T, F>(&self, f: F) -> Result<T, String>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.pool.spawn(f).join().map_err(|e| format!("cotenant task: {e}"))
    }

    fn shutdown(self) -> Result<(), String> {
        self.pool.shutdown();
        Ok(())
    }
}

/// A rayon pool. Its threads report their exit, so that shutdown can wait for them (dropping a
/// rayon pool does not join its threads) and only one pool runs at a time.
pub struct RayonPeer {
    /// The pool.
    pool: rayon::ThreadPool,
    /// How many of its threads have exited.
    exits: Arc<Exits>,
    /// How many threads it has.
    threads: usize,
}

impl RayonPeer {
    /// A pool of `threads` threads.
    pub fn new(threads: usize) -> Result<Self, String> {
        let exits = Arc::new(Exits::default());
        let on_exit = Arc::clone(&exits);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("bench-rayon-{i}"))
            .exit_handler(move |_| on_exit.record())
            .build()
            .map_err(|e| format!("rayon pool: {e}"))?;
        Ok(Self { pool, exits, threads })
    }
}

impl Peer for RayonPeer {
    fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.pool.spawn(f);
    }

    fn shutdown(self) -> Result<(), String> {
        let Self { pool, exits, threads } = self;
        // Rayon's threads run what is queued, then exit once the pool is dropped.
        drop(pool);
        exits.wait_for(threads, EXIT_LIMIT).map_err(|exited| {
            format!("rayon pool: {exited} of {threads} threads exited within {} s", EXIT_LIMIT.as_secs())
        })
    }
}

/// Counts thread exits, for pools that do not join their threads.
#[derive(Default)]
struct Exits {
    /// Threads exited so far.
    count: Mutex<usize>,
    /// Notified on every exit.
    changed: Condvar,
}

impl Exits {
    /// Called by each thread as it exits.
    fn record(&self) {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.changed.notify_all();
    }

    /// Waits until `threads` threads have exited, for at most `limit`; the error is the count
    /// reached.
    fn wait_for(&self, threads: usize, limit: Duration) -> Result<(), usize> {
        let count = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        let (count, _) = self
            .changed
            .wait_timeout_while(count, limit, |exited| *exited < threads)
            .unwrap_or_else(PoisonError::into_inner);
        if *count >= threads {
            Ok(())
        } else {
            Err(*count)
        }
    }
}

/// A hand-written fixed pool: `n` threads looping on one `crossbeam_channel::bounded` receiver
/// of boxed tasks. The simplest pool worth having; what cotenant's fixed policy should match.
pub struct CrossbeamPeer {
    /// The queue; dropping it lets the workers drain it and exit.
    tx: crossbeam_channel::Sender<Job>,
    /// The workers.
    workers: Vec<JoinHandle<()>>,
}

impl CrossbeamPeer {
    /// A pool of `threads` threads on a queue of [`QUEUE_CAPACITY`].
    pub fn new(threads: usize) -> Result<Self, String> {
        let (tx, rx) = crossbeam_channel::bounded::<Job>(QUEUE_CAPACITY);
        let workers = (0..threads)
            .map(|i| {
                let rx = rx.clone();
                thread::Builder::new().name(format!("bench-xbeam-{i}")).spawn(move || {
                    for job in rx {
                        job();
                    }
                })
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| format!("crossbeam pool: {e}"))?;
        Ok(Self { tx, workers })
    }
}

impl Peer for CrossbeamPeer {
    fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.tx.send(Box::new(f)).expect("crossbeam pool: every worker has exited");
    }

    fn shutdown(self) -> Result<(), String> {
        let Self { tx, workers } = self;
        // The workers' `for` loops end once the channel is empty and disconnected.
        drop(tx);
        let panicked = workers.into_iter().map(JoinHandle::join).filter(Result::is_err).count();
        if panicked == 0 {
            Ok(())
        } else {
            Err(format!("crossbeam pool: {panicked} worker(s) panicked"))
        }
    }
}

/// The `threadpool` crate's pool (an unbounded `std::sync::mpsc` queue behind a mutex).
pub struct ThreadpoolPeer {
    /// The pool.
    pool: threadpool::ThreadPool,
}

impl ThreadpoolPeer {
    /// A pool of `threads` threads.
    pub fn new(threads: usize) -> Self {
        Self { pool: threadpool::ThreadPool::new(threads) }
    }
}

impl Peer for ThreadpoolPeer {
    fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.pool.execute(f);
    }

    fn shutdown(self) -> Result<(), String> {
        self.pool.join();
        match self.pool.panic_count() {
            0 => Ok(()),
            panicked => Err(format!("threadpool: {panicked} task(s) panicked")),
        }
    }
}

/// tokio's blocking pool: a multi-thread runtime with one async worker and at most `n` blocking
/// threads, fed by `spawn_blocking` and joined with `block_on(handle)`.
pub struct TokioPeer {
    /// The runtime.
    rt: tokio::runtime::Runtime,
}

impl TokioPeer {
    /// A runtime with at most `threads` blocking threads.
    pub fn new(threads: usize) -> Result<Self, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(threads)
            .thread_name("bench-tokio")
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        Ok(Self { rt })
    }
}

impl Peer for TokioPeer {
    fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        // Dropping the handle detaches the task; it still runs.
        drop(self.rt.spawn_blocking(f));
    }

    fn spawn_join<T, F>(&self, f: F) -> Result<T, String>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.rt.block_on(self.rt.spawn_blocking(f)).map_err(|e| format!("tokio task: {e}"))
    }

    fn shutdown(self) -> Result<(), String> {
        // Dropping the runtime waits for its threads, blocking ones included.
        drop(self.rt);
        Ok(())
    }
}

impl Peer for reference::Pool {
    fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.submit(f);
    }

    fn shutdown(self) -> Result<(), String> {
        reference::Pool::shutdown(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_command_line_values() {
        for kind in PeerKind::ALL {
            let value = kind.to_possible_value().expect("no variant is skipped");
            assert_eq!(value.get_name(), kind.name());
        }
    }
}

//! Async items (`lab neighbours --items async`, seed 000's lightweight threads): futures that
//! await a short tokio timer, then compute, on tokio's multi-thread runtime with its default
//! workers (`tokio-default`) or max(1, CPUs / P) of them (`tokio-optimal`), or on the cotenant
//! executor of the default pool (`cotenant-async`), whose timers a current-thread runtime on a
//! thread of its own (`tokio-io`) drives while each poll enters its handle ([`Entered`]).
//!
//! An item computes with the thread items' own body ([`workload::run_item`]) inside the poll
//! that resumes it: its service time is the compute alone, measured alike; its end-to-end time
//! runs from its scheduled arrival to the end of the compute, timer included, for every kind.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::oneshot;

use crate::args::PoolKind;
use crate::neighbours::kind_name;
use crate::workload::{self, Calibration, ItemTimes};

/// Polls its future with a tokio runtime entered, so that the future's timers (and sockets)
/// find their driver on whichever thread of the pool polls it.
pub struct Entered<F> {
    handle: Handle,
    // Boxed: pinned without unsafe projection, which leaves `Entered` itself `Unpin`.
    inner: Pin<Box<F>>,
}

impl<F: Future> Entered<F> {
    /// `inner`, to be polled inside the runtime of `handle`.
    pub fn new(handle: Handle, inner: F) -> Entered<F> {
        Entered { handle, inner: Box::pin(inner) }
    }
}

impl<F: Future> Future for Entered<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let _entered = this.handle.enter();
        this.inner.as_mut().poll(cx)
    }
}

/// A current-thread tokio runtime on a thread of its own (`tokio-io`), driving the timers of
/// the futures the pool polls (each poll enters `handle`); stopped and joined when dropped.
pub struct IoThread {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IoThread {
    /// Starts the runtime on its thread.
    pub fn start() -> anyhow::Result<IoThread> {
        let runtime = Builder::new_current_thread()
            .enable_time()
            .build()
            .context("starting the timers' tokio runtime")?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("tokio-io".to_owned())
            // The driver runs while this thread waits; a send or a dropped sender ends it.
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .context("starting the tokio-io thread")?;
        Ok(IoThread { handle, stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for IoThread {
    fn drop(&mut self) {
        drop(self.stop.take()); // a dropped sender ends the runtime's `block_on`
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What serves one worker process's async items.
pub enum Executor {
    /// A tokio multi-thread runtime (`tokio-default`, `tokio-optimal`).
    Tokio(Runtime),
    /// The cotenant executor (`cotenant-async`): the pool whose workers poll the items, and
    /// the runtime of their timers.
    /// (The timers' thread is boxed: a tokio runtime is several times its size.)
    Cotenant(cotenant::Pool, Box<IoThread>),
}

impl Executor {
    /// The executor of `kind` in a process of an experiment of `processes` processes; `pool`
    /// builds the cotenant pool (the worker builds `adaptive`'s, host tokens included).
    pub fn build(
        kind: PoolKind,
        processes: u32,
        pool: impl FnOnce() -> anyhow::Result<cotenant::Pool>,
    ) -> anyhow::Result<Executor> {
        let tokio = |workers: Option<usize>| -> anyhow::Result<Executor> {
            let mut builder = Builder::new_multi_thread();
            builder.enable_time().thread_name("lab-tokio");
            if let Some(workers) = workers {
                builder.worker_threads(workers);
            }
            Ok(Executor::Tokio(builder.build().context("starting a tokio runtime")?))
        };
        match kind {
            // tokio's own default: one worker per CPU the process sees.
            PoolKind::TokioDefault => tokio(None),
            PoolKind::TokioOptimal => tokio(Some((cotenant::cpus::get() / processes.max(1) as usize).max(1))),
            PoolKind::CotenantAsync => Ok(Executor::Cotenant(pool()?, Box::new(IoThread::start()?))),
            other => anyhow::bail!("--pool {}: not an executor of async items", kind_name(other)),
        }
    }

    /// The pool of `cotenant-async`; `None` for tokio's runtimes.
    pub fn pool(&self) -> Option<&cotenant::Pool> {
        match self {
            Executor::Tokio(_) => None,
            Executor::Cotenant(pool, _) => Some(pool),
        }
    }

    /// The executor's worker threads.
    pub fn workers(&self) -> usize {
        match self {
            Executor::Tokio(runtime) => runtime.metrics().num_workers(),
            Executor::Cotenant(pool, _) => pool.metrics().threads,
        }
    }

    /// Runs `schedule` open loop, as `workload::run` does for thread items: the calling thread
    /// spawns item `i` at its intended time; the item awaits `wait`, then computes. Returns
    /// when every item has finished.
    pub fn run(
        &self,
        calibration: Calibration,
        schedule: &[Duration],
        wait: Duration,
        lock: Option<&Arc<Mutex<()>>>,
    ) -> Vec<ItemTimes> {
        let slots = workload::item_slots(schedule.len());
        let start = Instant::now();
        let shared = Arc::clone(&slots);
        let item = move |i: usize| {
            let (slots, lock) = (Arc::clone(&shared), lock.cloned());
            async move {
                tokio::time::sleep(wait).await;
                workload::run_item(&calibration, lock.as_deref(), start, &slots[i]);
            }
        };
        // A panicked or cancelled item leaves its slot at 0: counted as not completed.
        match self {
            Executor::Tokio(runtime) => {
                let mut handles = Vec::with_capacity(schedule.len());
                for (i, &at) in schedule.iter().enumerate() {
                    workload::sleep_until(start + at);
                    handles.push(runtime.spawn(item(i)));
                }
                cotenant::block_on(async {
                    for handle in handles {
                        let _ = handle.await;
                    }
                });
            }
            Executor::Cotenant(pool, io) => {
                let mut tasks = Vec::with_capacity(schedule.len());
                for (i, &at) in schedule.iter().enumerate() {
                    workload::sleep_until(start + at);
                    tasks.push(pool.spawn_future(Entered::new(io.handle.clone(), item(i))));
                }
                for task in tasks {
                    let _ = task.join();
                }
            }
        }
        workload::item_times(schedule, &slots)
    }

    /// Stops the executor once its items are done: the pool before the timers' thread.
    pub fn shutdown(self) {
        match self {
            Executor::Tokio(runtime) => runtime.shutdown_timeout(Duration::from_secs(1)),
            // `_io` (the timers' thread) is dropped at the end of the arm, after the pool.
            Executor::Cotenant(pool, _io) => pool.shutdown(),
        }
    }
}

#[cfg(test)]
mod tests;

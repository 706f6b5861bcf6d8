//! loom models of borrowing (`borrow.rs`; `Shared::maybe_borrow`, `Roster::wake_borrower` and
//! step 4 of the worker loop): a task queued while every allowed worker is busy wakes one
//! sleeper beyond the target, marked borrowed before it can see its wake-up; that worker runs
//! the task only as a borrower and gives the CPU back (clears its mark and sleeps) once the
//! queue is empty, leaving the sleepers' count (`idle_allowed`, invariant I of
//! `pool/README.md`) exact. Run with `make loom`.
//!
//! Under loom, `Borrow::cpu_idle_now` says a CPU is idle (there is no `/proc/loadavg`) and the
//! submit path has no rate limit (loom models no time): whether a model borrows is decided by
//! the limit it sets with `Borrow::set`.

use super::Pool;
use crate::policy::Policy;
use crate::sync::{thread, Arc, Ordering};
use crate::wait::Event;

/// Preemptions explored per execution: 2 finds the races between a claim and a worker falling
/// asleep (they need one preemption between a check and a sleep), as in `loom_protocol.rs`.
const PREEMPTIONS: usize = 2;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS);
    builder.check(f);
}

/// Worker 0, the only one the target allows, is blocked in a task; worker 1 sleeps beyond the
/// target. A task submitted now can only run if the submit borrows worker 1: it does, exactly
/// once, worker 1 runs it marked as borrowed, and when the queue is empty it gives the CPU
/// back. A lost borrow is a loom deadlock (the blocked task waits for the borrowed one).
#[test]
fn a_task_behind_a_blocked_worker_runs_on_a_borrowed_one_that_gives_the_cpu_back() {
    model(|| {
        let pool = Pool::builder().policy(Policy::fixed(1)).threads(2).queue_capacity(2).build().unwrap();
        let shared = pool.shared.clone();
        // The controller's decision: one worker beyond the target may be borrowed.
        shared.borrow.set(2, 2);
        let (started, gate) = (Arc::new(Event::new()), Arc::new(Event::new()));
        let blocker = {
            let (started, gate) = (started.clone(), gate.clone());
            pool.spawn(move || {
                started.set();
                gate.wait();
            })
        };
        // Worker 0 is busy with the blocker (its busy mark precedes the task) ...
        started.wait();
        // ... and worker 1 has registered as a sleeper: only a borrow can run the next task.
        while shared.roster.asleep() == 0 {
            thread::yield_now();
        }
        let probe = {
            let shared = shared.clone();
            pool.spawn(move || shared.workers[1].borrowed.load(Ordering::SeqCst))
        };
        assert!(probe.join().unwrap(), "a worker beyond the target ran a task without being borrowed");
        gate.set();
        blocker.join().unwrap();
        // Quiescence: both workers asleep again.
        while shared.roster.asleep() < 2 {
            thread::yield_now();
        }
        assert!(!shared.workers[1].borrowed.load(Ordering::SeqCst), "the borrowed worker kept the CPU");
        assert_eq!(shared.roster.idle_allowed(), 1, "only worker 0 counts as an allowed sleeper");
        assert_eq!(shared.borrows.load(Ordering::Relaxed), 1, "one borrow for the one task that needed it");
        pool.shutdown();
    });
}

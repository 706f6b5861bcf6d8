//! loom models of the park/wake protocol (`pool/README.md`): every interleaving of a few
//! threads, within a preemption bound, must run each accepted task exactly once, lose no
//! wake-up and shut down. Run with `make loom`
//! (`RUSTFLAGS="--cfg loom" cargo test -p cotenant --lib --release pool::loom_protocol`).

use crate::policy::Policy;
use crate::pool::{JoinError, Pool};
use crate::sync::{thread, Arc};

/// Preemptions explored per execution: 2 finds the classic lost-wake-up races (they need one
/// preemption between a check and a sleep) and keeps each model under a minute.
const PREEMPTIONS: usize = 2;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS);
    builder.check(f);
}

fn pool(threads: usize, target: usize) -> Pool {
    pool_with_queue(threads, target, 2)
}

fn pool_with_queue(threads: usize, target: usize, capacity: usize) -> Pool {
    let pool = Pool::builder()
        .policy(Policy::fixed(threads))
        .threads(threads)
        .queue_capacity(capacity)
        .build()
        .unwrap();
    if target != threads {
        pool.shared.roster.set_target(target, || pool.shared.queued());
    }
    pool
}

/// Step P against step S: a submit racing with the only worker falling asleep.
#[test]
fn a_task_submitted_while_the_worker_falls_asleep_runs() {
    model(|| {
        let pool = pool(1, 1);
        let task = pool.spawn(|| 7);
        assert_eq!(task.join().unwrap(), 7);
        pool.shutdown();
    });
}

/// Step T: a raised target wakes a worker parked by the target when work is queued.
#[test]
fn raising_the_target_wakes_a_parked_worker_for_queued_work() {
    model(|| {
        let pool = Arc::new(pool(2, 1));
        let raiser = {
            let pool = pool.clone();
            thread::spawn_named("raiser".into(), move || {
                pool.shared.roster.set_target(2, || pool.shared.queued());
            })
            .unwrap()
        };
        let a = pool.spawn(|| 1);
        let b = pool.spawn(|| 2);
        assert_eq!(a.join().unwrap() + b.join().unwrap(), 3);
        raiser.join().unwrap();
        assert_eq!(pool.target(), 2);
        pool.shutdown();
    });
}

/// Step T (shrink): lowering the target while tasks are queued strands none of them.
#[test]
fn lowering_the_target_strands_no_task() {
    model(|| {
        let pool = Arc::new(pool(2, 2));
        let lowerer = {
            let pool = pool.clone();
            thread::spawn_named("lowerer".into(), move || {
                pool.shared.roster.set_target(1, || pool.shared.queued());
            })
            .unwrap()
        };
        let a = pool.spawn(|| 1);
        let b = pool.spawn(|| 2);
        lowerer.join().unwrap();
        assert_eq!(a.join().unwrap() + b.join().unwrap(), 3);
        pool.shutdown();
        assert_eq!(pool.shared.roster.idle_allowed(), 0);
    });
}

/// Shutdown racing with a submit: the task runs, is cancelled or is rejected, exactly one of
/// them, and shutdown returns.
#[test]
fn shutdown_now_racing_a_submit_resolves_the_task_once() {
    model(|| {
        let pool = Arc::new(pool(1, 1));
        let stopper = {
            let pool = pool.clone();
            thread::spawn_named("stopper".into(), move || pool.shutdown_now()).unwrap()
        };
        let task = pool.spawn(|| 5);
        match task.join() {
            Ok(5) | Err(JoinError::Cancelled) | Err(JoinError::Rejected) => {}
            other => panic!("unexpected {other:?}"),
        }
        stopper.join().unwrap();
        assert_eq!(pool.shared.roster.asleep(), 0, "a worker was left asleep after shutdown");
    });
}

/// Step F (`Full::Block`): a submitter blocked on a full queue is woken once the worker has
/// drained it to half (not at every pop) and its task runs; none is lost. Capacity 4 so that
/// "at most half full" differs from "one slot free".
#[test]
fn a_submitter_blocked_on_a_full_queue_gets_its_task_in() {
    model(|| {
        let pool = pool_with_queue(1, 1, 4);
        let tasks: Vec<_> = (0..5).map(|i| pool.spawn(move || i)).collect();
        for (i, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.join().unwrap(), i);
        }
        pool.shutdown();
    });
}

/// Step P for a woken future's poll (`Shared::push_woken`) against the only worker taking the
/// first task and falling asleep: with the queue's one place taken, the poll goes to the
/// overflow list (`queue.rs`), and either way it runs once, with nothing lost or left asleep.
#[test]
fn a_woken_poll_pushed_past_a_full_queue_runs_once() {
    use crate::pool::job::Job;
    use crate::pool::task::Outcome;
    use crate::sync::{AtomicUsize, Ordering};
    model(|| {
        let pool = pool_with_queue(1, 1, 1);
        let ran = Arc::new(AtomicUsize::new(0));
        let first = pool.spawn(|| 1);
        let counter = ran.clone();
        let poll = Job::from_fn(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Outcome::Completed
        });
        assert!(pool.shared.push_woken(poll).is_ok(), "a woken poll is never refused before shutdown");
        assert_eq!(first.join().unwrap(), 1);
        pool.shutdown();
        assert_eq!(ran.load(Ordering::SeqCst), 1, "the woken poll ran once");
        assert_eq!(pool.shared.roster.asleep(), 0, "a worker was left asleep after shutdown");
    });
}

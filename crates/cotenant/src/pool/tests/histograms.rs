//! The task histograms end to end (`Builder::task_histograms`): every task that runs is
//! counted once in the queue-wait and the run-time histograms, as `Metrics::completed` counts
//! it, whichever way it ran (a worker's loop, a join or scope running queued tasks, the
//! submitter under `Full::CallerRuns`); tasks `shutdown_now` drops are not. Times are checked
//! only from below (a sleep, a wait held open by the test): the host's load decides the rest.
//!
//! Compiled as a child of `pool::snapshot` (`#[path]`), so that it can read the histograms of
//! the tasks run by their submitters on their own.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::histogram::Histogram;
use crate::metrics::Metrics;
use crate::{Builder, Full, JoinError, Policy, Pool, Task};

/// A pool of `n` workers that times its tasks and shares no host tokens (a neighbour's tokens
/// would only add waits, not change a count).
fn fixed(n: usize) -> Builder {
    Pool::builder().policy(Policy::fixed(n)).host_tokens_off().task_histograms(true)
}

/// Both histograms, which a timed pool must have.
fn histograms(metrics: &Metrics) -> (Histogram, Histogram) {
    (
        metrics.queue_wait.expect("a timed pool has a queue-wait histogram"),
        metrics.run_time.expect("and a run-time one"),
    )
}

/// Occupies the only worker of `pool` with a task that runs until the sender is used, and
/// returns once the worker runs it.
fn occupy(pool: &Pool) -> (Task<()>, mpsc::Sender<()>) {
    let (release, gate) = mpsc::channel::<()>();
    let task = pool.spawn(move || {
        let _ = gate.recv();
    });
    while pool.metrics().running == 0 {
        std::thread::yield_now();
    }
    (task, release)
}

#[test]
fn every_task_run_is_counted_once_in_both_histograms_whichever_way_it_ran() {
    let pool = Arc::new(fixed(2).queue_capacity(64).build().unwrap());
    let mut tasks = Vec::new();
    for i in 0..40u32 {
        match i % 4 {
            0 => pool.execute(|| {}),
            1 => tasks.push(pool.spawn(move || {
                if i % 8 == 1 {
                    panic!("task {i} fails on purpose");
                }
            })),
            2 => pool.execute(move || {
                if i % 8 == 2 {
                    panic!("detached task {i} fails on purpose");
                }
            }),
            _ => tasks.push(pool.spawn(|| {})),
        }
    }
    let failed =
        tasks.into_iter().map(Task::join).filter(|r| matches!(r, Err(JoinError::Panicked(_)))).count();
    assert_eq!(failed, 5);
    // Tasks that run queued tasks of the pool while they wait: a join inside a task (2 tasks),
    // a scope (5), `Pool::join` (its `b` is one queued job, whoever ends up running `b`).
    let inner = pool.clone();
    assert_eq!(pool.spawn(move || inner.spawn(|| 7).join().unwrap()).join().unwrap(), 7);
    pool.scope(|s| {
        for _ in 0..5 {
            s.spawn(|_| {});
        }
    });
    assert_eq!(pool.join(|| 1, || 2), (1, 2));
    pool.shutdown();

    let metrics = pool.metrics();
    assert_eq!(metrics.completed, 40 + 2 + 5 + 1);
    assert_eq!(metrics.panicked, 10);
    let (wait, run) = histograms(&metrics);
    assert_eq!(wait.count(), metrics.completed);
    assert_eq!(run.count(), metrics.completed);
    assert_eq!(*wait.cumulative().last().unwrap(), metrics.completed, "cumulative ends at the count");
}

#[test]
fn a_task_its_submitter_runs_is_counted_once_with_no_queue_wait() {
    let pool = fixed(1).queue_capacity(1).on_full(Full::CallerRuns).build().unwrap();
    let (blocker, release) = occupy(&pool);
    pool.execute(|| {}); // takes the queue's one slot: the worker is busy with the blocker
    let here = std::thread::current().id();
    let (report, ran_on) = mpsc::channel();
    pool.execute(move || report.send(std::thread::current().id()).unwrap()); // no room
    assert_eq!(ran_on.recv().unwrap(), here, "the submitter ran it");
    assert_eq!(pool.metrics().caller_ran, 1);
    let (mut wait, mut run) = (Histogram::default(), Histogram::default());
    pool.shared.caller_histograms.add_to(&mut wait, &mut run);
    assert_eq!((wait.count(), run.count()), (1, 1));
    assert_eq!(wait.buckets[0], 1, "it never waited in the queue");

    release.send(()).unwrap();
    blocker.join().unwrap();
    pool.shutdown();
    let metrics = pool.metrics();
    assert_eq!(metrics.completed, 3);
    let (wait, run) = histograms(&metrics);
    assert_eq!((wait.count(), run.count()), (3, 3));
}

#[test]
fn a_sleep_and_a_wait_in_the_queue_show_at_their_length_or_above() {
    const TWENTY_MS: u64 = 20_000_000;
    let pool = fixed(1).build().unwrap();
    let (blocker, release) = occupy(&pool);
    let sleeper = pool.spawn(|| std::thread::sleep(Duration::from_millis(20)));
    // Queued before this sleep and taken only after the release: it waits 20 ms at least, and
    // the blocker runs that long at least.
    std::thread::sleep(Duration::from_millis(20));
    release.send(()).unwrap();
    blocker.join().unwrap();
    sleeper.join().unwrap();
    pool.shutdown();

    let (wait, run) = histograms(&pool.metrics());
    assert_eq!((wait.count(), run.count()), (2, 2));
    // The buckets that end below 20 ms: none of the runs, at most the blocker's wait.
    let below = (0..).take_while(|&i| Histogram::upper_bound_ns(i).is_some_and(|bound| bound < TWENTY_MS));
    let below: Vec<usize> = below.collect();
    let last_below = *below.last().unwrap();
    assert_eq!(run.cumulative()[last_below], 0, "both runs lasted 20 ms or more: {run:?}");
    assert!(wait.cumulative()[last_below] <= 1, "the sleeper waited 20 ms or more: {wait:?}");
    assert!(run.quantile_ns(0.0).unwrap() >= TWENTY_MS);
    assert!(wait.quantile_ns(1.0).unwrap() >= TWENTY_MS);
    assert!(run.sum_ns >= 2 * TWENTY_MS);
    assert!(wait.sum_ns >= TWENTY_MS);
}

#[test]
fn tasks_shutdown_now_drops_unrun_are_counted_in_neither() {
    let pool = Arc::new(fixed(1).build().unwrap());
    let (blocker, release) = occupy(&pool);
    let queued: Vec<Task<()>> = (0..5).map(|_| pool.spawn(|| ())).collect();
    let stopper = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.shutdown_now())
    };
    // Each fails as soon as `shutdown_now` has emptied the queue; the worker is still busy.
    for task in queued {
        assert!(matches!(task.join(), Err(JoinError::Cancelled)));
    }
    release.send(()).unwrap();
    blocker.join().unwrap();
    stopper.join().unwrap();

    let metrics = pool.metrics();
    assert_eq!(metrics.completed, 1);
    let (wait, run) = histograms(&metrics);
    assert_eq!((wait.count(), run.count()), (1, 1));
}

#[test]
fn after_wait_idle_a_single_workers_histograms_count_every_task() {
    let pool = fixed(1).build().unwrap();
    for _ in 0..100 {
        pool.execute(|| {});
    }
    pool.wait_idle();
    // The last task's run ended when the worker found the queue empty, before the task
    // counted as finished: `wait_idle` returned after that.
    let metrics = pool.metrics();
    assert_eq!(metrics.completed, 100);
    let (wait, run) = histograms(&metrics);
    assert_eq!((wait.count(), run.count()), (100, 100));
}

#[test]
fn a_pool_without_histograms_has_none_and_stamps_nothing() {
    let pool =
        Pool::builder().policy(Policy::fixed(1)).host_tokens_off().task_histograms(false).build().unwrap();
    pool.spawn(|| ()).join().unwrap();
    pool.shutdown();
    let metrics = pool.metrics();
    assert_eq!(metrics.completed, 1);
    assert_eq!((metrics.queue_wait, metrics.run_time), (None, None));

    // The submit reads no clock for a pool that does not time its tasks.
    let job = crate::pool::task::Job::detached(|| ());
    let refused = match pool.shared.push(job) {
        Err(crate::pool::shared::Refused::ShutDown(job)) => job,
        _ => panic!("a shut-down pool refuses the job"),
    };
    assert_eq!(refused.enqueued_ns(), 0);
}

#[test]
fn a_timed_pool_stamps_each_job_once_at_its_first_submit() {
    let pool = fixed(1).build().unwrap();
    pool.shutdown();
    let job = crate::pool::task::Job::detached(|| ());
    let Err(crate::pool::shared::Refused::ShutDown(job)) = pool.shared.push(job) else {
        panic!("a shut-down pool refuses the job")
    };
    let first = job.enqueued_ns();
    assert_ne!(first, 0);
    let Err(crate::pool::shared::Refused::ShutDown(job)) = pool.shared.push(job) else {
        panic!("a shut-down pool refuses the job")
    };
    assert_eq!(job.enqueued_ns(), first, "a second try keeps the first stamp");
}

#[test]
fn the_histograms_are_off_unless_the_builder_or_the_environment_turns_them_on() {
    use crate::pool::builder::{task_histograms_from, TASK_HISTOGRAMS_ENV};
    assert_eq!(task_histograms_from(None), (false, None), "off when nobody says");
    assert_eq!(task_histograms_from(Some("on")), (true, None));
    assert_eq!(task_histograms_from(Some(" 1 ")), (true, None));
    assert_eq!(task_histograms_from(Some("off")), (false, None));
    assert_eq!(task_histograms_from(Some(" ")), (false, None), "a blank value says nothing");
    let (on, why) = task_histograms_from(Some("sometimes"));
    assert!(!on, "a value that says neither keeps the default");
    let why = why.expect("and says why");
    assert!(why.contains(TASK_HISTOGRAMS_ENV) && why.contains("sometimes"), "{why}");
    // Whether the builder's word wins over the environment's: `tests/task_histograms_env.rs`
    // (it sets the environment, so it has a test binary of its own).
}

//! loom models of an elastic pool's retirement (step R of `pool/README.md`; `elastic.rs` step
//! 4, `worker.rs` step 1): the controller lowers the size (step T) and wakes the sleepers above
//! it (`Roster::wake_above_target`), and a worker at or above the size exits instead of
//! sleeping. In every interleaving, within the preemption bound, of that shrink with a submit
//! and the workers' loops, the task runs (a worker claimed for it that retires instead leaves
//! it to one that does not), and the worker above the size leaves whatever it was doing
//! (running, spinning, registering as a sleeper or parked). A lost wake-up is a loom deadlock.
//! Run with `make loom`.
//!
//! Starting threads (`elastic::spawn_missing`) is not modelled: it lives in code built only
//! outside loom (it creates OS threads and reads their clocks); `tests/elastic.rs` runs it.

use super::Pool;
use crate::sync::{lock, thread, wait, Arc};

/// Preemptions explored per execution: 2, as in `loom_protocol.rs` (the lost-wake-up races
/// need one preemption between a check and a sleep).
const PREEMPTIONS: usize = 2;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS);
    builder.check(f);
}

/// An elastic pool of two threads shrinks to one while a task is submitted: the task runs, and
/// worker 1 retires (the pool's live threads fall to one before shutdown).
#[test]
fn a_task_submitted_while_a_worker_retires_runs() {
    model(|| {
        let pool = Arc::new(Pool::builder().elastic(2, 2).queue_capacity(2).build().unwrap());
        assert_eq!(pool.target(), 2);
        // The controller's half of a shrink (`control.rs`): lower the size, then wake the
        // sleepers at or above it so that they retire.
        let controller = {
            let pool = pool.clone();
            thread::spawn_named("controller".into(), move || {
                pool.shared.roster.set_target(1, || pool.shared.queued());
                pool.shared.roster.wake_above_target();
            })
            .unwrap()
        };
        let task = pool.spawn(|| 7);
        assert_eq!(task.join().unwrap(), 7);
        controller.join().unwrap();
        assert_eq!(pool.target(), 1);
        // Worker 1 leaves without a shutdown to make it.
        let mut live = lock(&pool.shared.live);
        while *live > 1 {
            live = wait(&pool.shared.exited, live);
        }
        drop(live);
        pool.shutdown();
    });
}

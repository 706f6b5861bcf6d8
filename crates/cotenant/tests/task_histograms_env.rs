//! `COTENANT_TASK_HISTOGRAMS`: the task histograms of the pools whose builder does not say
//! follow it, and the builder's word wins over it. One test: it sets the process's environment,
//! which no other test of this binary may read at the same time.

use cotenant::pool::TASK_HISTOGRAMS_ENV;
use cotenant::{Policy, Pool};

/// Whether a pool built by `builder` times its tasks (it runs one and looks at its metrics).
fn times_its_tasks(builder: cotenant::Builder) -> bool {
    let pool = builder.policy(Policy::fixed(1)).host_tokens_off().build().unwrap();
    pool.spawn(|| ()).join().unwrap();
    pool.shutdown();
    let metrics = pool.metrics();
    assert_eq!(metrics.queue_wait.is_some(), metrics.run_time.is_some(), "both or neither");
    if let Some(wait) = metrics.queue_wait {
        assert_eq!(wait.count(), 1, "the one task, once");
    }
    metrics.queue_wait.is_some()
}

#[test]
fn the_environment_turns_the_histograms_on_for_pools_whose_builder_does_not_say() {
    std::env::remove_var(TASK_HISTOGRAMS_ENV);
    assert!(!times_its_tasks(Pool::builder()), "off by default");
    assert!(times_its_tasks(Pool::builder().task_histograms(true)));

    std::env::set_var(TASK_HISTOGRAMS_ENV, "on");
    assert!(times_its_tasks(Pool::builder()), "on by the environment");
    assert!(!times_its_tasks(Pool::builder().task_histograms(false)), "the builder wins");

    // A blank value says nothing, and a value that is neither keeps the default (logged).
    for value in ["", "  ", "sometimes"] {
        std::env::set_var(TASK_HISTOGRAMS_ENV, value);
        assert!(!times_its_tasks(Pool::builder()), "{value:?}");
    }
    std::env::set_var(TASK_HISTOGRAMS_ENV, "off");
    assert!(!times_its_tasks(Pool::builder()));
    assert!(times_its_tasks(Pool::builder().task_histograms(true)), "the builder wins");
    std::env::remove_var(TASK_HISTOGRAMS_ENV);
}

//! The default pool's host tokens (`cotenant::tokens`, "Members"; `Builder::host_tokens`):
//! opened for this user and CPU set, engaged only while the set is shared, off by the
//! environment, and a refused set leaves the pool running without. One test: it sets the
//! process's environment (`COTENANT_TOKENS_SET`, `COTENANT_TOKENS`), which no other test of
//! this binary may read at the same time.

// Host CPU tokens need Linux (System V semaphores): nothing to test under the fallback for
// other systems (`tests/fallback.rs` checks the error it gives instead).
#![cfg(not(cotenant_force_fallback))]

use cotenant::metrics::TokenState;
use cotenant::tokens::{HostTokens, DEFAULT_SET_ENV, TOKENS_ENV};
use cotenant::{Policy, Pool};

mod common;
use common::{sysv_key_exists, until, Child, RemoveNamed};

fn run_tasks(pool: &Pool, n: usize) {
    let tasks: Vec<_> = (0..n).map(|i| pool.spawn(move || i * 2)).collect();
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.join().unwrap(), i * 2);
    }
}

fn state(pool: &Pool) -> TokenState {
    pool.metrics().host_tokens
}

#[test]
fn the_default_pool_shares_tokens_only_while_another_process_or_pool_shares_its_set() {
    let name = format!("cotenant-test-default-{}", std::process::id());
    std::env::set_var(DEFAULT_SET_ENV, &name);
    let _remove = RemoveNamed(name.clone());

    // Alone: the set is opened, but no token is taken.
    let pool = Pool::builder().threads(2).build().unwrap();
    assert_eq!(cotenant::tokens::default_set_name().0, name);
    assert!(HostTokens::exists(&name), "the default pool opened its set");
    assert_eq!(state(&pool), TokenState::Alone);
    run_tasks(&pool, 200);
    assert_eq!(pool.metrics().token_takes, 0, "a lone process takes no token");

    // Another process joins the set: within a controller period or so, tokens are taken.
    let observer = HostTokens::open_observer(&name, 2).unwrap();
    assert_eq!(observer.members().unwrap(), 1, "the pool's process; the observer does not count");
    let semid = observer.semid();
    let other = Child::run(move || {
        let mut op = libc::sembuf {
            sem_num: cotenant::tokens::MEMBERS_SEMAPHORE,
            sem_op: 1,
            sem_flg: libc::SEM_UNDO as i16,
        };
        // SAFETY: one valid sembuf.
        unsafe { libc::semop(semid, &mut op, 1) == 0 }
    });
    until("another member is counted", || observer.members().unwrap() == 2);
    until("the pool engages", || state(&pool) == TokenState::Engaged);
    run_tasks(&pool, 200);
    assert!(pool.metrics().token_takes > 0, "{}", pool.metrics());
    // It dies: the kernel uncounts it, and the pool goes back to taking none.
    drop(other);
    assert_eq!(observer.members().unwrap(), 1);
    until("the pool disengages", || state(&pool) == TokenState::Alone);
    let takes = pool.metrics().token_takes;
    run_tasks(&pool, 200);
    assert_eq!(pool.metrics().token_takes, takes, "alone again, no token taken");
    assert_eq!(observer.available().unwrap(), observer.count(), "every token is back");

    // A second pool of this process shares the same handle: both engage; a fixed one too
    // (its controller only keeps the tokens).
    let fixed = Pool::builder().policy(Policy::fixed(1)).threads(1).build().unwrap();
    assert_eq!(observer.members().unwrap(), 1, "one process, one member");
    until("both pools engage", || {
        state(&pool) == TokenState::Engaged && state(&fixed) == TokenState::Engaged
    });
    run_tasks(&fixed, 50);
    assert!(fixed.metrics().token_takes > 0, "{}", fixed.metrics());
    drop(fixed);
    until("the first pool is alone again", || state(&pool) == TokenState::Alone);
    drop(pool);
    assert_eq!(observer.members().unwrap(), 0, "no default pool left: the process left the set");

    // Opting out: in code, and for every default pool by the environment.
    let off = Pool::builder().host_tokens_off().build().unwrap();
    assert_eq!(state(&off), TokenState::Off);
    std::env::set_var(TOKENS_ENV, "off");
    let off_by_env = Pool::builder().build().unwrap();
    assert_eq!(state(&off_by_env), TokenState::Off);
    run_tasks(&off_by_env, 10);
    std::env::remove_var(TOKENS_ENV);
    drop((off, off_by_env));

    // A set another user made on the default key is refused; the pool runs without tokens.
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("skipped the foreign-set part: creating a set as another user needs root");
        std::env::remove_var(DEFAULT_SET_ENV);
        return;
    }
    let squatted = format!("cotenant-test-squatted-{}", std::process::id());
    let key = cotenant::tokens::key(&squatted, 0);
    let squatter = Child::run(move || unsafe {
        // SAFETY: system calls only.
        libc::setgid(65534) == 0
            && libc::setuid(65534) == 0
            && libc::semget(key, 8, libc::IPC_CREAT | libc::IPC_EXCL | 0o666) >= 0
    });
    until("the other user's set exists", || sysv_key_exists(key));
    drop(squatter);
    std::env::set_var(DEFAULT_SET_ENV, &squatted);
    let pool = Pool::builder().threads(2).build().unwrap();
    assert_eq!(state(&pool), TokenState::Unavailable);
    run_tasks(&pool, 20);
    let listed = cotenant::tokens::list::list().unwrap();
    let shown = listed.iter().find(|s| s.key == key).expect("the squatting set is listed");
    assert!(shown.refused.as_deref().is_some_and(|why| why.contains("65534")), "{shown:?}");
    drop(pool);
    std::env::remove_var(DEFAULT_SET_ENV);
    // SAFETY: plain system calls on integers (root removes the other user's set).
    unsafe { libc::semctl(libc::semget(key, 0, 0), 0, libc::IPC_RMID) };
}

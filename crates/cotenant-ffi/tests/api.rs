//! The C ABI called as C would call it: results, error codes and messages, ownership.

use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use cotenant_ffi::*;

fn last_error() -> String {
    // SAFETY: cotenant_last_error never returns NULL, and the string is valid until the next
    // failed call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(cotenant_last_error()) }.to_string_lossy().into_owned()
}

#[test]
fn the_cpu_count_matches_the_library() {
    let mut n = 0u32;
    // SAFETY: `n` is a valid out-pointer.
    assert_eq!(unsafe { cotenant_cpu_count(&mut n) }, COTENANT_OK);
    let budget = cotenant::cpus::detect().unwrap();
    assert_eq!(n, budget.threads(cotenant::Rounding::Floor));
    let mut limit = 0.0f64;
    // SAFETY: `limit` is a valid out-pointer.
    assert_eq!(unsafe { cotenant_cpu_limit(&mut limit) }, COTENANT_OK);
    assert_eq!(limit, budget.limit());
}

#[test]
fn the_json_has_the_fields_of_cotenant_cpus_json() {
    let text = cotenant_cpus_json();
    assert!(!text.is_null(), "{}", last_error());
    // SAFETY: not NULL, NUL-terminated, owned by us until freed below.
    let json: serde_json::Value =
        serde_json::from_str(unsafe { CStr::from_ptr(text) }.to_str().unwrap()).unwrap();
    // SAFETY: returned by cotenant_cpus_json, freed once.
    unsafe { cotenant_string_free(text) };
    // SAFETY: NULL is ignored.
    unsafe { cotenant_string_free(ptr::null_mut()) };
    // The field list of cotenant_ops::output::CpusJson (what `cotenant cpus --json` prints).
    let mut keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "allowed_cpus",
            "binding",
            "binding_cgroup",
            "binding_path",
            "cgroup_version",
            "limit",
            "pid",
            "sources",
            "threads",
            "threads_ceil",
            "threads_nearest"
        ]
    );
    let mut n = 0u32;
    // SAFETY: `n` is a valid out-pointer.
    unsafe { cotenant_cpu_count(&mut n) };
    assert_eq!(json["threads"], n);
    let source = &json["sources"][0];
    for key in ["kind", "path", "cgroup", "value", "binds"] {
        assert!(source.get(key).is_some(), "{key} missing from {source}");
    }
}

#[test]
fn null_pointers_are_errors_naming_the_argument() {
    // SAFETY: NULL is the error case under test; nothing is dereferenced.
    unsafe {
        assert_eq!(cotenant_cpu_count(ptr::null_mut()), COTENANT_ERR_NULL);
        assert_eq!(last_error(), "cotenant_cpu_count: out is NULL");
        assert_eq!(cotenant_cpu_limit(ptr::null_mut()), COTENANT_ERR_NULL);
        assert!(last_error().contains("out is NULL"));
        let mut n = 0;
        assert_eq!(cotenant_advisor_poll(ptr::null_mut(), -1, &mut n), COTENANT_ERR_NULL);
        assert_eq!(last_error(), "cotenant_advisor_poll: advisor is NULL");
        assert_eq!(cotenant_pool_submit(ptr::null_mut(), Some(count), ptr::null_mut()), COTENANT_ERR_NULL);
        assert_eq!(last_error(), "cotenant_pool_submit: pool is NULL");
        assert_eq!(cotenant_pool_shutdown(ptr::null_mut()), COTENANT_ERR_NULL);
        assert_eq!(last_error(), "cotenant_pool_shutdown: pool is NULL");
        cotenant_advisor_free(ptr::null_mut());
    }
    // A success leaves the message alone.
    let mut n = 0;
    // SAFETY: `n` is a valid out-pointer.
    assert_eq!(unsafe { cotenant_cpu_count(&mut n) }, COTENANT_OK);
    assert_eq!(last_error(), "cotenant_pool_shutdown: pool is NULL");
}

#[test]
fn the_advisor_recommends_within_its_threads() {
    let advisor = cotenant_advisor_new(3, 1000);
    assert!(!advisor.is_null(), "{}", last_error());
    for queued in [-1, 0, 5, i64::MAX] {
        std::thread::sleep(std::time::Duration::from_millis(2));
        let mut n = 0u32;
        // SAFETY: a live advisor and a valid out-pointer.
        assert_eq!(
            unsafe { cotenant_advisor_poll(advisor, queued, &mut n) },
            COTENANT_OK,
            "{}",
            last_error()
        );
        assert!((1..=3).contains(&n), "{n}");
    }
    let mut n = 0u32;
    // SAFETY: a live advisor; NULL out and a bad queued are the errors under test.
    unsafe {
        assert_eq!(cotenant_advisor_poll(advisor, -2, &mut n), COTENANT_ERR_INVALID);
        assert!(last_error().contains("queued must be -1 (unknown) or >= 0, got -2"), "{}", last_error());
        assert_eq!(cotenant_advisor_poll(advisor, 0, ptr::null_mut()), COTENANT_ERR_NULL);
        assert_eq!(last_error(), "cotenant_advisor_poll: out is NULL");
        cotenant_advisor_free(advisor);
    }
    // Defaults: threads 0 and period 0.
    let advisor = cotenant_advisor_new(0, 0);
    assert!(!advisor.is_null(), "{}", last_error());
    // SAFETY: from cotenant_advisor_new, freed once.
    unsafe { cotenant_advisor_free(advisor) };
}

#[test]
fn an_out_of_range_period_is_refused_naming_it() {
    for period_us in [1, 999, 10_000_001] {
        assert!(cotenant_advisor_new(2, period_us).is_null());
        let message = last_error();
        assert!(message.starts_with("cotenant_advisor_new: period_us must be 0"), "{message}");
        assert!(message.ends_with(&format!("got {period_us}")), "{message}");
    }
}

extern "C" fn count(arg: *mut c_void) {
    // SAFETY: every caller passes a pointer to a live AtomicU32.
    unsafe { &*(arg as *const AtomicU32) }.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn the_pool_runs_every_task_before_shutdown_returns() {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let arg = &COUNTER as *const AtomicU32 as *mut c_void;
    let pool = cotenant_pool_new(2);
    assert!(!pool.is_null(), "{}", last_error());
    // SAFETY: a live pool, a callback that does not unwind, an argument usable from any thread.
    unsafe {
        for _ in 0..1000 {
            assert_eq!(cotenant_pool_submit(pool, Some(count), arg), COTENANT_OK, "{}", last_error());
        }
        assert_eq!(cotenant_pool_submit(pool, None, arg), COTENANT_ERR_NULL);
        assert_eq!(last_error(), "cotenant_pool_submit: task is NULL");
        assert_eq!(cotenant_pool_shutdown(pool), COTENANT_OK);
    }
    assert_eq!(COUNTER.load(Ordering::Relaxed), 1000);
}

/// A task that submits to its own pool while the pool shuts down: refused, and said so.
#[test]
fn a_submit_during_shutdown_is_refused() {
    struct Resubmit {
        pool: *mut CotenantPool,
        result: AtomicU32,
    }
    extern "C" fn nothing(_: *mut c_void) {}
    extern "C" fn resubmit(arg: *mut c_void) {
        // SAFETY: `arg` points to the Resubmit below, alive until shutdown returns.
        let state = unsafe { &*(arg as *const Resubmit) };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // Accepted until the pool closes; graceful shutdown runs what was accepted.
        let rc = loop {
            // SAFETY: the pool is alive until shutdown returns, which waits for this task.
            let rc = unsafe { cotenant_pool_submit(state.pool, Some(nothing), ptr::null_mut()) };
            if rc != COTENANT_OK || std::time::Instant::now() > deadline {
                break rc;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        state.result.store(rc as u32, Ordering::SeqCst);
    }
    let pool = cotenant_pool_new(1);
    assert!(!pool.is_null(), "{}", last_error());
    let state = Resubmit { pool, result: AtomicU32::new(0) };
    // SAFETY: a live pool; `state` outlives the pool (shut down below).
    unsafe {
        let arg = &state as *const Resubmit as *mut c_void;
        assert_eq!(cotenant_pool_submit(pool, Some(resubmit), arg), COTENANT_OK);
        assert_eq!(cotenant_pool_shutdown(pool), COTENANT_OK);
    }
    assert_eq!(state.result.load(Ordering::SeqCst) as i32, COTENANT_ERR_SHUT_DOWN);
}

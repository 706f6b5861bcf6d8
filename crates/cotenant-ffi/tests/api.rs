//! The C ABI called as C would call it: results, error codes and messages, ownership.

use std::ffi::{c_char, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

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

#[test]
fn the_version_is_the_crates_and_the_headers() {
    // SAFETY: never NULL, static, NUL-terminated.
    let version = unsafe { CStr::from_ptr(cotenant_version()) }.to_str().unwrap();
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    // The header's macros are constants in src/lib.rs (cbindgen copies literals only): a
    // version bump in Cargo.toml must update them, and then the header.
    let macros = format!("{COTENANT_VERSION_MAJOR}.{COTENANT_VERSION_MINOR}.{COTENANT_VERSION_PATCH}");
    let crate_version =
        [env!("CARGO_PKG_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MINOR"), env!("CARGO_PKG_VERSION_PATCH")]
            .join(".");
    assert_eq!(macros, crate_version, "update COTENANT_VERSION_* in src/lib.rs, then regenerate the header");
}

/// A task that holds its worker until released, so that what the queue holds behind it does
/// not depend on timing.
struct Gate {
    /// (started, released)
    state: Mutex<(bool, bool)>,
    changed: Condvar,
}

impl Gate {
    fn new() -> Gate {
        Gate { state: Mutex::new((false, false)), changed: Condvar::new() }
    }

    fn arg(&self) -> *mut c_void {
        self as *const Gate as *mut c_void
    }

    /// Until `hold` runs on a worker (it has left the queue).
    fn wait_started(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while !state.0 {
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn release(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.changed.notify_all();
    }
}

extern "C" fn hold(arg: *mut c_void) {
    // SAFETY: every caller passes a Gate that outlives the pool.
    let gate = unsafe { &*(arg as *const Gate) };
    let mut state = gate.state.lock().unwrap_or_else(PoisonError::into_inner);
    state.0 = true;
    gate.changed.notify_all();
    while !state.1 {
        state = gate.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
    }
}

/// The pool's metrics through the ABI, parsed; also checks the size query and a short buffer.
fn metrics(pool: *const CotenantPool) -> serde_json::Value {
    // SAFETY: a live pool; NULL with 0 is the size query.
    let needed = unsafe { cotenant_pool_metrics_json(pool, ptr::null_mut(), 0) };
    assert!(needed > 0, "{needed}: {}", last_error());
    let mut short: [c_char; 8] = [1; 8];
    // SAFETY: a live pool and an 8-byte buffer.
    let length = unsafe { cotenant_pool_metrics_json(pool, short.as_mut_ptr(), short.len()) };
    assert!(length >= 8, "{length}");
    assert_eq!(short[0], 0, "a short buffer gets an empty string, not a cut JSON");
    let mut buf: Vec<c_char> = vec![1; 4096];
    // SAFETY: a live pool and a buffer of buf.len() bytes.
    let length = unsafe { cotenant_pool_metrics_json(pool, buf.as_mut_ptr(), buf.len()) };
    assert!(length > 0 && (length as usize) < buf.len(), "{length}");
    // SAFETY: the call wrote a NUL-terminated string into `buf`.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap().to_owned();
    assert_eq!(text.len(), length as usize, "the result is the length without the NUL");
    serde_json::from_str(&text).unwrap()
}

/// Checks the form of a histogram in the metrics JSON (documented at
/// `cotenant_pool_metrics_json`) and returns its count: 25 pairs of a bound in nanoseconds
/// (1 µs doubling, then null) and a cumulative count that never falls and ends at `count`.
fn histogram_count(histogram: &serde_json::Value) -> u64 {
    let count = histogram["count"].as_u64().unwrap_or_else(|| panic!("no count in {histogram}"));
    assert!(histogram["sum_ns"].is_u64(), "{histogram}");
    let buckets = histogram["buckets"].as_array().unwrap_or_else(|| panic!("no buckets in {histogram}"));
    assert_eq!(buckets.len(), cotenant::metrics::histogram::BOUNDS + 1, "{histogram}");
    let mut previous = 0;
    for (i, pair) in buckets.iter().enumerate() {
        let pair = pair.as_array().unwrap_or_else(|| panic!("bucket {i} is not a pair: {histogram}"));
        assert_eq!(pair.len(), 2, "{histogram}");
        if i < cotenant::metrics::histogram::BOUNDS {
            assert_eq!(pair[0].as_u64(), Some(1_000u64 << i), "bucket {i}'s bound: {histogram}");
        } else {
            assert!(pair[0].is_null(), "the last bucket has no bound: {histogram}");
        }
        let cumulative = pair[1].as_u64().unwrap_or_else(|| panic!("bucket {i}'s count: {histogram}"));
        assert!(cumulative >= previous, "cumulative counts never fall: {histogram}");
        previous = cumulative;
    }
    assert_eq!(previous, count, "the last bucket counts every task: {histogram}");
    count
}

#[test]
fn try_submit_to_a_full_queue_is_refused_and_loses_no_task() {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let counter = &COUNTER as *const AtomicU32 as *mut c_void;
    let gate = Gate::new();
    // Blocking on a full queue (the default), so that only try_submit refuses.
    let options = CotenantPoolOptions {
        threads: 1,
        queue_capacity: 2,
        task_histograms: COTENANT_HISTOGRAMS_ON,
        ..CotenantPoolOptions::default()
    };
    // SAFETY: a valid options struct.
    let pool = unsafe { cotenant_pool_new_with(&options) };
    assert!(!pool.is_null(), "{}", last_error());
    // SAFETY: a live pool, callbacks that do not unwind, arguments that outlive the pool.
    let (held, first, second, third, message) = unsafe {
        let held = cotenant_pool_try_submit(pool, Some(hold), gate.arg());
        gate.wait_started();
        let first = cotenant_pool_try_submit(pool, Some(count), counter);
        let second = cotenant_pool_try_submit(pool, Some(count), counter);
        let third = cotenant_pool_try_submit(pool, Some(count), counter);
        (held, first, second, third, last_error())
    };
    let snapshot = metrics(pool);
    // Released before any assertion, so that a failing one does not leave the worker waiting.
    gate.release();
    // SAFETY: from cotenant_pool_new_with, shut down once.
    assert_eq!(unsafe { cotenant_pool_shutdown(pool) }, COTENANT_OK);
    assert_eq!((held, first, second), (COTENANT_OK, COTENANT_OK, COTENANT_OK));
    assert_eq!(third, COTENANT_ERR_FULL);
    assert_eq!(
        message,
        "cotenant_pool_try_submit: the pool's queue is full (its capacity is 2); the task was not queued"
    );
    assert_eq!(COUNTER.load(Ordering::Relaxed), 2, "both accepted tasks ran, the refused one did not");
    assert_eq!(snapshot["threads"], 1);
    assert_eq!(snapshot["queue_capacity"], 2);
    assert_eq!(snapshot["queued"], 2);
    assert_eq!(snapshot["running"], 1);
    assert_eq!(snapshot["rejected"], 1);
    assert_eq!(snapshot["completed"], 0);
    // The held task is running: its queue wait was recorded when the worker started it, its
    // run time will be when it ends; the two queued tasks are in neither yet.
    assert_eq!(histogram_count(&snapshot["queue_wait"]), 1, "{snapshot}");
    assert_eq!(histogram_count(&snapshot["run_time"]), 0, "{snapshot}");
}

#[test]
fn on_full_reject_and_caller_runs_do_what_the_option_says() {
    static REJECTED: AtomicU32 = AtomicU32::new(0);
    static CALLER_RAN: AtomicU32 = AtomicU32::new(0);
    for (on_full, counter) in
        [(COTENANT_ON_FULL_REJECT, &REJECTED), (COTENANT_ON_FULL_CALLER_RUNS, &CALLER_RAN)]
    {
        let arg = counter as *const AtomicU32 as *mut c_void;
        let gate = Gate::new();
        let options = CotenantPoolOptions {
            threads: 1,
            queue_capacity: 1,
            on_full,
            period_us: 5000,
            ..Default::default()
        };
        // SAFETY: a valid options struct.
        let pool = unsafe { cotenant_pool_new_with(&options) };
        assert!(!pool.is_null(), "{}", last_error());
        // SAFETY: a live pool, callbacks that do not unwind, arguments that outlive the pool.
        let (queued, overflow, message) = unsafe {
            assert_eq!(cotenant_pool_submit(pool, Some(hold), gate.arg()), COTENANT_OK);
            gate.wait_started();
            let queued = cotenant_pool_submit(pool, Some(count), arg);
            let overflow = cotenant_pool_submit(pool, Some(count), arg);
            (queued, overflow, last_error())
        };
        // Under CallerRuns the overflowing task ran on this thread, before the queued one.
        let before_release = counter.load(Ordering::Relaxed);
        let snapshot = metrics(pool);
        gate.release();
        // SAFETY: from cotenant_pool_new_with, shut down once.
        assert_eq!(unsafe { cotenant_pool_shutdown(pool) }, COTENANT_OK);
        assert_eq!(queued, COTENANT_OK);
        if on_full == COTENANT_ON_FULL_REJECT {
            assert_eq!(overflow, COTENANT_ERR_FULL);
            assert!(message.starts_with("cotenant_pool_submit: the pool's queue is full"), "{message}");
            assert_eq!((before_release, counter.load(Ordering::Relaxed)), (0, 1));
            assert_eq!(snapshot["rejected"], 1);
            assert_eq!(snapshot["caller_ran"], 0);
        } else {
            assert_eq!(overflow, COTENANT_OK);
            assert_eq!((before_release, counter.load(Ordering::Relaxed)), (1, 2));
            assert_eq!(snapshot["rejected"], 0);
            assert_eq!(snapshot["caller_ran"], 1);
        }
    }
}

#[test]
fn the_metrics_json_has_every_field_of_metrics() {
    // The defaults but the histograms, which are off by default (unless the environment says).
    let options = CotenantPoolOptions { task_histograms: COTENANT_HISTOGRAMS_ON, ..Default::default() };
    // SAFETY: a valid options struct.
    let pool = unsafe { cotenant_pool_new_with(&options) };
    assert!(!pool.is_null(), "{}", last_error());
    let snapshot = metrics(pool);
    // SAFETY: the error cases under test, then a live pool shut down once.
    unsafe {
        let mut buf: [c_char; 4] = [0; 4];
        assert_eq!(cotenant_pool_metrics_json(ptr::null(), buf.as_mut_ptr(), buf.len()), COTENANT_ERR_NULL);
        assert_eq!(last_error(), "cotenant_pool_metrics_json: pool is NULL");
        assert_eq!(cotenant_pool_metrics_json(pool, ptr::null_mut(), 5), COTENANT_ERR_NULL);
        assert!(
            last_error().starts_with("cotenant_pool_metrics_json: buf is NULL but len is 5"),
            "{}",
            last_error()
        );
        assert_eq!(cotenant_pool_shutdown(pool), COTENANT_OK);
    }
    let mut keys: Vec<&str> = snapshot.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "alerts",
            "borrows",
            "budget",
            "caller_ran",
            "completed",
            "decisions",
            "degradations",
            "elastic",
            "future_polls",
            "future_wakeups",
            "host_tokens",
            "panicked",
            "queue_capacity",
            "queue_wait",
            "queued",
            "rejected",
            "run_time",
            "running",
            "sample_errors",
            "target",
            "threads",
            "token_errors",
            "token_fallback_periods",
            "token_takebacks",
            "token_takes",
            "token_timeouts"
        ]
    );
    assert_eq!(snapshot["queue_capacity"], cotenant::pool::DEFAULT_QUEUE_CAPACITY);
    let threads = snapshot["threads"].as_u64().unwrap();
    let target = snapshot["target"].as_u64().unwrap();
    assert!(threads >= 1 && (1..=threads).contains(&target), "{snapshot}");
    assert!(["off", "unavailable", "alone", "engaged"].contains(&snapshot["host_tokens"].as_str().unwrap()));
    assert!(snapshot["alerts"].is_array() && snapshot["budget"].is_null() && snapshot["elastic"].is_null());
    // A pool asked to time its tasks has both histograms, empty while no task has run.
    assert_eq!(histogram_count(&snapshot["queue_wait"]), 0, "{snapshot}");
    assert_eq!(histogram_count(&snapshot["run_time"]), 0, "{snapshot}");

    // One told not to has neither, whatever the environment says.
    let options = CotenantPoolOptions { task_histograms: COTENANT_HISTOGRAMS_OFF, ..Default::default() };
    // SAFETY: a valid options struct.
    let pool = unsafe { cotenant_pool_new_with(&options) };
    assert!(!pool.is_null(), "{}", last_error());
    let snapshot = metrics(pool);
    // SAFETY: a live pool, shut down once.
    assert_eq!(unsafe { cotenant_pool_shutdown(pool) }, COTENANT_OK);
    assert!(snapshot["queue_wait"].is_null() && snapshot["run_time"].is_null(), "{snapshot}");
}

#[test]
fn bad_options_are_refused_naming_the_field() {
    let cases = [
        (CotenantPoolOptions { threads: 65_537, ..Default::default() }, "options.threads must be 0"),
        (
            CotenantPoolOptions { queue_capacity: (1 << 20) + 1, ..Default::default() },
            "options.queue_capacity must be 0",
        ),
        (
            CotenantPoolOptions { on_full: 3, ..Default::default() },
            "options.on_full must be COTENANT_ON_FULL_BLOCK (0)",
        ),
        (CotenantPoolOptions { on_full: -1, ..Default::default() }, "options.on_full must be"),
        (
            CotenantPoolOptions { period_us: 999, ..Default::default() },
            "options.period_us must be 0 (one clock tick)",
        ),
        (
            CotenantPoolOptions { task_histograms: 3, ..Default::default() },
            "options.task_histograms must be COTENANT_HISTOGRAMS_DEFAULT (0)",
        ),
    ];
    for (options, expected) in cases {
        // SAFETY: a valid options struct.
        assert!(unsafe { cotenant_pool_new_with(&options) }.is_null(), "{options:?} was accepted");
        let message = last_error();
        assert!(message.starts_with(&format!("cotenant_pool_new_with: {expected}")), "{message}");
    }
    // SAFETY: NULL is the error under test.
    assert!(unsafe { cotenant_pool_new_with(ptr::null()) }.is_null());
    assert_eq!(last_error(), "cotenant_pool_new_with: options is NULL");
    // The plain constructor has the same bound on threads, named without the prefix.
    assert!(cotenant_pool_new(u32::MAX).is_null());
    assert!(last_error().starts_with("cotenant_pool_new: threads must be 0"), "{}", last_error());
}

#[test]
fn try_submit_needs_a_pool_and_a_task() {
    let pool = cotenant_pool_new(1);
    assert!(!pool.is_null(), "{}", last_error());
    // SAFETY: NULL pool and NULL task are the errors under test; the pool is shut down once.
    unsafe {
        assert_eq!(
            cotenant_pool_try_submit(ptr::null_mut(), Some(count), ptr::null_mut()),
            COTENANT_ERR_NULL
        );
        assert_eq!(last_error(), "cotenant_pool_try_submit: pool is NULL");
        assert_eq!(cotenant_pool_try_submit(pool, None, ptr::null_mut()), COTENANT_ERR_NULL);
        assert_eq!(last_error(), "cotenant_pool_try_submit: task is NULL");
        assert_eq!(cotenant_pool_shutdown(pool), COTENANT_OK);
    }
}

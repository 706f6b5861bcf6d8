//! cotenant's C ABI (`include/cotenant.h`, generated from this file by cbindgen): the CPU
//! count and its explanation, an advisor that a foreign runtime polls for how many threads
//! should run, and a minimal pool. This file owns every exported item; `error.rs` the error
//! codes' messages and the panic guard, `json.rs` the JSON explanation.
//!
//! Conventions, for every function:
//! - Functions that can fail return `int`: `COTENANT_OK` (0) or a negative `COTENANT_ERR_*`;
//!   results go through out-pointers. Functions that return a pointer return NULL on failure.
//! - After a failure, `cotenant_last_error()` gives the message (naming the argument at fault).
//! - No Rust panic crosses the boundary: one would be caught and reported as
//!   `COTENANT_ERR_INTERNAL` (or NULL).
//! - Handles (`cotenant_advisor`, `cotenant_pool`) are opaque; each has one function that
//!   frees it, after which it must not be used.

mod error;

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Mutex;
use std::time::Duration;

use cotenant::advisor::Advisor;
use cotenant::{Policy, Pool, Rounding};
use error::{guard, guard_code, guard_ptr, Error};

/// Success.
pub const COTENANT_OK: c_int = 0;
/// A pointer argument was NULL; the message names it.
pub const COTENANT_ERR_NULL: c_int = -1;
/// An argument was out of range; the message names it and the range.
pub const COTENANT_ERR_INVALID: c_int = -2;
/// The CPU count could not be determined; the message names the file or call that failed.
pub const COTENANT_ERR_DETECT: c_int = -3;
/// The pool refused a task because it is shutting down (a task submitted from a task that
/// runs during `cotenant_pool_shutdown`).
pub const COTENANT_ERR_SHUT_DOWN: c_int = -4;
/// The operating system refused a resource (e.g. a thread).
pub const COTENANT_ERR_SYSTEM: c_int = -5;
/// A bug in cotenant: a Rust panic was caught at the boundary. The message says where.
pub const COTENANT_ERR_INTERNAL: c_int = -6;

/// An advisor: recommends how many of a runtime's threads should be active, re-deciding once
/// per period from the host's counters with cotenant's adaptive policy (the pool's
/// controller). Polls are serialised, so one advisor may be polled from any thread.
pub struct CotenantAdvisor {
    advisor: Mutex<Advisor>,
}

/// A thread pool whose active workers follow the host (cotenant's adaptive pool).
pub struct CotenantPool {
    pool: Pool,
}

/// A task: a C function and its argument, moved to a worker thread.
struct CTask {
    function: unsafe extern "C" fn(*mut c_void),
    arg: *mut c_void,
}

// SAFETY: `cotenant_pool_submit`'s contract makes the caller responsible for `arg` being usable
// from another thread (as with pthread_create); the function pointer itself is plain code.
unsafe impl Send for CTask {}

impl CTask {
    fn run(self) {
        // SAFETY: `cotenant_pool_submit`'s contract: `function` may be called with `arg` once,
        // from any thread, and does not unwind.
        unsafe { (self.function)(self.arg) }
    }
}

/// The message of the last failed cotenant call on the calling thread ("" if none failed).
/// Successful calls leave it unchanged. The string belongs to cotenant and stays valid until
/// the next failed call on the same thread; copy it to keep it. Never NULL.
#[no_mangle]
pub extern "C" fn cotenant_last_error() -> *const c_char {
    guard("cotenant_last_error", c"internal error".as_ptr(), error::last_error)
}

/// Writes to `*out` the number of threads this process should use: its CPU limit (online
/// CPUs, cgroup cpuset, affinity, and the quota of its cgroup and every ancestor) rounded
/// down, at least 1. Reads the system on each call.
///
/// Returns `COTENANT_OK`, `COTENANT_ERR_NULL` (out is NULL) or `COTENANT_ERR_DETECT`.
///
/// # Safety
/// `out` is NULL or points to writable memory for one `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn cotenant_cpu_count(out: *mut u32) -> c_int {
    guard_code("cotenant_cpu_count", || {
        if out.is_null() {
            return Err(Error::null("cotenant_cpu_count", "out"));
        }
        let budget = detect("cotenant_cpu_count")?;
        // SAFETY: `out` is not NULL and, by the contract, writable.
        unsafe { out.write(budget.threads(Rounding::Floor)) };
        Ok(())
    })
}

/// Writes to `*out` the CPU limit itself, as a fraction (1.5 for a quota of 150 ms per
/// 100 ms period on a host with more CPUs).
///
/// Returns `COTENANT_OK`, `COTENANT_ERR_NULL` (out is NULL) or `COTENANT_ERR_DETECT`.
///
/// # Safety
/// `out` is NULL or points to writable memory for one `double`.
#[no_mangle]
pub unsafe extern "C" fn cotenant_cpu_limit(out: *mut f64) -> c_int {
    guard_code("cotenant_cpu_limit", || {
        if out.is_null() {
            return Err(Error::null("cotenant_cpu_limit", "out"));
        }
        let budget = detect("cotenant_cpu_limit")?;
        // SAFETY: `out` is not NULL and, by the contract, writable.
        unsafe { out.write(budget.limit()) };
        Ok(())
    })
}

/// The explanation of the CPU count as JSON, the fields of `cotenant cpus --json`: `limit`,
/// `threads`, `threads_ceil`, `threads_nearest`, `allowed_cpus`, `binding`, `binding_path`,
/// `binding_cgroup`, `cgroup_version`, `pid` (null) and `sources` (each with `kind`, `path`,
/// `cgroup`, `value`, `binds`). Free it with `cotenant_string_free`. NULL on failure.
#[no_mangle]
pub extern "C" fn cotenant_cpus_json() -> *mut c_char {
    guard_ptr("cotenant_cpus_json", || {
        let budget = detect("cotenant_cpus_json")?;
        // The same writer as `cotenant cpus --json` (for the calling process: `pid` is null).
        let text = serde_json::to_string(&cotenant_ops::output::CpusJson::new(&budget, None))
            .map_err(|e| Error::new(COTENANT_ERR_INTERNAL, format!("cotenant_cpus_json: {e}")))?;
        let text = CString::new(text).map_err(|e| {
            Error::new(COTENANT_ERR_INTERNAL, format!("cotenant_cpus_json: NUL byte in the JSON: {e}"))
        })?;
        Ok(text.into_raw())
    })
}

/// Frees a string returned by cotenant (`cotenant_cpus_json`). NULL is ignored.
///
/// # Safety
/// `s` is NULL or a string returned by cotenant and not freed yet.
#[no_mangle]
pub unsafe extern "C" fn cotenant_string_free(s: *mut c_char) {
    guard("cotenant_string_free", (), || {
        if !s.is_null() {
            // SAFETY: by the contract, `s` came from `CString::into_raw` and is freed once.
            drop(unsafe { CString::from_raw(s) });
        }
    })
}

/// A new advisor for a runtime with `threads` threads (0: the CPUs this process may run on),
/// re-deciding every `period_us` microseconds (0: one clock tick, 10 ms on most kernels;
/// otherwise 1000 to 10000000). Its first recommendation is every thread. NULL on failure
/// (the message says which argument). Free it with `cotenant_advisor_free`.
#[no_mangle]
pub extern "C" fn cotenant_advisor_new(threads: u32, period_us: u32) -> *mut CotenantAdvisor {
    guard_ptr("cotenant_advisor_new", || {
        let threads = if threads == 0 { default_threads() } else { threads };
        let period = match period_us {
            0 => cotenant::pool::default_period(),
            us => Duration::from_micros(u64::from(us)),
        };
        let (min, max) = (cotenant::pool::MIN_PERIOD, cotenant::pool::MAX_PERIOD);
        if !(min..=max).contains(&period) {
            return Err(Error::new(
                COTENANT_ERR_INVALID,
                format!(
                    "cotenant_advisor_new: period_us must be 0 (one clock tick) or {} to {}, got {period_us}",
                    min.as_micros(),
                    max.as_micros()
                ),
            ));
        }
        let advisor = Advisor::new(threads, Policy::adaptive(), period)
            .map_err(|e| Error::new(COTENANT_ERR_INTERNAL, format!("cotenant_advisor_new: {e}")))?;
        Ok(Box::into_raw(Box::new(CotenantAdvisor { advisor: Mutex::new(advisor) })))
    })
}

/// Writes to `*out` the recommended number of active threads (1 to the advisor's threads).
/// Re-decides when a period has passed since the last reading, otherwise repeats the last
/// recommendation; poll about once per period. `queued` is the runtime's runnable work waiting
/// now (e.g. the length of its run queues), or -1 when unknown. Never fails on a host-reading
/// error: the advisor then recommends every thread the quota pays for.
///
/// Returns `COTENANT_OK`, `COTENANT_ERR_NULL` (advisor or out is NULL) or
/// `COTENANT_ERR_INVALID` (queued < -1).
///
/// # Safety
/// `advisor` is NULL or a live advisor from `cotenant_advisor_new`; `out` is NULL or points to
/// writable memory for one `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn cotenant_advisor_poll(
    advisor: *mut CotenantAdvisor,
    queued: i64,
    out: *mut u32,
) -> c_int {
    const NAME: &str = "cotenant_advisor_poll";
    guard_code(NAME, || {
        if advisor.is_null() {
            return Err(Error::null(NAME, "advisor"));
        }
        if out.is_null() {
            return Err(Error::null(NAME, "out"));
        }
        let queued = match queued {
            -1 => None,
            q if q < -1 => {
                return Err(Error::new(
                    COTENANT_ERR_INVALID,
                    format!("{NAME}: queued must be -1 (unknown) or >= 0, got {q}"),
                ))
            }
            q => Some(u32::try_from(q).unwrap_or(u32::MAX)),
        };
        // SAFETY: `advisor` is not NULL and, by the contract, live; only shared access.
        let advisor = unsafe { &*advisor };
        let target = advisor.advisor.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).poll(queued);
        // SAFETY: `out` is not NULL and, by the contract, writable.
        unsafe { out.write(target) };
        Ok(())
    })
}

/// Frees an advisor. NULL is ignored.
///
/// # Safety
/// `advisor` is NULL or an advisor from `cotenant_advisor_new`, not freed yet and not in use by
/// another thread.
#[no_mangle]
pub unsafe extern "C" fn cotenant_advisor_free(advisor: *mut CotenantAdvisor) {
    guard("cotenant_advisor_free", (), || {
        if !advisor.is_null() {
            // SAFETY: by the contract, `advisor` came from `Box::into_raw` and is freed once.
            drop(unsafe { Box::from_raw(advisor) });
        }
    })
}

/// A new pool of `threads` worker threads (0: the CPUs this process may run on), of which
/// cotenant's adaptive controller lets as many run as the host leaves room for. Its queue holds
/// 4096 tasks; a submit to a full queue waits. NULL on failure. Stop and free it with
/// `cotenant_pool_shutdown`.
#[no_mangle]
pub extern "C" fn cotenant_pool_new(threads: u32) -> *mut CotenantPool {
    guard_ptr("cotenant_pool_new", || {
        let mut builder = Pool::builder().name("cotenant-c");
        if threads != 0 {
            builder = builder.threads(threads as usize);
        }
        let pool = builder.build().map_err(|e| match e {
            cotenant::BuildError::Spawn(_) => {
                Error::new(COTENANT_ERR_SYSTEM, format!("cotenant_pool_new: {e}"))
            }
            _ => Error::new(COTENANT_ERR_INVALID, format!("cotenant_pool_new: threads: {e}")),
        })?;
        Ok(Box::into_raw(Box::new(CotenantPool { pool })))
    })
}

/// Queues `task(arg)` to run once on one of the pool's threads; waits while the queue is full.
///
/// Returns `COTENANT_OK`, `COTENANT_ERR_NULL` (pool or task is NULL; arg may be NULL) or
/// `COTENANT_ERR_SHUT_DOWN` (submitted by a task while the pool shuts down; not run).
///
/// # Safety
/// `pool` is NULL or a live pool from `cotenant_pool_new` (submitting concurrently with
/// `cotenant_pool_shutdown` from another thread is a use after free). `task` must be safe to
/// call with `arg` from another thread, and must not unwind: a C++ exception or a `longjmp` out
/// of it is undefined behaviour (declare C++ callbacks `noexcept`).
#[no_mangle]
pub unsafe extern "C" fn cotenant_pool_submit(
    pool: *mut CotenantPool,
    task: Option<unsafe extern "C" fn(arg: *mut c_void)>,
    arg: *mut c_void,
) -> c_int {
    const NAME: &str = "cotenant_pool_submit";
    guard_code(NAME, || {
        if pool.is_null() {
            return Err(Error::null(NAME, "pool"));
        }
        let Some(function) = task else { return Err(Error::null(NAME, "task")) };
        // SAFETY: `pool` is not NULL and, by the contract, live; only shared access.
        let pool = unsafe { &*pool };
        let task = CTask { function, arg };
        let handle = pool.pool.spawn(move || task.run());
        // A refused task is resolved before `spawn` returns; an accepted one may have run
        // already (Ok) or not yet (pending, and dropping its handle leaves it queued).
        if handle.is_finished() {
            if let Err(error) = handle.join() {
                return Err(Error::new(COTENANT_ERR_SHUT_DOWN, format!("{NAME}: {error}")));
            }
        }
        Ok(())
    })
}

/// Stops accepting tasks, runs every task already queued, joins the threads and frees the
/// pool. Must not be called from one of the pool's own tasks.
///
/// Returns `COTENANT_OK` or `COTENANT_ERR_NULL`.
///
/// # Safety
/// `pool` is NULL or a pool from `cotenant_pool_new`, not shut down yet; no other thread uses
/// it during or after the call.
#[no_mangle]
pub unsafe extern "C" fn cotenant_pool_shutdown(pool: *mut CotenantPool) -> c_int {
    const NAME: &str = "cotenant_pool_shutdown";
    guard_code(NAME, || {
        if pool.is_null() {
            return Err(Error::null(NAME, "pool"));
        }
        // SAFETY: by the contract, `pool` came from `Box::into_raw` and is freed once.
        let pool = unsafe { Box::from_raw(pool) };
        pool.pool.shutdown();
        Ok(())
    })
}

/// The CPU budget of the calling process, or `COTENANT_ERR_DETECT` naming `function`.
fn detect(function: &str) -> Result<cotenant::cpus::Limit, Error> {
    cotenant::cpus::detect().map_err(|e| {
        Error::new(COTENANT_ERR_DETECT, format!("{function}: cannot determine the CPU count: {e}"))
    })
}

/// The CPUs this process may run on (what `cotenant::Pool` starts by default), or what the
/// standard library reports when detection fails.
fn default_threads() -> u32 {
    match cotenant::cpus::detect() {
        Ok(budget) => budget.allowed_cpus().max(1),
        Err(_) => {
            std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        }
    }
}

/// The handles cross threads in C; their contents must allow it.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CotenantAdvisor>();
    assert_send_sync::<CotenantPool>();
};

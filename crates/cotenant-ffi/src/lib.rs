//! cotenant's C ABI (`include/cotenant.h`, generated from this file by cbindgen): the library's
//! version, the CPU count and its explanation, an advisor that a foreign runtime polls for how
//! many threads should run, and a pool with options, a non-blocking submit and metrics. This
//! file owns every exported item; `error.rs` the error codes' messages and the panic guard,
//! `metrics_json.rs` the pool's metrics as JSON.
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
mod metrics_json;

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Mutex;
use std::time::Duration;

use cotenant::advisor::Advisor;
use cotenant::{Full, Policy, Pool, Rounding, TrySpawnError};
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
/// The pool's queue was full and the task was not queued (`cotenant_pool_try_submit`, or
/// `cotenant_pool_submit` on a pool whose `on_full` is `COTENANT_ON_FULL_REJECT`). The caller
/// still owns the task's argument.
pub const COTENANT_ERR_FULL: c_int = -7;

/// `cotenant_pool_options.on_full`: a submit to a full queue waits for room (the default:
/// back-pressure on the producer, nothing lost).
pub const COTENANT_ON_FULL_BLOCK: c_int = 0;
/// `cotenant_pool_options.on_full`: a submit to a full queue returns `COTENANT_ERR_FULL` at once
/// and the task does not run.
pub const COTENANT_ON_FULL_REJECT: c_int = 1;
/// `cotenant_pool_options.on_full`: a submit to a full queue runs the task on the submitting
/// thread before returning, which slows the producer down by exactly the work it tried to add.
pub const COTENANT_ON_FULL_CALLER_RUNS: c_int = 2;

/// `cotenant_pool_options.task_histograms`: the library's default, off unless the environment
/// variable `COTENANT_TASK_HISTOGRAMS` turns them on for the process.
pub const COTENANT_HISTOGRAMS_DEFAULT: c_int = 0;
/// `cotenant_pool_options.task_histograms`: time every task into the queue-wait and run-time
/// histograms of `cotenant_pool_metrics_json` (two clock readings per task).
pub const COTENANT_HISTOGRAMS_ON: c_int = 1;
/// `cotenant_pool_options.task_histograms`: no histograms, whatever the environment says.
pub const COTENANT_HISTOGRAMS_OFF: c_int = 2;

/// The major version of the library this header belongs to (compare with `cotenant_version()`
/// at run time). The shared library's SONAME is `libcotenant_ffi.so.<abi>` (the major version, or `0.<minor>` before 1.0).
pub const COTENANT_VERSION_MAJOR: c_int = 0;
/// The minor version of the library this header belongs to.
pub const COTENANT_VERSION_MINOR: c_int = 1;
/// The patch version of the library this header belongs to.
pub const COTENANT_VERSION_PATCH: c_int = 0;

/// The most worker threads a C pool may ask for: beyond this a typo would try to start
/// billions of threads and allocate their bookkeeping before failing (the same bound as the
/// library's elastic pools).
const MAX_THREADS: u32 = 65_536;
/// The largest queue a C pool may ask for: the queue is one ring allocated when the pool is
/// built, and an allocation the system refuses aborts the process instead of failing the call.
const MAX_QUEUE_CAPACITY: u32 = 1 << 20;

/// An advisor: recommends how many of a runtime's threads should be active, re-deciding once
/// per period from the host's counters with cotenant's adaptive policy (the pool's
/// controller). Polls are serialised, so one advisor may be polled from any thread.
pub struct CotenantAdvisor {
    advisor: Mutex<Advisor>,
}

/// A thread pool whose active workers follow the host (cotenant's adaptive pool).
pub struct CotenantPool {
    pool: Pool,
    /// What a submit does on a full queue; under `Reject`, `cotenant_pool_submit` uses the
    /// library's `try_spawn`, which tells a full queue from a pool shutting down.
    on_full: Full,
    /// The queue's capacity, for the message of a refused task.
    queue_capacity: usize,
}

/// A pool's settings, for `cotenant_pool_new_with`. Every field's 0 means its default, so
/// `cotenant_pool_options options = {0};` asks for what `cotenant_pool_new(0)` gives; set only
/// the fields you need.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CotenantPoolOptions {
    /// Worker threads (0: the CPUs this process may run on; at most 65536), of which the
    /// adaptive controller lets as many run as the host leaves room for.
    pub threads: u32,
    /// The most tasks that may wait in the queue (0: 4096; at most 1048576).
    pub queue_capacity: u32,
    /// What a submit does when the queue is full: `COTENANT_ON_FULL_BLOCK` (0, the default),
    /// `COTENANT_ON_FULL_REJECT` or `COTENANT_ON_FULL_CALLER_RUNS`.
    pub on_full: c_int,
    /// How often the controller re-decides how many workers run, in microseconds (0: one clock
    /// tick, 10 ms on most kernels; otherwise 1000 to 10000000).
    pub period_us: u32,
    /// Whether the pool times its tasks into the queue-wait and run-time histograms of
    /// `cotenant_pool_metrics_json`: `COTENANT_HISTOGRAMS_DEFAULT` (0: off, unless the
    /// environment variable `COTENANT_TASK_HISTOGRAMS` says on), `COTENANT_HISTOGRAMS_ON` or
    /// `COTENANT_HISTOGRAMS_OFF`.
    pub task_histograms: c_int,
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

/// The version of the library actually loaded, as "major.minor.patch" (the crate's version). It
/// can differ from the `COTENANT_VERSION_*` macros of the header a program was compiled with
/// when a newer library of the same major version is installed. The string is static: never
/// free it. Never NULL.
#[no_mangle]
pub extern "C" fn cotenant_version() -> *const c_char {
    guard("cotenant_version", c"".as_ptr(), || {
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast::<c_char>()
    })
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
        let period = checked_period("cotenant_advisor_new", "period_us", period_us)?;
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

/// A new pool of `threads` worker threads (0: the CPUs this process may run on; at most 65536),
/// of which cotenant's adaptive controller lets as many run as the host leaves room for. Its
/// queue holds 4096 tasks; a submit to a full queue waits. NULL on failure. Stop and free it
/// with `cotenant_pool_shutdown`. `cotenant_pool_new_with` takes the other settings.
#[no_mangle]
pub extern "C" fn cotenant_pool_new(threads: u32) -> *mut CotenantPool {
    const NAME: &str = "cotenant_pool_new";
    guard_ptr(NAME, || {
        let options = CotenantPoolOptions { threads, ..CotenantPoolOptions::default() };
        let pool = build_pool(NAME, "", &options)?;
        Ok(Box::into_raw(Box::new(pool)))
    })
}

/// A new pool with the settings of `*options` (see `cotenant_pool_options`; a field left 0
/// takes its default). NULL on failure, the message naming the field at fault (e.g.
/// `options.on_full`). `*options` is read during the call only. Stop and free the pool with
/// `cotenant_pool_shutdown`.
///
/// # Safety
/// `options` is NULL or points to a readable `cotenant_pool_options`.
#[no_mangle]
pub unsafe extern "C" fn cotenant_pool_new_with(options: *const CotenantPoolOptions) -> *mut CotenantPool {
    const NAME: &str = "cotenant_pool_new_with";
    guard_ptr(NAME, || {
        if options.is_null() {
            return Err(Error::null(NAME, "options"));
        }
        // SAFETY: not NULL and, by the contract, readable; copied at once.
        let options = unsafe { options.read() };
        let pool = build_pool(NAME, "options.", &options)?;
        Ok(Box::into_raw(Box::new(pool)))
    })
}

/// Queues `task(arg)` to run once on one of the pool's threads. When the queue is full, what
/// happens follows the pool's `on_full` setting: wait for room (`COTENANT_ON_FULL_BLOCK`, the
/// default), refuse with `COTENANT_ERR_FULL` (`COTENANT_ON_FULL_REJECT`), or run the task on
/// the calling thread before returning (`COTENANT_ON_FULL_CALLER_RUNS`).
///
/// Returns `COTENANT_OK`, `COTENANT_ERR_NULL` (pool or task is NULL; arg may be NULL),
/// `COTENANT_ERR_FULL` (queue full under `COTENANT_ON_FULL_REJECT`; not run) or
/// `COTENANT_ERR_SHUT_DOWN` (submitted by a task while the pool shuts down; not run).
///
/// # Safety
/// `pool` is NULL or a live pool from `cotenant_pool_new` or `cotenant_pool_new_with`
/// (submitting concurrently with `cotenant_pool_shutdown` from another thread is a use after
/// free). `task` must be safe to call with `arg` from another thread, and must not unwind: a
/// C++ exception or a `longjmp` out of it is undefined behaviour (declare C++ callbacks
/// `noexcept`).
#[no_mangle]
pub unsafe extern "C" fn cotenant_pool_submit(
    pool: *mut CotenantPool,
    task: Option<unsafe extern "C" fn(arg: *mut c_void)>,
    arg: *mut c_void,
) -> c_int {
    const NAME: &str = "cotenant_pool_submit";
    guard_code(NAME, || {
        // SAFETY: by this function's contract, `pool` is NULL or live.
        let (pool, task) = unsafe { pool_and_task(NAME, pool, task, arg) }?;
        if pool.on_full == Full::Reject {
            // `spawn` would say "rejected" for a full queue and a closing pool alike.
            return try_push(NAME, pool, task);
        }
        let handle = pool.pool.spawn(move || task.run());
        // A refused task is resolved before `spawn` returns; an accepted one may have run
        // already (Ok; on the calling thread under CallerRuns) or not yet (pending, and
        // dropping its handle leaves it queued).
        if handle.is_finished() {
            if let Err(error) = handle.join() {
                return Err(Error::new(COTENANT_ERR_SHUT_DOWN, format!("{NAME}: {error}")));
            }
        }
        Ok(())
    })
}

/// The submit functions' arguments checked: the pool (shared access only) and the task, or
/// `COTENANT_ERR_NULL` naming the NULL argument.
///
/// # Safety
/// `pool` is NULL or a live pool that outlives `'a`.
unsafe fn pool_and_task<'a>(
    name: &'static str,
    pool: *mut CotenantPool,
    task: Option<unsafe extern "C" fn(arg: *mut c_void)>,
    arg: *mut c_void,
) -> Result<(&'a CotenantPool, CTask), Error> {
    if pool.is_null() {
        return Err(Error::null(name, "pool"));
    }
    let Some(function) = task else { return Err(Error::null(name, "task")) };
    // SAFETY: `pool` is not NULL and, by the contract, live for `'a`; only shared access.
    Ok((unsafe { &*pool }, CTask { function, arg }))
}

/// Queues `task(arg)` only if the queue has room now, whatever the pool's `on_full` setting:
/// never waits and never runs the task on the calling thread. A refused task does not run, and
/// the caller still owns `arg`.
///
/// Returns `COTENANT_OK`, `COTENANT_ERR_NULL` (pool or task is NULL; arg may be NULL),
/// `COTENANT_ERR_FULL` (the queue is full) or `COTENANT_ERR_SHUT_DOWN` (submitted by a task
/// while the pool shuts down).
///
/// # Safety
/// As for `cotenant_pool_submit`.
#[no_mangle]
pub unsafe extern "C" fn cotenant_pool_try_submit(
    pool: *mut CotenantPool,
    task: Option<unsafe extern "C" fn(arg: *mut c_void)>,
    arg: *mut c_void,
) -> c_int {
    const NAME: &str = "cotenant_pool_try_submit";
    guard_code(NAME, || {
        // SAFETY: by this function's contract, `pool` is NULL or live.
        let (pool, task) = unsafe { pool_and_task(NAME, pool, task, arg) }?;
        try_push(NAME, pool, task)
    })
}

/// Writes the pool's metrics as one line of JSON to `buf`, as `snprintf` does: returns the
/// JSON's length in bytes (without the terminating NUL), and has written the JSON and a NUL
/// if and only if that length is less than `len`. With a smaller `len` it writes only an empty
/// string (when `len` > 0), never a cut JSON. Ask for the size with `buf` NULL and `len` 0, then
/// call again with a larger buffer: the counters and the histograms' counts may have grown
/// meanwhile, so allow some room (256 bytes) or repeat while the result is not less than `len`.
/// The JSON of a pool made here is under 4096 bytes, whatever its counts.
///
/// The fields are those of the library's `Metrics`: `threads`, `target`, `running`, `queued`,
/// `queue_capacity` (gauges), `completed`, `caller_ran`, `rejected`, `panicked`,
/// `future_polls`, `future_wakeups` (the library's async tasks; always 0 for pools made
/// here, which run C functions only), `decisions`, `sample_errors`, `borrows`,
/// `token_timeouts`, `token_takes`, `token_errors`, `token_fallback_periods`,
/// `token_takebacks`, `degradations` (counters), `host_tokens`
/// ("off", "unavailable", "alone" or "engaged"), `alerts` (the health alerts raised, by name),
/// `budget` and `elastic` (null for pools made here), and the histograms `queue_wait` (for
/// each task run, from its submission to a worker taking it) and `run_time` (the time a worker
/// spent running it). Each histogram is `{"count": N, "sum_ns": S, "buckets": [[1000, c],
/// [2000, c], ..., [null, N]]}`: the tasks counted, the sum of their times in nanoseconds, and
/// 25 pairs of a bucket's upper bound in nanoseconds (1000, 2000, 4000, ... 8388608000, about
/// 8.4 s, then null: no bound) and the tasks at or below that bound, counted cumulatively, so
/// the last count is N. A quantile q lies in the first bucket whose count reaches q * N.
///
/// Returns the length, or `COTENANT_ERR_NULL` (pool is NULL, or buf is NULL with len > 0).
///
/// # Safety
/// `pool` is NULL or a live pool; `buf` is NULL or points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn cotenant_pool_metrics_json(
    pool: *const CotenantPool,
    buf: *mut c_char,
    len: usize,
) -> c_int {
    const NAME: &str = "cotenant_pool_metrics_json";
    let body = || -> Result<c_int, Error> {
        if pool.is_null() {
            return Err(Error::null(NAME, "pool"));
        }
        if buf.is_null() && len != 0 {
            return Err(Error::new(
                COTENANT_ERR_NULL,
                format!("{NAME}: buf is NULL but len is {len} (pass len 0 to ask for the size)"),
            ));
        }
        // SAFETY: `pool` is not NULL and, by the contract, live; only shared access.
        let pool = unsafe { &*pool };
        let json = metrics_json::to_json(&pool.pool.metrics());
        let length = c_int::try_from(json.len()).map_err(|_| {
            Error::new(COTENANT_ERR_INTERNAL, format!("{NAME}: the JSON is {} bytes long", json.len()))
        })?;
        if json.len() < len {
            // SAFETY: `buf` is not NULL (len > 0) and, by the contract, writable for `len` bytes,
            // more than the JSON and its NUL need; a Rust string never overlaps C's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(json.as_ptr().cast::<c_char>(), buf, json.len());
                buf.add(json.len()).write(0);
            }
        } else if len > 0 {
            // SAFETY: `buf` is not NULL and writable for at least one byte.
            unsafe { buf.write(0) };
        }
        Ok(length)
    };
    guard(NAME, COTENANT_ERR_INTERNAL, || body().unwrap_or_else(Error::report))
}

/// Stops accepting tasks, runs every task already queued, joins the threads and frees the
/// pool. Must not be called from one of the pool's own tasks.
///
/// Returns `COTENANT_OK` or `COTENANT_ERR_NULL`.
///
/// # Safety
/// `pool` is NULL or a pool from `cotenant_pool_new` or `cotenant_pool_new_with`, not shut down
/// yet; no other thread uses it during or after the call.
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

/// Checks `options` (`prefix` names them in messages: "options." or "" for the plain
/// constructor's `threads`) and builds the pool, each error naming the field at fault.
fn build_pool(function: &str, prefix: &str, options: &CotenantPoolOptions) -> Result<CotenantPool, Error> {
    let invalid =
        |message: String| Error::new(COTENANT_ERR_INVALID, format!("{function}: {prefix}{message}"));
    let mut builder = Pool::builder().name("cotenant-c");
    match options.threads {
        0 => {}
        n if n > MAX_THREADS => {
            return Err(invalid(format!(
                "threads must be 0 (the CPUs this process may run on) or 1 to {MAX_THREADS}, got {n}"
            )))
        }
        n => builder = builder.threads(n as usize),
    }
    let queue_capacity = match options.queue_capacity {
        0 => cotenant::pool::DEFAULT_QUEUE_CAPACITY,
        n if n > MAX_QUEUE_CAPACITY => {
            return Err(invalid(format!(
                "queue_capacity must be 0 (the default, {}) or 1 to {MAX_QUEUE_CAPACITY}, got {n}",
                cotenant::pool::DEFAULT_QUEUE_CAPACITY
            )))
        }
        n => n as usize,
    };
    let on_full = match options.on_full {
        COTENANT_ON_FULL_BLOCK => Full::Block,
        COTENANT_ON_FULL_REJECT => Full::Reject,
        COTENANT_ON_FULL_CALLER_RUNS => Full::CallerRuns,
        other => {
            return Err(invalid(format!(
                "on_full must be COTENANT_ON_FULL_BLOCK ({COTENANT_ON_FULL_BLOCK}), \
                 COTENANT_ON_FULL_REJECT ({COTENANT_ON_FULL_REJECT}) or \
                 COTENANT_ON_FULL_CALLER_RUNS ({COTENANT_ON_FULL_CALLER_RUNS}), got {other}"
            )))
        }
    };
    let period = checked_period(function, &format!("{prefix}period_us"), options.period_us)?;
    let mut builder = builder.queue_capacity(queue_capacity).on_full(on_full).period(period);
    match options.task_histograms {
        COTENANT_HISTOGRAMS_DEFAULT => {}
        COTENANT_HISTOGRAMS_ON => builder = builder.task_histograms(true),
        COTENANT_HISTOGRAMS_OFF => builder = builder.task_histograms(false),
        other => {
            return Err(invalid(format!(
                "task_histograms must be COTENANT_HISTOGRAMS_DEFAULT ({COTENANT_HISTOGRAMS_DEFAULT}), \
                 COTENANT_HISTOGRAMS_ON ({COTENANT_HISTOGRAMS_ON}) or \
                 COTENANT_HISTOGRAMS_OFF ({COTENANT_HISTOGRAMS_OFF}), got {other}"
            )))
        }
    }
    let pool = builder.build().map_err(|e| match e {
        cotenant::BuildError::Spawn(_) => Error::new(COTENANT_ERR_SYSTEM, format!("{function}: {e}")),
        _ => Error::new(COTENANT_ERR_INVALID, format!("{function}: {e}")),
    })?;
    Ok(CotenantPool { pool, on_full, queue_capacity })
}

/// Queues `task` only if there is room now; a refused task is dropped without running.
fn try_push(function: &str, pool: &CotenantPool, task: CTask) -> Result<(), Error> {
    match pool.pool.try_spawn(move || task.run()) {
        // Dropping the handle leaves the task queued.
        Ok(_) => Ok(()),
        Err(TrySpawnError::Full) => Err(Error::new(
            COTENANT_ERR_FULL,
            format!(
                "{function}: the pool's queue is full (its capacity is {}); the task was not queued",
                pool.queue_capacity
            ),
        )),
        Err(TrySpawnError::ShutDown) => Err(Error::new(
            COTENANT_ERR_SHUT_DOWN,
            format!("{function}: the pool is shutting down; the task was not queued"),
        )),
        Err(other) => Err(Error::new(COTENANT_ERR_INTERNAL, format!("{function}: {other}"))),
    }
}

/// A controller period from microseconds (0: one clock tick), or `COTENANT_ERR_INVALID` naming
/// `argument` and the accepted range.
fn checked_period(function: &str, argument: &str, period_us: u32) -> Result<Duration, Error> {
    let period = match period_us {
        0 => cotenant::pool::default_period(),
        us => Duration::from_micros(u64::from(us)),
    };
    let (min, max) = (cotenant::pool::MIN_PERIOD, cotenant::pool::MAX_PERIOD);
    if !(min..=max).contains(&period) {
        return Err(Error::new(
            COTENANT_ERR_INVALID,
            format!(
                "{function}: {argument} must be 0 (one clock tick) or {} to {}, got {period_us}",
                min.as_micros(),
                max.as_micros()
            ),
        ));
    }
    Ok(period)
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

//! `libcotenant_preload.so`: loaded with `LD_PRELOAD` by `cotenant run --preload`, it makes
//! the calls that programs use to size their thread pools answer the CPU count cotenant
//! computed, for programs that read nothing else (C and C++ code, Python before 3.13).
//!
//! | call | answer |
//! |---|---|
//! | `sysconf(_SC_NPROCESSORS_ONLN)` | `$COTENANT_CPUS` (Python 3.11's `os.cpu_count()`, many C programs) |
//! | `get_nprocs()` | `$COTENANT_CPUS` (libstdc++'s `std::thread::hardware_concurrency()`) |
//! | everything else, `_SC_NPROCESSORS_CONF` and `get_nprocs_conf()` included | the C library's own answer |
//!
//! The count comes from the environment variable `COTENANT_CPUS` (set by `cotenant run`, read
//! once); when it is absent or not a positive integer, every call is passed through, so the
//! shim never changes a program's behaviour by accident. `_SC_NPROCESSORS_CONF` is left alone
//! on purpose: code that sizes per-CPU arrays indexed by CPU id must see every CPU
//! (`docs/run.md`, "Risks").
//!
//! No Rust code here allocates or panics on the call path: the functions may be called from
//! any C context, early in process start-up included.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use libc::{c_int, c_long};

/// The count: 0 until read, -1 when absent or invalid.
static COUNT: AtomicI64 = AtomicI64::new(0);
static REAL_SYSCONF: AtomicUsize = AtomicUsize::new(0);
static REAL_GET_NPROCS: AtomicUsize = AtomicUsize::new(0);

/// `$COTENANT_CPUS` as a positive count, read once.
fn count() -> Option<i64> {
    let cached = COUNT.load(Ordering::Relaxed);
    if cached != 0 {
        return (cached > 0).then_some(cached);
    }
    // SAFETY: the name is a NUL-terminated literal; getenv returns NULL or a pointer into the
    // environment, which we only read here, before anything in this call could change it.
    let value = unsafe { libc::getenv(c"COTENANT_CPUS".as_ptr()) };
    let parsed = if value.is_null() {
        None
    } else {
        // SAFETY: a non-NULL getenv result is a NUL-terminated string.
        let bytes = unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes();
        parse_count(bytes)
    };
    COUNT.store(parsed.unwrap_or(-1), Ordering::Relaxed);
    parsed
}

/// A positive decimal count of at most 1,000,000 CPUs, without allocating.
fn parse_count(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 7 {
        return None;
    }
    let mut n: i64 = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + i64::from(b - b'0');
    }
    (1..=1_000_000).contains(&n).then_some(n)
}

/// The next definition of `name` after this library (the C library's), cached in `slot`.
fn next_symbol(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let cached = slot.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: RTLD_NEXT with a NUL-terminated name is dlsym's documented use for interposers.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    slot.store(found, Ordering::Relaxed);
    found
}

/// `sysconf(3)`: the count for `_SC_NPROCESSORS_ONLN`, the C library's answer otherwise.
///
/// # Safety
/// Called as the C function it replaces; it has no preconditions.
#[no_mangle]
pub unsafe extern "C" fn sysconf(name: c_int) -> c_long {
    if name == libc::_SC_NPROCESSORS_ONLN {
        if let Some(n) = count() {
            return n as c_long;
        }
    }
    match next_symbol(&REAL_SYSCONF, c"sysconf") {
        0 => {
            // SAFETY: __errno_location returns the calling thread's errno.
            unsafe { *libc::__errno_location() = libc::EINVAL };
            -1
        }
        real => {
            // SAFETY: the address dlsym found for "sysconf" is the C library's sysconf.
            let real: unsafe extern "C" fn(c_int) -> c_long = unsafe { std::mem::transmute(real) };
            // SAFETY: forwarding the caller's argument to the function it meant to call.
            unsafe { real(name) }
        }
    }
}

/// `get_nprocs(3)`: the count, or the C library's answer.
///
/// # Safety
/// Called as the C function it replaces; it has no preconditions.
#[no_mangle]
pub unsafe extern "C" fn get_nprocs() -> c_int {
    if let Some(n) = count() {
        return n as c_int;
    }
    match next_symbol(&REAL_GET_NPROCS, c"get_nprocs") {
        0 => 1,
        real => {
            // SAFETY: the address dlsym found for "get_nprocs" is the C library's get_nprocs.
            let real: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(real) };
            // SAFETY: get_nprocs has no preconditions.
            unsafe { real() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_count;

    #[test]
    fn only_a_positive_decimal_count_is_accepted() {
        assert_eq!(parse_count(b"3"), Some(3));
        assert_eq!(parse_count(b"1000000"), Some(1_000_000));
        for bad in [&b""[..], b"0", b"-1", b"1.5", b" 2", b"2 ", b"abc", b"10000000"] {
            assert_eq!(parse_count(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}

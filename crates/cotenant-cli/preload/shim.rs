// The preload shim, `libcotenant_preload.so`: loaded with `LD_PRELOAD` by
// `cotenant run --preload`, it makes the calls that programs use to size their thread pools
// answer the CPU count cotenant computed, for programs that read nothing else (C and C++ code,
// Python before 3.13).
//
// This one file is compiled twice, from the same text, and must stay a plain list of items
// (no `//!` or `#![...]`: those are not allowed where `include!` pastes a file):
// - by the CLI's build script (`crates/cotenant-cli/build.rs`), on its own, with `rustc`, into
//   the library that the `cotenant` binary carries inside it, so that `cargo install` alone
//   gives a working `run --preload`;
// - as the crate `cotenant-preload` (`crates/cotenant-preload/src/lib.rs` includes it), which
//   the workspace build, its unit tests (at the end of this file) and `make install` use.
// So it needs nothing but `std`: the few C declarations it uses are written out below, in `c`.
//
// | call | answer |
// |---|---|
// | `sysconf(_SC_NPROCESSORS_ONLN)` | `$COTENANT_CPUS` (Python 3.11's `os.cpu_count()`, many C programs) |
// | `get_nprocs()` | `$COTENANT_CPUS` (libstdc++'s `std::thread::hardware_concurrency()`) |
// | every other `sysconf` name, `_SC_NPROCESSORS_CONF` and `get_nprocs_conf()` included | the C library's own answer |
//
// The count comes from the environment variable `COTENANT_CPUS` (set by `cotenant run`, read
// once); when it is absent or not a positive integer, every call is passed through, so the
// shim never changes a program's behaviour by accident. `_SC_NPROCESSORS_CONF` is left alone
// on purpose: code that sizes per-CPU arrays indexed by CPU id must see every CPU
// (`docs/run.md`, "Risks").
//
// How a call reaches the C library (the shim runs inside every process it is preloaded into,
// allocators' start-up included):
// 1. At load, a constructor (an `.init_array` entry, run by the dynamic loader when it loads
//    the shim, before `main`) resolves the next `sysconf` and `get_nprocs` with
//    `dlsym(RTLD_NEXT)` and reads `COTENANT_CPUS`. No call ever looks a symbol up: a lazy
//    `dlsym` on the call path could allocate (older glibc allocates its `dlerror` buffer on a
//    thread's first `dlsym`) and so re-enter a custom allocator that is itself calling
//    `sysconf` during its start-up.
// 2. On a call, only `_SC_NPROCESSORS_ONLN` (and `get_nprocs`) may be answered from the
//    count; every other name goes straight to the resolved function, touching nothing but one
//    atomic load.
// 3. If the resolved function is missing (a call made before the constructor ran, e.g. from
//    another library's constructor, or a `dlsym` that found nothing), glibc's own `sysconf` is
//    called under its exported alias `__sysconf`, bound by the dynamic loader like any other
//    symbol: `_SC_PAGESIZE` and every other name keep the C library's answer whatever
//    happened to the lookup. On other C libraries, only the page size is answered (from the
//    auxiliary vector) and other names fail with `EINVAL`.
//
// No Rust code here allocates or panics on the call path: the functions may be called from
// any C context, early in process start-up included.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use self::c::{c_int, c_long};

/// The C declarations the shim uses, written here instead of taken from the `libc` crate: the
/// CLI's build script compiles this file on its own with `rustc`, where no crate but `std` is
/// available. The values are Linux's, the same on glibc and musl for every architecture
/// (`<dlfcn.h>`, `<unistd.h>`, `<sys/auxv.h>`, `<errno.h>`). `dlsym` needs no `#[link]`
/// here: `std` itself links the library that holds it (`libdl` before glibc 2.34).
mod c {
    pub use std::ffi::{c_char, c_int, c_long, c_void};

    /// `dlsym`'s pseudo-handle for "the next object after this one": `(void *) -1`.
    pub const RTLD_NEXT: *mut c_void = usize::MAX as *mut c_void;
    /// `sysconf`'s name for the number of online CPUs.
    pub const SC_NPROCESSORS_ONLN: c_int = 84;
    /// `sysconf`'s name for the page size.
    #[cfg(any(test, not(target_env = "gnu")))]
    pub const SC_PAGESIZE: c_int = 30;
    /// The auxiliary vector's entry for the page size.
    #[cfg(any(test, not(target_env = "gnu")))]
    pub const AT_PAGESZ: std::ffi::c_ulong = 6;
    /// "Invalid argument", what `sysconf` sets for a name it does not know.
    #[cfg(not(target_env = "gnu"))]
    pub const EINVAL: c_int = 22;

    extern "C" {
        /// The address of `symbol` in `handle` (here always `RTLD_NEXT`), or NULL.
        pub fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
        /// The value of the environment variable `name`, or NULL.
        pub fn getenv(name: *const c_char) -> *mut c_char;
        /// The auxiliary vector's value for `kind` (0 if absent).
        #[cfg(any(test, not(target_env = "gnu")))]
        pub fn getauxval(kind: std::ffi::c_ulong) -> std::ffi::c_ulong;
        /// The address of the calling thread's `errno`.
        #[cfg(not(target_env = "gnu"))]
        pub fn __errno_location() -> *mut c_int;
    }
}

/// The count: 0 until read, -1 when absent or invalid.
static COUNT: AtomicI64 = AtomicI64::new(0);
/// The next `sysconf` after the shim (the C library's), as an address; 0 until resolved.
static REAL_SYSCONF: AtomicUsize = AtomicUsize::new(0);
/// The next `get_nprocs` after the shim; 0 until resolved.
static REAL_GET_NPROCS: AtomicUsize = AtomicUsize::new(0);

/// The constructor: the dynamic loader calls every `.init_array` entry when it loads the
/// shim, before `main` (and at `dlopen`, if the shim is loaded that way).
#[used]
#[link_section = ".init_array"]
static RESOLVE_AT_LOAD: extern "C" fn() = resolve_at_load;

/// Resolves the real functions and reads the count, once, at load time (step 1 above). It
/// allocates nothing itself; whatever `dlsym` does, it does here, during loading, and never
/// from inside a `sysconf` call.
extern "C" fn resolve_at_load() {
    // Relaxed is enough: each slot holds a complete address or 0, and a reader that sees 0
    // takes the fallback (step 3), which gives the same answer.
    REAL_SYSCONF.store(next_symbol(c"sysconf"), Ordering::Relaxed);
    REAL_GET_NPROCS.store(next_symbol(c"get_nprocs"), Ordering::Relaxed);
    count();
}

/// The address of the next definition of `name` after this library, or 0.
fn next_symbol(name: &std::ffi::CStr) -> usize {
    // SAFETY: RTLD_NEXT with a NUL-terminated name is dlsym's documented use for interposers.
    unsafe { c::dlsym(c::RTLD_NEXT, name.as_ptr()) as usize }
}

/// `$COTENANT_CPUS` as a positive count, read once (at load, or at the first call if that
/// comes before the constructor).
fn count() -> Option<i64> {
    let cached = COUNT.load(Ordering::Relaxed);
    if cached != 0 {
        return (cached > 0).then_some(cached);
    }
    // SAFETY: the name is a NUL-terminated literal; getenv returns NULL or a pointer into the
    // environment, which we only read here, before anything in this call could change it.
    let value = unsafe { c::getenv(c"COTENANT_CPUS".as_ptr()) };
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

/// The C library's `sysconf(name)`: the function resolved at load, else the fallback.
fn real_sysconf(name: c_int) -> c_long {
    match REAL_SYSCONF.load(Ordering::Relaxed) {
        0 => fallback::sysconf(name),
        real => {
            // SAFETY: the address dlsym found for "sysconf" is the C library's sysconf (or the
            // next interposer's), which has this signature.
            let real: unsafe extern "C" fn(c_int) -> c_long = unsafe { std::mem::transmute(real) };
            // SAFETY: forwarding the caller's argument to the function it meant to call.
            unsafe { real(name) }
        }
    }
}

/// `sysconf(3)`: the count for `_SC_NPROCESSORS_ONLN`, the C library's answer otherwise.
///
/// # Safety
/// Called as the C function it replaces; it has no preconditions.
#[no_mangle]
pub unsafe extern "C" fn sysconf(name: c_int) -> c_long {
    if name == c::SC_NPROCESSORS_ONLN {
        if let Some(n) = count() {
            return n as c_long;
        }
    }
    real_sysconf(name)
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
    match REAL_GET_NPROCS.load(Ordering::Relaxed) {
        // The C library's sysconf(_SC_NPROCESSORS_ONLN) is its get_nprocs() (glibc returns
        // exactly that); a C library that cannot say gets the smallest valid answer.
        0 => c_int::try_from(real_sysconf(c::SC_NPROCESSORS_ONLN)).unwrap_or(1).max(1),
        real => {
            // SAFETY: the address dlsym found for "get_nprocs" is the C library's get_nprocs.
            let real: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(real) };
            // SAFETY: get_nprocs has no preconditions.
            unsafe { real() }
        }
    }
}

/// `sysconf` when no function was resolved (step 3 above).
mod fallback {
    use super::c::{c_int, c_long};

    #[cfg(target_env = "gnu")]
    extern "C" {
        /// glibc's `sysconf` under the alias it has exported since glibc 2.0, on every
        /// architecture. The shim defines `sysconf`, never `__sysconf`, so this is always
        /// the C library's, and the dynamic loader binds it like any other symbol, with no
        /// `dlsym`.
        fn __sysconf(name: c_int) -> c_long;
    }

    /// The C library's answer for `name`, without any lookup.
    #[cfg(target_env = "gnu")]
    pub fn sysconf(name: c_int) -> c_long {
        // SAFETY: __sysconf is sysconf; it takes any name and has no preconditions.
        unsafe { __sysconf(name) }
    }

    /// The page size from the auxiliary vector; every other name fails with `EINVAL`, as an
    /// unknown name does.
    #[cfg(not(target_env = "gnu"))]
    pub fn sysconf(name: c_int) -> c_long {
        use super::c;
        if name == c::SC_PAGESIZE {
            // SAFETY: getauxval has no preconditions; AT_PAGESZ is always in the vector.
            let size = unsafe { c::getauxval(c::AT_PAGESZ) };
            if let Ok(size) = c_long::try_from(size) {
                if size > 0 {
                    return size;
                }
            }
        }
        // SAFETY: __errno_location returns the calling thread's errno.
        unsafe { *c::__errno_location() = c::EINVAL };
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::{c, fallback, parse_count};

    #[test]
    fn only_a_positive_decimal_count_is_accepted() {
        assert_eq!(parse_count(b"3"), Some(3));
        assert_eq!(parse_count(b"1000000"), Some(1_000_000));
        for bad in [&b""[..], b"0", b"-1", b"1.5", b" 2", b"2 ", b"abc", b"10000000"] {
            assert_eq!(parse_count(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_fallback_gives_the_page_size_without_any_lookup() {
        // SAFETY: getauxval has no preconditions.
        let page = unsafe { c::getauxval(c::AT_PAGESZ) };
        assert!(page > 0, "AT_PAGESZ is in every process's auxiliary vector");
        assert_eq!(fallback::sysconf(c::SC_PAGESIZE), page as c::c_long);
    }

    /// The numbers written out in `c` are the C library's: the online CPU count and the page
    /// size come back for them (asked of the C library's own `sysconf`, never of the shim's,
    /// which would answer `COTENANT_CPUS` if the test runner's environment had it).
    #[test]
    fn the_hand_written_declarations_match_the_c_library() {
        let online = super::real_sysconf(c::SC_NPROCESSORS_ONLN);
        let from_std = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(online >= 1, "_SC_NPROCESSORS_ONLN (84) is the online CPU count, got {online}");
        assert!(online as usize >= from_std, "online CPUs {online} < usable CPUs {from_std}");
        let page = super::real_sysconf(c::SC_PAGESIZE);
        // SAFETY: getauxval has no preconditions.
        assert_eq!(page as u64, unsafe { c::getauxval(c::AT_PAGESZ) } as u64, "_SC_PAGESIZE (30)");
    }
}

//! The error side of the C ABI: the thread-local message behind `cotenant_last_error`, and
//! [`guard`], which every exported function runs its body in so that no panic crosses the
//! boundary.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::COTENANT_ERR_INTERNAL;

thread_local! {
    /// The message of the last failed call on this thread ("" before any).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// What `cotenant_last_error` returns when the thread-local is gone (thread exit).
const EMPTY: &CStr = c"";

/// A failed call: its code (one of the negative `COTENANT_ERR_*`) and message.
#[derive(Debug)]
pub(crate) struct Error {
    pub(crate) code: c_int,
    pub(crate) message: String,
}

impl Error {
    pub(crate) fn new(code: c_int, message: impl Into<String>) -> Self {
        Error { code, message: message.into() }
    }

    /// A NULL pointer argument, named.
    pub(crate) fn null(function: &str, argument: &str) -> Self {
        Error::new(crate::COTENANT_ERR_NULL, format!("{function}: {argument} is NULL"))
    }

    /// Stores the message for `cotenant_last_error` and returns the code.
    pub(crate) fn report(self) -> c_int {
        set_last_error(self.message);
        self.code
    }
}

/// Replaces this thread's last error message (a NUL inside it is escaped).
pub(crate) fn set_last_error(message: String) {
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // `try_with`: during thread exit the message is lost rather than panicking.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = message);
}

/// This thread's last error message; valid until the next failed call on this thread.
pub(crate) fn last_error() -> *const c_char {
    LAST_ERROR.try_with(|last| last.borrow().as_ptr()).unwrap_or(EMPTY.as_ptr())
}

/// Runs `body`; a panic becomes [`COTENANT_ERR_INTERNAL`] (or `on_panic` for functions that
/// return a value) with the panic's message, for a C caller to report. Every exported function
/// goes through here.
pub(crate) fn guard<T>(function: &str, on_panic: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a panic")
                .to_owned();
            // Dropping a payload can itself panic; forget it rather than risk unwinding here.
            std::mem::forget(payload);
            set_last_error(format!("{function}: internal error (a bug in cotenant): {what}"));
            on_panic
        }
    }
}

/// [`guard`] for functions returning a code: `Ok` is `COTENANT_OK`, `Err` reports itself.
pub(crate) fn guard_code(function: &str, body: impl FnOnce() -> Result<(), Error>) -> c_int {
    guard(function, COTENANT_ERR_INTERNAL, || match body() {
        Ok(()) => crate::COTENANT_OK,
        Err(error) => error.report(),
    })
}

/// [`guard`] for functions returning a pointer: `Err` reports itself and gives NULL.
pub(crate) fn guard_ptr<T>(function: &str, body: impl FnOnce() -> Result<*mut T, Error>) -> *mut T {
    guard(function, std::ptr::null_mut(), || match body() {
        Ok(pointer) => pointer,
        Err(error) => {
            error.report();
            std::ptr::null_mut()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> String {
        // SAFETY: `last_error` never returns NULL; the text is copied at once.
        unsafe { CStr::from_ptr(last_error()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        assert_eq!(message(), "", "no failure yet on this thread");
        let code = guard_code("cotenant_test", || panic!("boom {}", 42));
        assert_eq!(code, COTENANT_ERR_INTERNAL);
        assert_eq!(message(), "cotenant_test: internal error (a bug in cotenant): boom 42");
        let pointer: *mut u8 = guard_ptr("cotenant_test", || panic!("static text"));
        assert!(pointer.is_null());
        assert!(message().ends_with("static text"));
    }

    #[test]
    fn a_nul_in_a_message_is_escaped() {
        assert_eq!(Error::new(-2, "a\0b").report(), -2);
        assert_eq!(message(), "a\\0b");
    }
}

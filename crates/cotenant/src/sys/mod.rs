//! What differs between Linux and every other system, in one place: a small set of functions
//! with two implementations, chosen when the crate is compiled.
//!
//! - `linux.rs`: the system calls cotenant is built on (thread affinity masks, CPU clocks, the
//!   clock tick, positional reads, scheduling classes), through `libc`.
//! - `fallback.rs`: the same functions for systems other than Linux, from the standard library
//!   (and the POSIX CPU clocks where the system has them). What only Linux offers fails with an
//!   [`std::io::ErrorKind::Unsupported`] error that says so, or reads as unavailable.
//!
//! The fallback is compiled on every system but Linux, and on Linux too under
//! `--cfg cotenant_force_fallback` (`RUSTFLAGS="--cfg cotenant_force_fallback" cargo test -p
//! cotenant`): only the Linux target is installed where cotenant is developed, and this is how
//! the fallback is built and tested there. Code that branches on the platform at run time reads
//! [`FALLBACK`] (a constant: the other branch is compiled, type-checked and optimised away).
//! The parts that need more than these functions have two implementations of their own, chosen
//! by the same cfg: the host CPU tokens' System V protocol (`tokens/`) and the host sampler's
//! readings of `/proc` (`internal/sampler/`).

// Under loom only the CPU count and the kernel files are built: the clocks and the scheduling
// calls have no user there.
#![cfg_attr(loom, allow(dead_code))]

#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
mod linux;
#[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
pub(crate) use linux::*;

#[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
mod fallback;
#[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
pub(crate) use fallback::*;

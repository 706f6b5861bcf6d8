//! `libcotenant_preload.so`: loaded with `LD_PRELOAD` by `cotenant run --preload`, it makes
//! `sysconf(_SC_NPROCESSORS_ONLN)` and `get_nprocs()` (and so Python's `os.cpu_count()` before
//! 3.13 and C++'s `std::thread::hardware_concurrency()`) answer the CPU count cotenant computed
//! and put in `COTENANT_CPUS`; every other call goes to the C library unchanged.
//!
//! The source is the CLI crate's `preload/shim.rs`, included here whole: the `cotenant` binary
//! carries the same shim inside it (its build script compiles that file on its own), so that
//! `cargo install` alone gives a working `run --preload`, while this crate gives the workspace
//! build, the shim's unit tests and `make install` the library as a file. One source, two
//! builds of it: they cannot drift apart. How the shim works is described at the top of that
//! file.

include!("../../cotenant-cli/preload/shim.rs");

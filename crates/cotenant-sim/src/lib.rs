//! cotenant-sim: deterministic simulations of what cannot be measured on a small host (issue 10).
//!
//! | module | what it owns |
//! |---|---|
//! | [`bandwidth`] | CFS bandwidth control, event by event (seed 001 §II-B, §III, §IV) |
//! | [`host`] | M CPUs under a fair scheduler (idealised, or Linux's EEVDF with per-CPU run queues), pools running the library's policy (seed 000 §5) |
//! | [`rng`] | the seeded generator every run (and the lab's schedule) draws from |
//!
//! Everything is integer nanoseconds and pure: the same inputs give the same timeline.

pub mod bandwidth;
pub mod host;
pub mod rng;

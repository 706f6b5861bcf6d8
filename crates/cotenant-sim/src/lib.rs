//! cotenant-sim: deterministic simulations of what cannot be measured on a small host (issue 10).
//!
//! | module | what it owns |
//! |---|---|
//! | [`bandwidth`] | CFS bandwidth control, event by event (seed 001 §II-B, §III, §IV) |
//!
//! Everything is integer nanoseconds and pure: the same inputs give the same timeline.

pub mod bandwidth;

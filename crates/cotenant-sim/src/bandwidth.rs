//! CFS bandwidth control, event by event (seed 001 §II-B and §III-A; the slush fund of §IV-A).
//!
//! One cgroup with a quota per period; `threads` CPU-bound threads, one per CPU, never
//! blocking once started. The model (seed 001's "Listing" numbers in brackets):
//!
//! - **Global pool**: refilled to `quota` at every period boundary [Listing 1]. Under `slush`
//!   what the period left is kept as the slush fund instead of being discarded [Listing 2].
//! - **Local pools**, one per CPU: a CPU's running thread is charged at its scheduler ticks
//!   (every `tick`, from a per-CPU phase) for the time it ran since the last charge. When the
//!   local pool is at or below zero it asks the global pool for `slice - remaining` (enough for
//!   a whole slice) and gets what is there [Listing 4]; still at or below zero, the thread is
//!   throttled. Under `slush`, the first refill of a local pool in a period first pays its debt
//!   from the slush fund, `min(slush, -remaining)` clamped at zero [Listing 3].
//! - **Unthrottling** at the period boundary, after the refill: each throttled CPU (in the
//!   order they were throttled) gets `1 ns - remaining` from the global pool if it is there,
//!   the kernel's rule (`distribute_cfs_runtime`); the seed does not say how much.
//! - **Ties**: the period timer runs before a tick at the same instant (the seed's Figure 4
//!   needs it: at t = 20 ms the refill comes first).
//!
//! - **Blocking** (optional duty cycle: each thread runs `run` of CPU time, then sleeps
//!   `sleep`): a thread that blocks is charged at the context switch (and asks for a slice if
//!   that leaves its pool at or below zero, as `update_curr` does); a thread that wakes with an
//!   empty local pool asks for runtime and is throttled if it gets none (the kernel's check at
//!   enqueue).
//! - **Configuration writes** (optional, every `update_every`): a container runtime rewriting
//!   the same quota and period. The kernel (seed 001 §III-A2) refills the global pool, resets
//!   every local pool to zero and unthrottles; under `all` the write is a no-op (§IV-A2).
//!
//! Variants: `baseline` (the seed's model above, its Listings 1-4), `slush` (baseline with the
//! slush fund), `all` (slush, and same-value writes are no-ops), `mainline` (baseline, and a
//! CPU whose thread blocks returns all but `min_cfs_rq_runtime` = 1 ms of its local pool to the
//! global pool, `return_cfs_rq_runtime`, which the slack timer hands to throttled CPUs; like
//! the seed's model, local runtime never expires, the 5.4 change). The kernel has returned idle
//! runtime since 3.2, so the seed's 5.12 did it too; its listings leave it out, and so does
//! `baseline`, so that the variants separate the mechanisms. For threads that never block and
//! no configuration writes, `all` runs exactly as `slush` and `mainline` as `baseline`: the
//! differences need the options above. Not modelled: the slack timer's 5 ms batching delay
//! (returned runtime is handed out at once), `cfs_burst`.
//!
//! | file | what it owns |
//! |---|---|
//! | `bandwidth/config.rs` | the inputs: [`Variant`], [`Duty`], [`Config`], [`table_ii`] |
//! | `bandwidth/pools.rs` | the global pool, the slush fund, the local pools and their refills |
//! | `bandwidth/run.rs` | the event loop, [`simulate`] |
//! | `bandwidth/timeline.rs` | the outcome: [`Event`], [`Kind`], [`Period`], [`Run`] |

mod config;
mod pools;
mod run;
mod timeline;

pub use config::{table_ii, Config, Duty, Variant};
pub use run::simulate;
pub use timeline::{Event, Kind, Period, Run};

#[cfg(test)]
mod tests;

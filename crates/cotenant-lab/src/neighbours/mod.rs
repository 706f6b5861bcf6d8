//! Seed 000 Figure 7: P identical processes at once, each serving its own open-loop load, for
//! each pool kind (`ignorant`, `optimal`, `share`, `adaptive`), in two settings: all processes
//! in one cgroup (their threads compete one by one) and one cgroup per process with equal
//! weights (tenants compete, as containers do).
//!
//! The children are real processes (`cotenant lab-worker`) that start their schedules at one
//! common instant. Each run's rows are aggregated by pure functions, which are unit-tested on
//! recorded rows. `headline` (what `make demo` runs) and `factor` (Figure 8) are
//! configurations of this experiment, and so is `go-neighbours`, whose processes are the Go
//! worker (`gobuild.rs`) under Go's default GOMAXPROCS, a static split, or the cotenant Go
//! controller. With `--items async`, each item is a future instead (a timer, then the same
//! work: seed 000's lightweight thread), served by tokio's runtime with its default workers, by
//! tokio with CPUs / P workers, and by the cotenant executor (`async_items.rs`).
//!
//! The pure part, which `cotenant sim neighbours` reuses to reduce simulated runs alike:
//! `plan.rs` (settings, one run's parameters, the plan and its configurations), `aggregate.rs`
//! (a run's figures, and their median, min and max over repeats) and `verdict.rs` (verdict
//! lines, table and charts). `run.rs` runs a plan on this host: the lab's token set, the
//! cgroups and worker processes of each run, and the rows they record.

mod aggregate;
pub mod headline;
mod plan;
mod run;
mod verdict;

#[cfg(test)]
mod tests;

pub use self::aggregate::{aggregate, figures, figures_of, Aggregate, RunFigures};
pub use self::plan::{check_items, kind_name, Key, Plan, RunConfig, Setting, ASYNC_KINDS, KINDS};
pub use self::run::{run_go, run_neighbours, run_once, run_plan, LAB_TOKENS};
pub use self::verdict::{async_acceptance, async_verdict, charts, go_verdict, table, verdict, verdict_of};

//! Seed 004 in miniature (issue 8, item 2): why unsafe spinning starves under contention, and
//! what each waiting strategy of `cotenant::wait` does about it.
//!
//! The model of WiredTiger's snapshot protocol (seed 004 §II-A): S sessions (threads) loop
//! over transactions, each preceded by a 200 µs sleep that stands for the client's round trip
//! (the seed measured end-to-end latency at YCSB clients on another machine). Begin: mark the
//! session's slot "allocating", take the next ID from a global counter, publish it in the slot
//! (about 10 µs later). Snapshot: scan every other slot and, while one is
//! still "allocating", wait for it (the strategy under test: spin, yield, back-off, park).
//! Update: about 40 µs of CPU work. Commit: clear the slot. A transaction's end-to-end latency
//! runs from the start of its round trip to its commit; "transaction alone" from begin to
//! commit. Transactions still running when the run stops are not counted.
//!
//! The mechanism: a session preempted between "allocating" and "published" holds up every
//! snapshot; a spinning waiter burns its time slice while the session it waits for cannot
//! run, and a spinner at nice -20 can keep it off the CPU for a long time.
//!
//! Scenarios (`R` = max(1, CPUs / 4) CPUs, `S` = 4 R sessions, as the seed's 40 on 10 cores):
//! - **unrestricted**: the S sessions may use every allowed CPU;
//! - **restricted**: pinned to R CPUs (4 sessions per CPU, `taskset` in the seed);
//! - **inverted**: restricted, and max(1, round(S / 10)) sessions at nice -20 during the middle third
//!   of the run (the seed's 4 of 40), restored afterwards.
//!
//! Plus throughput against sessions (S = 2, 4, 8 per CPU, restricted, the boosted sessions at
//! nice -20 throughout, the seed's Figure 4) and an uncontended run (S = CPUs, unrestricted,
//! no round trip: transactions back to back, so throughput shows what waiting costs) for the
//! cost of safety when nothing goes wrong.
//!
//! | file | what it owns |
//! |---|---|
//! | `model.rs` | the waiting strategies; what one run is told and what it measures |
//! | `session.rs` | one run: the session threads, the boost window, affinity and nice |
//! | `plan.rs` | pure: the shape (R, S, boosted) from the allowed CPUs, the scenarios, each run's spec |
//! | `measure.rs` | every run of the experiment, repeat by repeat, rows as they are measured |
//! | `aggregate.rs` | pure: runs gathered per scenario, sessions count and strategy; rows, medians, increases |
//! | `report.rs` | pure: the tables, charts, verdicts and summary |
//!
//! `run` goes through them in that order: plan, measure, report.

mod aggregate;
mod measure;
mod model;
mod plan;
mod report;
mod session;
#[cfg(test)]
mod tests;

pub use aggregate::increase;
pub use model::{Boost, Latencies, RunResult, RunSpec, Strategy};
pub use plan::{shape, Scenario};
pub use session::{allowed_cpus, run_once};

use crate::{Lab, Outcome};

/// The nice value of the boosted sessions (seed 004 §III).
const BOOSTED_NICE: i32 = -20;

/// `cotenant lab spin`.
pub fn run(_lab: &Lab, args: &crate::args::LabArgs) -> anyhow::Result<Outcome> {
    let plan = plan::Plan::new(allowed_cpus()?, args);
    let mut outcome = Outcome::default();
    let measured = measure::measure(&plan, &mut outcome)?;
    report::report(&plan, &measured, &mut outcome);
    Ok(outcome)
}

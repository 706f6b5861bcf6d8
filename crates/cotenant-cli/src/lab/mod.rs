//! The lab (issue 4): seed 000's experiments, run on the user's own host with real processes.
//!
//! | file | what it owns |
//! |---|---|
//! | `workload.rs` | calibrated CPU-bound items, open-loop schedules, latency summaries |
//! | `worker.rs` | the hidden `lab-worker` mode: one process of an experiment |
//! | `neighbours.rs` | seed 000 Figure 7: P processes, four pool kinds, aggregation |

pub mod neighbours;
pub mod worker;
pub mod workload;

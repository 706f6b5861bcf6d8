//! Starting an experiment's processes and collecting their reports: every process is a
//! `cotenant lab-worker` (or the Go worker) started in its cgroup, all of them starting their
//! schedules at one common instant.
//!
//! Every child is a [`LabChild`]: the leader of a process group of its own, recorded in
//! `cgroup.rs`'s registry (a signal to the lab kills and reaps it, and nothing starts once a
//! signal came), and killed with its group and reaped however the run ends. [`collect`] reads
//! each child's stdout and stderr at once, each on a thread of its own (a child that fills one
//! pipe while the lab reads the other would wait forever, and so would the lab), keeping the
//! last [`STDERR_KEPT`] bytes of stderr for error messages. A run has a deadline
//! ([`worker_deadline`]): a child still running then is killed, and the run fails with
//! [`WorkerFailed`], as it does when a child fails or prints no report; the experiments record
//! such a run as failed and go on. Children outside any cgroup also die with the lab through
//! `PR_SET_PDEATHSIG`, set by the worker itself.
//!
//! The other programs the lab runs to their end (compilers, the runtimes' probes, the Go
//! worker's calibration, `cotenant cgroup set`) go through [`run_bounded_output`]: a
//! [`LabChild`] too, collected the same way, with a fixed limit of its kind
//! ([`BUILD_DEADLINE`], [`PROBE_DEADLINE`], [`CGROUP_SET_DEADLINE`]) rather than a run's.
//!
//! | file | what it owns |
//! |---|---|
//! | `deadline.rs` | a run's deadline, and a failed run told from an error that ends the experiment |
//! | `child.rs` | [`LabChild`]: a child of the lab, killed with its group and reaped; its environment |
//! | `collect.rs` | reading children's stdout and stderr at once by a deadline; [`run_bounded_output`] |
//! | `workers.rs` | a run's worker processes, started at one common instant; the workers' test hook |
//! | `scan.rs` | the lab's processes on this host: orphaned workers and running labs |

mod child;
mod collect;
mod deadline;
mod scan;
#[cfg(test)]
mod tests;
mod workers;

pub use child::{lab_environment, LabChild};
pub use collect::{
    collect, is_not_found, run_bounded_output, Finished, Tail, BUILD_DEADLINE, CGROUP_SET_DEADLINE,
    PROBE_DEADLINE, STDERR_KEPT,
};
pub use deadline::{
    deadline_for, failed_run, worker_deadline, Deadline, WorkerFailed, DEADLINE_ENV, DEADLINE_GRACE_FACTOR,
    DEADLINE_GRACE_MIN,
};
pub use scan::{is_lab, orphan_workers, running_labs, worker_parent};
pub use workers::{
    apply_test_fault, cgroup_run_length, fixed_pool_args, run_length, run_workers, run_workers_at,
    schedule_args, WorkerSpec, FAULT_ENV, FLOOD_BYTES, START_DELAY,
};

//! Seed 001 on the running kernel (issue 7, item 1), and cotenant's user-space CPU budget
//! next to it. Four parts, each a table of `report.md`:
//!
//! 1. **Table II**: N CPU-bound threads (N = CPUs) in a real cgroup whose quota is N CPUs (the
//!    threads never need more: any throttling is an artefact of the accounting) or 0.95 N, at
//!    periods of 100, 50 and 10 ms, with and without a burst equal to the quota; periods,
//!    throttled periods and time from the cgroup's `cpu.stat`, the CPU time the threads got
//!    against an unlimited run. The seed's numbers (Linux 5.12, 3 CPUs) are printed beside.
//! 2. **Latency**: the lab's fib service at 70 % of N CPUs, open loop, in the same quotas:
//!    p99 against the throttled ratio.
//! 3. **Rewrite**: quota N at 100 ms while a thread rewrites the same values every 100 ms with
//!    plain writes (what container runtimes do), or with `cotenant cgroup set` (which writes
//!    nothing when nothing changed), or not at all.
//! 4. **User-space budget**: a pool of N workers with `cpu_budget(1.5, 100 ms)` and with
//!    `cpu_budget(N, 100 ms)`, CPU-bound, no cgroup, slush fund on and off, saturated, and at
//!    1.5 CPUs also open loop at the budget ([`budget_cases`]): the CPUs it used (its workers'
//!    CPU clocks over the wall time) and the periods it was throttled in.
//!
//! Counters are read from `cpu.stat` at the run's common start and at its end, so the worker's
//! calibration and start-up are not counted.
//!
//! | file | what it owns |
//! |---|---|
//! | `plan.rs` | pure: the limits and rewrites of parts 1 to 3, part 4's budget cases, the workers' arguments |
//! | `cgroup_run.rs` | one run in a real cgroup: quota and burst set, the worker, `cpu.stat` around it, rewrites |
//! | `quota_parts.rs` | parts 1 to 3 (Table II, latency, rewrites): their runs and tables |
//! | `budget.rs` | part 4, the user-space budget: its runs and table |
//! | `report.rs` | pure: the counters over a run, the rows of parts 1 to 3, their verdicts, the seed's Table II |

mod budget;
mod cgroup_run;
mod plan;
mod quota_parts;
mod report;
#[cfg(test)]
mod tests;

pub use plan::{budget_cases, table_limits, BudgetCase, Limit, Rewrite};
pub use report::{table_verdicts, Throttling, SEED_TABLE_II};

use std::fmt::Write as _;
use std::time::Duration;

use super::{Lab, Outcome};

use budget::budget_part;
use quota_parts::cgroup_parts;

/// Runs the experiment.
pub fn run(lab: &Lab, args: &crate::args::LabArgs) -> anyhow::Result<Outcome> {
    let n = lab.host.cpus.max(1);
    let seconds = args.seconds.unwrap_or(if args.quick { 1 } else { 10 });
    let duration = Duration::from_secs(seconds);
    let mut outcome = Outcome::default();
    let mut report = String::new();
    match &lab.layout {
        Ok(layout) => {
            cgroup_parts(lab, layout, args, n, duration, &mut outcome, &mut report)?;
        }
        Err(why) => {
            let _ = writeln!(report, "Parts 1 to 3 skipped: they need real cgroups ({why}).\n");
        }
    }
    budget_part(lab, n, duration, &mut outcome, &mut report)?;
    outcome.report = report;
    Ok(outcome)
}

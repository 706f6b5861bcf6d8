//! `cotenant sim ...`: the deterministic simulations of `crates/cotenant-sim` (issue 10).
//!
//! | file | subcommand |
//! |---|---|
//! | `bandwidth.rs` | `sim bandwidth` (seed 001's CFS bandwidth control, event by event) and `sim table2` (its Table II) |
//! | `neighbours.rs` | `sim neighbours` (seed 000 Figure 7 on a simulated host) and `sim validate` |

mod bandwidth;
mod neighbours;

use std::process::ExitCode;

use crate::args::{SimArgs, SimCommand};

/// `cotenant sim <command>`: runs the simulation `args` names and prints its tables (and
/// writes its charts where asked).
pub fn run(args: &SimArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        SimCommand::Bandwidth(a) => bandwidth::run(a),
        SimCommand::Table2(a) => bandwidth::table_ii(a),
        SimCommand::Neighbours(a) => neighbours::run(a),
        SimCommand::Validate(a) => neighbours::validate(a),
    }
}

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

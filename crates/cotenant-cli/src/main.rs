//! The `cotenant` command. `main` runs [`run`], prints any error with its whole chain as
//! `cotenant: ...`, and picks the exit code here, in one place.

mod args;
mod cgroup_set;
// One copy of `cgroupfs.rs`: `lab/cgroup.rs` includes it by path (for the tests that share
// that file), and the rest of the crate uses it from there.
use lab::cgroup::cgroupfs;
mod cmd;
mod doctor;
mod lab;
mod output;
mod private_dir;
mod size_pid;

use std::process::ExitCode;

/// Exit codes, for every subcommand.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// The command ran but could not produce its answer (e.g. no CPU count could be
    /// determined); the reason is printed.
    pub const FAILURE: u8 = 1;
    /// Bad usage: unknown flag, bad value (clap's own code for usage errors).
    pub const USAGE: u8 = 2;
    /// `cotenant run`: the command exists but could not be executed (the shells' code).
    pub const CANNOT_EXECUTE: u8 = 126;
    /// `cotenant run`: the command was not found (the shells' code).
    pub const NOT_FOUND: u8 = 127;
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => {
            eprintln!("cotenant: {err:#}");
            ExitCode::from(exit::FAILURE)
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    use clap::Parser;
    let args = match args::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            // --help and --version are "errors" to clap but successes to the user.
            let _ = e.print();
            return Ok(ExitCode::from(if e.use_stderr() { exit::USAGE } else { exit::OK }));
        }
    };
    match args.command {
        args::Command::Cpus(a) => cmd::cpus::run(&a),
        args::Command::Lab(a) => cmd::lab::run(&a),
        args::Command::Run(a) => cmd::run::run(&a),
        args::Command::Env(a) => cmd::run::env(&a),
        args::Command::Doctor(a) => cmd::doctor::run(&a),
        args::Command::Cgroup(a) => cmd::cgroup::run(&a),
        args::Command::Tokens(a) => cmd::tokens::run(&a),
        args::Command::Size(a) => cmd::size::run(&a),
        args::Command::Sim(a) => cmd::sim::run(&a),
        args::Command::LabWorker(a) => lab::worker::run(&a),
        args::Command::LabProbe => lab::runtimes::probe_main(),
        args::Command::LabTenant(a) => lab::tenants::run(&a),
    }
}

/// Whether the error is a write to a closed pipe (`cotenant cpus --explain | head -1`), which
/// is not a failure.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == BrokenPipe)
            || e.downcast_ref::<serde_json::Error>().is_some_and(|j| j.io_error_kind() == Some(BrokenPipe))
    })
}

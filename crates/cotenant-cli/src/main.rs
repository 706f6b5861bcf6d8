//! The `cotenant` command. `main` runs [`run`], prints any error with its whole chain as
//! `cotenant: ...`, and picks the exit code here, in one place: 2 for a usage error (clap's
//! own, or a [`usage::UsageError`] found after parsing), 1 for any other error.

mod args;
mod cmd;

// The engine room (doctor, cgroup writes, sizing a running process) is `cotenant-ops`; the
// lab and the simulator's front end are `cotenant-lab`, behind the `lab` feature.
use cotenant_ops::{cgroup_set, doctor, exit, output, size_pid, usage};

use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => {
            eprintln!("cotenant: {err:#}");
            ExitCode::from(if usage::is_usage(&err) { exit::USAGE } else { exit::FAILURE })
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
        #[cfg(feature = "lab")]
        args::Command::Lab(a) => cotenant_lab::command::run(&a),
        args::Command::Run(a) => cmd::run::run(&a),
        args::Command::Env(a) => cmd::run::env(&a),
        args::Command::Doctor(a) => cmd::doctor::run(&a),
        args::Command::Cgroup(a) => cmd::cgroup::run(&a),
        args::Command::Tokens(a) => cmd::tokens::run(&a),
        args::Command::Size(a) => cmd::size::run(&a),
        args::Command::Top(a) => cmd::top::run(&a).map(|()| ExitCode::from(exit::OK)),
        args::Command::Completions(a) => cmd::completions::run(&a),
        args::Command::Man => cmd::man::run(),
        #[cfg(feature = "lab")]
        args::Command::Sim(a) => cotenant_lab::sim::run(&a),
        #[cfg(feature = "lab")]
        args::Command::LabWorker(a) => cotenant_lab::worker::run(&a),
        #[cfg(feature = "lab")]
        args::Command::LabProbe => cotenant_lab::runtimes::probe_main(),
        #[cfg(feature = "lab")]
        args::Command::LabTenant(a) => cotenant_lab::tenants::run(&a),
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

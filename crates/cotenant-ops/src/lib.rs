//! What an operator runs against a live host with cotenant, shared by the `cotenant` command,
//! its lab and their tests: the doctor, root-safe cgroup writes, sizing a running process,
//! real cgroups and the registry of what must not outlive a run.
//!
//! This crate is the command's engine room, not a stable API: the library users depend on is
//! `cotenant`.
//!
//! | module | what it owns |
//! |---|---|
//! | [`cgroupfs`] | opening cgroup directories and writing control files: cgroup file systems only, never through a symlink |
//! | [`cgroup`] | real cgroups (`cotenant-lab-*`, `cotenant-test-*`): create, configure, run in, remove, sweep |
//! | [`cleanup`] | the registry of cgroups, children, token sets and folders a signal undoes |
//! | [`cgroup_set`] | `cotenant cgroup set`: read, write only what differs, read back |
//! | [`doctor`] | why a process's latency is bad on a shared host: snapshots, findings, rendering |
//! | [`size_pid`] | `cotenant size --pid`: a running process's thread groups, sized |
//! | [`output`] | the `cpus --json` shape, shared with the C ABI |
//! | [`private_dir`] | folders and files only this user can write (the lab's probe builds) |
//! | [`stats`] | medians over measured values |
//! | [`usage`] | usage errors found after parsing: exit 2, as clap does |
//! | [`values`] | command-line value parsers: the one duration parser, bounded numbers |
//! | [`exit`] | the command's exit codes |

pub mod cgroup;
pub mod cgroup_set;
pub mod cgroupfs;
pub mod cleanup;
pub mod doctor;
pub mod output;
pub mod private_dir;
pub mod size_pid;
pub mod stats;
pub mod status;
pub mod usage;
pub mod values;

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

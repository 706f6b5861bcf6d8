//! One module per subcommand: each turns its parsed arguments into library calls and output.
//! `preload` is where `run --preload` and `env --preload` find the preload shim.

pub mod cgroup;
pub mod completions;
pub mod cpus;
pub mod doctor;
pub mod man;
pub mod preload;
pub mod run;
pub mod size;
pub mod tokens;
pub mod top;

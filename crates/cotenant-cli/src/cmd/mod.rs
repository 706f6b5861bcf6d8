//! One module per subcommand: each turns its parsed arguments into library calls and output.

pub mod cgroup;
pub mod cpus;
pub mod doctor;
pub mod run;
pub mod size;
pub mod tokens;

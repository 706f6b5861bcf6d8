//! One module per subcommand: each turns its parsed arguments into library calls and output.

pub mod cgroup;
pub mod cpus;
pub mod doctor;
pub mod lab;
pub mod run;
pub mod sim;
pub mod size;
pub mod tokens;

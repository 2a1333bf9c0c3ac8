//! One module per subcommand family.

pub mod attach;
pub mod hostlist;
pub mod idset;
pub mod job;
pub mod r;
pub mod start;
pub mod submit;

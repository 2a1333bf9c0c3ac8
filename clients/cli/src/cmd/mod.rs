//! One module per subcommand family.

pub mod hostlist;
pub mod idset;
pub mod job;
pub mod r;

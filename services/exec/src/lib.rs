//! The exec service: runs the tasks of jobs on the node(s) it serves.

pub mod status;
pub mod task;

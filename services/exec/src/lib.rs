//! The exec service: runs the tasks of jobs on the node(s) it serves, speaks
//! `fluxgate.v1.Exec` (RFC 32 shaped) and writes RFC 50 exec eventlog and RFC
//! 24 output lines on the start stream.

pub mod affinity;
pub mod auth;
pub mod bounded_open;
pub mod cgroup;
pub mod cli;
pub mod config;
pub mod discover;
pub mod error;
pub mod event;
pub mod files;
pub mod handoff;
pub mod job;
pub mod jobtmp;
pub mod join;
pub mod layout;
pub mod lookup;
pub mod output;
pub mod pmi;
pub mod relay;
pub mod rlimit;
pub mod run_as;
pub mod server;
pub mod service;
pub mod spawn_error;
pub mod status;
pub mod task;
pub mod telemetry;
pub mod wrapper;

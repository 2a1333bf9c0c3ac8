//! The `fluxgate` command line as a library: its commands, the client they
//! share, and their output, for the `fluxgate` binary and for
//! `fluxgate-bench`, which measures instances with the same client.

pub mod client;
pub mod cmd;
pub mod follow;
pub mod output;
pub mod parse;
pub mod services;

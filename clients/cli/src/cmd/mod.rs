//! The subcommands, by family: what makes, follows and shows jobs
//! ([`jobs`]); resources and how they are shared ([`resources`]);
//! instances, started here or inside jobs, and their services
//! ([`instance`]); and tools that need no instance ([`tools`]).

pub mod instance;
pub mod jobs;
pub mod resources;
pub mod tools;

//! One module per subcommand family.

pub mod accounting;
pub mod attach;
pub mod bench;
pub mod bulksubmit;
pub mod cancel;
pub mod copies;
pub mod docs;
pub mod health;
pub mod hostlist;
pub mod idset;
pub mod instance;
pub mod interrupt;
pub mod job;
pub mod jobs;
pub mod pstree;
pub mod queue;
pub mod resource;
pub mod simulate;
pub mod start;
pub mod stdin;
pub mod submit;
pub mod terminal;
pub mod token;
pub mod top;
pub mod update;
pub mod watch;

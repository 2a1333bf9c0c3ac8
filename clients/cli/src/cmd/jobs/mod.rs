//! Commands about jobs: making them (`submit`, `run`, `bulksubmit`, `job
//! submit`), following them (`run`'s and `job attach`'s attach, `watch`),
//! acting on them (`cancel`, `update`, `job ...`), and showing them
//! (`jobs`, `pstree`, `top`).

pub mod attach;
pub mod bulksubmit;
pub mod cancel;
pub mod job;
pub mod list;
pub mod pstree;
pub mod submit;
pub mod top;
pub mod update;
pub mod watch;

pub use list::pager::{list_all, list_pages};

//! High availability: job managers sharing one PostgreSQL store elect a
//! leader; the others serve as standbys until the lead falls to them.

pub mod election;
pub mod incoming;
pub mod lead;
pub mod standby;

pub use election::{Elector, Leadership};
pub use standby::{LEADER_KEY, Refuse};

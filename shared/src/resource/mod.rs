//! RFC 44 resource events and the node-level state they describe.
//!
//! - [`ResourceEvent`]: typed events, from and to [`crate::Event`].
//! - [`ResourceState`]: online, torpid and drained targets folded from the
//!   events; [`replay`] rebuilds it after a restart, remapping drained
//!   targets by hostname; [`checkpoint`] compacts the stored log to what
//!   replay needs.
//! - drain/undrain request checks ([`ResourceState::plan_drain`]), RFC 28
//!   acquire deltas ([`AcquireDelta`]) and `flux resource status` groups.
//! - [`liveness`]: what a node's silence makes it (torpid, lost), and when
//!   its exec service fences itself.

mod acquire;
mod checkpoint;
mod event;
pub mod liveness;
mod request;
mod state;

pub use acquire::{AcquireDelta, StatusGroups, acquire_initial};
pub use checkpoint::{checkpoint, last_definition_times};
pub use event::{Overwrite, ResourceEvent, ResourceEventError};
pub use request::{DrainError, DrainMode};
pub use state::{DrainGroup, ResourceReplayError, ResourceState, replay, replay_into};

//! Compacting the persistent resource eventlog (RFC 44's goal "avoid excessive
//! KVS eventlog growth").
//!
//! Every start appends `restart` and `resource-define`, and every drain or
//! undrain one more line, so the stored log grows without bound over an
//! instance's life. What a restart needs from it is small: the drained
//! targets with their reasons and times, the last R expiration and how R was
//! last defined. A checkpoint is a short eventlog that replays to exactly
//! that, so the stored log can be replaced by it.
//!
//! Drained targets are written back as one `drain` per group (same time, same
//! reason) with the hostnames they have now, so the remap by hostname on the
//! next start works on a checkpoint as on the original log.

use super::event::{Overwrite, ResourceEvent};
use super::state::ResourceState;
use crate::eventlog::Event;

/// The events that replay (into a state with the same host map) to `state`'s
/// drained targets, expiration and definition method, oldest first.
///
/// `define` and `update` are the timestamps of the last `resource-define` and
/// `resource-update` seen (a checkpoint keeps them where they were); `None`
/// drops that event.
pub fn checkpoint(state: &ResourceState, define: Option<f64>, update: Option<f64>) -> Vec<Event> {
    let mut events: Vec<Event> = Vec::with_capacity(state.drain_groups().len() + 2);
    if let (Some(ts), Some(method)) = (define, state.method()) {
        let e = ResourceEvent::ResourceDefine {
            method: method.to_string(),
        };
        events.push(e.to_event(ts));
    }
    if let (Some(ts), Some(expiration)) = (update, state.expiration()) {
        events.push(ResourceEvent::ResourceUpdate { expiration }.to_event(ts));
    }
    for group in state.drain_groups() {
        let e = ResourceEvent::Drain {
            idset: group.ranks.clone(),
            nodelist: state.nodelist(&group.ranks),
            reason: group.reason.clone(),
            // Each group's targets are drained by no other group, so Keep
            // never skips one, and a fresh drain takes the event's time.
            overwrite: Overwrite::Keep,
        };
        events.push(e.to_event(group.timestamp));
    }
    // Stable: groups with equal times keep their order.
    events.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
    events
}

/// Timestamps of the last `resource-define` and `resource-update` in `events`,
/// as [`checkpoint`] takes them.
pub fn last_definition_times<'a>(
    events: impl IntoIterator<Item = &'a Event>,
) -> (Option<f64>, Option<f64>) {
    let mut define = None;
    let mut update = None;
    for e in events {
        match e.name.as_str() {
            "resource-define" => define = Some(e.timestamp),
            "resource-update" => update = Some(e.timestamp),
            _ => {}
        }
    }
    (define, update)
}

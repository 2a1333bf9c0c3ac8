//! RFC 28 acquire responses and `flux resource status` groups, the pure part.
//!
//! A target is up for scheduling when it is online, not drained, not torpid
//! and not excluded (flux-core `acquire.c`: "down encompasses both crashed
//! and drained execution targets").

use serde_json::{Map, Value};

use super::state::ResourceState;
use crate::idset::IdSet;

/// A change in schedulable targets: the `{up, down}` acquire response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquireDelta {
    /// Targets that became available.
    pub up: IdSet,
    /// Targets that became unavailable.
    pub down: IdSet,
}

impl AcquireDelta {
    /// The transition from `before` to `after` (both full up-sets).
    pub fn between(before: &IdSet, after: &IdSet) -> AcquireDelta {
        AcquireDelta {
            up: after.difference(before),
            down: before.difference(after),
        }
    }

    /// Nothing changed: no response is sent.
    pub fn is_empty(&self) -> bool {
        self.up.is_empty() && self.down.is_empty()
    }

    /// The response payload; only the keys that changed are present.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        if !self.up.is_empty() {
            m.insert("up".into(), Value::from(self.up.to_string()));
        }
        if !self.down.is_empty() {
            m.insert("down".into(), Value::from(self.down.to_string()));
        }
        m
    }
}

/// The first acquire response: the inventory R (less excluded targets,
/// which the caller removes) and the targets initially up.
pub fn acquire_initial(resources: Value, up: &IdSet) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("resources".into(), resources);
    m.insert("up".into(), Value::from(up.to_string()));
    m
}

/// Targets grouped as `flux resource status` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusGroups {
    /// Usable: not excluded, not drained (up or not).
    pub avail: IdSet,
    /// Excluded by configuration.
    pub exclude: IdSet,
    /// Drained and still running work.
    pub draining: IdSet,
    /// Drained and idle.
    pub drained: IdSet,
    /// Online but silent.
    pub torpid: IdSet,
    /// Not online (excluded targets left out).
    pub offline: IdSet,
    /// Running work (from the scheduler).
    pub allocated: IdSet,
    /// Online targets: the UP column.
    pub up: IdSet,
}

impl ResourceState {
    /// Targets the scheduler may use now.
    pub fn schedulable(&self, exclude: &IdSet) -> IdSet {
        let mut up = self.ranks().intersection(self.online());
        up.subtract(&self.drained());
        up.subtract(self.torpid());
        up.subtract(exclude);
        up
    }

    /// The `flux resource status` grouping, given the excluded targets and
    /// the scheduler's allocated targets.
    pub fn status(&self, exclude: &IdSet, allocated: &IdSet) -> StatusGroups {
        let all = self.ranks().difference(exclude);
        let drained = self.drained().intersection(&all);
        StatusGroups {
            avail: all.difference(&drained),
            exclude: exclude.intersection(self.ranks()),
            draining: drained.intersection(allocated),
            drained: drained.difference(allocated),
            torpid: self.torpid().intersection(&all),
            offline: all.difference(self.online()),
            allocated: allocated.intersection(&all),
            up: self.online().intersection(self.ranks()),
        }
    }
}

//! Resource availability folded from RFC 44 events, and its replay.
//!
//! Drain semantics are flux-core's (`modules/resource/drain.c`,
//! `update_draininfo_rank`): with overwrite 0 a target drained with a reason
//! is skipped; otherwise the reason is replaced, and the timestamp changes
//! only when the target was not drained before or overwrite is 2. Undrain
//! forgets reason and timestamp.
//!
//! Drained targets are kept as a few groups of ranks sharing one timestamp
//! and reason (as flux-core's drainset reports them), so ten thousand ranks
//! drained by one command cost one entry.

use super::event::{Overwrite, ResourceEvent, ResourceEventError};
use crate::eventlog::Event;
use crate::hostlist::Hostlist;
use crate::idset::IdSet;

/// Ranks drained together: same timestamp, same reason.
#[derive(Debug, Clone, PartialEq)]
pub struct DrainGroup {
    /// The ranks.
    pub ranks: IdSet,
    /// When they were drained.
    pub timestamp: f64,
    /// Why, if a reason was given.
    pub reason: Option<String>,
}

/// Why a resource eventlog does not replay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource eventlog line {line}: {source}")]
pub struct ResourceReplayError {
    /// 1-based line of the bad event.
    pub line: usize,
    /// What is wrong with it.
    #[source]
    pub source: ResourceEventError,
}

/// Node-level resource state: targets, online, torpid, drained.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceState {
    ranks: IdSet,
    hosts: Hostlist,
    online: IdSet,
    torpid: IdSet,
    drained: Vec<DrainGroup>,
    method: Option<String>,
    expiration: Option<f64>,
    truncated: bool,
}

impl ResourceState {
    /// An empty state: no targets known yet.
    pub fn new() -> ResourceState {
        ResourceState::default()
    }

    /// A state for an instance whose rank `i` runs on `hosts.nth(i)`.
    /// Drain events replayed into it are remapped by hostname.
    pub fn with_hosts(hosts: Hostlist) -> ResourceState {
        let n = hosts.len() as u32;
        ResourceState {
            ranks: IdSet::from_range(0, n.saturating_sub(1)),
            hosts: if n == 0 { Hostlist::new() } else { hosts },
            ..ResourceState::default()
        }
    }

    /// All valid targets.
    pub fn ranks(&self) -> &IdSet {
        &self.ranks
    }
    /// Rank-to-hostname map.
    pub fn hosts(&self) -> &Hostlist {
        &self.hosts
    }
    /// Online targets.
    pub fn online(&self) -> &IdSet {
        &self.online
    }
    /// Targets online but not heard from lately.
    pub fn torpid(&self) -> &IdSet {
        &self.torpid
    }
    /// Drained targets grouped by (timestamp, reason), oldest first.
    pub fn drain_groups(&self) -> &[DrainGroup] {
        &self.drained
    }
    /// How R was defined, from the last `resource-define`.
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }
    /// R expiration from the last `resource-update`.
    pub fn expiration(&self) -> Option<f64> {
        self.expiration
    }
    /// A `truncate` was seen: older journal entries are missing.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// Every drained rank.
    pub fn drained(&self) -> IdSet {
        // One sort over every group's ranges: adding group after group would
        // cost a pass over the whole set per group.
        IdSet::from_ranges(
            self.drained
                .iter()
                .flat_map(|g| g.ranks.ranges().iter().copied()),
        )
    }

    /// The drain record of one rank.
    pub fn drain_info(&self, rank: u32) -> Option<&DrainGroup> {
        self.drained.iter().find(|g| g.ranks.contains(rank))
    }

    /// Hostnames of `ranks` in rank order; ranks past the map are left out.
    pub fn nodelist(&self, ranks: &IdSet) -> Hostlist {
        let known = ranks.intersection(&IdSet::from_range(
            0,
            (self.hosts.len() as u32).saturating_sub(1),
        ));
        if self.hosts.is_empty() {
            return Hostlist::new();
        }
        self.hosts.select(&known).unwrap_or_default()
    }

    /// Decode and apply one eventlog entry.
    pub fn apply(&mut self, event: &Event) -> Result<(), ResourceEventError> {
        let typed = ResourceEvent::from_event(event)?;
        self.apply_typed(event.timestamp, &typed);
        Ok(())
    }

    /// Apply a typed event that happened at `timestamp`.
    pub fn apply_typed(&mut self, timestamp: f64, event: &ResourceEvent) {
        match event {
            ResourceEvent::Restart {
                ranks,
                online,
                nodelist,
            } => {
                self.ranks = ranks.clone();
                self.hosts = nodelist.clone();
                self.online = online.clone();
                self.torpid = IdSet::new();
            }
            ResourceEvent::ResourceDefine { method } => self.method = Some(method.clone()),
            ResourceEvent::ResourceUpdate { expiration } => self.expiration = Some(*expiration),
            ResourceEvent::Drain {
                idset,
                nodelist,
                reason,
                overwrite,
            } => {
                let targets = self.remap(idset, nodelist);
                self.drain(&targets, timestamp, reason.clone(), *overwrite);
            }
            ResourceEvent::Undrain {
                idset, nodelist, ..
            } => {
                let targets = self.remap(idset, nodelist);
                self.undrain(&targets);
            }
            ResourceEvent::Online { idset } => self.online.add(idset),
            ResourceEvent::Offline { idset } => {
                self.online.subtract(idset);
                // A target that is gone is no longer merely slow.
                self.torpid.subtract(idset);
            }
            ResourceEvent::Torpid { idset } => self.torpid.add(idset),
            ResourceEvent::Lively { idset } => self.torpid.subtract(idset),
            ResourceEvent::Truncate => self.truncated = true,
            ResourceEvent::Other { .. } => {}
        }
    }

    /// Map an event's ranks onto the current instance, as flux-core's
    /// `decode_targets`: a rank whose logged host differs from the host it
    /// has now moves to the first rank of the logged host, or is dropped when
    /// that host is gone; ranks past the instance size are dropped. Without a
    /// host map the ranks are taken as they are.
    fn remap(&self, idset: &IdSet, nodelist: &Hostlist) -> IdSet {
        if self.hosts.is_empty() {
            return if self.ranks.is_empty() {
                idset.clone()
            } else {
                idset.intersection(&self.ranks)
            };
        }
        if self.nodelist(idset) == *nodelist {
            return idset.intersection(&self.ranks);
        }
        // Walk the logged hosts and the current hosts of the same ranks side
        // by side (`nth` on each would walk the runs once per rank), and
        // collect the new ranks, which may come in any order, to sort once.
        let last = (self.hosts.len() as u32).saturating_sub(1);
        let current = self
            .hosts
            .select(&idset.intersection(&IdSet::from_range(0, last)))
            .unwrap_or_default();
        let mut current = current.iter();
        let mut logged = nodelist.iter();
        let mut first_rank = crate::hostlist::FirstIndex::new(&self.hosts);
        let mut out = Vec::new();
        for rank in idset.iter() {
            let now = if rank <= last { current.next() } else { None };
            let mut rank = rank;
            if let Some(host) = logged.next()
                && now.as_deref() != Some(host.as_str())
            {
                match first_rank.of(&host) {
                    Some(r) => rank = r as u32,
                    None => continue,
                }
            }
            out.push(rank);
        }
        IdSet::from_ids(out).intersection(&self.ranks)
    }

    fn take(&mut self, ranks: &IdSet) -> Vec<DrainGroup> {
        let mut taken = Vec::new();
        for g in &mut self.drained {
            let part = g.ranks.intersection(ranks);
            if !part.is_empty() {
                g.ranks.subtract(&part);
                taken.push(DrainGroup {
                    ranks: part,
                    timestamp: g.timestamp,
                    reason: g.reason.clone(),
                });
            }
        }
        self.drained.retain(|g| !g.ranks.is_empty());
        taken
    }

    fn put(&mut self, group: DrainGroup) {
        if group.ranks.is_empty() {
            return;
        }
        match self
            .drained
            .iter_mut()
            .find(|g| g.timestamp == group.timestamp && g.reason == group.reason)
        {
            Some(g) => g.ranks.add(&group.ranks),
            None => self.drained.push(group),
        }
    }

    fn drain(&mut self, targets: &IdSet, ts: f64, reason: Option<String>, ow: Overwrite) {
        let mut targets = targets.clone();
        if ow == Overwrite::Keep {
            let with_reason: Vec<IdSet> = self
                .drained
                .iter()
                .filter(|g| g.reason.is_some())
                .map(|g| g.ranks.clone())
                .collect();
            for r in &with_reason {
                targets.subtract(r);
            }
        }
        let previous = self.take(&targets);
        let mut fresh = targets.clone();
        for g in previous {
            fresh.subtract(&g.ranks);
            let timestamp = if ow == Overwrite::ReasonAndTimestamp {
                ts
            } else {
                g.timestamp
            };
            self.put(DrainGroup {
                ranks: g.ranks,
                timestamp,
                reason: reason.clone(),
            });
        }
        self.put(DrainGroup {
            ranks: fresh,
            timestamp: ts,
            reason,
        });
    }

    fn undrain(&mut self, targets: &IdSet) {
        self.take(targets);
    }
}

/// Replay a resource eventlog (persistent log or journal) into `state`.
///
/// A journal starts with `restart`, which supplies the rank-to-host map; for
/// the persistent log, start from [`ResourceState::with_hosts`] with the
/// current map so that drained hosts follow their hostnames.
pub fn replay_into<'a>(
    state: &mut ResourceState,
    events: impl IntoIterator<Item = &'a Event>,
) -> Result<(), ResourceReplayError> {
    for (i, e) in events.into_iter().enumerate() {
        state.apply(e).map_err(|source| ResourceReplayError {
            line: i + 1,
            source,
        })?;
    }
    Ok(())
}

/// Replay a resource eventlog from an empty state.
pub fn replay<'a>(
    events: impl IntoIterator<Item = &'a Event>,
) -> Result<ResourceState, ResourceReplayError> {
    let mut state = ResourceState::new();
    replay_into(&mut state, events)?;
    Ok(state)
}

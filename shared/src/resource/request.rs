//! Drain and undrain requests checked against the current state, as
//! `flux resource drain|undrain` report them (flux-core `drain.c`).

use super::event::{Overwrite, ResourceEvent};
use super::state::ResourceState;
use crate::hostlist::Hostlist;
use crate::idset::IdSet;

/// Why a drain or undrain request is refused. Messages are flux-core's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainError {
    /// The targets are neither an idset nor a hostlist of known hosts.
    #[error("invalid targets: {0}")]
    InvalidTargets(String),
    /// The targets name no rank.
    #[error("idset is empty")]
    Empty,
    /// A rank is past the last target.
    #[error("idset is out of range")]
    OutOfRange,
    /// Targets already drained (without a mode allowing it) or excluded.
    #[error("rank{plural} {ranks} {what}", plural = if ranks.count() > 1 { "s" } else { "" })]
    AlreadyDrained {
        /// The offending ranks.
        ranks: IdSet,
        /// "already drained", "excluded" or both.
        what: String,
    },
    /// Undrain of targets that are not drained.
    #[error("{nodelist} (rank{plural} {ranks}) not drained", plural = if ranks.count() > 1 { "s" } else { "" })]
    NotDrained {
        /// Their hostnames.
        nodelist: String,
        /// The ranks.
        ranks: IdSet,
    },
}

/// How `flux resource drain` treats targets that are already drained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum DrainMode {
    /// Refuse if any target is drained (default).
    #[default]
    Fail,
    /// `--update`: set the reason only where none is set.
    Update,
    /// `--force`: replace the reason, keep the timestamp.
    Overwrite,
    /// `--force --force`: replace reason and timestamp.
    ForceOverwrite,
}

impl ResourceState {
    /// Resolve drain/undrain targets: an RFC 22 idset, or else an RFC 29
    /// hostlist whose every host maps to all its ranks.
    pub fn resolve_targets(&self, targets: &str) -> Result<IdSet, DrainError> {
        let ids = match IdSet::parse(targets) {
            Ok(ids) => ids,
            Err(_) => {
                let hl = Hostlist::parse(targets)
                    .map_err(|_| DrainError::InvalidTargets("Hostlist cannot be decoded".into()))?;
                let wanted: std::collections::HashSet<String> = hl.iter().collect();
                let mut ids = IdSet::new();
                let mut found = std::collections::HashSet::new();
                for (rank, h) in self.hosts().iter().enumerate() {
                    if wanted.contains(&h) {
                        ids.insert(rank as u32);
                        found.insert(h);
                    }
                }
                let mut missing = Hostlist::new();
                for host in hl.iter().filter(|h| !found.contains(h)) {
                    // host came from a parsed hostlist, so it is valid
                    let _ = missing.push(&host);
                }
                if !missing.is_empty() {
                    return Err(DrainError::InvalidTargets(format!(
                        "invalid hosts: {}",
                        missing.encode()
                    )));
                }
                ids
            }
        };
        if ids.is_empty() {
            return Err(DrainError::Empty);
        }
        if !ids.is_subset(self.ranks()) {
            return Err(DrainError::OutOfRange);
        }
        Ok(ids)
    }

    /// Check a drain request and build the event to post (apply it with the
    /// request's timestamp).
    pub fn plan_drain(
        &self,
        targets: &str,
        reason: Option<&str>,
        mode: DrainMode,
        exclude: &IdSet,
    ) -> Result<ResourceEvent, DrainError> {
        let ids = self.resolve_targets(targets)?;
        if mode == DrainMode::Fail {
            let drained_with_reason: IdSet = self
                .drain_groups()
                .iter()
                .filter(|g| g.reason.is_some())
                .fold(IdSet::new(), |acc, g| acc.union(&g.ranks));
            let drained = ids.intersection(&drained_with_reason);
            let excluded = ids.intersection(exclude);
            if !drained.is_empty() || !excluded.is_empty() {
                let what = match (drained.is_empty(), excluded.is_empty()) {
                    (false, false) => "already drained or excluded",
                    (false, true) => "already drained",
                    _ => "excluded",
                };
                return Err(DrainError::AlreadyDrained {
                    ranks: drained.union(&excluded),
                    what: what.to_string(),
                });
            }
        }
        let overwrite = match mode {
            DrainMode::Fail | DrainMode::Update => Overwrite::Keep,
            DrainMode::Overwrite => Overwrite::Reason,
            DrainMode::ForceOverwrite => Overwrite::ReasonAndTimestamp,
        };
        Ok(ResourceEvent::Drain {
            nodelist: self.nodelist(&ids),
            idset: ids,
            reason: reason.map(str::to_string),
            overwrite,
        })
    }

    /// Check an undrain request and build the event to post; `None` when
    /// `force` left nothing to undrain.
    pub fn plan_undrain(
        &self,
        targets: &str,
        reason: Option<&str>,
        force: bool,
    ) -> Result<Option<ResourceEvent>, DrainError> {
        let mut ids = self.resolve_targets(targets)?;
        let not_drained = ids.difference(&self.drained());
        if !not_drained.is_empty() {
            if !force {
                return Err(DrainError::NotDrained {
                    nodelist: self.nodelist(&not_drained).encode(),
                    ranks: not_drained,
                });
            }
            ids.subtract(&not_drained);
        }
        if ids.is_empty() {
            return Ok(None);
        }
        Ok(Some(ResourceEvent::Undrain {
            nodelist: self.nodelist(&ids),
            idset: ids,
            reason: reason.map(str::to_string),
        }))
    }
}

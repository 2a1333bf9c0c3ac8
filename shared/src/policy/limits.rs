//! Limits per user and per bank, as flux-accounting's: `max_active_jobs` is
//! a hard limit (a submit past it is refused), `max_running_jobs` and
//! `max_nodes` are soft (a job past them waits, held, until the user's or
//! the bank's running jobs end).
//!
//! "Running" counts a job from the moment it is handed to the scheduler
//! until it ends, so two jobs handed over at once cannot both start past a
//! limit. A job's nodes are what it asked for (at least one).

use serde::{Deserialize, Serialize};

/// `[limits.users.NAME]`, `[limits.users.default]`, `[limits.banks.NAME]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AssocLimits {
    /// Most jobs handed to the scheduler or running at once.
    pub max_running_jobs: Option<u64>,
    /// Most active (not yet inactive) jobs; a submit past it is refused.
    pub max_active_jobs: Option<u64>,
    /// Most nodes of jobs handed to the scheduler or running at once.
    pub max_nodes: Option<u64>,
}

impl AssocLimits {
    /// Is any limit set?
    pub fn is_set(&self) -> bool {
        self.max_running_jobs.is_some()
            || self.max_active_jobs.is_some()
            || self.max_nodes.is_some()
    }
}

/// What a user or bank holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// Jobs handed to the scheduler or running.
    pub running: u64,
    /// Their nodes.
    pub nodes: u64,
    /// Active jobs.
    pub active: u64,
}

/// The soft limit that holds a job; its name is what `jobs` INFO shows
/// (flux-accounting's dependency names where it has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Held {
    /// The user's `max_running_jobs`.
    UserRunningJobs,
    /// The user's `max_nodes`.
    UserNodes,
    /// The bank's `max_running_jobs`.
    BankRunningJobs,
    /// The bank's `max_nodes`.
    BankNodes,
}

impl Held {
    /// The limit's name.
    pub fn name(self) -> &'static str {
        match self {
            Held::UserRunningJobs => "max-running-jobs-user-limit",
            Held::UserNodes => "max-nodes-user-limit",
            Held::BankRunningJobs => "max-running-jobs-bank-limit",
            Held::BankNodes => "max-nodes-bank-limit",
        }
    }

    /// Is it the bank's limit (else the user's)?
    pub fn is_bank(self) -> bool {
        matches!(self, Held::BankRunningJobs | Held::BankNodes)
    }
}

/// Why a job is refused at submit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The user holds `max_active_jobs` already (flux-accounting's words).
    #[error("user has max active jobs")]
    UserActive,
    /// The bank holds `max_active_jobs` already.
    #[error("bank {0} has max active jobs")]
    BankActive(String),
    /// The job alone asks for more nodes than `max_nodes`: it could never start.
    #[error("job requests {nodes} nodes, over the {who} max_nodes limit of {limit}")]
    Nodes {
        /// "user" or "bank NAME".
        who: String,
        /// Nodes asked for.
        nodes: u64,
        /// The limit.
        limit: u64,
    },
}

/// Refuse a new job of `nodes` nodes when the user (`user`, holding
/// `user_load`) or its bank (`bank` named `bank_name`) is at its
/// `max_active_jobs`, or when the job could never fit `max_nodes`.
pub fn admit_submit(
    user: &AssocLimits,
    user_load: &Load,
    bank: Option<(&str, &AssocLimits, &Load)>,
    nodes: u64,
) -> Result<(), LimitError> {
    if user.max_active_jobs.is_some_and(|m| user_load.active >= m) {
        return Err(LimitError::UserActive);
    }
    if let Some(limit) = user.max_nodes.filter(|m| nodes > *m) {
        return Err(LimitError::Nodes {
            who: "user".into(),
            nodes,
            limit,
        });
    }
    if let Some((name, limits, load)) = bank {
        if limits.max_active_jobs.is_some_and(|m| load.active >= m) {
            return Err(LimitError::BankActive(name.to_string()));
        }
        if let Some(limit) = limits.max_nodes.filter(|m| nodes > *m) {
            return Err(LimitError::Nodes {
                who: format!("bank {name}"),
                nodes,
                limit,
            });
        }
    }
    Ok(())
}

/// The limit that would hold one more running job of `nodes` nodes, if any.
pub fn hold(
    user: &AssocLimits,
    user_load: &Load,
    bank: Option<(&AssocLimits, &Load)>,
    nodes: u64,
) -> Option<Held> {
    let over = |limits: &AssocLimits, load: &Load| {
        if limits.max_running_jobs.is_some_and(|m| load.running >= m) {
            Some(false)
        } else if limits
            .max_nodes
            .is_some_and(|m| load.nodes.saturating_add(nodes) > m)
        {
            Some(true)
        } else {
            None
        }
    };
    if let Some(nodes_limit) = over(user, user_load) {
        return Some(if nodes_limit {
            Held::UserNodes
        } else {
            Held::UserRunningJobs
        });
    }
    let (limits, load) = bank?;
    over(limits, load).map(|nodes_limit| {
        if nodes_limit {
            Held::BankNodes
        } else {
            Held::BankRunningJobs
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE_RUNNING: AssocLimits = AssocLimits {
        max_running_jobs: Some(1),
        max_active_jobs: Some(3),
        max_nodes: Some(2),
    };

    #[test]
    fn soft_limits_hold_and_name_themselves() {
        let idle = Load::default();
        assert_eq!(hold(&ONE_RUNNING, &idle, None, 1), None);
        let one = Load {
            running: 1,
            nodes: 1,
            active: 1,
        };
        assert_eq!(
            hold(&ONE_RUNNING, &one, None, 1),
            Some(Held::UserRunningJobs)
        );
        let wide = AssocLimits {
            max_running_jobs: None,
            ..ONE_RUNNING
        };
        assert_eq!(hold(&wide, &one, None, 2), Some(Held::UserNodes));
        assert_eq!(hold(&wide, &one, None, 1), None);
        assert_eq!(
            hold(&AssocLimits::default(), &one, Some((&ONE_RUNNING, &one)), 1),
            Some(Held::BankRunningJobs)
        );
        assert_eq!(Held::UserRunningJobs.name(), "max-running-jobs-user-limit");
        assert!(Held::BankNodes.is_bank());
    }

    #[test]
    fn hard_limits_refuse_at_submit() {
        let three = Load {
            active: 3,
            ..Load::default()
        };
        assert_eq!(
            admit_submit(&ONE_RUNNING, &three, None, 1)
                .unwrap_err()
                .to_string(),
            "user has max active jobs"
        );
        assert_eq!(
            admit_submit(&ONE_RUNNING, &Load::default(), None, 3)
                .unwrap_err()
                .to_string(),
            "job requests 3 nodes, over the user max_nodes limit of 2"
        );
        assert_eq!(
            admit_submit(
                &AssocLimits::default(),
                &Load::default(),
                Some(("physics", &ONE_RUNNING, &three)),
                1
            )
            .unwrap_err()
            .to_string(),
            "bank physics has max active jobs"
        );
        assert!(admit_submit(&ONE_RUNNING, &Load::default(), None, 2).is_ok());
    }
}

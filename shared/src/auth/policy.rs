//! Roles and the rule table: may this caller do this action on a job owned by
//! that uid?
//!
//! As flux-core: the instance owner may do everything; a guest may submit
//! and act on their own jobs (cancel, raise exceptions, signal, memo, change
//! urgency up to the default 16, read jobspec, R, eventlogs and output), may
//! list every job in summary and read the queue and resource status, and
//! nothing else. The node role (an exec service's credential) may only join.
//! docs/SECURITY.md holds the same table per RPC.

use std::fmt;

use super::token::{Claims, TokenRole};

/// The highest urgency a guest may give: flux-core's default urgency.
pub const GUEST_MAX_URGENCY: u8 = 16;

/// What a verified caller is to this instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The instance owner (uid of the instance), or anyone when it runs open.
    Owner,
    /// Any other user.
    Guest,
    /// An exec service.
    Node,
}

/// A verified identity, as the gRPC edge puts it in request extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// User name (from the token or the certificate).
    pub user: String,
    /// The uid jobs are recorded under.
    pub uid: u32,
    /// What the caller may do.
    pub role: Role,
}

impl Caller {
    /// The instance owner: every caller of an instance that runs open.
    pub fn owner(uid: u32) -> Caller {
        Caller {
            user: "owner".into(),
            uid,
            role: Role::Owner,
        }
    }

    /// The caller a user's `uid` and `name` make in an instance owned by `owner_uid`.
    pub fn user(user: &str, uid: u32, owner_uid: u32) -> Caller {
        Caller {
            user: user.to_string(),
            uid,
            role: if uid == owner_uid {
                Role::Owner
            } else {
                Role::Guest
            },
        }
    }

    /// The caller a verified token makes in an instance owned by `owner_uid`.
    pub fn from_claims(claims: &Claims, owner_uid: u32) -> Caller {
        match claims.role {
            TokenRole::Node => Caller {
                user: claims.user.clone(),
                uid: claims.uid,
                role: Role::Node,
            },
            TokenRole::User => Caller::user(&claims.user, claims.uid, owner_uid),
        }
    }

    /// True for the instance owner.
    pub fn is_owner(&self) -> bool {
        self.role == Role::Owner
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.role {
            Role::Node => write!(f, "the node credential"),
            _ => write!(f, "user {} (uid {})", self.user, self.uid),
        }
    }
}

/// Something a caller asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Submit a job with this urgency and these flags.
    Submit {
        /// 0-31.
        urgency: u8,
        /// FLUX_JOB_WAITABLE.
        waitable: bool,
        /// FLUX_JOB_NOVALIDATE.
        novalidate: bool,
    },
    /// Cancel a job.
    Cancel,
    /// Raise an exception on a job.
    RaiseException,
    /// Signal a job's tasks.
    Kill,
    /// Change a job's urgency to this.
    SetUrgency(u8),
    /// Set memo keys on a job.
    Memo,
    /// Read a job's jobspec, R, eventlogs or output.
    ReadJob,
    /// List jobs in summary.
    ListJobs,
    /// Wait for waitable jobs.
    Wait,
    /// Read whether the queue is started.
    QueueStatus,
    /// Stop or start the queue.
    QueueControl,
    /// Remove inactive jobs.
    Purge,
    /// Read resource status and lists.
    ResourceView,
    /// Read the resource journal or eventlog.
    ResourceJournal,
    /// Acquire resources as the scheduler (RFC 28).
    Acquire,
    /// Drain nodes.
    Drain,
    /// Undrain nodes.
    Undrain,
    /// Join the instance as an exec service.
    NodeJoin,
    /// Change a job's jobspec (its duration) after submission.
    UpdateJob,
    /// Change the resources: expiration, properties, reload.
    ResourceAdmin,
}

impl Action {
    /// What the action is, for messages: "cancel job", "drain nodes".
    fn describe(self) -> String {
        match self {
            Action::Submit { .. } => "submit jobs".into(),
            Action::Cancel => "cancel".into(),
            Action::RaiseException => "raise an exception on".into(),
            Action::Kill => "signal".into(),
            Action::SetUrgency(u) => format!("set urgency {u} on"),
            Action::Memo => "set memo keys on".into(),
            Action::ReadJob => "read the jobspec, R, eventlogs or output of".into(),
            Action::ListJobs => "list jobs".into(),
            Action::Wait => "wait for jobs".into(),
            Action::QueueStatus => "read the queue status".into(),
            Action::QueueControl => "stop or start the queue".into(),
            Action::Purge => "purge jobs".into(),
            Action::ResourceView => "read resource status".into(),
            Action::ResourceJournal => "read the resource journal or eventlog".into(),
            Action::Acquire => "acquire resources as the scheduler".into(),
            Action::Drain => "drain nodes".into(),
            Action::Undrain => "undrain nodes".into(),
            Action::NodeJoin => "join as a node".into(),
            Action::UpdateJob => "update jobs".into(),
            Action::ResourceAdmin => "change the resources".into(),
        }
    }

    /// True for actions on one job, whose owner decides.
    fn on_a_job(self) -> bool {
        matches!(
            self,
            Action::Cancel
                | Action::RaiseException
                | Action::Kill
                | Action::SetUrgency(_)
                | Action::Memo
                | Action::ReadJob
        )
    }
}

/// A refusal, with a message saying who may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub String);

/// May `caller` do `action`? `job_owner` is the uid owning the job the
/// action is on (ignored for actions that are not on one job).
pub fn check(caller: &Caller, action: Action, job_owner: Option<u32>) -> Result<(), Denied> {
    let deny = |why: &str| {
        let target = match (action.on_a_job(), job_owner) {
            (true, Some(o)) => format!(" a job of uid {o}"),
            (true, None) => " this job".into(),
            (false, _) => String::new(),
        };
        Err(Denied(format!(
            "{caller} may not {}{target}: {why}",
            action.describe()
        )))
    };
    match caller.role {
        Role::Node if action == Action::NodeJoin => Ok(()),
        Role::Node => {
            deny("the node credential is only for exec services to join; use a user token")
        }
        Role::Owner => Ok(()),
        Role::Guest => match action {
            Action::Submit { urgency, .. } if urgency > GUEST_MAX_URGENCY => deny(&format!(
                "only the instance owner may give an urgency above {GUEST_MAX_URGENCY}"
            )),
            Action::Submit { waitable: true, .. } => {
                deny("only the instance owner may submit waitable jobs")
            }
            Action::Submit {
                novalidate: true, ..
            } => deny("only the instance owner may skip validation"),
            Action::Submit { .. }
            | Action::ListJobs
            | Action::QueueStatus
            | Action::ResourceView => Ok(()),
            a if a.on_a_job() => {
                if job_owner != Some(caller.uid) {
                    return deny("only the job's owner or the instance owner may");
                }
                match a {
                    Action::SetUrgency(u) if u > GUEST_MAX_URGENCY => deny(&format!(
                        "only the instance owner may set an urgency above {GUEST_MAX_URGENCY}"
                    )),
                    _ => Ok(()),
                }
            }
            Action::NodeJoin => deny("only exec services holding the node credential may"),
            _ => deny("only the instance owner may"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: u32 = 500;

    fn owner() -> Caller {
        Caller::user("boss", OWNER, OWNER)
    }
    fn alice() -> Caller {
        Caller::user("alice", 1001, OWNER)
    }
    fn node() -> Caller {
        Caller::from_claims(&Claims::node(OWNER, 0), OWNER)
    }
    fn submit(urgency: u8) -> Action {
        Action::Submit {
            urgency,
            waitable: false,
            novalidate: false,
        }
    }

    const ON_A_JOB: [Action; 6] = [
        Action::Cancel,
        Action::RaiseException,
        Action::Kill,
        Action::SetUrgency(10),
        Action::Memo,
        Action::ReadJob,
    ];
    const OWNER_ONLY: [Action; 10] = [
        Action::UpdateJob,
        Action::ResourceAdmin,
        Action::Wait,
        Action::QueueControl,
        Action::Purge,
        Action::ResourceJournal,
        Action::Acquire,
        Action::Drain,
        Action::Undrain,
        Action::NodeJoin,
    ];

    #[test]
    fn roles_come_from_the_uid_and_the_token_role() {
        assert_eq!(owner().role, Role::Owner);
        assert_eq!(alice().role, Role::Guest);
        assert_eq!(node().role, Role::Node);
        assert_eq!(Caller::owner(7).role, Role::Owner);
        let c = Claims::user("alice", 1001, 0, None);
        assert_eq!(Caller::from_claims(&c, OWNER), alice());
    }

    #[test]
    fn the_owner_may_do_everything() {
        for a in ON_A_JOB.iter().chain(&OWNER_ONLY) {
            assert_eq!(check(&owner(), *a, Some(1001)), Ok(()), "{a:?}");
        }
        assert_eq!(check(&owner(), Action::SetUrgency(31), Some(1001)), Ok(()));
        let all = Action::Submit {
            urgency: 31,
            waitable: true,
            novalidate: true,
        };
        assert_eq!(check(&owner(), all, None), Ok(()));
    }

    #[test]
    fn a_guest_acts_on_own_jobs_only() {
        for a in ON_A_JOB {
            assert_eq!(check(&alice(), a, Some(1001)), Ok(()), "{a:?}");
            let e = check(&alice(), a, Some(OWNER)).unwrap_err().0;
            assert!(e.contains("user alice (uid 1001) may not"), "{e}");
            assert!(e.contains(&format!("a job of uid {OWNER}")), "{e}");
            assert!(
                e.contains("only the job's owner or the instance owner"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_guest_urgency_stops_at_16() {
        assert_eq!(check(&alice(), Action::SetUrgency(16), Some(1001)), Ok(()));
        let e = check(&alice(), Action::SetUrgency(17), Some(1001)).unwrap_err();
        assert!(e.0.contains("above 16"), "{e}");
        assert_eq!(check(&alice(), submit(16), None), Ok(()));
        assert!(check(&alice(), submit(17), None).is_err());
        assert!(check(&alice(), submit(0), None).is_ok());
    }

    #[test]
    fn guests_may_not_submit_waitable_or_unvalidated_jobs() {
        let w = Action::Submit {
            urgency: 16,
            waitable: true,
            novalidate: false,
        };
        assert!(check(&alice(), w, None).unwrap_err().0.contains("waitable"));
        let n = Action::Submit {
            urgency: 16,
            waitable: false,
            novalidate: true,
        };
        assert!(check(&alice(), n, None).is_err());
    }

    #[test]
    fn instance_administration_is_the_owners() {
        for a in OWNER_ONLY {
            let e = check(&alice(), a, None).unwrap_err().0;
            assert!(e.starts_with("user alice (uid 1001) may not"), "{e}");
        }
        for a in [Action::ListJobs, Action::QueueStatus, Action::ResourceView] {
            assert_eq!(check(&alice(), a, None), Ok(()), "{a:?}");
        }
    }

    #[test]
    fn the_node_credential_only_joins() {
        assert_eq!(check(&node(), Action::NodeJoin, None), Ok(()));
        for a in ON_A_JOB
            .iter()
            .chain(&[submit(16), Action::ListJobs, Action::Drain])
        {
            let e = check(&node(), *a, Some(OWNER)).unwrap_err().0;
            assert!(e.contains("only for exec services"), "{e}");
        }
    }
}

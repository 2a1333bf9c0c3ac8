//! How long a node's silence may last, and what it makes the node.
//!
//! An exec service heartbeats its job manager, which acknowledges each
//! beat. Seen from the job manager, a node silent past `torpid` is not
//! scheduled; past `lost`, its jobs get a node-failure exception and their
//! resources are released on its behalf. Seen from the exec service, once
//! no beat has been acknowledged for `fence` it kills every job it runs:
//! it is *fenced*, and a node cut off on the network cannot host a job
//! whose cores were given to another.
//!
//! The two clocks agree without being shared: the exec service counts its
//! fence from the moment it *sent* the last beat that was acknowledged,
//! which is no later than the moment the job manager heard that beat, from
//! which the job manager counts. So a node silent (to the job manager) for
//! `fence + FENCE_MARGIN` has killed its jobs; the margin covers the kill.

/// Seconds the job manager adds to a node's fence before it takes the
/// node's jobs for ended: the exec service's own SIGKILL and the reaping
/// of the tasks.
pub const FENCE_MARGIN: f64 = 2.0;

/// The timeouts that judge a node's silence, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Liveness {
    /// Silence before a node is torpid (not scheduled).
    pub torpid: f64,
    /// Silence before a node is lost (its jobs fail and release).
    pub lost: f64,
    /// Silence after which the exec service kills its jobs on its own;
    /// 0: it never does.
    pub fence: f64,
}

/// The interval before a node's next heartbeat: `base` while it runs jobs
/// (or relays others' joins), else twice the last one, up to `idle`. Idle
/// nodes of a large machine thus cost their parent a fifth of the messages
/// while their torpid and lost timeouts keep their meaning.
pub fn next_heartbeat(last: f64, base: f64, idle: f64, busy: bool) -> f64 {
    if busy || idle <= base {
        base
    } else {
        (last * 2.0).clamp(base, idle)
    }
}

/// What a node's silence makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Silence {
    /// Heard recently enough.
    Lively,
    /// Not scheduled, its jobs run on.
    Torpid,
    /// Its jobs have failed, and no process of theirs can still run there.
    Lost,
}

impl Liveness {
    /// The silence after which a node is lost: its `lost` timeout, but
    /// never before its exec service has fenced itself (when it does).
    pub fn lost_after(&self) -> f64 {
        if self.fence > 0.0 {
            self.lost.max(self.fence + FENCE_MARGIN)
        } else {
            self.lost
        }
    }

    /// The longest a node with nothing running may wait between heartbeats
    /// (never shorter than `heartbeat`): a third of the torpid and fence
    /// timeouts, so that a node heard at that pace is never judged silent,
    /// even when a relay above it reports it one of its own intervals late.
    pub fn idle_heartbeat(&self, heartbeat: f64) -> f64 {
        let mut cap = self.torpid / 3.0;
        if self.fence > 0.0 {
            cap = cap.min(self.fence / 3.0);
        }
        if cap.is_finite() {
            cap.max(heartbeat)
        } else {
            heartbeat
        }
    }

    /// What `silent` seconds without a heartbeat make a node.
    pub fn judge(&self, silent: f64) -> Silence {
        if silent >= self.lost_after() {
            Silence::Lost
        } else if silent >= self.torpid {
            Silence::Torpid
        } else {
            Silence::Lively
        }
    }

    /// May the resources a job holds on a node silent for `silent` seconds
    /// be given to another job, without word from the node that the job's
    /// processes are gone? Only once the node has fenced itself.
    pub fn may_reuse(&self, silent: f64) -> bool {
        self.fence > 0.0 && silent >= self.fence + FENCE_MARGIN
    }
}

/// Should an exec service whose last acknowledged heartbeat was sent
/// `since` seconds ago kill its jobs, for a job manager's `fence` (0: never)?
pub fn fenced(fence: f64, since: f64) -> bool {
    fence > 0.0 && since >= fence
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITE: Liveness = Liveness {
        torpid: 10.0,
        lost: 60.0,
        fence: 30.0,
    };

    #[test]
    fn silence_grows_from_lively_to_torpid_to_lost() {
        assert_eq!(SITE.judge(0.0), Silence::Lively);
        assert_eq!(SITE.judge(9.9), Silence::Lively);
        assert_eq!(SITE.judge(10.0), Silence::Torpid);
        assert_eq!(SITE.judge(59.9), Silence::Torpid);
        assert_eq!(SITE.judge(60.0), Silence::Lost);
    }

    #[test]
    fn a_node_is_never_lost_before_it_has_fenced_itself() {
        let short = Liveness { lost: 20.0, ..SITE };
        assert_eq!(short.lost_after(), 30.0 + FENCE_MARGIN);
        assert_eq!(short.judge(25.0), Silence::Torpid);
        assert!(!short.may_reuse(25.0));
        assert_eq!(short.judge(32.0), Silence::Lost);
        assert!(short.may_reuse(32.0));
    }

    #[test]
    fn cores_of_an_unfenced_node_are_never_reused_on_silence_alone() {
        let unfenced = Liveness { fence: 0.0, ..SITE };
        assert_eq!(unfenced.judge(60.0), Silence::Lost);
        assert!(!unfenced.may_reuse(1e9));
        assert!(!SITE.may_reuse(31.9));
        assert!(SITE.may_reuse(32.0));
    }

    #[test]
    fn an_exec_service_fences_only_past_its_fence() {
        assert!(!fenced(0.0, 1e9), "0 never fences");
        assert!(!fenced(30.0, 29.9));
        assert!(fenced(30.0, 30.0));
    }

    #[test]
    fn idle_nodes_slow_their_heartbeat_to_a_third_of_the_timeouts() {
        let l = Liveness {
            torpid: 30.0,
            lost: 90.0,
            fence: 60.0,
        };
        assert_eq!(l.idle_heartbeat(2.0), 10.0);
        let tight = Liveness { fence: 12.0, ..l };
        assert_eq!(tight.idle_heartbeat(2.0), 4.0);
        // Never faster than asked.
        let short = Liveness { torpid: 3.0, ..l };
        assert_eq!(short.idle_heartbeat(2.0), 2.0);
        let beats: Vec<f64> =
            std::iter::successors(Some(2.0), |&t| Some(next_heartbeat(t, 2.0, 10.0, false)))
                .take(5)
                .collect();
        assert_eq!(beats, vec![2.0, 4.0, 8.0, 10.0, 10.0]);
        assert_eq!(next_heartbeat(10.0, 2.0, 10.0, true), 2.0);
        assert_eq!(next_heartbeat(2.0, 2.0, 0.0, false), 2.0);
    }
}

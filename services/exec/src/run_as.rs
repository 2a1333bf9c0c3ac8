//! Jobs run as their owner.
//!
//! An exec service running as root starts each task with its owner's uid,
//! gid and supplementary groups; jobs of root itself only when allowed
//! (`--allow-root-jobs`). An unprivileged exec service runs only the jobs of
//! its own uid, the instance owner's.
//!
//! Nothing the job's owner controls is looked at by a process that is still
//! root: not the job's environment (a loader variable such as `LD_PRELOAD`
//! would run the owner's code in it), not its command line, cwd, PATH or
//! output paths. The switch happens in this binary's `run-as` and `open-as`
//! modes (see [`crate::wrapper`]), spawned like this:
//!
//! ```text
//! service (root)                          wrapper: fluxgate-exec run-as|open-as
//! socketpair(ours, theirs)
//! spawn: argv = [exe, MODE], env = {},    close descriptors above 2
//!   stdin = theirs, own process group     channel = dup(stdin, CLOEXEC); stdin = /dev/null
//! write frame: identity (Option<RunAs>)   read identity; setgroups, setgid, setuid;
//!                                           check that the switch held
//! write frame: request (job data)         read request, now as the owner
//! ```
//!
//! A frame is a 4-byte big-endian length and that many bytes of JSON
//! ([`crate::handoff`]). The identity frame holds only numbers the service
//! chose, so the wrapper parses nothing the owner wrote while it is root.
//!
//! `run-as` (request: argv, whole environment, cwd, rlimits) then, as the
//! owner: lowers the job's rlimits, enters the cwd (falling back to /tmp with
//! flux's warning on the task's stderr), looks the command up in the task's
//! PATH and execs it with the task's environment (ENOEXEC: through
//! /bin/sh). It becomes the task: same pid and process group, CPU mask set
//! by the service at spawn. Its reply: end of file with no data when the
//! exec succeeded (the channel is close-on-exec), else one frame
//! [`crate::handoff::StartFailure`] with the words and exit code a shell
//! would give, which the service reports as a [`crate::task::SpawnError`].
//!
//! `open-as` (request: cwd, umask, output and input paths) enters the
//! cwd as the owner, opens each file with the owner's rights (created
//! 0666 & ~umask, so owned by the owner; symbolic links followed only as
//! far as the owner may follow them) and sends one reply frame
//! ([`crate::handoff::OpenReply`]) with the opened descriptors attached
//! (SCM_RIGHTS). No root process resolves a path the owner can change.
//!
//! A separate exec step rather than a hook in the service's child: hooks
//! need `unsafe`, and any hook makes the standard library fork instead of
//! posix_spawn. An unprivileged service whose job sets no rlimits starts
//! tasks directly (posix_spawn): there the task is the service's own user.

use std::ffi::CString;
use std::path::PathBuf;

use nix::unistd::{Gid, Uid, User};

/// The first word of the wrapper that starts a task as its owner.
pub const RUN_AS: &str = "run-as";
/// The first word of the wrapper that opens a job's files as its owner.
pub const OPEN_AS: &str = "open-as";

/// The identity a task is started with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunAs {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary group ids.
    pub groups: Vec<u32>,
}

/// Whose identity a job of `job_uid` runs with on a service running as
/// `service_uid`: `None` for the service's own, `Some(uid)` to switch, or why
/// it may not run here.
pub fn decide(
    job_uid: u32,
    service_uid: u32,
    allow_root: bool,
) -> Result<Option<u32>, IdentityError> {
    if service_uid != 0 {
        return if job_uid == service_uid {
            Ok(None)
        } else {
            Err(IdentityError::NotOwner {
                service: service_uid,
                job: job_uid,
            })
        };
    }
    match job_uid {
        0 if allow_root => Ok(None),
        0 => Err(IdentityError::RootRefused),
        uid => Ok(Some(uid)),
    }
}

/// The uid, primary group and supplementary groups of account `uid`.
pub fn lookup(uid: u32) -> Result<RunAs, IdentityError> {
    let user = User::from_uid(Uid::from_raw(uid))
        .map_err(|errno| IdentityError::Lookup { uid, errno })?
        .ok_or(IdentityError::NoAccount(uid))?;
    let name = CString::new(user.name.clone()).map_err(|_| IdentityError::NulInName(uid))?;
    let groups = nix::unistd::getgrouplist(&name, user.gid)
        .map_err(|errno| IdentityError::Groups {
            name: user.name.clone(),
            errno,
        })?
        .into_iter()
        .map(Gid::as_raw)
        .collect();
    Ok(RunAs {
        uid,
        gid: user.gid.as_raw(),
        groups,
    })
}

/// The `fluxgate-exec` binary that does the switch: this one, or the one
/// beside it (when this process is a test harness embedding the service).
pub fn binary() -> Result<PathBuf, IdentityError> {
    let exe = std::env::current_exe().map_err(|e| IdentityError::NoSelf(e.to_string()))?;
    if exe.file_name().is_some_and(|n| n == "fluxgate-exec") {
        return Ok(exe);
    }
    let candidates = exe
        .parent()
        .into_iter()
        .flat_map(|d| [d.join("fluxgate-exec"), d.join("..").join("fluxgate-exec")]);
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
    }
    Err(IdentityError::NoWrapper)
}

/// Become `who` for good: supplementary groups first (once the uid is
/// dropped they can no longer be set), then gid, then uid, and check that
/// the switch held and cannot be undone.
pub fn become_user(who: &RunAs) -> Result<(), IdentityError> {
    let fail = |step: &'static str, e: nix::Error| IdentityError::Switch {
        step,
        reason: e.desc(),
    };
    let groups: Vec<Gid> = who.groups.iter().copied().map(Gid::from_raw).collect();
    nix::unistd::setgroups(&groups).map_err(|e| fail("setgroups", e))?;
    nix::unistd::setgid(Gid::from_raw(who.gid)).map_err(|e| fail("setgid", e))?;
    nix::unistd::setuid(Uid::from_raw(who.uid)).map_err(|e| fail("setuid", e))?;
    let ids = (
        nix::unistd::getuid().as_raw(),
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getgid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let regained = who.uid != 0 && nix::unistd::setuid(Uid::from_raw(0)).is_ok();
    if ids != (who.uid, who.uid, who.gid, who.gid) || regained {
        return Err(IdentityError::DidNotHold {
            uid: who.uid,
            gid: who.gid,
        });
    }
    Ok(())
}

/// Why a job's tasks cannot be started as their owner here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// An unprivileged service and another user's job.
    #[error(
        "this exec service runs as uid {service}, not root, so it runs only \
         the instance owner's jobs; this job is owned by uid {job} \
         (run the exec service as root to run jobs as their owners)"
    )]
    NotOwner { service: u32, job: u32 },
    /// A job of root, not allowed here.
    #[error(
        "jobs owned by root are refused on this node \
         (start the exec service with --allow-root-jobs to run them)"
    )]
    RootRefused,
    /// The account database could not be read.
    #[error("cannot look up uid {uid}: {errno}")]
    Lookup { uid: u32, errno: nix::Error },
    /// No account has the job's uid.
    #[error("uid {0} has no account on this node")]
    NoAccount(u32),
    /// The account's name cannot be passed to the group lookup.
    #[error("the name of uid {0} holds a NUL byte")]
    NulInName(u32),
    /// The account's groups could not be read.
    #[error("cannot read the groups of {name}: {errno}")]
    Groups { name: String, errno: nix::Error },
    /// This program's own path is unknown.
    #[error("cannot find this program to switch users: {0}")]
    NoSelf(String),
    /// No `fluxgate-exec` beside this program.
    #[error("cannot find the fluxgate-exec binary that switches users")]
    NoWrapper,
    /// A step of the switch failed.
    #[error("{step}: {reason}")]
    Switch {
        step: &'static str,
        reason: &'static str,
    },
    /// The switch seemed to work but did not hold, or could be undone.
    #[error("the switch to uid {uid} gid {gid} did not hold")]
    DidNotHold { uid: u32, gid: u32 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_switches_to_the_owner_and_refuses_root_unless_allowed() {
        assert_eq!(decide(1001, 0, false), Ok(Some(1001)));
        assert_eq!(decide(0, 0, true), Ok(None));
        let e = decide(0, 0, false).unwrap_err().to_string();
        assert!(e.contains("--allow-root-jobs"), "{e}");
    }

    #[test]
    fn an_unprivileged_service_runs_only_its_own_uid() {
        assert_eq!(decide(500, 500, false), Ok(None));
        let e = decide(501, 500, true).unwrap_err().to_string();
        assert!(e.contains("runs only the instance owner's jobs"), "{e}");
        assert!(decide(0, 500, true).is_err());
    }

    #[test]
    fn accounts_are_looked_up_with_their_groups() {
        let root = lookup(0).unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        assert_eq!(
            lookup(4_000_000_000),
            Err(IdentityError::NoAccount(4_000_000_000))
        );
    }
}

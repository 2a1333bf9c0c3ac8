//! A task put in its job's cgroup before it runs anything of the job:
//! its wrapper placed after it is spawned and before it is told whom to
//! become, or (v1, the service's own user) the task spawned straight into
//! the cgroup by a thread that joins it for the spawn.

use tokio::process::Child;

use super::JobCgroup;
use crate::spawn_error::SpawnError;
use crate::status::WaitStatus;

/// Run `spawn` (the direct spawn of one task) with its process born in
/// `cg`; a cgroup that cannot be joined is the task's start failure.
pub fn direct<T>(
    cg: &JobCgroup,
    what: &str,
    spawn: impl FnOnce() -> Result<T, SpawnError>,
) -> Result<T, SpawnError> {
    let mut spawned = None;
    let joined = cg.spawn_inside(|| {
        let r = spawn();
        let ok = r.is_ok();
        spawned = Some(r);
        if ok {
            Ok(())
        } else {
            Err(std::io::Error::other("the spawn failed"))
        }
    });
    match (spawned, joined) {
        (Some(r), _) => r,
        (None, Err(e)) => Err(SpawnError {
            what: what.to_string(),
            reason: format!("cannot put the task in the job's cgroup: {e}"),
            status: WaitStatus::exited(126),
        }),
        (None, Ok(())) => unreachable!("spawn_inside runs the spawn when it succeeds"),
    }
}

/// Place the just-spawned wrapper `child` in `cg`; on failure the wrapper
/// is killed and reaped, and the error says why (the task's start failure).
pub fn join(cg: &JobCgroup, child: &mut Child) -> Result<(), String> {
    let placed = match child.id().and_then(|p| i32::try_from(p).ok()) {
        Some(pid) => cg.place(pid).map_err(|e| e.to_string()),
        None => Err("it exited before its pid was known".to_string()),
    };
    placed.map_err(|e| {
        let _ = child.start_kill();
        // Reaped by a later wait on drop's behalf: tokio reaps orphaned
        // children in the background.
        format!("cannot put the task in the job's cgroup: {e}")
    })
}

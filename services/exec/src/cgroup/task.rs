//! A task's wrapper put in its job's cgroup: after it is spawned, before
//! it is told whom to become, so that nothing it runs starts outside.

use tokio::process::Child;

use super::JobCgroup;

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

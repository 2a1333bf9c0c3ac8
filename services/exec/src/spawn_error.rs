//! Why a task could not be started, in the words a shell would use: the
//! system's text for the error and the status a shell exits with for it.

use std::io;

use crate::status::WaitStatus;

/// A task that could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {reason}")]
pub struct SpawnError {
    /// The command or directory that failed.
    pub what: String,
    /// The system's words for the failure, e.g. "No such file or directory".
    pub reason: String,
    /// The status a shell would have exited with (127 not found, 126 not executable).
    pub status: WaitStatus,
}

/// The system's words for an error (strerror), as flux-core prints them.
pub(crate) fn reason(e: &io::Error) -> String {
    e.raw_os_error()
        .map(|n| nix::errno::Errno::from_raw(n).desc().to_string())
        .unwrap_or_else(|| e.to_string())
}

pub(crate) fn spawn_error(what: String, e: &io::Error) -> SpawnError {
    SpawnError {
        what,
        reason: reason(e),
        status: WaitStatus::exited(shell_code(e).into()),
    }
}

/// The code a POSIX shell exits with for a command it cannot execute (126)
/// or cannot find (127).
pub(crate) fn shell_code(e: &io::Error) -> u8 {
    match e.kind() {
        io::ErrorKind::PermissionDenied => 126,
        _ => 127,
    }
}

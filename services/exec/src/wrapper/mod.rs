//! The wrapper side of [`crate::run_as`]: the `run-as` and `open-as` modes
//! of this binary, spawned by the exec service with an empty environment
//! and their channel as stdin. Both read their identity, become it, and only
//! then read what the job's owner wrote.

pub mod open;
pub mod task;

use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::handoff::read_frame;
use crate::run_as::{RunAs, become_user};

/// Where a task or file lookup starts when the job's cwd cannot be entered.
pub const FALLBACK_DIR: &str = "/tmp";

/// The channel, moved from stdin to a close-on-exec descriptor (so a task
/// never inherits it and its end of file tells the service the exec
/// happened); stdin becomes /dev/null.
fn take_channel() -> io::Result<UnixStream> {
    let channel = rustix::io::fcntl_dupfd_cloexec(io::stdin(), 3)?;
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    Ok(UnixStream::from(channel))
}

/// Read the identity frame and become it (`None`: stay who we are, the
/// service's own user).
fn switch(channel: &mut UnixStream) -> Result<(), String> {
    let who: Option<RunAs> =
        read_frame(channel).map_err(|e| format!("cannot read the identity to run as: {e}"))?;
    match who {
        Some(who) => become_user(&who).map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

/// A job's directory that could not be entered, and why.
#[derive(Debug)]
struct NoDir {
    dir: PathBuf,
    error: io::Error,
}

/// Enter the job's `dir` with this process's (the owner's) rights. As
/// flux-core's job shell: a directory that cannot be entered sends the task
/// to /tmp, with the warning returned here for its stderr; only when /tmp
/// cannot be entered either is it an error.
fn enter(dir: Option<&Path>) -> Result<Option<String>, NoDir> {
    let Some(dir) = dir else {
        return Ok(None);
    };
    let Err(error) = std::env::set_current_dir(dir) else {
        return Ok(None);
    };
    if std::env::set_current_dir(FALLBACK_DIR).is_err() {
        return Err(NoDir {
            dir: dir.to_path_buf(),
            error,
        });
    }
    Ok(Some(fallback_warning(dir, &error)))
}

/// flux-core's words, first on a task's stderr, for a job directory that
/// could not be entered.
pub fn fallback_warning(dir: &Path, error: &io::Error) -> String {
    format!(
        "Could not change dir to {}: {}. Going to {FALLBACK_DIR} instead\n",
        dir.display(),
        crate::spawn_error::reason(error)
    )
}

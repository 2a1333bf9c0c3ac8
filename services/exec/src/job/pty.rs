//! Pseudo-terminals for a job's tasks (`-o pty`, `-o pty.interactive`), as
//! flux-core's shell gives them (`pty.c`): the task gets the terminal's
//! other end as stdin, stdout and stderr and as its controlling terminal
//! (the run-as wrapper makes a session for it); the service keeps the
//! master, whose output becomes the task's stdout in the job's output, and
//! to which the job's input (`run`/`job attach`) is written.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

/// A terminal pair for one task.
#[derive(Debug)]
pub struct Pty {
    /// The service's end.
    pub master: OwnedFd,
    /// The task's end.
    pub slave: Arc<OwnedFd>,
}

/// Open a terminal pair whose task end belongs to `uid` (when given).
pub fn open(uid: Option<u32>) -> std::io::Result<Pty> {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    if let Some(uid) = uid {
        // As a login's terminal: the user's own, so tty(1) and friends agree.
        let owner = rustix::fs::Uid::from_raw(uid);
        rustix::fs::fchown(&slave, Some(owner), None)?;
    }
    Ok(Pty {
        master,
        slave: Arc::new(slave),
    })
}

/// Set the terminal's size, as the caller's terminal has it.
pub fn resize(master: impl AsFd, rows: u16, cols: u16) -> std::io::Result<()> {
    let size = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    Ok(tcsetwinsize(master, size)?)
}

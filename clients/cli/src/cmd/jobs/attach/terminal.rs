//! The caller's terminal while `run -o pty.interactive` drives a task's
//! pty: raw mode (every key, Ctrl-C included, goes to the task as a
//! character), restored when the job ends, and its size for the task's
//! terminal.

use rustix::termios::{OptionalActions, Termios, isatty, tcgetattr, tcgetwinsize, tcsetattr};

/// The terminal in raw mode until this is dropped.
#[derive(Debug)]
pub struct RawMode {
    saved: Termios,
}

impl RawMode {
    /// Put stdin's terminal in raw mode; `None` when stdin is no terminal.
    pub fn enter() -> Option<RawMode> {
        let stdin = std::io::stdin();
        if !isatty(&stdin) {
            return None;
        }
        let saved = tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        raw.make_raw();
        tcsetattr(&stdin, OptionalActions::Now, &raw).ok()?;
        Some(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
    }
}

/// The caller's terminal size (rows, columns), when it has one.
pub fn size() -> Option<(u32, u32)> {
    let w = tcgetwinsize(std::io::stdin()).ok()?;
    (w.ws_row > 0 && w.ws_col > 0).then(|| (u32::from(w.ws_row), u32::from(w.ws_col)))
}

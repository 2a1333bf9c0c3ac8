//! Wait statuses as Flux reports them.
//!
//! Flux runs each rank's tasks under a job shell and reports the shell's wait
//! status: a shell exits with the largest task exit code, or 128+signal when a
//! task was killed by a signal, so `finish.status` for a task killed by SIGTERM is
//! (128+15)<<8 = 36608, not 15. Fluxgate has no separate shell process and
//! computes the same value from the tasks' own statuses.

/// A POSIX wait status (`exit_code << 8`, or the signal number in the low bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WaitStatus(pub i32);

impl WaitStatus {
    /// A normal exit with `code`.
    pub fn exited(code: i32) -> Self {
        WaitStatus((code & 0xff) << 8)
    }

    /// Killed by `signal`.
    pub fn signaled(signal: i32) -> Self {
        WaitStatus(signal & 0x7f)
    }

    /// The exit code, if it exited normally.
    pub fn exit_code(self) -> Option<i32> {
        (self.0 & 0x7f == 0).then_some((self.0 >> 8) & 0xff)
    }

    /// The signal that killed it, if any.
    pub fn signal(self) -> Option<i32> {
        let sig = self.0 & 0x7f;
        (sig != 0 && sig != 0x7f).then_some(sig)
    }

    /// The status a Flux job shell would exit with for this task status.
    pub fn as_shell_status(self) -> WaitStatus {
        match self.signal() {
            Some(sig) => WaitStatus::exited(128 + sig),
            None => self,
        }
    }

    /// The shell status of a rank running `tasks`: the largest, as flux-shell reports.
    pub fn shell_status_of(tasks: impl IntoIterator<Item = WaitStatus>) -> WaitStatus {
        tasks
            .into_iter()
            .map(WaitStatus::as_shell_status)
            .max_by_key(|s| s.0)
            .unwrap_or(WaitStatus(0))
    }
}

impl From<std::process::ExitStatus> for WaitStatus {
    fn from(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        WaitStatus(status.into_raw())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_statuses_match_what_flux_records() {
        // Values from real Flux eventlogs: exit 1, command not found, SIGTERM, SIGALRM.
        assert_eq!(WaitStatus::exited(1).as_shell_status().0, 256);
        assert_eq!(WaitStatus::exited(127).as_shell_status().0, 32512);
        assert_eq!(WaitStatus::signaled(15).as_shell_status().0, 36608);
        assert_eq!(WaitStatus::signaled(14).as_shell_status().0, 36352);
        assert_eq!(WaitStatus(0).as_shell_status().0, 0);
    }

    #[test]
    fn a_rank_reports_its_worst_task() {
        let s = WaitStatus::shell_status_of([
            WaitStatus::exited(0),
            WaitStatus::signaled(9),
            WaitStatus::exited(3),
        ]);
        assert_eq!(s, WaitStatus::exited(137));
        assert_eq!(WaitStatus::shell_status_of([]), WaitStatus(0));
    }

    #[test]
    fn decodes_exit_and_signal() {
        assert_eq!(WaitStatus::exited(2).exit_code(), Some(2));
        assert_eq!(WaitStatus::exited(2).signal(), None);
        assert_eq!(WaitStatus::signaled(9).signal(), Some(9));
        assert_eq!(WaitStatus::signaled(9).exit_code(), None);
    }
}

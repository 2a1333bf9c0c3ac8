//! Wait statuses as Flux reports them.
//!
//! Flux runs each rank's tasks under a job shell and reports the shell's wait
//! status: a shell exits with the largest task exit code, or 128+signal when a
//! task was killed by a signal, so `finish.status` for a task killed by SIGTERM is
//! (128+15)<<8 = 36608, not 15. Fluxgate has no separate shell process and
//! computes the same value from the tasks' own statuses; the rule is
//! `shared::job::WaitStatus::as_shell_status`, also used to read `finish`.

pub use fluxgate_shared::job::WaitStatus;

/// The wait status of a finished child process.
pub fn from_exit(status: std::process::ExitStatus) -> WaitStatus {
    use std::os::unix::process::ExitStatusExt;
    WaitStatus(status.into_raw())
}

/// How a task ended, as flux-core's shell says it in its notes: ` (Exit 2)`,
/// ` (Terminated)`.
pub fn disposition(status: WaitStatus) -> String {
    match status.signal() {
        Some(sig) => format!(" ({})", fluxgate_shared::job::signal_description(sig)),
        None => format!(" (Exit {})", status.exit_code().unwrap_or(0)),
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
    fn dispositions_read_as_flux_core_s() {
        assert_eq!(disposition(WaitStatus::exited(2)), " (Exit 2)");
        assert_eq!(disposition(WaitStatus::signaled(15)), " (Terminated)");
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

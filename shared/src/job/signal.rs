//! What a job's end means to a user: glibc's `strsignal(3)` texts, the one
//! table every command prints signals with, flux-core's
//! `flux_job_waitstatus_to_exitcode` (the exit code and message a command
//! that waited for a job reports), and the reason `flux jobs` gives for a
//! failed job's return code.

use super::state::WaitStatus;

/// glibc's `strsignal(3)` text for the Linux signals 1 to 31, as flux
/// prints a job killed by a signal; `Unknown signal N` for any other.
pub fn signal_description(sig: i32) -> String {
    let text = match sig {
        1 => "Hangup",
        2 => "Interrupt",
        3 => "Quit",
        4 => "Illegal instruction",
        5 => "Trace/breakpoint trap",
        6 => "Aborted",
        7 => "Bus error",
        8 => "Floating point exception",
        9 => "Killed",
        10 => "User defined signal 1",
        11 => "Segmentation fault",
        12 => "User defined signal 2",
        13 => "Broken pipe",
        14 => "Alarm clock",
        15 => "Terminated",
        16 => "Stack fault",
        17 => "Child exited",
        18 => "Continued",
        19 => "Stopped (signal)",
        20 => "Stopped",
        21 => "Stopped (tty input)",
        22 => "Stopped (tty output)",
        23 => "Urgent I/O condition",
        24 => "CPU time limit exceeded",
        25 => "File size limit exceeded",
        26 => "Virtual timer expired",
        27 => "Profiling timer expired",
        28 => "Window changed",
        29 => "I/O possible",
        30 => "Power failure",
        31 => "Bad system call",
        n => return format!("Unknown signal {n}"),
    };
    text.to_string()
}

/// What `flux jobs` says of a failed job's return code (its
/// `inactive_reason`): the signal that killed a task (128+N), the shell's
/// codes for a command that could not run (126, 127, 128), else `Exit N`.
pub fn returncode_reason(rc: i32) -> String {
    match rc {
        rc if rc > 128 => signal_description(rc - 128),
        126 => "Command invoked cannot execute".into(),
        127 => "command not found".into(),
        128 => "Invalid argument to exit".into(),
        rc => format!("Exit {rc}"),
    }
}

impl WaitStatus {
    /// flux-core's `flux_job_waitstatus_to_exitcode`: the exit code a
    /// command reports for a job that ended so, and the message it prints
    /// when that code is not 0.
    pub fn exit_report(self) -> (i32, Option<String>) {
        if let Some(sig) = self.signal() {
            let text = signal_description(sig);
            return (128 + sig, Some(format!("job shell {text}")));
        }
        let code = (self.0 >> 8) & 0xff;
        if code > 128 {
            let text = signal_description(code - 128);
            (code, Some(format!("task(s) {text}")))
        } else if code > 0 {
            (code, Some(format!("task(s) exited with exit code {code}")))
        } else {
            (0, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_linux_signal_has_glibcs_text() {
        assert_eq!(signal_description(9), "Killed");
        assert_eq!(signal_description(24), "CPU time limit exceeded");
        assert_eq!(signal_description(31), "Bad system call");
        assert_eq!(signal_description(0), "Unknown signal 0");
        assert_eq!(signal_description(40), "Unknown signal 40");
    }

    #[test]
    fn return_codes_read_as_flux_jobs_reads_them() {
        assert_eq!(returncode_reason(128 + 24), "CPU time limit exceeded");
        assert_eq!(returncode_reason(128 + 9), "Killed");
        assert_eq!(returncode_reason(126), "Command invoked cannot execute");
        assert_eq!(returncode_reason(127), "command not found");
        assert_eq!(returncode_reason(128), "Invalid argument to exit");
        assert_eq!(returncode_reason(1), "Exit 1");
        assert_eq!(returncode_reason(-128), "Exit -128");
    }

    #[test]
    fn shells_report_a_signal_as_128_plus_it() {
        assert_eq!(WaitStatus::exited(0).shell_exit_code(), 0);
        assert_eq!(WaitStatus::exited(3).shell_exit_code(), 3);
        assert_eq!(WaitStatus::exited(255).shell_exit_code(), 255);
        assert_eq!(WaitStatus::signaled(15).shell_exit_code(), 143);
        assert_eq!(WaitStatus::signaled(24).shell_exit_code(), 152);
        // Stopped (WIFSTOPPED): neither an exit nor a death.
        assert_eq!(WaitStatus(0x137f).shell_exit_code(), 1);
    }

    #[test]
    fn exit_reports_follow_flux_core() {
        assert_eq!(WaitStatus::exited(0).exit_report(), (0, None));
        assert_eq!(
            WaitStatus::exited(3).exit_report(),
            (3, Some("task(s) exited with exit code 3".into()))
        );
        // A task killed by SIGXCPU: the shell exits 128+24.
        assert_eq!(
            WaitStatus::exited(128 + 24).exit_report(),
            (152, Some("task(s) CPU time limit exceeded".into()))
        );
        assert_eq!(
            WaitStatus::signaled(9).exit_report(),
            (137, Some("job shell Killed".into()))
        );
        // 128 itself is an exit code, not a signal.
        assert_eq!(
            WaitStatus::exited(128).exit_report(),
            (128, Some("task(s) exited with exit code 128".into()))
        );
    }
}

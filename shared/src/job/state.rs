//! RFC 21 job states, the virtual states as a mask, and job results.
//!
//! Numeric values, names and letters are flux-core's (`flux/job.h`,
//! `libjob/state.c`, `libjob/result.c`) so that masks and codes read the same
//! in both systems.

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};
use std::str::FromStr;

/// One of the seven RFC 21 job states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobState {
    /// Submitted, not yet validated.
    New,
    /// Waiting for dependencies.
    Depend,
    /// Waiting for a priority.
    Priority,
    /// Waiting for resources.
    Sched,
    /// Allocated; shells starting or running.
    Run,
    /// Finished or hit a fatal exception; releasing what it holds.
    Cleanup,
    /// Final, read-only.
    Inactive,
}

/// A name that is not a job state (or state mask) flux knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {input:?}: expected one of {expected}")]
pub struct JobStateError {
    /// What was given.
    pub input: String,
    /// The accepted spellings.
    pub expected: &'static str,
}

impl JobState {
    /// Every state in lifecycle order.
    pub const ALL: [JobState; 7] = [
        JobState::New,
        JobState::Depend,
        JobState::Priority,
        JobState::Sched,
        JobState::Run,
        JobState::Cleanup,
        JobState::Inactive,
    ];

    /// Upper-case name as `flux jobs -o {state}` prints it.
    pub fn name(self) -> &'static str {
        match self {
            JobState::New => "NEW",
            JobState::Depend => "DEPEND",
            JobState::Priority => "PRIORITY",
            JobState::Sched => "SCHED",
            JobState::Run => "RUN",
            JobState::Cleanup => "CLEANUP",
            JobState::Inactive => "INACTIVE",
        }
    }

    /// Single-letter code (`flux jobs -o {state_single}`): N D P S R C I.
    pub fn letter(self) -> char {
        match self {
            JobState::New => 'N',
            JobState::Depend => 'D',
            JobState::Priority => 'P',
            JobState::Sched => 'S',
            JobState::Run => 'R',
            JobState::Cleanup => 'C',
            JobState::Inactive => 'I',
        }
    }

    /// flux-core's `FLUX_JOB_STATE_*` bit value.
    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }

    /// Position in lifecycle order, 0 (NEW) to 6 (INACTIVE).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The state for a flux-core bit value.
    pub fn from_bit(bit: u32) -> Option<JobState> {
        JobState::ALL.into_iter().find(|s| s.bit() == bit)
    }

    /// DEPEND, PRIORITY or SCHED.
    pub fn is_pending(self) -> bool {
        StateMask::PENDING.contains(self)
    }

    /// RUN or CLEANUP.
    pub fn is_running(self) -> bool {
        StateMask::RUNNING.contains(self)
    }

    /// Anything but INACTIVE.
    pub fn is_active(self) -> bool {
        self != JobState::Inactive
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for JobState {
    type Err = JobStateError;

    /// Accepts the name or the letter, any case, as `flux_job_strtostate()`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|st| {
                s.eq_ignore_ascii_case(st.name())
                    || (s.len() == 1 && s.eq_ignore_ascii_case(&st.letter().to_string()))
            })
            .ok_or_else(|| JobStateError {
                input: s.to_string(),
                expected: "NEW, DEPEND, PRIORITY, SCHED, RUN, CLEANUP, INACTIVE or N D P S R C I",
            })
    }
}

/// A set of states, as flux-core's state bitmasks (filters, virtual states).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StateMask(u32);

impl StateMask {
    /// No state.
    pub const EMPTY: StateMask = StateMask(0);
    /// DEPEND | PRIORITY | SCHED.
    pub const PENDING: StateMask = StateMask(0b0000_1110);
    /// RUN | CLEANUP.
    pub const RUNNING: StateMask = StateMask(0b0011_0000);
    /// Every state but INACTIVE. RFC 21 lists DEPEND through CLEANUP;
    /// flux-core's FLUX_JOB_STATE_ACTIVE also holds NEW, and so does this.
    pub const ACTIVE: StateMask = StateMask(0b0011_1111);
    /// INACTIVE alone.
    pub const INACTIVE: StateMask = StateMask(0b0100_0000);
    /// All seven states.
    pub const ALL: StateMask = StateMask(0b0111_1111);

    /// The mask for flux-core bits; `None` if a bit names no state.
    pub fn from_bits(bits: u32) -> Option<StateMask> {
        (bits & !Self::ALL.0 == 0).then_some(StateMask(bits))
    }

    /// The flux-core bit value.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Is `state` in the mask.
    pub fn contains(self, state: JobState) -> bool {
        self.0 & state.bit() != 0
    }

    /// The member states in lifecycle order.
    pub fn states(self) -> impl Iterator<Item = JobState> {
        JobState::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// True when no state is in the mask.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl From<JobState> for StateMask {
    fn from(state: JobState) -> Self {
        StateMask(state.bit())
    }
}

impl BitOr for StateMask {
    type Output = StateMask;
    fn bitor(self, rhs: StateMask) -> StateMask {
        StateMask(self.0 | rhs.0)
    }
}

impl BitOr<JobState> for StateMask {
    type Output = StateMask;
    fn bitor(self, rhs: JobState) -> StateMask {
        StateMask(self.0 | rhs.bit())
    }
}

impl BitOrAssign for StateMask {
    fn bitor_assign(&mut self, rhs: StateMask) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for StateMask {
    type Output = StateMask;
    fn bitand(self, rhs: StateMask) -> StateMask {
        StateMask(self.0 & rhs.0)
    }
}

impl FromStr for StateMask {
    type Err = JobStateError;

    /// A state name or letter, or a virtual state (`pending`, `running`,
    /// `active`), any case, as `flux jobs --filter` takes them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let virtual_state = [
            ("pending", StateMask::PENDING),
            ("running", StateMask::RUNNING),
            ("active", StateMask::ACTIVE),
        ];
        if let Some((_, m)) = virtual_state
            .iter()
            .find(|(name, _)| s.eq_ignore_ascii_case(name))
        {
            return Ok(*m);
        }
        s.parse::<JobState>()
            .map(StateMask::from)
            .map_err(|_| JobStateError {
                input: s.to_string(),
                expected: "a state name or letter, or pending, running, active",
            })
    }
}

/// How an inactive job ended, as `flux jobs` computes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobResult {
    /// Finished with status 0 and no fatal exception.
    Completed,
    /// Anything that is not one of the others.
    Failed,
    /// Its most severe exception was of type `cancel`.
    Canceled,
    /// Its most severe exception was of type `timeout`.
    Timeout,
}

impl JobResult {
    /// Every result.
    pub const ALL: [JobResult; 4] = [
        JobResult::Completed,
        JobResult::Failed,
        JobResult::Canceled,
        JobResult::Timeout,
    ];

    /// Upper-case name: COMPLETED, FAILED, CANCELED, TIMEOUT.
    pub fn name(self) -> &'static str {
        match self {
            JobResult::Completed => "COMPLETED",
            JobResult::Failed => "FAILED",
            JobResult::Canceled => "CANCELED",
            JobResult::Timeout => "TIMEOUT",
        }
    }

    /// The `flux jobs` ST code: CD, F, CA, TO.
    pub fn abbrev(self) -> &'static str {
        match self {
            JobResult::Completed => "CD",
            JobResult::Failed => "F",
            JobResult::Canceled => "CA",
            JobResult::Timeout => "TO",
        }
    }

    /// flux-core's `FLUX_JOB_RESULT_*` bit value.
    pub fn bit(self) -> u32 {
        match self {
            JobResult::Completed => 1,
            JobResult::Failed => 2,
            JobResult::Canceled => 4,
            JobResult::Timeout => 8,
        }
    }
}

impl fmt::Display for JobResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for JobResult {
    type Err = JobStateError;

    /// The name or the code, any case, as `flux_job_strtoresult()`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobResult::ALL
            .into_iter()
            .find(|r| s.eq_ignore_ascii_case(r.name()) || s.eq_ignore_ascii_case(r.abbrev()))
            .ok_or_else(|| JobStateError {
                input: s.to_string(),
                expected: "COMPLETED, FAILED, CANCELED, TIMEOUT or CD, F, CA, TO",
            })
    }
}

/// A POSIX wait(2) status as `finish` carries it.
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

    /// The status a Flux job shell exits with for a task that ended so: the
    /// shell exits 128+signal when a task was killed, so a SIGTERM'd task gives
    /// (128+15)<<8 = 36608 in `finish`, not 15.
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

    /// The exit code when the process exited normally.
    pub fn exit_code(self) -> Option<i32> {
        (self.0 & 0x7f == 0).then_some((self.0 >> 8) & 0xff)
    }

    /// The signal number when the process was killed by a signal.
    pub fn signal(self) -> Option<i32> {
        let sig = self.0 & 0x7f;
        (sig != 0 && sig != 0x7f).then_some(sig)
    }

    /// The exit code a shell reports for a process that ended so (`$?`):
    /// its exit code, or 128 + the signal that killed it; 1 for a status
    /// that is neither (stopped).
    pub fn shell_exit_code(self) -> u8 {
        let code = self.as_shell_status().exit_code().unwrap_or(1);
        u8::try_from(code).unwrap_or(1)
    }

    /// What `flux jobs -o {returncode}` shows for a job that ran: the exit
    /// code, or the negated signal number when the shell was signaled.
    pub fn returncode(self) -> i32 {
        match (self.exit_code(), self.signal()) {
            (Some(code), _) => code,
            (None, Some(sig)) => -sig,
            (None, None) => self.0,
        }
    }
}

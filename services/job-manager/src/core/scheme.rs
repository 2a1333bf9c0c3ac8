//! The job-related dependency schemes of RFC 26 (`afterstart`,
//! `afterany`, `afterok`, `afternotok`, `afterexcept`): what each waits for
//! and how flux-core's dependency-after plugin describes it. Apart from
//! the dependencies themselves, so that the store's readers can name them
//! without depending on the core's dependency state.

use fluxgate_shared::job::JobResult;

/// The job-related schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Start,
    Any,
    Ok,
    NotOk,
    Except,
}

impl Scheme {
    /// How flux-core's dependency-after plugin names it.
    pub fn description(self) -> &'static str {
        match self {
            Scheme::Start => "after-start",
            Scheme::Any => "after-finish",
            Scheme::Ok => "after-success",
            Scheme::NotOk => "after-failure",
            Scheme::Except => "after-except",
        }
    }

    /// Given the antecedent ended with `result` (having started or not), is it satisfied?
    pub fn satisfied_by_end(self, result: JobResult, started: bool) -> bool {
        match self {
            Scheme::Start => started,
            Scheme::Any => true,
            Scheme::Ok => result == JobResult::Completed,
            Scheme::NotOk => result != JobResult::Completed,
            Scheme::Except => matches!(
                result,
                JobResult::Canceled | JobResult::Timeout | JobResult::Failed
            ),
        }
    }
}

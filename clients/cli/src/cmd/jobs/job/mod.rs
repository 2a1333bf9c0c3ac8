//! `fluxgate job ...`: one module per job subcommand (`job submit` is with
//! the other ways to submit, in [`super::submit::jobspec`]).

use std::process::ExitCode;

use super::submit::jobspec;

pub mod control;
pub mod eventlog;
pub mod hostpids;
pub mod id;
pub mod memo;
pub mod purge;
pub mod status;
pub mod taskmap;
pub mod timeleft;
pub mod usage;

/// Arguments of `fluxgate job`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Convert job ids between encodings (as `flux job id`).
    Id(id::Args),
    /// Display a job's eventlog.
    Eventlog(eventlog::EventlogArgs),
    /// Wait for an event in a job's eventlog.
    #[command(name = "wait-event")]
    WaitEvent(eventlog::WaitEventArgs),
    /// Interactively attach to a job: stream output, exit as the job did.
    Attach(control::AttachArgs),
    /// Print stored keys of a job (jobspec, R, eventlog, exec.eventlog, output).
    Info(control::InfoArgs),
    /// Change a pending job's urgency.
    Urgency(control::UrgencyArgs),
    /// Raise an exception on jobs.
    Raise(control::RaiseArgs),
    /// Send a signal to running jobs.
    Kill(control::KillArgs),
    /// Wait for waitable jobs to complete.
    Wait(control::WaitArgs),
    /// Print the most recently submitted job id(s).
    Last(control::LastArgs),
    /// Remove the oldest inactive jobs.
    Purge(purge::PurgeArgs),
    /// Wait for jobs to end; exit with the largest exit code (as flux job status).
    Status(status::Args),
    /// Attach key=value notes to a job (as flux job memo).
    Memo(memo::Args),
    /// Seconds a running job has left (as flux job timeleft).
    Timeleft(timeleft::Args),
    /// The RFC 34 task map of a started job (as flux job taskmap).
    Taskmap(taskmap::Args),
    /// host:pid of each task of a running job (as flux job hostpids).
    Hostpids(hostpids::Args),
    /// Submit a jobspec from a file or stdin (as flux job submit).
    Submit(jobspec::Args),
    /// CPU time and peak memory a job used, per node and in total.
    Usage(usage::Args),
}

/// Run `fluxgate job`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Id(a) => id::run(a),
        Command::Eventlog(a) => eventlog::run_eventlog(a),
        Command::WaitEvent(a) => eventlog::run_wait_event(a),
        Command::Attach(a) => control::run_attach(a),
        Command::Info(a) => control::run_info(a),
        Command::Urgency(a) => control::run_urgency(a),
        Command::Raise(a) => control::run_raise(a),
        Command::Kill(a) => control::run_kill(a),
        Command::Wait(a) => control::run_wait(a),
        Command::Last(a) => control::run_last(a),
        Command::Purge(a) => purge::run(a),
        Command::Submit(a) => jobspec::run(a),
        Command::Status(a) => status::run(a),
        Command::Memo(a) => memo::run(a),
        Command::Timeleft(a) => timeleft::run(a),
        Command::Taskmap(a) => taskmap::run(a),
        Command::Usage(a) => usage::run(a),
        Command::Hostpids(a) => hostpids::run(a),
    }
}

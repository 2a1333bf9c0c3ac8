//! What the commands that run an instance on this machine (`fluxgate start`,
//! the in-job instance, `fluxgate bench`) add to `fluxgate_launch`, which
//! starts and tears down the services: the signals they handle instead of
//! dying ([`Signals`]), the readiness probe (nodes up, asked over gRPC),
//! and the command run inside the instance ([`run_command`]).

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitCode, ExitStatus};
use std::time::Duration;

use anyhow::Context;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::IdSet;
use fluxgate_shared::job::WaitStatus;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

pub use fluxgate_launch::{Cores, Exec, JobManager, Launcher, Services};

use crate::client;

/// The program and arguments of a command run inside an instance: CMD, or
/// the user's `$SHELL` (`/bin/sh` without one) when CMD is empty.
pub fn command_or_shell(command: &[String]) -> (String, Vec<String>) {
    match command.split_first() {
        Some((p, r)) => (p.clone(), r.to_vec()),
        None => (
            std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into()),
            Vec::new(),
        ),
    }
}

/// Run `command` (default `$SHELL`, [`command_or_shell`]) with `env` set (a
/// `None` value removes the variable) and exit as it did; SIGTERM and SIGHUP
/// are passed on, SIGINT is left to it (the terminal sent it there too).
pub async fn run_command(
    command: &[String],
    env: &[(&str, Option<&OsStr>)],
    signals: &mut Signals,
) -> anyhow::Result<ExitCode> {
    let (prog, rest) = command_or_shell(command);
    let mut cmd = tokio::process::Command::new(&prog);
    cmd.args(&rest);
    for (name, value) in env {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    let mut child = cmd.spawn().with_context(|| format!("cannot run {prog}"))?;
    let pid = child.id().map(|p| Pid::from_raw(p as i32));
    let status = loop {
        tokio::select! {
            s = child.wait() => break s?,
            _ = signals.int.recv() => {}
            _ = signals.term.recv() => forward(pid, Signal::SIGTERM),
            _ = signals.hup.recv() => forward(pid, Signal::SIGHUP),
        }
    };
    Ok(exit_code(status))
}

/// Pass `sig` on to the child `pid`, if it still has one.
pub fn forward(pid: Option<Pid>, sig: Signal) {
    if let Some(p) = pid {
        let _ = nix::sys::signal::kill(p, sig);
    }
}

/// The exit code of a command that ended so, as a shell reports it
/// (128+signal when a signal ended it).
pub fn exit_code(status: ExitStatus) -> ExitCode {
    ExitCode::from(WaitStatus(status.into_raw()).shell_exit_code())
}

/// Wait until `size` nodes of the instance at `uri` are up, or a service
/// dies, or the time is out.
pub async fn wait_ready(
    uri: &str,
    creds: &client::Credentials,
    size: u32,
    timeout: Duration,
    services: &mut Services,
) -> anyhow::Result<()> {
    fluxgate_launch::wait_ready(services, size, timeout, || up_count(uri, creds)).await?;
    Ok(())
}

/// How many nodes the instance at `uri` can schedule on now.
pub async fn up_count(uri: &str, creds: &client::Credentials) -> anyhow::Result<u64> {
    let mut inst = client::connect_with(uri, creds).await?;
    let status = inst
        .resource
        .status(pb::StatusRequest {})
        .await
        .map_err(client::status_error)?
        .into_inner();
    let v: serde_json::Value = serde_json::from_str(&status.status)?;
    let up = v.get("up").and_then(|u| u.as_str()).unwrap_or("");
    Ok(IdSet::parse(up).map(|s| s.count()).unwrap_or(0))
}

/// The signals a command that runs services handles instead of dying.
#[derive(Debug)]
pub struct Signals {
    /// SIGINT (Ctrl-C).
    pub int: tokio::signal::unix::Signal,
    /// SIGTERM.
    pub term: tokio::signal::unix::Signal,
    /// SIGHUP.
    pub hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Install the handlers; needs a runtime.
    pub fn new() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            int: signal(SignalKind::interrupt()).context("SIGINT handler")?,
            term: signal(SignalKind::terminate()).context("SIGTERM handler")?,
            hup: signal(SignalKind::hangup()).context("SIGHUP handler")?,
        })
    }

    /// The name of the next signal received.
    pub async fn any(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}

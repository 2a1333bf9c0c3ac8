//! The service binaries run on this machine by `fluxgate start` and
//! `fluxgate bench`: one process group holding a job manager and its exec
//! services, torn down as one.
//!
//! Every service joins the group of the first one spawned, which is not the
//! terminal's foreground group, so a Ctrl-C reaches only the command that
//! started them; that command handles the signal ([`Signals`]) and tears the
//! group down: SIGTERM, then SIGKILL after a grace period. The teardown also
//! runs when [`Services`] is dropped, so every error path stops the services.
//!
//! A job manager tells where it serves by printing its URI as the first line
//! of its standard output once it is ready ([`read_uri`]).

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::IdSet;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncBufReadExt;

use crate::client;

/// The processes of a running instance; dropping it tears them down.
#[derive(Debug)]
pub struct Services {
    pgid: Option<Pid>,
    children: Vec<Child>,
    kill_timeout: Duration,
    // Held for its Drop: removes a temporary statedir after the services stop.
    _tmpdir: Option<tempfile::TempDir>,
}

impl Services {
    /// No services yet; teardown waits `kill_timeout` between SIGTERM and
    /// SIGKILL, then removes `tmpdir` if there is one.
    pub fn new(kill_timeout: Duration, tmpdir: Option<tempfile::TempDir>) -> Services {
        Services {
            pgid: None,
            children: Vec::new(),
            kill_timeout,
            _tmpdir: tmpdir,
        }
    }

    /// Start `cmd` in the services' process group.
    pub fn spawn(&mut self, mut cmd: Command) -> anyhow::Result<&mut Child> {
        // Every service joins the group of the first one so one signal reaches all.
        cmd.process_group(self.pgid.map_or(0, Pid::as_raw));
        let child = cmd.spawn()?;
        if self.pgid.is_none() {
            self.pgid = Some(Pid::from_raw(child.id() as i32));
        }
        self.children.push(child);
        let last = self.children.len() - 1;
        Ok(&mut self.children[last])
    }

    /// The exit status of a service that has stopped, if any has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.children
            .iter_mut()
            .find_map(|c| c.try_wait().ok().flatten())
    }

    /// Send `signal` to the service `pid` alone and wait up to `timeout` for
    /// it to exit (then SIGKILL it); it is no longer one of the services.
    pub async fn stop(
        &mut self,
        pid: u32,
        signal: Signal,
        timeout: Duration,
    ) -> anyhow::Result<ExitStatus> {
        let index = self
            .children
            .iter()
            .position(|c| c.id() == pid)
            .with_context(|| format!("process {pid} is not one of the services"))?;
        let mut child = self.children.remove(index);
        let target = Pid::from_raw(pid as i32);
        let _ = kill(target, signal);
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                return Ok(child.wait()?);
            }
            // Short naps: callers time how long a service takes to stop.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Stop every service: SIGTERM to the group, SIGKILL after the grace
    /// period. Blocking; see [`Services::shutdown`] for callers with a runtime.
    pub fn teardown(&mut self) {
        let Some(pgid) = self.pgid.take() else {
            return;
        };
        let _ = killpg(pgid, Signal::SIGTERM);
        let deadline = Instant::now() + self.kill_timeout;
        while Instant::now() < deadline && !self.all_exited() {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill_group(pgid);
    }

    /// As [`Services::teardown`], letting the runtime run meanwhile: a job
    /// manager stops gracefully only once its clients' connections close,
    /// and a client's connection closes in a task of that runtime.
    pub async fn shutdown(&mut self) {
        let Some(pgid) = self.pgid.take() else {
            return;
        };
        let _ = killpg(pgid, Signal::SIGTERM);
        let deadline = Instant::now() + self.kill_timeout;
        while Instant::now() < deadline && !self.all_exited() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill_group(pgid);
    }

    fn all_exited(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|c| matches!(c.try_wait(), Ok(Some(_)) | Err(_)))
    }

    fn kill_group(&mut self, pgid: Pid) {
        // Also catches anything the services forked into the group.
        let _ = killpg(pgid, Signal::SIGKILL);
        for c in &mut self.children {
            let _ = c.wait();
        }
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Where a service binary is: beside this executable, else on PATH.
pub fn service_binary(name: &str) -> PathBuf {
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        let p = dir.join(name);
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from(name)
}

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

/// Create (truncate) the log file `name` in `dir` for a service's stderr:
/// 0600, as everything in a state directory (jobs' names and errors are in it).
pub fn log_file(dir: &Path, name: &str) -> anyhow::Result<File> {
    Ok(fluxgate_os::private::create_file(&dir.join(name))?)
}

/// The last lines of a log, to explain a failed start.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// The URI a job manager prints on its standard output once it serves;
/// `log` (its stderr) explains an early exit. Needs a runtime.
pub async fn read_uri(
    stdout: ChildStdout,
    log: &Path,
    timeout: Duration,
) -> anyhow::Result<String> {
    let stdout = tokio::process::ChildStdout::from_std(stdout)
        .context("cannot read the job manager's output")?;
    let mut line = String::new();
    tokio::time::timeout(
        timeout,
        tokio::io::BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .with_context(|| format!("the job manager did not serve within {timeout:?}"))?
    .context("reading the job manager's address")?;
    let uri = line.trim().to_string();
    if uri.is_empty() {
        bail!(
            "fluxgate-job-manager exited before serving:\n{}",
            log_tail(log)
        );
    }
    Ok(uri)
}

/// Wait until `size` nodes are up, or a service dies, or the time is out.
pub async fn wait_ready(
    uri: &str,
    creds: &client::Credentials,
    size: u32,
    timeout: Duration,
    services: &mut Services,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last;
    loop {
        if let Some(status) = services.exited() {
            bail!("a service exited during startup ({status})");
        }
        match up_count(uri, creds).await {
            Ok(n) if n >= u64::from(size) => return Ok(()),
            Ok(n) => last = format!("{n} of {size} nodes up"),
            Err(e) => last = format!("{e:#}"),
        }
        if Instant::now() >= deadline {
            bail!("timed out: {last}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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

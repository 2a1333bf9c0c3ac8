//! Start a job manager and its exec services in one [`Services`] group, read
//! where the job manager serves, and wait until the nodes are up.
//!
//! A job manager tells where it serves by printing its URI as the first
//! line of its standard output once it is ready ([`read_uri`]); with
//! `auth.enabled` it has written `owner.token` and `node.token` in its state
//! directory by then.

use std::fmt::Display;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;

use crate::command::{Exec, JobManager, service_binary};
use crate::group::{Services, log_file, log_tail};

/// Why an instance did not start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A service binary could not be run.
    #[error(
        "cannot start {name} (build it with `cargo build --workspace` or put it on PATH): {source}"
    )]
    Spawn {
        /// The binary.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// A log or credential file in the state directory.
    #[error("{what} {path}: {source}")]
    File {
        /// What the file is.
        what: &'static str,
        /// Where.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The job manager printed no URI in time.
    #[error("the job manager did not serve within {0:?}")]
    Timeout(Duration),
    /// The job manager exited before it served.
    #[error("fluxgate-job-manager exited before serving:\n{0}")]
    Exited(String),
    /// Its standard output could not be read.
    #[error("reading the job manager's address: {0}")]
    Read(std::io::Error),
    /// A service exited while the instance came up.
    #[error("a service exited during startup ({0})")]
    ServiceExited(std::process::ExitStatus),
    /// The nodes did not come up in time.
    #[error("timed out: {0}")]
    NotReady(String),
}

/// Starts the services of one instance in one process group.
#[derive(Debug)]
pub struct Launcher {
    services: Services,
    statedir: PathBuf,
    clean_env: bool,
}

impl Launcher {
    /// Services whose logs go to `statedir` and whose teardown waits
    /// `kill_timeout` between SIGTERM and SIGKILL, then removes `tmpdir`.
    pub fn new(
        statedir: &Path,
        kill_timeout: Duration,
        tmpdir: Option<tempfile::TempDir>,
    ) -> Launcher {
        Launcher {
            services: Services::new(kill_timeout, tmpdir),
            statedir: statedir.to_path_buf(),
            clean_env: false,
        }
    }

    /// Start services without the `FLUXGATE_*` settings of this process's
    /// environment (but `FLUXGATE_LOG`), so only their command lines count:
    /// for an instance inside a job, whose environment came from the submitter.
    pub fn clean_env(mut self) -> Self {
        self.clean_env = true;
        self
    }

    /// The state directory.
    pub fn statedir(&self) -> &Path {
        &self.statedir
    }

    /// The process group.
    pub fn services(&mut self) -> &mut Services {
        &mut self.services
    }

    /// The process ids of the services started so far.
    pub fn pids(&self) -> Vec<u32> {
        self.services.pids()
    }

    /// Run `cmd` in the group (after the others, e.g. a watchdog first).
    pub fn spawn(&mut self, name: &str, cmd: Command) -> Result<u32, LaunchError> {
        let child = self
            .services
            .spawn(cmd)
            .map_err(|source| LaunchError::Spawn {
                name: name.to_string(),
                source,
            })?;
        Ok(child.id())
    }

    fn command(&self, name: &str, make: impl FnOnce(&Path) -> Command) -> Command {
        let mut cmd = make(&service_binary(name));
        if self.clean_env {
            for (k, _) in std::env::vars_os() {
                let k = k.to_string_lossy();
                if k.starts_with("FLUXGATE_") && k != "FLUXGATE_LOG" {
                    cmd.env_remove(k.as_ref());
                }
            }
        }
        cmd
    }

    fn log(&self, name: &str) -> Result<std::fs::File, LaunchError> {
        log_file(&self.statedir, name).map_err(|source| LaunchError::File {
            what: "cannot create the log",
            path: self.statedir.join(name).display().to_string(),
            source,
        })
    }

    /// Start the job manager `spec`, its stderr in `STATEDIR/log_name`, and
    /// read its URI; its pid and URI. Needs a runtime.
    pub async fn job_manager(
        &mut self,
        spec: &JobManager,
        log_name: &str,
        timeout: Duration,
    ) -> Result<(u32, String), LaunchError> {
        let mut cmd = self.command("fluxgate-job-manager", |b| spec.command(b));
        cmd.stdout(Stdio::piped()).stderr(self.log(log_name)?);
        let child = self
            .services
            .spawn(cmd)
            .map_err(|source| LaunchError::Spawn {
                name: "fluxgate-job-manager".into(),
                source,
            })?;
        let pid = child.id();
        let stdout = child.stdout.take().ok_or_else(|| {
            LaunchError::Read(std::io::Error::other("the job manager's stdout is closed"))
        })?;
        let uri = read_uri(stdout, &self.statedir.join(log_name), timeout).await?;
        Ok((pid, uri))
    }

    /// Start the exec service `spec`, its stderr in `STATEDIR/log_name`; its pid.
    pub fn exec(&mut self, spec: &Exec, log_name: &str) -> Result<u32, LaunchError> {
        let mut cmd = self.command("fluxgate-exec", |b| spec.command(b));
        cmd.stderr(self.log(log_name)?);
        self.spawn("fluxgate-exec", cmd)
    }

    /// The owner's token the job manager wrote (with `auth`) before it served.
    pub fn owner_token(&self) -> Result<String, LaunchError> {
        let path = self.owner_token_path();
        std::fs::read_to_string(&path)
            .map(|t| t.trim().to_string())
            .map_err(|source| LaunchError::File {
                what: "cannot read the owner's token",
                path: path.display().to_string(),
                source,
            })
    }

    /// Where the job manager writes the owner's token.
    pub fn owner_token_path(&self) -> PathBuf {
        self.statedir.join("owner.token")
    }

    /// Where the job manager writes the node credential its exec services need.
    pub fn node_token_path(&self) -> PathBuf {
        self.statedir.join("node.token")
    }

    /// Wait until `probe` counts `size` nodes up; see [`wait_ready`].
    pub async fn wait_ready<F, Fut, E>(
        &mut self,
        size: u32,
        timeout: Duration,
        probe: F,
    ) -> Result<(), LaunchError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<u64, E>>,
        E: Display,
    {
        wait_ready(&mut self.services, size, timeout, probe).await
    }

    /// The exit status of a service that has stopped, if any has.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.services.exited()
    }

    /// Stop every service, blocking (see [`Services::teardown`]).
    pub fn teardown(&mut self) {
        self.services.teardown();
    }

    /// Stop every service, letting the runtime run (see [`Services::shutdown`]).
    pub async fn shutdown(&mut self) {
        self.services.shutdown().await;
    }
}

/// The URI a job manager prints on its standard output once it serves;
/// `log` (its stderr) explains an early exit. Needs a runtime.
pub async fn read_uri(
    stdout: ChildStdout,
    log: &Path,
    timeout: Duration,
) -> Result<String, LaunchError> {
    let stdout = tokio::process::ChildStdout::from_std(stdout).map_err(LaunchError::Read)?;
    let mut line = String::new();
    tokio::time::timeout(
        timeout,
        tokio::io::BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .map_err(|_| LaunchError::Timeout(timeout))?
    .map_err(LaunchError::Read)?;
    let uri = line.trim().to_string();
    if uri.is_empty() {
        return Err(LaunchError::Exited(log_tail(log)));
    }
    Ok(uri)
}

/// Wait until `probe` counts at least `size` nodes up, or a service of
/// `services` dies, or `timeout` passes; the probe's last answer explains a
/// timeout.
pub async fn wait_ready<F, Fut, E>(
    services: &mut Services,
    size: u32,
    timeout: Duration,
    mut probe: F,
) -> Result<(), LaunchError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<u64, E>>,
    E: Display,
{
    let deadline = Instant::now() + timeout;
    let mut last;
    loop {
        if let Some(status) = services.exited() {
            return Err(LaunchError::ServiceExited(status));
        }
        match probe().await {
            Ok(n) if n >= u64::from(size) => return Ok(()),
            Ok(n) => last = format!("{n} of {size} nodes up"),
            Err(e) => last = format!("{e:#}"),
        }
        if Instant::now() >= deadline {
            return Err(LaunchError::NotReady(last));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

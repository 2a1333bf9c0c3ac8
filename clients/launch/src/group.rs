//! The services' process group: every service joins the group of the first
//! one spawned, which is not the terminal's foreground group, so a Ctrl-C
//! reaches only the command that started them; that command tears the group
//! down: SIGTERM, then SIGKILL after a grace period. The teardown also runs
//! when [`Services`] is dropped, so every error path stops the services.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

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
    pub fn spawn(&mut self, mut cmd: Command) -> std::io::Result<&mut Child> {
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

    /// The process ids of the services in the group.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
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
    ) -> std::io::Result<ExitStatus> {
        let index = self
            .children
            .iter()
            .position(|c| c.id() == pid)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("process {pid} is not one of the services"),
                )
            })?;
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
                return child.wait();
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

/// Create (truncate) the log file `name` in `dir` for a service's stderr:
/// 0600, as everything in a state directory (jobs' names and errors are in it).
pub fn log_file(dir: &Path, name: &str) -> std::io::Result<File> {
    fluxgate_os::private::create_file(&dir.join(name)).map_err(std::io::Error::other)
}

/// The last lines of a log, to explain a failed start.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

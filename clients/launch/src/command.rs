//! The command lines of the job manager and the exec service.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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

/// What a job manager is asked to be.
#[derive(Debug, Clone)]
pub struct JobManager {
    listen: String,
    statedir: PathBuf,
    nodelist: Option<String>,
    resource_path: Option<PathBuf>,
    config: Option<PathBuf>,
    auth: bool,
    sets: Vec<String>,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
}

impl JobManager {
    /// A job manager keeping its state in `statedir`, serving on a free
    /// loopback port, open (no credentials required).
    pub fn new(statedir: &Path) -> JobManager {
        JobManager {
            listen: "127.0.0.1:0".into(),
            statedir: statedir.to_path_buf(),
            nodelist: None,
            resource_path: None,
            config: None,
            auth: false,
            sets: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Keep its state in `dir` instead.
    pub fn with_statedir(mut self, dir: &Path) -> Self {
        self.statedir = dir.to_path_buf();
        self
    }

    /// Serve on `addr` (`127.0.0.1:0` by default).
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = addr.to_string();
        self
    }

    /// The nodes' hostnames in rank order (`resource.nodelist`).
    pub fn nodelist(mut self, hosts: &str) -> Self {
        self.nodelist = Some(hosts.to_string());
        self
    }

    /// The inventory from an R file (`resource.path`).
    pub fn resource_path(mut self, path: &Path) -> Self {
        self.resource_path = Some(path.to_path_buf());
        self
    }

    /// Its TOML configuration file (`--config`): queues, policy, limits;
    /// the other settings here override what it says.
    pub fn config(mut self, path: &Path) -> Self {
        self.config = Some(path.to_path_buf());
        self
    }

    /// Require credentials (`auth.enabled`): the job manager writes
    /// `STATEDIR/owner.token` and `STATEDIR/node.token` before it serves.
    pub fn auth(mut self, on: bool) -> Self {
        self.auth = on;
        self
    }

    /// Set a configuration key (`--set KEY=VALUE`), after the others.
    pub fn set(mut self, key: &str, value: &str) -> Self {
        self.sets.push(format!("{key}={value}"));
        self
    }

    /// Extra arguments, after the others.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// An environment variable of the service (e.g. `FLUXGATE_LOG`).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// Where it keeps its state.
    pub fn statedir(&self) -> &Path {
        &self.statedir
    }

    /// Whether it requires credentials.
    pub fn requires_auth(&self) -> bool {
        self.auth
    }

    /// The command that runs it as `binary`, with its standard input closed.
    pub fn command(&self, binary: &Path) -> Command {
        let mut cmd = Command::new(binary);
        if let Some(p) = &self.config {
            cmd.arg("--config").arg(p);
        }
        if self.auth {
            cmd.arg("--set").arg("auth.enabled=true");
        }
        cmd.arg("--listen")
            .arg(&self.listen)
            .arg("--statedir")
            .arg(&self.statedir);
        if let Some(n) = &self.nodelist {
            cmd.arg("--nodelist").arg(n);
        }
        if let Some(p) = &self.resource_path {
            cmd.arg("--resource-path").arg(p);
        }
        for kv in &self.sets {
            cmd.arg("--set").arg(kv);
        }
        cmd.args(&self.args).stdin(Stdio::null());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

/// The cores an exec service offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cores {
    /// Cores `0..N-1` (`--cores-count`).
    Count(u32),
    /// These core ids, an idset (`--cores`).
    Ids(String),
}

/// What an exec service is asked to be.
#[derive(Debug, Clone)]
pub struct Exec {
    job_manager: String,
    listen: String,
    hostname: Option<String>,
    cores: Option<Cores>,
    gpus: Option<String>,
    virtual_nodes: Option<u32>,
    kill_timeout: Option<f64>,
    node_token_file: Option<PathBuf>,
    allow_root_jobs: bool,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
}

impl Exec {
    /// An exec service joining the job manager at `uri`, serving on a free
    /// loopback port, with the machine's hostname and cores.
    pub fn new(uri: &str) -> Exec {
        Exec {
            job_manager: uri.to_string(),
            listen: "127.0.0.1:0".into(),
            hostname: None,
            cores: None,
            gpus: None,
            virtual_nodes: None,
            kill_timeout: None,
            node_token_file: None,
            allow_root_jobs: false,
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Serve on `addr` (`127.0.0.1:0` by default).
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = addr.to_string();
        self
    }

    /// Announce `name`.
    pub fn hostname(mut self, name: &str) -> Self {
        self.hostname = Some(name.to_string());
        self
    }

    /// Offer these cores.
    pub fn cores(mut self, cores: Cores) -> Self {
        self.cores = Some(cores);
        self
    }

    /// Offer these GPU ids (an idset).
    pub fn gpus(mut self, ids: &str) -> Self {
        self.gpus = Some(ids.to_string());
        self
    }

    /// Serve `n` virtual nodes `HOSTNAME-v0..`.
    pub fn virtual_nodes(mut self, n: u32) -> Self {
        self.virtual_nodes = Some(n);
        self
    }

    /// Seconds between SIGTERM and SIGKILL when a job is torn down.
    pub fn kill_timeout(mut self, secs: f64) -> Self {
        self.kill_timeout = Some(secs);
        self
    }

    /// Join with the node credential in `path` and require it of callers.
    pub fn node_token_file(mut self, path: &Path) -> Self {
        self.node_token_file = Some(path.to_path_buf());
        self
    }

    /// Run jobs owned by root (for an instance root owns).
    pub fn allow_root_jobs(mut self, on: bool) -> Self {
        self.allow_root_jobs = on;
        self
    }

    /// Extra arguments, after the others.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// An environment variable of the service (e.g. `FLUXGATE_LOG`).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// The command that runs it as `binary`, with its standard input and
    /// output closed.
    pub fn command(&self, binary: &Path) -> Command {
        let mut cmd = Command::new(binary);
        cmd.arg("--job-manager")
            .arg(&self.job_manager)
            .arg("--listen")
            .arg(&self.listen);
        if let Some(h) = &self.hostname {
            cmd.arg("--hostname").arg(h);
        }
        if let Some(n) = self.virtual_nodes {
            cmd.arg("--virtual").arg(n.to_string());
        }
        match &self.cores {
            Some(Cores::Count(n)) => {
                cmd.arg("--cores-count").arg(n.to_string());
            }
            Some(Cores::Ids(ids)) => {
                cmd.arg("--cores").arg(ids);
            }
            None => {}
        }
        if let Some(g) = &self.gpus {
            cmd.arg("--gpus").arg(g);
        }
        if let Some(t) = self.kill_timeout {
            cmd.arg("--kill-timeout").arg(t.to_string());
        }
        if let Some(p) = &self.node_token_file {
            cmd.arg("--node-token-file").arg(p);
        }
        if self.allow_root_jobs {
            cmd.arg("--allow-root-jobs");
        }
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn job_manager_lines() {
        let jm = JobManager::new(Path::new("/s"))
            .nodelist("n[0-1]")
            .auth(true)
            .set("metrics.listen", "127.0.0.1:0");
        assert_eq!(
            line(&jm.command(Path::new("jm"))),
            [
                "--set",
                "auth.enabled=true",
                "--listen",
                "127.0.0.1:0",
                "--statedir",
                "/s",
                "--nodelist",
                "n[0-1]",
                "--set",
                "metrics.listen=127.0.0.1:0"
            ]
        );
    }

    #[test]
    fn exec_lines() {
        let ex = Exec::new("http://jm:1")
            .hostname("h")
            .cores(Cores::Count(4))
            .kill_timeout(1.0)
            .node_token_file(Path::new("/s/node.token"))
            .allow_root_jobs(true);
        assert_eq!(
            line(&ex.command(Path::new("exec"))),
            [
                "--job-manager",
                "http://jm:1",
                "--listen",
                "127.0.0.1:0",
                "--hostname",
                "h",
                "--cores-count",
                "4",
                "--kill-timeout",
                "1",
                "--node-token-file",
                "/s/node.token",
                "--allow-root-jobs"
            ]
        );
    }
}

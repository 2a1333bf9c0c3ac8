//! The instance a run measures: one started for it (a job manager and one
//! exec service in a temporary statedir, in their own process group, as
//! `fluxgate start` runs them) or the remote one named by `FLUXGATE_URI`.
//!
//! The local job manager serves its Prometheus metrics on a free loopback
//! port; it logs the bound address (`metrics served at http://ADDR/metrics`)
//! before it prints its URI, so the address is in its log by the time the
//! URI is read. Its log filter keeps only that line and warnings, so that
//! logging is not part of what is measured.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use fluxgate_shared::Hostlist;
use nix::sys::signal::Signal;
use tonic_health::pb::health_check_response::ServingStatus;

use fluxgate_cli::client::{self, Instance};
use fluxgate_cli::cmd::instance::health;
use fluxgate_cli::services::{self, Cores, Exec, JobManager, Launcher};

use super::cpu::CpuTimes;
use super::metrics::{self, Counters};

/// Seconds to wait for an instance to come up.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Seconds between SIGTERM and SIGKILL at teardown.
const KILL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping job manager may take before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(120);
/// Log filter of the local job manager: warnings, and the line that says
/// where its metrics are served.
const JM_LOG: &str = "warn,fluxgate_job_manager::server=info";
/// Hostname the local exec service announces.
const HOST: &str = "bench";

/// The nodes of a local instance.
#[derive(Debug, Clone, Copy)]
pub enum NodeSpec {
    /// `count` virtual nodes of `cores` cores, in one exec process.
    Virtual {
        /// Number of nodes.
        count: u32,
        /// Cores of each.
        cores: u32,
    },
    /// This machine as one node.
    Real {
        /// Cores offered (default: the exec service's discovery).
        cores: Option<u32>,
    },
    /// `count` nodes `sim[0-N]` that the run itself joins (`nodes.rs`):
    /// no exec service is started.
    Streams {
        /// Number of nodes.
        count: u32,
    },
}

/// The instance of a run.
#[derive(Debug)]
pub enum Target {
    /// Started by the bench, stopped at the end of the run.
    Local(Local),
    /// Named by FLUXGATE_URI.
    Remote {
        /// Its address.
        uri: String,
        /// Its metrics endpoint (`host:port`), if given.
        metrics: Option<String>,
    },
}

/// A local instance.
#[derive(Debug)]
pub struct Local {
    services: Launcher,
    statedir: PathBuf,
    uri: String,
    nodelist: String,
    spec: NodeSpec,
    jm_pid: u32,
    metrics: Option<String>,
    starts: u32,
    /// The PostgreSQL store, when not the statedir's SQLite file.
    store_url: Option<String>,
}

impl Target {
    /// The remote instance at `uri`.
    pub fn remote(uri: &str, metrics: Option<&str>) -> Target {
        Target::Remote {
            uri: uri.to_string(),
            metrics: metrics.map(metrics::endpoint),
        }
    }

    /// Start a local instance with the nodes of `spec` and wait until they
    /// are up; its store in PostgreSQL at `store_url` when given.
    pub async fn start(
        spec: NodeSpec,
        store_url: Option<&str>,
        verbose: bool,
    ) -> anyhow::Result<Target> {
        let tmpdir = tempfile::Builder::new()
            .prefix("fluxgate-bench-")
            .tempdir()
            .context("cannot create a temporary statedir")?;
        let statedir = tmpdir.path().to_path_buf();
        let names: Vec<String> = match spec {
            NodeSpec::Virtual { count, .. } => (0..count).map(|i| format!("{HOST}-v{i}")).collect(),
            NodeSpec::Real { .. } => vec![format!("{HOST}0")],
            NodeSpec::Streams { count } => (0..count).map(|i| format!("sim{i}")).collect(),
        };
        let mut hosts = Hostlist::new();
        for n in &names {
            hosts.push(n).map_err(|e| anyhow!("node name {n:?}: {e}"))?;
        }
        let mut local = Local {
            services: Launcher::new(&statedir, KILL_TIMEOUT, Some(tmpdir)),
            statedir,
            uri: String::new(),
            nodelist: hosts.encode(),
            spec,
            jm_pid: 0,
            metrics: None,
            starts: 0,
            store_url: store_url.map(str::to_string),
        };
        if let Err(e) = local.come_up().await {
            local.services.shutdown().await;
            return Err(e);
        }
        if verbose {
            eprintln!(
                "fluxgate-bench: job manager at {}, logs in {}",
                local.uri,
                local.statedir.display()
            );
        }
        Ok(Target::Local(local))
    }

    /// The job manager's address.
    pub fn uri(&self) -> &str {
        match self {
            Target::Local(l) => &l.uri,
            Target::Remote { uri, .. } => uri,
        }
    }

    /// A client of the instance, able to read large listings.
    pub async fn connect(&self) -> anyhow::Result<Instance> {
        let mut inst = client::connect_to(self.uri()).await?;
        inst.jobs = inst.jobs.max_decoding_message_size(1 << 30);
        Ok(inst)
    }

    /// Nodes up now, if the instance tells.
    pub async fn nodes(&self) -> Option<u64> {
        let creds = client::Credentials::from_env().ok()?;
        services::up_count(self.uri(), &creds).await.ok()
    }

    /// Cores per node, when the bench chose them.
    pub fn cores_per_node(&self) -> Option<u32> {
        match self {
            Target::Local(Local {
                spec: NodeSpec::Virtual { cores, .. },
                ..
            }) => Some(*cores),
            Target::Local(Local {
                spec: NodeSpec::Real { cores },
                ..
            }) => *cores,
            Target::Local(Local {
                spec: NodeSpec::Streams { .. },
                ..
            })
            | Target::Remote { .. } => None,
        }
    }

    /// Whether the bench started this instance.
    pub fn is_local(&self) -> bool {
        matches!(self, Target::Local(_))
    }

    /// The job manager's counters now, when its metrics can be read.
    pub async fn counters(&self) -> Option<Counters> {
        let addr = match self {
            Target::Local(l) => l.metrics.as_deref(),
            Target::Remote { metrics, .. } => metrics.as_deref(),
        }?;
        match metrics::scrape(addr).await {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("fluxgate-bench: {e:#}");
                None
            }
        }
    }

    /// The local job manager's process id.
    pub fn jm_pid(&self) -> Option<u32> {
        match self {
            Target::Local(l) => Some(l.jm_pid),
            Target::Remote { .. } => None,
        }
    }

    /// CPU time so far of a local instance's job manager, exec services
    /// and their tasks.
    pub fn cpu(&self) -> Option<CpuTimes> {
        match self {
            Target::Local(l) => {
                let execs: Vec<u32> = l
                    .services
                    .pids()
                    .into_iter()
                    .filter(|p| *p != l.jm_pid)
                    .collect();
                CpuTimes::read(l.jm_pid, &execs)
            }
            Target::Remote { .. } => None,
        }
    }

    /// The local job manager's resident memory (VmRSS) in bytes.
    pub fn jm_rss(&self) -> Option<u64> {
        match self {
            Target::Local(l) => vm_rss(l.jm_pid),
            Target::Remote { .. } => None,
        }
    }

    /// The local instance, for what only it can do.
    pub fn local(&mut self) -> anyhow::Result<&mut Local> {
        match self {
            Target::Local(l) => Ok(l),
            Target::Remote { uri, .. } => bail!("{uri} is a remote instance"),
        }
    }

    /// Stop a local instance (dropping it does the same, blocking).
    pub async fn shutdown(self) {
        if let Target::Local(mut l) = self {
            l.services.shutdown().await;
        }
    }
}

/// How long one job manager restart took.
#[derive(Debug, Clone, Copy)]
pub struct Restart {
    /// Signal -> the old job manager exited.
    pub stop: Duration,
    /// Exec of the new one -> health SERVING.
    pub serving: Duration,
}

impl Local {
    /// Start the job manager and the exec service; wait for the nodes.
    async fn come_up(&mut self) -> anyhow::Result<()> {
        self.spawn_jm("127.0.0.1:0").await?;
        if let NodeSpec::Streams { .. } = self.spec {
            // The run joins the nodes itself.
            return Ok(());
        }
        self.spawn_exec()?;
        services::wait_ready(
            &self.uri,
            &client::Credentials::from_env()?,
            self.node_count(),
            START_TIMEOUT,
            self.services.services(),
        )
        .await
        .with_context(|| {
            format!(
                "instance did not come up; logs in {}",
                self.statedir.display()
            )
        })
    }

    fn node_count(&self) -> u32 {
        match self.spec {
            NodeSpec::Virtual { count, .. } | NodeSpec::Streams { count } => count,
            NodeSpec::Real { .. } => 1,
        }
    }

    /// Start a job manager serving on `listen` and read where it serves.
    async fn spawn_jm(&mut self, listen: &str) -> anyhow::Result<Duration> {
        self.starts += 1;
        let log_name = if self.starts == 1 {
            "job-manager.log".to_string()
        } else {
            format!("job-manager.{}.log", self.starts)
        };
        let log = self.statedir.join(&log_name);
        let mut jm = JobManager::new(&self.statedir)
            .listen(listen)
            .nodelist(&self.nodelist)
            .set("metrics.listen", "127.0.0.1:0")
            .args(["--log-format", "text"])
            .env("FLUXGATE_LOG", JM_LOG);
        if let Some(url) = &self.store_url {
            jm = jm.env("FLUXGATE_STORE_URL", url);
        }
        if let NodeSpec::Streams { count } = self.spec {
            // The simulated nodes all connect from this machine: room for
            // each of them (when they join directly) beyond the defaults.
            let room = (count + 1024).to_string();
            jm = jm
                .set("limits.max_connections", &room)
                .set("limits.max_connections_per_peer", &room);
        }
        let started = Instant::now();
        (self.jm_pid, self.uri) = self
            .services
            .job_manager(&jm, &log_name, START_TIMEOUT)
            .await?;
        let deadline = started + START_TIMEOUT;
        loop {
            match health::check(
                &self.uri,
                client::JOB_MANAGER_SERVICE,
                Duration::from_secs(5),
            )
            .await
            {
                Ok(ServingStatus::Serving) => break,
                Ok(_) | Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Ok(s) => bail!("job manager at {} is {}", self.uri, s.as_str_name()),
                Err(e) => return Err(e),
            }
        }
        let serving = started.elapsed();
        self.metrics = metrics_address(&log);
        if self.metrics.is_none() {
            eprintln!(
                "fluxgate-bench: the job manager's metrics address is not in {}; \
                 events_per_commit will be null",
                log.display()
            );
        }
        Ok(serving)
    }

    /// Start a relay (`fluxgate-exec --relay --virtual 0`) joined to
    /// `parent`, serving on `listen`, logging to `NAME.log`; its pid.
    pub fn relay(&mut self, parent: &str, listen: &str, name: &str) -> anyhow::Result<u32> {
        let ex = Exec::new(parent)
            .env("FLUXGATE_LOG", "warn")
            .listen(listen)
            .hostname(name)
            .virtual_nodes(0)
            .args(["--relay"]);
        Ok(self.services.exec(&ex, &format!("{name}.log"))?)
    }

    fn spawn_exec(&mut self) -> anyhow::Result<()> {
        let ex = Exec::new(&self.uri).env("FLUXGATE_LOG", "warn");
        let ex = match self.spec {
            NodeSpec::Virtual { count, cores } => ex
                .hostname(HOST)
                .virtual_nodes(count)
                .cores(Cores::Count(cores)),
            NodeSpec::Real { cores } => {
                let ex = ex.hostname(&format!("{HOST}0"));
                match cores {
                    Some(c) => ex.cores(Cores::Count(c)),
                    None => ex,
                }
            }
            NodeSpec::Streams { .. } => return Ok(()),
        };
        self.services.exec(&ex, "exec.log")?;
        Ok(())
    }

    /// Stop the job manager with `signal` and start a new one on the same
    /// statedir and address; wait until its nodes are back.
    pub async fn restart_jm(&mut self, signal: Signal) -> anyhow::Result<Restart> {
        let t0 = Instant::now();
        let status = self
            .services
            .services()
            .stop(self.jm_pid, signal, STOP_TIMEOUT)
            .await?;
        let stop = t0.elapsed();
        if signal == Signal::SIGTERM && !status.success() {
            bail!(
                "the job manager exited {status} on SIGTERM; logs in {}",
                self.statedir.display()
            );
        }
        let listen = self.uri.trim_start_matches("http://").to_string();
        let _ = std::fs::remove_file(self.statedir.join("uri"));
        let serving = self.spawn_jm(&listen).await?;
        services::wait_ready(
            &self.uri,
            &client::Credentials::from_env()?,
            self.node_count(),
            START_TIMEOUT,
            self.services.services(),
        )
        .await
        .context("the nodes did not rejoin the restarted job manager")?;
        Ok(Restart { stop, serving })
    }

    /// Where the logs are.
    pub fn statedir(&self) -> &Path {
        &self.statedir
    }
}

/// The metrics address the job manager logged.
fn metrics_address(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines().find_map(|l| {
        let rest = l.split_once("metrics served at http://")?.1;
        Some(rest.split('/').next()?.to_string())
    })
}

/// VmRSS of process `pid` in bytes (Linux /proc).
pub fn vm_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}

//! `fluxgate bench failover`: two job managers on one PostgreSQL store,
//! simulated jobs submitted with idempotency keys, and the leader killed
//! (SIGKILL) `--kills` times while jobs are submitted and running. Each
//! killed job manager is started again as the standby of the next kill.
//!
//! Figures: jobs acknowledged, acknowledged jobs the final leader does not
//! know or that never ended (`lost`), jobs made twice (`duplicates`), the
//! time from each kill to the standby answering health SERVING, and jobs
//! per second over the whole run.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use tonic_health::pb::health_check_response::ServingStatus;

use fluxgate_cli::client::{self, Instance};
use fluxgate_cli::cmd::instance::health;
use fluxgate_cli::services::{self, Cores, Exec, JobManager, Launcher};

use super::submit::sim_jobspec;

const START_TIMEOUT: Duration = Duration::from_secs(120);
const KILL_TIMEOUT: Duration = Duration::from_secs(10);
/// Simulated nodes and their cores: room for every job at once is not
/// needed, jobs end as soon as they start.
const NODES: u32 = 16;
const CORES: u32 = 64;
/// Jobs per SubmitMany.
const BATCH: u64 = 100;

/// What one run measured.
#[derive(Debug, Default)]
pub struct FailoverFigures {
    /// Jobs asked for.
    pub jobs: u64,
    /// Jobs acknowledged by a leader.
    pub acked: u64,
    /// Acknowledged jobs the final leader does not hold inactive.
    pub lost: u64,
    /// Jobs of the run beyond those acknowledged (a retry made twice).
    pub duplicates: u64,
    /// Kills made.
    pub kills: u32,
    /// Kill -> the other job manager SERVING, each kill, milliseconds.
    pub failover_ms: Vec<f64>,
    /// Acknowledged jobs / (first submit -> all inactive).
    pub jobs_per_sec: Option<f64>,
}

impl FailoverFigures {
    fn p50(&self) -> Option<f64> {
        let mut v = self.failover_ms.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len().saturating_sub(1) / 2).copied()
    }

    fn max(&self) -> Option<f64> {
        self.failover_ms.iter().copied().reduce(f64::max)
    }

    /// One JSON object.
    pub fn json(&self) -> String {
        json!({
            "workload": "failover",
            "jobs": self.jobs,
            "acked": self.acked,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "kills": self.kills,
            "failover_ms": self.failover_ms,
            "failover_ms_max": self.max(),
            "failover_ms_p50": self.p50(),
            "jobs_per_sec": self.jobs_per_sec,
        })
        .to_string()
    }

    /// One table line.
    pub fn line(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        format!(
            "failover jobs={} acked={} lost={} duplicates={} kills={} failover_ms_max={} \
             failover_ms_p50={} jobs_per_sec={}",
            self.jobs,
            self.acked,
            self.lost,
            self.duplicates,
            self.kills,
            ms(self.max()),
            ms(self.p50()),
            self.jobs_per_sec.map_or("-".into(), |v| format!("{v:.0}")),
        )
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The pair of job managers and their exec service.
struct Pair {
    launcher: Launcher,
    dirs: [PathBuf; 2],
    ports: [u16; 2],
    pids: [Option<u32>; 2],
    store_url: String,
    starts: u32,
}

impl Pair {
    fn uri(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    fn uris(&self) -> String {
        format!("{},{}", self.uri(0), self.uri(1))
    }

    async fn spawn_jm(&mut self, i: usize) -> anyhow::Result<()> {
        self.starts += 1;
        let jm = JobManager::new(&self.dirs[i])
            .listen(&format!("127.0.0.1:{}", self.ports[i]))
            .nodelist(&format!("bench-v[0-{}]", NODES - 1))
            .env("FLUXGATE_STORE_URL", &self.store_url)
            .set("ha.lease", "1")
            .set("ha.poll_interval", "0.05")
            .env("FLUXGATE_LOG", "warn");
        let (pid, _) = self
            .launcher
            .job_manager(
                &jm,
                &format!("job-manager.{}.log", self.starts),
                START_TIMEOUT,
            )
            .await?;
        self.pids[i] = Some(pid);
        Ok(())
    }

    async fn serving(&self, i: usize) -> bool {
        matches!(
            health::check(
                &self.uri(i),
                client::JOB_MANAGER_SERVICE,
                Duration::from_millis(200)
            )
            .await,
            Ok(ServingStatus::Serving)
        )
    }

    /// SIGKILL the leader `i`; the time until `other` serves; `i` is then
    /// started again as a standby.
    async fn kill_leader(&mut self, i: usize) -> anyhow::Result<f64> {
        let other = 1 - i;
        let pid = self.pids[i]
            .take()
            .ok_or_else(|| anyhow!("job manager {i} is not running"))?;
        let t0 = Instant::now();
        kill(Pid::from_raw(pid as i32), Signal::SIGKILL)?;
        loop {
            if self.serving(other).await {
                break;
            }
            if t0.elapsed() > START_TIMEOUT {
                bail!("no job manager took over within {START_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        let _ = self
            .launcher
            .services()
            .stop(pid, Signal::SIGKILL, KILL_TIMEOUT)
            .await;
        self.spawn_jm(i).await?;
        Ok(ms)
    }

    async fn leader(&self) -> Option<usize> {
        for i in 0..2 {
            if self.pids[i].is_some() && self.serving(i).await {
                return Some(i);
            }
        }
        None
    }
}

/// Run the workload once.
pub async fn run(
    store_url: &str,
    jobs: u64,
    kills: u32,
    acked_file: Option<&Path>,
    verbose: bool,
) -> anyhow::Result<FailoverFigures> {
    let tmpdir = tempfile::Builder::new()
        .prefix("fluxgate-bench-")
        .tempdir()
        .context("cannot create a temporary statedir")?;
    let root = tmpdir.path().to_path_buf();
    let dirs = [root.join("jm-0"), root.join("jm-1")];
    for d in &dirs {
        fluxgate_os::private::create_dir(d).context("a job manager's state directory")?;
    }
    let mut pair = Pair {
        launcher: Launcher::new(&root, KILL_TIMEOUT, Some(tmpdir)),
        dirs,
        ports: [free_port()?, free_port()?],
        pids: [None, None],
        store_url: store_url.to_string(),
        starts: 0,
    };
    let result = measure(&mut pair, jobs, kills, acked_file, verbose).await;
    pair.launcher.shutdown().await;
    result
}

async fn measure(
    pair: &mut Pair,
    jobs: u64,
    kills: u32,
    acked_file: Option<&Path>,
    verbose: bool,
) -> anyhow::Result<FailoverFigures> {
    pair.spawn_jm(0).await?;
    pair.spawn_jm(1).await?;
    let uris = pair.uris();
    let ex = Exec::new(&uris)
        .hostname("bench")
        .virtual_nodes(NODES)
        .cores(Cores::Count(CORES))
        .env("FLUXGATE_LOG", "warn");
    pair.launcher.exec(&ex, "exec.log")?;
    let creds = client::Credentials::from_env()?;
    services::wait_ready(
        &uris,
        &creds,
        NODES,
        START_TIMEOUT,
        pair.launcher.services(),
    )
    .await
    .context("the instance did not come up")?;
    if verbose {
        eprintln!(
            "fluxgate-bench: job managers at {uris}, logs in {}",
            pair.dirs[0].display()
        );
    }
    let name = format!("bench-failover-{}", std::process::id());
    let jobspec = sim_jobspec(&name)?;
    let mut fig = FailoverFigures {
        jobs,
        ..FailoverFigures::default()
    };
    let mut inst = client::connect_with(&uris, &creds).await?;
    let mut acked: Vec<u64> = Vec::with_capacity(usize::try_from(jobs).unwrap_or(0));
    let kill_at: Vec<u64> = (1..=u64::from(kills))
        .map(|k| jobs * k / (u64::from(kills) + 1))
        .collect();
    let started = Instant::now();
    let mut next = 0u64;
    while next < jobs {
        if fig.kills < kills && acked.len() as u64 >= kill_at[fig.kills as usize] {
            let leader = pair
                .leader()
                .await
                .ok_or_else(|| anyhow!("no job manager leads"))?;
            fig.failover_ms.push(pair.kill_leader(leader).await?);
            fig.kills += 1;
        }
        let n = BATCH.min(jobs - next);
        let request = pb::SubmitManyRequest {
            jobs: (next..next + n)
                .map(|i| pb::SubmitRequest {
                    jobspec: jobspec.clone(),
                    idempotency_key: format!("{name}-{i}"),
                    ..Default::default()
                })
                .collect(),
        };
        let answer = submit_retrying(&mut inst, request).await?;
        for r in answer.results {
            match r.result {
                Some(pb::submit_result::Result::Id(id)) => acked.push(id),
                Some(pb::submit_result::Result::Error(e)) => bail!("a job was refused: {e}"),
                None => bail!("a submit result is empty"),
            }
        }
        next += n;
    }
    fig.acked = acked.len() as u64;
    if let Some(path) = acked_file {
        let text: String = acked.iter().map(|id| format!("{id}\n")).collect();
        std::fs::write(path, text).with_context(|| format!("--acked-file {}", path.display()))?;
    }
    // Every acknowledged job must end, on whichever job manager leads.
    let want: HashSet<u64> = acked.iter().copied().collect();
    let deadline = Instant::now() + START_TIMEOUT;
    let (inactive, all) = loop {
        let (inactive, all) = list_run(&mut inst, &name).await?;
        if want.iter().all(|id| inactive.contains(id)) || Instant::now() > deadline {
            break (inactive, all);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    fig.jobs_per_sec = Some(fig.acked as f64 / started.elapsed().as_secs_f64());
    fig.lost = want.iter().filter(|id| !inactive.contains(id)).count() as u64;
    fig.duplicates = all.len().saturating_sub(want.len()) as u64;
    Ok(fig)
}

/// SubmitMany until a leader answers, reconnecting across a failover.
async fn submit_retrying(
    inst: &mut Instance,
    request: pb::SubmitManyRequest,
) -> anyhow::Result<pb::SubmitManyResponse> {
    let deadline = Instant::now() + client::FAILOVER_TIMEOUT;
    loop {
        match inst.jobs.submit_many(request.clone()).await {
            Ok(r) => return Ok(r.into_inner()),
            Err(s) if client::is_failover(&s) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if let Err(e) = inst.reconnect().await {
                    eprintln!("fluxgate-bench: reconnecting: {e:#}");
                }
            }
            Err(s) => return Err(client::status_error(s)),
        }
    }
}

/// The run's jobs the leader lists: those inactive, and all.
async fn list_run(inst: &mut Instance, name: &str) -> anyhow::Result<(HashSet<u64>, HashSet<u64>)> {
    let mut inactive = HashSet::new();
    let mut all = HashSet::new();
    let mut before = 0;
    loop {
        let page = match inst
            .jobs
            .list(pb::ListRequest {
                states: 127,
                name: Some(name.to_string()),
                before,
                ..Default::default()
            })
            .await
        {
            Ok(p) => p.into_inner(),
            Err(s) if client::is_failover(&s) => {
                inst.reconnect().await?;
                continue;
            }
            Err(s) => return Err(client::status_error(s)),
        };
        for j in &page.jobs {
            all.insert(j.id);
            if j.state == "INACTIVE" {
                inactive.insert(j.id);
            }
        }
        if page.next == 0 {
            return Ok((inactive, all));
        }
        before = page.next;
    }
}

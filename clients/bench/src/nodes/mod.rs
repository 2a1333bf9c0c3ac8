//! `fluxgate bench nodes`: a job manager facing thousands of nodes.
//!
//! The nodes are simulated by child processes of this one (`sim-nodes`,
//! at most 8,192 nodes each), each node as a real exec service would be to
//! its parent: its own connection and `Node.Join` stream, a hello naming
//! one node, a heartbeat at the interval the welcome gives. With
//! `--fanout K` the nodes join through real relays (`fluxgate-exec --relay
//! --virtual 0`), K nodes to a relay and K relays to a relay above, so the
//! job manager holds at most K streams. Every node announces its process's
//! exec address: a session that finishes each job at once (as test
//! execution does), so what is measured is the job manager's own work:
//!
//! - relays up: from the first relay's start until every relay listens;
//! - join: from the first node's connection until the job manager counts
//!   every node up, and the job manager's CPU time over it;
//! - idle CPU: the job manager's CPU time over a window in which only
//!   heartbeats arrive, as a share of one core;
//! - start: a job on every node, from its `submit` to its `start` event
//!   (allocation, R, the start request to the leader and its answer);
//!   teardown: its `finish` to its `clean`; the longest the core took to
//!   answer a status request meanwhile;
//! - RSS of the job manager and of the largest relay.

pub mod child;
mod latency;
pub mod sim;
pub mod tree;

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::JobspecBuilder;
use serde_json::{Value, json};

use super::target::Target;
use fluxgate_cli::client;

/// Time allowed for every node to join.
const JOIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The figures of one run.
#[derive(Debug, Clone, Default)]
pub struct NodeFigures {
    /// Nodes simulated.
    pub nodes: u32,
    /// Nodes (or relays) per relay; 0 when the nodes join directly.
    pub fanout: u32,
    /// Relays started.
    pub relays: u32,
    /// First relay started -> every relay listening, seconds.
    pub relays_up_s: Option<f64>,
    /// First node's connection -> every node up, seconds.
    pub join_s: Option<f64>,
    /// The job manager's CPU time over the join, seconds.
    pub join_cpu_s: Option<f64>,
    /// Job manager CPU while only heartbeats arrive, percent of one core.
    pub idle_cpu_percent: Option<f64>,
    /// Heartbeat interval the job manager asked for, seconds.
    pub heartbeat_s: Option<f64>,
    /// A job on every node: `submit` -> `start`, seconds.
    pub start_s: Option<f64>,
    /// The same job: `alloc` -> `start`, seconds.
    pub alloc_to_start_s: Option<f64>,
    /// The same job: `finish` -> `clean`, seconds.
    pub teardown_s: Option<f64>,
    /// The longest the core took to answer a status request while the job
    /// started and ended, milliseconds.
    pub core_latency_max_ms: Option<f64>,
    /// Job manager resident memory with every node joined.
    pub rss_bytes: Option<u64>,
    /// The largest relay's resident memory then.
    pub relay_rss_bytes: Option<u64>,
    /// What went wrong, if the run did not finish.
    pub error: Option<String>,
}

impl NodeFigures {
    /// One JSON object.
    pub fn json(&self) -> Value {
        json!({
            "workload": "nodes",
            "nodes": self.nodes,
            "fanout": self.fanout,
            "relays": self.relays,
            "relays_up_s": self.relays_up_s,
            "join_s": self.join_s,
            "join_cpu_s": self.join_cpu_s,
            "idle_cpu_percent": self.idle_cpu_percent,
            "heartbeat_s": self.heartbeat_s,
            "start_s": self.start_s,
            "alloc_to_start_s": self.alloc_to_start_s,
            "teardown_s": self.teardown_s,
            "core_latency_max_ms": self.core_latency_max_ms,
            "rss_bytes": self.rss_bytes,
            "relay_rss_bytes": self.relay_rss_bytes,
            "error": self.error,
            "loadavg": super::figures::loadavg(),
        })
    }

    /// One table line.
    pub fn line(&self) -> String {
        let f = |v: Option<f64>, d: usize| v.map_or("-".into(), |x| format!("{x:.d$}"));
        let mb = |b: Option<u64>| b.map_or("-".into(), |b| format!("{:.1}M", b as f64 / 1048576.0));
        format!(
            "nodes {:>6}  fanout {:>3} ({} relays up in {}s)  join {:>7}s (job manager cpu {}s)  idle cpu {:>6}% (heartbeat {}s)  \
             start {:>7}s (alloc->start {}s)  teardown {}s  core max {}ms  rss {} (relay {}){}",
            self.nodes,
            self.fanout,
            self.relays,
            f(self.relays_up_s, 2),
            f(self.join_s, 2),
            f(self.join_cpu_s, 2),
            f(self.idle_cpu_percent, 2),
            f(self.heartbeat_s, 1),
            f(self.start_s, 3),
            f(self.alloc_to_start_s, 3),
            f(self.teardown_s, 3),
            f(self.core_latency_max_ms, 1),
            mb(self.rss_bytes),
            mb(self.relay_rss_bytes),
            self.error
                .as_ref()
                .map_or(String::new(), |e| format!("  FAILED: {e}")),
        )
    }
}

/// Let this process and the job manager it starts hold a connection per
/// node: raise the soft limit on open files to the hard one.
pub fn raise_open_files(nodes: u32) -> anyhow::Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    // Each side holds one socket per node, and a few hundred more files.
    let want = u64::from(nodes) + 512;
    if soft >= want {
        return Ok(());
    }
    if hard < want {
        bail!(
            "{nodes} nodes need about {want} open files; the hard limit is {hard} \
             (raise it with ulimit -Hn as root)"
        );
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    Ok(())
}

/// Nodes one simulating process holds (a connection each: well below the
/// 20,000 open files a process may have on some machines).
const NODES_PER_PROCESS: u32 = 8192;

/// The processes of one run besides the job manager: the relays and the
/// simulating processes; the latter end when their standard input closes.
struct Fleet {
    sims: Vec<tokio::process::Child>,
    relays: Vec<u32>,
}

impl Fleet {
    /// A simulating process that exited has failed: say so.
    fn check(&mut self) -> anyhow::Result<()> {
        for sim in &mut self.sims {
            if let Some(status) = sim.try_wait()? {
                bail!("a simulating process exited ({status}); its error is above");
            }
        }
        Ok(())
    }

    /// The largest resident memory of a relay.
    fn relay_rss(&self) -> Option<u64> {
        self.relays
            .iter()
            .filter_map(|pid| super::target::vm_rss(*pid))
            .max()
    }
}

/// Start the relays of a tree over `nodes` with `fanout` (top level first,
/// each joined to the level above, the top to the job manager): the
/// addresses of the lowest level, or the job manager's when there is no
/// relay, and every relay's pid and address.
fn spawn_relays(
    target: &mut Target,
    nodes: u32,
    fanout: u32,
) -> anyhow::Result<(Vec<String>, Vec<u32>, Vec<String>)> {
    let uri = target.uri().to_string();
    let local = target.local()?;
    let mut above = vec![uri];
    let mut pids = Vec::new();
    let mut all = Vec::new();
    for (level, count) in tree::levels(nodes, fanout).into_iter().enumerate() {
        let mut this = Vec::with_capacity(count as usize);
        for j in 0..count {
            let parent = &above[(j / fanout) as usize];
            let listen = tree::free_addr()?;
            pids.push(local.relay(parent, &listen, &format!("relay-{level}-{j}"))?);
            this.push(format!("http://{listen}"));
            all.push(listen);
        }
        above = this;
    }
    Ok((above, pids, all))
}

/// Wait until every relay of `addrs` takes connections (they take their
/// children's joins once joined themselves).
async fn wait_listening(addrs: &[String], fleet: &mut Fleet) -> anyhow::Result<()> {
    let deadline = Instant::now() + JOIN_TIMEOUT;
    for addr in addrs {
        while tokio::net::TcpStream::connect(addr.as_str()).await.is_err() {
            fleet.check()?;
            if Instant::now() > deadline {
                bail!(
                    "relay {addr} did not listen within {}s",
                    JOIN_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Start the simulating processes, each with its slice of the nodes
/// joining `parents`; wait until each says it is ready: the heartbeat
/// interval they were given.
async fn spawn_sims(
    fleet: &mut Fleet,
    nodes: u32,
    fanout: u32,
    parents: &[String],
) -> anyhow::Result<Option<f64>> {
    use tokio::io::AsyncBufReadExt;
    let exe = std::env::current_exe().context("cannot find this program to run its nodes")?;
    let mut first = 0;
    while first < nodes {
        let count = NODES_PER_PROCESS.min(nodes - first);
        let sim = tokio::process::Command::new(&exe)
            .arg("sim-nodes")
            .arg(format!("--first={first}"))
            .arg(format!("--nodes={count}"))
            .arg(format!("--fanout={fanout}"))
            .arg(format!("--parents={}", parents.join(",")))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start a simulating process")?;
        fleet.sims.push(sim);
        first += count;
    }
    let mut every = None;
    for sim in &mut fleet.sims {
        let out = sim.stdout.take().context("a simulating process's stdout")?;
        let mut line = String::new();
        let deadline = tokio::time::Instant::now() + JOIN_TIMEOUT;
        tokio::time::timeout_at(
            deadline,
            tokio::io::BufReader::new(out).read_line(&mut line),
        )
        .await
        .map_err(|_| anyhow!("a simulating process did not join its nodes in time"))??;
        let Some(s) = line.trim().strip_prefix("ready ") else {
            bail!("a simulating process failed before joining its nodes (its error is above)");
        };
        every = s.parse::<f64>().ok().filter(|s| *s > 0.0).or(every);
    }
    Ok(every)
}

/// Run one measurement against `target`, a job manager of `nodes` hosts
/// `sim[0-N]` that no exec service serves yet, the nodes joining it through
/// relays of `fanout` (0: directly).
pub async fn run(
    target: &mut Target,
    nodes: u32,
    fanout: u32,
    idle: Duration,
) -> anyhow::Result<NodeFigures> {
    let mut fig = NodeFigures {
        nodes,
        fanout,
        ..Default::default()
    };
    let t0 = Instant::now();
    let (parents, relays, listening) = spawn_relays(target, nodes, fanout)?;
    fig.relays = relays.len() as u32;
    let mut fleet = Fleet {
        sims: Vec::new(),
        relays,
    };
    wait_listening(&listening, &mut fleet).await?;
    fig.relays_up_s = Some(t0.elapsed().as_secs_f64());
    // The nodes' join, through relays that are up (as when a machine's
    // nodes boot after its service nodes), and the job manager's CPU for it.
    let cpu = |t: &Target| t.jm_pid().and_then(super::cpu::own_seconds);
    let (t1, cpu0) = (Instant::now(), cpu(target));
    fig.heartbeat_s = spawn_sims(&mut fleet, nodes, fanout, &parents).await?;
    wait_all_up(target, nodes, &mut fleet).await?;
    fig.join_s = Some(t1.elapsed().as_secs_f64());
    if let (Some(a), Some(b)) = (cpu0, cpu(target)) {
        fig.join_cpu_s = Some(b - a);
    }
    fig.rss_bytes = target.jm_rss();
    fig.relay_rss_bytes = fleet.relay_rss();

    // Idle: heartbeats only.
    if let Some(pid) = target.jm_pid() {
        let before = super::cpu::own_seconds(pid);
        let t = Instant::now();
        tokio::time::sleep(idle).await;
        let after = super::cpu::own_seconds(pid);
        if let (Some(b), Some(a)) = (before, after) {
            fig.idle_cpu_percent = Some((a - b) / t.elapsed().as_secs_f64() * 100.0);
        }
    }
    fleet.check()?;

    // One job on every node, with the core's answer time watched meanwhile.
    let probe = latency::Probe::start(target).await?;
    let times = whole_machine_job(target, nodes).await?;
    fig.core_latency_max_ms = Some(probe.stop().await);
    fig.start_s = Some(times.start - times.submit);
    fig.alloc_to_start_s = Some(times.start - times.alloc);
    fig.teardown_s = Some(times.clean - times.finish);
    fleet.check()?;
    Ok(fig)
}

/// Wait until the job manager counts `nodes` up; a simulating process that
/// fails ends the wait.
async fn wait_all_up(target: &Target, nodes: u32, fleet: &mut Fleet) -> anyhow::Result<()> {
    let deadline = Instant::now() + JOIN_TIMEOUT;
    loop {
        fleet.check()?;
        if target.nodes().await == Some(u64::from(nodes)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{:?} of {nodes} nodes up after {}s",
                target.nodes().await,
                JOIN_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// When the whole-machine job's events were posted.
struct JobTimes {
    submit: f64,
    alloc: f64,
    start: f64,
    finish: f64,
    clean: f64,
}

/// Submit a test job on every node and wait for its end; the times of its
/// events.
async fn whole_machine_job(target: &Target, nodes: u32) -> anyhow::Result<JobTimes> {
    let mut inst = target.connect().await?;
    let jobspec = JobspecBuilder::new(["true"])
        .nodes(u64::from(nodes))
        .ntasks(u64::from(nodes))
        .name("bench-nodes")
        .cwd("/")
        .setattr_kv("system.exec.test.run_duration=0")
        .build()?
        .to_json();
    let id = inst
        .jobs
        .submit(pb::SubmitRequest {
            jobspec,
            ..Default::default()
        })
        .await
        .map_err(client::status_error)?
        .into_inner()
        .id;
    let mut stream = fluxgate_cli::cmd::jobs::attach::watch(
        &mut inst,
        fluxgate_shared::JobId::from(id),
        "eventlog",
        true,
        true,
    )
    .await?;
    let mut at = std::collections::HashMap::new();
    while let Some(line) = stream.message().await.map_err(client::status_error)? {
        let ev = client::parse_event(&line.line)?;
        if ev.name == "exception" {
            bail!("the whole-machine job failed: {}", line.line);
        }
        at.insert(ev.name.to_string(), ev.timestamp);
        if ev.name == "clean" {
            break;
        }
    }
    let get = |name: &str| {
        at.get(name)
            .copied()
            .ok_or_else(|| anyhow!("the whole-machine job has no {name} event"))
    };
    Ok(JobTimes {
        submit: get("submit")?,
        alloc: get("alloc")?,
        start: get("start")?,
        finish: get("finish")?,
        clean: get("clean")?,
    })
}

//! `fluxgate-bench WORKLOAD` (also `fluxgate bench WORKLOAD`): a load
//! generator that measures an instance, in its own binary so that the
//! user's command line does not carry it.
//!
//! Each run starts an instance of its own (job manager and exec service in
//! a temporary statedir, as `fluxgate start` does, torn down at the end
//! even on an error or a Ctrl-C) or, when `FLUXGATE_URI` is set, uses that
//! one. A run gives one row of figures: a table line, or with `--json` one
//! JSON object per line; a figure that cannot be measured is `null`.
//! The workloads and their figures are described in [`HELP`].

mod compare;
mod cpu;
mod failover;
mod figures;
mod held;
mod latency;
mod metrics;
mod nodes;
mod restart;
mod settle;
mod submit;
mod target;
mod throughput;

use std::process::ExitCode;

use anyhow::{anyhow, bail};

use fluxgate_cli::client;
use fluxgate_cli::output::{self, Mode};
use fluxgate_cli::services::Signals;

use figures::{Figures, Table};
use target::{NodeSpec, Target};

/// The man page of `fluxgate-bench`, shown by `--help`.
pub const HELP: &str = "\
WORKLOADS
  sim      N simulated jobs (attribute system.exec.test.run_duration=0,
           1 task on 1 core each) on K virtual nodes served by one exec
           process (fluxgate-exec --virtual K). --jobs and --nodes take
           comma lists and run every combination. Default: 2000 jobs, 1 node.
  real     N jobs running `true` on one real exec service (this machine's
           cores). Default: 1000 jobs.
  latency  N `fluxgate run true` one after the other, each a whole process
           (the fluxgate beside this one); p50/p99 are their wall times. Default: 100.
  held     N jobs submitted held (urgency 0); the job manager's memory
           before and after, and per job. Default: 1000000.
  restart  Fill the store with N inactive sim jobs and N/10 held ones, then
           stop the job manager (SIGTERM, then also SIGKILL) and time a new
           one on the same statedir from exec to answering health SERVING;
           median of 3 of each. Local instances only. Default: 100000.
  nodes    --nodes K simulated nodes (default 4096), each its own
           connection, join stream and heartbeat, spread over child
           processes of 8192 nodes, each serving an exec session that ends
           every job at once. With --fanout F the nodes join through real
           relays (fluxgate-exec --relay --virtual 0), F to a relay and F
           relays to one above, so the job manager holds at most F streams.
           Prints, per run: relays_up_s (first relay started -> all
           listening), join_s (first node's connection -> every node up)
           and join_cpu_s (the job manager's CPU over it), idle_cpu_percent (the job manager's CPU over --idle seconds
           of heartbeats only, percent of one core), start_s and
           alloc_to_start_s (a job on every node: submit or alloc ->
           start), teardown_s (its finish -> clean), core_latency_max_ms
           (the longest status answer meanwhile), rss_bytes of the job
           manager and relay_rss_bytes of the largest relay. Local
           instances only; without --fanout the open-file limit must fit
           one connection per node.
  failover N simulated jobs (default 5000) on two job managers sharing the
           PostgreSQL store of --store-url (required), the leader SIGKILLed
           --kills times (default 3) while jobs are submitted and run, each
           killed one restarted as the next standby. Prints jobs, acked,
           lost (acknowledged but not inactive on the final leader),
           duplicates, failover_ms_max and failover_ms_p50 (kill -> the
           standby serving) and jobs_per_sec; --acked-file F writes every
           acknowledged job id, one per line, decimal.

FIGURES (one row per run; null when not measurable)
  jobs_per_sec       jobs / (last t_inactive - first t_submit), the job
                     manager's own timestamps (sim, real); jobs / total
                     wall time (latency)
  submit_per_sec     jobs / time from the first SubmitMany sent until the
                     last one was answered (batches are pipelined)
  sched_per_sec      jobs / (last t_run - first t_run): jobs started per second
  p50_ms, p99_ms     submit -> start (t_run - t_submit) for sim and real;
                     wall time of each `fluxgate run` for latency
  rss_bytes          the job manager's VmRSS at the end (local instance)
  rss_per_job_bytes  (held) RSS growth over the submission / jobs
  events_per_commit  events made durable per store transaction during the
                     run, from the job manager's Prometheus counters
  failed             (sim, real) jobs that did not complete; how they ended
                     is summed up on standard error
  restart_ms         (restart) exec of a new job manager -> health SERVING
                     after SIGTERM; restart_sigkill_ms after SIGKILL;
                     stop_ms: SIGTERM -> exit
  cpu_ms_per_job     (sim, real, latency; local instance) CPU milliseconds
                     per job over the run, from /proc: job_manager, exec
                     (the exec services' own) and tasks (what they reaped).
                     It moves far less with the machine's other load than
                     a rate does, so it is what compares two builds
  loadavg            /proc/loadavg (1, 5, 15 minutes) when the run started

INSTANCE
  The local instance's job manager serves Prometheus metrics on a free
  loopback port (metrics.listen) so events_per_commit can be read; its log
  and the exec log are in the temporary statedir (-v prints where). With
  FLUXGATE_URI set the bench submits to that instance instead, on its own
  nodes (--nodes and the restart workload need a local instance); pass
  --metrics ADDR for its counters. Jobs are named bench-WORKLOAD-PID-RUN so
  that they are told apart from others; held jobs are cancelled at the end.

EXAMPLES
  fluxgate bench sim --jobs 2000,10000 --nodes 1,16,1024 --json
  fluxgate bench real --runs 3
  FLUXGATE_URI=http://10.0.0.1:7000 fluxgate bench latency --jobs 50";

/// What `fluxgate bench` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Simulated jobs on virtual nodes.
    Sim,
    /// `true` jobs on this machine.
    Real,
    /// Sequential `fluxgate run true`.
    Latency,
    /// Held jobs and the job manager's memory.
    Held,
    /// Job manager restart time on a full store.
    Restart,
    /// Thousands of nodes joining, idling and starting one job.
    Nodes,
    /// Leader kills on a PostgreSQL store with a standby.
    Failover,
    /// One process's share of the nodes workload's simulated nodes (run
    /// by that workload, not by hand).
    #[value(hide = true)]
    SimNodes,
}

impl Workload {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Sim => "sim",
            Workload::Real => "real",
            Workload::Latency => "latency",
            Workload::Held => "held",
            Workload::Restart => "restart",
            Workload::Nodes => "nodes",
            Workload::Failover => "failover",
            Workload::SimNodes => "sim-nodes",
        }
    }

    fn default_jobs(self) -> u64 {
        match self {
            Workload::Sim => 2000,
            Workload::Real => 1000,
            Workload::Latency => 100,
            Workload::Held => 1_000_000,
            Workload::Restart => 100_000,
            Workload::Nodes => 1,
            Workload::Failover => 5000,
            Workload::SimNodes => 1,
        }
    }
}

/// Arguments of `fluxgate bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to run: sim, real, latency, held or restart.
    #[arg(value_enum, value_name = "WORKLOAD")]
    workload: Workload,
    /// Number of jobs; a comma list runs each (default: sim 2000, real 1000,
    /// latency 100, held 1000000, restart 100000).
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',')]
    jobs: Vec<u64>,
    /// Number of virtual nodes for sim; a comma list runs each [default: 1].
    #[arg(long, value_name = "K[,K...]", value_delimiter = ',')]
    nodes: Vec<u32>,
    /// Cores of each virtual node [default: 64]; for real and latency, of
    /// the one node (default: the exec service's own discovery).
    #[arg(long, value_name = "N")]
    cores_per_node: Option<u32>,
    /// Runs of each combination.
    #[arg(long, value_name = "N", default_value_t = 1)]
    runs: u32,
    /// Jobs per SubmitMany request (at most the job manager's limits.max_batch).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    batch: u32,
    /// SubmitMany requests in flight at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    inflight: u32,
    /// Seconds a run may take before it is abandoned.
    #[arg(long, value_name = "SECS", default_value_t = 3600.0)]
    timeout: f64,
    /// Prometheus endpoint of the instance named by FLUXGATE_URI
    /// (ADDR or http://ADDR/metrics), for events_per_commit.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Nodes workload: the nodes join through relays, K nodes to a relay
    /// and K relays to a relay above, so the job manager holds at most K
    /// streams [default: 0, every node joins the job manager].
    #[arg(long, value_name = "K", default_value_t = 0)]
    fanout: u32,
    /// sim-nodes: the index of the first node of this process.
    #[arg(long, hide = true, default_value_t = 0)]
    first: u32,
    /// sim-nodes: where the nodes join (the job manager, or the lowest
    /// relays in node order).
    #[arg(long, hide = true, value_delimiter = ',')]
    parents: Vec<String>,
    /// Seconds the nodes workload watches the job manager with only
    /// heartbeats arriving.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    idle: f64,
    /// The job manager's store: a PostgreSQL URL (failover needs one; sim,
    /// real, latency and held use it instead of SQLite when given).
    #[arg(long, value_name = "URL")]
    store_url: Option<String>,
    /// Leader kills in a failover run.
    #[arg(long, value_name = "K", default_value_t = 3)]
    kills: u32,
    /// Write every acknowledged job id of a failover run to FILE.
    #[arg(long, value_name = "FILE")]
    acked_file: Option<std::path::PathBuf>,
    /// Run the same real workload on HyperQueue (the `hq` binary at PATH)
    /// after each run, and print its rate and the ratio.
    #[arg(long, value_name = "PATH")]
    compare_hq: Option<std::path::PathBuf>,
    /// Run the same real or sim workload on Flux (the `flux` binary at
    /// PATH) after each run, and print its rate and the ratio.
    #[arg(long, value_name = "PATH")]
    compare_flux: Option<std::path::PathBuf>,
    /// One JSON object per run instead of a table.
    #[arg(long)]
    json: bool,
    /// Print where each local instance keeps its logs, on standard error.
    #[arg(short, long)]
    verbose: bool,
}

/// One combination of the matrix.
#[derive(Debug, Clone, Copy)]
struct Case {
    jobs: u64,
    nodes: Option<u32>,
    run: u32,
}

/// Everything a workload needs to run once.
#[derive(Debug)]
pub struct Run<'a> {
    /// The command's arguments.
    pub args: &'a Args,
    /// Jobs of this run.
    pub jobs: u64,
    /// A job name no other run uses, so that listings find only this run.
    pub name: String,
}

impl Args {
    fn cases(&self) -> anyhow::Result<Vec<Case>> {
        if self.jobs.contains(&0) {
            bail!("--jobs must be at least 1");
        }
        if self.nodes.contains(&0) {
            bail!("--nodes must be at least 1");
        }
        if self.runs == 0 {
            bail!("--runs must be at least 1");
        }
        if self.batch == 0 || self.inflight == 0 {
            bail!("--batch and --inflight must be at least 1");
        }
        if !(self.timeout.is_finite() && self.timeout > 0.0) {
            bail!("--timeout must be a positive number of seconds");
        }
        if !self.nodes.is_empty() && !matches!(self.workload, Workload::Sim | Workload::Nodes) {
            bail!("--nodes applies to the sim and nodes workloads only");
        }
        if self.compare_hq.is_some() && self.workload != Workload::Real {
            bail!("--compare-hq applies to the real workload only: HyperQueue runs real tasks");
        }
        if self.compare_flux.is_some() && !matches!(self.workload, Workload::Real | Workload::Sim) {
            bail!("--compare-flux applies to the real and sim workloads only");
        }
        let jobs = if self.jobs.is_empty() {
            vec![self.workload.default_jobs()]
        } else {
            self.jobs.clone()
        };
        let nodes: Vec<Option<u32>> = match (self.workload, self.nodes.is_empty()) {
            (Workload::Sim, true) => vec![Some(1)],
            (Workload::Sim, false) => self.nodes.iter().copied().map(Some).collect(),
            _ => vec![None],
        };
        let mut cases = Vec::new();
        for &j in &jobs {
            for &n in &nodes {
                for run in 1..=self.runs {
                    cases.push(Case {
                        jobs: j,
                        nodes: n,
                        run,
                    });
                }
            }
        }
        Ok(cases)
    }

    /// The nodes a local instance for this workload has.
    fn node_spec(&self, nodes: Option<u32>) -> NodeSpec {
        match self.workload {
            Workload::Real | Workload::Latency => NodeSpec::Real {
                cores: self.cores_per_node,
            },
            _ => NodeSpec::Virtual {
                count: nodes.unwrap_or(1),
                cores: self.cores_per_node.unwrap_or(64),
            },
        }
    }
}

/// `fluxgate-bench`: measure an instance.
#[derive(Debug, clap::Parser)]
#[command(name = "fluxgate-bench", version, about, after_long_help = HELP)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn main() -> ExitCode {
    let cli = <Cli as clap::Parser>::parse();
    // As `fluxgate start`, before any service is started: descriptors the
    // calling shell left open must not reach the services. A failure leaves
    // them open, which is no worse than before; say so.
    if let Err(e) = fluxgate_os::fds::close_inherited() {
        eprintln!("fluxgate-bench: cannot close inherited descriptors: {e}");
    }
    match run(cli.args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("fluxgate-bench: {}", output::printable(&format!("{err:#}")));
            ExitCode::FAILURE
        }
    }
}

/// Run the workload `args` name.
fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.workload == Workload::SimNodes {
        let slice = nodes::child::Slice {
            first: args.first,
            count: args.nodes.first().copied().unwrap_or(1),
            parents: args.parents.clone(),
            fanout: args.fanout,
        };
        client::runtime()?.block_on(nodes::child::run(slice))?;
        return Ok(ExitCode::SUCCESS);
    }
    let cases = args.cases()?;
    let remote = std::env::var(client::URI_ENV)
        .ok()
        .filter(|u| !u.is_empty());
    if remote.is_some() {
        if args.workload == Workload::Restart {
            bail!(
                "the restart workload stops and starts the job manager, which it cannot do to \
                 the remote instance {}: unset {} to run it on an instance of its own",
                remote.as_deref().unwrap_or_default(),
                client::URI_ENV
            );
        }
        if !args.nodes.is_empty() {
            bail!(
                "--nodes starts virtual nodes, which it cannot do in the remote instance named \
                 by {}: unset it to run on an instance of its own",
                client::URI_ENV
            );
        }
    }
    if args.workload == Workload::Failover {
        return run_failover(&args, &cases);
    }
    if args.workload == Workload::Nodes {
        if remote.is_some() {
            bail!(
                "the nodes workload joins simulated nodes to an instance of its own: unset {}",
                client::URI_ENV
            );
        }
        return run_nodes(&args);
    }
    let mode = Mode::from_flags(args.json, false);
    let rt = client::runtime()?;
    // Handlers first: a Ctrl-C must not kill us before the services (in a
    // process group of their own, out of the terminal's reach) are down.
    let mut signals = {
        let _guard = rt.enter();
        Signals::new()?
    };
    // The instance of the current run lives outside the run's future, so
    // that it is shut down (letting the runtime close our connections, which
    // a job manager waits for) however the run ends.
    let mut instance: Option<Target> = None;
    rt.block_on(async {
        let result = tokio::select! {
            r = run_cases(&args, &cases, remote.as_deref(), mode, &mut instance) => r,
            s = signals.any() => Err(anyhow!("interrupted by {s}")),
        };
        if let Some(t) = instance.take() {
            t.shutdown().await;
        }
        result
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `fluxgate bench failover`: each `--jobs` count, `--runs` times.
fn run_failover(args: &Args, cases: &[Case]) -> anyhow::Result<ExitCode> {
    let Some(url) = args.store_url.as_deref() else {
        bail!(
            "the failover workload needs --store-url postgres://…: its job managers share that store"
        );
    };
    let rt = client::runtime()?;
    let mut signals = {
        let _guard = rt.enter();
        Signals::new()?
    };
    let mut failed = false;
    rt.block_on(async {
        for case in cases {
            let run = failover::run(
                url,
                case.jobs,
                args.kills,
                args.acked_file.as_deref(),
                args.verbose,
            );
            let fig = bounded(args, &mut signals, run).await?;
            failed |= fig.lost > 0 || fig.duplicates > 0;
            print_row(args.json, || fig.json(), || fig.line());
        }
        Ok::<(), anyhow::Error>(())
    })?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `run`, abandoned after `--timeout` or at a signal.
async fn bounded<T>(
    args: &Args,
    signals: &mut Signals,
    run: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let timeout = std::time::Duration::from_secs_f64(args.timeout);
    tokio::select! {
        r = tokio::time::timeout(timeout, run) => r.unwrap_or_else(|_| {
            Err(anyhow!("the run took longer than --timeout {}s", args.timeout))
        }),
        s = signals.any() => Err(anyhow!("interrupted by {s}")),
    }
}

/// One run's row: a JSON object with `--json`, else a line of text.
fn print_row(json: bool, as_json: impl FnOnce() -> String, as_line: impl FnOnce() -> String) {
    println!("{}", if json { as_json() } else { as_line() });
}

/// `fluxgate bench nodes`: each `--nodes` count, `--runs` times, on an
/// instance of its own.
fn run_nodes(args: &Args) -> anyhow::Result<ExitCode> {
    let counts = if args.nodes.is_empty() {
        vec![4096]
    } else {
        args.nodes.clone()
    };
    // The job manager (started from here) holds a stream per node it
    // takes directly: every node, or at most --fanout.
    let direct = counts.iter().copied().max().unwrap_or(1);
    nodes::raise_open_files(if args.fanout == 0 {
        direct
    } else {
        direct.min(args.fanout)
    })?;
    let rt = client::runtime()?;
    let mut signals = {
        let _guard = rt.enter();
        Signals::new()?
    };
    let mut failed = false;
    rt.block_on(async {
        for &count in &counts {
            for _ in 0..args.runs {
                let mut target = Target::start(
                    NodeSpec::Streams { count },
                    args.store_url.as_deref(),
                    args.verbose,
                )
                .await?;
                let idle = std::time::Duration::try_from_secs_f64(args.idle)
                    .map_err(|_| anyhow!("--idle must be a number of seconds"))?;
                let measured = bounded(
                    args,
                    &mut signals,
                    nodes::run(&mut target, count, args.fanout, idle),
                )
                .await;
                target.shutdown().await;
                let fig = measured.unwrap_or_else(|e| {
                    failed = true;
                    nodes::NodeFigures {
                        nodes: count,
                        fanout: args.fanout,
                        error: Some(format!("{e:#}")),
                        ..Default::default()
                    }
                });
                print_row(args.json, || fig.json().to_string(), || fig.line());
            }
        }
        Ok::<(), anyhow::Error>(())
    })?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn run_cases(
    args: &Args,
    cases: &[Case],
    remote: Option<&str>,
    mode: Mode,
    instance: &mut Option<Target>,
) -> anyhow::Result<()> {
    let mut table = Table::default();
    for (seq, case) in cases.iter().enumerate() {
        let loadavg = figures::loadavg();
        let run = Run {
            args,
            jobs: case.jobs,
            name: format!(
                "bench-{}-{}-{}",
                args.workload.name(),
                std::process::id(),
                seq + 1
            ),
        };
        let target = instance.insert(match remote {
            Some(uri) => Target::remote(uri, args.metrics.as_deref()),
            None => {
                Target::start(
                    args.node_spec(case.nodes),
                    args.store_url.as_deref(),
                    args.verbose,
                )
                .await?
            }
        });
        let mut fig = Figures::new(args.workload.name(), case.jobs, case.run, loadavg);
        fig.remote = remote.is_some();
        fig.nodes = target.nodes().await;
        fig.cores_per_node = target.cores_per_node();
        let timeout = std::time::Duration::from_secs_f64(args.timeout);
        let measured = tokio::time::timeout(timeout, async {
            match args.workload {
                Workload::Sim | Workload::Real => throughput::run(&run, target, &mut fig).await,
                Workload::Latency => latency::run(&run, target, &mut fig).await,
                Workload::Held => held::run(&run, target, &mut fig).await,
                Workload::Restart => restart::run(&run, target, &mut fig).await,
                Workload::Nodes | Workload::Failover | Workload::SimNodes => {
                    Err(anyhow!("this workload runs on its own"))
                }
            }
        })
        .await
        .map_err(|_| anyhow!("the run took longer than --timeout {}s", args.timeout))?;
        measured?;
        fig.rss_bytes = target.jm_rss();
        if let Some(t) = instance.take() {
            t.shutdown().await;
        }
        if mode == Mode::Table {
            table.header_once(loadavg);
        }
        output::emit(mode, &fig)?;
        for peer in args.peers() {
            let theirs = compare::run(
                &peer,
                args.workload.name(),
                case.jobs,
                case.nodes.unwrap_or(1),
            )
            .await?;
            let ours = fig.jobs_per_sec.unwrap_or(0.0);
            if args.json {
                let mut row = theirs.json();
                row["ratio"] = serde_json::json!(ours / theirs.jobs_per_sec());
                println!("{row}");
            } else {
                println!("{}", theirs.line());
                println!("{}", theirs.ratio_line(ours));
            }
        }
    }
    Ok(())
}

impl Args {
    /// The job managers to measure beside Fluxgate.
    fn peers(&self) -> Vec<compare::Peer> {
        let hq = self.compare_hq.clone().map(compare::Peer::HyperQueue);
        let flux = self.compare_flux.clone().map(compare::Peer::Flux);
        hq.into_iter().chain(flux).collect()
    }
}

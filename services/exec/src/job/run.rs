//! One job's driver on one exec process: launch the local ranks' tasks, fan
//! out to peers (leader only), merge everything into RFC 32 responses.
//!
//! Leader stream (RFC 32, RFC 50, RFC 24; compare the flux-core goldens):
//!
//! ```text
//! exec_event init, exec_event starting, output header [, redirect...]
//! start                      once local tasks and every peer have launched
//! output data/eof/log ...    as tasks write
//! exception{exec,0,note}     a task could not start (after its `log` line)
//! exec_event shell-exit      when the first rank's tasks have all exited
//! exec_event complete{status}, finish{status}, exec_event done
//! release{ranks:"all", final:true}   always last
//! ```
//!
//! `status` is the largest shell wait status over all ranks (see
//! [`crate::status`]). A severity 0 exception (from the job manager, a peer, or
//! a failed launch) tears the job down: SIGALRM for type `timeout`, SIGTERM
//! otherwise, SIGKILL to whatever is left after the kill timeout.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fluxgate_proto::v1::start_response::Response;
use fluxgate_proto::v1::{ExecException, Finish, NodeUsage, Release, StartRequest, StartResponse};
use fluxgate_shared::{IdSet, JobId, Jobspec};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::contain::Contain;
use super::peer::{Peer, PeerEvent};
use super::procs::{Procs, TaskProc};
use super::usage;
use super::{Control, JobChannels, response};
use crate::cgroup::{Cgroups, JobCgroup};
use crate::event::{context, line};
use crate::files;
use crate::handoff::{Access, FileRequest};
use crate::layout::{Layout, RankTasks};
use crate::output::{self, Redirects};
use crate::rlimit;
use crate::run_as::RunAs;
use crate::status::WaitStatus;
use crate::task::{self, Stream, Task, TaskEvent, TaskSpec};
use crate::telemetry;

/// Task events queued from all local tasks of a job.
const TASK_EVENT_CAPACITY: usize = 256;
/// Responses queued from all peers of a job.
const PEER_EVENT_CAPACITY: usize = 256;
/// The variable a task finds its job's own credential in.
const TOKEN_VAR: &str = "FLUXGATE_TOKEN";

/// Everything needed to run a job's part on this process, checked and parsed.
#[derive(Debug)]
pub struct Launch {
    /// The job.
    pub id: JobId,
    /// Owner, passed on to peers.
    pub userid: u32,
    /// The jobspec, parsed.
    pub jobspec: Jobspec,
    /// Jobspec and R as received, passed on to peers.
    pub jobspec_text: String,
    /// R as received.
    pub r_text: String,
    /// Task placement over all of R.
    pub layout: Layout,
    /// True for the leader's request (the whole job), false for a peer's part.
    pub leader: bool,
    /// Ranks this process runs itself.
    pub local: Vec<RankTasks>,
    /// Other exec services and their ranks (leader only).
    pub peers: Vec<Peer>,
    /// The job manager's rank → address map, passed on to peers.
    pub peer_addresses: HashMap<u32, String>,
    /// Grace between the first signal and SIGKILL.
    pub kill_timeout: Duration,
    /// Output files (leader only).
    pub redirects: Redirects,
    /// The job owner's identity, when tasks must switch to it.
    pub run_as: Option<RunAs>,
    /// The job's own credential for its tasks' `FLUXGATE_TOKEN` (may be empty).
    pub credential: String,
    /// Where the job's cgroup is made.
    pub cgroups: Arc<Cgroups>,
}

#[derive(Debug, Default)]
struct PeerState {
    started: bool,
    done: bool,
}

struct Driver {
    id: u64,
    leader: bool,
    out: mpsc::Sender<StartResponse>,
    status: i32,
    start_sent: bool,
    tasks: HashMap<u32, Task>,
    /// Local rank index of each local task.
    task_rank: HashMap<u32, usize>,
    rank_left: Vec<u32>,
    rank_statuses: Vec<Vec<WaitStatus>>,
    local: Vec<RankTasks>,
    leader_rank: u32,
    peers: Vec<Peer>,
    peer_state: Vec<PeerState>,
    kill_timeout: Duration,
    kill_at: Option<Instant>,
    torn_down: bool,
    files: Vec<tokio::fs::File>,
    stream_file: [Option<usize>; 2],
    expiration: Option<f64>,
    /// The processes of the tasks launched, for `Exec.Tasks`.
    procs: Arc<Procs>,
    /// This machine's name, looked up once, for ranks R names no host for.
    local_hostname: Option<String>,
    /// The job's cgroup here.
    contain: Contain,
    /// What the job used, per node, as the nodes finish.
    usage: Vec<NodeUsage>,
}

/// Run a job's part to the end, writing its responses.
pub async fn run(l: Launch, ch: JobChannels) {
    let JobChannels {
        responses,
        mut control,
        procs,
    } = ch;
    // The peers are known now, the tasks as they are launched.
    procs.set_peers(l.peers.clone());
    let mut d = Driver {
        id: l.id.into(),
        leader: l.leader,
        out: responses,
        status: 0,
        start_sent: false,
        tasks: HashMap::new(),
        task_rank: HashMap::new(),
        rank_left: l.local.iter().map(|r| r.ntasks).collect(),
        rank_statuses: vec![Vec::new(); l.local.len()],
        local: l.local.clone(),
        leader_rank: l.layout.leader_rank(),
        peers: l.peers.clone(),
        peer_state: l.peers.iter().map(|_| PeerState::default()).collect(),
        kill_timeout: l.kill_timeout,
        kill_at: None,
        torn_down: false,
        files: Vec::new(),
        stream_file: [None, None],
        expiration: None,
        procs,
        local_hostname: None,
        contain: Contain::default(),
        usage: Vec::new(),
    };
    if d.leader {
        d.exec_event("init", None).await;
        d.exec_event("starting", None).await;
    }
    if let Some(secs) = l.jobspec.test_run_duration() {
        d.run_test(secs, &mut control).await;
        return;
    }
    if d.leader {
        d.output(output::header(l.layout.ntasks)).await;
        if let Err(note) = d.open_redirects(&l).await {
            d.say_start().await;
            d.exception("exec", &note).await;
            d.status = WaitStatus::exited(1).0;
            d.finish().await;
            return;
        }
    }

    if let Err(note) = d.contain(&l).await {
        d.say_start().await;
        d.exception("exec", &note).await;
        d.status = WaitStatus::exited(1).0;
        d.finish().await;
        return;
    }
    let (task_tx, mut task_rx) = mpsc::channel(TASK_EVENT_CAPACITY);
    let failures = d.launch_local(&l, &task_tx).await;
    drop(task_tx);

    let (peer_tx, mut peer_rx) = mpsc::channel(PEER_EVENT_CAPACITY);
    for (i, p) in d.peers.iter().enumerate() {
        let request = StartRequest {
            id: d.id,
            userid: l.userid,
            jobspec: l.jobspec_text.clone(),
            r: l.r_text.clone(),
            reattach: false,
            ranks: p.ranks.to_string(),
            peers: l.peer_addresses.clone(),
            credential: l.credential.clone(),
        };
        p.start(i, request, peer_tx.clone());
    }
    drop(peer_tx);
    d.maybe_start().await;
    for (shell_rank, note) in failures {
        d.output(output::log(shell_rank, 0, &note)).await;
        d.exception("exec", &note).await;
        d.tear_down(Signal::SIGTERM, "exec", &note);
    }
    for i in 0..d.local.len() {
        if d.rank_left[i] == 0 {
            d.rank_done(i).await;
        }
    }

    let (mut local_done, mut peers_done, mut control_open) = (false, d.peers.is_empty(), true);
    while !(local_done && peers_done) {
        let kill_at = d.kill_at;
        let (reaping, linger) = (d.contain.awaiting_tasks(), d.contain.linger_until());
        tokio::select! {
            _ = tasks_reaped(reaping.clone()), if reaping.is_some() => d.contain.tasks_gone(),
            _ = sleep_until(linger), if linger.is_some() => d.contain.end_grace(),
            ev = task_rx.recv(), if !local_done => match ev {
                Some(ev) => d.on_task(ev).await,
                None => local_done = true,
            },
            ev = peer_rx.recv(), if !peers_done => match ev {
                Some(ev) => d.on_peer(ev).await,
                None => peers_done = true,
            },
            c = control.recv(), if control_open => match c {
                Some(c) => d.on_control(c).await,
                None => control_open = false,
            },
            _ = sleep_until(kill_at), if kill_at.is_some() => d.kill_remaining(),
        }
    }
    d.finish().await;
}

async fn tasks_reaped(cg: Option<Arc<JobCgroup>>) {
    if let Some(cg) = cg {
        cg.tasks_reaped().await;
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

impl Driver {
    async fn send(&self, r: Response) {
        // The job's channel outlives the driver (the table holds its receiver).
        let _ = self.out.send(response(self.id, r)).await;
    }

    async fn exec_event(&self, name: &str, ctx: Option<serde_json::Map<String, Value>>) {
        self.send(Response::ExecEvent(line(name, ctx))).await;
    }

    async fn output(&self, line: String) {
        self.send(Response::OutputEvent(line)).await;
    }

    async fn exception(&self, kind: &str, note: &str) {
        self.send(Response::Exception(ExecException {
            severity: 0,
            r#type: kind.to_string(),
            note: note.to_string(),
        }))
        .await;
    }

    async fn maybe_start(&mut self) {
        if !self.start_sent && self.peer_state.iter().all(|p| p.started) {
            self.start_sent = true;
            self.say_start().await;
        }
    }

    /// Send `start`; from then on the job's list of processes is complete.
    async fn say_start(&self) {
        self.procs.mark_started();
        self.send(Response::Start(true)).await;
    }

    /// Make the job's cgroup, before any task starts.
    async fn contain(&mut self, l: &Launch) -> Result<(), String> {
        let host = match self.local.first().and_then(|r| r.hostname.clone()) {
            Some(h) => h,
            None => self.local_hostname(),
        };
        self.contain = Contain::create(&l.cgroups, self.id, &l.jobspec, &self.local, host).await?;
        Ok(())
    }

    /// A fatal `oom` exception when the OOM killer has been in the job.
    async fn check_oom(&mut self) {
        if let Some(note) = self.contain.new_oom() {
            self.exception("oom", &note).await;
            self.tear_down(Signal::SIGKILL, "oom", &note);
        }
    }

    async fn finish(&mut self) {
        tracing::debug!(status = self.status, "tasks done");
        let usage = self.contain.end().await;
        self.check_oom().await;
        self.usage.extend(usage);
        // A tokio file's write completes on a blocking thread after
        // write_all returns: the output files are whole only once flushed,
        // and a reader may open them as soon as `complete` is seen.
        for file in &mut self.files {
            if let Err(e) = file.flush().await {
                tracing::warn!(error = %e, "cannot write output file");
            }
        }
        if self.leader {
            let mut ctx = context([("status", json!(self.status))]);
            if !self.usage.is_empty() {
                ctx.insert("usage".into(), usage::to_json(&self.usage));
            }
            self.exec_event("complete", Some(ctx)).await;
        }
        let usage = std::mem::take(&mut self.usage);
        self.send(Response::Finish(Finish {
            status: self.status,
            usage,
        }))
        .await;
        let ranks = if self.leader {
            "all".to_string()
        } else {
            self.local
                .iter()
                .map(|r| r.rank)
                .collect::<IdSet>()
                .to_string()
        };
        if self.leader {
            self.exec_event("done", None).await;
        }
        self.send(Response::Release(Release {
            ranks,
            r#final: true,
        }))
        .await;
    }

    /// Test execution (`attributes.system.exec.test.run_duration`): no
    /// processes; the job "runs" for the duration. As flux-core's test exec,
    /// a kill ends it with the raw signal as its wait status.
    async fn run_test(&mut self, secs: f64, control: &mut mpsc::Receiver<Control>) {
        self.say_start().await;
        let sleep = tokio::time::sleep(Duration::from_secs_f64(secs.min(1e9)));
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                c = control.recv() => match c {
                    Some(Control::Signal(sig)) => {
                        self.status = WaitStatus::signaled(sig).0;
                        break;
                    }
                    Some(Control::Exception { kind, severity: 0, .. }) => {
                        self.status = WaitStatus::signaled(teardown_signal(&kind) as i32).0;
                        break;
                    }
                    Some(Control::Shutdown(note)) => {
                        self.exception("exec", &note).await;
                        self.status = WaitStatus::signaled(Signal::SIGTERM as i32).0;
                        break;
                    }
                    Some(c) => self.on_control(c).await,
                    None => break,
                }
            }
        }
        self.finish().await;
    }

    /// Open the job's output files as its owner, relative to its cwd, and
    /// say where each stream goes; the exception note when one cannot be.
    async fn open_redirects(&mut self, l: &Launch) -> Result<(), String> {
        let (paths, index) = l.redirects.distinct();
        if paths.is_empty() {
            return Ok(());
        }
        let stream_of = |j: usize| {
            if index[0] == Some(j) {
                Stream::Stdout
            } else {
                Stream::Stderr
            }
        };
        let note = |j: usize, e: &str| {
            format!("cannot open {} for {}: {e}", paths[j], stream_of(j).name())
        };
        let requests = paths
            .iter()
            .map(|p| FileRequest {
                path: p.into(),
                access: Access::Write,
            })
            .collect();
        let cwd = l.jobspec.cwd().map(std::path::PathBuf::from);
        let opened = files::open(requests, cwd, l.run_as.clone())
            .await
            .map_err(|e| note(0, &e))?;
        for (j, file) in opened.into_iter().enumerate() {
            let file = file.map_err(|e| note(j, &e))?;
            self.files.push(tokio::fs::File::from_std(file));
        }
        self.stream_file = index;
        let all_tasks = if l.layout.ntasks == 0 {
            String::new()
        } else {
            IdSet::from_range(0, l.layout.ntasks - 1).to_string()
        };
        for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
            if let Some(j) = index[i] {
                self.output(output::redirect(stream, &all_tasks, paths[j]))
                    .await;
            }
        }
        Ok(())
    }

    /// Spawn the tasks of the local ranks. A rank stops at its first task that
    /// cannot start, as a job shell does; the failures come back as
    /// `(shell rank, note)` with flux-core's wording.
    async fn launch_local(
        &mut self,
        l: &Launch,
        events: &mpsc::Sender<TaskEvent>,
    ) -> Vec<(u32, String)> {
        let mut failures = Vec::new();
        let base_env = l.jobspec.environment();
        let rlimits = rlimit::from_jobspec(&l.jobspec);
        let cwd = l.jobspec.cwd().map(std::path::PathBuf::from);
        let nnodes = l.layout.ranks.len();
        for (i, rank) in self.local.clone().iter().enumerate() {
            let host = rank
                .hostname
                .clone()
                .unwrap_or_else(|| format!("rank{}", rank.rank));
            for (local_id, task_rank) in rank.task_ranks().enumerate() {
                let mut env: Vec<(String, String)> = base_env
                    .iter()
                    // A credential never comes from a stored jobspec: only
                    // the one minted for this job (below) reaches its tasks.
                    .filter(|(k, _)| k.as_str() != "FLUX_JOB_TMPDIR" && k.as_str() != TOKEN_VAR)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                env.push(("FLUX_JOB_ID".into(), l.id.to_string()));
                env.push(("FLUX_JOB_SIZE".into(), l.layout.ntasks.to_string()));
                env.push(("FLUX_JOB_NNODES".into(), nnodes.to_string()));
                env.push(("FLUX_TASK_RANK".into(), task_rank.to_string()));
                env.push(("FLUX_TASK_LOCAL_ID".into(), local_id.to_string()));
                if !l.credential.is_empty() {
                    env.push((TOKEN_VAR.into(), l.credential.clone()));
                }
                if !rank.gpus.is_empty() {
                    let ids: Vec<String> = rank.gpus.iter().map(u32::to_string).collect();
                    env.push(("CUDA_VISIBLE_DEVICES".into(), ids.join(",")));
                }
                let spec = TaskSpec {
                    argv: l.jobspec.command().to_vec(),
                    env,
                    cwd: cwd.clone(),
                    cpus: rank
                        .task_cores(local_id as u32)
                        .into_iter()
                        .map(|c| c as usize)
                        .collect(),
                    rank: task_rank,
                    rlimits: rlimits.clone(),
                    cgroup: self.contain.cgroup(),
                };
                match task::spawn_as(&spec, l.run_as.as_ref(), events.clone()).await {
                    Ok(t) => {
                        metrics::counter!(telemetry::TASKS_STARTED).increment(1);
                        let hostname = match &rank.hostname {
                            Some(h) => h.clone(),
                            None => self.local_hostname(),
                        };
                        self.procs.add(TaskProc {
                            task_rank,
                            node_rank: rank.rank,
                            hostname,
                            pid: t.pid(),
                        });
                        self.tasks.insert(task_rank, t);
                        self.task_rank.insert(task_rank, i);
                    }
                    Err(e) => {
                        metrics::counter!(telemetry::TASK_START_FAILURES).increment(1);
                        self.rank_statuses[i].push(e.status);
                        // Tasks never started on this rank are not waited for.
                        self.rank_left[i] = local_id as u32;
                        failures.push((
                            rank.shell_rank,
                            format!("task {task_rank} (host {host}): start failed: {e}"),
                        ));
                        break;
                    }
                }
            }
        }
        failures
    }

    /// The name of this machine: where a rank of an R without hostnames
    /// runs its tasks.
    fn local_hostname(&mut self) -> String {
        self.local_hostname
            .get_or_insert_with(|| {
                nix::unistd::gethostname()
                    .ok()
                    .and_then(|h| h.into_string().ok())
                    .unwrap_or_else(|| "localhost".to_string())
            })
            .clone()
    }

    async fn on_task(&mut self, ev: TaskEvent) {
        match ev {
            TaskEvent::Output { rank, stream, data } => {
                if let Some(f) = self.file_for(stream) {
                    self.write_file(f, &data).await;
                } else {
                    self.output(output::data(stream, rank, &data)).await;
                }
            }
            TaskEvent::Eof { rank, stream } => {
                if self.file_for(stream).is_none() {
                    self.output(output::eof(stream, rank)).await;
                }
            }
            TaskEvent::Exited { rank, status } => {
                if status.0 != 0 {
                    metrics::counter!(telemetry::TASKS_FAILED).increment(1);
                }
                self.tasks.remove(&rank);
                if status.0 != 0 {
                    self.check_oom().await;
                }
                if let Some(&i) = self.task_rank.get(&rank) {
                    self.rank_statuses[i].push(status);
                    self.rank_left[i] = self.rank_left[i].saturating_sub(1);
                    if self.rank_left[i] == 0 {
                        self.rank_done(i).await;
                    }
                }
            }
        }
    }

    async fn rank_done(&mut self, i: usize) {
        let shell = WaitStatus::shell_status_of(self.rank_statuses[i].iter().copied());
        self.status = self.status.max(shell.0);
        let rank = self.local[i].rank;
        if self.leader && rank == self.leader_rank {
            self.exec_event(
                "shell-exit",
                Some(context([
                    ("rank", json!(rank)),
                    ("wait_status", json!(shell.0)),
                ])),
            )
            .await;
        }
    }

    async fn on_peer(&mut self, ev: PeerEvent) {
        match ev {
            PeerEvent::Response(i, r) => match r.response {
                Some(Response::Start(_)) => {
                    self.peer_state[i].started = true;
                    self.maybe_start().await;
                }
                Some(Response::Release(rel)) => {
                    if rel.r#final {
                        self.peer_state[i].done = true;
                    }
                }
                Some(Response::Finish(f)) => {
                    self.status = self.status.max(f.status);
                    self.usage.extend(f.usage);
                }
                Some(Response::Exception(e)) => {
                    let fatal = e.severity == 0;
                    let (kind, note) = (e.r#type.clone(), e.note.clone());
                    self.send(Response::Exception(e)).await;
                    if fatal {
                        self.tear_down(teardown_signal(&kind), &kind, &note);
                    }
                }
                Some(Response::OutputEvent(l)) => self.peer_output(l).await,
                Some(Response::ExecEvent(l)) => self.send(Response::ExecEvent(l)).await,
                Some(Response::Reattached(_)) | None => {}
            },
            PeerEvent::Lost(i, why) => {
                if self.peer_state[i].done {
                    return;
                }
                self.peer_state[i].done = true;
                self.peer_state[i].started = true;
                let p = &self.peers[i];
                let note = format!(
                    "lost the exec service of rank(s) {} at {}: {why}",
                    p.ranks, p.address
                );
                self.exception("exec", &note).await;
                self.tear_down(Signal::SIGTERM, "exec", &note);
                self.maybe_start().await;
            }
        }
    }

    /// A peer's output line: passed on, unless its stream goes to a file here.
    async fn peer_output(&mut self, l: String) {
        if self.files.is_empty() {
            return self.output(l).await;
        }
        let Ok(v) = serde_json::from_str::<Value>(&l) else {
            return self.output(l).await;
        };
        let ctx = &v["context"];
        let stream = match ctx["stream"].as_str() {
            Some("stdout") => Stream::Stdout,
            Some("stderr") => Stream::Stderr,
            _ => return self.output(l).await,
        };
        let Some(f) = (v["name"] == "data")
            .then(|| self.file_for(stream))
            .flatten()
        else {
            return self.output(l).await;
        };
        if let Some(data) = ctx["data"].as_str() {
            let bytes = if ctx["encoding"] == "base64" {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap_or_default()
            } else {
                data.as_bytes().to_vec()
            };
            self.write_file(f, &bytes).await;
        }
    }

    fn file_for(&self, stream: Stream) -> Option<usize> {
        match stream {
            Stream::Stdout => self.stream_file[0],
            Stream::Stderr => self.stream_file[1],
        }
    }

    async fn write_file(&mut self, f: usize, data: &[u8]) {
        if let Err(e) = self.files[f].write_all(data).await {
            tracing::warn!(error = %e, "cannot write output file");
        }
    }

    async fn on_control(&mut self, c: Control) {
        match c {
            Control::Signal(sig) => {
                if let Ok(signal) = Signal::try_from(sig) {
                    self.signal_local(signal);
                }
                if self.leader {
                    for p in self.live_peers() {
                        p.kill(self.id, sig);
                    }
                }
            }
            Control::Exception {
                kind,
                severity,
                note,
            } => {
                if severity == 0 {
                    self.tear_down(teardown_signal(&kind), &kind, &note);
                }
            }
            Control::Shutdown(note) => {
                self.exception("exec", &note).await;
                self.tear_down(Signal::SIGTERM, "exec", &note);
            }
            Control::Expiration(t) => {
                // The job manager raises the timeout exception itself; kept for
                // the record and for a later `flux job info`-like view.
                self.expiration = Some(t);
                tracing::debug!(expiration = ?self.expiration, "expiration updated");
            }
        }
    }

    fn live_peers(&self) -> Vec<Peer> {
        self.peers
            .iter()
            .zip(&self.peer_state)
            .filter(|(_, s)| !s.done)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// First severity 0 exception: signal everything, SIGKILL later.
    fn tear_down(&mut self, signal: Signal, kind: &str, note: &str) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        self.signal_local(signal);
        if !self.tasks.is_empty() {
            self.kill_at = Some(Instant::now() + self.kill_timeout);
        }
        if self.leader {
            for p in self.live_peers() {
                p.exception(self.id, kind, 0, note);
            }
        }
    }

    fn kill_remaining(&mut self) {
        self.kill_at = None;
        self.signal_local(Signal::SIGKILL);
    }

    fn signal_local(&self, signal: Signal) {
        // Through the cgroup: every process of the job, and only those.
        if self.contain.signal(signal) {
            return;
        }
        for t in self.tasks.values() {
            if let Err(e) = t.signal(signal) {
                tracing::warn!(pid = t.pid(), %signal, error = %e, "cannot signal task");
            }
        }
    }
}

/// Flux's choice: a time limit sends SIGALRM (shell exits 142), anything else SIGTERM.
fn teardown_signal(kind: &str) -> Signal {
    if kind == "timeout" {
        Signal::SIGALRM
    } else {
        Signal::SIGTERM
    }
}

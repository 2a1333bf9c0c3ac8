//! One job's driver on one exec process: launch the local ranks' tasks,
//! start its children in the job's tree ([`super::tree`]), merge everything
//! into RFC 32 responses.
//!
//! Leader stream (RFC 32, RFC 50, RFC 24; compare the flux-core goldens):
//!
//! ```text
//! exec_event init, exec_event starting, output header [, redirect...]
//! start                      once the local tasks have launched
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
//!
//! Every exec process of the job runs this same driver for its part: the
//! leader is the root of the job's tree, the others are parts (their
//! stream is [`super::peer`]'s), each answering for its subtree. What
//! comes down from the job manager (kill, exception, expiration, input, the
//! PMI barrier's union) goes down from each to its children; what its
//! children say comes up merged with its own (a child's `start` only lets
//! what waits for it go, [`super::peer`]): one `finish` (the largest status, every node's
//! usage), one final `release` of every rank of the subtree, one `pmi`
//! message per barrier with the subtree's keys; output, exec events and
//! exceptions pass through. A child whose stream breaks is lost, as a
//! peer is in a star: a fatal `exec` exception that names it.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use fluxgate_proto::v1::start_response::Response;
use fluxgate_proto::v1::{
    ExecException, Finish, NodeUsage, PmiKeys, Release, StartRequest, StartResponse,
};
use fluxgate_shared::jobspec::{Input, ShellOptions};
use fluxgate_shared::mustache::{self, Tags};
use fluxgate_shared::pmi::{Dict, Gather};
use fluxgate_shared::taskmap::Taskmap;
use fluxgate_shared::{Hostlist, IdSet, JobId, Jobspec};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::contain::Contain;
use super::peer::{Peer, PeerEvent};
use super::procs::{Procs, TaskProc};
use super::{Control, JobChannels, response};
use super::{pty, stdin};
use crate::affinity;
use crate::cgroup::{Cgroups, JobCgroup};
use crate::event::{context, line};
use crate::files;
use crate::handoff::{Access, FileRequest};
use crate::jobtmp::{self, JobTmp};
use crate::layout::{Layout, RankTasks};
use crate::output::{self, Redirects};
use crate::pmi::{ClientEvent, JobPmi, Step};
use crate::rlimit;
use crate::run_as::RunAs;
use crate::status::WaitStatus;
use crate::task::{self, Stream, Task, TaskEvent, TaskPty, TaskSpec};
use crate::telemetry;

/// Task events queued from all local tasks of a job.
const TASK_EVENT_CAPACITY: usize = 256;
/// Responses queued from all peers of a job.
const PEER_EVENT_CAPACITY: usize = 256;
/// The variable a task finds its job's own credential in.
const TOKEN_VAR: &str = "FLUXGATE_TOKEN";
/// The variable a task finds the instance it runs in by.
const URI_VAR: &str = "FLUXGATE_URI";

/// What the local tasks read from: pipes and terminals, by task rank.
#[derive(Debug, Default)]
struct TaskInputs {
    pipes: BTreeMap<u32, Arc<OwnedFd>>,
    ptys: BTreeMap<u32, TaskPty>,
}

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
    /// This process's children in the job's tree, each with its subtree.
    pub peers: Vec<Peer>,
    /// Grace between the first signal and SIGKILL.
    pub kill_timeout: Duration,
    /// Output files (leader only).
    pub redirects: Redirects,
    /// The job owner's identity, when tasks must switch to it.
    pub run_as: Option<RunAs>,
    /// The job's own credential for its tasks' `FLUXGATE_TOKEN` (may be empty).
    pub credential: String,
    /// The instance the job runs in, for its tasks' `FLUXGATE_URI`.
    pub instance_uri: String,
    /// R's expiration, when the job has a time limit.
    pub expiration: Option<f64>,
    /// Where the job's cgroup is made.
    pub cgroups: Arc<Cgroups>,
    /// Where the job's temporary directories are made.
    pub tmpdir: std::path::PathBuf,
}

#[derive(Debug, Default)]
struct PeerState {
    done: bool,
}

struct Driver {
    id: u64,
    leader: bool,
    out: mpsc::Sender<StartResponse>,
    status: i32,
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
    /// The job shell's options.
    shell: ShellOptions,
    /// The job's PMI server here, unless the job turned it off.
    pmi: Option<JobPmi>,
    /// The gather of each barrier's keys over this process's subtree:
    /// its own tasks and the children whose subtree runs tasks.
    gather: Option<Gather>,
    /// Each gather member's index: this process (if it runs tasks) and
    /// the children whose subtree does, by peer index.
    own_member: Option<usize>,
    peer_member: Vec<Option<usize>>,
    /// The exit timeout's watch, once a task has exited.
    doom: Doom,
    /// When `--signal` is due, before the expiration.
    warn_at: Option<Instant>,
    /// Tasks in the whole job, and the command's base name, for its notes.
    ntasks: u32,
    command: String,
    /// The job's cgroup here.
    contain: Contain,
    /// What the job used, per node, as the nodes finish.
    usage: Vec<NodeUsage>,
    /// Each local rank's `FLUX_JOB_TMPDIR`, by index in `local`.
    tmpdirs: Vec<JobTmp>,
}

/// flux-core's `doom`: once the first task exits, the others have the
/// exit timeout to follow (or none at all with `exit-on-error`, when it
/// failed). Each exec process watches its own tasks; the leader also
/// starts the clock when a peer's tasks have all exited (each parent in
/// the tree, when a child's subtree has).
#[derive(Debug, Default)]
struct Doom {
    started: bool,
    at: Option<Instant>,
    note: String,
}

/// Opens every child's gate when the job's part here ends, however it
/// ends: nothing sent toward a child that never started waits forever.
struct OpenGatesAtEnd(Vec<Peer>);

impl Drop for OpenGatesAtEnd {
    fn drop(&mut self) {
        for p in &self.0 {
            p.open_gate();
        }
    }
}

/// Run a job's part to the end, writing its responses.
pub async fn run(l: Launch, ch: JobChannels) {
    let JobChannels {
        responses,
        control,
        procs,
    } = ch;
    // The peers are known now, the tasks as they are launched.
    procs.set_peers(l.peers.clone());
    let _gates = OpenGatesAtEnd(l.peers.clone());
    let mut d = Driver::new(&l, responses, procs);
    if d.leader {
        d.exec_event("init", None).await;
        d.exec_event("starting", None).await;
    }
    let mut control = control;
    if let Some(secs) = l.jobspec.test_run_duration() {
        d.run_test(secs, &mut control).await;
        return;
    }
    if d.leader && !d.prepare_leader(&l).await {
        return;
    }
    let ready = match d.contain(&l).await {
        Ok(()) => d.make_tmpdirs(&l).await,
        Err(note) => Err(note),
    };
    if let Err(note) = ready {
        d.say_start().await;
        d.exception("exec", &note).await;
        d.status = WaitStatus::exited(1).0;
        d.finish().await;
        return;
    }
    d.set_expiration(l.expiration);
    let pmi_rx = d.start_pmi(&l);
    let (task_tx, task_rx) = mpsc::channel(TASK_EVENT_CAPACITY);
    let failures = d.launch_local(&l, &task_tx).await;
    drop(task_tx);
    let peer_rx = d.start_peers(&l);
    // `start` as soon as the local tasks run: a child slow to answer (a
    // lossy link, a deep subtree) would otherwise leave the job without a
    // start until its tasks may have ended. What goes to a child waits for
    // its own start (`Peer::open_gate`).
    d.say_start().await;
    d.launched(failures).await;
    d.drive(task_rx, peer_rx, control, pmi_rx).await;
    d.finish().await;
}

impl Driver {
    /// The driver of `l`'s part of its job, nothing launched yet.
    fn new(l: &Launch, out: mpsc::Sender<StartResponse>, procs: Arc<Procs>) -> Driver {
        Driver {
            id: l.id.into(),
            leader: l.leader,
            out,
            status: 0,
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
            shell: l.jobspec.shell().unwrap_or_else(|e| {
                tracing::warn!(error = %e, "shell options ignored");
                ShellOptions::default()
            }),
            pmi: None,
            gather: None,
            own_member: None,
            peer_member: Vec::new(),
            doom: Doom::default(),
            warn_at: None,
            contain: Contain::default(),
            usage: Vec::new(),
            tmpdirs: Vec::new(),
            ntasks: l.layout.ntasks,
            command: l
                .jobspec
                .command()
                .first()
                .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
                .unwrap_or_default(),
        }
    }

    /// The leader's first words: the output header, the output files and
    /// the warning about unknown options. False when the job ended here
    /// (an output file could not be opened).
    async fn prepare_leader(&mut self, l: &Launch) -> bool {
        self.output(output::header(l.layout.ntasks)).await;
        if let Err(note) = self.open_redirects(l).await {
            self.say_start().await;
            self.exception("exec", &note).await;
            self.status = WaitStatus::exited(1).0;
            self.finish().await;
            return false;
        }
        if let Some(warning) = self.shell.unknown_warning() {
            // Said once, on the job's stderr, before any task writes.
            self.on_task(TaskEvent::Output {
                rank: 0,
                stream: Stream::Stderr,
                data: warning.into_bytes(),
            })
            .await;
        }
        true
    }

    /// Start the children's parts of the job, each with its subtree; their
    /// responses come on the receiver.
    fn start_peers(&self, l: &Launch) -> mpsc::Receiver<PeerEvent> {
        let (peer_tx, peer_rx) = mpsc::channel(PEER_EVENT_CAPACITY);
        for (i, p) in self.peers.iter().enumerate() {
            let request = StartRequest {
                id: self.id,
                userid: l.userid,
                jobspec: l.jobspec_text.clone(),
                r: l.r_text.clone(),
                reattach: false,
                ranks: String::new(),
                peers: HashMap::new(),
                credential: l.credential.clone(),
            };
            p.start(i, request, peer_tx.clone());
        }
        peer_rx
    }

    /// After the launch: each task that could not start is an exception
    /// that tears the job down; ranks with nothing left to wait for are done.
    async fn launched(&mut self, failures: Vec<(u32, String)>) {
        for (shell_rank, note) in failures {
            self.output(output::log(shell_rank, 0, &note)).await;
            self.exception("exec", &note).await;
            self.tear_down(Signal::SIGTERM, "exec", &note);
        }
        for i in 0..self.local.len() {
            if self.rank_left[i] == 0 {
                self.rank_done(i).await;
            }
        }
    }

    /// Serve the job until its local tasks and its peers are done.
    async fn drive(
        &mut self,
        mut task_rx: mpsc::Receiver<TaskEvent>,
        mut peer_rx: mpsc::Receiver<PeerEvent>,
        mut control: mpsc::Receiver<Control>,
        mut pmi_rx: Option<mpsc::Receiver<ClientEvent>>,
    ) {
        let (mut local_done, mut peers_done) = (false, self.peers.is_empty());
        let mut control_open = true;
        while !(local_done && peers_done) {
            let kill_at = self.kill_at;
            let (reaping, linger) = (self.contain.awaiting_tasks(), self.contain.linger_until());
            tokio::select! {
                _ = tasks_reaped(reaping.clone()), if reaping.is_some() => self.contain.tasks_gone(),
                _ = sleep_until(linger), if linger.is_some() => self.contain.end_grace(),
                ev = task_rx.recv(), if !local_done => match ev {
                    Some(ev) => self.on_task(ev).await,
                    None => local_done = true,
                },
                ev = peer_rx.recv(), if !peers_done => match ev {
                    Some(ev) => self.on_peer(ev).await,
                    None => peers_done = true,
                },
                c = control.recv(), if control_open => match c {
                    Some(c) => self.on_control(c).await,
                    None => control_open = false,
                },
                Some(ev) = recv_pmi(&mut pmi_rx) => self.on_pmi(ev).await,
                _ = sleep_until(kill_at), if kill_at.is_some() => self.kill_remaining(),
                _ = sleep_until(self.doom.at), if self.doom.at.is_some() => self.doomed().await,
                _ = sleep_until(self.warn_at), if self.warn_at.is_some() => self.warn(),
            }
        }
    }
}

/// The next event of the job's PMI connections; never, without PMI.
async fn recv_pmi(rx: &mut Option<mpsc::Receiver<ClientEvent>>) -> Option<ClientEvent> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
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
        self.procs.set_meter(self.contain.meter());
        Ok(())
    }

    /// Make each local rank's temporary directory with the job's files in
    /// it, before any task starts.
    async fn make_tmpdirs(&mut self, l: &Launch) -> Result<(), String> {
        let ascii = ascii_f58(&l.jobspec);
        for rank in &self.local {
            let path = jobtmp::path(&l.tmpdir, rank.shell_rank, l.id, ascii);
            let files = l.jobspec.files().to_vec();
            self.tmpdirs
                .push(JobTmp::create(path, l.run_as.clone(), files).await?);
        }
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
        // The job's processes are gone: nothing writes there any more.
        for tmp in std::mem::take(&mut self.tmpdirs) {
            tmp.remove().await;
        }
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
            // flux's context, nothing more: the usage travels in `Finish`
            // until the job manager stores it beside the eventlogs.
            let ctx = context([("status", json!(self.status))]);
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
            self.subtree_ranks().to_string()
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

    /// Every rank of this process's subtree: its own and its children's.
    fn subtree_ranks(&self) -> IdSet {
        let mut ranks: IdSet = self.local.iter().map(|r| r.rank).collect();
        for p in &self.peers {
            ranks.add(&p.subtree);
        }
        ranks
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
                    Some(Control::Fence(note)) => {
                        self.exception("node-failure", &note).await;
                        self.status = WaitStatus::signaled(Signal::SIGKILL as i32).0;
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
        let mut inputs = match self.open_stdin(l).await {
            Ok(inputs) => inputs,
            Err(note) => {
                let shell_rank = self.local.first().map_or(0, |r| r.shell_rank);
                // No task starts without the input it was promised.
                for left in &mut self.rank_left {
                    *left = 0;
                }
                return vec![(shell_rank, note)];
            }
        };
        let base_env = l.jobspec.environment();
        let rlimits = rlimit::from_jobspec(&l.jobspec);
        let cwd = l.jobspec.cwd().map(std::path::PathBuf::from);
        let nodelist = job_nodelist(&l.layout);
        for (i, rank) in self.local.clone().iter().enumerate() {
            let host = rank
                .hostname
                .clone()
                .unwrap_or_else(|| format!("rank{}", rank.rank));
            for (local_id, task_rank) in rank.task_ranks().enumerate() {
                let mut env = self.task_env(l, &base_env, &nodelist, rank, local_id as u32);
                env.extend(self.expanded_env(l, rank, i, local_id as u32));
                let mut inherit = Vec::new();
                if let Some(pmi) = &mut self.pmi {
                    match pmi.connect(task_rank) {
                        Ok(end) => {
                            env.extend(end.env);
                            inherit.push(("PMI_FD".to_string(), Arc::new(end.fd)));
                        }
                        Err(e) => tracing::warn!(task_rank, error = %e, "no PMI connection"),
                    }
                }
                let spec = TaskSpec {
                    argv: self.task_argv(l, rank, i, local_id as u32),
                    env,
                    cwd: cwd.clone(),
                    cpus: affinity::cpus(&self.shell.cpu_affinity, rank, local_id as u32),
                    rank: task_rank,
                    rlimits: rlimits.clone(),
                    stdin: inputs.pipes.remove(&task_rank),
                    inherit,
                    pty: inputs.ptys.remove(&task_rank),
                    cgroup: self.contain.cgroup(),
                    unbuffered: self.shell.unbuffered,
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

    /// The environment of local task `local_id` of `rank`: the jobspec's,
    /// less what only the service may set, and what flux's shell sets.
    fn task_env(
        &self,
        l: &Launch,
        base: &BTreeMap<String, String>,
        nodelist: &str,
        rank: &RankTasks,
        local_id: u32,
    ) -> Vec<(String, String)> {
        // Set by the service, never taken from a stored jobspec: the job's
        // own credential and the instance it runs in.
        let ours = [TOKEN_VAR, URI_VAR, "FLUX_JOB_TMPDIR"];
        let mut env: Vec<(String, String)> = base
            .iter()
            .filter(|(k, _)| !ours.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let task_rank = rank.first_task + local_id;
        env.push(("FLUX_JOB_ID".into(), l.id.to_string()));
        env.push(("FLUX_JOB_SIZE".into(), l.layout.ntasks.to_string()));
        env.push(("FLUX_JOB_NNODES".into(), l.layout.ranks.len().to_string()));
        env.push(("FLUX_JOB_NODELIST".into(), nodelist.to_string()));
        env.push(("FLUX_TASK_RANK".into(), task_rank.to_string()));
        env.push(("FLUX_TASK_LOCAL_ID".into(), local_id.to_string()));
        if let Some(tmp) = self.rank_tmpdir(rank) {
            env.push(("FLUX_JOB_TMPDIR".into(), tmp.display().to_string()));
        }
        if !l.instance_uri.is_empty() {
            env.push((URI_VAR.into(), l.instance_uri.clone()));
        }
        if !l.credential.is_empty() {
            env.push((TOKEN_VAR.into(), l.credential.clone()));
        }
        if let Some(ids) = affinity::gpus(&self.shell.gpu_affinity, rank, local_id) {
            env.extend(affinity::gpu_env(&ids));
        }
        env
    }

    /// The temporary directory of local `rank`.
    fn rank_tmpdir(&self, rank: &RankTasks) -> Option<&std::path::Path> {
        let i = self.local.iter().position(|r| r.rank == rank.rank)?;
        self.tmpdirs.get(i).map(JobTmp::path)
    }

    /// The command of local task `local_id` of `rank` (local rank index
    /// `i`), its `{{tag}}` templates rendered as flux's shell renders them.
    fn task_argv(&mut self, l: &Launch, rank: &RankTasks, i: usize, local_id: u32) -> Vec<String> {
        let argv = l.jobspec.command();
        if !argv.iter().any(|a| mustache::has_tags(a)) {
            return argv.to_vec();
        }
        self.render(l, rank, i, local_id, argv.iter().map(String::as_str))
    }

    /// `templates` rendered for local task `local_id` of `rank` (local
    /// rank index `i`).
    fn render<'t>(
        &mut self,
        l: &Launch,
        rank: &RankTasks,
        i: usize,
        local_id: u32,
        templates: impl Iterator<Item = &'t str>,
    ) -> Vec<String> {
        let host = match &rank.hostname {
            Some(h) => h.clone(),
            None => self.local_hostname(),
        };
        let cores: IdSet = rank.cores.iter().copied().collect();
        let gpus: IdSet = rank.gpus.iter().copied().collect();
        let (cores, gpus) = (cores.to_string(), gpus.to_string());
        let tmpdir = self.tmpdirs.get(i).map(|t| t.path().display().to_string());
        let tags = Tags {
            id: l.id,
            name: l.jobspec.job_name(),
            nnodes: l.layout.ranks.len() as u32,
            ntasks: l.layout.ntasks,
            task_rank: rank.first_task + local_id,
            task_index: local_id,
            node_rank: rank.shell_rank,
            node_name: &host,
            node_cores: &cores,
            node_ncores: rank.cores.len() as u32,
            node_gpus: &gpus,
            tmpdir: tmpdir.as_deref(),
            ascii_f58: ascii_f58(&l.jobspec),
        };
        templates.map(|t| mustache::render(t, &tags)).collect()
    }

    /// `shell.options.env-expand` (what `--env=VAR={{...}}` writes) for
    /// local task `local_id` of `rank`: each variable's template rendered.
    fn expanded_env(
        &mut self,
        l: &Launch,
        rank: &RankTasks,
        i: usize,
        local_id: u32,
    ) -> Vec<(String, String)> {
        let Some(vars) = l
            .jobspec
            .shell_options()
            .get("env-expand")
            .and_then(Value::as_object)
        else {
            return Vec::new();
        };
        let vars: Vec<(&String, &str)> = vars
            .iter()
            .filter_map(|(k, v)| Some((k, v.as_str()?)))
            .collect();
        let values = self.render(l, rank, i, local_id, vars.iter().map(|(_, v)| *v));
        vars.iter().map(|(k, _)| (*k).clone()).zip(values).collect()
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
                if self.shown_live(rank, stream) {
                    for l in output::live_data(stream, rank, &data) {
                        self.send(Response::LiveOutputEvent(l)).await;
                    }
                } else if let Some(f) = self.file_for(stream) {
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
                if let Some(Step::Abort(note)) = self.pmi.as_mut().and_then(|p| p.task_exited(rank))
                {
                    self.abort(&note).await;
                }
                if status.0 != 0 {
                    self.check_oom().await;
                }
                if let Some(&i) = self.task_rank.get(&rank) {
                    let host = self.local[i].hostname.clone();
                    self.first_exit(rank, host, status).await;
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
                // The child's gate is open (`Peer::start`); the job's start
                // was said when the local tasks launched.
                Some(Response::Start(_)) => {}
                Some(Response::Release(rel)) => {
                    if rel.r#final {
                        self.peer_state[i].done = true;
                    }
                }
                Some(Response::Finish(f)) => {
                    self.status = self.status.max(f.status);
                    self.usage.extend(f.usage);
                    // Every task of that peer has exited.
                    let p = &self.peers[i];
                    let first = p.ranks.first().unwrap_or(0);
                    self.first_exit(first, None, WaitStatus(f.status)).await;
                }
                Some(Response::Exception(e)) => {
                    let fatal = e.severity == 0;
                    if fatal && self.torn_down {
                        // The job already ends on a fatal exception: what a
                        // part says as its tasks die (an MPI rank aborting
                        // when its peers vanish) follows from it, and is not
                        // a second cause.
                        tracing::debug!(kind = %e.r#type, note = %e.note, "a later fatal exception of a part");
                        return;
                    }
                    let (kind, note) = (e.r#type.clone(), e.note.clone());
                    self.send(Response::Exception(e)).await;
                    if fatal {
                        self.tear_down(teardown_signal(&kind), &kind, &note);
                    }
                }
                Some(Response::OutputEvent(l)) => self.peer_output(l).await,
                Some(Response::LiveOutputEvent(l)) => {
                    self.send(Response::LiveOutputEvent(l)).await;
                }
                Some(Response::Pmi(keys)) => {
                    let member = self.peer_member.get(i).copied().flatten();
                    self.gathered(member, keys.kvs.into_iter().collect()).await;
                }
                Some(Response::ExecEvent(l)) => self.send(Response::ExecEvent(l)).await,
                Some(Response::Reattached(_)) | None => {}
            },
            PeerEvent::Lost(i, why) => {
                if self.peer_state[i].done {
                    return;
                }
                self.peer_state[i].done = true;
                let p = &self.peers[i];
                let note = format!(
                    "lost the exec service of rank(s) {} at {}: {why}",
                    p.ranks, p.address
                );
                self.exception("exec", &note).await;
                self.tear_down(Signal::SIGTERM, "exec", &note);
            }
        }
    }

    /// Whether task `rank`'s `stream` is an interactive terminal's output
    /// that is shown live and not recorded (`pty.interactive` without
    /// `pty.capture`): not in the output eventlog, nor in an output file.
    /// Such a task always has its terminal (`Pty::gives`), which is then
    /// all its stdout carries.
    fn shown_live(&self, rank: u32, stream: Stream) -> bool {
        stream == Stream::Stdout && self.shell.pty.as_ref().is_some_and(|p| !p.captures(rank))
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
                for p in self.live_peers() {
                    p.kill(self.id, sig);
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
            Control::Fence(note) => {
                // No grace: the job manager takes the cores back soon.
                self.exception("node-failure", &note).await;
                self.tear_down(Signal::SIGKILL, "node-failure", &note);
                self.kill_remaining();
            }
            Control::PmiFence(keys) => self.fence_done(keys),
            Control::Expiration(t) => {
                // The job manager raises the timeout exception itself; here
                // the new expiration moves the warning signal, on every node.
                self.set_expiration(Some(t));
                for p in self.live_peers() {
                    p.expiration(self.id, t);
                }
            }
        }
    }

    /// The local tasks' ways in: a pipe each when the job takes input
    /// (fed from `Exec.Input`, or from its input file read as its owner,
    /// every task getting all of it), a terminal for those the `pty`
    /// option names; the exception note when the file cannot be read.
    async fn open_stdin(&mut self, l: &Launch) -> Result<TaskInputs, String> {
        let ranks: Vec<u32> = self.local.iter().flat_map(|r| r.task_ranks()).collect();
        let mut ptys = BTreeMap::new();
        if let Some(opt) = &self.shell.pty {
            let uid = l.run_as.as_ref().map(|r| r.uid);
            for &r in ranks.iter().filter(|r| opt.gives(**r)) {
                let p =
                    pty::open(uid).map_err(|e| format!("cannot open a pty for task {r}: {e}"))?;
                ptys.insert(r, p);
            }
        }
        let file = match &self.shell.input {
            Input::File(path) => Some(self.open_input_file(l, path).await?),
            _ => None,
        };
        let pipes_too = self.shell.input != Input::Null;
        let mut targets = BTreeMap::new();
        for &r in &ranks {
            match ptys.get(&r) {
                Some(p) => {
                    let master = p.master.try_clone().map_err(|e| format!("pty: {e}"))?;
                    targets.insert(r, stdin::Target::Pty(master));
                }
                None if pipes_too => {
                    targets.insert(r, stdin::Target::Pipe);
                }
                None => {}
            }
        }
        if targets.is_empty() {
            return Ok(TaskInputs::default());
        }
        let pipes = stdin::open(targets).map_err(|e| format!("cannot make stdin pipes: {e}"))?;
        match file {
            Some(f) => {
                tokio::spawn(stdin::feed_file(tokio::fs::File::from_std(f), pipes.sender));
            }
            None => self.procs.set_stdin(pipes.sender),
        }
        let ptys = ptys
            .into_iter()
            .map(|(r, p)| {
                let pty = TaskPty {
                    slave: p.slave,
                    master: Arc::new(p.master),
                };
                (r, pty)
            })
            .collect();
        Ok(TaskInputs {
            pipes: pipes.readers,
            ptys,
        })
    }

    /// The job's input file, opened as its owner, relative to its cwd.
    async fn open_input_file(&self, l: &Launch, path: &str) -> Result<std::fs::File, String> {
        let request = vec![FileRequest {
            path: path.into(),
            access: Access::Read,
        }];
        let cwd = l.jobspec.cwd().map(std::path::PathBuf::from);
        let note = |e: String| format!("cannot open {path} for stdin: {e}");
        let mut opened = files::open(request, cwd, l.run_as.clone())
            .await
            .map_err(note)?;
        opened
            .pop()
            .ok_or_else(|| note("no answer".into()))?
            .map_err(note)
    }

    /// Open the job's PMI server, unless the job turned it off; the
    /// receiver of its connections' events.
    fn start_pmi(&mut self, l: &Launch) -> Option<mpsc::Receiver<ClientEvent>> {
        if !self.shell.pmi {
            return None;
        }
        let counts: Vec<u64> = l.layout.ranks.iter().map(|r| u64::from(r.ntasks)).collect();
        let local: u32 = self.local.iter().map(|r| r.ntasks).sum();
        let (server, rx) = JobPmi::new(
            self.id.to_string(),
            l.layout.ntasks,
            local,
            &Taskmap::from_counts(&counts),
        );
        self.pmi = Some(server);
        // Only subtrees that run tasks have keys to give at a barrier.
        let tasks_of = |ranks: &IdSet| -> u32 {
            l.layout
                .ranks
                .iter()
                .filter(|r| ranks.contains(r.rank))
                .map(|r| r.ntasks)
                .sum()
        };
        let mut members = 0;
        if local > 0 {
            self.own_member = Some(members);
            members += 1;
        }
        for p in &self.peers {
            let member = (tasks_of(&p.subtree) > 0).then(|| {
                members += 1;
                members - 1
            });
            self.peer_member.push(member);
        }
        self.gather = Some(Gather::new(members));
        Some(rx)
    }

    async fn on_pmi(&mut self, ev: ClientEvent) {
        let Some(pmi) = &mut self.pmi else {
            return;
        };
        match pmi.on_event(ev) {
            None => {}
            Some(Step::Abort(note)) => self.abort(&note).await,
            Some(Step::Fence(keys)) => self.gathered(self.own_member, keys).await,
        }
    }

    /// A member's keys for the current barrier (this process's tasks' or
    /// a child's subtree's). Once every member's are in, their union goes
    /// up to the parent in one message or, on the leader, where it is the
    /// whole job's, down the tree ([`Driver::fence_done`]).
    async fn gathered(&mut self, member: Option<usize>, keys: Dict) {
        let (Some(gather), Some(member)) = (&mut self.gather, member) else {
            tracing::warn!("PMI keys from a process without tasks");
            return;
        };
        let union = match gather.add(member, keys) {
            Ok(None) => return,
            Ok(Some(union)) => Some(union),
            Err(e) => {
                tracing::warn!(error = %e, "PMI barrier out of step");
                None
            }
        };
        match union {
            Some(union) if !self.leader => {
                let keys = PmiKeys {
                    kvs: union.into_iter().collect(),
                };
                self.send(Response::Pmi(keys)).await;
            }
            Some(union) => self.fence_done(Some(union)),
            None if self.leader => self.fence_done(None),
            // The parent would wait for this subtree for ever.
            None => {
                self.abort("PMI barrier out of step in this part of the job")
                    .await
            }
        }
    }

    /// The union of the job's keys for the current barrier (`None`: the
    /// exchange failed): handed down to the children whose subtree takes
    /// part, then to this process's tasks.
    fn fence_done(&mut self, union: Option<Dict>) {
        for (p, m) in self.peers.iter().zip(&self.peer_member) {
            if m.is_some() {
                p.pmi_fence(self.id, union.as_ref());
            }
        }
        if let Some(pmi) = &mut self.pmi {
            pmi.fence_done(union.ok_or(()));
        }
    }

    /// A task has exited (or a peer's last one): the first starts the
    /// exit timeout, or ends the job at once when it failed and
    /// `exit-on-error` is set. Only for jobs of more than one task.
    async fn first_exit(&mut self, rank: u32, host: Option<String>, status: WaitStatus) {
        if self.doom.started || self.ntasks < 2 || self.torn_down {
            return;
        }
        self.doom.started = true;
        let host = host.unwrap_or_else(|| self.local_hostname());
        let what = format!("{}: task rank {rank} on host {host}", self.command);
        if self.shell.exit_on_error && status.0 != 0 {
            let note = format!(
                "{what} failed{} and exit-on-error is set",
                crate::status::disposition(status)
            );
            self.abort(&note).await;
            return;
        }
        if let Some(t) = self.shell.exit_timeout {
            self.doom.at = Some(Instant::now() + Duration::from_secs_f64(t.min(1e9)));
            self.doom.note = format!(
                "{what} exited{} and exit-timeout={} has expired",
                crate::status::disposition(status),
                fsd(t)
            );
        }
    }

    /// The job's expiration is `t`: the warning signal (`--signal`), if
    /// the job asked for one, is due that long before it, again after any
    /// change.
    fn set_expiration(&mut self, t: Option<f64>) {
        self.expiration = t;
        let (Some(t), Some(warn)) = (t, self.shell.signal) else {
            self.warn_at = None;
            return;
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let wait = (t - warn.timeleft - now).clamp(0.0, 1e9);
        self.warn_at = Some(Instant::now() + Duration::from_secs_f64(wait));
    }

    /// Send the warning signal to the local tasks.
    fn warn(&mut self) {
        self.warn_at = None;
        if let Some(sig) = self
            .shell
            .signal
            .and_then(|w| Signal::try_from(w.signum).ok())
        {
            tracing::debug!(%sig, "expiration near: signalling the tasks");
            self.signal_local(sig);
        }
    }

    /// The exit timeout has passed with tasks still running.
    async fn doomed(&mut self) {
        self.doom.at = None;
        let note = std::mem::take(&mut self.doom.note);
        self.abort(&note).await;
    }

    /// A PMI abort (or a task breaking the protocol): a fatal `exec`
    /// exception, and the job torn down on every node.
    async fn abort(&mut self, note: &str) {
        self.exception("exec", note).await;
        self.tear_down(Signal::SIGTERM, "exec", note);
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
        if let Some(pmi) = &mut self.pmi {
            // Tasks being killed break off their conversations: no news.
            pmi.ending();
        }
        self.signal_local(signal);
        if !self.tasks.is_empty() {
            self.kill_at = Some(Instant::now() + self.kill_timeout);
        }
        for p in self.live_peers() {
            p.exception(self.id, kind, 0, note);
        }
    }

    fn kill_remaining(&mut self) {
        self.kill_at = None;
        self.signal_local(Signal::SIGKILL);
    }

    fn signal_local(&self, signal: Signal) {
        // SIGKILL through the cgroup: every process of the job, and only
        // those. Other signals go to the tasks' process groups, as flux's
        // shell sends them (a batch job's instance then ends its own jobs
        // in order), but only to a task whose process is still in the
        // job's cgroup: a reaped task's pid may belong to someone else.
        if signal == Signal::SIGKILL && self.contain.signal(signal) {
            return;
        }
        if let Some(members) = self.contain.members() {
            for t in self.tasks.values().filter(|t| members.contains(&t.pid())) {
                if let Err(e) = t.signal(signal) {
                    tracing::warn!(pid = t.pid(), %signal, error = %e, "cannot signal task");
                }
            }
            return;
        }
        for t in self.tasks.values() {
            if let Err(e) = t.signal(signal) {
                tracing::warn!(pid = t.pid(), %signal, error = %e, "cannot signal task");
            }
        }
    }
}

/// A duration as flux-core's `fsd_format_duration` writes it: `30s`, `1.5m`.
fn fsd(seconds: f64) -> String {
    let (n, unit) = if seconds < 60.0 {
        (seconds, "s")
    } else if seconds < 3600.0 {
        (seconds / 60.0, "m")
    } else if seconds < 86400.0 {
        (seconds / 3600.0, "h")
    } else {
        (seconds / 86400.0, "d")
    };
    format!("{}{unit}", (n * 1000.0).round() / 1000.0)
}

/// The job's nodes as a hostlist (`FLUX_JOB_NODELIST`); ranks R names no
/// host for are left out.
/// Does the job write F58 ids with `f` (its environment sets
/// `FLUX_F58_FORCE_ASCII`, which flux's shell reads from it)?
fn ascii_f58(jobspec: &Jobspec) -> bool {
    jobspec
        .system()
        .environment
        .as_ref()
        .is_some_and(|e| e.contains_key("FLUX_F58_FORCE_ASCII"))
}

fn job_nodelist(layout: &Layout) -> String {
    let mut hl = Hostlist::new();
    for r in &layout.ranks {
        if let Some(h) = &r.hostname
            && hl.push(h).is_err()
        {
            tracing::debug!(host = %h, "not a hostname for the job's node list");
        }
    }
    hl.encode()
}

/// Flux's choice: a time limit sends SIGALRM (shell exits 142), anything else SIGTERM.
fn teardown_signal(kind: &str) -> Signal {
    if kind == "timeout" {
        Signal::SIGALRM
    } else {
        Signal::SIGTERM
    }
}

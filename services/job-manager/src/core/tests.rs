//! The core's pipeline without network, processes or wall clock: an
//! in-memory store, a recording exec link and the test clock drive jobs
//! through RFC 21, and each test asserts the events the store holds and the
//! effects the core asked for.

use std::sync::{Arc, Mutex};

use fluxgate_shared::rset::Node;
use fluxgate_shared::{Event, IdSet, JobId, Jobspec, ResourceSet};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::*;
use crate::auth::JobCredentials;
use crate::exec_link::{ExecLink, StartJob};
use crate::hub::Hub;
use crate::journal::Journal;
use crate::store::{Log, MemoryStore, Store};
use crate::values::{Severity, Urgency};

/// A request the core made of the exec services.
#[derive(Debug, Clone, PartialEq)]
enum Call {
    Start { id: JobId, reattach: bool },
    Exception { id: JobId, kind: String },
    Signal { id: JobId, signum: i32 },
    Expiration { id: JobId, expiration: f64 },
    ConfirmGone { id: JobId, rank: u32 },
}

/// An exec link that records what it is asked.
#[derive(Debug, Clone, Default)]
struct Recording(Arc<Mutex<Vec<Call>>>);

impl Recording {
    fn push(&self, c: Call) {
        self.0.lock().unwrap().push(c);
    }
}

impl ExecLink for Recording {
    fn start(&self, job: StartJob) {
        self.push(Call::Start {
            id: job.id,
            reattach: job.reattach,
        });
    }
    fn exception(&self, _addr: String, id: JobId, kind: String, _note: String) {
        self.push(Call::Exception { id, kind });
    }
    fn signal(&self, _addr: String, id: JobId, signum: i32) {
        self.push(Call::Signal { id, signum });
    }
    fn expiration(&self, _addr: String, id: JobId, expiration: f64) {
        self.push(Call::Expiration { id, expiration });
    }
    fn confirm_gone(&self, _addr: String, id: JobId, rank: u32) {
        self.push(Call::ConfirmGone { id, rank });
    }
}

const T0: f64 = 1_800_000_000.0;
const OWNER: u32 = 1000;

/// A core over an in-memory store, its nodes joined, its effects carried
/// out at each flush as the committer would.
struct Bench {
    core: Core<MemoryStore>,
    answers: mpsc::UnboundedReceiver<super::ReadDone>,
    store: Arc<MemoryStore>,
    carrier: Carrier<Recording, MemoryStore>,
    calls: Recording,
    nodes: u32,
}

fn inventory(nodes: u32, cores: u32) -> ResourceSet {
    ResourceSet::from_nodes((0..nodes).map(|r| {
        Node::new(
            r,
            Some(&format!("node{r}")),
            IdSet::from_range(0, cores - 1),
            IdSet::new(),
        )
    }))
    .unwrap()
}

fn config() -> Config {
    Config {
        owner_uid: OWNER,
        ..Config::default()
    }
}

impl Bench {
    /// `nodes` nodes of 4 cores, all joined.
    async fn new(nodes: u32) -> Bench {
        Self::over(Arc::new(MemoryStore::new()), nodes, config(), true).await
    }

    async fn over(store: Arc<MemoryStore>, nodes: u32, config: Config, join: bool) -> Bench {
        let inv = inventory(nodes, 4);
        let members = Nodes::fixed(&inv);
        Self::with(store, nodes, config, Some(inv), members, join).await
    }

    /// `nodes` nodes named by a nodelist, their resources discovered when
    /// all of them have joined (none is known before).
    async fn discovering(store: Arc<MemoryStore>, nodes: u32, join: bool) -> Bench {
        let hosts = fluxgate_shared::Hostlist::parse(&format!("node[0-{}]", nodes - 1)).unwrap();
        let members = Nodes::nodelist(&hosts);
        Self::with(store, nodes, config(), None, members, join).await
    }

    async fn with(
        store: Arc<MemoryStore>,
        nodes: u32,
        config: Config,
        inv: Option<ResourceSet>,
        members: Nodes,
        join: bool,
    ) -> Bench {
        crate::clock::test::set(T0);
        let mut core = Core::new(
            Arc::clone(&store),
            Arc::new(config),
            inv,
            members,
            JobCredentials::disabled(),
        )
        .unwrap();
        let answers = core.reads.take_answers().unwrap();
        let calls = Recording::default();
        let (inbox, _) = mpsc::channel(16);
        let carrier = Carrier {
            hub: Hub::default(),
            journal: Journal::new(1024),
            exec: calls.clone(),
            inbox,
            reads: core.read_carrier(),
        };
        let mut b = Bench {
            core,
            answers,
            store,
            carrier,
            calls,
            nodes,
        };
        b.flush().await;
        if join {
            b.join_all().await;
        }
        b
    }

    /// Every node's exec service says hello.
    async fn join_all(&mut self) {
        for r in 0..self.nodes {
            let (tx, mut rx) = oneshot::channel();
            self.core.handle(Msg::Node(NodeMsg::Hello {
                session: u64::from(r) + 1,
                nodes: vec![NodeInfo {
                    hostname: format!("node{r}"),
                    cores: IdSet::from_range(0, 3),
                    gpus: IdSet::new(),
                }],
                addr: format!("http://node{r}:1"),
                jobs: HelloJobs::default(),
                reply: tx,
            }));
            assert_eq!(rx.try_recv().unwrap(), Ok(vec![r]));
        }
        self.flush().await;
    }

    /// Make the batch durable and carry out its effects, as the committer
    /// does; then apply the answers of the store reads it made, as the
    /// core's loop does, until none is owed.
    async fn flush(&mut self) {
        loop {
            let out = std::mem::take(&mut self.core.out);
            let mut effects = out.effects;
            effects.extend(self.core.inactive.end_flush());
            if !out.writes.is_empty() {
                self.store.commit(out.writes).await.unwrap();
            }
            for e in effects {
                self.carrier.carry(e);
            }
            if self.core.reads.owed() == 0 {
                return;
            }
            let answer = self.answers.recv().await.expect("the core's reads channel");
            self.core.loaded(answer);
        }
    }

    /// Inactive job `id`, from memory or the store, as the core finds it.
    fn inactive(&self, id: JobId) -> Inactive {
        match self.core.inactive.known(id) {
            inactive::Known::Inactive(j) => j,
            inactive::Known::Gone => panic!("job {id} was purged"),
            inactive::Known::AskStore => inactive::read_inactive(&*self.store, id)
                .unwrap()
                .expect("an inactive job"),
        }
    }

    async fn handle(&mut self, msg: Msg) {
        self.core.handle(msg);
        self.flush().await;
    }

    async fn submit_as(&mut self, yaml: &str, urgency: u8, userid: u32) -> Result<JobId, Error> {
        let jobspec = Jobspec::parse(yaml).expect("test jobspec");
        let json = jobspec.to_json();
        let (reply, mut rx) = oneshot::channel();
        self.handle(Msg::Submit {
            jobs: vec![SubmitArgs {
                // What the edge reads of the jobs its dependencies name.
                antecedents: Antecedents::read(&*self.store, &jobspec).unwrap(),
                jobspec: Arc::new(jobspec),
                jobspec_json: json,
                urgency: Urgency::new(u32::from(urgency)).unwrap(),
                flags: 0,
                userid,
                key: None,
                prior: None,
            }],
            reply,
        })
        .await;
        rx.try_recv().unwrap().remove(0)
    }

    async fn queue(
        &mut self,
        action: QueueAction,
        name: Option<&str>,
        reason: &str,
    ) -> Result<Vec<QueueStatus>, Error> {
        let (reply, mut rx) = oneshot::channel();
        self.handle(Msg::Queue {
            request: QueueRequest {
                action,
                name: name.map(str::to_string),
                all: false,
                reason: reason.into(),
            },
            reply,
        })
        .await;
        rx.try_recv().unwrap()
    }

    async fn submit(&mut self, yaml: &str) -> JobId {
        self.submit_as(yaml, 16, OWNER).await.unwrap()
    }

    /// Submit `ONE` with the waitable flag.
    async fn submit_waitable(&mut self) -> JobId {
        // FLUX_JOB_WAITABLE.
        let (msg, mut rx) = submit_msg(ONE, 4);
        self.handle(msg).await;
        rx.try_recv().unwrap().remove(0).unwrap()
    }

    async fn exec(&mut self, msg: ExecMsg) {
        self.handle(Msg::Exec(msg)).await;
    }

    /// The exec service runs the job to a normal end with `status`.
    async fn run_to_end(&mut self, id: JobId, status: i32) {
        self.exec(ExecMsg::Started { id }).await;
        self.finish(id, status).await;
    }

    async fn finish(&mut self, id: JobId, status: i32) {
        self.exec(ExecMsg::Finish {
            id,
            status,
            usage: None,
        })
        .await;
        self.exec(ExecMsg::Release {
            id,
            ranks: "all".into(),
            last: true,
        })
        .await;
    }

    async fn raise(&mut self, id: JobId, kind: &str, severity: u8) -> Result<(), Error> {
        let (reply, mut rx) = oneshot::channel();
        self.handle(Msg::Raise {
            id,
            kind: kind.into(),
            severity: Severity::new(u32::from(severity)).unwrap(),
            note: "from a test".into(),
            userid: OWNER,
            reply,
        })
        .await;
        rx.try_recv().unwrap()
    }

    async fn cancel(&mut self, id: JobId) {
        self.raise(id, "cancel", 0).await.unwrap();
    }

    async fn urgency(&mut self, id: JobId, urgency: u8) -> Result<u8, Error> {
        let (reply, mut rx) = oneshot::channel();
        self.handle(Msg::Urgency {
            id,
            urgency: Urgency::new(u32::from(urgency)).unwrap(),
            userid: OWNER,
            reply,
        })
        .await;
        rx.try_recv().unwrap()
    }

    /// Move the test clock on and fire what is due.
    async fn advance(&mut self, secs: f64) {
        crate::clock::test::advance(secs);
        self.core.fire_timers();
        self.flush().await;
    }

    /// Event names of a job's stored eventlog.
    fn events(&self, id: JobId) -> Vec<String> {
        self.lines(id)
            .iter()
            .map(|l| Event::parse_json(l).unwrap().name.to_string())
            .collect()
    }

    fn lines(&self, id: JobId) -> Vec<String> {
        self.store
            .read_log(id.into(), Log::Main)
            .unwrap()
            .unwrap_or_default()
    }

    /// The context of the job's last event named `name`.
    fn context(&self, id: JobId, name: &str) -> Map<String, Value> {
        self.lines(id)
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .rfind(|e| e["name"] == name)
            .and_then(|e| e.get("context").and_then(Value::as_object).cloned())
            .unwrap_or_default()
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.0.lock().unwrap().clone()
    }

    fn starts(&self) -> Vec<JobId> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Start { id, .. } => Some(id),
                _ => None,
            })
            .collect()
    }

    fn state(&self, id: JobId) -> Option<JobState> {
        self.core.jobs.get(&id).map(|a| a.job.state())
    }
}

/// A submit of `yaml` by the owner with `flags`, as the edge would hand it
/// over without reading any antecedent; and where its answer comes.
fn submit_msg(yaml: &str, flags: i64) -> (Msg, oneshot::Receiver<Vec<Result<JobId, Error>>>) {
    let jobspec = Jobspec::parse(yaml).unwrap();
    let (reply, rx) = oneshot::channel();
    let msg = Msg::Submit {
        jobs: vec![SubmitArgs {
            jobspec_json: jobspec.to_json(),
            jobspec: Arc::new(jobspec),
            urgency: Urgency::DEFAULT,
            flags,
            userid: OWNER,
            antecedents: Default::default(),
            key: None,
            prior: None,
        }],
        reply,
    };
    (msg, rx)
}

/// One task on one core, running `true`.
const ONE: &str = "version: 1
resources:
  - type: slot
    count: 1
    label: task
    with:
      - type: core
        count: 1
tasks:
  - command: [\"true\"]
    slot: task
    count:
      per_slot: 1
attributes:
  system:
    duration: 0
";

/// A jobspec of `nodes` whole nodes, `duration` seconds, with `system` attributes added.
fn spec(nodes: u32, duration: f64, system: &str) -> String {
    format!(
        "version: 1
resources:
  - type: node
    count: {nodes}
    exclusive: true
    with:
      - type: slot
        count: 1
        label: task
        with:
          - type: core
            count: 4
tasks:
  - command: [\"true\"]
    slot: task
    count:
      per_slot: 1
attributes:
  system:
    duration: {duration}
{system}"
    )
}

fn with_dependency(scheme: &str, on: JobId) -> String {
    spec(
        1,
        0.0,
        &format!(
            "    dependencies:\n      - scheme: {scheme}\n        value: \"{}\"\n",
            u64::from(on)
        ),
    )
}

const TO_RUN: [&str; 5] = ["submit", "validate", "depend", "priority", "alloc"];
const AFTER_RUN: [&str; 5] = ["start", "finish", "release", "free", "clean"];

fn seq(parts: &[&[&str]]) -> Vec<String> {
    parts
        .iter()
        .flat_map(|p| p.iter().map(|s| s.to_string()))
        .collect()
}

// ---- the whole pipeline -------------------------------------------------

#[tokio::test]
async fn a_job_walks_every_state_in_order() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    assert_eq!(b.events(id), seq(&[&TO_RUN]));
    assert_eq!(b.state(id), Some(JobState::Run));
    assert_eq!(
        b.calls(),
        vec![Call::Start {
            id,
            reattach: false
        }]
    );
    b.run_to_end(id, 0).await;
    assert_eq!(b.events(id), seq(&[&TO_RUN, &AFTER_RUN]));
    assert_eq!(b.state(id), None, "the job is inactive");
    assert_eq!(b.core.inactive.count(), 1);
}

#[tokio::test]
async fn events_are_stored_before_the_exec_start_is_asked() {
    let mut b = Bench::new(1).await;
    let (msg, _rx) = submit_msg(ONE, 0);
    b.core.handle(msg);
    // Before the batch is durable nothing has left the core.
    assert!(b.calls().is_empty());
    let start_at = b
        .core
        .out
        .effects
        .iter()
        .position(|e| matches!(e, Effect::ExecStart(_)))
        .expect("a start is queued");
    let reply_at = b
        .core
        .out
        .effects
        .iter()
        .position(|e| matches!(e, Effect::Reply(Reply::Submit(_))))
        .expect("the answer is queued");
    assert!(
        reply_at < start_at,
        "the submit is answered before the start leaves"
    );
    b.flush().await;
    assert_eq!(b.starts().len(), 1);
}

#[tokio::test]
async fn every_event_is_published_with_its_position() {
    let mut b = Bench::new(1).await;
    let mut rx = b.carrier.hub.subscribe();
    let id = b.submit(ONE).await;
    let mut seen = Vec::new();
    while let Ok(Published::Line {
        id: j, log, seq, ..
    }) = rx.try_recv()
    {
        assert_eq!((j, log), (id, Log::Main));
        seen.push(seq);
    }
    assert_eq!(seen, vec![0, 1, 2, 3, 4]);
}

#[tokio::test]
async fn a_failing_job_ends_with_its_status() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.run_to_end(id, 256).await;
    assert_eq!(b.events(id), seq(&[&TO_RUN, &AFTER_RUN]));
    assert_eq!(b.context(id, "finish")["status"], 256);
    let inactive = b.inactive(id);
    assert_eq!(inactive.result, fluxgate_shared::job::JobResult::Failed);
}

#[tokio::test]
async fn jobs_queue_for_busy_nodes_and_run_when_they_are_freed() {
    let mut b = Bench::new(1).await;
    let first = b.submit(&spec(1, 0.0, "")).await;
    let second = b.submit(&spec(1, 0.0, "")).await;
    assert_eq!(b.events(second), seq(&[&TO_RUN[..4]]));
    assert_eq!(b.state(second), Some(JobState::Sched));
    b.run_to_end(first, 0).await;
    assert_eq!(b.events(second), seq(&[&TO_RUN]));
    assert_eq!(b.starts(), vec![first, second]);
}

#[tokio::test]
async fn an_unsatisfiable_request_gets_an_alloc_exception_at_once() {
    let mut b = Bench::new(2).await;
    let id = b.submit(&spec(3, 0.0, "")).await;
    assert_eq!(b.events(id), seq(&[&TO_RUN[..4], &["exception", "clean"]]));
    assert_eq!(b.context(id, "exception")["type"], "alloc");
    assert!(b.starts().is_empty());
}

#[tokio::test]
async fn exec_and_output_lines_go_to_their_own_logs() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    let line = Event::new(T0, "init", None).to_json();
    b.exec(ExecMsg::ExecLine {
        id,
        line: line.clone(),
    })
    .await;
    b.exec(ExecMsg::ExecLine {
        id,
        line: "not json".into(),
    })
    .await;
    let exec = b.store.read_log(id.into(), Log::Exec).unwrap().unwrap();
    assert_eq!(exec, vec![line], "a malformed line is dropped");
    assert_eq!(b.events(id), seq(&[&TO_RUN]), "the main log is untouched");
}

#[tokio::test]
async fn live_output_reaches_watchers_and_is_not_stored() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id }).await;
    let mut rx = b.carrier.hub.subscribe();
    let data = |text: &str| {
        let ctx = serde_json::json!({"stream": "stdout", "rank": "0", "data": text});
        Event::new(T0, "data", ctx.as_object().cloned()).to_json()
    };
    let stored = data("stored\n");
    b.exec(ExecMsg::OutputLine {
        id,
        line: stored.clone(),
    })
    .await;
    for line in [
        data("$ "),
        "not json".into(),
        data(&"x".repeat(HUB_LINE_MAX)),
    ] {
        b.exec(ExecMsg::LiveOutputLine { id, line }).await;
    }
    // In order among the stored lines; a malformed or oversized one dropped.
    let mut heard = Vec::new();
    while let Ok(p) = rx.try_recv() {
        match p {
            Published::Line {
                log: Log::Output,
                line,
                ..
            } => {
                heard.push(("stored", line.unwrap().to_string()));
            }
            Published::Live { id: j, line, .. } if j == id => {
                heard.push(("live", line.to_string()));
            }
            _ => {}
        }
    }
    assert_eq!(
        heard,
        vec![("stored", stored.clone()), ("live", data("$ "))]
    );
    let output = b.store.read_log(id.into(), Log::Output).unwrap().unwrap();
    assert_eq!(output, vec![stored], "live output is never stored");
    // Held for the first watcher, since none followed; gone once inactive.
    let (_watching, held) = b.carrier.hub.follow_live(id);
    assert_eq!(held.len(), 1);
    drop(_watching);
    b.exec(ExecMsg::LiveOutputLine {
        id,
        line: data("later"),
    })
    .await;
    b.finish(id, 0).await;
    assert!(b.carrier.hub.follow_live(id).1.is_empty());
}

// ---- exceptions at every state ----------------------------------------

#[tokio::test]
async fn cancel_while_pending_in_sched() {
    let mut b = Bench::new(1).await;
    let busy = b.submit(&spec(1, 0.0, "")).await;
    let id = b.submit(&spec(1, 0.0, "")).await;
    b.cancel(id).await;
    assert_eq!(b.events(id), seq(&[&TO_RUN[..4], &["exception", "clean"]]));
    assert_eq!(b.starts(), vec![busy]);
}

#[tokio::test]
async fn cancel_while_held_in_priority() {
    let mut b = Bench::new(1).await;
    let id = b.submit_as(ONE, 0, OWNER).await.unwrap();
    assert_eq!(b.events(id), seq(&[&TO_RUN[..4]]));
    assert_eq!(b.context(id, "priority")["priority"], 0);
    b.cancel(id).await;
    assert_eq!(b.events(id), seq(&[&TO_RUN[..4], &["exception", "clean"]]));
}

#[tokio::test]
async fn cancel_while_depending() {
    let mut b = Bench::new(1).await;
    let busy = b.submit(&spec(1, 0.0, "")).await;
    let id = b.submit(&with_dependency("afterok", busy)).await;
    assert_eq!(b.state(id), Some(JobState::Depend));
    b.cancel(id).await;
    assert_eq!(
        b.events(id),
        seq(&[&["submit", "dependency-add", "validate", "exception", "clean"]])
    );
}

#[tokio::test]
async fn cancel_while_running_tells_exec_and_waits_for_release() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id }).await;
    b.cancel(id).await;
    assert_eq!(
        b.calls().last(),
        Some(&Call::Exception {
            id,
            kind: "cancel".into()
        })
    );
    assert_eq!(b.state(id), Some(JobState::Cleanup));
    assert_eq!(b.events(id), seq(&[&TO_RUN, &["start", "exception"]]));
    b.finish(id, 15).await;
    assert_eq!(
        b.events(id),
        seq(&[
            &TO_RUN,
            &["start", "exception", "finish", "release", "free", "clean"]
        ])
    );
}

/// After a reattach an exec service says the job's end again (its first
/// saying may have died with the job manager before it): stored once.
#[tokio::test]
async fn an_end_said_again_after_a_reattach_is_stored_once() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id }).await;
    for _ in 0..2 {
        b.exec(ExecMsg::Finish {
            id,
            status: 0,
            usage: None,
        })
        .await;
    }
    assert_eq!(b.events(id), seq(&[&TO_RUN, &["start", "finish"]]));
    assert_eq!(b.state(id), Some(JobState::Cleanup));
}

#[tokio::test]
async fn cancel_before_the_start_arrives() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.cancel(id).await;
    assert_eq!(b.state(id), Some(JobState::Cleanup));
    assert!(b.calls().contains(&Call::Exception {
        id,
        kind: "cancel".into()
    }));
    // The exec service ends the stream with a final release of nothing run.
    b.exec(ExecMsg::Release {
        id,
        ranks: "all".into(),
        last: true,
    })
    .await;
    assert_eq!(
        b.events(id),
        seq(&[&TO_RUN, &["exception", "release", "free", "clean"]])
    );
}

#[tokio::test]
async fn an_exception_in_cleanup_is_recorded_only() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id }).await;
    b.cancel(id).await;
    let before = b.calls().len();
    b.raise(id, "again", 0).await.unwrap();
    assert_eq!(b.calls().len(), before, "exec is told once");
    assert_eq!(
        b.events(id),
        seq(&[&TO_RUN, &["start", "exception", "exception"]])
    );
}

#[tokio::test]
async fn a_non_fatal_exception_leaves_the_job_running() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id }).await;
    b.raise(id, "note", 3).await.unwrap();
    assert_eq!(b.state(id), Some(JobState::Run));
    assert_eq!(b.context(id, "exception")["severity"], 3);
    assert_eq!(b.starts(), vec![id]);
    assert!(
        !b.calls()
            .iter()
            .any(|c| matches!(c, Call::Exception { .. }))
    );
}

#[tokio::test]
async fn an_exec_exception_ends_a_running_job() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id }).await;
    b.exec(ExecMsg::Exception {
        id,
        kind: "exec".into(),
        severity: 0,
        note: "task lost".into(),
    })
    .await;
    assert_eq!(b.state(id), Some(JobState::Cleanup));
    assert!(
        !b.calls()
            .iter()
            .any(|c| matches!(c, Call::Exception { .. })),
        "exec's own exception is not sent back to it"
    );
    b.finish(id, 9).await;
    assert_eq!(b.state(id), None);
}

#[tokio::test]
async fn a_lost_start_stream_holds_the_job_until_its_node_has_fenced_itself() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id }).await;
    b.exec(ExecMsg::Lost {
        id,
        error: "connection reset".into(),
    })
    .await;
    // Its tasks may run on where the stream came from: nothing is released.
    assert_eq!(b.events(id), seq(&[&TO_RUN, &["start"]]));
    let fence = b.core.config.resource.fence_timeout;
    silent_for(&mut b, 0, fence as u64 + 3);
    b.core.check_detached();
    b.core.run_actions();
    b.flush().await;
    assert_eq!(
        b.events(id),
        seq(&[&TO_RUN, &["start", "exception", "release", "free", "clean"]])
    );
    assert_eq!(b.context(id, "exception")["type"], "node-failure");
}

#[tokio::test]
async fn raising_on_an_inactive_or_unknown_job_is_refused() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.run_to_end(id, 0).await;
    assert!(matches!(
        b.raise(id, "cancel", 0).await,
        Err(Error::WrongState(_))
    ));
    assert!(matches!(
        b.raise(JobId::from(12345u64), "cancel", 0).await,
        Err(Error::UnknownJob(_))
    ));
}

#[tokio::test]
async fn an_exception_type_must_be_a_word() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    assert!(matches!(
        b.raise(id, "two words", 0).await,
        Err(Error::Invalid(_))
    ));
    assert_eq!(b.events(id), seq(&[&TO_RUN]));
}

// ---- signals ------------------------------------------------------------

#[tokio::test]
async fn a_signal_goes_to_a_running_job_only() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id }).await;
    let (reply, mut rx) = oneshot::channel();
    b.handle(Msg::Kill {
        id,
        signum: 10,
        reply,
    })
    .await;
    assert_eq!(rx.try_recv().unwrap(), Ok(()));
    assert_eq!(b.calls().last(), Some(&Call::Signal { id, signum: 10 }));
    b.run_to_end(id, 0).await;
    let (reply, mut rx) = oneshot::channel();
    b.handle(Msg::Kill {
        id,
        signum: 10,
        reply,
    })
    .await;
    assert!(matches!(rx.try_recv().unwrap(), Err(Error::WrongState(_))));
}

// ---- tasks --------------------------------------------------------------

#[tokio::test]
async fn a_job_s_leader_is_named_only_while_its_tasks_run() {
    let mut b = Bench::new(1).await;
    let wrong_state = |r: Result<String, Error>, words: &str| match r {
        Err(Error::WrongState(m)) => assert!(m.contains(words), "{m}"),
        other => panic!("expected {words:?}, got {other:?}"),
    };
    let held = b.submit_as(ONE, 0, OWNER).await.unwrap();
    wrong_state(
        b.tasks_leader(held).await,
        "has not started yet (state SCHED)",
    );
    let id = b.submit(ONE).await;
    wrong_state(b.tasks_leader(id).await, "still starting");
    b.exec(ExecMsg::Started { id }).await;
    assert_eq!(b.tasks_leader(id).await, Ok("http://node0:1".to_string()));
    b.exec(ExecMsg::Finish {
        id,
        status: 0,
        usage: None,
    })
    .await;
    wrong_state(
        b.tasks_leader(id).await,
        "no longer running (state CLEANUP)",
    );
    b.exec(ExecMsg::Release {
        id,
        ranks: "all".into(),
        last: true,
    })
    .await;
    assert_eq!(
        b.tasks_leader(id).await,
        Err(Error::WrongState(format!("job {id} is inactive")))
    );
    let unknown = JobId::from(4242u64);
    assert_eq!(
        b.tasks_leader(unknown).await,
        Err(Error::UnknownJob(unknown))
    );
}

// ---- urgency and hold ---------------------------------------------------

#[tokio::test]
async fn a_held_job_runs_once_released() {
    let mut b = Bench::new(1).await;
    let id = b.submit_as(ONE, 0, OWNER).await.unwrap();
    assert_eq!(b.state(id), Some(JobState::Sched));
    assert!(b.starts().is_empty());
    assert_eq!(b.urgency(id, 16).await, Ok(0));
    assert_eq!(
        b.events(id),
        seq(&[&TO_RUN[..4], &["urgency", "priority", "alloc"]])
    );
    assert_eq!(b.starts(), vec![id]);
}

#[tokio::test]
async fn holding_a_pending_job_keeps_it_from_running() {
    let mut b = Bench::new(1).await;
    let busy = b.submit(&spec(1, 0.0, "")).await;
    let id = b.submit(&spec(1, 0.0, "")).await;
    assert_eq!(b.urgency(id, 0).await, Ok(16));
    b.run_to_end(busy, 0).await;
    assert_eq!(b.state(id), Some(JobState::Sched));
    assert_eq!(b.starts(), vec![busy]);
    assert_eq!(b.context(id, "priority")["priority"], 0);
}

#[tokio::test]
async fn a_higher_urgency_runs_first() {
    let mut b = Bench::new(1).await;
    let busy = b.submit(&spec(1, 0.0, "")).await;
    let low = b.submit(&spec(1, 0.0, "")).await;
    let high = b.submit_as(&spec(1, 0.0, ""), 20, OWNER).await.unwrap();
    b.run_to_end(busy, 0).await;
    assert_eq!(b.starts(), vec![busy, high]);
    b.run_to_end(high, 0).await;
    assert_eq!(b.starts(), vec![busy, high, low]);
}

#[tokio::test]
async fn expedite_overtakes_every_other_urgency() {
    let mut b = Bench::new(1).await;
    let busy = b.submit(&spec(1, 0.0, "")).await;
    let high = b.submit_as(&spec(1, 0.0, ""), 30, OWNER).await.unwrap();
    let late = b.submit(&spec(1, 0.0, "")).await;
    b.urgency(late, 31).await.unwrap();
    b.run_to_end(busy, 0).await;
    assert_eq!(b.starts(), vec![busy, late]);
    b.run_to_end(late, 0).await;
    assert_eq!(b.starts(), vec![busy, late, high]);
}

#[tokio::test]
async fn urgency_of_a_running_job_cannot_change() {
    let mut b = Bench::new(1).await;
    let id = b.submit(ONE).await;
    assert!(matches!(b.urgency(id, 3).await, Err(Error::WrongState(_))));
}

// ---- dependencies -------------------------------------------------------

#[tokio::test]
async fn afterok_runs_after_success() {
    let mut b = Bench::new(2).await;
    let first = b.submit(&spec(1, 0.0, "")).await;
    let id = b.submit(&with_dependency("afterok", first)).await;
    assert_eq!(b.state(id), Some(JobState::Depend));
    b.run_to_end(first, 0).await;
    assert_eq!(
        b.events(id),
        seq(&[
            &["submit", "dependency-add", "validate", "dependency-remove"],
            &TO_RUN[2..]
        ])
    );
    assert_eq!(b.starts(), vec![first, id]);
}

#[tokio::test]
async fn afterok_fails_after_failure() {
    let mut b = Bench::new(2).await;
    let first = b.submit(&spec(1, 0.0, "")).await;
    let id = b.submit(&with_dependency("afterok", first)).await;
    b.run_to_end(first, 1 << 8).await;
    assert_eq!(
        b.events(id),
        seq(&[&["submit", "dependency-add", "validate", "exception", "clean"]])
    );
    assert_eq!(b.context(id, "exception")["type"], "dependency");
}

#[tokio::test]
async fn afternotok_runs_after_failure() {
    let mut b = Bench::new(2).await;
    let first = b.submit(&spec(1, 0.0, "")).await;
    let id = b.submit(&with_dependency("afternotok", first)).await;
    b.run_to_end(first, 1 << 8).await;
    assert_eq!(b.state(id), Some(JobState::Run));
}

#[tokio::test]
async fn afterany_runs_after_a_cancel() {
    let mut b = Bench::new(2).await;
    let first = b.submit(&spec(1, 0.0, "")).await;
    let id = b.submit(&with_dependency("afterany", first)).await;
    b.cancel(first).await;
    b.finish(first, 15).await;
    assert_eq!(b.state(first), None);
    assert_eq!(b.state(id), Some(JobState::Run));
}

#[tokio::test]
async fn afterstart_runs_once_the_antecedent_starts() {
    let mut b = Bench::new(2).await;
    let first = b.submit(&spec(1, 0.0, "")).await;
    let id = b.submit(&with_dependency("afterstart", first)).await;
    assert_eq!(b.state(id), Some(JobState::Depend));
    b.exec(ExecMsg::Started { id: first }).await;
    assert_eq!(b.state(id), Some(JobState::Run));
}

#[tokio::test]
async fn a_dependency_on_a_finished_job_resolves_at_submit() {
    let mut b = Bench::new(1).await;
    let first = b.submit(&spec(1, 0.0, "")).await;
    b.run_to_end(first, 0).await;
    let id = b.submit(&with_dependency("afterok", first)).await;
    assert_eq!(b.state(id), Some(JobState::Run));
    assert!(!b.events(id).contains(&"dependency-add".to_string()));
}

#[tokio::test]
async fn a_dependency_on_an_unknown_job_is_refused_and_leaves_no_trace() {
    let mut b = Bench::new(1).await;
    let r = b
        .submit_as(&with_dependency("afterok", JobId::from(999u64)), 16, OWNER)
        .await;
    assert!(r.is_err());
    assert!(b.core.jobs.is_empty());
    assert_eq!(b.store.max_job_id().unwrap(), None);
}

#[tokio::test]
async fn begin_time_waits_for_the_test_clock() {
    let mut b = Bench::new(1).await;
    let at = T0 + 100.0;
    let id = b
        .submit(&spec(
            1,
            0.0,
            &format!("    dependencies:\n      - scheme: begin-time\n        value: \"{at}\"\n"),
        ))
        .await;
    assert_eq!(b.state(id), Some(JobState::Depend));
    b.advance(50.0).await;
    assert_eq!(b.state(id), Some(JobState::Depend));
    b.advance(51.0).await;
    assert_eq!(b.state(id), Some(JobState::Run));
    assert_eq!(
        b.events(id),
        seq(&[
            &["submit", "dependency-add", "validate", "dependency-remove"],
            &TO_RUN[2..]
        ])
    );
}

// ---- time limits --------------------------------------------------------

#[tokio::test]
async fn a_time_limit_raises_timeout_when_the_clock_passes_it() {
    let mut b = Bench::new(1).await;
    let id = b.submit(&spec(1, 60.0, "")).await;
    b.exec(ExecMsg::Started { id }).await;
    b.advance(59.0).await;
    assert_eq!(b.state(id), Some(JobState::Run));
    b.advance(2.0).await;
    assert_eq!(b.state(id), Some(JobState::Cleanup));
    assert_eq!(b.context(id, "exception")["type"], "timeout");
    assert_eq!(
        b.calls().last(),
        Some(&Call::Exception {
            id,
            kind: "timeout".into()
        })
    );
}

#[tokio::test]
async fn a_job_that_ends_in_time_sees_no_timeout() {
    let mut b = Bench::new(1).await;
    let id = b.submit(&spec(1, 60.0, "")).await;
    b.run_to_end(id, 0).await;
    b.advance(120.0).await;
    assert_eq!(b.events(id), seq(&[&TO_RUN, &AFTER_RUN]));
}

#[tokio::test]
async fn the_expiration_in_r_follows_the_time_limit() {
    let mut b = Bench::new(1).await;
    let id = b.submit(&spec(1, 60.0, "")).await;
    let r = b.core.jobs[&id].r.clone().unwrap();
    assert_eq!(r.expiration(), Some(T0 + 60.0));
}

// ---- nodes --------------------------------------------------------------

#[tokio::test]
async fn nothing_starts_before_the_nodes_join() {
    let store = Arc::new(MemoryStore::new());
    let mut b = Bench::over(store, 1, config(), false).await;
    let id = b.submit(ONE).await;
    assert_eq!(b.state(id), Some(JobState::Sched));
    b.join_all().await;
    assert_eq!(b.state(id), Some(JobState::Run));
    assert_eq!(b.starts(), vec![id]);
}

#[tokio::test]
async fn a_node_that_leaves_takes_no_new_jobs() {
    let mut b = Bench::new(2).await;
    b.handle(Msg::Node(NodeMsg::Gone { session: 2 })).await;
    let first = b.submit(&spec(1, 0.0, "")).await;
    let second = b.submit(&spec(1, 0.0, "")).await;
    assert_eq!(b.state(first), Some(JobState::Run));
    assert_eq!(b.state(second), Some(JobState::Sched));
    let r = b.core.jobs[&first].r.clone().unwrap();
    assert_eq!(r.ranks(), IdSet::from_range(0, 0));
}

// ---- restart replay -----------------------------------------------------

#[tokio::test]
async fn restart_reattaches_running_jobs_and_requeues_pending_ones() {
    let store = Arc::new(MemoryStore::new());
    let (running, pending, done) = {
        let mut b = Bench::over(Arc::clone(&store), 1, config(), true).await;
        let done = b.submit(&spec(1, 0.0, "")).await;
        b.run_to_end(done, 0).await;
        let running = b.submit(&spec(1, 0.0, "")).await;
        b.exec(ExecMsg::Started { id: running }).await;
        let pending = b.submit(&spec(1, 0.0, "")).await;
        (running, pending, done)
    };
    let mut b = Bench::over(Arc::clone(&store), 1, config(), false).await;
    assert_eq!(b.state(running), Some(JobState::Run));
    assert_eq!(b.state(pending), Some(JobState::Sched));
    assert_eq!(b.state(done), None);
    assert_eq!(
        b.events(running),
        seq(&[&TO_RUN, &["start", "flux-restart"]])
    );
    // A pending job is prioritized again, as flux-core's restart does.
    assert_eq!(
        b.events(pending),
        seq(&[&TO_RUN[..4], &["flux-restart", "priority"]])
    );
    assert_eq!(b.events(done).last().unwrap(), "clean");
    b.join_all().await;
    assert_eq!(
        b.calls(),
        vec![Call::Start {
            id: running,
            reattach: true
        }]
    );
    b.finish(running, 0).await;
    assert_eq!(b.starts(), vec![running, pending]);
}

/// A jobspec named `name`, with the `singleton` dependency when `single`.
fn named(name: &str, single: bool) -> String {
    let deps = if single {
        "    dependencies:\n      - scheme: singleton\n        value: \"\"\n"
    } else {
        ""
    };
    spec(1, 0.0, &format!("    job:\n      name: {name}\n{deps}"))
}

#[tokio::test]
async fn singleton_waiters_go_one_at_a_time_across_a_restart() {
    let store = Arc::new(MemoryStore::new());
    let (first, second, third) = {
        let mut b = Bench::over(Arc::clone(&store), 2, config(), true).await;
        let first = b.submit(&named("s", false)).await;
        b.exec(ExecMsg::Started { id: first }).await;
        let second = b.submit(&named("s", true)).await;
        let third = b.submit(&named("s", true)).await;
        // Another name, or none at all, is not held.
        let other = b.submit(&named("t", true)).await;
        assert_ne!(b.state(other), Some(JobState::Depend));
        assert!(matches!(
            b.submit_as(&spec(1, 0.0, "    dependencies:\n      - scheme: singleton\n        value: \"\"\n"), 16, OWNER).await,
            Err(Error::Invalid(m)) if m == "singleton jobs require a job name"
        ));
        for id in [second, third] {
            assert_eq!(b.state(id), Some(JobState::Depend));
            assert_eq!(b.context(id, "dependency-add")["description"], "singleton");
        }
        (first, second, third)
    };
    let mut b = Bench::over(Arc::clone(&store), 2, config(), false).await;
    b.join_all().await;
    // Still one at a time after the restart.
    assert_eq!(b.state(second), Some(JobState::Depend));
    assert_eq!(b.state(third), Some(JobState::Depend));
    b.finish(first, 0).await;
    assert_ne!(b.state(second), Some(JobState::Depend));
    assert_eq!(b.state(third), Some(JobState::Depend));
    b.run_to_end(second, 0).await;
    assert_ne!(b.state(third), Some(JobState::Depend));
    assert!(b.events(third).contains(&"dependency-remove".to_string()));
}

#[tokio::test]
async fn restart_issues_ids_after_the_stored_ones() {
    let store = Arc::new(MemoryStore::new());
    let first = {
        let mut b = Bench::over(Arc::clone(&store), 1, config(), true).await;
        b.submit(ONE).await
    };
    let mut b = Bench::over(store, 1, config(), true).await;
    let second = b.submit(ONE).await;
    assert!(u64::from(second) > u64::from(first));
}

#[tokio::test]
async fn restart_keeps_inactive_jobs_waitable_and_listed() {
    let store = Arc::new(MemoryStore::new());
    let id = {
        let mut b = Bench::over(Arc::clone(&store), 1, config(), true).await;
        let id = b.submit(ONE).await;
        b.run_to_end(id, 0).await;
        id
    };
    let b = Bench::over(store, 1, config(), true).await;
    assert_eq!(b.core.inactive.count(), 1);
    let inactive = b.inactive(id);
    assert_eq!(inactive.result, fluxgate_shared::job::JobResult::Completed);
}

// ---- queue --------------------------------------------------------------

#[tokio::test]
async fn a_disabled_queue_refuses_submissions_until_enabled() {
    let mut b = Bench::new(1).await;
    for (action, ok) in [(QueueAction::Disable, false), (QueueAction::Enable, true)] {
        let status = b.queue(action, None, "maintenance").await.unwrap();
        assert_eq!(status[0].state.enable, ok);
        let r = b.submit_as(ONE, 16, OWNER).await;
        assert_eq!(r.is_ok(), ok, "{r:?}");
        if !ok {
            assert_eq!(
                r.unwrap_err().to_string(),
                "job submission is disabled: maintenance"
            );
        }
    }
}

#[tokio::test]
async fn a_prolog_interrupted_by_a_restart_is_finished_as_failed() {
    let store = Arc::new(MemoryStore::new());
    let id = {
        let mut b = Bench::over(Arc::clone(&store), 1, config(), true).await;
        let id = b.submit(ONE).await;
        // As if a prolog had started when the job manager stopped.
        let line = Event::new(
            T0,
            "prolog-start",
            Some(
                [("description".to_string(), Value::from("site-prolog"))]
                    .into_iter()
                    .collect(),
            ),
        )
        .to_json();
        store
            .commit(vec![crate::store::Write::Append {
                id: id.into(),
                log: Log::Main,
                line,
            }])
            .await
            .unwrap();
        id
    };
    let mut with_prolog = config();
    with_prolog.perilog.prolog = Some("site-prolog".into());
    let mut b = Bench::over(store, 1, with_prolog, true).await;
    assert_eq!(
        b.events(id),
        seq(&[
            &TO_RUN,
            &["prolog-start", "flux-restart", "prolog-finish", "exception"],
            &["free", "clean"]
        ])
    );
    assert_eq!(b.context(id, "prolog-finish")["status"], 256);
    assert_eq!(b.context(id, "prolog-finish")["description"], "site-prolog");
    assert_eq!(b.context(id, "exception")["type"], "prolog");
    assert!(b.starts().is_empty(), "the job never starts");
    let _ = b.state(id);
    b.flush().await;
}

#[tokio::test]
async fn losing_a_node_ends_the_jobs_running_there() {
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 2, liveness_config(), true).await;
    let on0 = b.submit(&spec(1, 0.0, "")).await;
    let on1 = b.submit(&spec(1, 0.0, "")).await;
    b.exec(ExecMsg::Started { id: on0 }).await;
    b.exec(ExecMsg::Started { id: on1 }).await;
    // Session 2 serves rank 1: its stream breaks, which may be a partition
    // that heals; the job runs on until the node is lost.
    b.handle(Msg::Node(NodeMsg::Gone { session: 2 })).await;
    assert_eq!(b.state(on1), Some(JobState::Run));
    silent_for(&mut b, 1, 100);
    b.core.check_torpid();
    b.flush().await;
    assert_eq!(b.state(on0), Some(JobState::Run));
    assert_eq!(b.state(on1), Some(JobState::Cleanup));
    assert_eq!(b.context(on1, "exception")["type"], "node-failure");
    assert_eq!(
        b.context(on1, "exception")["note"],
        "no heartbeat for 10s from rank 1 (node1)"
    );
    // Its exec service is gone: nothing can be told to it.
    assert!(
        !b.calls()
            .iter()
            .any(|c| matches!(c, Call::Exception { id, .. } if *id == on1))
    );
}

#[tokio::test]
async fn a_longer_time_limit_reaches_the_running_job_and_its_timer() {
    let mut b = Bench::new(1).await;
    let id = b.submit(&spec(1, 60.0, "")).await;
    b.exec(ExecMsg::Started { id }).await;
    let (reply, mut rx) = oneshot::channel();
    let updates: Map<String, Value> =
        [("attributes.system.duration".to_string(), Value::from(120.0))]
            .into_iter()
            .collect();
    b.handle(Msg::Update { id, updates, reply }).await;
    assert_eq!(rx.try_recv().unwrap(), Ok(Some(T0 + 120.0)));
    assert_eq!(
        b.calls().last(),
        Some(&Call::Expiration {
            id,
            expiration: T0 + 120.0
        })
    );
    b.advance(90.0).await;
    assert_eq!(
        b.state(id),
        Some(JobState::Run),
        "the old limit no longer holds"
    );
    b.advance(31.0).await;
    assert_eq!(b.context(id, "exception")["type"], "timeout");
}

#[tokio::test]
async fn a_drained_node_takes_no_new_jobs_until_undrained() {
    let mut b = Bench::new(1).await;
    let (reply, mut rx) = oneshot::channel();
    b.handle(Msg::Resource(ResourceMsg::Drain {
        targets: "0".into(),
        reason: Some("maintenance".into()),
        mode: Default::default(),
        reply,
    }))
    .await;
    assert_eq!(rx.try_recv().unwrap(), Ok(()));
    let id = b.submit(ONE).await;
    assert_eq!(b.state(id), Some(JobState::Sched));
    let (reply, mut rx) = oneshot::channel();
    b.handle(Msg::Resource(ResourceMsg::Undrain {
        targets: "0".into(),
        reason: None,
        force: false,
        reply,
    }))
    .await;
    assert_eq!(rx.try_recv().unwrap(), Ok(()));
    assert_eq!(b.state(id), Some(JobState::Run));
    let stored = b.store.resource_eventlog().unwrap();
    let names: Vec<String> = stored
        .iter()
        .map(|l| Event::parse_json(l).unwrap().name.to_string())
        .filter(|n| n == "drain" || n == "undrain")
        .collect();
    assert_eq!(names, ["drain", "undrain"]);
}

#[tokio::test]
async fn waiting_for_a_waitable_job_is_answered_once_it_ends() {
    let mut b = Bench::new(1).await;
    let id = b.submit_waitable().await;
    let (reply, mut waiting) = oneshot::channel();
    b.handle(Msg::Wait {
        id: Some(id),
        reply,
    })
    .await;
    assert!(waiting.try_recv().is_err(), "no answer while it runs");
    b.run_to_end(id, 1 << 8).await;
    let result = waiting.try_recv().unwrap().unwrap();
    assert_eq!(result.id, id);
    assert!(!result.success);
    assert_eq!(result.error, "task(s) exited with exit code 1");
    let (reply, mut again) = oneshot::channel();
    b.handle(Msg::Wait {
        id: Some(id),
        reply,
    })
    .await;
    assert!(matches!(
        again.try_recv().unwrap(),
        Err(Error::WrongState(_))
    ));
}

#[tokio::test]
async fn a_host_outside_the_inventory_cannot_join() {
    let mut b = Bench::new(1).await;
    let hello = |host: &str, reply| {
        Msg::Node(NodeMsg::Hello {
            session: 99,
            nodes: vec![NodeInfo {
                hostname: host.into(),
                cores: IdSet::from_range(0, 3),
                gpus: IdSet::new(),
            }],
            addr: "http://elsewhere:1".into(),
            jobs: HelloJobs::default(),
            reply,
        })
    };
    let (reply, mut rx) = oneshot::channel();
    b.handle(hello("stranger", reply)).await;
    let refused = rx.try_recv().unwrap().unwrap_err();
    assert_eq!(refused, JoinRefused::Unknown("stranger".into()));
    assert_eq!(
        refused.to_string(),
        "host stranger is not in this instance's resource inventory"
    );
    let (reply, mut rx) = oneshot::channel();
    b.handle(Msg::Node(NodeMsg::Hello {
        session: 100,
        nodes: Vec::new(),
        addr: "http://elsewhere:1".into(),
        jobs: HelloJobs::default(),
        reply,
    }))
    .await;
    assert_eq!(rx.try_recv().unwrap(), Err(JoinRefused::NoNode));
}

// ---- store reads, off the core's task ----------------------------------

impl Bench {
    /// Run `ONE` to its end with `status` and let its summary leave memory:
    /// from then on only the store knows the job.
    async fn ended_in_store(&mut self, status: i32) -> JobId {
        let id = self.submit(ONE).await;
        self.run_to_end(id, status).await;
        // The flush after the one that made it durable forgets it.
        self.flush().await;
        assert!(matches!(
            self.core.inactive.known(id),
            inactive::Known::AskStore
        ));
        id
    }

    async fn tasks_leader(&mut self, id: JobId) -> Result<String, Error> {
        let (reply, mut rx) = oneshot::channel();
        self.handle(Msg::TasksLeader { id, reply }).await;
        rx.try_recv().unwrap()
    }

    async fn lookup(&mut self, id: JobId) -> Result<Option<bool>, Error> {
        let (reply, mut rx) = oneshot::channel();
        self.handle(Msg::Lookup { id, reply }).await;
        rx.try_recv().unwrap()
    }

    async fn purge(&mut self, num_limit: u64) -> Result<u64, Error> {
        let (reply, mut rx) = oneshot::channel();
        self.handle(Msg::Purge {
            age_limit: None,
            num_limit: Some(num_limit),
            force: true,
            batch: 0,
            reply,
        })
        .await;
        rx.try_recv().unwrap()
    }
}

#[tokio::test]
async fn a_request_on_a_job_only_the_store_knows_is_answered_after_a_read() {
    let mut b = Bench::new(1).await;
    let id = b.ended_in_store(0).await;
    assert!(matches!(
        b.raise(id, "cancel", 0).await,
        Err(Error::WrongState(m)) if m.contains("inactive")
    ));
    assert!(matches!(
        b.urgency(JobId::from(4242u64), 3).await,
        Err(Error::UnknownJob(_))
    ));
    assert_eq!(b.lookup(id).await, Ok(Some(false)));
    assert_eq!(b.lookup(JobId::from(4242u64)).await, Ok(None));
    assert_eq!(b.core.reads.owed(), 0);
}

#[tokio::test]
async fn dependencies_on_jobs_only_the_store_knows_are_decided_at_submit() {
    let mut b = Bench::new(1).await;
    let ok = b.ended_in_store(0).await;
    let failed = b.ended_in_store(1 << 8).await;
    let after_ok = b.submit(&with_dependency("afterok", ok)).await;
    assert!(!b.events(after_ok).contains(&"dependency-add".to_string()));
    let never = b
        .submit_as(&with_dependency("afterok", failed), 16, OWNER)
        .await;
    assert!(
        matches!(&never, Err(Error::Invalid(m)) if m.contains("can never be satisfied")),
        "{never:?}"
    );
}

#[tokio::test]
async fn a_dependency_the_edge_did_not_read_is_decided_once_the_store_is() {
    let mut b = Bench::new(1).await;
    let failed = b.ended_in_store(1 << 8).await;
    let ok = b.ended_in_store(0).await;
    // Submitted without the edge's read: accepted, then decided.
    let submit = |b: &mut Bench, on: JobId| {
        let (msg, rx) = submit_msg(&with_dependency("afterok", on), 0);
        b.core.handle(msg);
        rx
    };
    let mut rx = submit(&mut b, ok);
    b.flush().await;
    let runs = rx.try_recv().unwrap().remove(0).unwrap();
    let names = b.events(runs);
    let add = names.iter().position(|n| n == "dependency-add");
    let remove = names.iter().position(|n| n == "dependency-remove");
    assert!(add.is_some() && remove > add, "{names:?}");
    assert_eq!(b.state(runs), Some(JobState::Run));

    let mut rx = submit(&mut b, failed);
    b.flush().await;
    let never = rx.try_recv().unwrap().remove(0).unwrap();
    assert_eq!(b.state(never), None);
    assert_eq!(b.context(never, "exception")["type"], "dependency");
}

#[tokio::test]
async fn a_purge_reads_the_oldest_from_the_store_and_queues_behind_another() {
    let mut b = Bench::new(1).await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        crate::clock::test::advance(1.0);
        ids.push(b.ended_in_store(0).await);
    }
    // Two purges asked together: the second is decided after the first.
    let (first, mut first_rx) = oneshot::channel();
    let (second, mut second_rx) = oneshot::channel();
    for (n, reply) in [(3, first), (1, second)] {
        b.core.handle(Msg::Purge {
            age_limit: None,
            num_limit: Some(n),
            force: true,
            batch: 0,
            reply,
        });
    }
    b.flush().await;
    assert_eq!(first_rx.try_recv().unwrap(), Ok(1));
    assert_eq!(second_rx.try_recv().unwrap(), Ok(2));
    assert_eq!(b.core.inactive.count(), 1);
    for gone in &ids[..3] {
        assert_eq!(b.store.summary((*gone).into()).unwrap(), None, "{gone}");
    }
    assert!(b.store.summary(ids[3].into()).unwrap().is_some());
    assert_eq!(b.purge(1).await, Ok(0));
}

#[tokio::test]
async fn a_waitable_job_is_reaped_after_a_restart_without_a_read() {
    let store = Arc::new(MemoryStore::new());
    let id = {
        let mut b = Bench::over(Arc::clone(&store), 1, config(), true).await;
        let id = b.submit_waitable().await;
        b.run_to_end(id, 0).await;
        id
    };
    let mut b = Bench::over(store, 1, config(), true).await;
    let (reply, mut rx) = oneshot::channel();
    b.core.handle(Msg::Wait { id: None, reply });
    assert_eq!(b.core.reads.owed(), 0, "reaping reads nothing");
    b.flush().await;
    let r = rx.try_recv().unwrap().unwrap();
    assert_eq!((r.id, r.success), (id, true));
}

#[tokio::test]
async fn heartbeats_the_join_streams_record_are_taken_each_tick() {
    let mut config = config();
    config.resource.torpid_timeout = 0.1;
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 1, config, true).await;
    std::thread::sleep(std::time::Duration::from_millis(150));
    b.core.check_torpid();
    b.flush().await;
    assert_eq!(b.core.res.state().torpid(), &IdSet::from_range(0, 0));
    // Node 0 joined on session 1; its stream records a beat, the tick takes it.
    b.core.heartbeats().beat(1);
    b.core.take_heartbeats();
    b.flush().await;
    assert!(b.core.res.state().torpid().is_empty(), "lively again");
    // A beat of a session that is gone changes nothing.
    b.core.heartbeats().beat(99);
    b.core.take_heartbeats();
    b.flush().await;
    assert!(b.core.res.state().torpid().is_empty());
}

// ---- liveness: lost nodes, broken sessions, fences -------------------------

/// Timeouts for the liveness tests: torpid 1 s, lost 10 s, fence 5 s.
fn liveness_config() -> Config {
    let mut config = config();
    config.resource.torpid_timeout = 1.0;
    config.resource.lost_timeout = 10.0;
    config.resource.fence_timeout = 5.0;
    config
}

/// Make `rank` last heard `secs` seconds ago.
fn silent_for(b: &mut Bench, rank: u32, secs: u64) {
    let then = std::time::Instant::now() - std::time::Duration::from_secs(secs);
    b.core.res.heard(rank, then);
}

/// Job `id` starts, the calls so far are forgotten, and its start stream
/// breaks.
async fn started_then_cut_off(b: &mut Bench, id: JobId) {
    b.exec(ExecMsg::Started { id }).await;
    b.calls.0.lock().unwrap().clear();
    b.exec(ExecMsg::Lost {
        id,
        error: "keepalive timed out".into(),
    })
    .await;
}

fn count(events: &[String], name: &str) -> usize {
    events.iter().filter(|e| *e == name).count()
}

#[tokio::test]
async fn a_lost_node_fails_its_jobs_once_and_releases_them_once_fenced() {
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 1, liveness_config(), true).await;
    let id = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id }).await;
    silent_for(&mut b, 0, 100);
    for _ in 0..3 {
        b.core.check_torpid();
        b.flush().await;
    }
    let events = b.events(id);
    assert_eq!(count(&events, "exception"), 1, "{events:?}");
    assert_eq!(b.state(id), Some(JobState::Cleanup));
    assert!(!events.contains(&"release".to_string()), "{events:?}");
    // The node has fenced itself long since: the job is released for it,
    // without waiting for its session to break.
    b.core.check_detached();
    b.core.run_actions();
    b.flush().await;
    let events = b.events(id);
    assert_eq!(count(&events, "exception"), 1, "{events:?}");
    assert_eq!(count(&events, "release"), 1, "{events:?}");
    assert!(
        events.ends_with(&["free".to_string(), "clean".to_string()]),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_broken_session_keeps_the_cores_until_the_node_has_fenced_itself() {
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 1, liveness_config(), true).await;
    let id = b.submit(&spec(1, 0.0, "")).await;
    b.exec(ExecMsg::Started { id }).await;
    b.cancel(id).await;
    b.exec(ExecMsg::Lost {
        id,
        error: "broken pipe".into(),
    })
    .await;
    // Silent, torpid, but not yet past its fence: its tasks may still run.
    silent_for(&mut b, 0, 3);
    b.core.check_detached();
    b.core.run_actions();
    b.flush().await;
    assert_eq!(b.state(id), Some(JobState::Cleanup));
    let waiting = b.submit(&spec(1, 0.0, "")).await;
    assert_eq!(
        b.state(waiting),
        Some(JobState::Sched),
        "cores reused too soon"
    );
    // Past the fence (and its margin): released, and the cores go on.
    silent_for(&mut b, 0, 8);
    b.core.check_detached();
    b.core.run_actions();
    b.flush().await;
    assert_eq!(b.state(id), None, "inactive");
    b.core.run_actions();
    b.flush().await;
    assert_eq!(b.state(waiting), Some(JobState::Run));
}

#[tokio::test]
async fn a_job_led_from_a_fenced_node_keeps_its_other_nodes_until_they_have_ended_it() {
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 2, liveness_config(), true).await;
    let id = b.submit(&spec(2, 0.0, "")).await;
    started_then_cut_off(&mut b, id).await;
    // The leader's node has fenced itself; rank 1 answers.
    silent_for(&mut b, 0, 100);
    silent_for(&mut b, 1, 0);
    b.core.check_detached();
    b.core.run_actions();
    b.flush().await;
    let events = b.events(id);
    assert_eq!(count(&events, "exception"), 1, "{events:?}");
    assert_eq!(
        count(&events, "release"),
        0,
        "released before rank 1 ended its part"
    );
    assert!(
        b.calls().contains(&Call::ConfirmGone { id, rank: 1 }),
        "{:?}",
        b.calls()
    );
    let waiting = b.submit(&spec(1, 0.0, "")).await;
    b.core.run_actions();
    b.flush().await;
    assert_eq!(
        b.state(waiting),
        Some(JobState::Sched),
        "cores reused too soon"
    );
    // The broken session, noticed late, and more ticks change nothing.
    b.exec(ExecMsg::Lost {
        id,
        error: "keepalive timed out".into(),
    })
    .await;
    b.core.check_detached();
    b.core.run_actions();
    b.flush().await;
    let asked = b
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::ConfirmGone { .. }))
        .count();
    assert_eq!(asked, 1, "{:?}", b.calls());
    assert_eq!(
        b.state(waiting),
        Some(JobState::Sched),
        "cores reused too soon"
    );
    // Rank 1 says the job no longer runs there: released, the cores go on.
    b.exec(ExecMsg::PartGone { id, rank: 1 }).await;
    b.core.run_actions();
    b.flush().await;
    let events = b.events(id);
    assert_eq!(count(&events, "release"), 1, "{events:?}");
    assert_eq!(b.state(id), None, "inactive");
    b.core.run_actions();
    b.flush().await;
    assert_eq!(b.state(waiting), Some(JobState::Run));
    // Said again (a second answer in flight): nothing more.
    b.exec(ExecMsg::PartGone { id, rank: 1 }).await;
    assert_eq!(count(&b.events(id), "release"), 1);
}

#[tokio::test]
async fn a_job_whose_session_broke_is_reattached_and_keeps_its_real_end() {
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 1, liveness_config(), true).await;
    let id = b.submit(ONE).await;
    started_then_cut_off(&mut b, id).await;
    // The node answers again (it heartbeats): the job is asked for again.
    silent_for(&mut b, 0, 0);
    b.core.check_detached();
    b.core.run_actions();
    b.flush().await;
    assert_eq!(
        b.calls(),
        vec![Call::Start { id, reattach: true }],
        "reattached once"
    );
    // The node says how the job ended while it was cut off.
    b.finish(id, 0).await;
    let events = b.events(id);
    assert_eq!(count(&events, "exception"), 0, "{events:?}");
    assert!(events.contains(&"finish".to_string()), "{events:?}");
    let inactive = b.inactive(id);
    assert_eq!(inactive.waitstatus, Some(0));
    assert_eq!(inactive.result, fluxgate_shared::job::JobResult::Completed);
}

#[tokio::test]
async fn a_rejoining_node_is_told_to_kill_the_jobs_that_ended_here() {
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 1, liveness_config(), true).await;
    let ended = b.submit(ONE).await;
    b.run_to_end(ended, 0).await;
    let running = b.submit(ONE).await;
    b.exec(ExecMsg::Started { id: running }).await;
    b.calls.0.lock().unwrap().clear();
    let (tx, mut rx) = oneshot::channel();
    b.handle(Msg::Node(NodeMsg::Hello {
        session: 50,
        nodes: vec![NodeInfo {
            hostname: "node0".into(),
            cores: IdSet::from_range(0, 3),
            gpus: IdSet::new(),
        }],
        addr: "http://node0:1".into(),
        jobs: HelloJobs {
            running: vec![ended, running],
            ended: Vec::new(),
        },
        reply: tx,
    }))
    .await;
    assert_eq!(rx.try_recv().unwrap(), Ok(vec![0]));
    assert_eq!(
        b.calls(),
        vec![Call::Exception {
            id: ended,
            kind: "exec".into()
        }],
        "only the ended job is killed"
    );
}

#[tokio::test]
async fn a_job_lost_before_its_nodes_rejoin_leaves_no_resources_allocated() {
    let store = Arc::new(MemoryStore::new());
    let id = {
        let mut b = Bench::discovering(Arc::clone(&store), 2, true).await;
        let id = b.submit(&spec(1, 0.0, "")).await;
        b.exec(ExecMsg::Started { id }).await;
        id
    };
    // A plain restart: resources are discovered again only when every node
    // has joined, and none does before the job's start gives up on them.
    let mut b = Bench::discovering(store, 2, false).await;
    assert!(b.core.sched.pool().is_none());
    let rejoin = b.core.rejoin_wait();
    assert!(
        rejoin >= b.core.config.resource.fence_timeout,
        "never before the fence"
    );
    b.advance(rejoin + 1.0).await;
    assert_eq!(b.state(id), None, "the job ended");
    b.join_all().await;
    let pool = b.core.sched.pool().expect("discovered");
    assert!(
        pool.allocated().ranks().is_empty(),
        "resources of an ended job stayed allocated: {}",
        pool.allocated().ranks()
    );
    // The whole machine is free for a job that needs it.
    let all = b.submit(&spec(2, 0.0, "")).await;
    assert_eq!(b.state(all), Some(JobState::Run));
}

#[tokio::test]
async fn a_job_still_running_after_a_restart_keeps_its_resources_allocated() {
    let store = Arc::new(MemoryStore::new());
    let id = {
        let mut b = Bench::discovering(Arc::clone(&store), 2, true).await;
        let id = b.submit(&spec(1, 0.0, "")).await;
        b.exec(ExecMsg::Started { id }).await;
        id
    };
    let mut b = Bench::discovering(store, 2, true).await;
    assert_eq!(b.state(id), Some(JobState::Run));
    let pool = b.core.sched.pool().expect("discovered");
    assert_eq!(pool.allocated().ranks().count(), 1);
    let all = b.submit(&spec(2, 0.0, "")).await;
    assert_eq!(b.state(all), Some(JobState::Sched));
}

// ---- backfill -------------------------------------------------------------

/// Four nodes: a 3-node job running for 100 s, and a whole-machine head
/// waiting for it.
async fn blocked_head(config: Config) -> (Bench, JobId, JobId) {
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 4, config, true).await;
    let running = b.submit(&spec(3, 100.0, "")).await;
    b.exec(ExecMsg::Started { id: running }).await;
    let head = b.submit(&spec(4, 100.0, "")).await;
    assert_eq!(b.state(head), Some(JobState::Sched));
    (b, running, head)
}

#[tokio::test]
async fn easy_backfills_a_short_job_past_a_blocked_head_but_not_a_long_one() {
    let (mut b, running, head) = blocked_head(config()).await;
    // The head's reservation: when the running job's limit ends.
    let estimate = b.core.jobs[&head].t_estimate.expect("a reservation");
    assert!((estimate - (T0 + 100.0)).abs() < 1.0, "{estimate}");
    let short = b.submit(&spec(1, 10.0, "")).await;
    assert_eq!(
        b.state(short),
        Some(JobState::Run),
        "ends before the head starts"
    );
    let long = b.submit(&spec(1, 1000.0, "")).await;
    assert_eq!(b.state(long), Some(JobState::Sched), "would delay the head");
    let unlimited = b.submit(&spec(1, 0.0, "")).await;
    assert_eq!(
        b.state(unlimited),
        Some(JobState::Sched),
        "no limit: never backfilled"
    );
    // The listing shows the estimate, as flux-jobs reads it.
    let (reply, mut rx) = oneshot::channel();
    b.handle(Msg::List {
        filter: ListFilter::default(),
        reply,
    })
    .await;
    let rows = rx.try_recv().unwrap();
    let row = rows.iter().find(|r| r.id == head).unwrap();
    let ann: Value = serde_json::from_str(row.annotations.as_deref().unwrap()).unwrap();
    assert!(ann["sched"]["t_estimate"].as_f64().is_some(), "{ann}");
    // Once the running and short jobs end, the head runs before the long job.
    b.run_to_end(short, 0).await;
    b.finish(running, 0).await;
    assert_eq!(b.state(head), Some(JobState::Run));
    assert_eq!(b.state(long), Some(JobState::Sched));
    assert!(b.core.jobs[&head].t_estimate.is_none());
}

#[tokio::test]
async fn fcfs_lets_nothing_pass_a_blocked_head() {
    let mut config = config();
    config.sched.policy = crate::config::SchedPolicy::Fcfs;
    let (mut b, _running, head) = blocked_head(config).await;
    assert!(b.core.jobs[&head].t_estimate.is_none());
    let short = b.submit(&spec(1, 10.0, "")).await;
    assert_eq!(b.state(short), Some(JobState::Sched));
}

#[tokio::test]
async fn a_head_waiting_on_a_job_without_a_limit_gets_no_reservation() {
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 4, config(), true).await;
    let forever = b.submit(&spec(3, 0.0, "")).await;
    b.exec(ExecMsg::Started { id: forever }).await;
    let head = b.submit(&spec(4, 100.0, "")).await;
    let short = b.submit(&spec(1, 10.0, "")).await;
    assert!(b.core.jobs[&head].t_estimate.is_none());
    assert_eq!(
        b.state(short),
        Some(JobState::Sched),
        "anything could delay the head"
    );
}

/// Four nodes, 3 busy for 100 s; a 3-node head (reserved at 100-200,
/// one node spare then) and a whole-machine job behind it; then a 1-node
/// job for 250 s: it fits on the spare node without delaying the head,
/// but would delay the job behind it.
async fn two_blocked(policy: crate::config::SchedPolicy) -> (Bench, JobId, JobId, JobId) {
    let mut config = config();
    config.sched.policy = policy;
    let mut b = Bench::over(Arc::new(MemoryStore::new()), 4, config, true).await;
    let running = b.submit(&spec(3, 100.0, "")).await;
    b.exec(ExecMsg::Started { id: running }).await;
    let head = b.submit(&spec(3, 100.0, "")).await;
    let second = b.submit(&spec(4, 100.0, "")).await;
    let long = b.submit(&spec(1, 250.0, "")).await;
    (b, head, second, long)
}

#[tokio::test]
async fn conservative_reserves_every_blocked_job_and_easy_only_the_first() {
    use crate::config::SchedPolicy;
    let (b, head, second, long) = two_blocked(SchedPolicy::Easy).await;
    assert_eq!(
        b.state(long),
        Some(JobState::Run),
        "easy: spare at the shadow time"
    );
    assert!(b.core.jobs[&head].t_estimate.is_some());
    assert!(b.core.jobs[&second].t_estimate.is_none());

    let (b, head, second, long) = two_blocked(SchedPolicy::Conservative).await;
    assert_eq!(
        b.state(long),
        Some(JobState::Sched),
        "would delay the second"
    );
    let t = |id: JobId| b.core.jobs[&id].t_estimate.expect("a reservation");
    assert!((t(head) - (T0 + 100.0)).abs() < 1.0, "{}", t(head));
    assert!((t(second) - (T0 + 200.0)).abs() < 1.0, "{}", t(second));
    assert!((t(long) - (T0 + 300.0)).abs() < 1.0, "{}", t(long));
}

mod policy;

mod usage;

#[tokio::test]
async fn a_submit_retried_with_its_key_answers_the_same_job() {
    let mut b = Bench::new(1).await;
    let keyed = |key: &str, prior: Option<JobId>| {
        let (mut msg, rx) = submit_msg(ONE, 0);
        if let Msg::Submit { jobs, .. } = &mut msg {
            jobs[0].key = Some(key.to_string());
            jobs[0].prior = prior;
        }
        (msg, rx)
    };
    let (msg, mut rx) = keyed("k1", None);
    b.handle(msg).await;
    let first = rx.try_recv().unwrap().remove(0).unwrap();
    // Before the store is read again: the job in memory answers.
    let (msg, mut rx) = keyed("k1", None);
    b.handle(msg).await;
    assert_eq!(rx.try_recv().unwrap().remove(0).unwrap(), first);
    assert_eq!(
        b.store.job_by_key(OWNER, "k1").unwrap(),
        Some(u64::from(first)),
        "the key is stored with the job"
    );
    // Another key is another job.
    let (msg, mut rx) = keyed("k2", None);
    b.handle(msg).await;
    assert_ne!(rx.try_recv().unwrap().remove(0).unwrap(), first);
    // Once the job left memory, what the edge read of the store answers.
    b.run_to_end(first, 0).await;
    let (msg, mut rx) = keyed("k1", Some(first));
    b.handle(msg).await;
    assert_eq!(rx.try_recv().unwrap().remove(0).unwrap(), first);
}

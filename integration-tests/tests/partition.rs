//! Faults on a real network: a job manager, exec services and clients each
//! on a host of their own (network namespaces on one bridge), partitions
//! made with iptables DROP rules. The tests run one at a time (they share
//! the machine's few cores and time out on silence) and leave no namespace
//! or rule behind, however they end.
//!
//! Host 0 is the job manager, hosts 1..=N its exec services; the test's
//! own clients sit on the last host, which is never cut off.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fluxgate_integration_tests::leader::{refused_for, serving};
use fluxgate_integration_tests::netns::Net;
use fluxgate_integration_tests::postgres::PgServer;
use fluxgate_integration_tests::{Instance, binary, eventually, exits_within, host, names};
use fluxgate_launch::{Cores, Exec, JobManager};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::jobspec::JobspecBuilder;

/// One test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The job manager's port (each host has its own addresses).
const JM_PORT: u16 = 7000;
/// Each exec service's port.
const EXEC_PORT: u16 = 7001;
/// A node fences itself 3 s after it was cut off, and is lost after 6 s.
const FENCE_3_LOST_6: &[(&str, &str)] = &[
    ("resource.fence_timeout", "3"),
    ("resource.lost_timeout", "6"),
];
/// How long anything the tests wait for may take.
const PATIENCE: Duration = Duration::from_secs(60);

/// A cluster on its own network: the instance (its processes are killed
/// first, when it is dropped) and the network (removed after).
struct Cluster {
    inst: Instance,
    net: Net,
}

/// Host of the job manager.
const JM: usize = 0;

/// Host of exec service `i`.
fn exec_host(i: usize) -> usize {
    i + 1
}

impl Cluster {
    /// A job manager and `nodes` exec services of `cores` cores, with
    /// `extra` hosts besides (clients), the test thread on the last one.
    /// Timeouts are small: heartbeats every second.
    async fn start(nodes: usize, cores: u32, extra: usize, sets: &[(&str, &str)]) -> Cluster {
        Self::start_killing_after(nodes, cores, extra, sets, 1.0).await
    }

    /// As [`Cluster::start`], the exec services giving a job's tasks `kill`
    /// seconds between SIGTERM and SIGKILL.
    async fn start_killing_after(
        nodes: usize,
        cores: u32,
        extra: usize,
        sets: &[(&str, &str)],
        kill: f64,
    ) -> Cluster {
        let net = Net::new(nodes + 2 + extra);
        net.enter(nodes + 1 + extra);
        let statedir = tempfile::tempdir().expect("tempdir");
        let uri = format!("http://{}:{JM_PORT}", Net::addr(JM));
        let mut spec = JobManager::new(statedir.path())
            .listen(&format!("{}:{JM_PORT}", Net::addr(JM)))
            .nodelist(&format!("node[0-{}]", nodes - 1))
            .set("resource.heartbeat_interval", "1")
            .set("resource.torpid_timeout", "3")
            .env("FLUXGATE_LOG", "warn");
        for (k, v) in sets {
            spec = spec.set(k, v);
        }
        let jm = net
            .command(JM, &spec.command(&binary("fluxgate-job-manager")))
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn the job manager");
        let execs = (0..nodes)
            .map(|i| spawn_exec(&net, &uri, i, cores, kill))
            .collect();
        let inst = Instance::from_parts(uri, statedir, Some(jm), execs);
        wait_serving(&inst.uri).await;
        inst.wait_up(nodes).await;
        Cluster { inst, net }
    }

    /// A `fluxgate` command run on host `h`, reaching the instance.
    fn cli(&self, h: usize, args: &[&str]) -> Command {
        let mut cmd = Command::new(binary("fluxgate"));
        cmd.args(args)
            .env("FLUXGATE_URI", &self.inst.uri)
            .env_remove("FLUXGATE_TOKEN");
        self.net.command(h, &cmd)
    }
}

/// Exec service `i` on its host, joining `uri`.
fn spawn_exec(net: &Net, uri: &str, i: usize, cores: u32, kill: f64) -> Child {
    let h = exec_host(i);
    let cmd = Exec::new(uri)
        .listen(&format!("{}:{EXEC_PORT}", Net::addr(h)))
        .hostname(&host(i))
        .cores(Cores::Count(cores))
        .kill_timeout(kill)
        .env("FLUXGATE_LOG", "warn")
        .command(&binary("fluxgate-exec"));
    net.command(h, &cmd)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn fluxgate-exec")
}

/// Wait until the job manager at `uri` takes connections.
async fn wait_serving(uri: &str) {
    eventually(PATIENCE, async || {
        tonic::transport::Endpoint::from_shared(uri.to_string())
            .map_err(|e| e.to_string())?
            .connect()
            .await
            .map(|_| ())
            .map_err(|e| format!("{uri}: {e}"))
    })
    .await;
}

/// A submit whose answer is lost on the way back (the client's host drops
/// what the job manager sends, except connection set-up) times out on the
/// client's own deadline and is tried again with the same idempotency key:
/// once the path heals, the client prints the job the first try made, and
/// the instance holds that one job.
#[tokio::test(flavor = "current_thread")]
async fn a_submit_whose_reply_is_lost_makes_one_job() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start(1, 1, 1, &[]).await;
    let client = 2;
    cluster.net.drop_replies_from(client, JM);
    let mut submit = cluster
        .cli(client, &["submit", "true"])
        .env("FLUXGATE_TIMEOUT", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fluxgate submit");
    let made = eventually(PATIENCE, async || {
        match cluster.inst.list(127).await.as_slice() {
            [one] => Ok(JobId::from(one.id)),
            other => Err(format!("{} jobs", other.len())),
        }
    })
    .await;
    // The client's tries keep timing out while the path is cut: let it
    // make a few (each has a 1 s deadline) before the path heals, for new
    // connections only: a client that waited on its first one would wait
    // until TCP gives up.
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.net.heal_new_connections(client, JM);
    let status = exits_within(&mut submit, PATIENCE, "fluxgate submit").await;
    let out = submit.wait_with_output().expect("submit output");
    assert!(
        status.success(),
        "submit failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = JobId::parse(String::from_utf8_lossy(&out.stdout).trim()).expect("a job id");
    assert_eq!(printed, made, "the retry answered another job");
    let all = cluster.inst.list(127).await;
    assert_eq!(all.len(), 1, "a retried submit made a second job: {all:?}");
}

/// Two submits with one idempotency key (a retry after a lost answer)
/// make one job, on a single job manager; another key makes another job.
#[tokio::test(flavor = "current_thread")]
async fn a_retried_submit_with_the_same_key_makes_one_job() {
    let _serial = SERIAL.lock().await;
    let inst = Instance::start(1, 1).await;
    let jobspec = JobspecBuilder::new(["true"])
        .build()
        .expect("jobspec")
        .to_json();
    let submit = async |key: &str| {
        let reply = inst
            .jobs()
            .await
            .submit(pb::SubmitRequest {
                jobspec: jobspec.clone(),
                idempotency_key: key.to_string(),
                ..Default::default()
            })
            .await
            .expect("submit");
        JobId::from(reply.into_inner().id)
    };
    let first = submit("retry-key-1").await;
    let again = submit("retry-key-1").await;
    assert_eq!(first, again, "the retry made another job");
    inst.wait_clean(first).await;
    // Answered from the store once the job has left memory.
    assert_eq!(submit("retry-key-1").await, first);
    let other = submit("retry-key-2").await;
    assert_ne!(other, first);
    inst.wait_clean(other).await;
    assert_eq!(inst.list(127).await.len(), 2);
}

/// A job that writes the time into `dir/ticks` every tenth of a second
/// until it is killed: its last line says when it last ran.
fn ticker(dir: &Path) -> JobspecBuilder {
    let script = format!(
        "while :; do date +%s.%N >> {}/ticks; sleep 0.1; done",
        dir.display()
    );
    JobspecBuilder::new(["sh", "-c", &script])
}

/// A [`ticker`] that ignores SIGTERM: only SIGKILL ends it.
fn ticker_ignoring_sigterm(dir: &Path) -> JobspecBuilder {
    let script = format!(
        "trap '' TERM; while :; do date +%s.%N >> {}/ticks; sleep 0.1; done",
        dir.display()
    );
    JobspecBuilder::new(["sh", "-c", &script])
}

/// The last time a [`ticker`] wrote, and how many lines it wrote.
fn last_tick(dir: &Path) -> (f64, usize) {
    let text = std::fs::read_to_string(dir.join("ticks")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    let last = lines
        .iter()
        .rev()
        .find_map(|l| l.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    (last, lines.len())
}

/// Job `next`, given cores of a [`ticker`] job that was to end first, runs
/// to a normal end, and the ticker did not tick once `next` had its cores.
async fn no_tick_after_alloc(inst: &Instance, dir: &Path, next: JobId) {
    let ev = inst.events_until(next, "eventlog", "alloc").await;
    let alloc = ev.last().expect("alloc").timestamp;
    let ev = inst.wait_clean(next).await;
    // A task still running would have ticked within this (ten ticks).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (last, _) = last_tick(dir);
    assert!(
        last < alloc,
        "the first job still ran ({last}) after its cores were given to the next ({alloc})"
    );
    let finish = ev.iter().find(|e| e.name == "finish").expect("finish");
    assert_eq!(finish.context.as_ref().unwrap()["status"], 0);
}

async fn cancel(inst: &Instance, id: JobId) {
    inst.jobs()
        .await
        .cancel(pb::CancelRequest {
            id: id.into(),
            ..Default::default()
        })
        .await
        .expect("cancel");
}

/// Fault 1: a node is cut off from the job manager while its job runs, and
/// the job is cancelled meanwhile. The node's exec service kills the job on
/// its own once its fence has passed, and the job manager waits that fence
/// out before the cores go to the next job: when the next job is given the
/// same cores, the old tasks have stopped.
#[tokio::test(flavor = "current_thread")]
async fn a_cut_off_node_runs_no_job_after_its_cores_are_given_away() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::start(1, 1, 0, FENCE_3_LOST_6).await;
    let inst = &cluster.inst;
    let first = inst.submit(&ticker(dir.path()), None).await;
    inst.events_until(first, "eventlog", "start").await;
    eventually(PATIENCE, async || match last_tick(dir.path()) {
        (_, 0) => Err("no tick yet".to_string()),
        _ => Ok(()),
    })
    .await;
    cluster.net.cut(JM, exec_host(0));
    let cut = std::time::Instant::now();
    cancel(inst, first).await;
    let next = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    // The first job ends (its release given on the fenced node's behalf),
    // and only then is the partition healed.
    let ev = inst.wait_clean(first).await;
    assert!(names(&ev).contains(&"release"), "{:?}", names(&ev));
    eprintln!(
        "the cut-off node's job was released {:?} after the cut (fence 3 s, lost 6 s)",
        cut.elapsed()
    );
    cluster.net.heal_all();
    no_tick_after_alloc(inst, dir.path(), next).await;
}

/// Fault 2: a job ends while its node is cut off (long enough for the
/// connections to be given up, not for the node to be lost). After the
/// heal the job manager hears the real end: `finish` with status 0, no
/// exception.
#[tokio::test(flavor = "current_thread")]
async fn a_job_that_ends_during_a_partition_keeps_its_real_status() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::start(
        1,
        1,
        0,
        &[
            ("resource.fence_timeout", "120"),
            ("resource.lost_timeout", "180"),
        ],
    )
    .await;
    let inst = &cluster.inst;
    let done = dir.path().join("done");
    let script = format!("sleep 1; touch {}", done.display());
    let id = inst
        .submit(&JobspecBuilder::new(["sh", "-c", &script]), None)
        .await;
    inst.events_until(id, "eventlog", "start").await;
    cluster.net.cut(JM, exec_host(0));
    eventually(PATIENCE, async || {
        done.exists()
            .then_some(())
            .ok_or_else(|| "the job has not ended".to_string())
    })
    .await;
    // Long enough for both sides to give up their connections (HTTP/2
    // pings every 10 s, 10 s to answer): the end must come by a reattach.
    tokio::time::sleep(Duration::from_secs(25)).await;
    cluster.net.heal_all();
    let ev = inst.wait_clean(id).await;
    assert!(
        !names(&ev).contains(&"exception"),
        "the job got an exception: {:?}",
        names(&ev)
    );
    let finish = ev.iter().find(|e| e.name == "finish").expect("finish");
    assert_eq!(finish.context.as_ref().unwrap()["status"], 0);
}

/// A job's first node is cut off from everything while the job runs on
/// two nodes. The job manager fails the job once that node has fenced
/// itself, tells the other node to end its part (whose task ignores
/// SIGTERM, so it runs until the exec service's SIGKILL 5 s later),
/// and gives that node's core to the next job only once the node says the
/// part has ended: the old task has stopped before the next job's alloc.
#[tokio::test(flavor = "current_thread")]
async fn the_answering_nodes_of_a_job_led_from_a_lost_node_end_it_before_their_cores_go() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::start_killing_after(2, 1, 0, FENCE_3_LOST_6, 5.0).await;
    let inst = &cluster.inst;
    let job = ticker_ignoring_sigterm(dir.path()).nodes(2).ntasks(2);
    let first = inst.submit(&job, None).await;
    inst.events_until(first, "eventlog", "start").await;
    eventually(PATIENCE, async || match last_tick(dir.path()) {
        (_, n) if n >= 4 => Ok(()),
        _ => Err("not both tasks ticking yet".to_string()),
    })
    .await;
    cluster.net.cut(JM, exec_host(0));
    cluster.net.cut(exec_host(0), exec_host(1));
    let next = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    let ev = inst.wait_clean(first).await;
    assert!(names(&ev).contains(&"release"), "{:?}", names(&ev));
    no_tick_after_alloc(inst, dir.path(), next).await;
    cluster.net.heal_all();
}

/// Children killed (and reaped) when the test ends, however it ends.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Fault 3: the leader of two job managers is cut off from PostgreSQL (not
/// from its nodes or clients). It stops serving once its lease could have
/// expired; the standby takes over, hears the running job's real end from
/// the node, and its pool is right: a job needing the whole node runs. The
/// old leader stood down in the same process: once it reaches the database
/// again it points clients to the new leader, and when that one dies it
/// leads again, recovering from the store a second time.
#[tokio::test(flavor = "current_thread")]
async fn a_leader_cut_off_from_its_store_steps_down_and_the_new_one_is_right() {
    let _serial = SERIAL.lock().await;
    const A: usize = 0;
    const NODE: usize = 1;
    const B: usize = 2;
    const PG: usize = 3;
    let net = Net::new(5);
    net.enter(4);
    let pg = PgServer::start_in_netns(net.ns(PG), &Net::addr(PG));
    let url = pg.new_database();
    let uri = |h: usize| format!("http://{}:{JM_PORT}", Net::addr(h));
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut procs = Procs(Vec::new());
    for (h, dir) in [(A, &dirs[0]), (B, &dirs[1])] {
        let spec = JobManager::new(dir.path())
            .listen(&format!("{}:{JM_PORT}", Net::addr(h)))
            .nodelist("node0")
            .set("store.url", &url)
            .set("ha.lease", "3")
            .set("ha.poll_interval", "0.2")
            .set("resource.heartbeat_interval", "1")
            .set("resource.fence_timeout", "20")
            .set("resource.lost_timeout", "30")
            .env("FLUXGATE_LOG", "warn");
        let child = net
            .command(h, &spec.command(&binary("fluxgate-job-manager")))
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn a job manager");
        procs.0.push(child);
        if h == A {
            // A leads: it campaigns alone.
            let a = uri(A);
            eventually(PATIENCE, async || {
                serving(&a)
                    .await
                    .then_some(())
                    .ok_or_else(|| "A does not lead".to_string())
            })
            .await;
        }
    }
    let both = format!("{},{}", uri(A), uri(B));
    let exec = Exec::new(&both)
        .listen(&format!("{}:{EXEC_PORT}", Net::addr(NODE)))
        .hostname("node0")
        .cores(Cores::Count(2))
        .kill_timeout(1.0)
        .env("FLUXGATE_LOG", "warn")
        .command(&binary("fluxgate-exec"));
    procs.0.push(
        net.command(NODE, &exec)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn fluxgate-exec"),
    );
    // The test's helpers, pointed at A; the processes stay in `procs`.
    let a = Instance::from_parts(uri(A), tempfile::tempdir().unwrap(), None, Vec::new());
    a.wait_up(1).await;
    let done = dirs[0].path().join("done");
    let script = format!("sleep 4; touch {}", done.display());
    let id = a
        .submit(&JobspecBuilder::new(["sh", "-c", &script]), None)
        .await;
    a.events_until(id, "eventlog", "start").await;
    net.cut(A, PG);
    let cut = std::time::Instant::now();
    eventually(PATIENCE, async || {
        if serving(&uri(A)).await {
            Err("the cut-off leader still serves".to_string())
        } else {
            Ok(())
        }
    })
    .await;
    // Reported, not asserted: how long the old leader served after the cut.
    eprintln!(
        "the cut-off leader stopped serving {:?} after the cut (lease 3 s)",
        cut.elapsed()
    );
    eventually(PATIENCE, async || {
        serving(&uri(B))
            .await
            .then_some(())
            .ok_or_else(|| "the standby does not lead".to_string())
    })
    .await;
    let b = Instance::from_parts(uri(B), tempfile::tempdir().unwrap(), None, Vec::new());
    let ev = b.wait_clean(id).await;
    assert!(
        !names(&ev).contains(&"exception"),
        "the job that ran on was failed: {:?}",
        names(&ev)
    );
    let finish = ev.iter().find(|e| e.name == "finish").expect("finish");
    assert_eq!(finish.context.as_ref().unwrap()["status"], 0);
    assert!(done.exists());
    // Nothing stays allocated: a job taking the whole node runs.
    let whole = b
        .submit(
            &JobspecBuilder::new(["true"]).nodes(1).exclusive(true),
            None,
        )
        .await;
    let ev = b.wait_clean(whole).await;
    let finish = ev.iter().find(|e| e.name == "finish").expect("finish");
    assert_eq!(finish.context.as_ref().unwrap()["status"], 0);
    stood_down_then_leads_again(&net, &mut procs, &[id, whole]).await;
    drop(pg);
}

/// After fault 3: A is alive, NOT_SERVING, and (once it reaches the
/// database again) refuses calls naming B; B is killed, A leads again and
/// serves the jobs `made` under both leads and a new one.
async fn stood_down_then_leads_again(net: &Net, procs: &mut Procs, made: &[JobId]) {
    const A: usize = 0;
    let uri = |h: usize| format!("http://{}:{JM_PORT}", Net::addr(h));
    let (a_uri, b_uri) = (uri(A), uri(2));
    assert!(
        procs.0[0].try_wait().expect("wait").is_none(),
        "the old leader stays up as a standby"
    );
    // Cut off, it knows no leader yet, and its refusals say so.
    assert_eq!(
        fluxgate_integration_tests::leader::health(&a_uri).await,
        Ok(tonic_health::pb::health_check_response::ServingStatus::NotServing)
    );
    assert_eq!(refused_for(&a_uri).await, Ok(None));
    net.heal_all();
    eventually(PATIENCE, async || match refused_for(&a_uri).await? {
        Some(leader) if leader == b_uri => Ok(()),
        other => Err(format!("the old leader's refusal names {other:?}")),
    })
    .await;
    let b = &mut procs.0[1];
    b.kill().expect("kill the new leader");
    b.wait().expect("reap the new leader");
    eventually(PATIENCE, async || {
        serving(&a_uri)
            .await
            .then_some(())
            .ok_or_else(|| "the old leader does not lead again".to_string())
    })
    .await;
    let a = Instance::from_parts(a_uri, tempfile::tempdir().unwrap(), None, Vec::new());
    for id in made {
        let ev = a.wait_clean(*id).await;
        let finish = ev.iter().find(|e| e.name == "finish").expect("finish");
        assert_eq!(finish.context.as_ref().unwrap()["status"], 0, "{id}");
    }
    a.wait_up(1).await;
    let again = a
        .submit(
            &JobspecBuilder::new(["true"]).nodes(1).exclusive(true),
            None,
        )
        .await;
    let ev = a.wait_clean(again).await;
    let finish = ev.iter().find(|e| e.name == "finish").expect("finish");
    assert_eq!(finish.context.as_ref().unwrap()["status"], 0);
}

//! Two job managers on one PostgreSQL store: one leads, the other stands
//! by and takes over when the leader is killed, paused past its lease or
//! loses the database for a while. Nothing acknowledged may be lost, no
//! job may be made twice, and every job ends exactly once.

use std::collections::HashSet;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use fluxgate_integration_tests::leader::{health, refused_for};
use fluxgate_integration_tests::postgres::PgServer;
use fluxgate_integration_tests::{binary, eventually, host, names, spawn_jm};
use fluxgate_launch::{Cores, Exec, JobManager};
use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::job_manager_client::JobManagerClient;
use fluxgate_shared::jobspec::JobspecBuilder;
use fluxgate_shared::{Event, JobId};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const NODES: usize = 2;

/// Job managers sharing one database, their exec services, and the server.
struct Pair {
    jms: Vec<Option<Child>>,
    uris: Vec<String>,
    execs: Vec<Child>,
    url: String,
    _dirs: Vec<tempfile::TempDir>,
    pg: PgServer,
}

fn jm_spec(dir: &Path, url: &str) -> JobManager {
    JobManager::new(dir)
        .listen("127.0.0.1:0")
        .nodelist(&format!("node[0-{}]", NODES - 1))
        .set("store.url", url)
        .set("ha.lease", "1")
        .set("ha.poll_interval", "0.05")
}

impl Pair {
    async fn start() -> Pair {
        let pg = PgServer::start();
        let url = pg.new_database();
        let mut pair = Pair {
            jms: Vec::new(),
            uris: Vec::new(),
            execs: Vec::new(),
            url,
            _dirs: Vec::new(),
            pg,
        };
        // The first leads (it is alone when it campaigns); the second stands by.
        for _ in 0..2 {
            pair.spawn_jm().await;
            pair.wait_leader(Duration::from_secs(30)).await;
        }
        let all = pair.uris.join(",");
        for i in 0..NODES {
            let child = Exec::new(&all)
                .hostname(&host(i))
                .cores(Cores::Count(2))
                .kill_timeout(2.0)
                .env("FLUXGATE_LOG", "warn")
                .command(&binary("fluxgate-exec"))
                .spawn()
                .expect("spawn fluxgate-exec");
            pair.execs.push(child);
        }
        pair
    }

    async fn spawn_jm(&mut self) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = spawn_jm(&jm_spec(dir.path(), &self.url));
        let stdout = child.stdout.take().expect("piped stdout");
        let uri =
            fluxgate_launch::read_uri(stdout, &dir.path().join("jm.log"), Duration::from_secs(30))
                .await
                .expect("job manager serves");
        self.jms.push(Some(child));
        self.uris.push(uri);
        self._dirs.push(dir);
    }

    /// The index of the job manager whose JobManager service is SERVING.
    async fn leader_index(&self) -> Option<usize> {
        for (i, uri) in self.uris.iter().enumerate() {
            if self.jms[i].is_none() {
                continue;
            }
            // A paused job manager accepts connections and answers nothing.
            let Ok(ch) = Channel::from_shared(uri.clone())
                .unwrap()
                .connect_timeout(Duration::from_millis(500))
                .timeout(Duration::from_millis(500))
                .connect()
                .await
            else {
                continue;
            };
            let status = HealthClient::new(ch)
                .check(HealthCheckRequest {
                    service: "fluxgate.v1.JobManager".into(),
                })
                .await;
            if status.is_ok_and(|s| s.into_inner().status == 1) {
                return Some(i);
            }
        }
        None
    }

    /// Wait until job manager `i` stands by for `leader`: still running,
    /// its health NOT_SERVING, and its JobManager calls refused with
    /// UNAVAILABLE naming `leader`.
    async fn wait_standby_for(&mut self, i: usize, leader: usize) {
        let (uri, want) = (self.uris[i].clone(), self.uris[leader].clone());
        eventually(Duration::from_secs(30), async || {
            match refused_for(&uri).await? {
                Some(named) if named == want => Ok(()),
                other => Err(format!("job manager {i}'s refusal names {other:?}")),
            }
        })
        .await;
        assert_eq!(health(&uri).await, Ok(ServingStatus::NotServing));
        let child = self.jms[i].as_mut().expect("running");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "job manager {i} stays up as a standby"
        );
    }

    async fn wait_leader(&self, within: Duration) -> usize {
        eventually(within, async || {
            let leader = self.leader_index().await;
            leader.ok_or_else(|| "no job manager leads".to_string())
        })
        .await
    }

    async fn client(&self) -> JobManagerClient<Channel> {
        let i = self.wait_leader(Duration::from_secs(30)).await;
        let ch = Channel::from_shared(self.uris[i].clone())
            .unwrap()
            .connect()
            .await
            .expect("connect to the leader");
        JobManagerClient::new(ch).max_decoding_message_size(64 << 20)
    }

    fn signal(&self, i: usize, sig: Signal) {
        let pid = self.jms[i].as_ref().expect("running").id();
        let _ = kill(Pid::from_raw(pid as i32), sig);
    }

    /// Submit `req` until some leader acknowledges it (the key makes the
    /// retries one job).
    async fn submit(
        &self,
        client: &mut JobManagerClient<Channel>,
        req: pb::SubmitRequest,
    ) -> JobId {
        eventually(Duration::from_secs(30), async || {
            match client.submit(req.clone()).await {
                Ok(r) => Ok(JobId::from(r.into_inner().id)),
                Err(s) => {
                    assert!(
                        matches!(
                            s.code(),
                            tonic::Code::Unavailable
                                | tonic::Code::Unknown
                                | tonic::Code::Cancelled
                        ),
                        "submit refused: {s:?}"
                    );
                    *client = self.client().await;
                    Err(format!("no leader took the submit: {s:?}"))
                }
            }
        })
        .await
    }

    /// Every line of the job's main eventlog once it is inactive, read strictly.
    async fn ended(&self, id: JobId) -> Vec<Event> {
        eventually(Duration::from_secs(60), async || {
            let mut client = self.client().await;
            let stream = client
                .watch_eventlog(pb::WatchEventlogRequest {
                    id: id.into(),
                    name: "eventlog".into(),
                    follow: true,
                    ..Default::default()
                })
                .await;
            if let Ok(stream) = stream {
                let mut stream = stream.into_inner();
                let mut events = Vec::new();
                while let Ok(Some(line)) = stream.message().await {
                    let ev = Event::parse_json(&line.line).expect("stored line is RFC 18");
                    let clean = ev.name == "clean";
                    events.push(ev);
                    if clean {
                        return Ok(events);
                    }
                }
            }
            Err(format!("job {id} did not end"))
        })
        .await
    }

    async fn count_jobs(&self) -> usize {
        let mut client = self.client().await;
        client
            .list(pb::ListRequest {
                states: 127,
                ..Default::default()
            })
            .await
            .expect("list")
            .into_inner()
            .jobs
            .len()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for c in self.execs.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for c in self.jms.iter_mut().filter_map(Option::take) {
            let mut c = c;
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn request(cmd: &str, key: String) -> pb::SubmitRequest {
    let spec = JobspecBuilder::new(["sh", "-c", cmd]);
    pb::SubmitRequest {
        jobspec: spec.to_value().expect("jobspec").to_string(),
        idempotency_key: key,
        ..Default::default()
    }
}

/// The job's eventlog names each step once, in order, ending in `clean`;
/// only `priority` comes again, once after each `flux-restart` (as flux
/// re-prioritizes the jobs a restarted job manager finds pending).
fn assert_strict(id: JobId, events: &[Event]) {
    let names = names(events);
    let exceptions: Vec<_> = events.iter().filter(|e| e.name == "exception").collect();
    assert!(exceptions.is_empty(), "job {id}: {exceptions:?}");
    for once in [
        "submit", "validate", "depend", "alloc", "start", "finish", "release", "free", "clean",
    ] {
        assert_eq!(
            names.iter().filter(|n| **n == once).count(),
            1,
            "job {id}: {once} once in {names:?}"
        );
    }
    let restarts = names.iter().filter(|n| **n == "flux-restart").count();
    let priorities = names.iter().filter(|n| **n == "priority").count();
    assert!(
        (1..=1 + restarts).contains(&priorities),
        "job {id}: priority in {names:?}"
    );
    assert_eq!(names.last(), Some(&"clean"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_and_no_acknowledged_job_is_lost() {
    let mut pair = Pair::start().await;
    let first = pair.wait_leader(Duration::from_secs(30)).await;
    let mut client = pair.client().await;
    // One job outlives the failover: running when the leader dies, its
    // end is recorded by the new one.
    let long = pair
        .submit(&mut client, request("sleep 2", "long".into()))
        .await;
    let mut acked = vec![long];
    const JOBS: usize = 60;
    for i in 0..JOBS {
        if i == JOBS / 3 {
            pair.signal(first, Signal::SIGKILL);
            let _ = pair.jms[first].take().map(|mut c| c.wait());
        }
        acked.push(
            pair.submit(&mut client, request("true", format!("job-{i}")))
                .await,
        );
    }
    let second = pair.wait_leader(Duration::from_secs(10)).await;
    assert_ne!(first, second, "the standby leads");
    for id in &acked {
        assert_strict(*id, &pair.ended(*id).await);
    }
    let unique: HashSet<JobId> = acked.iter().copied().collect();
    assert_eq!(
        unique.len(),
        acked.len(),
        "each acknowledged job is its own"
    );
    assert_eq!(
        pair.count_jobs().await,
        acked.len(),
        "retried submits made no second job"
    );
}

/// A leader paused past its lease is deposed and never commits again; resumed,
/// it finds its epoch over and steps down to standby in the same process,
/// pointing clients to the new leader. When the new leader dies, it leads
/// again: its second recovery from the store, in one process, serves every job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_is_deposed_stands_by_and_can_lead_again() {
    let mut pair = Pair::start().await;
    let first = pair.wait_leader(Duration::from_secs(30)).await;
    let mut client = pair.client().await;
    let before = pair
        .submit(&mut client, request("true", "before".into()))
        .await;
    assert_strict(before, &pair.ended(before).await);
    pair.signal(first, Signal::SIGSTOP);
    // Past the lease (1 s), the standby ends the paused leader's sessions.
    let second = pair.wait_leader(Duration::from_secs(10)).await;
    assert_ne!(first, second);
    let mut client = pair.client().await;
    let during = pair
        .submit(&mut client, request("true", "during".into()))
        .await;
    assert_strict(during, &pair.ended(during).await);
    pair.signal(first, Signal::SIGCONT);
    // Resumed, the old leader finds its epoch over and stands by.
    pair.wait_standby_for(first, second).await;
    let epoch = pair.pg.query(&pair.url, "SELECT epoch FROM leader");
    assert_eq!(epoch.trim(), "2", "one takeover");
    let after = pair
        .submit(&mut client, request("true", "after".into()))
        .await;
    assert_strict(after, &pair.ended(after).await);
    pair.signal(second, Signal::SIGKILL);
    let _ = pair.jms[second].take().map(|mut c| c.wait());
    assert_eq!(pair.wait_leader(Duration::from_secs(30)).await, first);
    let mut client = pair.client().await;
    let last = pair
        .submit(&mut client, request("true", "last".into()))
        .await;
    for id in [before, during, after, last] {
        assert_strict(id, &pair.ended(id).await);
    }
    assert_eq!(pair.count_jobs().await, 4);
    let epoch = pair.pg.query(&pair.url, "SELECT epoch FROM leader");
    assert_eq!(epoch.trim(), "3", "the first leads again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_managers_wait_out_a_database_restart() {
    let pair = Pair::start().await;
    let mut client = pair.client().await;
    let before = pair
        .submit(&mut client, request("true", "before".into()))
        .await;
    assert_strict(before, &pair.ended(before).await);
    pair.pg.restart(Duration::from_secs(1));
    let mut client = pair.client().await;
    let after = pair
        .submit(&mut client, request("true", "after".into()))
        .await;
    assert_strict(after, &pair.ended(after).await);
    assert_strict(before, &pair.ended(before).await);
    assert_eq!(pair.count_jobs().await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fluxgate_run_follows_its_job_across_a_failover() {
    let pair = Pair::start().await;
    let first = pair.wait_leader(Duration::from_secs(30)).await;
    let run = tokio::process::Command::new(binary("fluxgate"))
        .args(["run", "sh", "-c", "echo one; sleep 2; echo two; exit 3"])
        .env("FLUXGATE_URI", pair.uris.join(","))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("fluxgate run");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    pair.signal(first, Signal::SIGKILL);
    let out = tokio::time::timeout(Duration::from_secs(60), run.wait_with_output())
        .await
        .expect("run ends")
        .expect("run output");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "one\ntwo\n",
        "each line once"
    );
    assert_eq!(out.status.code(), Some(3), "the job's exit code");
    assert_ne!(pair.wait_leader(Duration::from_secs(10)).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_several_job_managers_waits_as_long_as_a_job_runs() {
    let pair = Pair::start().await;
    let uris = pair.uris.join(",");
    let cli = move |args: &[&str]| {
        std::process::Command::new(binary("fluxgate"))
            .args(args)
            .env("FLUXGATE_URI", &uris)
            .output()
            .expect("fluxgate")
    };
    let submitted = cli(&["submit", "--flags", "waitable", "sleep", "3"]);
    assert!(submitted.status.success());
    let id = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    // Finding the leader probes each job manager briefly; the calls that
    // follow are not held to the probe's limit.
    let waited = tokio::task::spawn_blocking(move || cli(&["job", "wait", &id]))
        .await
        .unwrap();
    assert!(
        waited.status.success(),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
}

//! Helpers for tests that drive the real fluxgate binaries: start an instance
//! (one job manager and N exec processes on loopback), talk to it over gRPC,
//! and take it down again, whatever the test did.

pub mod command;
pub mod guest;
pub mod leader;
pub mod netns;
pub mod poll;
pub mod postgres;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

pub use command::{
    cmd, compile_mpi, fluxgate_in, output_with_stdin, script, sleeper, sorted_lines, text,
};
pub use guest::{GuestUser, require_root};
pub use poll::{eventually, eventually_blocking, exits_within, exits_within_blocking};

pub use fluxgate_launch::{Cores, Exec, JobManager};
use std::time::Duration;

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::job_manager_client::JobManagerClient;
use fluxgate_proto::v1::resource_client::ResourceClient;
use fluxgate_shared::jobspec::JobspecBuilder;
use fluxgate_shared::{Event, JobId};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// Adds `authorization: Bearer TOKEN` to every call; without a token the
/// calls go as they are.
#[derive(Debug, Clone, Default)]
pub struct Bearer(Option<AsciiMetadataValue>);

impl Bearer {
    /// Calls that present `token` (none: no credentials).
    pub fn new(token: Option<&str>) -> Bearer {
        Bearer(token.map(|t| {
            format!("Bearer {}", t.trim())
                .parse()
                .expect("token is header text")
        }))
    }
}

impl Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            request.metadata_mut().insert("authorization", v.clone());
        }
        Ok(request)
    }
}

/// A connection whose calls carry a [`Bearer`] token.
pub type Authed = InterceptedService<Channel, Bearer>;

/// How an instance is set up beyond its size.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// Require credentials (`auth.enabled`); the exec services get the node
    /// credential, and the helpers present the owner's token.
    pub auth: bool,
    /// Extra job manager flags.
    pub jm_args: Vec<String>,
    /// Extra exec service flags.
    pub exec_args: Vec<String>,
    /// PEM CA of the job manager's certificate, when it serves TLS.
    pub tls_ca: Option<Vec<u8>>,
    /// Leave the exec services' default for root's jobs (refused with a
    /// node credential) instead of allowing them for a root-owned instance.
    pub refuse_root_jobs: bool,
    /// Run the exec services as this uid (and its primary group), when the
    /// tests run as root.
    pub exec_uid: Option<u32>,
    /// The job manager's PostgreSQL store (`store.url`); unset, SQLite, or
    /// a private server's database when the suite runs on PostgreSQL.
    pub store_url: Option<String>,
}

/// Path of a workspace binary built by `cargo build --workspace`.
pub fn binary(name: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("..").join("target"));
    let path = target.join("debug").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace` (or `cargo test --workspace`) first",
        path.display()
    );
    path
}

/// A running instance; everything it started is killed when it is dropped.
#[derive(Debug)]
pub struct Instance {
    jm: Option<Child>,
    execs: Vec<Option<Child>>,
    /// The job manager's URI.
    pub uri: String,
    /// The state directory (store, URI file).
    pub statedir: tempfile::TempDir,
    nodes: usize,
    setup: Setup,
    /// The owner's token, when the instance requires credentials.
    pub owner_token: Option<String>,
    /// The private PostgreSQL server of a suite run on PostgreSQL.
    pub pg: Option<postgres::PgServer>,
}

/// Hostname of rank `i` in test instances.
pub fn host(i: usize) -> String {
    format!("node{i}")
}

impl Instance {
    /// Start a job manager for `nodes` nodes of `cores` cores each and their exec
    /// services, and wait until every node is up for scheduling.
    pub async fn start(nodes: usize, cores: u32) -> Instance {
        Self::start_with(nodes, cores, &[]).await
    }

    /// As [`Instance::start`], with extra job manager flags.
    pub async fn start_with(nodes: usize, cores: u32, jm_args: &[&str]) -> Instance {
        let setup = Setup {
            jm_args: jm_args.iter().map(|a| a.to_string()).collect(),
            ..Setup::default()
        };
        Self::start_setup(nodes, cores, setup).await
    }

    /// As [`Instance::start`], requiring credentials.
    pub async fn start_auth(nodes: usize, cores: u32) -> Instance {
        let setup = Setup {
            auth: true,
            ..Setup::default()
        };
        Self::start_setup(nodes, cores, setup).await
    }

    /// As [`Instance::start`], set up as `setup` says.
    pub async fn start_setup(nodes: usize, cores: u32, setup: Setup) -> Instance {
        let mut inst = Self::job_manager(nodes, setup).await;
        for i in 0..nodes {
            let child = inst.spawn_exec(i, cores);
            inst.execs.push(Some(child));
        }
        inst.wait_up(nodes).await;
        inst
    }

    /// A job manager for `nodes` nodes `node0..` and no exec service yet:
    /// the test adds them with [`Instance::add_exec`].
    pub async fn start_bare(nodes: usize) -> Instance {
        Self::job_manager(nodes, Setup::default()).await
    }

    /// The job manager of `setup` for `nodes` nodes `node0..`, serving.
    async fn job_manager(nodes: usize, mut setup: Setup) -> Instance {
        let statedir = tempfile::tempdir().expect("tempdir");
        let pg = (setup.store_url.is_none() && postgres::suite_on_postgres()).then(|| {
            let pg = postgres::PgServer::start();
            setup.store_url = Some(pg.new_database());
            pg
        });
        let nodelist = format!("node[0-{}]", nodes - 1);
        let jm = spawn_jm(&setup.jm_spec(statedir.path(), &nodelist, "127.0.0.1:0"));
        let mut inst = Instance {
            jm: Some(jm),
            execs: Vec::new(),
            uri: String::new(),
            statedir,
            nodes,
            setup,
            owner_token: None,
            pg,
        };
        inst.uri = inst.wait_uri().await;
        if inst.setup.auth {
            let path = inst.statedir.path().join("owner.token");
            let token = std::fs::read_to_string(&path).expect("the job manager wrote owner.token");
            inst.owner_token = Some(token.trim().to_string());
        }
        inst
    }

    /// Start the exec service `spec` (killed with the instance); its index
    /// for [`Instance::kill_exec`].
    pub fn add_exec(&mut self, spec: Exec) -> usize {
        let child = spec
            .env("FLUXGATE_LOG", "warn")
            .env("RUST_LOG", "warn")
            .command(&binary("fluxgate-exec"))
            .spawn()
            .expect("spawn fluxgate-exec");
        self.execs.push(Some(child));
        self.execs.len() - 1
    }

    /// An instance of processes started elsewhere (in network namespaces):
    /// the job manager serving at `uri` from `statedir` (its process `jm`,
    /// when this instance owns it), and the exec services `execs`, one a
    /// node. What it owns is killed when it is dropped.
    pub fn from_parts(
        uri: String,
        statedir: tempfile::TempDir,
        jm: Option<Child>,
        execs: Vec<Child>,
    ) -> Instance {
        Instance {
            jm,
            nodes: execs.len(),
            execs: execs.into_iter().map(Some).collect(),
            uri,
            statedir,
            setup: Setup::default(),
            owner_token: None,
            pg: None,
        }
    }

    /// The URI the job manager prints once it serves, by the launcher's
    /// own reader (an early exit or 30 s of silence fails the test).
    async fn wait_uri(&mut self) -> String {
        let jm = self.jm.as_mut().expect("job manager running");
        let stdout = jm.stdout.take().expect("the job manager's stdout is piped");
        // The harness lets the job manager's stderr through: no log to quote.
        let log = self.statedir.path().join("job-manager.log");
        match fluxgate_launch::read_uri(stdout, &log, Duration::from_secs(30)).await {
            Ok(uri) => uri,
            Err(e) => panic!("job manager did not start: {e}"),
        }
    }

    /// The flags an exec service of this instance needs to join it.
    pub fn exec_auth_args(&self) -> Vec<String> {
        let mut args = self.setup.exec_args.clone();
        if self.setup.auth {
            let token = self.statedir.path().join("node.token");
            args.push("--node-token-file".into());
            args.push(token.display().to_string());
            // Tests run as root, who owns the instance: its jobs are root's.
            if nix::unistd::geteuid().is_root() && !self.setup.refuse_root_jobs {
                args.push("--allow-root-jobs".into());
            }
        }
        args
    }

    /// An exec service of this instance announcing `hostname` with `cores`
    /// cores, joining with the instance's credentials.
    pub fn exec_spec(&self, hostname: &str, cores: u32) -> Exec {
        let auth = self.setup.auth;
        // Tests run as root, who owns the instance: its jobs are root's.
        let root = auth && nix::unistd::geteuid().is_root() && !self.setup.refuse_root_jobs;
        let mut spec = Exec::new(&self.uri)
            .hostname(hostname)
            .cores(Cores::Count(cores))
            .kill_timeout(2.0)
            .allow_root_jobs(root)
            .args(&self.setup.exec_args);
        if auth {
            spec = spec.node_token_file(&self.statedir.path().join("node.token"));
        }
        spec
    }

    fn spawn_exec(&self, i: usize, cores: u32) -> Child {
        let mut cmd = self
            .exec_spec(&host(i), cores)
            .env("FLUXGATE_LOG", "warn")
            .env("RUST_LOG", "warn")
            .command(&binary("fluxgate-exec"));
        if let Some(uid) = self.setup.exec_uid {
            let gid = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                .ok()
                .flatten()
                .map_or(uid, |u| u.gid.as_raw());
            std::os::unix::process::CommandExt::uid(&mut cmd, uid);
            std::os::unix::process::CommandExt::gid(&mut cmd, gid);
        }
        cmd.spawn().expect("spawn fluxgate-exec")
    }

    /// A connection to the job manager (TLS when it serves TLS).
    pub async fn channel(&self) -> Channel {
        self.channel_with(None)
            .await
            .expect("connect to job manager")
    }

    /// A connection presenting client certificate `identity` (cert, key PEM).
    pub async fn channel_with(
        &self,
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<Channel, tonic::transport::Error> {
        self.endpoint(identity)?.connect().await
    }

    /// The job manager's address, with TLS when it serves TLS, presenting
    /// client certificate `identity` (cert, key PEM).
    fn endpoint(
        &self,
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<Endpoint, tonic::transport::Error> {
        let endpoint = Endpoint::from_shared(self.uri.clone()).expect("URI");
        let Some(ca) = &self.setup.tls_ca else {
            return Ok(endpoint);
        };
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
        if let Some((cert, key)) = identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        endpoint.tls_config(tls)
    }

    /// A client of the JobManager service, as the owner.
    pub async fn jobs(&self) -> JobManagerClient<Authed> {
        self.jobs_as(self.owner_token.as_deref()).await
    }

    /// A client of the JobManager service, as the owner, on a connection
    /// whose HTTP/2 streams each buffer at most `bytes` for a reader that
    /// does not read (hyper's default is 2 MiB).
    pub async fn jobs_with_stream_window(&self, bytes: u32) -> JobManagerClient<Authed> {
        let channel = self
            .endpoint(None)
            .expect("endpoint")
            .initial_stream_window_size(bytes)
            .connect()
            .await
            .expect("connect to job manager");
        JobManagerClient::with_interceptor(channel, Bearer::new(self.owner_token.as_deref()))
    }

    /// A client of the JobManager service presenting `token`.
    pub async fn jobs_as(&self, token: Option<&str>) -> JobManagerClient<Authed> {
        JobManagerClient::with_interceptor(self.channel().await, Bearer::new(token))
    }

    /// A client of the Resource service presenting `token`.
    pub async fn resource_as(&self, token: Option<&str>) -> ResourceClient<Authed> {
        ResourceClient::with_interceptor(self.channel().await, Bearer::new(token))
    }

    /// A token for `user` with uid `uid`, valid `ttl` seconds (forever if
    /// `None`), signed with this instance's key as `fluxgate token create` does.
    pub fn token(&self, user: &str, uid: u32, ttl: Option<u64>) -> String {
        let text = std::fs::read_to_string(self.statedir.path().join("instance.key"))
            .expect("the instance key");
        let key = fluxgate_shared::auth::token::key_from_text(&text).expect("key");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        fluxgate_shared::auth::Claims::user(user, uid, now, ttl)
            .sign(&key)
            .expect("sign")
    }

    /// Jobs in the states of `mask` (RFC 21 state bits; 127 = all), with room
    /// for listings past gRPC's default 4 MiB, as the CLI has.
    pub async fn list(&self, mask: u32) -> Vec<pb::JobSummary> {
        let mut client = self.jobs().await.max_decoding_message_size(256 << 20);
        let mut jobs = Vec::new();
        let mut before = 0;
        loop {
            let page = client
                .list(pb::ListRequest {
                    states: mask,
                    before,
                    ..Default::default()
                })
                .await
                .expect("list")
                .into_inner();
            jobs.extend(page.jobs);
            if page.next == 0 {
                return jobs;
            }
            assert!(before == 0 || page.next < before, "listing did not move on");
            before = page.next;
        }
    }

    /// A client of the Resource service, as the owner.
    pub async fn resource(&self) -> ResourceClient<Authed> {
        self.resource_as(self.owner_token.as_deref()).await
    }

    /// Resource status as JSON.
    pub async fn status(&self) -> serde_json::Value {
        let s = self
            .resource()
            .await
            .status(pb::StatusRequest {})
            .await
            .expect("status")
            .into_inner()
            .status;
        serde_json::from_str(&s).expect("status is JSON")
    }

    /// Wait until `n` targets are schedulable.
    pub async fn wait_up(&self, n: usize) {
        self.wait_count("up", n).await;
    }

    /// Wait until `n` targets are online (joined), drained or not.
    pub async fn wait_online(&self, n: usize) {
        self.wait_count("online", n).await;
    }

    async fn wait_count(&self, key: &str, n: usize) {
        eventually(Duration::from_secs(30), async || {
            let st = self.status().await;
            let up = st[key].as_str().unwrap_or("");
            let count = fluxgate_shared::IdSet::parse(up)
                .map(|s| s.count())
                .unwrap_or(0);
            if count as usize == n {
                Ok(())
            } else {
                Err(format!("{n} nodes not {key}: {st}"))
            }
        })
        .await;
    }

    /// Kill exec process `i` with SIGKILL (a node dies).
    pub fn kill_exec(&mut self, i: usize) {
        if let Some(mut c) = self.execs.get_mut(i).and_then(Option::take) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send `signal` to exec process `i` (SIGSTOP makes a node silent but connected).
    pub fn signal_exec(&self, i: usize, signal: Signal) {
        if let Some(c) = self.execs.get(i).and_then(Option::as_ref) {
            let _ = kill(Pid::from_raw(c.id() as i32), signal);
        }
    }

    /// Start exec `i` again (the node comes back).
    pub fn restart_exec(&mut self, i: usize, cores: u32) {
        let child = self.spawn_exec(i, cores);
        self.execs[i] = Some(child);
    }

    /// Number of nodes.
    pub fn size(&self) -> usize {
        self.nodes
    }

    /// Submit a jobspec; the id.
    pub async fn submit(&self, jobspec: &JobspecBuilder, urgency: Option<u32>) -> JobId {
        let js = jobspec.build().expect("valid jobspec").to_json();
        self.submit_json(js, urgency, 0)
            .await
            .expect("submit accepted")
    }

    /// Submit raw jobspec text.
    pub async fn submit_json(
        &self,
        jobspec: String,
        urgency: Option<u32>,
        flags: u32,
    ) -> Result<JobId, tonic::Status> {
        let r = self
            .jobs()
            .await
            .submit(pb::SubmitRequest {
                jobspec,
                urgency,
                flags,
                ..Default::default()
            })
            .await?;
        Ok(JobId::from(r.into_inner().id))
    }

    /// Events of `log` until one named `until` (included), following as it grows.
    pub async fn events_until(&self, id: JobId, log: &str, until: &str) -> Vec<Event> {
        let mut stream = self
            .jobs()
            .await
            .watch_eventlog(pb::WatchEventlogRequest {
                id: id.into(),
                name: log.into(),
                follow: true,
                wait_create: true,
                ..Default::default()
            })
            .await
            .expect("watch")
            .into_inner();
        let mut out = Vec::new();
        let deadline = Duration::from_secs(60);
        loop {
            let next = tokio::time::timeout(deadline, stream.message())
                .await
                .unwrap_or_else(|_| panic!("no {until} in {log} of {id} within 60s: {out:?}"))
                .expect("stream");
            let Some(line) = next else {
                panic!("{log} of {id} ended without {until}: {:?}", names(&out));
            };
            let ev = Event::parse_json(&line.line).expect("stored line is RFC 18");
            let done = ev.name == until;
            out.push(ev);
            if done {
                return out;
            }
        }
    }

    /// The whole stored log (job must be inactive for it to be final).
    pub async fn log(&self, id: JobId, log: &str) -> Vec<Event> {
        stored_log(&mut self.jobs().await, id, log).await
    }

    /// The job's R, once allocated.
    pub async fn r(&self, id: JobId) -> fluxgate_shared::ResourceSet {
        let r = self
            .jobs()
            .await
            .info(pb::InfoRequest {
                id: id.into(),
                keys: vec!["R".into()],
                ..Default::default()
            })
            .await
            .expect("info R")
            .into_inner();
        fluxgate_shared::ResourceSet::parse(&r.values["R"]).expect("stored R parses")
    }

    /// Wait for the job to be inactive and return its main eventlog.
    pub async fn wait_clean(&self, id: JobId) -> Vec<Event> {
        self.events_until(id, "eventlog", "clean").await
    }

    /// Stop the job manager (SIGTERM when `graceful`, else SIGKILL) and start it
    /// again on the same address and state directory; wait for the nodes.
    pub async fn restart_jm(&mut self, graceful: bool) {
        let nodelist = format!("node[0-{}]", self.nodes - 1);
        self.restart_jm_with(graceful, &nodelist).await;
    }

    /// As [`Instance::restart_jm`], with the nodes configured in another rank
    /// order (`nodelist` names the same hosts).
    pub async fn restart_jm_with(&mut self, graceful: bool, nodelist: &str) {
        let mut jm = self.jm.take().expect("job manager running");
        let signal = if graceful {
            Signal::SIGTERM
        } else {
            Signal::SIGKILL
        };
        let _ = kill(Pid::from_raw(jm.id() as i32), signal);
        let status = jm.wait().expect("wait for job manager");
        if graceful {
            assert!(status.success(), "graceful stop exited {status}");
        }
        let _ = std::fs::remove_file(self.statedir.path().join("uri"));
        let addr = self
            .uri
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .to_string();
        // As before credentials existed, a restart drops the extra flags of
        // an open instance; one that requires credentials keeps its setup.
        let spec = if self.setup.auth {
            self.setup.jm_spec(self.statedir.path(), nodelist, &addr)
        } else {
            let spec = JobManager::new(self.statedir.path())
                .listen(&addr)
                .nodelist(nodelist);
            match &self.setup.store_url {
                Some(url) => spec.set("store.url", url),
                None => spec,
            }
        };
        let jm = spawn_jm(&spec);
        self.jm = Some(jm);
        let uri = self.wait_uri().await;
        assert_eq!(uri, self.uri, "restarted on another address");
        self.wait_online(self.nodes).await;
    }

    /// The job manager's process id.
    pub fn jm_pid(&self) -> u32 {
        self.jm.as_ref().expect("job manager running").id()
    }

    /// The job manager's resident memory in bytes (Linux `/proc`).
    pub fn jm_rss(&self) -> u64 {
        let pid = self.jm.as_ref().expect("job manager running").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmRSS")
            * 1024
    }

    /// SIGTERM the job manager and wait for it to exit; its exit status.
    pub fn stop_jm(&mut self) -> Option<std::process::ExitStatus> {
        let mut jm = self.jm.take()?;
        let _ = kill(Pid::from_raw(jm.id() as i32), Signal::SIGTERM);
        jm.wait().ok()
    }
}

impl Setup {
    /// The job manager of this setup, for `nodelist`, serving on `listen`.
    pub fn jm_spec(&self, statedir: &Path, nodelist: &str, listen: &str) -> JobManager {
        let spec = JobManager::new(statedir)
            .listen(listen)
            .nodelist(nodelist)
            .auth(self.auth)
            .args(&self.jm_args);
        match &self.store_url {
            Some(url) => spec.set("store.url", url),
            None => spec,
        }
    }
}

/// Start a job manager of `spec` (its stdout piped for its URI).
pub fn spawn_jm(spec: &JobManager) -> Child {
    spec.clone()
        .env("FLUXGATE_LOG", "warn")
        .command(&binary("fluxgate-job-manager"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn fluxgate-job-manager")
}

impl Drop for Instance {
    fn drop(&mut self) {
        for c in self.execs.iter_mut().filter_map(Option::take) {
            let mut c = c;
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(mut jm) = self.jm.take() {
            let _ = jm.kill();
            let _ = jm.wait();
        }
    }
}

/// One job's stored log (`eventlog`, `exec.eventlog` or `output`) over an
/// open client, read strictly: a line that is not RFC 18 fails the test.
pub async fn stored_log(jobs: &mut JobManagerClient<Authed>, id: JobId, log: &str) -> Vec<Event> {
    let text = stored_text(jobs, id, log).await;
    fluxgate_shared::eventlog::parse_eventlog(&text)
        .unwrap_or_else(|e| panic!("{log} of {id} does not parse: {e}"))
}

/// One job's stored log as text, read page by page as `Info` serves it.
pub async fn stored_text(jobs: &mut JobManagerClient<Authed>, id: JobId, log: &str) -> String {
    let mut text = String::new();
    let mut offset = 0;
    loop {
        let mut reply = jobs
            .info(pb::InfoRequest {
                id: id.into(),
                keys: vec![log.into()],
                offset,
                max_bytes: 0,
            })
            .await
            .unwrap_or_else(|e| panic!("info {log} of {id}: {e}"))
            .into_inner();
        let page = reply
            .values
            .remove(log)
            .unwrap_or_else(|| panic!("info of {id} has no {log}"));
        text.push_str(&page);
        match reply.next_offset.get(log) {
            Some(next) if reply.more => {
                assert!(*next > offset, "info of {id} {log} did not move on");
                offset = *next;
            }
            _ => return text,
        }
    }
}

/// The `data` of each output event that has one, in order.
pub fn output_data(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| {
            e.context
                .as_ref()?
                .get("data")?
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// The names of `events`, in order.
pub fn names(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.name.as_str()).collect()
}

/// The context keys of the first event named `name`, sorted.
pub fn keys(events: &[Event], name: &str) -> Vec<String> {
    let ev = events
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no {name} event in {:?}", names(events)));
    let mut k: Vec<String> = ev
        .context
        .as_ref()
        .map(|c| c.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

/// The owner token an instance inside a job (`fluxgate batch`/`alloc`) keeps
/// for its user, when that user is this process's: how tests reach a child
/// instance, as `fluxgate proxy` does. None for any other instance.
pub fn instance_token(uri: &str) -> Option<String> {
    let uid = nix::unistd::getuid().as_raw();
    std::fs::read_to_string(fluxgate_os::private::instance_token_path(uid, uri))
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

//! Configuration: defaults, then a TOML file, then `FLUXGATE_*` environment,
//! then flags (applied by the binary). One struct per subsystem.
//!
//! Every key of the file has an environment variable, `FLUXGATE_` and the
//! dotted key in upper case with `_` for `.` (`resource.torpid_timeout` is
//! `FLUXGATE_RESOURCE_TORPID_TIMEOUT`), and can be set by the binary's
//! `--set KEY=VALUE`; both go through [`Config::set`]. Each key is declared
//! once, in the key table (`config/keys.rs`). docs/CONFIG.md lists them.

mod keys;
mod site;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fluxgate_shared::policy::{AssocLimits, Fsd, JobSize, JobspecPolicy, QueueConfig};
use serde::{Deserialize, Serialize};

pub use site::{AccountingConfig, BankAccount, QueueAccount, UserAccount};

/// The whole job manager configuration.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address of the gRPC server (`127.0.0.1:0` picks a free port).
    pub listen: String,
    /// Where the store and the URI file live.
    pub statedir: PathBuf,
    /// The instance owner's uid (defaults to the job manager's own).
    pub owner_uid: u32,
    /// Resources and nodes.
    pub resource: ResourceConfig,
    /// Job execution.
    pub exec: ExecConfig,
    /// Limits that protect the service from oversized requests.
    pub limits: LimitsConfig,
    /// Prolog and epilog commands.
    pub perilog: PerilogConfig,
    /// The Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// Trace export over OTLP.
    pub telemetry: TelemetryConfig,
    /// Who may call: tokens, certificate users.
    pub auth: AuthConfig,
    /// TLS of the gRPC server.
    pub tls: TlsConfig,
    /// Job output kept in the store.
    pub output: OutputConfig,
    /// Site policy: job defaults and limits, per-user limits.
    pub policy: PolicyConfig,
    /// The scheduler.
    pub sched: SchedConfig,
    /// Named queues (RFC 33), as flux's `[queues.NAME]`.
    pub queues: BTreeMap<String, QueueConfig>,
    /// Fair share and the multi-factor priority.
    pub accounting: AccountingConfig,
    /// Where jobs are stored: the embedded SQLite file or PostgreSQL.
    pub store: StoreConfig,
    /// Leader election among job managers sharing a PostgreSQL store.
    pub ha: HaConfig,
}

/// `[store]`: the durable store.
#[derive(Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://user:pass@host:port/db` (key=value form too); unset, the
    /// store is `fluxgate.db` in the state directory. `sslmode=require`
    /// asks for TLS, verified against the system's CAs and `store.ca_file`.
    pub url: Option<String>,
    /// A PEM CA certificate the database server's certificate may chain to.
    pub ca_file: Option<PathBuf>,
}

// Logged at start: the URL's password must not be.
impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field(
                "url",
                &self
                    .url
                    .as_deref()
                    .map(crate::store::postgres::connect::hide_password),
            )
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// `[ha]`: how job managers on one PostgreSQL store elect a leader.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HaConfig {
    /// The URI clients are sent to while this job manager leads (default:
    /// the bound address, with this host's name when it listens on all).
    pub advertise: Option<String>,
    /// Seconds a leader that stops renewing keeps the lead before a standby
    /// ends its database session and takes over (a paused or cut-off
    /// leader; a crashed one is replaced at once).
    pub lease: f64,
    /// Seconds between a standby's attempts to take the lead.
    pub poll_interval: f64,
}

impl Default for HaConfig {
    fn default() -> Self {
        HaConfig {
            advertise: None,
            lease: 3.0,
            poll_interval: 0.1,
        }
    }
}

/// `[sched]`: how pending jobs are given resources.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedConfig {
    /// `fcfs`: strict priority order, nothing passes a blocked head (flux's
    /// sched-simple); `easy` (the default): EASY backfill, a lower job may
    /// start when it cannot delay the head's reservation; `conservative`:
    /// reservations for the first `reservation_depth` blocked jobs, none
    /// of which a lower job may delay.
    pub policy: SchedPolicy,
    /// Most pending jobs looked at in one pass (as Slurm's `bf_max_job_test`).
    pub queue_depth: usize,
    /// Blocked jobs reserved under `conservative` (Fluxion's hybrid default).
    pub reservation_depth: usize,
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            policy: SchedPolicy::Easy,
            queue_depth: 1000,
            reservation_depth: fluxgate_shared::sched::RESERVATION_DEPTH,
        }
    }
}

impl SchedConfig {
    /// The policy a pass runs.
    pub fn policy(&self) -> fluxgate_shared::sched::Policy {
        use fluxgate_shared::sched::Policy;
        match self.policy {
            SchedPolicy::Fcfs => Policy::Fcfs,
            SchedPolicy::Easy => Policy::Easy,
            SchedPolicy::Conservative => Policy::Conservative {
                depth: self.reservation_depth.max(1),
            },
        }
    }
}

/// The scheduling policies `[sched] policy` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedPolicy {
    /// First come, first served.
    Fcfs,
    /// EASY backfill.
    Easy,
    /// Conservative backfill to `reservation_depth`.
    Conservative,
}

/// `[output]`: what is kept of each job's output.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// Most bytes of output data (stdout and stderr together) stored per job;
    /// further data is dropped and the job gets a non-fatal `output`
    /// exception. A job's shell option `output.limit` may lower it. 0: no
    /// limit. In the file either bytes or a size such as `"512M"`.
    #[serde(deserialize_with = "size_or_bytes")]
    pub limit: u64,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig { limit: 1 << 30 }
    }
}

/// `[policy]`: site policy.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// `[policy.jobspec]`: defaults filled into submitted jobs.
    pub jobspec: JobspecPolicy,
    /// `[policy.limits]`: job limits and per-user limits.
    pub limits: PolicyLimits,
}

/// `[policy.limits]`: how much one user may hold at once.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyLimits {
    /// Most active (not yet inactive) jobs of one user other than the
    /// instance owner; a submit past it is refused. 0: no limit.
    pub max_active_jobs: u64,
    /// The same for the instance owner. 0 (the default): no limit.
    pub owner_max_active_jobs: u64,
    /// Longest time limit a job may ask for (flux's; 0: unlimited).
    pub duration: Option<Fsd>,
    /// Job sizes (flux's `job-size.{min,max}.{nnodes,ncores,ngpus}`).
    #[serde(rename = "job-size")]
    pub job_size: JobSize,
}

impl Default for PolicyLimits {
    fn default() -> Self {
        PolicyLimits {
            max_active_jobs: 10_000,
            owner_max_active_jobs: 0,
            duration: None,
            job_size: JobSize::default(),
        }
    }
}

impl PolicyConfig {
    /// The instance's policy table, as the per-queue tables are shaped.
    pub fn table(&self) -> fluxgate_shared::policy::PolicyTable {
        fluxgate_shared::policy::PolicyTable {
            jobspec: self.jobspec.clone(),
            limits: fluxgate_shared::policy::QueueLimits {
                duration: self.limits.duration,
                job_size: self.limits.job_size,
            },
        }
    }
}

impl PolicyLimits {
    /// The active-job limit of `userid` (`None`: unlimited).
    pub fn max_active_jobs(&self, userid: u32, owner_uid: u32) -> Option<u64> {
        let limit = if userid == owner_uid {
            self.owner_max_active_jobs
        } else {
            self.max_active_jobs
        };
        (limit > 0).then_some(limit)
    }
}

/// A size as flux's `parse_size` reads it: a number with an optional
/// suffix `k`/`K`, `M`, `G`, `T`, `P` or `E` (powers of 1024), e.g. `10M`,
/// `1.5G`, `4096`.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, scale) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c {
                'k' | 'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                'P' => 50,
                'E' => 60,
                _ => return None,
            };
            (&text[..i], (1u64 << shift) as f64)
        }
        _ => (text, 1.0),
    };
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    if let Ok(n) = number.parse::<u64>()
        && scale == 1.0
    {
        return Some(n);
    }
    let value = number.parse::<f64>().ok()? * scale;
    (value.is_finite() && value >= 0.0 && value < u64::MAX as f64).then_some(value as u64)
}

/// A size in the file: whole bytes, or text [`parse_size`] reads.
fn size_or_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Size::deserialize(d)? {
        Size::Bytes(n) => Ok(n),
        Size::Text(t) => parse_size(&t).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "size {t:?}: expected bytes or a number with k, M, G or T"
            ))
        }),
    }
}

/// `[auth]`: authentication of callers (docs/SECURITY.md).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Require a verified identity (token or client certificate) on every
    /// request; unset, the instance runs open and every caller is its owner.
    pub enabled: bool,
    /// The instance key that signs tokens (default `STATEDIR/instance.key`,
    /// created with mode 0600 when missing).
    pub key_file: Option<PathBuf>,
    /// Uids of client certificate user names (the subject's CN), for names
    /// the system's account database does not know or maps otherwise.
    pub users: BTreeMap<String, u32>,
    /// Seconds a job's credential (its tasks' `FLUXGATE_TOKEN`) lives when the
    /// job has no expiration (default [`DEFAULT_JOB_CREDENTIAL_TTL`]); with one,
    /// it expires with the job. Either way it is refused once the job ends.
    pub job_credential_ttl: Option<u64>,
}

/// A week: how long a job's credential lives when the job has no expiration.
pub const DEFAULT_JOB_CREDENTIAL_TTL: u64 = 7 * 86_400;

impl AuthConfig {
    /// Seconds a job's credential lives when the job has no expiration.
    pub fn job_credential_ttl(&self) -> u64 {
        self.job_credential_ttl
            .unwrap_or(DEFAULT_JOB_CREDENTIAL_TTL)
    }
}

/// `[tls]`: the server's certificate and the CA of client certificates.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain of the server; with `key`, the server speaks TLS.
    pub cert: Option<PathBuf>,
    /// PEM private key of the server.
    pub key: Option<PathBuf>,
    /// PEM CA certificate(s) that sign client certificates; set, a client may
    /// authenticate with a certificate whose CN is its user name.
    pub client_ca: Option<PathBuf>,
}

/// `[metrics]`: the Prometheus `/metrics` endpoint.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Address of the HTTP endpoint serving `/metrics`; unset, none is served
    /// and nothing is recorded.
    pub listen: Option<String>,
}

/// `[telemetry]`: spans sent to an OpenTelemetry collector (docs/TRACING.md).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/gRPC address (`http://host:4317`); empty, the
    /// default, nothing is exported and no span is made.
    pub otlp_endpoint: String,
    /// `service.name` of the exported spans.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: String::new(),
            service_name: "fluxgate-job-manager".into(),
        }
    }
}

impl TelemetryConfig {
    /// What the trace export needs of it.
    pub fn otlp(&self) -> fluxgate_setup::OtlpConfig {
        fluxgate_setup::OtlpConfig {
            endpoint: self.otlp_endpoint.clone(),
            service_name: self.service_name.clone(),
        }
    }
}

/// `[perilog]`: site commands run around each job on the job manager's host.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerilogConfig {
    /// Shell command run before each job starts; a failure keeps the job from running.
    pub prolog: Option<String>,
    /// Shell command run after each job, before its resources are freed.
    pub epilog: Option<String>,
    /// Seconds either may run before it is killed (and counts as failed).
    pub timeout: f64,
}

impl Default for PerilogConfig {
    fn default() -> Self {
        PerilogConfig {
            prolog: None,
            epilog: None,
            timeout: 1800.0,
        }
    }
}

/// `[resource]`: where the inventory comes from and how nodes are watched.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourceConfig {
    /// An R file (JSON) holding the inventory (method `configuration`).
    pub path: Option<PathBuf>,
    /// The RFC 44 `resource-define` method posted for `path`: `configuration`
    /// (the default) or `job-info`, when the R is the allocation of a job in
    /// an enclosing instance (an instance started by `fluxgate batch`).
    pub method: Option<String>,
    /// Hostnames of the nodes in rank order; their cores and gpus come from the
    /// exec services when they join (method `dynamic-discovery`).
    pub nodelist: Option<String>,
    /// Without `path` or `nodelist`: the number of nodes to wait for; ranks are
    /// given in join order and kept across restarts.
    pub size: Option<u32>,
    /// Seconds between heartbeats asked of exec services.
    pub heartbeat_interval: f64,
    /// Seconds of silence before a node is torpid.
    pub torpid_timeout: f64,
    /// Seconds of silence before a node is lost: its jobs get a
    /// node-failure exception and their resources are released on its
    /// behalf (never before `fence_timeout` and its margin have passed).
    pub lost_timeout: f64,
    /// Seconds without an acknowledged heartbeat after which an exec
    /// service kills its jobs on its own (told in its welcome); shorter
    /// than `lost_timeout`. 0: never, and a silent node's resources are
    /// then released only when it answers again.
    pub fence_timeout: f64,
    /// Events kept in the in-memory journal before it is truncated.
    pub journal_capacity: usize,
    /// Lines the stored resource eventlog may hold before it is replaced by a
    /// checkpoint (drained targets, last definition and expiration); 0 never.
    pub eventlog_max: usize,
}

/// `[exec]`: how jobs are run.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecConfig {
    /// Seconds a running job waits, after a restart, for its nodes to rejoin
    /// before it is declared lost.
    pub rejoin_timeout: f64,
    /// PEM CA of the certificates of exec services that serve TLS (whose
    /// announced addresses are https).
    pub tls_ca: Option<PathBuf>,
}

/// `[limits]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest jobspec accepted, in bytes.
    pub max_jobspec_bytes: usize,
    /// Most jobs in one SubmitMany.
    pub max_batch: usize,
    /// Inactive jobs older than this many seconds are purged (none if unset).
    pub inactive_age_limit: Option<f64>,
    /// At most this many inactive jobs are kept, the oldest purged first.
    pub inactive_num_limit: Option<u64>,
    /// Limits per user name (`default`: every user without an entry).
    pub users: BTreeMap<String, AssocLimits>,
    /// Limits per bank.
    pub banks: BTreeMap<String, AssocLimits>,
    /// Most client connections at once (lowered to leave `fd_reserve`
    /// descriptors under the process's limit).
    pub max_connections: usize,
    /// Most client connections from one address.
    pub max_connections_per_peer: usize,
    /// Seconds a new connection has to send its first bytes.
    pub handshake_timeout: f64,
    /// Seconds a connection may stay silent (keepalive answers count).
    pub idle_timeout: f64,
    /// Descriptors kept for the job manager's own files.
    pub fd_reserve: u64,
    /// Most long-lived streams (eventlog watches, `attach`, the job
    /// journal) one user other than the instance owner holds open; 0: no limit.
    pub max_streams_per_user: usize,
}

impl LimitsConfig {
    /// The listener's connection limits.
    pub fn conns(&self) -> fluxgate_setup::ConnLimits {
        let secs = |s: f64| std::time::Duration::from_secs_f64(s.clamp(0.001, 1e6));
        fluxgate_setup::ConnLimits {
            max_connections: self.max_connections.max(1),
            max_per_peer: self.max_connections_per_peer.max(1),
            handshake_timeout: secs(self.handshake_timeout),
            idle_timeout: secs(self.idle_timeout),
            fd_reserve: self.fd_reserve,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "127.0.0.1:0".into(),
            statedir: PathBuf::from("fluxgate-state"),
            owner_uid: nix::unistd::getuid().as_raw(),
            resource: ResourceConfig::default(),
            exec: ExecConfig::default(),
            limits: LimitsConfig::default(),
            perilog: PerilogConfig::default(),
            metrics: MetricsConfig::default(),
            telemetry: TelemetryConfig::default(),
            auth: AuthConfig::default(),
            tls: TlsConfig::default(),
            output: OutputConfig::default(),
            policy: PolicyConfig::default(),
            sched: SchedConfig::default(),
            queues: BTreeMap::new(),
            accounting: AccountingConfig::default(),
            store: StoreConfig::default(),
            ha: HaConfig::default(),
        }
    }
}

impl Default for ResourceConfig {
    fn default() -> Self {
        ResourceConfig {
            path: None,
            method: None,
            nodelist: None,
            size: None,
            heartbeat_interval: 2.0,
            torpid_timeout: 30.0,
            lost_timeout: 90.0,
            fence_timeout: 60.0,
            journal_capacity: 10_000,
            eventlog_max: 1000,
        }
    }
}

impl ResourceConfig {
    /// The timeouts that judge a node's silence. A fence shorter than
    /// three heartbeats would kill the jobs of nodes that are merely a beat
    /// late: it is raised to that.
    pub fn liveness(&self) -> fluxgate_shared::resource::liveness::Liveness {
        let fence = if self.fence_timeout.is_finite() && self.fence_timeout > 0.0 {
            self.fence_timeout.max(3.0 * self.heartbeat_interval)
        } else {
            0.0
        };
        fluxgate_shared::resource::liveness::Liveness {
            torpid: self.torpid_timeout,
            lost: self.lost_timeout,
            fence,
        }
    }

    /// The `resource-define` method of a configured inventory.
    pub fn define_method(&self) -> &str {
        self.method.as_deref().unwrap_or("configuration")
    }
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            rejoin_timeout: 60.0,
            tls_ca: None,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let conns = fluxgate_setup::ConnLimits::default();
        LimitsConfig {
            max_jobspec_bytes: 1 << 20,
            max_batch: 10_000,
            inactive_age_limit: None,
            inactive_num_limit: None,
            users: BTreeMap::new(),
            banks: BTreeMap::new(),
            max_connections: conns.max_connections,
            max_connections_per_peer: conns.max_per_peer,
            handshake_timeout: conns.handshake_timeout.as_secs_f64(),
            idle_timeout: conns.idle_timeout.as_secs_f64(),
            fd_reserve: conns.fd_reserve,
            max_streams_per_user: 256,
        }
    }
}

use fluxgate_setup::layered::{self, Layered};
pub use fluxgate_setup::layered::{ConfigError, SetError, env_name};

impl Config {
    /// Defaults overlaid with the TOML file at `path`, if any.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        layered::load(path)
    }

    /// Overlay `FLUXGATE_*` variables from `env` (e.g. `FLUXGATE_LISTEN`,
    /// `FLUXGATE_RESOURCE_NODELIST`); other variables are ignored.
    pub fn apply_env(
        &mut self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(), ConfigError> {
        layered::apply_env(self, env)
    }

    /// Set one key (dotted, as in the file: `resource.torpid_timeout`) from its
    /// text, as an environment variable or `--set` gives it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), SetError> {
        Layered::set(self, key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_keys_set_and_a_fence_is_never_shorter_than_three_heartbeats() {
        let mut c = Config::default();
        c.set("resource.lost_timeout", "40").unwrap();
        c.set("resource.fence_timeout", "20").unwrap();
        let l = c.resource.liveness();
        assert_eq!((l.lost, l.fence), (40.0, 20.0));
        c.set("resource.heartbeat_interval", "10").unwrap();
        assert_eq!(c.resource.liveness().fence, 30.0);
        c.set("resource.fence_timeout", "0").unwrap();
        assert_eq!(c.resource.liveness().fence, 0.0, "0: never");
    }

    #[test]
    fn the_store_password_is_not_logged() {
        let mut c = Config::default();
        c.set("store.url", "postgres://u:s3cret@db/x").unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("postgres://u:***@db/x"));
    }

    #[test]
    fn file_then_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jm.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:7000\"\n[resource]\nnodelist = \"node[0-3]\"\ntorpid_timeout = 5\n",
        )
        .unwrap();
        let mut c = Config::load(Some(&path)).unwrap();
        assert_eq!(c.listen, "127.0.0.1:7000");
        assert_eq!(c.resource.nodelist.as_deref(), Some("node[0-3]"));
        assert_eq!(c.resource.torpid_timeout, 5.0);
        assert_eq!(c.exec.rejoin_timeout, 60.0);
        c.apply_env([("FLUXGATE_LISTEN".to_string(), "0.0.0.0:1".to_string())])
            .unwrap();
        assert_eq!(c.listen, "0.0.0.0:1");
        let err = c
            .apply_env([(
                "FLUXGATE_EXEC_REJOIN_TIMEOUT".to_string(),
                "soon".to_string(),
            )])
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("exec.rejoin_timeout expects a number"),
            "{err}"
        );
    }

    #[test]
    fn sizes_read_as_flux_reads_them() {
        for (text, bytes) in [
            ("4096", Some(4096)),
            ("10k", Some(10 << 10)),
            ("10K", Some(10 << 10)),
            ("10M", Some(10 << 20)),
            ("1G", Some(1 << 30)),
            ("1.5G", Some(3 << 29)),
            ("2T", Some(2 << 40)),
            ("", None),
            ("G", None),
            ("10X", None),
            ("-1", None),
            ("1 G", None),
        ] {
            assert_eq!(parse_size(text), bytes, "{text:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jm.toml");
        std::fs::write(
            &path,
            "[output]\nlimit = \"10M\"\n[policy.limits]\nmax_active_jobs = 3\n",
        )
        .unwrap();
        let mut c = Config::load(Some(&path)).unwrap();
        assert_eq!(c.output.limit, 10 << 20);
        assert_eq!(c.policy.limits.max_active_jobs(4242, 0), Some(3));
        assert_eq!(c.policy.limits.max_active_jobs(0, 0), None);
        c.set("output.limit", "2k").unwrap();
        assert_eq!(c.output.limit, 2048);
        assert!(c.set("output.limit", "lots").is_err());
        std::fs::write(&path, "[output]\nlimit = 4096\n").unwrap();
        assert_eq!(Config::load(Some(&path)).unwrap().output.limit, 4096);
    }

    #[test]
    fn unknown_keys_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jm.toml");
        std::fs::write(&path, "[resource]\nnodeslist = \"x\"\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("nodeslist"), "{err}");
    }

    /// Dotted keys of a serialized config, tables walked, unset options kept.
    fn keys(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
        if let serde_json::Value::Object(map) = value {
            for (k, v) in map {
                let key = format!("{prefix}{k}");
                if v.is_object() {
                    keys(&format!("{key}."), v, out);
                } else {
                    out.push(key);
                }
            }
        }
    }

    #[test]
    fn every_key_has_an_environment_variable_and_a_setter() {
        let mut fields = Vec::new();
        keys(
            "",
            &serde_json::to_value(Config::default()).unwrap(),
            &mut fields,
        );
        fields.sort();
        let mut listed: Vec<String> = Config::KEYS.iter().map(|k| k.name.to_string()).collect();
        listed.sort();
        assert_eq!(fields, listed, "KEYS must list every field");
        listed.dedup();
        assert_eq!(listed.len(), Config::KEYS.len(), "each key once");
        let mut c = Config::default();
        for key in Config::KEYS.iter().map(|k| k.name) {
            assert_eq!(
                Config::KEYS
                    .iter()
                    .find(|k| k.name == key)
                    .unwrap()
                    .env_name(),
                env_name(key)
            );
            let value = if key.ends_with("path")
                || key.ends_with("dir")
                || key.ends_with("file")
                || key.starts_with("tls.")
                || key.ends_with("tls_ca")
            {
                "/x"
            } else if key.ends_with("enabled") {
                "true"
            } else if key == "resource.method" {
                "job-info"
            } else if key == "sched.policy" {
                "fcfs"
            } else {
                "7"
            };
            c.apply_env([(env_name(key), value.to_string())]).unwrap();
        }
        assert_eq!(c.owner_uid, 7);
        assert_eq!(c.limits.max_batch, 7);
        assert_eq!(c.resource.journal_capacity, 7);
        assert_eq!(
            env_name("resource.torpid_timeout"),
            "FLUXGATE_RESOURCE_TORPID_TIMEOUT"
        );
        assert!(matches!(
            c.set("resource.nodeslist", "x"),
            Err(SetError::UnknownKey(_))
        ));
        assert_eq!(
            Config::default().telemetry.otlp_endpoint,
            "",
            "trace export is off by default"
        );
        assert_eq!(c.telemetry.otlp_endpoint, "7");
        assert_eq!(
            env_name("telemetry.otlp_endpoint"),
            "FLUXGATE_TELEMETRY_OTLP_ENDPOINT"
        );
        // Certificate users are keys of their own.
        c.set("auth.users.alice", "1001").unwrap();
        assert_eq!(c.auth.users.get("alice"), Some(&1001));
        assert!(c.set("auth.users.bob", "many").is_err());
        assert!(matches!(
            c.set("auth.users.", "1"),
            Err(SetError::UnknownKey(_))
        ));
    }

    /// docs/CONFIG.md's job manager section names every key of the table,
    /// its variable and its flag, and the named tables settable key by key.
    #[test]
    fn the_docs_name_every_key() {
        let docs = include_str!("../../../docs/CONFIG.md");
        let start = docs.find("## Job manager").expect("a job manager section");
        let section = &docs[start..];
        let end = section.find("## Exec service").expect("an exec section");
        let section = &section[..end];
        let mut missing = fluxgate_setup::layered::unnamed_in(section, Config::KEYS);
        // Named tables have no key of their own in the table.
        if !section.contains("`auth.users.NAME`") {
            missing.push("`auth.users.NAME`".into());
        }
        assert!(
            missing.is_empty(),
            "docs/CONFIG.md does not name {missing:?}"
        );
    }
}

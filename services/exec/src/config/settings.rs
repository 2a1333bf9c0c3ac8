//! The settings of `fluxgate-exec` as the layers give them, before they are
//! checked, and the service's key table: each key once, with its setter,
//! its environment variable and its flag (docs/CONFIG.md lists them).
//!
//! A key's variable is `FLUXGATE_` and the key in upper case
//! (`FLUXGATE_JOB_MANAGER`), with `FLUXGATE_EXEC_` for the keys whose
//! short name belongs to the job manager (`listen`, `advertise`,
//! `tls_cert`, `tls_key`, `metrics.listen`, ...): both services often share
//! one environment.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fluxgate_setup::layered::value::{self, boolean, count, number, path, put_some as some, text};
use fluxgate_setup::layered::{self, Flag, Key, Layered};

/// The settings of `fluxgate-exec` as the layers give them, before they
/// are checked: the file's keys, every one optional.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// `--job-manager`.
    pub job_manager: Option<String>,
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// `--advertise`.
    pub advertise: Option<String>,
    /// `--hostname`.
    pub hostname: Option<String>,
    /// `--cores`.
    pub cores: Option<String>,
    /// `--cores-count`.
    pub cores_count: Option<u32>,
    /// `--gpus`.
    pub gpus: Option<String>,
    /// `--virtual`.
    #[serde(rename = "virtual")]
    pub virtual_nodes: Option<u32>,
    /// `--kill-timeout`.
    pub kill_timeout: Option<f64>,
    /// `--heartbeat`.
    pub heartbeat: Option<f64>,
    /// `--leave-running`.
    pub leave_running: Option<bool>,
    /// `--relay`.
    pub relay: Option<bool>,
    /// `--node-token-file`.
    pub node_token_file: Option<PathBuf>,
    /// `--tls-ca`.
    pub tls_ca: Option<PathBuf>,
    /// `--allow-root-jobs`.
    pub allow_root_jobs: Option<bool>,
    /// `--tls-cert`.
    pub tls_cert: Option<PathBuf>,
    /// `--tls-key`.
    pub tls_key: Option<PathBuf>,
    /// `[metrics]`.
    pub metrics: MetricsSettings,
    /// `[telemetry]`.
    pub telemetry: TelemetrySettings,
    /// `[limits]`.
    pub limits: LimitsSettings,
    /// `[cgroup]`.
    pub cgroup: CgroupSettings,
    /// Where jobs' temporary directories (`FLUX_JOB_TMPDIR`) are made.
    pub tmpdir: Option<PathBuf>,
    /// `--fanout`.
    pub fanout: Option<usize>,
}

/// `[limits]` of the exec service: its listener's connections
/// (`fluxgate_setup::conns`; unset, its defaults).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSettings {
    /// Most connections at once.
    pub max_connections: Option<usize>,
    /// Most connections from one address.
    pub max_connections_per_peer: Option<usize>,
    /// Seconds a new connection has to send its first bytes.
    pub handshake_timeout: Option<f64>,
    /// Seconds a connection may stay silent.
    pub idle_timeout: Option<f64>,
    /// Descriptors kept for the service's own files.
    pub fd_reserve: Option<u64>,
}

impl LimitsSettings {
    /// The connection limits, defaults filled in.
    pub fn conns(&self) -> fluxgate_setup::ConnLimits {
        let d = fluxgate_setup::ConnLimits::default();
        let secs = |s: Option<f64>, d: Duration| {
            s.map_or(d, |s| Duration::from_secs_f64(s.clamp(0.001, 1e6)))
        };
        fluxgate_setup::ConnLimits {
            max_connections: self.max_connections.unwrap_or(d.max_connections).max(1),
            max_per_peer: self
                .max_connections_per_peer
                .unwrap_or(d.max_per_peer)
                .max(1),
            handshake_timeout: secs(self.handshake_timeout, d.handshake_timeout),
            idle_timeout: secs(self.idle_timeout, d.idle_timeout),
            fd_reserve: self.fd_reserve.unwrap_or(d.fd_reserve),
        }
    }
}

/// `[cgroup]` of the exec service: how jobs are contained (docs/CONFIG.md).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CgroupSettings {
    /// `auto` (cgroups where they can be written) or `off` [default: auto].
    pub mode: Option<String>,
    /// The cgroup jobs are made under [default: the service's own].
    pub root: Option<PathBuf>,
    /// A job's memory per core it holds, a size such as `2G`.
    pub memory_per_core: Option<String>,
    /// Most processes and threads of a job on a node.
    pub pids_max: Option<u64>,
}

/// `[metrics]` of the exec service.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// `--metrics-listen`.
    pub listen: Option<String>,
}

/// `[telemetry]` of the exec service: spans sent over OTLP (docs/TRACING.md).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySettings {
    /// The collector's OTLP/gRPC address; unset or empty, nothing is exported.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans [default: fluxgate-exec].
    pub service_name: Option<String>,
}

/// A key of the exec service (the alias gives its setters their argument types).
type ExecKey = Key<Settings>;

/// The prefix of the variables of keys the job manager has too.
const EXEC: &str = "FLUXGATE_EXEC_";

impl Layered for Settings {
    // Every key; the flags are listed in `--help` in this order.
    const KEYS: &'static [Key<Settings>] = &[
        ExecKey::new("job_manager", |s, _, v| some(&mut s.job_manager, text(v))).flag(Flag::value(
            "URI",
            "Job manager address to join, e.g. http://10.0.0.1:7000 (required here or in \
             the file)",
        )),
        ExecKey::new("listen", |s, k, v| {
            some(
                &mut s.listen,
                value::parsed(k, v, "an address such as 0.0.0.0:7001"),
            )
        })
        .env_prefix(EXEC)
        .flag(Flag::value(
            "ADDR",
            "Address to serve the Exec API on (port 0 picks a free port) [default: 127.0.0.1:0]",
        )),
        ExecKey::new("advertise", |s, _, v| some(&mut s.advertise, text(v)))
            .env_prefix(EXEC)
            .flag(Flag::value(
                "URI",
                "Exec address the job manager dials back, e.g. http://10.0.0.5:7001 \
                 (default: http://LISTEN, or http://HOSTNAME:PORT when LISTEN is 0.0.0.0 or ::)",
            )),
        ExecKey::new("hostname", |s, _, v| some(&mut s.hostname, text(v))).flag(Flag::value(
            "NAME",
            "Hostname to announce (default: this machine's)",
        )),
        // cores and cores_count are one choice: setting either replaces both.
        ExecKey::new("cores", |s, _, v| {
            (s.cores, s.cores_count) = (Some(v.to_string()), None);
            Ok(())
        })
        .flag(
            Flag::value(
                "IDSET",
                "Core ids to offer, as an idset (default: the CPUs this process may use)",
            )
            .conflicts_with("cores_count"),
        ),
        ExecKey::new("cores_count", |s, k, v| {
            (s.cores, s.cores_count) = (None, Some(count(k, v)?));
            Ok(())
        })
        .flag(Flag::value("N", "Offer cores 0..N-1")),
        ExecKey::new("gpus", |s, _, v| some(&mut s.gpus, text(v))).flag(Flag::value(
            "IDSET",
            "GPU ids to offer, as an idset (default: those the kernel lists: /dev/nvidiaN, \
             /proc/driver/nvidia/gpus, /dev/dri/renderD*)",
        )),
        ExecKey::new("virtual", |s, k, v| some(&mut s.virtual_nodes, count(k, v))).flag(
            Flag::value(
                "N",
                "Serve N virtual nodes named <hostname>-v0 .. <hostname>-v(N-1), each with \
                 the given cores and gpus",
            ),
        ),
        ExecKey::new("kill_timeout", |s, k, v| {
            some(&mut s.kill_timeout, number(k, v))
        })
        .flag(Flag::value(
            "SECS",
            "Seconds between SIGTERM (or SIGALRM) and SIGKILL when a job is torn down \
                 [default: 5]",
        )),
        ExecKey::new("heartbeat", |s, k, v| some(&mut s.heartbeat, number(k, v))).flag(
            Flag::value(
                "SECS",
                "Heartbeat interval in seconds (default: what the job manager asks for)",
            ),
        ),
        ExecKey::new("leave_running", |s, k, v| {
            some(&mut s.leave_running, boolean(k, v))
        })
        .flag(Flag::boolean(
            "On SIGTERM/SIGINT leave running tasks alone (default: terminate them and \
                 report); `--leave-running=false` turns off what the file turned on",
        )),
        ExecKey::new("relay", |s, k, v| some(&mut s.relay, boolean(k, v))).flag(Flag::boolean(
            "Relay the joins of the exec services below this one (they list this service's \
             address first in their --job-manager), so the job manager holds one connection \
             for all of them; with --virtual 0 this service serves no node of its own",
        )),
        ExecKey::new("metrics.listen", |s, _, v| {
            some(&mut s.metrics.listen, text(v))
        })
        .env_prefix(EXEC)
        .flag(Flag::value(
            "ADDR",
            "Address of the Prometheus /metrics endpoint (default: none is served)",
        )),
        ExecKey::new("node_token_file", |s, _, v| {
            some(&mut s.node_token_file, path(v))
        })
        .flag(Flag::value(
            "FILE",
            "The instance's node credential (the job manager's STATEDIR/node.token): sent \
                 to join, and required of every Start, Kill, Exception and Expiration \
                 (default: none; this service then runs whatever it is asked)",
        )),
        ExecKey::new("tls_ca", |s, _, v| some(&mut s.tls_ca, path(v))).flag(Flag::value(
            "FILE",
            "PEM CA certificate that signs the certificates of an https job manager and of \
             exec services that serve TLS (peers of a job)",
        )),
        ExecKey::new("tls_cert", |s, _, v| some(&mut s.tls_cert, path(v)))
            .env_prefix(EXEC)
            .flag(Flag::value(
                "FILE",
                "PEM certificate to serve the Exec API over TLS with (with --tls-key); the \
                 announced address is then https",
            )),
        ExecKey::new("tls_key", |s, _, v| some(&mut s.tls_key, path(v)))
            .env_prefix(EXEC)
            .flag(Flag::value("FILE", "PEM private key of --tls-cert")),
        ExecKey::new("allow_root_jobs", |s, k, v| {
            some(&mut s.allow_root_jobs, boolean(k, v))
        })
        .flag(Flag::boolean(
            "Run jobs owned by root (uid 0) [default: true without a node credential, \
                 false with one]",
        )),
        // Not the job manager's, but named as the exec services' own.
        ExecKey::new("fanout", |s, k, v| some(&mut s.fanout, count(k, v)))
            .env_prefix(EXEC)
            .flag(Flag::value(
                "N",
                "Children of this exec service in a job's tree of exec services: a job's \
                 leader starts at most this many of the job's other nodes, each of them the \
                 same below it [default: 16]",
            )),
        // The same collector usually serves both services (one variable),
        // but each names itself.
        ExecKey::new("telemetry.otlp_endpoint", |s, _, v| {
            some(&mut s.telemetry.otlp_endpoint, text(v))
        }),
        ExecKey::new("telemetry.service_name", |s, _, v| {
            some(&mut s.telemetry.service_name, text(v))
        })
        .env_prefix(EXEC),
        ExecKey::new("limits.max_connections", |s, k, v| {
            some(&mut s.limits.max_connections, count(k, v))
        })
        .env_prefix(EXEC),
        ExecKey::new("limits.max_connections_per_peer", |s, k, v| {
            some(&mut s.limits.max_connections_per_peer, count(k, v))
        })
        .env_prefix(EXEC),
        ExecKey::new("limits.handshake_timeout", |s, k, v| {
            some(&mut s.limits.handshake_timeout, number(k, v))
        })
        .env_prefix(EXEC),
        ExecKey::new("limits.idle_timeout", |s, k, v| {
            some(&mut s.limits.idle_timeout, number(k, v))
        })
        .env_prefix(EXEC),
        ExecKey::new("limits.fd_reserve", |s, k, v| {
            some(&mut s.limits.fd_reserve, count(k, v))
        })
        .env_prefix(EXEC),
        ExecKey::new("cgroup.mode", |s, _, v| some(&mut s.cgroup.mode, text(v))),
        ExecKey::new("cgroup.root", |s, _, v| some(&mut s.cgroup.root, path(v))),
        ExecKey::new("cgroup.memory_per_core", |s, _, v| {
            some(&mut s.cgroup.memory_per_core, text(v))
        }),
        ExecKey::new("cgroup.pids_max", |s, k, v| {
            some(&mut s.cgroup.pids_max, count(k, v))
        }),
        ExecKey::new("tmpdir", |s, _, v| some(&mut s.tmpdir, path(v))).env_prefix(EXEC),
    ];

    fn check_file(&self, path: &Path) -> Result<(), layered::ConfigError> {
        if self.cores.is_some() && self.cores_count.is_some() {
            return Err(layered::ConfigError::File {
                path: path.display().to_string(),
                message: "set cores or cores_count, not both".into(),
            });
        }
        Ok(())
    }
}

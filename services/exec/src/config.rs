//! Configuration in the layers the job manager has (`fluxgate_setup::layered`):
//! defaults, then a TOML file (`--config`), then `FLUXGATE_*` environment,
//! then flags and `--set KEY=VALUE`, gathered in [`Settings`] and parsed at
//! the edge into [`Config`].
//!
//! Every key of the file has an environment variable and can be `--set`; the
//! flags (`--job-manager`, `--listen`, ...) are aliases of their keys, kept
//! for the scripts and manifests that use them. Each key is declared once,
//! in the key table of [`Settings`] (`config/settings.rs`), which gives its
//! setter, its variable and its flag.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use fluxgate_setup::layered::{self, Flags};
use fluxgate_shared::IdSet;

use crate::auth::{NodeCredential, ServerIdentity};
use crate::cgroup::{Policy, Want};
use nix::sched::{CpuSet, sched_getaffinity};
use nix::unistd::Pid;

mod settings;

pub use settings::{CgroupSettings, LimitsSettings, MetricsSettings, Settings, TelemetrySettings};

/// What the command line or environment got wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// An idset flag did not parse.
    #[error("--{flag} {value:?} is not an idset (e.g. 0-3,7): {reason}")]
    IdSet {
        /// The flag name.
        flag: &'static str,
        /// What was given.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// A number of seconds is out of range.
    #[error("--{flag} {value} must be a positive number of seconds")]
    Seconds {
        /// The flag name.
        flag: &'static str,
        /// What was given.
        value: f64,
    },
    /// `--virtual 0`.
    #[error("--virtual must be at least 1 (0 only with --relay)")]
    NoVirtualNodes,
    /// `--fanout 0`.
    #[error("--fanout must be at least 1")]
    NoFanout,
    /// `--advertise` is not an http(s) URI.
    #[error("--advertise {0:?} must be a URI such as http://10.0.0.5:7001")]
    Advertise(String),
    /// The machine's hostname could not be read and none was given.
    #[error("cannot read this machine's hostname ({0}); pass --hostname")]
    Hostname(String),
    /// No job manager address anywhere.
    #[error(
        "no job manager to join: pass --job-manager URI, set FLUXGATE_JOB_MANAGER, \
         or set job_manager in the config file"
    )]
    NoJobManager,
    /// The config file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A layer (the file, the environment, `--set`) holds a bad key or value.
    #[error(transparent)]
    Layers(#[from] layered::ConfigError),
    /// The node token file is empty.
    #[error("node token file {0} is empty; copy the job manager's STATEDIR/node.token")]
    EmptyToken(String),
    /// Only one of the certificate and its key.
    #[error("set both tls_cert and tls_key, or neither")]
    TlsPair,
    /// A `[cgroup]` setting is not one.
    #[error("cgroup.{key} {value:?}: {expected}")]
    Cgroup {
        /// The key under `cgroup.`.
        key: &'static str,
        /// What was given.
        value: String,
        /// What is expected.
        expected: &'static str,
    },
    /// An https job manager without a CA to check its certificate.
    #[error("job manager {0} uses TLS: pass --tls-ca with the CA that signed its certificate")]
    NoTlsCa(String),
}

/// Command line of `fluxgate-exec`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "fluxgate-exec",
    version,
    about = "Run the tasks of fluxgate jobs on this node (or on virtual nodes)",
    after_help = "Every flag is an alias of a configuration key (its name with _ for -), \
                  which the file (--config), a FLUXGATE_* variable or --set KEY=VALUE \
                  can also give; docs/CONFIG.md lists the keys and their variables."
)]
pub struct Args {
    /// TOML configuration file (its keys are the flags' names with `_`);
    /// environment and flags override it.
    #[arg(long, env = "FLUXGATE_EXEC_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Every key's flag (`--job-manager`, `--listen`, ...), from the key table.
    #[command(flatten)]
    pub flags: Flags<Settings>,
    /// Set any configuration key, e.g. --set kill_timeout=10 (repeatable;
    /// after the file, the environment and the other flags).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Log lines as text or as one JSON object per line (for log collectors).
    #[arg(long, env = "FLUXGATE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

pub use fluxgate_setup::LogFormat;

/// One node this process serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// Hostname announced to the job manager.
    pub hostname: String,
    /// Core ids.
    pub cores: IdSet,
    /// GPU ids.
    pub gpus: IdSet,
}

/// The effective configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Job manager address.
    pub job_manager: String,
    /// Listen address.
    pub listen: SocketAddr,
    /// Exec address announced to the job manager, when not derived from `listen`.
    pub advertise: Option<String>,
    /// Nodes served, in hello order.
    pub nodes: Vec<NodeConfig>,
    /// Grace between the first signal and SIGKILL.
    pub kill_timeout: Duration,
    /// Heartbeat override.
    pub heartbeat: Option<Duration>,
    /// Leave tasks running at shutdown.
    pub leave_running: bool,
    /// Serve the Node service for the exec services below this one.
    pub relay: bool,
    /// Address of the /metrics endpoint, if one is served.
    pub metrics_listen: Option<String>,
    /// The node credential: presented to join, required of callers.
    pub node_credential: NodeCredential,
    /// PEM CA certificate(s) for an https job manager.
    pub tls_ca: Option<Vec<u8>>,
    /// Run jobs owned by uid 0.
    pub allow_root_jobs: bool,
    /// Serve the Exec API over TLS with this certificate.
    pub tls_identity: Option<ServerIdentity>,
    /// Where spans are exported (nowhere when its endpoint is empty).
    pub otlp: fluxgate_setup::OtlpConfig,
    /// The listener's connection limits.
    pub conns: fluxgate_setup::ConnLimits,
    /// How jobs are contained.
    pub cgroup: Policy,
    /// Where jobs' temporary directories are made.
    pub tmpdir: PathBuf,
    /// Most children of this exec service in a job's tree (at least 1).
    pub fanout: usize,
}

impl Args {
    /// Every layer: the file the arguments name (if any), then `env`, then
    /// the flags, then `--set`.
    pub fn settings(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        let mut s: Settings = layered::load(self.config.as_deref())?;
        layered::apply_env(&mut s, env)?;
        self.flags.apply(&mut s)?;
        layered::apply_sets(&mut s, &self.set)?;
        Ok(s)
    }
}

/// The nodes this service serves: this machine (its name, cores and GPUs
/// as configured, else discovered), or that many virtual copies of it.
fn nodes(args: &Settings) -> Result<Vec<NodeConfig>, ConfigError> {
    let hostname = match args.hostname.clone() {
        Some(h) => h,
        None => nix::unistd::gethostname()
            .map_err(|e| ConfigError::Hostname(e.desc().to_string()))?
            .to_string_lossy()
            .into_owned(),
    };
    let cores = match (args.cores.as_deref(), args.cores_count) {
        (Some(s), _) => parse_idset("cores", s)?,
        (None, Some(0)) => IdSet::new(),
        (None, Some(n)) => IdSet::from_range(0, n - 1),
        (None, None) => usable_cpus(),
    };
    // Configuration wins; else the kernel's device files say.
    let gpus = match args.gpus.as_deref() {
        Some(s) => parse_idset("gpus", s)?,
        None => crate::discover::gpus(Path::new("/dev"), Path::new("/proc")),
    };
    Ok(match args.virtual_nodes {
        None => vec![NodeConfig {
            hostname,
            cores,
            gpus,
        }],
        // A relay may serve no node: it joins for the services below it.
        Some(0) if args.relay == Some(true) => Vec::new(),
        Some(0) => return Err(ConfigError::NoVirtualNodes),
        Some(n) => (0..n)
            .map(|i| NodeConfig {
                hostname: format!("{hostname}-v{i}"),
                cores: cores.clone(),
                gpus: gpus.clone(),
            })
            .collect(),
    })
}

impl Config {
    /// Read the config file the arguments name (if any), let flags and
    /// environment override it, validate, and fill in defaults from this machine.
    pub fn from_args(args: Args) -> Result<Config, ConfigError> {
        Config::from_settings(args.settings(std::env::vars())?)
    }

    /// Check `settings` and fill in defaults from this machine.
    pub fn from_settings(args: Settings) -> Result<Config, ConfigError> {
        let job_manager = args.job_manager.clone().ok_or(ConfigError::NoJobManager)?;
        if let Some(a) = &args.advertise
            && !(a.starts_with("http://") || a.starts_with("https://"))
        {
            return Err(ConfigError::Advertise(a.clone()));
        }
        let nodes = nodes(&args)?;
        let kill_timeout = seconds("kill-timeout", args.kill_timeout.unwrap_or(5.0))?;
        let heartbeat = args
            .heartbeat
            .map(|s| seconds("heartbeat", s))
            .transpose()?;
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|source| ConfigError::Read {
                path: path.display().to_string(),
                source,
            })
        };
        let node_token = match &args.node_token_file {
            Some(path) => {
                let text = String::from_utf8_lossy(&read(path)?).trim().to_string();
                if text.is_empty() {
                    return Err(ConfigError::EmptyToken(path.display().to_string()));
                }
                Some(text)
            }
            None => None,
        };
        let tls_ca = args.tls_ca.as_ref().map(read).transpose()?;
        let tls_identity = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(ServerIdentity {
                cert: read(cert)?,
                key: read(key)?,
            }),
            (None, None) => None,
            _ => return Err(ConfigError::TlsPair),
        };
        let cgroup = cgroup_policy(&args.cgroup)?;
        if job_manager.starts_with("https://") && tls_ca.is_none() {
            return Err(ConfigError::NoTlsCa(job_manager));
        }
        Ok(Config {
            job_manager,
            listen: args
                .listen
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))),
            advertise: args.advertise,
            nodes,
            kill_timeout,
            heartbeat,
            leave_running: args.leave_running.unwrap_or(false),
            relay: args.relay.unwrap_or(false),
            metrics_listen: args.metrics.listen,
            // Without a credential anyone may ask anything of this service,
            // so refusing root's jobs would protect nothing.
            allow_root_jobs: args.allow_root_jobs.unwrap_or(node_token.is_none()),
            node_credential: NodeCredential::new(node_token.as_deref()),
            tls_identity,
            tls_ca,
            conns: args.limits.conns(),
            otlp: fluxgate_setup::OtlpConfig {
                endpoint: args.telemetry.otlp_endpoint.unwrap_or_default(),
                service_name: args
                    .telemetry
                    .service_name
                    .unwrap_or_else(|| "fluxgate-exec".into()),
            },
            cgroup,
            tmpdir: args.tmpdir.unwrap_or_else(crate::jobtmp::default_parent),
            fanout: match args.fanout {
                None => crate::job::tree::DEFAULT_FANOUT,
                Some(0) => return Err(ConfigError::NoFanout),
                Some(n) => n,
            },
        })
    }

    /// A configuration for tests and embedding: one node, no heartbeat override.
    pub fn single(job_manager: &str, hostname: &str, cores: IdSet) -> Config {
        Config {
            job_manager: job_manager.to_string(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            advertise: None,
            nodes: vec![NodeConfig {
                hostname: hostname.to_string(),
                cores,
                gpus: IdSet::new(),
            }],
            kill_timeout: Duration::from_secs(5),
            heartbeat: None,
            leave_running: false,
            relay: false,
            metrics_listen: None,
            node_credential: NodeCredential::default(),
            tls_identity: None,
            tls_ca: None,
            allow_root_jobs: true,
            otlp: fluxgate_setup::OtlpConfig::default(),
            conns: fluxgate_setup::ConnLimits::default(),
            cgroup: Policy::default(),
            tmpdir: crate::jobtmp::default_parent(),
            fanout: crate::job::tree::DEFAULT_FANOUT,
        }
    }
}

/// The containment policy of `[cgroup]`.
fn cgroup_policy(s: &CgroupSettings) -> Result<Policy, ConfigError> {
    let want = match s.mode.as_deref() {
        None | Some("auto") => Want::Auto,
        Some("off") => Want::Off,
        Some(other) => {
            return Err(ConfigError::Cgroup {
                key: "mode",
                value: other.to_string(),
                expected: "auto or off",
            });
        }
    };
    let memory_per_core = s
        .memory_per_core
        .as_deref()
        .map(|v| {
            fluxgate_shared::size::parse(v).ok_or_else(|| ConfigError::Cgroup {
                key: "memory_per_core",
                value: v.to_string(),
                expected: "a size such as 2G",
            })
        })
        .transpose()?;
    Ok(Policy {
        want,
        root: s.root.clone(),
        memory_per_core,
        pids_max: s.pids_max,
    })
}

/// The Exec address to announce: `advertise` if set; else the bound address,
/// unless it is the unspecified address (0.0.0.0, ::), which nobody can dial:
/// then this machine's hostname with the bound port, as in containers, where
/// the hostname is what the other containers resolve.
pub fn exec_address(advertise: Option<&str>, bound: SocketAddr, machine: &str) -> String {
    match advertise {
        Some(a) => a.to_string(),
        None if bound.ip().is_unspecified() => format!("http://{machine}:{}", bound.port()),
        None => format!("http://{bound}"),
    }
}

/// This machine's hostname, or `localhost` if it cannot be read.
pub fn machine_hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".to_string())
}

fn parse_idset(flag: &'static str, value: &str) -> Result<IdSet, ConfigError> {
    IdSet::parse(value).map_err(|e| ConfigError::IdSet {
        flag,
        value: value.to_string(),
        reason: e.to_string(),
    })
}

fn seconds(flag: &'static str, value: f64) -> Result<Duration, ConfigError> {
    if !(value.is_finite() && value > 0.0) {
        return Err(ConfigError::Seconds { flag, value });
    }
    Ok(Duration::from_secs_f64(value))
}

/// The CPUs this process may run on (its affinity mask).
fn usable_cpus() -> IdSet {
    let Ok(set) = sched_getaffinity(Pid::from_raw(0)) else {
        return IdSet::from_range(0, 0);
    };
    (0..CpuSet::count())
        .filter(|&i| set.is_set(i).unwrap_or(false))
        .filter_map(|i| u32::try_from(i).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut v = vec![
            "fluxgate-exec",
            "--job-manager",
            "http://127.0.0.1:1",
            "--hostname",
            "h",
        ];
        v.extend_from_slice(extra);
        Args::try_parse_from(v).unwrap()
    }

    #[test]
    fn virtual_nodes_are_named_after_the_host() {
        let c = Config::from_args(args(&[
            "--virtual",
            "3",
            "--cores-count",
            "4",
            "--gpus",
            "0-1",
        ]))
        .unwrap();
        let names: Vec<_> = c.nodes.iter().map(|n| n.hostname.as_str()).collect();
        assert_eq!(names, ["h-v0", "h-v1", "h-v2"]);
        assert!(
            c.nodes
                .iter()
                .all(|n| n.cores.to_string() == "0-3" && n.gpus.to_string() == "0-1")
        );
        assert_eq!(c.kill_timeout, Duration::from_secs(5));
    }

    #[test]
    fn a_node_credential_turns_root_jobs_off_unless_allowed() {
        let open = Config::from_args(args(&[])).unwrap();
        assert!(!open.node_credential.is_set());
        assert!(open.allow_root_jobs);

        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("node.token");
        std::fs::write(&token, "fgt1.abc.def\n").unwrap();
        let path = token.to_str().unwrap();
        let c = Config::from_args(args(&["--node-token-file", path])).unwrap();
        assert!(c.node_credential.is_set());
        assert!(!c.allow_root_jobs);
        assert_eq!(format!("{:?}", c.node_credential), "NodeCredential(set)");
        let c = Config::from_args(args(&["--node-token-file", path, "--allow-root-jobs"])).unwrap();
        assert!(c.allow_root_jobs);

        std::fs::write(&token, "\n").unwrap();
        let e = Config::from_args(args(&["--node-token-file", path])).unwrap_err();
        assert!(e.to_string().contains("is empty"), "{e}");
    }

    #[test]
    fn a_certificate_needs_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("node.pem");
        std::fs::write(&cert, "pem").unwrap();
        let e = Config::from_args(args(&["--tls-cert", cert.to_str().unwrap()])).unwrap_err();
        assert!(e.to_string().contains("tls_key"), "{e}");
        let c = Config::from_args(args(&[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            cert.to_str().unwrap(),
        ]))
        .unwrap();
        assert_eq!(format!("{:?}", c.tls_identity), "Some(ServerIdentity)");
    }

    #[test]
    fn an_https_job_manager_needs_a_ca() {
        let a =
            Args::try_parse_from(["fluxgate-exec", "--job-manager", "https://jm:7000"]).unwrap();
        let e = Config::from_args(a).unwrap_err();
        assert!(e.to_string().contains("--tls-ca"), "{e}");
    }

    #[test]
    fn bad_values_name_the_flag() {
        let e = Config::from_args(args(&["--cores", "3-1"])).unwrap_err();
        assert!(e.to_string().starts_with("--cores \"3-1\""), "{e}");
        let e = Config::from_args(args(&["--kill-timeout", "0"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--kill-timeout 0 must be a positive number of seconds"
        );
        assert!(
            Args::try_parse_from([
                "fluxgate-exec",
                "--job-manager",
                "x",
                "--cores",
                "0",
                "--cores-count",
                "2"
            ])
            .is_err()
        );
    }

    #[test]
    fn the_announced_address_is_one_others_can_dial() {
        let any: SocketAddr = "0.0.0.0:7001".parse().unwrap();
        let v6: SocketAddr = "[::]:7001".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(exec_address(None, any, "node0"), "http://node0:7001");
        assert_eq!(exec_address(None, v6, "node0"), "http://node0:7001");
        assert_eq!(exec_address(None, lo, "node0"), "http://127.0.0.1:4000");
        assert_eq!(
            exec_address(Some("http://10.1.2.3:7001"), any, "node0"),
            "http://10.1.2.3:7001"
        );
        let e = Config::from_args(args(&["--advertise", "10.1.2.3:7001"])).unwrap_err();
        assert!(e.to_string().starts_with("--advertise"), "{e}");
    }

    /// Flags and their environment variables reach `Args` through clap as one
    /// layer (the flag winning), so flags here stand for both.
    #[test]
    fn file_then_environment_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exec.toml");
        std::fs::write(
            &path,
            "job_manager = \"http://jm:7000\"\nlisten = \"0.0.0.0:7001\"\n\
             hostname = \"fromfile\"\ncores_count = 4\nvirtual = 2\nkill_timeout = 9\n\
             leave_running = true\n[metrics]\nlisten = \"0.0.0.0:9101\"\n",
        )
        .unwrap();
        let file = path.to_str().unwrap();
        let parse = |extra: &[&str]| {
            let mut v = vec!["fluxgate-exec", "--config", file];
            v.extend_from_slice(extra);
            Config::from_args(Args::try_parse_from(v).unwrap())
        };
        let c = parse(&[]).unwrap();
        assert_eq!(c.job_manager, "http://jm:7000");
        assert_eq!(c.listen.to_string(), "0.0.0.0:7001");
        let names: Vec<_> = c.nodes.iter().map(|n| n.hostname.as_str()).collect();
        assert_eq!(names, ["fromfile-v0", "fromfile-v1"]);
        assert_eq!(c.nodes[0].cores.to_string(), "0-3");
        assert_eq!(c.kill_timeout, Duration::from_secs(9));
        assert!(c.leave_running);
        assert_eq!(c.metrics_listen.as_deref(), Some("0.0.0.0:9101"));

        let c = parse(&[
            "--hostname",
            "h",
            "--cores",
            "1",
            "--leave-running=false",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .unwrap();
        assert_eq!(c.nodes[0].hostname, "h-v0");
        assert_eq!(
            c.nodes[0].cores.to_string(),
            "1",
            "--cores replaces cores_count"
        );
        assert!(!c.leave_running);
        assert_eq!(c.metrics_listen.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(c.kill_timeout, Duration::from_secs(9), "kept from the file");
        let c = Config::from_args(
            Args::try_parse_from(["fluxgate-exec", "--job-manager", "x", "--leave-running"])
                .unwrap(),
        )
        .unwrap();
        assert!(c.leave_running);
    }

    /// The environment and `--set` are layers of the same keys as the file.
    #[test]
    fn environment_and_set_are_layers_of_the_same_keys() {
        let env = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let a =
            Args::try_parse_from(["fluxgate-exec", "--cores", "2", "--set", "gpus=0-1"]).unwrap();
        let s = a
            .settings(env(&[
                ("FLUXGATE_JOB_MANAGER", "http://jm:7000"),
                ("FLUXGATE_EXEC_LISTEN", "0.0.0.0:7001"),
                ("FLUXGATE_LISTEN", "0.0.0.0:9"),
                ("FLUXGATE_CORES_COUNT", "8"),
                ("FLUXGATE_EXEC_METRICS_LISTEN", "127.0.0.1:0"),
                ("FLUXGATE_ALLOW_ROOT_JOBS", "no"),
            ]))
            .unwrap();
        assert_eq!(s.job_manager.as_deref(), Some("http://jm:7000"));
        assert_eq!(s.listen.unwrap().to_string(), "0.0.0.0:7001");
        assert_eq!((s.cores.as_deref(), s.cores_count), (Some("2"), None));
        assert_eq!(s.gpus.as_deref(), Some("0-1"));
        assert_eq!(s.metrics.listen.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(s.allow_root_jobs, Some(false));
        let e = a
            .settings(env(&[("FLUXGATE_KILL_TIMEOUT", "soon")]))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "environment variable FLUXGATE_KILL_TIMEOUT=\"soon\": kill_timeout expects a number"
        );
        let a = Args::try_parse_from(["fluxgate-exec", "--set", "kill_timout=3"]).unwrap();
        let e = a.settings(env(&[])).unwrap_err().to_string();
        assert!(e.contains("unknown key \"kill_timout\""), "{e}");
    }

    #[test]
    fn telemetry_shares_the_endpoint_variable_and_names_itself() {
        let env = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let a = Args::try_parse_from(["fluxgate-exec", "--job-manager", "http://jm:7000"]).unwrap();
        let off = Config::from_settings(a.settings(env(&[])).unwrap()).unwrap();
        assert_eq!(off.otlp.endpoint, "", "off by default");
        assert_eq!(off.otlp.service_name, "fluxgate-exec");
        let s = a
            .settings(env(&[
                ("FLUXGATE_TELEMETRY_OTLP_ENDPOINT", "http://collector:4317"),
                // The job manager's name, in an environment both share.
                ("FLUXGATE_TELEMETRY_SERVICE_NAME", "jm"),
                ("FLUXGATE_EXEC_TELEMETRY_SERVICE_NAME", "exec-a"),
            ]))
            .unwrap();
        let c = Config::from_settings(s).unwrap();
        assert_eq!(c.otlp.endpoint, "http://collector:4317");
        assert_eq!(c.otlp.service_name, "exec-a");
    }

    #[test]
    fn file_mistakes_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exec.toml");
        let load = |text: &str| {
            std::fs::write(&path, text).unwrap();
            let args = Args::try_parse_from(["fluxgate-exec", "--config", path.to_str().unwrap()])
                .unwrap();
            Config::from_args(args).unwrap_err().to_string()
        };
        let e = load("job_manager = \"x\"\nkill_timout = 3\n");
        assert!(e.contains("kill_timout"), "{e}");
        let e = load("job_manager = \"x\"\nlisten = \"nowhere\"\n");
        assert!(e.contains("listen"), "{e}");
        let e = load("job_manager = \"x\"\ncores = \"0\"\ncores_count = 2\n");
        assert!(e.ends_with("set cores or cores_count, not both"), "{e}");
        let e = load("hostname = \"h\"\n");
        assert!(e.starts_with("no job manager to join"), "{e}");
        let args =
            Args::try_parse_from(["fluxgate-exec", "--config", "/nonexistent/exec.toml"]).unwrap();
        let e = Config::from_args(args).unwrap_err().to_string();
        assert!(
            e.starts_with("cannot read config /nonexistent/exec.toml"),
            "{e}"
        );
    }

    #[test]
    fn default_cores_are_the_usable_cpus() {
        let c = Config::from_args(args(&[])).unwrap();
        assert!(!c.nodes[0].cores.is_empty());
        assert_eq!(c.listen.to_string(), "127.0.0.1:0");
    }

    #[test]
    fn the_fanout_is_16_unless_set_and_never_0() {
        let a = args(&[]);
        let c = Config::from_settings(a.settings(Vec::new()).unwrap()).unwrap();
        assert_eq!(c.fanout, 16);
        let env = vec![("FLUXGATE_EXEC_FANOUT".to_string(), "4".to_string())];
        let c = Config::from_settings(a.settings(env.clone()).unwrap()).unwrap();
        assert_eq!(c.fanout, 4);
        let c = Config::from_settings(args(&["--fanout", "2"]).settings(env).unwrap()).unwrap();
        assert_eq!(c.fanout, 2, "the flag wins over the environment");
        let e = Config::from_args(args(&["--set", "fanout=0"])).unwrap_err();
        assert_eq!(e.to_string(), "--fanout must be at least 1");
    }

    /// Dotted keys of serialized settings, tables walked, unset options kept.
    fn fields(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
        if let serde_json::Value::Object(map) = value {
            for (k, v) in map {
                let key = format!("{prefix}{k}");
                if v.is_object() {
                    fields(&format!("{key}."), v, out);
                } else {
                    out.push(key);
                }
            }
        }
    }

    #[test]
    fn every_key_has_an_environment_variable_and_a_setter() {
        use fluxgate_setup::Layered;
        let mut all = Vec::new();
        fields(
            "",
            &serde_json::to_value(Settings::default()).unwrap(),
            &mut all,
        );
        all.sort();
        let mut listed: Vec<String> = Settings::KEYS.iter().map(|k| k.name.into()).collect();
        listed.sort();
        assert_eq!(all, listed, "the table must list every field, once");
        let mut s = Settings::default();
        for key in Settings::KEYS {
            let text = match key.name {
                "listen" => "127.0.0.1:7",
                "leave_running" | "relay" | "allow_root_jobs" => "true",
                _ => "7",
            };
            layered::apply_env(&mut s, [(key.env_name(), text.to_string())])
                .unwrap_or_else(|e| panic!("{}: {e}", key.name));
        }
        assert_eq!(s.fanout, Some(7));
        assert_eq!(s.limits.fd_reserve, Some(7));
        assert_eq!(s.cgroup.pids_max, Some(7));
        assert_eq!(s.relay, Some(true));
        assert_eq!(
            (s.cores.as_deref(), s.cores_count),
            (None, Some(7)),
            "one choice"
        );
        let exec: Vec<_> = Settings::KEYS
            .iter()
            .filter(|k| k.env_name().starts_with("FLUXGATE_EXEC_"))
            .map(|k| k.name)
            .collect();
        assert_eq!(
            exec,
            [
                "listen",
                "advertise",
                "metrics.listen",
                "tls_cert",
                "tls_key",
                "fanout",
                "telemetry.service_name",
                "limits.max_connections",
                "limits.max_connections_per_peer",
                "limits.handshake_timeout",
                "limits.idle_timeout",
                "limits.fd_reserve",
                "tmpdir",
            ]
        );
        assert!(matches!(
            s.set("kill_timout", "1"),
            Err(layered::SetError::UnknownKey(_))
        ));
    }

    /// docs/CONFIG.md's exec section names every key, its variable and its flag.
    #[test]
    fn the_docs_name_every_key() {
        use fluxgate_setup::Layered;
        let docs = include_str!("../../../docs/CONFIG.md");
        let start = docs.find("## Exec service").expect("an exec section");
        let section = &docs[start..];
        let end = section[1..].find("\n## ").map_or(section.len(), |e| e + 1);
        let section = &section[..end];
        let missing = layered::unnamed_in(section, Settings::KEYS);
        assert!(
            missing.is_empty(),
            "docs/CONFIG.md does not name {missing:?}"
        );
    }
}

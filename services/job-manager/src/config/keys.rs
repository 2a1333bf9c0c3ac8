//! The job manager's key table: every key of a fixed name once, with its
//! setter; its environment variable is `FLUXGATE_` and the dotted key in
//! upper case with `_` for `.` (`resource.torpid_timeout` is
//! `FLUXGATE_RESOURCE_TORPID_TIMEOUT`). Keys that name an entry of a table
//! (`auth.users.NAME`, `queues.NAME.*`, per-user and per-bank limits and
//! accounts) are set by [`Config::set_named`](super::Config) and have no
//! variable. docs/CONFIG.md lists them.

use fluxgate_setup::layered::value::{
    bad, boolean, count, number, parsed, path, put as to, put_some as some, text,
};
use fluxgate_setup::layered::{Flag, Key, Layered, SetError};

use super::site::{fsd, job_size};
use super::{Config, SchedPolicy, parse_size};

/// A key of the job manager (the alias gives its setters their argument types).
type JobManagerKey = Key<Config>;

impl Layered for Config {
    // The flags are listed in `--help` in this order.
    const KEYS: &'static [Key<Config>] = &[
        JobManagerKey::new("listen", |c, _, v| to(&mut c.listen, text(v))).flag(Flag::value(
            "LISTEN",
            "Address to serve on (overrides `listen`)",
        )),
        JobManagerKey::new("statedir", |c, _, v| to(&mut c.statedir, path(v))).flag(Flag::value(
            "STATEDIR",
            "State directory (overrides `statedir`)",
        )),
        JobManagerKey::new("owner_uid", |c, k, v| {
            to(&mut c.owner_uid, parsed(k, v, "a uid"))
        }),
        JobManagerKey::new("resource.nodelist", |c, _, v| {
            some(&mut c.resource.nodelist, text(v))
        })
        .flag(
            Flag::value(
                "NODELIST",
                "Hostnames of the nodes, in rank order (overrides `resource.nodelist`)",
            )
            .long("nodelist"),
        ),
        JobManagerKey::new("resource.path", |c, _, v| {
            some(&mut c.resource.path, path(v))
        })
        .flag(Flag::value(
            "RESOURCE_PATH",
            "R file with the inventory (overrides `resource.path`)",
        )),
        JobManagerKey::new("resource.method", |c, k, v| {
            some(&mut c.resource.method, define_method(k, v))
        }),
        JobManagerKey::new("resource.size", |c, k, v| {
            some(&mut c.resource.size, parsed(k, v, "a node count"))
        })
        .flag(
            Flag::value(
                "SIZE",
                "Number of nodes to wait for (overrides `resource.size`)",
            )
            .long("size"),
        ),
        JobManagerKey::new("resource.heartbeat_interval", |c, k, v| {
            to(&mut c.resource.heartbeat_interval, number(k, v))
        }),
        JobManagerKey::new("resource.torpid_timeout", |c, k, v| {
            to(&mut c.resource.torpid_timeout, number(k, v))
        }),
        JobManagerKey::new("resource.lost_timeout", |c, k, v| {
            to(&mut c.resource.lost_timeout, number(k, v))
        }),
        JobManagerKey::new("resource.fence_timeout", |c, k, v| {
            to(&mut c.resource.fence_timeout, number(k, v))
        }),
        JobManagerKey::new("resource.journal_capacity", |c, k, v| {
            to(&mut c.resource.journal_capacity, count(k, v))
        }),
        JobManagerKey::new("resource.eventlog_max", |c, k, v| {
            to(&mut c.resource.eventlog_max, count(k, v))
        }),
        JobManagerKey::new("exec.rejoin_timeout", |c, k, v| {
            to(&mut c.exec.rejoin_timeout, number(k, v))
        }),
        JobManagerKey::new("exec.tls_ca", |c, _, v| some(&mut c.exec.tls_ca, path(v))),
        JobManagerKey::new("limits.max_jobspec_bytes", |c, k, v| {
            to(&mut c.limits.max_jobspec_bytes, count(k, v))
        }),
        JobManagerKey::new("limits.max_batch", |c, k, v| {
            to(&mut c.limits.max_batch, count(k, v))
        }),
        JobManagerKey::new("limits.inactive_age_limit", |c, k, v| {
            some(&mut c.limits.inactive_age_limit, number(k, v))
        }),
        JobManagerKey::new("limits.inactive_num_limit", |c, k, v| {
            some(&mut c.limits.inactive_num_limit, count(k, v))
        }),
        JobManagerKey::new("limits.max_connections", |c, k, v| {
            to(&mut c.limits.max_connections, count(k, v))
        }),
        JobManagerKey::new("limits.max_connections_per_peer", |c, k, v| {
            to(&mut c.limits.max_connections_per_peer, count(k, v))
        }),
        JobManagerKey::new("limits.handshake_timeout", |c, k, v| {
            to(&mut c.limits.handshake_timeout, number(k, v))
        }),
        JobManagerKey::new("limits.idle_timeout", |c, k, v| {
            to(&mut c.limits.idle_timeout, number(k, v))
        }),
        JobManagerKey::new("limits.fd_reserve", |c, k, v| {
            to(&mut c.limits.fd_reserve, count(k, v))
        }),
        JobManagerKey::new("limits.max_streams_per_user", |c, k, v| {
            to(&mut c.limits.max_streams_per_user, count(k, v))
        }),
        JobManagerKey::new("perilog.prolog", |c, _, v| {
            some(&mut c.perilog.prolog, text(v))
        }),
        JobManagerKey::new("perilog.epilog", |c, _, v| {
            some(&mut c.perilog.epilog, text(v))
        }),
        JobManagerKey::new("perilog.timeout", |c, k, v| {
            to(&mut c.perilog.timeout, number(k, v))
        }),
        JobManagerKey::new("metrics.listen", |c, _, v| {
            some(&mut c.metrics.listen, text(v))
        }),
        JobManagerKey::new("telemetry.otlp_endpoint", |c, _, v| {
            to(&mut c.telemetry.otlp_endpoint, text(v))
        }),
        JobManagerKey::new("telemetry.service_name", |c, _, v| {
            to(&mut c.telemetry.service_name, text(v))
        }),
        JobManagerKey::new("store.url", |c, _, v| some(&mut c.store.url, text(v))).flag(
            Flag::value(
                "URL",
                "Keep jobs in PostgreSQL (`postgres://…`), shared with standby job managers \
                 (overrides `store.url`; docs/HA.md). Without a password: others can read a \
                 command line; give one in `FLUXGATE_STORE_URL`, the configuration file or \
                 `--store-url-file`",
            )
            .conflicts_with("store_url_file"),
        ),
        JobManagerKey::new("store.ca_file", |c, _, v| {
            some(&mut c.store.ca_file, path(v))
        }),
        JobManagerKey::new("ha.advertise", |c, _, v| some(&mut c.ha.advertise, text(v))),
        JobManagerKey::new("ha.lease", |c, k, v| to(&mut c.ha.lease, number(k, v))),
        JobManagerKey::new("ha.poll_interval", |c, k, v| {
            to(&mut c.ha.poll_interval, number(k, v))
        }),
        JobManagerKey::new("auth.enabled", |c, k, v| {
            to(&mut c.auth.enabled, boolean(k, v))
        }),
        JobManagerKey::new("auth.key_file", |c, _, v| {
            some(&mut c.auth.key_file, path(v))
        }),
        JobManagerKey::new("auth.job_credential_ttl", |c, k, v| {
            some(&mut c.auth.job_credential_ttl, count(k, v))
        }),
        JobManagerKey::new("tls.cert", |c, _, v| some(&mut c.tls.cert, path(v))),
        JobManagerKey::new("tls.key", |c, _, v| some(&mut c.tls.key, path(v))),
        JobManagerKey::new("tls.client_ca", |c, _, v| {
            some(&mut c.tls.client_ca, path(v))
        }),
        JobManagerKey::new("output.limit", |c, k, v| {
            to(&mut c.output.limit, output_limit(k, v))
        }),
        JobManagerKey::new("policy.limits.max_active_jobs", |c, k, v| {
            to(&mut c.policy.limits.max_active_jobs, count(k, v))
        }),
        JobManagerKey::new("policy.limits.owner_max_active_jobs", |c, k, v| {
            to(&mut c.policy.limits.owner_max_active_jobs, count(k, v))
        }),
        JobManagerKey::new("sched.policy", |c, k, v| {
            to(&mut c.sched.policy, sched_policy(k, v))
        }),
        JobManagerKey::new("sched.queue_depth", |c, k, v| {
            to(&mut c.sched.queue_depth, count(k, v))
        }),
        JobManagerKey::new("sched.reservation_depth", |c, k, v| {
            to(&mut c.sched.reservation_depth, count(k, v))
        }),
        // Site policy (config/site.rs).
        JobManagerKey::new("policy.jobspec.defaults.system.duration", |c, k, v| {
            some(&mut c.policy.jobspec.defaults.system.duration, fsd(k, v))
        }),
        JobManagerKey::new("policy.jobspec.defaults.system.queue", |c, _, v| {
            some(&mut c.policy.jobspec.defaults.system.queue, text(v))
        }),
        JobManagerKey::new("policy.limits.duration", |c, k, v| {
            some(&mut c.policy.limits.duration, fsd(k, v))
        }),
        JobManagerKey::new("policy.limits.job-size.min.nnodes", |c, k, v| {
            to(&mut c.policy.limits.job_size.min.nnodes, job_size(k, v))
        }),
        JobManagerKey::new("policy.limits.job-size.min.ncores", |c, k, v| {
            to(&mut c.policy.limits.job_size.min.ncores, job_size(k, v))
        }),
        JobManagerKey::new("policy.limits.job-size.min.ngpus", |c, k, v| {
            to(&mut c.policy.limits.job_size.min.ngpus, job_size(k, v))
        }),
        JobManagerKey::new("policy.limits.job-size.max.nnodes", |c, k, v| {
            to(&mut c.policy.limits.job_size.max.nnodes, job_size(k, v))
        }),
        JobManagerKey::new("policy.limits.job-size.max.ncores", |c, k, v| {
            to(&mut c.policy.limits.job_size.max.ncores, job_size(k, v))
        }),
        JobManagerKey::new("policy.limits.job-size.max.ngpus", |c, k, v| {
            to(&mut c.policy.limits.job_size.max.ngpus, job_size(k, v))
        }),
        JobManagerKey::new("accounting.enabled", |c, k, v| {
            to(&mut c.accounting.enabled, boolean(k, v))
        }),
        JobManagerKey::new("accounting.priority_decay_half_life", |c, k, v| {
            to(&mut c.accounting.priority_decay_half_life, fsd(k, v))
        }),
        JobManagerKey::new("accounting.age_max", |c, k, v| {
            to(&mut c.accounting.age_max, fsd(k, v))
        }),
        JobManagerKey::new("accounting.recompute_interval", |c, k, v| {
            to(&mut c.accounting.recompute_interval, fsd(k, v))
        }),
        JobManagerKey::new("accounting.weights.fairshare", |c, k, v| {
            to(&mut c.accounting.weights.fairshare, count(k, v))
        }),
        JobManagerKey::new("accounting.weights.queue", |c, k, v| {
            to(&mut c.accounting.weights.queue, count(k, v))
        }),
        JobManagerKey::new("accounting.weights.bank", |c, k, v| {
            to(&mut c.accounting.weights.bank, count(k, v))
        }),
        JobManagerKey::new("accounting.weights.urgency", |c, k, v| {
            to(&mut c.accounting.weights.urgency, count(k, v))
        }),
        JobManagerKey::new("accounting.weights.age", |c, k, v| {
            to(&mut c.accounting.weights.age, count(k, v))
        }),
    ];

    fn set_named(&mut self, key: &str, value: &str) -> Option<Result<(), SetError>> {
        match key.strip_prefix("auth.users.") {
            Some(user) if !user.is_empty() => Some(parsed(key, value, "a uid").map(|uid| {
                self.auth.users.insert(user.to_string(), uid);
            })),
            _ => super::site::set_named(self, key, value),
        }
    }
}

/// `resource.method`: the `resource-define` methods a configured R may post.
fn define_method(key: &str, v: &str) -> Result<String, SetError> {
    match v {
        "configuration" | "job-info" => Ok(v.to_string()),
        _ => Err(bad(key, "configuration or job-info")),
    }
}

fn output_limit(key: &str, v: &str) -> Result<u64, SetError> {
    parse_size(v).ok_or_else(|| bad(key, "a size such as 1G, 512M or bytes"))
}

fn sched_policy(key: &str, v: &str) -> Result<SchedPolicy, SetError> {
    match v {
        "fcfs" => Ok(SchedPolicy::Fcfs),
        "easy" => Ok(SchedPolicy::Easy),
        "conservative" => Ok(SchedPolicy::Conservative),
        _ => Err(bad(key, "fcfs, easy or conservative")),
    }
}

//! Instances inside jobs: `fluxgate batch`, `fluxgate alloc`, `fluxgate
//! proxy`, and the hidden `fluxgate instance` that the job's tasks run.
//!
//! A batch or alloc job runs one `fluxgate instance` task per allocated
//! node. Each reads the job's R from the enclosing (parent) instance and
//! re-ranks it to 0..n-1 (RFC 20). Task rank 0 starts the child job manager
//! on that R (RFC 44 `resource-define` method `job-info`) and records the
//! child's URI on the parent job as memo `uri`; every task starts an exec
//! service for its own node that joins the child job manager (ranks > 0 find
//! the URI by watching the parent job's eventlog for the memo). Rank 0 then
//! runs the batch script (or, for alloc, waits) with `FLUXGATE_URI` naming
//! the child, and follows the parent job's eventlog: a `resource-update`
//! there (the job's duration changed) becomes the child's own
//! `resource-update`, so expiration flows down every level.
//!
//! Ending: when the script exits, or the task gets SIGTERM (the parent job
//! was cancelled, or `alloc`'s command ended), rank 0 cancels what is still
//! active in the child, so those jobs end with an exception, waits for them
//! briefly, and stops the child's services; ranks > 0 stop their exec
//! service when the child job manager goes away or on SIGTERM. All of it
//! fits in the parent exec service's kill timeout. The services run in a
//! process group of their own, so a signal to the task's group reaches the
//! task and its script, never the services behind their teardown.
//!
//! A child instance requires credentials like any other: its owner's token
//! goes only to the script (or alloc's command) and to a file only the job's
//! user can read, where `proxy`, `uri` and `alloc` find it ([`access`]).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::{JobId, ResourceSet};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::client::{self, Instance};
use crate::cmd::jobs::attach;
use crate::cmd::jobs::attach::stdin::Ranks;
use crate::cmd::jobs::submit::{InstanceJob, JobOpts, submit_one, with_input_service};
use crate::services::{
    Cores, Exec, JobManager, Launcher, Signals, command_or_shell, exit_code, forward, run_command,
    up_count, wait_ready,
};

mod access;
mod batch;
pub mod conf;
pub mod directives;
mod proxy;
mod task;

use access::ChildKey;

pub use batch::{run_alloc, run_batch};
pub use proxy::{connect_inside, run_proxy, run_uri};
pub use task::run_instance;

/// The job id the exec service gives every task.
const JOB_ID_ENV: &str = "FLUX_JOB_ID";
/// The task's global rank; with one task per node, the node's rank in R.
const TASK_RANK_ENV: &str = "FLUX_TASK_RANK";
/// Seconds a child instance may take to come up.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Grace between SIGTERM and SIGKILL for the child's services: together with
/// the cancel of its jobs it stays inside the parent's kill timeout (5 s).
const SERVICE_KILL_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long the child's cancelled jobs get to end before the services stop.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(1500);

/// Arguments of `fluxgate batch`.
#[derive(Debug, clap::Args)]
pub struct BatchArgs {
    #[command(flatten)]
    opts: JobOpts,
    /// Wrap the arguments in a /bin/sh script instead of reading SCRIPT.
    #[arg(long)]
    wrap: bool,
    /// Set configuration for the child instance: a multi-line JSON or TOML
    /// text, KEY=VALUE, a .toml or .json file, or a named configuration.
    #[arg(long = "conf", value_name = "CONF")]
    conf: Vec<String>,
    /// Do not print the job id.
    #[arg(long)]
    quiet: bool,
    /// Print the jobspec JSON instead of submitting, and exit.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// The batch script (run by the new instance's rank 0) and its
    /// arguments; without it, the script is read from stdin.
    #[arg(trailing_var_arg = true, value_name = "SCRIPT")]
    script: Vec<String>,
    /// The script read from stdin, when no SCRIPT is given.
    #[arg(skip)]
    stdin_script: Option<String>,
}

impl BatchArgs {
    /// The script file whose directives apply (none with --wrap).
    pub fn script_path(&self) -> Option<&str> {
        if self.wrap {
            None
        } else {
            self.script.first().map(String::as_str)
        }
    }

    /// Whether the script comes from stdin: no SCRIPT (with `--wrap`,
    /// stdin's text is what gets wrapped).
    pub fn reads_stdin(&self) -> bool {
        self.script.is_empty()
    }

    /// Keep the script read from stdin.
    pub fn set_stdin_script(&mut self, text: String) {
        self.stdin_script = Some(text);
    }
}

/// Arguments of `fluxgate alloc`.
#[derive(Debug, clap::Args)]
pub struct AllocArgs {
    #[command(flatten)]
    opts: JobOpts,
    /// Set configuration for the child instance: a multi-line JSON or TOML
    /// text, KEY=VALUE, a .toml or .json file, or a named configuration.
    #[arg(long = "conf", value_name = "CONF")]
    conf: Vec<String>,
    /// Print the jobspec JSON instead of submitting, and exit.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// Command to run in the new instance (default: $SHELL).
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Arguments of `fluxgate proxy`.
#[derive(Debug, clap::Args)]
pub struct ProxyArgs {
    /// The job whose instance to reach (`ID/ID2/...` for nested instances).
    jobid: String,
    /// Command to run with FLUXGATE_URI naming that instance (default: $SHELL).
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Arguments of `fluxgate uri`.
#[derive(Debug, clap::Args)]
pub struct UriArgs {
    /// The job whose instance to name (`ID/ID2/...` for nested instances).
    jobid: String,
}

/// The variable of the job's environment that carries its batch script.
pub const SCRIPT_ENV: &str = "FLUXGATE_BATCH_SCRIPT";

/// Arguments of the hidden `fluxgate instance`, one task per node of a
/// batch or alloc job.
#[derive(Debug, clap::Args)]
pub struct InstanceArgs {
    /// The batch script's text (rank 0 runs it); without it rank 0 waits
    /// for SIGTERM, as an alloc job does.
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["script_from_env", "script_from_jobspec"])]
    script: Option<String>,
    /// alloc: rank 0 runs ARGS (default $SHELL) in the new instance, on the
    /// job's own stdio (a pty under `-o pty.interactive`), and the job ends
    /// with it, with its exit code.
    #[arg(long, conflicts_with_all = ["script", "script_from_env", "script_from_jobspec"])]
    alloc: bool,
    /// Configure the child's job manager from the jobspec's `conf.json`
    /// file (RFC 37), where `batch` and `alloc` put `--conf`.
    #[arg(long)]
    conf_from_jobspec: bool,
    /// The child's configuration (TOML) read from the jobspec.
    #[arg(skip)]
    conf_toml: Option<String>,
    /// Read the batch script from the job's own jobspec
    /// (`attributes.system.files.script`, RFC 37), where `batch` puts it.
    #[arg(long, conflicts_with = "script_from_env")]
    script_from_jobspec: bool,
    /// Read the batch script's text from the environment
    /// (`FLUXGATE_BATCH_SCRIPT`), where `batch` puts it: a command line is
    /// every user's to read (`ps`), a process's environment only its
    /// owner's.
    #[arg(long)]
    script_from_env: bool,
    /// The script's name, for its $0 and error messages.
    #[arg(long, value_name = "NAME", default_value = "script")]
    script_name: String,
    /// Watch the parent process instead: when it dies without tearing the
    /// services down (SIGKILL after the kill timeout), stop them for it.
    #[arg(long)]
    watchdog: bool,
    /// With --watchdog: the instance's state directory, removed once the
    /// services it stopped are gone.
    #[arg(long, value_name = "DIR", requires = "watchdog")]
    statedir: Option<PathBuf>,
    /// Arguments of the script.
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<String>,
}

/// The job's R as the child instance sees it: ranks (and core ids)
/// renumbered from 0 in rank order (RFC 20), times kept.
pub fn child_resources(r: &ResourceSet) -> ResourceSet {
    let mut child = r.clone();
    child.remap();
    child.set_slot_count(None);
    child
}

/// Wait until job `id` has a `uri` memo; fails if the job ends first.
async fn wait_uri(inst: &mut Instance, id: JobId) -> anyhow::Result<String> {
    let mut stream = attach::watch(inst, id, "eventlog", true, false).await?;
    while let Some(line) = stream.message().await.map_err(client::status_error)? {
        let ev = client::parse_event(&line.line).context("bad eventlog line")?;
        match ev.name.as_str() {
            "memo" => {
                if let Some(uri) = ev.ctx("uri").and_then(Value::as_str) {
                    return Ok(uri.to_string());
                }
            }
            "finish" | "clean" => bail!("the job ended"),
            "exception" if ev.ctx_i64("severity").unwrap_or(0) == 0 => {
                bail!(
                    "job exception: {}",
                    ev.ctx_str("note").unwrap_or("no reason given")
                )
            }
            _ => {}
        }
    }
    bail!("the job's eventlog ended before the instance started")
}

/// The job's R from the enclosing instance.
async fn job_r(parent: &mut Instance, id: JobId) -> anyhow::Result<ResourceSet> {
    let info = parent
        .jobs
        .info(pb::InfoRequest {
            id: id.as_u64(),
            keys: vec!["R".into()],
            ..Default::default()
        })
        .await
        .map_err(client::status_error)?
        .into_inner();
    let text = info
        .values
        .get("R")
        .filter(|t| !t.is_empty())
        .context("the enclosing instance has no R for this job")?;
    ResourceSet::parse(text).context("the job's R from the enclosing instance is unreadable")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_resources_are_reranked_from_zero() {
        let r = ResourceSet::parse(
            r#"{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"2-3"}},{"rank":"5","children":{"core":"0-1"}}],"nodelist":["n3","n5"],"starttime":10,"expiration":100}}"#,
        )
        .unwrap();
        let c = child_resources(&r);
        assert_eq!(c.ranks().to_string(), "0-1");
        assert_eq!(c.node(0).unwrap().hostname(), Some("n3"));
        assert_eq!(c.node(0).unwrap().cores().to_string(), "0-1");
        assert_eq!(c.expiration(), Some(100.0));
    }
}

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

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::{JobId, ResourceSet};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::client::{self, Instance};
use crate::cmd::attach;
use crate::cmd::submit::{JobOpts, submit_one};
use crate::services::{
    Services, Signals, log_file, read_uri, service_binary, up_count, wait_ready,
};

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
    /// Do not print the job id.
    #[arg(long)]
    quiet: bool,
    /// The batch script (run by the new instance's rank 0) and its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "SCRIPT")]
    script: Vec<String>,
}

/// Arguments of `fluxgate alloc`.
#[derive(Debug, clap::Args)]
pub struct AllocArgs {
    #[command(flatten)]
    opts: JobOpts,
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

/// Arguments of the hidden `fluxgate instance`, one task per node of a
/// batch or alloc job.
#[derive(Debug, clap::Args)]
pub struct InstanceArgs {
    /// The batch script's text (rank 0 runs it); without it rank 0 waits
    /// for SIGTERM, as an alloc job does.
    #[arg(long, value_name = "TEXT")]
    script: Option<String>,
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

/// Run `fluxgate batch`: submit the instance job and print its id.
pub fn run_batch(args: BatchArgs) -> anyhow::Result<ExitCode> {
    let (text, name, script_args) = if args.wrap {
        let quoted: Vec<String> = args.script.iter().map(|a| shell_quote(a)).collect();
        (
            format!("#!/bin/sh\n{}\n", quoted.join(" ")),
            "wrap".to_string(),
            Vec::new(),
        )
    } else {
        let (path, rest) = args
            .script
            .split_first()
            .context("a batch script is required")?;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read batch script {path}"))?;
        let name = Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.clone());
        (text, name, rest.to_vec())
    };
    let exe = std::env::current_exe().context("cannot find the fluxgate executable")?;
    let mut command = vec![
        exe.to_string_lossy().into_owned(),
        "instance".into(),
        format!("--script={text}"),
        format!("--script-name={name}"),
        "--".into(),
    ];
    command.extend(script_args);
    let uri = client::uri()?;
    let req = args.opts.instance_request(&command, &uri, &name)?;
    client::block_on(async {
        let mut inst = client::connect_to(&uri).await?;
        let id = submit_one(&mut inst, req).await?;
        if !args.quiet {
            println!("{}", client::f58(id));
        }
        Ok(ExitCode::SUCCESS)
    })?
}

/// Run `fluxgate alloc`: submit an instance job, wait for the instance,
/// run CMD (default $SHELL) in it, then end the job; CMD's status is ours.
pub fn run_alloc(args: AllocArgs) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find the fluxgate executable")?;
    let command = vec![exe.to_string_lossy().into_owned(), "instance".into()];
    let uri = client::uri()?;
    let req = args.opts.instance_request(&command, &uri, "alloc")?;
    let rt = client::runtime()?;
    let mut signals = {
        let _guard = rt.enter();
        Signals::new()?
    };
    rt.block_on(async {
        let mut inst = client::connect_to(&uri).await?;
        let id = submit_one(&mut inst, req).await?;
        let ended = job_ended(inst.clone(), id);
        let mut watcher = inst.clone();
        let started = async {
            let uri = wait_uri(&mut watcher, id).await?;
            // The shell gets the instance once all its nodes are up.
            let size = job_r(&mut watcher, id).await?.nnodes() as u64;
            let deadline = Instant::now() + START_TIMEOUT;
            while up_count(&uri, &client::Credentials::default())
                .await
                .unwrap_or(0)
                < size
            {
                if Instant::now() > deadline {
                    bail!("its nodes did not come up within {START_TIMEOUT:?}");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(uri)
        };
        let child = tokio::select! {
            r = started => r,
            why = ended => Err(anyhow!("the job ended: {why}")),
        };
        let child = match child {
            Ok(u) => u,
            Err(e) => {
                let outcome = attach::outcome(&mut inst, id).await.ok();
                let why = outcome.and_then(|o| o.message).unwrap_or_default();
                bail!(
                    "{}: the instance did not start: {e:#} {why}",
                    client::f58(id)
                );
            }
        };
        // Should the job end first (cancel, time limit), CMD hears a hangup,
        // as a shell inside the job would.
        let ended = Box::pin(job_ended(inst.clone(), id));
        let code = run_with_uri(&args.command, &child, &mut signals, Some(ended)).await?;
        // The instance's tasks end cleanly on SIGTERM: the job completes.
        let _ = inst
            .jobs
            .kill(pb::KillRequest {
                id: id.as_u64(),
                signum: Signal::SIGTERM as i32,
            })
            .await;
        let outcome = attach::outcome(&mut inst, id).await?;
        if let Some(msg) = outcome.message {
            eprintln!("{}: {msg}", client::f58(id));
        }
        Ok(code)
    })
}

/// Run `fluxgate proxy ID [CMD]`.
pub fn run_proxy(args: ProxyArgs) -> anyhow::Result<ExitCode> {
    let rt = client::runtime()?;
    let mut signals = {
        let _guard = rt.enter();
        Signals::new()?
    };
    rt.block_on(async {
        let uri = resolve(&client::uri()?, &args.jobid).await?;
        run_with_uri(&args.command, &uri, &mut signals, None).await
    })
}

/// Arguments of `fluxgate uri`.
#[derive(Debug, clap::Args)]
pub struct UriArgs {
    /// The job whose instance to name (`ID/ID2/...` for nested instances).
    jobid: String,
}

/// Run `fluxgate uri ID`: print the URI of the instance job ID runs.
pub fn run_uri(args: UriArgs) -> anyhow::Result<ExitCode> {
    client::block_on(async {
        println!("{}", resolve(&client::uri()?, &args.jobid).await?);
        Ok(ExitCode::SUCCESS)
    })?
}

/// The URI of the instance that job `path` runs, from the instance at
/// `uri`; `ID/ID2/...` descends into nested instances, as flux's resolver.
pub async fn resolve(uri: &str, path: &str) -> anyhow::Result<String> {
    let mut cur = uri.to_string();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let id = client::parse_jobid(part)?;
        let mut inst = client::connect_to(&cur).await?;
        cur = memo_uri(&mut inst, id).await?.ok_or_else(|| {
            anyhow!(
                "job {} is not an instance (it has no uri memo)",
                client::f58(id)
            )
        })?;
    }
    Ok(cur)
}

/// The `uri` memo of job `id`, as its eventlog holds it now.
pub async fn memo_uri(inst: &mut Instance, id: JobId) -> anyhow::Result<Option<String>> {
    let info = inst
        .jobs
        .info(pb::InfoRequest {
            id: id.as_u64(),
            keys: vec!["eventlog".into()],
        })
        .await
        .map_err(client::status_error)?
        .into_inner();
    let text = info.values.get("eventlog").cloned().unwrap_or_default();
    let mut uri = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Ok(ev) = client::parse_event(line)
            && ev.name == "memo"
            && let Some(v) = ev.ctx("uri")
        {
            uri = v.as_str().map(str::to_string);
        }
    }
    Ok(uri)
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

/// Run `command` (default $SHELL) with FLUXGATE_URI set; SIGTERM and SIGHUP
/// are passed on, SIGINT is left to it (the terminal sent it there too).
async fn run_with_uri(
    command: &[String],
    uri: &str,
    signals: &mut Signals,
    mut ended: Option<Pin<Box<dyn Future<Output = String>>>>,
) -> anyhow::Result<ExitCode> {
    let (prog, rest) = match command.split_first() {
        Some((p, r)) => (p.clone(), r.to_vec()),
        None => (
            std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into()),
            Vec::new(),
        ),
    };
    let mut child = tokio::process::Command::new(&prog)
        .args(&rest)
        .env(client::URI_ENV, uri)
        .spawn()
        .with_context(|| format!("cannot run {prog}"))?;
    let pid = child.id().map(|p| Pid::from_raw(p as i32));
    let status = loop {
        let job_end = async {
            match ended.as_mut() {
                Some(f) => f.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            s = child.wait() => break s?,
            why = job_end => {
                eprintln!("fluxgate: the instance's job ended: {why}");
                ended = None;
                forward(pid, Signal::SIGHUP);
            }
            _ = signals.int.recv() => {}
            _ = signals.term.recv() => forward(pid, Signal::SIGTERM),
            _ = signals.hup.recv() => forward(pid, Signal::SIGHUP),
        }
    };
    Ok(exit_code(status))
}

/// Resolves when job `id` finishes or gets a fatal exception, with why.
async fn job_ended(mut inst: Instance, id: JobId) -> String {
    let Ok(mut stream) = attach::watch(&mut inst, id, "eventlog", true, false).await else {
        return std::future::pending().await;
    };
    while let Ok(Some(line)) = stream.message().await {
        let Ok(ev) = client::parse_event(&line.line) else {
            continue;
        };
        match ev.name.as_str() {
            "exception" if ev.ctx_i64("severity").unwrap_or(0) == 0 => {
                let ty = ev.ctx_str("type").unwrap_or("exception");
                let note = ev.ctx_str("note").unwrap_or("");
                return format!("job.exception type={ty} {note}").trim().to_string();
            }
            "finish" => return "its tasks exited".into(),
            _ => {}
        }
    }
    // The stream broke: say nothing rather than hang up on a guess.
    std::future::pending().await
}

fn forward(pid: Option<Pid>, sig: Signal) {
    if let Some(p) = pid {
        let _ = nix::sys::signal::kill(p, sig);
    }
}

fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// `s` quoted for /bin/sh.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The signals an instance task handles: those of [`Signals`], and SIGALRM,
/// which the exec service sends when the job's time limit is reached (as
/// flux's job shell gets it), so that a timeout tears the instance down as
/// a cancel does.
#[derive(Debug)]
struct TaskSignals {
    base: Signals,
    alrm: tokio::signal::unix::Signal,
}

impl TaskSignals {
    /// Install the handlers; needs a runtime.
    fn new() -> anyhow::Result<TaskSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(TaskSignals {
            base: Signals::new()?,
            alrm: signal(SignalKind::alarm()).context("SIGALRM handler")?,
        })
    }

    /// The name of the next signal received.
    async fn any(&mut self) -> &'static str {
        tokio::select! {
            s = self.base.any() => s,
            _ = self.alrm.recv() => "SIGALRM",
        }
    }
}

/// Run one task of an instance job (the hidden `fluxgate instance`).
pub fn run_instance(args: InstanceArgs) -> anyhow::Result<ExitCode> {
    if args.watchdog {
        return client::block_on(watchdog(args.statedir.as_deref()))?;
    }
    let parent_uri = client::uri()?;
    let id = client::parse_jobid(
        &std::env::var(JOB_ID_ENV).with_context(|| format!("{JOB_ID_ENV} is not set"))?,
    )?;
    let rank: u32 = match std::env::var(TASK_RANK_ENV) {
        Ok(r) => r
            .parse()
            .with_context(|| format!("{TASK_RANK_ENV}={r:?} is not a rank"))?,
        Err(_) => 0,
    };
    let rt = client::runtime()?;
    let mut signals = {
        let _guard = rt.enter();
        TaskSignals::new()?
    };
    rt.block_on(async {
        let mut parent = client::connect_to(&parent_uri).await?;
        let r = job_r(&mut parent, id).await?;
        let child_r = child_resources(&r);
        let dir = tempfile::Builder::new()
            .prefix("fluxgate-instance-")
            .tempdir()
            .context("cannot create the instance's state directory")?;
        let statedir = dir.path().to_path_buf();
        let mut services = Services::new(SERVICE_KILL_TIMEOUT, Some(dir));
        // First, so that it leads the services' process group.
        let mut wd = Command::new(std::env::current_exe().context("cannot find fluxgate")?);
        wd.args(["instance", "--watchdog"])
            .arg("--statedir")
            .arg(&statedir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        services
            .spawn(wd)
            .context("cannot start the instance watchdog")?;
        if rank == 0 {
            let r = leader(
                &args,
                &mut parent,
                id,
                &child_r,
                &statedir,
                &mut services,
                &mut signals,
            )
            .await;
            if let Err(e) = &r {
                // The other ranks wait for an instance that will not come:
                // end the job, with the reason, rather than leave it hanging.
                let _ = parent
                    .jobs
                    .raise_exception(pb::RaiseExceptionRequest {
                        id: id.as_u64(),
                        r#type: "exec".into(),
                        severity: 0,
                        note: format!("instance failed: {e:#}"),
                    })
                    .await;
            }
            r
        } else {
            follower(
                &mut parent,
                id,
                rank,
                &child_r,
                &statedir,
                &mut services,
                &mut signals,
            )
            .await
        }
    })
}

/// The services' watchdog: it lives in their process group and stops them
/// if the task that started them dies without doing so (SIGKILL once the
/// parent's kill timeout passed), so nothing outlives the job. An orderly
/// teardown (SIGTERM to the group while the task lives) ends it at once.
async fn watchdog(statedir: Option<&Path>) -> anyhow::Result<ExitCode> {
    use nix::unistd::{getpgrp, getppid};
    use tokio::signal::unix::{SignalKind, signal};
    let task = getppid();
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    loop {
        tokio::select! {
            _ = term.recv() => {
                if getppid() == task {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                if getppid() != task {
                    break;
                }
            }
        }
    }
    let group = getpgrp();
    let _ = nix::sys::signal::killpg(group, Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + SERVICE_KILL_TIMEOUT;
    // Our own SIGTERM arrives too; it is not a reason to stop early.
    while tokio::time::Instant::now() < deadline {
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
    if let Some(dir) = statedir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
    Ok(ExitCode::SUCCESS)
}

/// The job's R from the enclosing instance.
async fn job_r(parent: &mut Instance, id: JobId) -> anyhow::Result<ResourceSet> {
    let info = parent
        .jobs
        .info(pb::InfoRequest {
            id: id.as_u64(),
            keys: vec!["R".into()],
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

/// A service command without the `FLUXGATE_*` settings of the task's
/// environment (which came from the submitter), so only our flags count.
fn service_command(name: &str) -> Command {
    let mut cmd = Command::new(service_binary(name));
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("FLUXGATE_") && k != "FLUXGATE_LOG" {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// Start the exec service of child rank `rank`, joining `uri`.
fn spawn_exec(
    services: &mut Services,
    uri: &str,
    r: &ResourceSet,
    rank: u32,
    statedir: &Path,
) -> anyhow::Result<()> {
    let node = r
        .node(rank)
        .with_context(|| format!("rank {rank} is not in the job's R"))?;
    let mut ex = service_command("fluxgate-exec");
    ex.arg("--job-manager")
        .arg(uri)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--kill-timeout")
        .arg("1")
        .stdout(Stdio::null())
        .stderr(log_file(statedir, &format!("exec-{rank}.log"))?);
    if let Some(h) = node.hostname() {
        ex.arg("--hostname").arg(h);
    }
    if !node.cores().is_empty() {
        ex.arg("--cores").arg(node.cores().to_string());
    }
    if !node.gpus().is_empty() {
        ex.arg("--gpus").arg(node.gpus().to_string());
    }
    services.spawn(ex).context(
        "cannot start fluxgate-exec (build it with `cargo build --workspace` or put it on PATH)",
    )?;
    Ok(())
}

/// Rank 0: the child job manager, the URI memo, rank 0's exec service, the
/// script, the expiration follower, and the teardown.
async fn leader(
    args: &InstanceArgs,
    parent: &mut Instance,
    id: JobId,
    r: &ResourceSet,
    statedir: &Path,
    services: &mut Services,
    signals: &mut TaskSignals,
) -> anyhow::Result<ExitCode> {
    let r_path = statedir.join("R.json");
    std::fs::write(&r_path, r.to_json_string())
        .with_context(|| format!("cannot write {}", r_path.display()))?;
    let jm_log = statedir.join("job-manager.log");
    let mut jm = service_command("fluxgate-job-manager");
    jm.arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--statedir")
        .arg(statedir)
        .arg("--resource-path")
        .arg(&r_path)
        .arg("--set")
        .arg("resource.method=job-info")
        .stdout(Stdio::piped())
        .stderr(log_file(statedir, "job-manager.log")?);
    let child = services
        .spawn(jm)
        .context("cannot start fluxgate-job-manager (build it with `cargo build --workspace` or put it on PATH)")?;
    let stdout = child.stdout.take().context("job manager stdout")?;
    // A signal while starting is the job ending early (cancel, time limit,
    // or alloc's command already done): an orderly end, not a failure.
    let uri = tokio::select! {
        r = read_uri(stdout, &jm_log, START_TIMEOUT) => r?,
        s = signals.any() => {
            services.shutdown().await;
            return Ok(ended_by(s, args.script.is_some()));
        }
    };
    parent
        .jobs
        .memo(pb::MemoRequest {
            id: id.as_u64(),
            memo: json!({ "uri": uri }).to_string(),
            volatile: false,
        })
        .await
        .map_err(client::status_error)
        .context("cannot record the instance's uri on its job")?;
    spawn_exec(services, &uri, r, 0, statedir)?;
    let size = r.nnodes() as u32;
    // The child instance runs open: its clients need no credentials.
    let open = client::Credentials::default();
    tokio::select! {
        r = wait_ready(&uri, &open, size, START_TIMEOUT, services) => r?,
        s = signals.any() => {
            drain_child(&uri).await;
            services.shutdown().await;
            return Ok(ended_by(s, args.script.is_some()));
        }
    }
    let follow = tokio::spawn(follow_expiration(parent.clone(), id, uri.clone()));
    let code = match &args.script {
        Some(text) => run_script(text, args, &uri, statedir, signals).await?,
        None => {
            // alloc: the instance lives until its job is told to end.
            signals.any().await;
            ExitCode::SUCCESS
        }
    };
    follow.abort();
    drain_child(&uri).await;
    services.shutdown().await;
    Ok(code)
}

/// The exit code of an instance task ended by signal `name`: a batch
/// script killed by it would give 128+signal; alloc ends by SIGTERM.
fn ended_by(name: &str, batch: bool) -> ExitCode {
    if !batch {
        return ExitCode::SUCCESS;
    }
    let signal = match name {
        "SIGINT" => Signal::SIGINT,
        "SIGHUP" => Signal::SIGHUP,
        "SIGALRM" => Signal::SIGALRM,
        _ => Signal::SIGTERM,
    };
    ExitCode::from(128 + signal as u8)
}

/// Run the batch script with the child's URI; SIGTERM (parent cancel) or
/// SIGALRM (time limit) ends it, and answers 128+signal as a shell would.
async fn run_script(
    text: &str,
    args: &InstanceArgs,
    uri: &str,
    statedir: &Path,
    signals: &mut TaskSignals,
) -> anyhow::Result<ExitCode> {
    // In a directory of its own, under its own name when that is a plain
    // file name, so that $0 reads as the user wrote it.
    let dir = statedir.join("script");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path: PathBuf = dir.join(&args.script_name);
    let path = if path.parent() == Some(dir.as_path()) {
        path
    } else {
        dir.join("script")
    };
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make {} executable", path.display()))?;
    let mut cmd = if text.starts_with("#!") {
        tokio::process::Command::new(&path)
    } else {
        let mut c = tokio::process::Command::new("/bin/sh");
        c.arg(&path);
        c
    };
    let mut child = cmd
        .args(&args.args)
        .env(client::URI_ENV, uri)
        .spawn()
        .with_context(|| format!("cannot run the batch script {}", args.script_name))?;
    let pid = child.id().map(|p| Pid::from_raw(p as i32));
    let status = loop {
        tokio::select! {
            s = child.wait() => break s?,
            _ = signals.base.int.recv() => forward(pid, Signal::SIGINT),
            _ = signals.base.term.recv() => forward(pid, Signal::SIGTERM),
            _ = signals.base.hup.recv() => forward(pid, Signal::SIGHUP),
            _ = signals.alrm.recv() => forward(pid, Signal::SIGALRM),
        }
    };
    Ok(exit_code(status))
}

/// Follow the parent job's eventlog: each `resource-update` there becomes
/// the child's own `resource-update` (RFC 44), which the child's scheduler
/// and acquirer hear as the new `expiration` (RFC 28).
async fn follow_expiration(mut parent: Instance, id: JobId, uri: String) {
    let result: anyhow::Result<()> = async {
        let mut child = client::connect_to(&uri).await?;
        let mut stream = attach::watch(&mut parent, id, "eventlog", true, false).await?;
        while let Some(line) = stream.message().await.map_err(client::status_error)? {
            let Ok(ev) = client::parse_event(&line.line) else {
                continue;
            };
            if ev.name != "resource-update" {
                continue;
            }
            let Some(expiration) = ev.ctx("expiration").and_then(Value::as_f64) else {
                continue;
            };
            child
                .resource
                .update(pb::ResourceUpdateRequest { expiration })
                .await
                .map_err(client::status_error)?;
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        eprintln!("fluxgate-instance: stopped following the job's expiration: {e:#}");
    }
}

/// Cancel every job still active in the child, so each ends with an
/// exception, and wait a little for them to become inactive.
async fn drain_child(uri: &str) {
    let Ok(mut child) = client::connect_to(uri).await else {
        return;
    };
    let active = |child: &mut Instance| {
        let mut jobs = child.jobs.clone();
        async move {
            jobs.list(pb::ListRequest::default())
                .await
                .map(|r| r.into_inner().jobs)
        }
    };
    let Ok(jobs) = active(&mut child).await else {
        return;
    };
    for j in &jobs {
        let _ = child
            .jobs
            .cancel(pb::CancelRequest {
                id: j.id,
                note: "the enclosing instance is shutting down".into(),
            })
            .await;
    }
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while Instant::now() < deadline {
        match active(&mut child).await {
            Ok(jobs) if jobs.is_empty() => return,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(_) => return,
        }
    }
}

/// Ranks > 0: find the child's URI in the parent job's memo, start this
/// node's exec service, and keep it until the child goes away or SIGTERM.
async fn follower(
    parent: &mut Instance,
    id: JobId,
    rank: u32,
    r: &ResourceSet,
    statedir: &Path,
    services: &mut Services,
    signals: &mut TaskSignals,
) -> anyhow::Result<ExitCode> {
    let uri = tokio::select! {
        u = wait_uri(parent, id) => u?,
        _ = signals.any() => return Ok(ExitCode::SUCCESS),
    };
    spawn_exec(services, &uri, r, rank, statedir)?;
    // The child job manager's end (rank 0 stopped it) ends this node too.
    let mut misses = 0;
    loop {
        tokio::select! {
            _ = signals.any() => break,
            _ = tokio::time::sleep(Duration::from_millis(300)) => {
                if services.exited().is_some() {
                    break;
                }
                match up_count(&uri, &client::Credentials::default()).await {
                    Ok(_) => misses = 0,
                    Err(_) => misses += 1,
                }
                if misses >= 2 {
                    break;
                }
            }
        }
    }
    services.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("abc"), "abc");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

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

//! One task of an instance job: the child instance's services on this
//! node, and on rank 0 the child job manager and the script.

use super::*;
use crate::cmd::jobs::list_all;

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
pub fn run_instance(mut args: InstanceArgs) -> anyhow::Result<ExitCode> {
    if args.script_from_env {
        args.script = Some(
            std::env::var(SCRIPT_ENV)
                .with_context(|| format!("--script-from-env: {SCRIPT_ENV} is not set"))?,
        );
    }
    if args.watchdog {
        return client::block_on(watchdog(args.statedir.as_deref()))?;
    }
    let parent_uri = client::uri()?;
    let (id, rank) = job_and_rank()?;
    let rt = client::runtime()?;
    if (args.script_from_jobspec || args.conf_from_jobspec) && rank == 0 {
        let files = rt.block_on(jobspec_files(&parent_uri, id))?;
        if args.script_from_jobspec {
            args.script = Some(script_of(&files)?);
        }
        if args.conf_from_jobspec {
            let file = files
                .get("conf.json")
                .context("the jobspec has no files.conf.json")?;
            args.conf_toml = Some(super::conf::toml_of_fileref(file)?);
        }
    }
    let mut signals = {
        let _guard = rt.enter();
        TaskSignals::new()?
    };
    let key = ChildKey::from_env();
    rt.block_on(async {
        let mut parent = client::connect_to(&parent_uri).await?;
        let r = job_r(&mut parent, id).await?;
        let child_r = child_resources(&r);
        let dir = tempfile::Builder::new()
            .prefix("fluxgate-instance-")
            .tempdir()
            .context("cannot create the instance's state directory")?;
        let statedir = dir.path().to_path_buf();
        // The services get only the settings of their command lines, not
        // the submitter's FLUXGATE_* environment.
        let mut services = Launcher::new(&statedir, SERVICE_KILL_TIMEOUT, Some(dir)).clean_env();
        spawn_watchdog(&mut services, &statedir)?;
        if rank == 0 {
            let r = leader(
                &args,
                &mut parent,
                id,
                &child_r,
                &key,
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
                &key,
                &statedir,
                &mut services,
                &mut signals,
            )
            .await
        }
    })
}

/// The job this task belongs to and its rank in it, from the environment
/// the exec service gives every task.
fn job_and_rank() -> anyhow::Result<(JobId, u32)> {
    let id = client::parse_jobid(
        &std::env::var(JOB_ID_ENV).with_context(|| format!("{JOB_ID_ENV} is not set"))?,
    )?;
    let rank = match std::env::var(TASK_RANK_ENV) {
        Ok(r) => r
            .parse()
            .with_context(|| format!("{TASK_RANK_ENV}={r:?} is not a rank"))?,
        Err(_) => 0,
    };
    Ok((id, rank))
}

/// Start the services' [`watchdog`] before any service, so that it leads
/// their process group.
fn spawn_watchdog(services: &mut Launcher, statedir: &Path) -> anyhow::Result<()> {
    let mut wd = Command::new(std::env::current_exe().context("cannot find fluxgate")?);
    wd.args(["instance", "--watchdog"])
        .arg("--statedir")
        .arg(statedir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    services
        .services()
        .spawn(wd)
        .context("cannot start the instance watchdog")?;
    Ok(())
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

/// Start the exec service of child rank `rank`, joining `uri` with the
/// node credential in `node_token`.
fn spawn_exec(
    services: &mut Launcher,
    uri: &str,
    r: &ResourceSet,
    rank: u32,
    node_token: &Path,
) -> anyhow::Result<()> {
    let node = r
        .node(rank)
        .with_context(|| format!("rank {rank} is not in the job's R"))?;
    // A job of root's makes an instance owned by root, whose jobs are root's
    // (as `fluxgate start` run by root).
    // The enclosing job's cgroup already holds the whole instance and
    // limits it: its jobs are contained there by process groups.
    let mut ex = Exec::new(uri)
        .kill_timeout(1.0)
        .node_token_file(node_token)
        .allow_root_jobs(nix::unistd::geteuid().is_root())
        .env("FLUXGATE_CGROUP_MODE", "off");
    if let Some(h) = node.hostname() {
        ex = ex.hostname(h);
    }
    if !node.cores().is_empty() {
        ex = ex.cores(Cores::Ids(node.cores().to_string()));
    }
    if !node.gpus().is_empty() {
        ex = ex.gpus(&node.gpus().to_string());
    }
    services.exec(&ex, &format!("exec-{rank}.log"))?;
    Ok(())
}

/// Rank 0: the child job manager, the URI memo, rank 0's exec service, the
/// script, the expiration follower, and the teardown.
#[allow(clippy::too_many_arguments)]
async fn leader(
    args: &InstanceArgs,
    parent: &mut Instance,
    id: JobId,
    r: &ResourceSet,
    key: &ChildKey,
    statedir: &Path,
    services: &mut Launcher,
    signals: &mut TaskSignals,
) -> anyhow::Result<ExitCode> {
    let r_path = statedir.join("R.json");
    fluxgate_os::private::write_file(&r_path, r.to_json_string().as_bytes())?;
    key.install(statedir)?;
    let mut jm = JobManager::new(statedir);
    if let Some(toml) = &args.conf_toml {
        // `--conf`: the child's configuration file; the settings below,
        // which make it a child instance, still win.
        let path = statedir.join("conf.toml");
        fluxgate_os::private::write_file(&path, toml.as_bytes())?;
        jm = jm.config(&path);
    }
    let jm = jm
        .resource_path(&r_path)
        .set("resource.method", "job-info")
        .auth(true);
    // A signal while starting is the job ending early (cancel, time limit,
    // or alloc's command already done): an orderly end, not a failure.
    let started = tokio::select! {
        r = services.job_manager(&jm, "job-manager.log", START_TIMEOUT) => Ok(r?),
        s = signals.any() => Err(s),
    };
    let uri = match started {
        Ok((_, uri)) => uri,
        Err(s) => {
            services.shutdown().await;
            return Ok(ended_by(s, args.script.is_some() || args.alloc));
        }
    };
    // Before the memo: whoever finds the URI there finds the credential too.
    let published = access::publish(key, &uri, statedir)?;
    let code = serve_child(args, parent, id, r, &uri, statedir, services, signals).await;
    access::unpublish(&published);
    code
}

/// Rank 0 once the child serves: the URI memo, rank 0's exec service, the
/// script (or alloc's wait), the expiration follower, and the teardown.
#[allow(clippy::too_many_arguments)]
async fn serve_child(
    args: &InstanceArgs,
    parent: &mut Instance,
    id: JobId,
    r: &ResourceSet,
    uri: &str,
    statedir: &Path,
    services: &mut Launcher,
    signals: &mut TaskSignals,
) -> anyhow::Result<ExitCode> {
    let uri = uri.to_string();
    let owner_token = std::fs::read_to_string(statedir.join("owner.token"))
        .context("cannot read the instance's owner token")?
        .trim()
        .to_string();
    let creds = client::Credentials::default().with_token(&owner_token)?;
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
    spawn_exec(services, &uri, r, 0, &statedir.join("node.token"))?;
    let size = r.nnodes() as u32;
    tokio::select! {
        r = wait_ready(&uri, &creds, size, START_TIMEOUT, services.services()) => r?,
        s = signals.any() => {
            drain_child(&uri, &creds).await;
            services.shutdown().await;
            return Ok(ended_by(s, args.script.is_some() || args.alloc));
        }
    }
    let follow = tokio::spawn(follow_expiration(
        parent.clone(),
        id,
        uri.clone(),
        creds.clone(),
    ));
    let code = match &args.script {
        Some(text) => run_script(text, args, &uri, &owner_token, statedir, signals).await?,
        None if args.alloc => run_initial(&args.args, &uri, &owner_token, signals).await?,
        None => {
            // alloc: the instance lives until its job is told to end.
            signals.any().await;
            ExitCode::SUCCESS
        }
    };
    follow.abort();
    drain_child(&uri, &creds).await;
    services.shutdown().await;
    Ok(code)
}

/// The files (RFC 37) of job `id`'s jobspec, read from the enclosing
/// instance.
async fn jobspec_files(parent_uri: &str, id: JobId) -> anyhow::Result<serde_json::Value> {
    let mut parent = client::connect_to(parent_uri).await?;
    let info = parent
        .jobs
        .info(pb::InfoRequest {
            id: id.as_u64(),
            keys: vec!["jobspec".into()],
            ..Default::default()
        })
        .await
        .map_err(client::status_error)?
        .into_inner();
    let spec: serde_json::Value = info
        .values
        .get("jobspec")
        .and_then(|t| serde_json::from_str(t).ok())
        .context("the enclosing instance has no readable jobspec for this job")?;
    spec.pointer("/attributes/system/files")
        .cloned()
        .context("the jobspec has no files")
}

/// The batch script: `files.script`.
fn script_of(files: &serde_json::Value) -> anyhow::Result<String> {
    let file = files
        .get("script")
        .context("the jobspec has no files.script")?;
    let bytes =
        fluxgate_shared::jobspec::fileref_data(file).map_err(|e| anyhow!("files.script: {e}"))?;
    String::from_utf8(bytes).context("files.script is not UTF-8 text")
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

/// Run the batch script with the child's URI and its owner's token (in
/// place of the job's credential, which is for the enclosing instance);
/// SIGTERM (parent cancel) or SIGALRM (time limit) ends it, and answers
/// 128+signal as a shell would.
async fn run_script(
    text: &str,
    args: &InstanceArgs,
    uri: &str,
    token: &str,
    statedir: &Path,
    signals: &mut TaskSignals,
) -> anyhow::Result<ExitCode> {
    // In a directory of its own, under its own name when that is a plain
    // file name, so that $0 reads as the user wrote it.
    let dir = statedir.join("script");
    fluxgate_os::private::create_dir(&dir)?;
    let path: PathBuf = dir.join(&args.script_name);
    let path = if path.parent() == Some(dir.as_path()) {
        path
    } else {
        dir.join("script")
    };
    fluxgate_os::private::write_file_mode(&path, text.as_bytes(), 0o700)?;
    let mut cmd = if text.starts_with("#!") {
        tokio::process::Command::new(&path)
    } else {
        let mut c = tokio::process::Command::new("/bin/sh");
        c.arg(&path);
        c
    };
    let child = cmd
        .args(&args.args)
        .env(client::URI_ENV, uri)
        .env(client::TOKEN_ENV, token)
        // The script is its file now; its jobs must not carry it on.
        .env_remove(SCRIPT_ENV)
        .spawn()
        .with_context(|| format!("cannot run the batch script {}", args.script_name))?;
    wait_forwarding(child, signals).await
}

/// alloc's initial program: `command` (default $SHELL) with the child's URI
/// and its owner's token, on this task's stdio, as flux's broker runs its
/// initial program; its exit code is the job's.
async fn run_initial(
    command: &[String],
    uri: &str,
    token: &str,
    signals: &mut TaskSignals,
) -> anyhow::Result<ExitCode> {
    let (prog, rest) = command_or_shell(command);
    let child = tokio::process::Command::new(&prog)
        .args(&rest)
        .env(client::URI_ENV, uri)
        .env(client::TOKEN_ENV, token)
        .spawn()
        .with_context(|| format!("cannot run {prog}"))?;
    wait_forwarding(child, signals).await
}

/// Wait for `child`, passing on the signals the task gets; its exit code
/// (128+signal when a signal ended it, as a shell reports).
async fn wait_forwarding(
    mut child: tokio::process::Child,
    signals: &mut TaskSignals,
) -> anyhow::Result<ExitCode> {
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
async fn follow_expiration(
    mut parent: Instance,
    id: JobId,
    uri: String,
    creds: client::Credentials,
) {
    let result: anyhow::Result<()> = async {
        let mut child = client::connect_with(&uri, &creds).await?;
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
async fn drain_child(uri: &str, creds: &client::Credentials) {
    let Ok(mut child) = client::connect_with(uri, creds).await else {
        return;
    };
    let Ok(jobs) = list_all(&mut child, pb::ListRequest::default()).await else {
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
        match list_all(&mut child, pb::ListRequest::default()).await {
            Ok(jobs) if jobs.is_empty() => return,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(_) => return,
        }
    }
}

/// Ranks > 0: find the child's URI in the parent job's memo, start this
/// node's exec service, and keep it until the child goes away or SIGTERM.
#[allow(clippy::too_many_arguments)]
async fn follower(
    parent: &mut Instance,
    id: JobId,
    rank: u32,
    r: &ResourceSet,
    key: &ChildKey,
    statedir: &Path,
    services: &mut Launcher,
    signals: &mut TaskSignals,
) -> anyhow::Result<ExitCode> {
    let uri = tokio::select! {
        u = wait_uri(parent, id) => u?,
        _ = signals.any() => return Ok(ExitCode::SUCCESS),
    };
    let node_token = key.node_token_file(&uri, statedir)?;
    let creds = client::Credentials::default().with_token(&key.owner_token(&uri)?)?;
    spawn_exec(services, &uri, r, rank, &node_token)?;
    // The child job manager's end (rank 0 stopped it) ends this node too.
    let mut misses = 0;
    loop {
        tokio::select! {
            _ = signals.any() => break,
            _ = tokio::time::sleep(Duration::from_millis(300)) => {
                if services.exited().is_some() {
                    break;
                }
                match up_count(&uri, &creds).await {
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

//! `fluxgate start --size N [--statedir DIR] [-- CMD...]`: a whole instance on
//! this machine, as `flux start --test-size=N`.
//!
//! The job manager and N exec services run on loopback in one process group
//! of their own, so a terminal's Ctrl-C reaches only CMD and teardown is one
//! `killpg`. Node names are `<host>-0 .. <host>-(N-1)` passed as the job
//! manager's nodelist, so rank i is always `<host>-i`. CMD (default: an
//! interactive `$SHELL`) runs once every node is up, with `FLUXGATE_URI`
//! set; its exit status is ours. Teardown sends SIGTERM to the group, then
//! SIGKILL after `--kill-timeout`; it also runs on every error path (the
//! guard's `Drop`), so no service outlives the command.
//!
//! The instance admits only its owner, as flux's local connector does: the
//! job manager always requires credentials, and the owner's token
//! (`STATEDIR/owner.token`, 0600) goes to CMD alone, as `FLUXGATE_TOKEN`;
//! the exec services get the node credential (`STATEDIR/node.token`). Any
//! other local user reaches the loopback port but is refused
//! (UNAUTHENTICATED) without a token the owner made (`fluxgate token
//! create`). `--auth` is kept for scripts that pass it; it only has the
//! owner's token file named on standard error. The state directory is 0700
//! and every file in it (store, logs, key, tokens) 0600, created so.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use fluxgate_shared::Hostlist;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::client;
use crate::services::{
    Services, Signals, command_or_shell, log_file, read_uri, service_binary, wait_ready,
};

/// Arguments of `fluxgate start`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of nodes (exec services) to start.
    #[arg(short = 's', long = "size", alias = "test-size", value_name = "N")]
    size: u32,
    /// Keep the instance's state here (default: a temporary directory removed at exit).
    #[arg(long, value_name = "DIR")]
    statedir: Option<PathBuf>,
    /// Cores each node offers (default: the exec service's own discovery).
    #[arg(long, value_name = "N")]
    cores_per_node: Option<u32>,
    /// Seconds to wait for the instance to come up.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    start_timeout: f64,
    /// Seconds between SIGTERM and SIGKILL at teardown.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    kill_timeout: f64,
    /// Print the services' addresses and log locations on standard error.
    #[arg(short, long)]
    verbose: bool,
    /// Say where the owner's token is. Credentials are always required: the
    /// owner's token (STATEDIR/owner.token) is given to CMD as FLUXGATE_TOKEN;
    /// other users need one from `fluxgate token create`.
    #[arg(long)]
    auth: bool,
    /// Command to run inside the instance (default: $SHELL).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// The node names: `<host>-0 .. <host>-(N-1)`.
fn node_names(size: u32) -> anyhow::Result<Vec<String>> {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    // Keep only hostname characters so the names make a valid hostlist.
    let host: String = host
        .split('.')
        .next()
        .unwrap_or("localhost")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let host = if host.is_empty() { "node".into() } else { host };
    Ok((0..size).map(|i| format!("{host}-{i}")).collect())
}

/// Run `fluxgate start`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.size == 0 {
        bail!("--size must be at least 1");
    }
    let (statedir, tmpdir) = match &args.statedir {
        Some(d) => {
            fluxgate_os::private::create_dir(d).context("the state directory")?;
            (d.clone(), None)
        }
        None => {
            // tempfile makes the directory 0700.
            let t = tempfile::Builder::new()
                .prefix("fluxgate-")
                .tempdir()
                .context("cannot create a temporary statedir")?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    // Handlers first: from here on a Ctrl-C or SIGTERM must not kill us
    // before the services (in their own group) are torn down.
    let rt = client::runtime()?;
    let mut signals = {
        let _guard = rt.enter();
        Signals::new()?
    };
    let mut services = Services::new(Duration::from_secs_f64(args.kill_timeout.max(0.0)), tmpdir);
    let names = node_names(args.size)?;
    let mut nodelist = Hostlist::new();
    for n in &names {
        nodelist
            .push(n)
            .map_err(|e| anyhow!("node name {n:?}: {e}"))?;
    }

    let jm_log = statedir.join("job-manager.log");
    let mut jm = Command::new(service_binary("fluxgate-job-manager"));
    jm.arg("--set")
        .arg("auth.enabled=true")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--statedir")
        .arg(&statedir)
        .arg("--nodelist")
        .arg(nodelist.encode())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file(&statedir, "job-manager.log")?);
    let child = services
        .spawn(jm)
        .context("cannot start fluxgate-job-manager (build it with `cargo build --workspace` or put it on PATH)")?;
    let stdout = child.stdout.take().context("job manager stdout")?;
    let timeout = Duration::from_secs_f64(args.start_timeout.max(0.0));
    let uri = rt.block_on(async {
        tokio::select! {
            r = read_uri(stdout, &jm_log, timeout) => r,
            s = signals.any() => Err(anyhow!("interrupted by {s} during startup")),
        }
    })?;
    if args.verbose {
        eprintln!(
            "fluxgate-start: job manager at {uri}, logs in {}",
            statedir.display()
        );
    }
    // The job manager wrote the owner's token before it printed its URI.
    let token_path = statedir.join("owner.token");
    let owner_token = std::fs::read_to_string(&token_path)
        .with_context(|| format!("cannot read the owner's token {}", token_path.display()))?
        .trim()
        .to_string();
    if args.auth {
        eprintln!(
            "fluxgate-start: the owner's token is in {} (and CMD's FLUXGATE_TOKEN); \
             other users need one from `fluxgate token create`",
            token_path.display()
        );
    }
    let creds = client::Credentials::default().with_token(&owner_token)?;
    // Root starting an instance owns it: its jobs are the owner's.
    let root = nix::unistd::geteuid().is_root();

    for (i, name) in names.iter().enumerate() {
        let mut ex = Command::new(service_binary("fluxgate-exec"));
        ex.arg("--job-manager")
            .arg(&uri)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--hostname")
            .arg(name)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(&statedir, &format!("exec-{i}.log"))?);
        if let Some(c) = args.cores_per_node {
            ex.arg("--cores-count").arg(c.to_string());
        }
        ex.arg("--node-token-file").arg(statedir.join("node.token"));
        if root {
            ex.arg("--allow-root-jobs");
        }
        services
            .spawn(ex)
            .context("cannot start fluxgate-exec (build it with `cargo build --workspace` or put it on PATH)")?;
    }

    rt.block_on(async {
        tokio::select! {
            r = wait_ready(&uri, &creds, args.size, timeout, &mut services) => r,
            s = signals.any() => Err(anyhow!("interrupted by {s} during startup")),
        }
    })
    .with_context(|| format!("instance did not come up; logs in {}", statedir.display()))?;

    let code = rt.block_on(run_command(
        &args.command,
        &uri,
        &statedir,
        &owner_token,
        &mut signals,
    ))?;
    services.teardown();
    Ok(code)
}

/// Run CMD with the instance in its environment; SIGTERM/SIGHUP are passed
/// on, SIGINT is left to CMD (the terminal sent it to CMD's group too).
async fn run_command(
    command: &[String],
    uri: &str,
    statedir: &Path,
    token: &str,
    signals: &mut Signals,
) -> anyhow::Result<ExitCode> {
    let (prog, rest) = command_or_shell(command);
    let mut command = tokio::process::Command::new(&prog);
    command
        .args(&rest)
        .env(client::URI_ENV, uri)
        .env("FLUXGATE_STATEDIR", statedir)
        .env(client::TOKEN_ENV, token);
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot run {prog}"))?;
    let pid = child.id().map(|p| Pid::from_raw(p as i32));
    let status = loop {
        tokio::select! {
            s = child.wait() => break s?,
            _ = signals.int.recv() => {}
            _ = signals.term.recv() => forward(pid, Signal::SIGTERM),
            _ = signals.hup.recv() => forward(pid, Signal::SIGHUP),
        }
    };
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

fn forward(pid: Option<Pid>, sig: Signal) {
    if let Some(p) = pid {
        let _ = nix::sys::signal::kill(p, sig);
    }
}

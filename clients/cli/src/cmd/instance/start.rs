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

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use fluxgate_shared::Hostlist;

use crate::client;
use crate::services::{self, Cores, Exec, JobManager, Launcher, Signals, run_command};

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
    /// The job manager's TOML configuration file (queues, policy, limits,
    /// accounting); this command's own options override what it says.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Keep jobs in this PostgreSQL database (`postgres://…`) instead of
    /// the state directory's SQLite file. It may not hold a password (every
    /// user can read a command line): give such a URL in FLUXGATE_STORE_URL
    /// or in a file named by --store-url-file.
    #[arg(long, value_name = "URL", conflicts_with = "store_url_file")]
    store_url: Option<String>,
    /// Read the PostgreSQL URL (which may hold a password) from this file.
    #[arg(long, value_name = "FILE")]
    store_url_file: Option<PathBuf>,
    /// Also start this many standby job managers on the same store: one
    /// takes over if the leader dies (needs a PostgreSQL store).
    #[arg(long, value_name = "K", default_value_t = 0)]
    standby: u32,
    /// Command to run inside the instance (default: $SHELL).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// The environment variable that may give the store's URL, password and all.
const STORE_URL_ENV: &str = "FLUXGATE_STORE_URL";

/// The PostgreSQL URL, from `--store-url` (refused when it holds a password,
/// which `ps` would show every user), `--store-url-file` or the environment.
fn store_url(args: &Args) -> anyhow::Result<Option<String>> {
    if let Some(url) = &args.store_url {
        if fluxgate_shared::conninfo::has_password(url) {
            bail!(
                "--store-url holds a password, which every user can read on a command \
                 line: give the URL in {STORE_URL_ENV} or in a file named by --store-url-file"
            );
        }
        return Ok(Some(url.clone()));
    }
    if let Some(path) = &args.store_url_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--store-url-file {}", path.display()))?;
        return Ok(Some(text.trim().to_string()));
    }
    Ok(std::env::var(STORE_URL_ENV).ok().filter(|u| !u.is_empty()))
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
    let (statedir, tmpdir) = state_dir(args.statedir.as_deref())?;
    // Handlers first: from here on a Ctrl-C or SIGTERM must not kill us
    // before the services (in their own group) are torn down.
    let rt = client::runtime()?;
    let mut signals = {
        let _guard = rt.enter();
        Signals::new()?
    };
    let kill_timeout = Duration::from_secs_f64(args.kill_timeout.max(0.0));
    let mut launcher = Launcher::new(&statedir, kill_timeout, tmpdir);
    let (uri, owner_token) = rt.block_on(async {
        tokio::select! {
            r = start_instance(&mut launcher, &args) => r,
            s = signals.any() => Err(anyhow!("interrupted by {s} during startup")),
        }
    })?;
    let env = [
        (client::URI_ENV, Some(uri.as_ref())),
        ("FLUXGATE_STATEDIR", Some(statedir.as_os_str())),
        (client::TOKEN_ENV, Some(owner_token.as_ref())),
    ];
    let code = rt.block_on(run_command(&args.command, &env, &mut signals))?;
    launcher.teardown();
    Ok(code)
}

/// The state directory: `dir` made private, or a temporary one (0700, as
/// tempfile makes it) removed at the end.
fn state_dir(dir: Option<&Path>) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match dir {
        Some(d) => {
            fluxgate_os::private::create_dir(d).context("the state directory")?;
            Ok((d.to_path_buf(), None))
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("fluxgate-")
                .tempdir()
                .context("cannot create a temporary statedir")?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

/// Start the job manager (always requiring credentials) and one exec
/// service per node, and wait until every node is up; the URI and the
/// owner's token.
async fn start_instance(launcher: &mut Launcher, args: &Args) -> anyhow::Result<(String, String)> {
    let names = node_names(args.size)?;
    let mut nodelist = Hostlist::new();
    for n in &names {
        nodelist
            .push(n)
            .map_err(|e| anyhow!("node name {n:?}: {e}"))?;
    }
    let statedir = launcher.statedir().to_path_buf();
    let timeout = Duration::from_secs_f64(args.start_timeout.max(0.0));
    let mut jm = JobManager::new(&statedir)
        .auth(true)
        .nodelist(&nodelist.encode());
    if let Some(path) = &args.config {
        // Absolute: the job manager may resolve it from another directory.
        let path =
            std::fs::canonicalize(path).with_context(|| format!("--config {}", path.display()))?;
        jm = jm.config(&path);
    }
    if let Some(url) = store_url(args)? {
        // In the environment, not on a command line others can read.
        jm = jm.env(STORE_URL_ENV, &url);
    } else if args.standby > 0 {
        bail!(
            "--standby needs a PostgreSQL store (--store-url, --store-url-file or {STORE_URL_ENV})"
        );
    }
    let (_, leader) = launcher
        .job_manager(&jm, "job-manager.log", timeout)
        .await?;
    // Standbys share the instance key (so tokens and node credentials stay
    // valid across a failover), each with a state directory of its own.
    let mut uris = vec![leader];
    for i in 0..args.standby {
        let dir = statedir.join(format!("standby-{i}"));
        fluxgate_os::private::create_dir(&dir).context("a standby's state directory")?;
        let standby = jm.clone().with_statedir(&dir).set(
            "auth.key_file",
            &statedir.join("instance.key").display().to_string(),
        );
        let (_, uri) = launcher
            .job_manager(&standby, &format!("job-manager-standby-{i}.log"), timeout)
            .await?;
        uris.push(uri);
    }
    // Clients and exec services are given every job manager and follow the leader.
    let uri = uris.join(",");
    if args.verbose {
        eprintln!(
            "fluxgate-start: job manager at {uri}, logs in {}",
            statedir.display()
        );
    }
    // The job manager wrote the owner's token before it printed its URI.
    let owner_token = launcher.owner_token()?;
    if args.auth {
        eprintln!(
            "fluxgate-start: the owner's token is in {} (and CMD's FLUXGATE_TOKEN); \
             other users need one from `fluxgate token create`",
            launcher.owner_token_path().display()
        );
    }
    let creds = client::Credentials::default().with_token(&owner_token)?;
    // Root starting an instance owns it: its jobs are the owner's.
    let root = nix::unistd::geteuid().is_root();
    for (i, name) in names.iter().enumerate() {
        let mut ex = Exec::new(&uri)
            .hostname(name)
            .node_token_file(&launcher.node_token_path())
            .allow_root_jobs(root);
        if let Some(c) = args.cores_per_node {
            ex = ex.cores(Cores::Count(c));
        }
        launcher.exec(&ex, &format!("exec-{i}.log"))?;
    }
    launcher
        .wait_ready(args.size, timeout, || services::up_count(&uri, &creds))
        .await
        .with_context(|| format!("instance did not come up; logs in {}", statedir.display()))?;
    Ok((uri, owner_token))
}

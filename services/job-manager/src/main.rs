//! `fluxgate-job-manager`: the job manager daemon.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use fluxgate_job_manager::config::Config;
use fluxgate_job_manager::server;
use fluxgate_setup::layered::{self, Flags};
use fluxgate_setup::{LogFormat, init_logging};

/// mimalloc, not glibc's malloc: under load the job manager allocates many
/// small, short-lived objects across threads, where glibc's arenas spent a
/// quarter of its time (docs/PERFORMANCE-HISTORY.md, "Where the time goes").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Fluxgate job manager: job pipeline, scheduler and resource module over gRPC.
#[derive(Debug, Parser)]
#[command(name = "fluxgate-job-manager", version)]
struct Args {
    /// TOML configuration file.
    #[arg(long, env = "FLUXGATE_CONFIG")]
    config: Option<PathBuf>,
    /// The flags of keys (`--listen`, `--statedir`, ...), from the key table.
    #[command(flatten)]
    flags: Flags<Config>,
    /// Read the PostgreSQL URL (which may hold a password) from this file.
    #[arg(long, value_name = "FILE")]
    store_url_file: Option<PathBuf>,
    /// Set any configuration key, e.g. --set resource.torpid_timeout=10 (repeatable;
    /// after the file and the environment).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Log lines as text or as one JSON object per line (for log collectors).
    #[arg(long, env = "FLUXGATE_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

fn main() -> anyhow::Result<()> {
    // Before anything opens descriptors of its own (the runtime, the store):
    // what the starting shell left open must not reach anyone.
    let inherited = fluxgate_os::fds::close_inherited();
    // Every file the job manager makes (the store and its -wal and -shm,
    // keys, tokens, the URI file) is its owner's alone; it runs no user code.
    fluxgate_os::private::restrict_umask();
    let args = Args::parse();
    let config = configure(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // The trace exporter's connection runs on this runtime: built inside it,
    // and shut down (flushing the last spans) before it stops.
    let export = {
        let _in = runtime.enter();
        init_logging(args.log_format, &config.telemetry.otlp())?
    };
    if let Err(e) = inherited {
        tracing::warn!(error = %e, "cannot close inherited descriptors");
    }
    tracing::info!(?config, "effective configuration");
    let served = runtime.block_on(async move {
        let statedir = config.statedir.clone();
        let scheme = if config.tls.cert.is_some() {
            "https"
        } else {
            "http"
        };
        let uri_file = server::uri_path(&statedir);
        server::serve(config, shutdown_signal(), move |addr| {
            // Written atomically: readers see no URI or the whole URI.
            let uri = format!("{scheme}://{addr}\n");
            if let Err(e) = fluxgate_os::private::write_file(&uri_file, uri.as_bytes()) {
                tracing::error!(error = %e, "cannot write the URI file");
            }
            println!("{scheme}://{addr}");
        })
        .await
        .context("job manager stopped")
    });
    export.shutdown();
    served
}

/// The configuration's layers: defaults, the file, `FLUXGATE_*`, the flags
/// and `--set`. Errors are returned before logging is set up, as the
/// `[telemetry]` keys decide how it is set up.
fn configure(args: &Args) -> anyhow::Result<Config> {
    refuse_argv_secrets(args)?;
    let mut config = Config::load(args.config.as_deref())?;
    config.apply_env(std::env::vars())?;
    args.flags.apply(&mut config)?;
    if let Some(path) = &args.store_url_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--store-url-file {}", path.display()))?;
        config.store.url = Some(text.trim().to_string());
    }
    layered::apply_sets(&mut config, &args.set)?;
    Ok(config)
}

/// A password on the command line is refused: every local user can read a
/// process's arguments (`ps`), and the message says where it belongs.
fn refuse_argv_secrets(args: &Args) -> anyhow::Result<()> {
    use fluxgate_shared::conninfo::has_password;
    let set_url = args
        .set
        .iter()
        .filter_map(|s| s.split_once('='))
        .filter(|(k, _)| k.trim() == "store.url")
        .map(|(_, v)| v);
    let flag = args.flags.get("store.url").map(|u| ("--store-url", u));
    for (what, url) in flag
        .into_iter()
        .chain(set_url.map(|u| ("--set store.url", u)))
    {
        if has_password(url) {
            anyhow::bail!(
                "{what} holds a password, which every user can read on a command line: \
                 give the URL in the environment (FLUXGATE_STORE_URL), the configuration \
                 file's [store] url, or a file named by --store-url-file"
            );
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
}

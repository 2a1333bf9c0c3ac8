//! `fluxgate-job-manager`: the job manager daemon.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use fluxgate_job_manager::config::Config;
use fluxgate_job_manager::server;

/// Fluxgate job manager: job pipeline, scheduler and resource module over gRPC.
#[derive(Debug, Parser)]
#[command(name = "fluxgate-job-manager", version)]
struct Args {
    /// TOML configuration file.
    #[arg(long, env = "FLUXGATE_CONFIG")]
    config: Option<PathBuf>,
    /// Address to serve on (overrides `listen`).
    #[arg(long)]
    listen: Option<String>,
    /// State directory (overrides `statedir`).
    #[arg(long)]
    statedir: Option<PathBuf>,
    /// Hostnames of the nodes, in rank order (overrides `resource.nodelist`).
    #[arg(long)]
    nodelist: Option<String>,
    /// R file with the inventory (overrides `resource.path`).
    #[arg(long)]
    resource_path: Option<PathBuf>,
    /// Number of nodes to wait for (overrides `resource.size`).
    #[arg(long)]
    size: Option<u32>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FLUXGATE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut config = Config::load(args.config.as_deref())?;
    config.apply_env(std::env::vars())?;
    if let Some(v) = args.listen {
        config.listen = v;
    }
    if let Some(v) = args.statedir {
        config.statedir = v;
    }
    if let Some(v) = args.nodelist {
        config.resource.nodelist = Some(v);
    }
    if let Some(v) = args.resource_path {
        config.resource.path = Some(v);
    }
    if let Some(v) = args.size {
        config.resource.size = Some(v);
    }
    tracing::info!(?config, "effective configuration");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let statedir = config.statedir.clone();
        let uri_file = server::uri_path(&statedir);
        server::serve(config, shutdown_signal(), move |addr| {
            // Written atomically: readers see no URI or the whole URI.
            let tmp = uri_file.with_extension("tmp");
            let uri = format!("http://{addr}\n");
            if let Err(e) = std::fs::write(&tmp, uri).and_then(|_| std::fs::rename(&tmp, &uri_file))
            {
                tracing::error!(error = %e, "cannot write the URI file");
            }
            println!("http://{addr}");
        })
        .await
        .context("job manager stopped")
    })
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

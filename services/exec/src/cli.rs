//! The `fluxgate-exec` command: parse flags, log the effective configuration,
//! serve until SIGTERM or SIGINT.

use std::process::ExitCode;

use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};

use crate::config::{Args, Config};
use crate::server;

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = match Config::from_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fluxgate-exec: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fluxgate-exec: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fluxgate-exec: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    tracing::info!(
        job_manager = %config.job_manager,
        listen = %config.listen,
        nodes = ?config.nodes.iter().map(|n| format!("{} cores={} gpus={}", n.hostname, n.cores, n.gpus)).collect::<Vec<_>>(),
        kill_timeout = ?config.kill_timeout,
        heartbeat = ?config.heartbeat,
        leave_running = config.leave_running,
        "effective configuration"
    );
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let running = server::start(config).await?;
    // Scripts and tests read the bound address from the first line of stdout.
    println!("{}", running.exec_address);
    let token = running.shutdown_token();
    tokio::select! {
        _ = term.recv() => token.cancel(),
        _ = int.recv() => token.cancel(),
        _ = token.cancelled() => {}
    }
    running.wait().await?;
    Ok(())
}

//! The `fluxgate-exec` command: parse flags, log the effective configuration,
//! serve until SIGTERM or SIGINT.

use std::process::ExitCode;

use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};

use fluxgate_setup::init_logging;

use crate::config::{Args, Config};
use crate::server;

/// Entry point of the binary.
pub fn main() -> ExitCode {
    // The identity switches a task and its files go through (see
    // run_as); they must not parse the service's flags nor start a runtime.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.len() == 2 && argv[1] == crate::run_as::RUN_AS {
        return ExitCode::from(crate::wrapper::task::main());
    }
    if argv.len() == 2 && argv[1] == crate::run_as::OPEN_AS {
        return ExitCode::from(crate::wrapper::open::main());
    }
    let args = Args::parse();
    let log_format = args.log_format;
    // Errors of the configuration are printed before logging is set up, as
    // its `[telemetry]` keys decide how it is set up.
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
    // The trace exporter's connection runs on this runtime: built inside it,
    // and shut down (flushing the last spans) before it stops.
    let export = {
        let _in = runtime.enter();
        match init_logging(log_format, &config.otlp) {
            Ok(export) => export,
            Err(e) => {
                eprintln!("fluxgate-exec: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let served = runtime.block_on(serve(config));
    export.shutdown();
    match served {
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
        metrics_listen = ?config.metrics_listen,
        node_credential = config.node_credential.is_set(),
        tls_ca = config.tls_ca.is_some(),
        tls = config.tls_identity.is_some(),
        allow_root_jobs = config.allow_root_jobs,
        otlp_endpoint = %config.otlp.endpoint,
        service_name = %config.otlp.service_name,
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

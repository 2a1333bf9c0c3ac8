//! `fluxgate job submit [FILE]`: submit a jobspec as written (JSON or YAML,
//! RFC 14/25), from a file or standard input, as `flux job submit`.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use fluxgate_proto::v1 as pb;

use crate::client;
use crate::cmd::submit::{parse_flags, parse_urgency, submit_one};

/// Arguments of `fluxgate job submit`.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// Urgency: 0-31, or hold, default, expedite.
    #[arg(short, long, value_name = "N")]
    urgency: Option<String>,
    /// Submit flags, comma separated: waitable, debug, novalidate.
    #[arg(long, value_name = "FLAGS", value_delimiter = ',')]
    flags: Vec<String>,
    /// The jobspec file; `-` or none reads standard input.
    file: Option<PathBuf>,
}

/// Run `fluxgate job submit`: print the new job's id.
pub fn run(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let jobspec = match args.file.as_deref() {
        Some(path) if path.as_os_str() != "-" => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?,
        _ => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the jobspec from standard input")?;
            text
        }
    };
    let request = pb::SubmitRequest {
        jobspec,
        urgency: args.urgency.as_deref().map(parse_urgency).transpose()?,
        flags: parse_flags(&args.flags)?,
        ..Default::default()
    };
    let id = client::block_on(async {
        let mut inst = client::connect().await?;
        submit_one(&mut inst, request).await
    })??;
    println!("{}", client::f58(id));
    Ok(ExitCode::SUCCESS)
}

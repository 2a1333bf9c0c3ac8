//! `fluxgate job submit`: submit a jobspec read from a file or stdin, as
//! `flux job submit` (flux-core `src/cmd/job/submit.c`): the jobspec is sent
//! as it is (YAML converted to JSON), the job id is printed.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::Jobspec;

use super::{parse_flags, parse_urgency, submit_one};
use crate::client;

/// Arguments of `fluxgate job submit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Urgency (0-31, or hold, default, expedite).
    #[arg(short = 'u', long, value_name = "N")]
    urgency: Option<String>,
    /// Submit flags: waitable, debug, novalidate.
    #[arg(short = 'f', long, value_name = "FLAGS", value_delimiter = ',')]
    flags: Vec<String>,
    /// Jobspec file (JSON or YAML); `-` or none reads stdin.
    file: Option<String>,
}

/// Run `fluxgate job submit`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = read_jobspec(args.file.as_deref())?;
    let jobspec = normalize(&text)?;
    let req = pb::SubmitRequest {
        jobspec,
        urgency: args.urgency.as_deref().map(parse_urgency).transpose()?,
        flags: parse_flags(&args.flags)?,
        ..Default::default()
    };
    client::block_on(async {
        let mut inst = client::connect().await?;
        let id = submit_one(&mut inst, req).await?;
        println!("{}", client::f58(id));
        Ok(ExitCode::SUCCESS)
    })?
}

fn read_jobspec(file: Option<&str>) -> anyhow::Result<String> {
    let mut text = String::new();
    match file {
        None | Some("-") => {
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the jobspec from stdin")?;
        }
        Some(path) => {
            text = std::fs::read_to_string(path).with_context(|| path.to_string())?;
        }
    }
    Ok(text)
}

/// The jobspec as compact JSON, which is what the submit API carries. JSON
/// passes as written (the job manager validates it); other text is read as
/// YAML, which must then be a valid version 1 jobspec to be converted.
fn normalize(text: &str) -> anyhow::Result<String> {
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => match Jobspec::parse(text) {
            Ok(spec) => spec.as_value().clone(),
            Err(e) => bail!("the jobspec is neither JSON nor a valid YAML jobspec: {e}"),
        },
    };
    if !value.is_object() {
        bail!("the jobspec must be a JSON object");
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn json_objects_pass_compacted() {
        assert_eq!(
            normalize("{ \"version\": 1 }\n").unwrap(),
            "{\"version\":1}"
        );
    }

    #[test]
    fn yaml_jobspecs_become_json() {
        let yaml = "version: 1\nresources:\n  - type: slot\n    count: 1\n    label: task\n    with:\n      - type: core\n        count: 1\ntasks:\n  - command: [\"hostname\"]\n    slot: task\n    count:\n      per_slot: 1\nattributes:\n  system:\n    duration: 0\n";
        let json: serde_json::Value = serde_json::from_str(&normalize(yaml).unwrap()).unwrap();
        assert_eq!(json["tasks"][0]["command"][0], "hostname");
        assert_eq!(json["version"], 1);
    }

    #[test]
    fn other_texts_are_refused() {
        assert!(normalize("[1]").is_err());
        assert!(normalize("version: 1").is_err());
        assert!(normalize("- a\n- b\n").is_err());
        assert!(normalize("").is_err());
    }
}

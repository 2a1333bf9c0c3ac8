//! `fluxgate job memo`: attach `key=value` notes to a job, as `flux job
//! memo` (a value that is not JSON is kept as a string; dotted keys make
//! nested objects; `--volatile` keeps them out of the eventlog).

use std::process::ExitCode;

use anyhow::{anyhow, bail};
use fluxgate_proto::v1 as pb;
use serde_json::{Map, Value};

use crate::client;

/// Arguments of `fluxgate job memo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Do not record the memo in the job's eventlog.
    #[arg(long)]
    volatile: bool,
    /// Job id.
    id: String,
    /// Notes, each `key=value` (value JSON, or else a string).
    #[arg(required = true, value_name = "KEY=VALUE")]
    pairs: Vec<String>,
}

/// The memo object for `pairs`.
fn memo_object(pairs: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut memo = Map::new();
    for kv in pairs {
        let (key, value) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("{kv}: memo must be key=value"))?;
        if key.is_empty() || key.split('.').any(str::is_empty) {
            bail!("{kv}: invalid memo key");
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        insert(&mut memo, key, value)?;
    }
    Ok(memo)
}

/// Put `value` at the dotted path `key`, making objects on the way.
fn insert(obj: &mut Map<String, Value>, key: &str, value: Value) -> anyhow::Result<()> {
    match key.split_once('.') {
        None => {
            obj.insert(key.to_string(), value);
        }
        Some((head, rest)) => {
            let child = obj
                .entry(head.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            match child {
                Value::Object(m) => insert(m, rest, value)?,
                _ => bail!("memo key {head} is both a value and an object"),
            }
        }
    }
    Ok(())
}

/// Run `fluxgate job memo`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    let memo = Value::Object(memo_object(&args.pairs)?).to_string();
    client::block_on(async {
        let mut inst = client::connect().await?;
        inst.jobs
            .memo(pb::MemoRequest {
                id: id.into(),
                memo,
                volatile: args.volatile,
            })
            .await
            .map_err(client::status_error)?;
        Ok(ExitCode::SUCCESS)
    })?
}

#[cfg(test)]
mod tests {
    use super::memo_object;
    use serde_json::json;

    fn memo(pairs: &[&str]) -> anyhow::Result<serde_json::Value> {
        let pairs: Vec<String> = pairs.iter().map(|s| s.to_string()).collect();
        memo_object(&pairs).map(serde_json::Value::Object)
    }

    #[test]
    fn values_are_json_or_strings_and_dots_nest() {
        assert_eq!(
            memo(&["a=1", "b=hello", "c.d=[1,2]", "c.e=null", "f="]).unwrap(),
            json!({"a": 1, "b": "hello", "c": {"d": [1, 2], "e": null}, "f": ""})
        );
    }

    #[test]
    fn bad_pairs_are_refused() {
        assert!(memo(&["novalue"]).is_err());
        assert!(memo(&["=1"]).is_err());
        assert!(memo(&["a..b=1"]).is_err());
        assert!(memo(&["a=1", "a.b=2"]).is_err());
    }
}

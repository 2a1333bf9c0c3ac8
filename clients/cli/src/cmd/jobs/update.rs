//! `fluxgate update ID KEY=VALUE...`, as `flux update`: change a job's
//! duration after submission. `duration=FSD` sets it, `duration=+FSD` or
//! `duration=-FSD` moves it from the current one; `0` or `inf` removes the
//! limit. A running job's R expiration moves with it, and so does the
//! expiration of an instance running inside the job.

use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::jobspec::parse_fsd;
use serde_json::{Map, Value};

use crate::client::{self, Instance};

/// Arguments of `fluxgate update`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job to update.
    jobid: String,
    /// Updates, e.g. duration=10m, duration=+5m.
    #[arg(required = true, value_name = "KEY=VALUE")]
    updates: Vec<String>,
}

/// A duration update: absolute, or relative to the current duration.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    Set(f64),
    Add(f64),
}

/// `FSD`, `+FSD` or `-FSD`; `inf` and 0 mean no limit (0).
fn parse_change(v: &str) -> anyhow::Result<Change> {
    let fsd = |s: &str| {
        parse_fsd(s)
            .map(|d| if d.is_infinite() { 0.0 } else { d })
            .map_err(|e| anyhow!("duration: {e}"))
    };
    Ok(match v.trim() {
        s if s.starts_with('+') => Change::Add(fsd(&s[1..])?),
        s if s.starts_with('-') => Change::Add(-fsd(&s[1..])?),
        s => Change::Set(fsd(s)?),
    })
}

/// The job's current duration: the jobspec's, or the last update's.
async fn current_duration(inst: &mut Instance, id: JobId) -> anyhow::Result<f64> {
    let info = inst
        .jobs
        .info(pb::InfoRequest {
            id: id.as_u64(),
            keys: vec!["jobspec".into(), "eventlog".into()],
            ..Default::default()
        })
        .await
        .map_err(client::status_error)?
        .into_inner();
    let spec: Value = serde_json::from_str(info.values.get("jobspec").map_or("{}", |s| s))
        .context("the job's jobspec is unreadable")?;
    let mut d = spec
        .pointer("/attributes/system/duration")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    for line in info.values.get("eventlog").map_or("", |s| s).lines() {
        if let Ok(ev) = client::parse_event(line)
            && ev.name == "jobspec-update"
            && let Some(v) = ev.ctx("attributes.system.duration").and_then(Value::as_f64)
        {
            d = v;
        }
    }
    Ok(d)
}

/// Run `fluxgate update`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.jobid)?;
    let mut change = None;
    for kv in &args.updates {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("{kv:?}: expected KEY=VALUE"))?;
        match k {
            "duration" | "attributes.system.duration" => change = Some(parse_change(v)?),
            other => bail!("cannot update {other:?}: only duration can be updated"),
        }
    }
    let change = change.context("nothing to update")?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let duration = match change {
            Change::Set(d) => d,
            Change::Add(delta) => {
                let cur = current_duration(&mut inst, id).await?;
                if cur == 0.0 {
                    bail!("job {} has no duration to change", client::f58(id));
                }
                let d = cur + delta;
                if d <= 0.0 {
                    bail!("the new duration would be {d}s: it must stay above 0");
                }
                d
            }
        };
        let mut updates = Map::new();
        updates.insert("attributes.system.duration".into(), Value::from(duration));
        inst.jobs
            .update(pb::UpdateRequest {
                id: id.as_u64(),
                updates: Value::Object(updates).to_string(),
            })
            .await
            .map_err(client::status_error)?;
        Ok(ExitCode::SUCCESS)
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes() {
        assert_eq!(parse_change("10m").unwrap(), Change::Set(600.0));
        assert_eq!(parse_change("+1m").unwrap(), Change::Add(60.0));
        assert_eq!(parse_change("-30").unwrap(), Change::Add(-30.0));
        assert_eq!(parse_change("inf").unwrap(), Change::Set(0.0));
        assert!(parse_change("soon").is_err());
    }
}

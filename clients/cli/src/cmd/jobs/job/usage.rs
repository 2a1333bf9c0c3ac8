//! `fluxgate job usage`: what a job used (CPU time and peak memory per
//! node, and in total), as its exec services read it from its cgroups when
//! it ended and the job manager stored it (the job's `usage` key).

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::anyhow;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::job::usage::JobUsage;
use fluxgate_shared::policy::format_fsd_py;
use fluxgate_shared::size;
use serde_json::Value;

use crate::client;
use crate::output::{self, Mode, Render};

/// Arguments of `fluxgate job usage`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One JSON document: {"nodes": [...], "total": {...}}.
    #[arg(long)]
    json: bool,
    /// Job id.
    id: String,
}

/// A job's usage, and whether it is what a running job has used so far.
struct Shown {
    usage: JobUsage,
    running: bool,
}

impl Render for Shown {
    fn table(&self, out: &mut dyn Write) -> io::Result<()> {
        let row = |out: &mut dyn Write, ranks: &str, host: &str, u: f64, s: f64, rss: u64| {
            writeln!(
                out,
                "{ranks:<8} {host:<16} {:>10} {:>10} {:>10} {:>8}",
                format_fsd_py(u),
                format_fsd_py(s),
                format_fsd_py(u + s),
                size::display(rss)
            )
        };
        writeln!(
            out,
            "{:<8} {:<16} {:>10} {:>10} {:>10} {:>8}",
            "RANKS", "HOST", "USER", "SYSTEM", "CPU", "MAXRSS"
        )?;
        for n in &self.usage.nodes {
            row(out, &n.ranks, &n.hostname, n.user, n.system, n.max_rss)?;
        }
        let t = &self.usage.total;
        row(out, "total", "", t.user, t.system, t.max_rss)?;
        if self.running {
            writeln!(out, "(the job is running: its usage so far)")?;
        }
        Ok(())
    }

    fn json(&self) -> Value {
        let mut v = serde_json::to_value(&self.usage).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("running".into(), Value::Bool(self.running));
        }
        v
    }
}

/// Run `fluxgate job usage`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let key = "usage";
        let stored = inst
            .jobs
            .info(pb::InfoRequest {
                id: id.as_u64(),
                keys: vec![key.to_string()],
                offset: 0,
                max_bytes: 0,
            })
            .await;
        // Stored at the job's end; while it runs, read from its cgroups now.
        let (text, running) = match stored {
            Ok(resp) => {
                let text = resp.into_inner().values.remove(key);
                (
                    text.ok_or_else(|| anyhow!("job {} has no usage", args.id))?,
                    false,
                )
            }
            Err(status) if status.code() == tonic::Code::FailedPrecondition => {
                let live = live(&mut inst, id.as_u64()).await?;
                // Neither stored nor running: the stored usage's reason.
                (live.ok_or_else(|| client::status_error(status))?, true)
            }
            Err(status) => return Err(client::status_error(status)),
        };
        let usage: JobUsage = serde_json::from_str(&text)
            .map_err(|e| anyhow!("job {}: unreadable usage ({e})", args.id))?;
        output::emit(
            Mode::from_flags(args.json, false),
            &Shown { usage, running },
        )?;
        Ok(ExitCode::SUCCESS)
    })?
}

/// What running job `id` has used so far, as the `usage` key's JSON;
/// `None` when it is not running or its nodes do not contain it.
async fn live(inst: &mut client::Instance, id: u64) -> anyhow::Result<Option<String>> {
    match inst.jobs.tasks(pb::TasksRequest { id }).await {
        Ok(answer) => Ok(Some(answer.into_inner().usage).filter(|u| !u.is_empty())),
        Err(status) if status.code() == tonic::Code::FailedPrecondition => Ok(None),
        Err(status) => Err(client::status_error(status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_each_node_and_the_total() {
        let text = r#"{"nodes":[{"ranks":"0","hostname":"vm","user":1.5,"system":0.25,"max_rss":1048576}],"total":{"user":1.5,"system":0.25,"max_rss":1048576}}"#;
        let u: JobUsage = serde_json::from_str(text).unwrap();
        assert_eq!(u.total.cpu_time(), 1.75);
        let mut out = Vec::new();
        let shown = Shown {
            usage: u,
            running: false,
        };
        shown.table(&mut out).unwrap();
        assert_eq!(shown.json()["running"], false);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("1.750s"), "{text}");
        assert!(text.contains("1M"), "{text}");
        assert!(text.lines().last().unwrap().starts_with("total"), "{text}");
    }
}

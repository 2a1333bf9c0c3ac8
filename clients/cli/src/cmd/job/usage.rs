//! `fluxgate job usage`: what a job used (CPU time and peak memory per
//! node, and in total), as its exec services read it from its cgroups when
//! it ended (the `usage` of the exec eventlog's `complete` event).

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::{anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::job::usage::JobUsage;
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

/// The usage of the last `complete` event of an exec eventlog.
pub fn from_exec_eventlog(text: &str) -> Option<JobUsage> {
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["name"] == "complete")
        .find_map(|e| JobUsage::from_complete(&e["context"]))
}

struct Shown(JobUsage);

impl Render for Shown {
    fn table(&self, out: &mut dyn Write) -> io::Result<()> {
        let row = |out: &mut dyn Write, ranks: &str, host: &str, u: f64, s: f64, rss: u64| {
            writeln!(
                out,
                "{ranks:<8} {host:<16} {:>10} {:>10} {:>10} {:>8}",
                output::fsd(u),
                output::fsd(s),
                output::fsd(u + s),
                size::display(rss)
            )
        };
        writeln!(
            out,
            "{:<8} {:<16} {:>10} {:>10} {:>10} {:>8}",
            "RANKS", "HOST", "USER", "SYSTEM", "CPU", "MAXRSS"
        )?;
        for n in &self.0.nodes {
            row(out, &n.ranks, &n.hostname, n.user, n.system, n.max_rss)?;
        }
        let t = &self.0.total;
        row(out, "total", "", t.user, t.system, t.max_rss)
    }

    fn json(&self) -> Value {
        serde_json::to_value(&self.0).unwrap_or(Value::Null)
    }
}

/// Run `fluxgate job usage`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let key = "exec.eventlog";
        let mut resp = inst
            .jobs
            .info(pb::InfoRequest {
                id: id.as_u64(),
                keys: vec![key.to_string()],
                offset: 0,
                max_bytes: 0,
            })
            .await
            .map_err(client::status_error)?
            .into_inner();
        let text = resp
            .values
            .remove(key)
            .ok_or_else(|| anyhow!("job {} has not run", args.id))?;
        let Some(usage) = from_exec_eventlog(&text) else {
            bail!(
                "job {} has no usage: it has not ended, or its nodes do not contain \
                 jobs in cgroups",
                args.id
            );
        };
        output::emit(Mode::from_flags(args.json, false), &Shown(usage))?;
        Ok(ExitCode::SUCCESS)
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_complete_event_gives_the_usage() {
        let log = concat!(
            r#"{"timestamp":1.0,"name":"init"}"#,
            "\n",
            r#"{"timestamp":2.0,"name":"complete","context":{"status":0,"usage":{"nodes":[{"ranks":"0","hostname":"vm","user":1.5,"system":0.25,"max_rss":1048576}],"total":{"user":1.5,"system":0.25,"max_rss":1048576}}}}"#,
            "\n"
        );
        let u = from_exec_eventlog(log).unwrap();
        assert_eq!(u.total.cpu_time(), 1.75);
        let mut out = Vec::new();
        Shown(u).table(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("1.750s"), "{text}");
        assert!(text.contains("1M"), "{text}");
        assert!(
            from_exec_eventlog(r#"{"timestamp":1.0,"name":"complete","context":{"status":0}}"#)
                .is_none()
        );
    }
}

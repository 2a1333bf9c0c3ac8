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

struct Shown(JobUsage);

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
        let key = "usage";
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
            .ok_or_else(|| anyhow!("job {} has no usage", args.id))?;
        let usage: JobUsage = serde_json::from_str(&text)
            .map_err(|e| anyhow!("job {}: unreadable usage ({e})", args.id))?;
        output::emit(Mode::from_flags(args.json, false), &Shown(usage))?;
        Ok(ExitCode::SUCCESS)
    })?
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
        Shown(u).table(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("1.750s"), "{text}");
        assert!(text.contains("1M"), "{text}");
        assert!(text.lines().last().unwrap().starts_with("total"), "{text}");
    }
}

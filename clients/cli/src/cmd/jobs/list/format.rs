//! The `fluxgate jobs` output options (`-o`, `--sort`, `-w`, `--stats`,
//! `--stats-only`) and the I/O around the pure formatter of
//! `fluxgate-jobfmt`: the config files and environment, the stats listing,
//! standard output.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::job::usage::Total;
use jiff::tz::TimeZone;

use fluxgate_jobfmt::details::JobDetails;
use fluxgate_jobfmt::instance::InstanceInfo;
use fluxgate_jobfmt::named::{Choice, DEFAULT_ENV, Formats, search_dirs};
use fluxgate_jobfmt::stats::JobCounts;
use fluxgate_jobfmt::{Ctx, JobRecord, Layout, Template, record, render};

use crate::client;

/// Output options of `fluxgate jobs`, as flux-jobs(1).
#[derive(Debug, Clone, clap::Args)]
pub struct FormatArgs {
    /// Output format: a named format (default, long, deps, endreason, cute,
    /// or one from flux-jobs.toml; "help" lists them) or a format string.
    #[arg(
        short = 'o',
        long = "format",
        value_name = "NAME|FORMAT",
        default_value = "default"
    )]
    pub format: String,
    /// Sort jobs by comma-separated fields; a leading "-" reverses a key.
    #[arg(long, value_name = "[-]KEY,..")]
    pub sort: Option<String>,
    /// Truncate lines at N columns (0: terminal width; default: no truncation).
    #[arg(short = 'w', long = "width", value_name = "N", num_args = 0..=1,
          default_missing_value = "0", allow_hyphen_values = true)]
    pub width: Option<i64>,
    /// Print a summary of job statistics before the header.
    #[arg(long)]
    pub stats: bool,
    /// Print job statistics only; exit 1 when no job is active.
    #[arg(long = "stats-only")]
    pub stats_only: bool,
}

/// What to do after reading `-o`.
#[derive(Debug)]
pub enum Prepared {
    /// List with this format string.
    Format(String),
    /// The answer was printed (`-o help`, `get-config=`, `--stats-only`).
    Done(ExitCode),
}

impl FormatArgs {
    /// Resolve `-o` (reading config files) and print `--stats` before any
    /// listing, in flux's order; `json` refuses the stats options.
    pub fn prepare(&self, json: bool, queue: Option<&str>) -> anyhow::Result<Prepared> {
        if json && (self.stats || self.stats_only) {
            bail!("--json incompatible with --stats or --stats-only");
        }
        let choice = if json {
            Choice::Format("{id}".into())
        } else {
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let dirs = search_dirs(
                std::env::var("XDG_CONFIG_HOME").ok().as_deref(),
                std::env::var("XDG_CONFIG_DIRS").ok().as_deref(),
                home.as_deref(),
            );
            let env_default = DEFAULT_ENV.iter().find_map(|k| std::env::var(k).ok());
            Formats::load(&dirs)
                .and_then(|f| f.choose(&self.format, env_default.as_deref()))
                .map_err(|e| anyhow!(e))?
        };
        let fmt = match choice {
            Choice::Print(text) => {
                print!("{text}");
                return Ok(Prepared::Done(ExitCode::SUCCESS));
            }
            Choice::Format(f) => f,
        };
        // Check the format before talking to the instance, as flux does.
        Template::parse(&fmt, record::heading).map_err(|e| anyhow!("Error in user format: {e}"))?;
        if self.stats || self.stats_only {
            let stats = fetch_stats(queue)?;
            println!("{}", stats.line());
            if self.stats_only {
                let code = if stats.active() > 0 {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                };
                return Ok(Prepared::Done(code));
            }
        }
        Ok(Prepared::Format(fmt))
    }

    /// Print `jobs` (already in job-list order) with `fmt`.
    #[allow(clippy::too_many_arguments)]
    pub fn print(
        &self,
        fmt: &str,
        jobs: Vec<pb::JobSummary>,
        users: &HashMap<u32, String>,
        now: f64,
        no_header: bool,
        inside: &HashMap<u64, InstanceInfo>,
        usage: &HashMap<u64, Total>,
        details: &HashMap<u64, JobDetails>,
    ) -> anyhow::Result<()> {
        let mut records: Vec<JobRecord> = jobs
            .into_iter()
            .map(|j| {
                let user = users
                    .get(&j.userid)
                    .cloned()
                    .unwrap_or_else(|| j.userid.to_string());
                let f58 = client::f58(JobId::from(j.id));
                let info = inside.get(&j.id).cloned();
                let used = usage.get(&j.id).copied();
                let more = details.get(&j.id).cloned();
                let mut record = JobRecord::new(j, user, f58, now);
                if let Some(d) = more {
                    record = record.with_details(d);
                }
                if let Some(u) = used {
                    record = record.with_usage(u);
                }
                match info {
                    Some(info) => record.with_instance(info),
                    None => record,
                }
            })
            .collect();
        let layout = Layout {
            sort: self.sort.as_deref(),
            no_header,
            width: self.columns(),
        };
        let ctx = Ctx::new(TimeZone::system());
        let lines = render(fmt, &mut records, &layout, &ctx).map_err(|e| anyhow!(e))?;
        let mut out = std::io::stdout().lock();
        for l in lines {
            writeln!(out, "{l}")?;
        }
        out.flush()?;
        Ok(())
    }

    /// `-w`: N > 0 cuts at N; 0 at the terminal's width ($COLUMNS here);
    /// negative or absent does not cut.
    fn columns(&self) -> Option<usize> {
        match self.width {
            Some(0) => std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()),
            Some(n) if n > 0 => usize::try_from(n).ok(),
            _ => None,
        }
    }
}

/// Count every job of every user (the instance's job-list stats).
fn fetch_stats(queue: Option<&str>) -> anyhow::Result<JobCounts> {
    let jobs = client::block_on(async {
        let mut inst = client::connect().await?;
        let request = pb::ListRequest {
            states: 0x7f,
            userid: None,
            max_entries: 0,
            ..Default::default()
        };
        super::pager::list_all(&mut inst, request).await
    })??;
    Ok(JobCounts::count_in(&jobs, queue))
}

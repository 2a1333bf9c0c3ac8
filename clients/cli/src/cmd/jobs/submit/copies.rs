//! What `submit` and `bulksubmit` share around the jobs they make: copies
//! of each job (`--cc`, `--bcc`), and after submission the ids printed
//! (`--quiet`) and the jobs waited for (`--wait`, `--progress`).

use anyhow::anyhow;
use fluxgate_shared::{IdSet, JobId};

use crate::client::{self, Instance};
use crate::cmd::jobs::attach;

/// The options, as both commands take them.
#[derive(Debug, clap::Args)]
pub struct CopyOpts {
    /// Replicate the job for each ID in IDSET ({cc} is replaced by the id).
    #[arg(long, value_name = "IDSET", conflicts_with = "bcc")]
    pub cc: Option<String>,
    /// As --cc, without FLUX_JOB_CC in the environment.
    #[arg(long, value_name = "IDSET")]
    pub bcc: Option<String>,
    /// Do not print the job ids.
    #[arg(long)]
    pub quiet: bool,
    /// Wait for all jobs to complete; exit with the largest exit code.
    #[arg(long)]
    pub wait: bool,
    /// Show a progress bar while submitting (and, with --wait, running).
    #[arg(long)]
    pub progress: bool,
}

impl CopyOpts {
    /// The copy ids, and whether each copy sees FLUX_JOB_CC (`--cc`) or
    /// not (`--bcc`); `None` without either.
    pub fn copies(&self) -> anyhow::Result<Option<(IdSet, bool)>> {
        Ok(match (&self.cc, &self.bcc) {
            (Some(s), _) => Some((IdSet::parse(s).map_err(|e| anyhow!("--cc={s}: {e}"))?, true)),
            (None, Some(s)) => Some((
                IdSet::parse(s).map_err(|e| anyhow!("--bcc={s}: {e}"))?,
                false,
            )),
            _ => None,
        })
    }

    /// Print a submitted job's id unless `--quiet`.
    pub fn print_id(&self, bar: &indicatif::ProgressBar, id: JobId) {
        if !self.quiet {
            bar.suspend(|| println!("{}", client::f58(id)));
        }
    }

    /// With `--wait`, follow `ids` to their ends, saying how each that
    /// failed ended; the largest exit code (`start` without `--wait`).
    pub async fn wait_all(
        &self,
        inst: &mut Instance,
        ids: &[JobId],
        start: i32,
    ) -> anyhow::Result<i32> {
        let mut code = start;
        if !self.wait {
            return Ok(code);
        }
        let bar = progress_bar(self.progress, ids.len() as u64, "running");
        for id in ids {
            let outcome = attach::outcome(inst, *id).await?;
            if let Some(msg) = &outcome.message {
                bar.suspend(|| eprintln!("{}: {msg}", client::f58(*id)));
            }
            code = code.max(outcome.exit_code);
            bar.inc(1);
        }
        bar.finish_and_clear();
        Ok(code)
    }
}

/// A progress bar of `len` steps labelled `what`, hidden unless `show`.
pub fn progress_bar(show: bool, len: u64, what: &str) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg:>10} [{bar:40}] {pos}/{len} {per_sec} {elapsed_precise}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

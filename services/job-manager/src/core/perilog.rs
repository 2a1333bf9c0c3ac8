//! Prolog and epilog: site commands run by the job manager around each job
//! (flux-core's perilog plugin, run on the job manager's host).
//!
//! When a job is about to start and a prolog is configured, `prolog-start`
//! is posted and the command runs; `prolog-finish{status}` lets the start go
//! ahead, and a failing prolog raises a `prolog` exception, so the job never
//! starts. When a job's resources are about to be freed, the epilog runs the
//! same way between `epilog-start` and `epilog-finish`. The commands get the
//! job's id (FLUX_JOB_ID, F58) and owner (FLUX_JOB_USERID), and are killed if
//! they outlive `perilog.timeout`.

use std::process::Stdio;
use std::time::Duration;

use fluxgate_shared::JobId;
use serde_json::Value;
use tokio::sync::mpsc;

use super::effect::{Effect, PerilogRun, Which};
use super::{Core, Msg};
use crate::store::Store;

impl<S: Store> Core<S> {
    fn perilog_command(&self, which: Which) -> Option<String> {
        match which {
            Which::Prolog => self.config.perilog.prolog.clone(),
            Which::Epilog => self.config.perilog.epilog.clone(),
        }
    }

    /// Start the prolog or epilog if one is configured and it has not run for
    /// this job; true if it was started (the owed step must wait for it).
    pub(super) fn begin_perilog(&mut self, id: JobId, which: Which) -> bool {
        let Some(cmd) = self.perilog_command(which) else {
            return false;
        };
        let Some(active) = self.jobs.get_mut(&id) else {
            return false;
        };
        let done = match which {
            Which::Prolog => &mut active.prolog_done,
            Which::Epilog => &mut active.epilog_done,
        };
        if *done {
            return false;
        }
        *done = true;
        let userid = active.job.userid();
        let event = format!("{}-start", which.name());
        if !self.post(
            id,
            &event,
            Self::context([("description", Value::from(cmd.clone()))]),
        ) {
            return false;
        }
        let timeout = Duration::from_secs_f64(self.config.perilog.timeout.max(0.001));
        self.effect(Effect::Perilog(Box::new(PerilogRun {
            cmd,
            id,
            userid,
            which,
            timeout,
        })));
        true
    }

    /// The command ended with `status` (a wait status).
    pub(super) fn end_perilog(&mut self, id: JobId, which: Which, status: i32) {
        let Some(cmd) = self.perilog_command(which) else {
            return;
        };
        let event = format!("{}-finish", which.name());
        self.post(
            id,
            &event,
            Self::context([
                ("description", Value::from(cmd)),
                ("status", Value::from(status)),
            ]),
        );
        if status != 0 {
            let note = format!("{} failed with wait status {status}", which.name());
            // A failed prolog keeps the job from starting; a failed epilog is
            // recorded, since the job has already ended.
            let severity = if which == Which::Prolog { 0 } else { 1 };
            let _ = self.raise(id, which.name(), severity, &note, None);
        }
    }
}

/// Run the command; its wait status comes back on the core's inbox.
pub(super) async fn run(run: PerilogRun, inbox: mpsc::Sender<Msg>) {
    let PerilogRun {
        cmd,
        id,
        userid,
        which,
        timeout,
    } = run;
    let child = tokio::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(&cmd)
        .env("FLUX_JOB_ID", id.to_string())
        .env("FLUX_JOB_USERID", userid.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let status = match child {
        Err(e) => {
            tracing::error!(job = %id, command = %cmd, error = %e, "cannot run {}", which.name());
            127 << 8
        }
        Ok(mut child) => match tokio::time::timeout(timeout, child.wait()).await {
            Ok(Ok(s)) => {
                use std::os::unix::process::ExitStatusExt;
                s.into_raw()
            }
            Ok(Err(e)) => {
                tracing::error!(job = %id, error = %e, "cannot wait for {}", which.name());
                1 << 8
            }
            Err(_) => {
                tracing::error!(job = %id, command = %cmd, "{} timed out", which.name());
                let _ = child.kill().await;
                // As a shell reports a command killed by SIGKILL.
                9
            }
        },
    };
    let _ = inbox.send(Msg::Perilog { id, which, status }).await;
}

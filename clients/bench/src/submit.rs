//! Submitting a run's jobs: `SubmitMany` batches, several in flight at once,
//! so that the job manager, not the submitter, sets the pace.
//!
//! Every job of a run has the same jobspec; a batch's requests are built
//! when it is sent, so a million jobs cost the memory of the batches in
//! flight, not of every request at once. One refused job fails the run: a
//! bench that measured fewer jobs than it says would report wrong figures.

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::JobspecBuilder;
use tokio::task::JoinSet;

use fluxgate_cli::client::{self, Instance};

/// How a run's jobs went in.
#[derive(Debug)]
pub struct Submitted {
    /// Job ids, in submission order.
    pub ids: Vec<u64>,
    /// From the first request sent to the last answer.
    pub elapsed: Duration,
}

/// The jobspec of a simulated job: `true`, 1 task on 1 core, finished by
/// the exec service as soon as it starts (Flux's test execution).
pub fn sim_jobspec(name: &str) -> anyhow::Result<String> {
    let b = JobspecBuilder::new(["true"])
        .name(name)
        .cwd("/")
        .setattr_kv("system.exec.test.run_duration=0");
    Ok(b.build()?.to_json())
}

/// The jobspec of a real `true` job, found on this PATH.
pub fn true_jobspec(name: &str) -> anyhow::Result<String> {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    let b = JobspecBuilder::new(["true"])
        .name(name)
        .cwd("/")
        .environment([("PATH".to_string(), path)].into_iter().collect());
    Ok(b.build()?.to_json())
}

/// Submit `count` copies of `jobspec` at `urgency` (None: the default),
/// `batch` per request, `inflight` requests at once.
pub async fn submit(
    inst: &Instance,
    jobspec: &str,
    urgency: Option<u32>,
    count: u64,
    batch: u32,
    inflight: u32,
) -> anyhow::Result<Submitted> {
    let mut ids = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut pending: JoinSet<(usize, Result<pb::SubmitManyResponse, tonic::Status>)> =
        JoinSet::new();
    // Answers may come back out of order: each batch keeps its place.
    let mut answers: Vec<Option<Vec<u64>>> = Vec::new();
    let mut left = count;
    let started = Instant::now();
    loop {
        while left > 0 && pending.len() < inflight as usize {
            let n = left.min(u64::from(batch));
            left -= n;
            let jobs = (0..n)
                .map(|_| pb::SubmitRequest {
                    jobspec: jobspec.to_string(),
                    urgency,
                    flags: 0,
                    ..Default::default()
                })
                .collect();
            let mut client = inst.jobs.clone();
            let index = answers.len();
            answers.push(None);
            pending.spawn(async move {
                let r = client
                    .submit_many(pb::SubmitManyRequest { jobs })
                    .await
                    .map(tonic::Response::into_inner);
                (index, r)
            });
        }
        let Some(done) = pending.join_next().await else {
            break;
        };
        let (index, reply) = done.context("a submit task failed")?;
        let reply = reply.map_err(client::status_error)?;
        let mut batch_ids = Vec::with_capacity(reply.results.len());
        for r in reply.results {
            match r.result {
                Some(pb::submit_result::Result::Id(id)) => batch_ids.push(id),
                Some(pb::submit_result::Result::Error(e)) => bail!("a job was refused: {e}"),
                None => bail!("the job manager answered a submit with neither id nor error"),
            }
        }
        answers[index] = Some(batch_ids);
    }
    let elapsed = started.elapsed();
    for a in answers {
        ids.extend(a.ok_or_else(|| anyhow!("a batch was never answered"))?);
    }
    if ids.len() as u64 != count {
        bail!("{} of {count} jobs were accepted", ids.len());
    }
    Ok(Submitted { ids, elapsed })
}

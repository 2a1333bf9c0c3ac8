//! `JobManager.Submit` and `SubmitMany`: jobspecs are parsed off the core,
//! earlier tries (idempotency keys) and dependencies are read from the store
//! here, and the core decides each job in one message.

use std::sync::Arc;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::{JobId, Jobspec};
use tonic::{Request, Response, Status};

use super::ask;
use super::job_service::JobManagerService;
use crate::auth::caller;
use crate::core::{Antecedents, Msg, SubmitArgs};
use crate::error::Error;
use crate::store::Store;

/// Submit one job.
pub async fn one<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::SubmitRequest>,
) -> Result<Response<pb::SubmitResponse>, Status> {
    let caller = caller(&request)?;
    let max = svc.config.limits.max_jobspec_bytes;
    let mut args = svc
        .parse_gate
        .parse_one(request.into_inner(), &caller, max, &svc.site)
        .await?;
    read_prior(svc, std::slice::from_mut(&mut args)).await?;
    read_antecedents(svc, std::slice::from_mut(&mut args)).await?;
    let mut results = ask(&svc.inbox, |reply| Msg::Submit {
        jobs: vec![args],
        reply,
    })
    .await?;
    let id = results
        .pop()
        .ok_or_else(|| Error::Internal("no submit result".into()))??;
    Ok(Response::new(pb::SubmitResponse { id: id.into() }))
}

/// Submit a batch of jobs; each is answered alone (an id or why not).
pub async fn many<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::SubmitManyRequest>,
) -> Result<Response<pb::SubmitManyResponse>, Status> {
    let caller = caller(&request)?;
    let jobs = request.into_inner().jobs;
    let max = svc.config.limits.max_batch;
    if jobs.len() > max {
        return Err(Error::Invalid(format!(
            "{} jobs in one request, over the limit of {max}",
            jobs.len()
        ))
        .into());
    }
    // Parse every jobspec here, off the core and off the async workers;
    // bad ones are answered alone.
    let max_bytes = svc.config.limits.max_jobspec_bytes;
    let parsed: Vec<Result<SubmitArgs, Error>> = svc
        .parse_gate
        .parse_many(jobs, &caller, max_bytes, &svc.site)
        .await?;
    let mut good: Vec<SubmitArgs> = parsed
        .iter()
        .filter_map(|r| r.as_ref().ok().cloned())
        .collect();
    read_prior(svc, &mut good).await?;
    read_antecedents(svc, &mut good).await?;
    let answers = if good.is_empty() {
        Vec::new()
    } else {
        ask(&svc.inbox, |reply| Msg::Submit { jobs: good, reply }).await?
    };
    Ok(Response::new(pb::SubmitManyResponse {
        results: wire_results(parsed, answers),
    }))
}

/// The wire answers of a batch: a parse error where a jobspec was refused,
/// else the core's answer, in the order of the request.
fn wire_results(
    parsed: Vec<Result<SubmitArgs, Error>>,
    answers: Vec<Result<JobId, Error>>,
) -> Vec<pb::SubmitResult> {
    let mut answers = answers.into_iter();
    parsed
        .into_iter()
        .map(|p| {
            let r = match p {
                Err(e) => Err(e),
                Ok(_) => answers
                    .next()
                    .unwrap_or_else(|| Err(Error::Unavailable("no answer".into()))),
            };
            pb::SubmitResult {
                result: Some(match r {
                    Ok(id) => pb::submit_result::Result::Id(id.into()),
                    Err(e) => pb::submit_result::Result::Error(e.to_string()),
                }),
            }
        })
        .collect()
}

/// Find the stored jobs that earlier tries of these submissions made
/// (same owner and idempotency key): a retry answers that job.
async fn read_prior<S: Store>(
    svc: &JobManagerService<S>,
    jobs: &mut [SubmitArgs],
) -> Result<(), Error> {
    let wanted: Vec<(usize, u32, String)> = jobs
        .iter()
        .enumerate()
        .filter_map(|(i, j)| Some((i, j.userid, j.key.clone()?)))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let store = Arc::clone(&svc.store);
    let found = tokio::task::spawn_blocking(move || {
        wanted
            .into_iter()
            .map(|(i, uid, key)| store.job_by_key(uid, &key).map(|id| (i, id)))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| Error::Unavailable(format!("reading idempotency keys: {e}")))??;
    for (i, id) in found {
        jobs[i].prior = id.map(JobId::from);
    }
    Ok(())
}

/// Read the stored jobs that submissions' dependencies name, so the
/// core decides them without reading the store on its task.
async fn read_antecedents<S: Store>(
    svc: &JobManagerService<S>,
    jobs: &mut [SubmitArgs],
) -> Result<(), Error> {
    let wanted: Vec<(usize, Arc<Jobspec>)> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| Antecedents::needed(&j.jobspec))
        .map(|(i, j)| (i, Arc::clone(&j.jobspec)))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let store = Arc::clone(&svc.store);
    let read = tokio::task::spawn_blocking(move || {
        wanted
            .into_iter()
            .map(|(i, spec)| Antecedents::read(&*store, &spec).map(|a| (i, a)))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| Error::Unavailable(format!("reading dependencies: {e}")))??;
    for (i, antecedents) in read {
        jobs[i].antecedents = antecedents;
    }
    Ok(())
}

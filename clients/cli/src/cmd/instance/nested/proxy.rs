//! `fluxgate proxy` and `fluxgate uri`: reach the instance a job runs,
//! through the `uri` memo its rank 0 wrote and the owner token it keeps
//! for its user, descending `ID/ID2/...` into nested instances.

use super::*;

/// Run `fluxgate proxy ID [CMD]`.
pub fn run_proxy(args: ProxyArgs) -> anyhow::Result<ExitCode> {
    let rt = client::runtime()?;
    let mut signals = {
        let _guard = rt.enter();
        Signals::new()?
    };
    rt.block_on(async {
        let (uri, token) = resolve(&client::uri()?, &args.jobid).await?;
        if token.is_none() {
            eprintln!(
                "fluxgate-proxy: no credential for the instance at {uri} was found; \
                 {} is left unset",
                client::TOKEN_ENV
            );
        }
        // The caller's token is for another instance: unset without one.
        let env = [
            (client::URI_ENV, Some(uri.as_ref())),
            (client::TOKEN_ENV, token.as_deref().map(AsRef::as_ref)),
        ];
        run_command(&args.command, &env, &mut signals).await
    })
}

/// Run `fluxgate uri ID`: print the URI of the instance job ID runs.
pub fn run_uri(args: UriArgs) -> anyhow::Result<ExitCode> {
    client::block_on(async {
        // The URI is a memo the job wrote: never raw to a terminal.
        let uri = resolve(&client::uri()?, &args.jobid).await?.0;
        println!("{}", crate::output::printable(&uri));
        Ok(ExitCode::SUCCESS)
    })?
}

/// The URI of the instance that job `path` runs, from the instance at
/// `uri`; `ID/ID2/...` descends into nested instances, as flux's resolver.
/// With it, the owner token of that instance when this user (or root) has
/// it ([`access`]); none for an empty path (the instance at `uri` itself).
pub async fn resolve(uri: &str, path: &str) -> anyhow::Result<(String, Option<String>)> {
    let mut cur = uri.to_string();
    // The first instance is reached with the caller's own credentials; each
    // one below with the token its instance job keeps for its user.
    let mut creds = client::Credentials::from_env()?;
    let mut token = None;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let id = client::parse_jobid(part)?;
        let mut inst = client::connect_with(&cur, &creds).await?;
        let (next, owner) = memo_uri(&mut inst, id).await?;
        cur = next.ok_or_else(|| {
            anyhow!(
                "job {} is not an instance (it has no uri memo)",
                client::f58(id)
            )
        })?;
        token = access::read_owner_token(&cur, &access::lookup_uids(owner));
        creds = match &token {
            Some(t) => client::Credentials::default().with_token(t)?,
            None => client::Credentials::default(),
        };
    }
    Ok((cur, token))
}

/// The `uri` memo of job `id`, as its eventlog holds it now, and the job's
/// owner (its `submit` event's userid).
pub async fn memo_uri(
    inst: &mut Instance,
    id: JobId,
) -> anyhow::Result<(Option<String>, Option<u32>)> {
    let info = inst
        .jobs
        .info(pb::InfoRequest {
            id: id.as_u64(),
            keys: vec!["eventlog".into()],
            ..Default::default()
        })
        .await
        .map_err(client::status_error)?
        .into_inner();
    let text = info.values.get("eventlog").cloned().unwrap_or_default();
    let mut uri = None;
    let mut owner = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(ev) = client::parse_event(line) else {
            continue;
        };
        if ev.name == "submit" {
            owner = ev
                .ctx_i64("userid")
                .ok()
                .and_then(|u| u32::try_from(u).ok());
        } else if ev.name == "memo"
            && let Some(v) = ev.ctx("uri")
        {
            uri = v.as_str().map(str::to_string);
        }
    }
    Ok((uri, owner))
}

/// A connection to the instance job `id` runs (its `uri` memo) with the
/// credentials this user keeps for it, and its URI; `None` when the job
/// runs no instance.
pub async fn connect_inside(
    inst: &mut Instance,
    id: JobId,
) -> anyhow::Result<Option<(Instance, String)>> {
    let (Some(uri), owner) = memo_uri(inst, id).await? else {
        return Ok(None);
    };
    let creds = match access::read_owner_token(&uri, &access::lookup_uids(owner)) {
        Some(t) => client::Credentials::default().with_token(&t)?,
        None => client::Credentials::default(),
    };
    let child = client::connect_with(&uri, &creds).await?;
    Ok(Some((child, uri)))
}

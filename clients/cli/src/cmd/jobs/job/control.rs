//! `fluxgate job` commands that act on one job: attach, info, urgency,
//! raise, kill, wait, last (flux-core `src/cmd/job/*.c`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;

use crate::client;
use crate::cmd::jobs::attach;
use crate::cmd::jobs::submit::parse_urgency;
use crate::output::printable;

/// Arguments of `fluxgate job attach`.
#[derive(Debug, clap::Args)]
pub struct AttachArgs {
    /// Job id.
    id: String,
}

/// Run `fluxgate job attach`.
pub fn run_attach(args: AttachArgs) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        // As flux's attach: stdin goes to the job, if it takes any.
        let stdin = attach::StdinTo {
            ranks: Default::default(),
            quiet: true,
            terminal: false,
        };
        attach::attach(&mut inst, id, Some(stdin)).await
    })?
}

/// Arguments of `fluxgate job info`.
#[derive(Debug, clap::Args)]
pub struct InfoArgs {
    /// Job id.
    id: String,
    /// Keys: jobspec, R, eventlog, exec.eventlog (guest.exec.eventlog), output (guest.output).
    #[arg(required = true)]
    keys: Vec<String>,
}

/// Run `fluxgate job info`: each key's stored text.
pub fn run_info(args: InfoArgs) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    let keys: Vec<String> = args
        .keys
        .iter()
        .map(|k| match k.as_str() {
            "guest.exec.eventlog" => "exec.eventlog".to_string(),
            "guest.output" => "output".to_string(),
            other => other.to_string(),
        })
        .collect();
    client::block_on(async {
        let mut inst = client::connect().await?;
        let mut out = std::io::stdout().lock();
        // One key at a time, a log page by page: a long output never has
        // to fit in one reply, nor in memory here.
        for k in &keys {
            let mut offset = 0;
            loop {
                let mut resp = inst
                    .jobs
                    .info(pb::InfoRequest {
                        id: id.as_u64(),
                        keys: vec![k.clone()],
                        offset,
                        max_bytes: 0,
                    })
                    .await
                    .map_err(client::status_error)?
                    .into_inner();
                let v = resp
                    .values
                    .remove(k)
                    .ok_or_else(|| anyhow!("job {}: no key {k}", args.id))?;
                // The stored texts are printed as they are: the jobspec, R
                // and eventlogs are JSON (control characters escaped by
                // their writer) and the output log is the job's own data,
                // as flux passes it through.
                out.write_all(v.as_bytes())?;
                if !v.ends_with('\n') {
                    out.write_all(b"\n")?;
                }
                match resp.next_offset.get(k) {
                    Some(next) if resp.more && *next > offset => offset = *next,
                    _ => break,
                }
            }
        }
        out.flush()?;
        Ok(ExitCode::SUCCESS)
    })?
}

/// Arguments of `fluxgate job urgency`.
#[derive(Debug, clap::Args)]
pub struct UrgencyArgs {
    /// Output old urgency value on success.
    #[arg(short, long)]
    verbose: bool,
    /// Job id.
    id: String,
    /// New urgency: 0-31, hold, default or expedite.
    urgency: String,
}

/// Run `fluxgate job urgency`.
pub fn run_urgency(args: UrgencyArgs) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    let urgency = parse_urgency(&args.urgency)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let resp = inst
            .jobs
            .set_urgency(pb::SetUrgencyRequest {
                id: id.as_u64(),
                urgency,
            })
            .await
            .map_err(client::status_error)?
            .into_inner();
        if args.verbose {
            let name = |u: u32| match u {
                0 => "hold".to_string(),
                16 => "default".to_string(),
                31 => "expedite".to_string(),
                n => n.to_string(),
            };
            eprintln!(
                "{}: urgency changed from {} to {}",
                args.id,
                name(resp.old_urgency),
                name(urgency)
            );
        }
        Ok(ExitCode::SUCCESS)
    })?
}

/// Arguments of `fluxgate job raise`.
#[derive(Debug, clap::Args)]
pub struct RaiseArgs {
    /// Set exception severity [0-7] (default 0).
    #[arg(short, long, default_value_t = 0)]
    severity: u32,
    /// Set exception type (default cancel).
    #[arg(short = 't', long = "type", default_value = "cancel")]
    ty: String,
    /// Job ids, then an optional message.
    #[arg(required = true, trailing_var_arg = true)]
    args: Vec<String>,
}

/// Split `IDS... [--] [MESSAGE...]`: leading words that are job ids are ids.
fn ids_and_message(words: &[String]) -> anyhow::Result<(Vec<JobId>, String)> {
    let mut ids = Vec::new();
    let mut rest = words;
    while let Some((w, tail)) = rest.split_first() {
        if w == "--" {
            rest = tail;
            break;
        }
        match JobId::parse(w) {
            Ok(id) => ids.push(id),
            Err(_) if !ids.is_empty() => break,
            Err(_) => bail!("error parsing jobid: \"{w}\""),
        }
        rest = tail;
    }
    Ok((ids, rest.join(" ")))
}

/// Run `fluxgate job raise`.
pub fn run_raise(args: RaiseArgs) -> anyhow::Result<ExitCode> {
    if args.severity > 7 {
        bail!("severity must be between 0 and 7");
    }
    let (ids, note) = ids_and_message(&args.args)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let mut code = ExitCode::SUCCESS;
        for id in ids {
            if let Err(e) = inst
                .jobs
                .raise_exception(pb::RaiseExceptionRequest {
                    id: id.as_u64(),
                    r#type: args.ty.clone(),
                    severity: args.severity,
                    note: note.clone(),
                })
                .await
            {
                eprintln!(
                    "fluxgate-job: raise {}: {}",
                    client::f58(id),
                    printable(e.message())
                );
                code = ExitCode::FAILURE;
            }
        }
        Ok(code)
    })?
}

/// Arguments of `fluxgate job kill`.
#[derive(Debug, clap::Args)]
pub struct KillArgs {
    /// Send signal SIG (default SIGTERM).
    #[arg(short, long, default_value = "SIGTERM")]
    signal: String,
    /// Job ids.
    #[arg(required = true)]
    ids: Vec<String>,
}

/// A signal by number or name (with or without `SIG`).
pub fn parse_signal(s: &str) -> anyhow::Result<i32> {
    if let Ok(n) = s.parse::<i32>() {
        if n > 0 && n < 65 {
            return Ok(n);
        }
        bail!("invalid signal {s}");
    }
    let upper = s.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    name.parse::<nix::sys::signal::Signal>()
        .map(|sig| sig as i32)
        .map_err(|_| anyhow!("invalid signal {s}"))
}

/// Run `fluxgate job kill`.
pub fn run_kill(args: KillArgs) -> anyhow::Result<ExitCode> {
    let signum = parse_signal(&args.signal)?;
    let ids = client::parse_jobids(&args.ids)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let mut code = ExitCode::SUCCESS;
        for id in ids {
            if let Err(e) = inst
                .jobs
                .kill(pb::KillRequest {
                    id: id.as_u64(),
                    signum,
                })
                .await
            {
                eprintln!(
                    "fluxgate-job: kill {}: {}",
                    client::f58(id),
                    printable(e.message())
                );
                code = ExitCode::FAILURE;
            }
        }
        Ok(code)
    })?
}

/// Arguments of `fluxgate job wait`.
#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    /// Wait for all waitable jobs; exit 1 if any failed.
    #[arg(short, long)]
    all: bool,
    /// Emit a line of output for all jobs, not just failing ones.
    #[arg(short, long)]
    verbose: bool,
    /// Job id (default: any waitable job).
    id: Option<String>,
}

/// Run `fluxgate job wait`.
pub fn run_wait(args: WaitArgs) -> anyhow::Result<ExitCode> {
    let id = args.id.as_deref().map(client::parse_jobid).transpose()?;
    if args.all && id.is_some() {
        bail!("jobid not supported with --all");
    }
    client::block_on(async {
        let mut inst = client::connect().await?;
        if args.all {
            let mut failed = false;
            loop {
                match inst.jobs.wait(pb::WaitRequest { id: 0 }).await {
                    Ok(r) => {
                        let r = r.into_inner();
                        let jid = client::f58(JobId::from(r.id));
                        if !r.success {
                            failed = true;
                            eprintln!("{jid}: {}", printable(&r.error));
                        } else if args.verbose {
                            eprintln!("{jid}: job completed successfully");
                        }
                    }
                    // No waitable jobs remain.
                    Err(s)
                        if matches!(
                            s.code(),
                            tonic::Code::NotFound | tonic::Code::FailedPrecondition
                        ) =>
                    {
                        break;
                    }
                    Err(s) => return Err(client::status_error(s)),
                }
            }
            return Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            });
        }
        let r = inst
            .jobs
            .wait(pb::WaitRequest {
                id: id.map_or(0, JobId::as_u64),
            })
            .await
            .map_err(client::status_error)?
            .into_inner();
        if id.is_none() {
            println!("{}", client::f58(JobId::from(r.id)));
        }
        if r.success {
            Ok(ExitCode::SUCCESS)
        } else {
            Err(anyhow!("{}", r.error))
        }
    })?
}

/// Arguments of `fluxgate job last`.
#[derive(Debug, clap::Args)]
pub struct LastArgs {
    /// How many ids, or a Python-style slice `[start:stop]`.
    #[arg(default_value = "1")]
    which: String,
}

/// Run `fluxgate job last`: the user's most recently submitted jobs.
pub fn run_last(args: LastArgs) -> anyhow::Result<ExitCode> {
    let (start, stop) = match args
        .which
        .trim_matches(|c| c == '[' || c == ']')
        .split_once(':')
    {
        Some((a, b)) => (a.parse::<usize>().unwrap_or(0), b.parse::<usize>().ok()),
        None => (
            0,
            Some(args.which.parse::<usize>().map_err(|_| {
                anyhow!(
                    "invalid argument {:?}: expected N or [start:stop]",
                    args.which
                )
            })?),
        ),
    };
    client::block_on(async {
        let mut inst = client::connect().await?;
        let request = pb::ListRequest {
            states: 0x7f,
            userid: Some(nix::unistd::getuid().as_raw()),
            ..Default::default()
        };
        let mut jobs = crate::cmd::jobs::list_all(&mut inst, request).await?;
        if jobs.is_empty() {
            bail!("job history is empty");
        }
        jobs.sort_by(|a, b| b.t_submit.total_cmp(&a.t_submit).then(b.id.cmp(&a.id)));
        let stop = stop.unwrap_or(jobs.len()).min(jobs.len());
        for j in jobs.iter().take(stop).skip(start) {
            println!("{}", client::f58(JobId::from(j.id)));
        }
        Ok(ExitCode::SUCCESS)
    })?
}

//! The tasks that feed `fluxgate top`'s screens from the instance.
//!
//! An instance screen: one listing of every job, then the job journal
//! (`JobManager.Journal`), applied to the model in order; a RESYNC entry or
//! a broken stream starts over with a new listing and a new journal, so
//! that the listing always comes before the journal's snapshot (a job
//! listed active and missing from the snapshot ended in between). Nodes and
//! cores from `Resource.List` every [`RESOURCE_REFRESH`] and after each
//! allocation or release; the uptime from `Resource.Status`, once.
//!
//! An eventlog screen: `WatchEventlog` with follow, each line formatted as
//! `flux job eventlog` prints it.

use std::time::Duration;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::Event;
use fluxgate_shared::job::JobState;
use tokio::sync::mpsc;

use super::model::{Resources, Usage};
use crate::client::{self, Instance};
use crate::cmd::instance::probe;
use crate::cmd::jobs::job::eventlog::Formatter;

/// How often the nodes and cores are read besides after allocations:
/// resources are not jobs, and one call every two seconds costs nothing.
const RESOURCE_REFRESH: Duration = Duration::from_secs(2);

/// How long a broken journal waits before it is opened again.
const RETRY: Duration = Duration::from_secs(2);

/// Listing pages read at start and at each resync (each under 4 MiB): past
/// them, older inactive jobs are neither counted nor shown.
const MAX_LIST_PAGES: usize = 16;

/// What a screen's feed sends.
#[derive(Debug)]
pub enum Update {
    /// Every job, newest first (a fresh start).
    Listing(Vec<pb::JobSummary>),
    /// One journal entry (boxed: entries are large beside the others).
    Entry(Box<pb::JobJournalEntry>),
    /// The nodes and cores now.
    Resources(Resources),
    /// When the instance's job manager started.
    Started(f64),
    /// One eventlog line, formatted.
    Line(String),
    /// Something to say on the bottom line (an error, the end of a log).
    Status(String),
}

/// Feed an instance screen until it closes: list, follow the journal, and
/// start over on a resync or a broken stream.
pub async fn follow_instance(mut inst: Instance, tx: mpsc::Sender<Update>) {
    // The uptime is shown when the instance tells its start; older job
    // managers do not, and top goes on without it.
    if let Some(t) = probe::started(&mut inst).await
        && tx.send(Update::Started(t)).await.is_err()
    {
        return;
    }
    let mut resources = tokio::time::interval(RESOURCE_REFRESH);
    loop {
        match journal_once(&mut inst, &tx, &mut resources).await {
            Ok(Restart::Now) => continue,
            Ok(Restart::Closed) => return,
            Err(e) => {
                let msg = format!("{e:#} (retrying)");
                if tx.send(Update::Status(msg)).await.is_err() {
                    return;
                }
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Why one journal ended without an error.
enum Restart {
    /// The reader fell behind: list again, open a new journal.
    Now,
    /// The screen is gone.
    Closed,
}

/// One listing and one journal, followed until it resyncs or fails.
async fn journal_once(
    inst: &mut Instance,
    tx: &mpsc::Sender<Update>,
    resources: &mut tokio::time::Interval,
) -> anyhow::Result<Restart> {
    // The listing first, then the journal: every job the listing shows
    // active is in the journal's snapshot unless it ended in between.
    let rows = list_all(inst).await?;
    if tx.send(Update::Listing(rows)).await.is_err() {
        return Ok(Restart::Closed);
    }
    let mut stream = inst
        .jobs
        .journal(pb::JobJournalRequest {})
        .await
        .map_err(client::status_error)?
        .into_inner();
    loop {
        let update = tokio::select! {
            entry = stream.message() => {
                let Some(e) = entry.map_err(client::status_error)? else {
                    anyhow::bail!("the job manager ended the journal");
                };
                if e.kind() == pb::JobJournalKind::Resync {
                    let _ = tx.send(Update::Entry(Box::new(e))).await;
                    return Ok(Restart::Now);
                }
                // Allocations change the resource bars at once.
                if moves_resources(&e) {
                    resources.reset_immediately();
                }
                Update::Entry(Box::new(e))
            }
            _ = resources.tick() => match resource_usage(inst).await {
                Ok(r) => Update::Resources(r),
                Err(e) => Update::Status(format!("{e:#}")),
            },
        };
        if tx.send(update).await.is_err() {
            return Ok(Restart::Closed);
        }
    }
}

/// Does this entry allocate or free resources?
fn moves_resources(e: &pb::JobJournalEntry) -> bool {
    e.kind() == pb::JobJournalKind::Event
        && Event::parse_json(&e.event)
            .is_ok_and(|ev| matches!(ev.name.as_str(), "alloc" | "free" | "clean"))
}

/// Every job, newest first, up to [`MAX_LIST_PAGES`] pages.
async fn list_all(inst: &mut Instance) -> anyhow::Result<Vec<pb::JobSummary>> {
    let request = pb::ListRequest {
        states: JobState::ALL.iter().fold(0, |m, s| m | s.bit()),
        ..Default::default()
    };
    crate::cmd::jobs::list_pages(inst, request, MAX_LIST_PAGES).await
}

/// Nodes and cores used and in all, from `Resource.List`.
async fn resource_usage(inst: &mut Instance) -> anyhow::Result<Resources> {
    let r = probe::resource_sets(inst).await?;
    Ok(Resources {
        nodes: Usage {
            used: r.allocated.nnodes() as u64,
            total: r.all.nnodes() as u64,
        },
        cores: Usage {
            used: r.allocated.ncores(),
            total: r.all.ncores(),
        },
    })
}

/// Feed an eventlog screen: the job's eventlog lines as `flux job eventlog`
/// prints them, until the log is final.
pub async fn follow_eventlog(mut inst: Instance, id: u64, tx: mpsc::Sender<Update>) {
    let end = match eventlog_lines(&mut inst, id, &tx).await {
        Ok(()) => "the eventlog is complete; Esc/q: back".to_string(),
        Err(e) => format!("{e:#}; Esc/q: back"),
    };
    let _ = tx.send(Update::Status(end)).await;
}

async fn eventlog_lines(
    inst: &mut Instance,
    id: u64,
    tx: &mpsc::Sender<Update>,
) -> anyhow::Result<()> {
    let mut stream = crate::cmd::jobs::attach::watch(
        inst,
        fluxgate_shared::JobId::from(id),
        "eventlog",
        true,
        true,
    )
    .await?;
    let mut fmt = Formatter::from_parts("text", "raw", false)?;
    while let Some(line) = stream.message().await.map_err(client::status_error)? {
        let text = match client::parse_event(&line.line) {
            Ok(ev) => fmt.format(&line.line, &ev),
            Err(_) => crate::output::printable(&line.line).into_owned(),
        };
        if tx.send(Update::Line(text)).await.is_err() {
            return Ok(());
        }
    }
    Ok(())
}

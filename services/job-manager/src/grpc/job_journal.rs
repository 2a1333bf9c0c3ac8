//! `JobManager.Journal`: every job's state changes as one stream, as
//! flux-core's job-manager events journal (`job-manager.events-journal`).
//!
//! Protocol: the reader is subscribed to the hub first; then it gets one
//! SNAPSHOT entry per active job (its List row), then a SENTINEL, then one
//! EVENT entry per committed line of any job's main eventlog, in commit
//! order; a `submit` or `alloc` event also carries the job's List row. A line
//! committed between the subscription and the snapshot may arrive after a
//! snapshot row that already shows it, so readers apply events such that a
//! state never moves backwards. A reader that falls behind the hub gets
//! RESYNC, then a new snapshot and sentinel: flux's journal ends such a
//! stream, but a resync keeps a live view (`fluxgate top`) going on a busy
//! instance at the cost of one listing of the active jobs.
//!
//! Privilege: the instance owner, and a job's owner for that job, get the
//! lines as stored (what WatchEventlog gives them). Anyone else gets no more
//! than List shows every user: only the events List's fields reflect
//! (state, times, urgency, priority, wait status, fatal exception,
//! annotations), with only those context keys ([`redact`]).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::auth::Action;
use fluxgate_shared::auth::Caller;
use fluxgate_shared::job::StateMask;
use fluxgate_shared::{Event, JobId};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::allow;
use super::job_service::JobManagerService;
use super::list::{list_rows, summary_of};
use crate::auth::caller;
use crate::core::{ListFilter, Msg};
use crate::error::Error;
use crate::hub::{Hub, Published};
use crate::store::{Log, LogPos, Store};

/// Entries buffered per reader before its task waits for it; behind that
/// the hub's capacity decides when the reader must resync.
const JOURNAL_BUFFER: usize = 256;

/// The stream a Journal call answers.
pub type EntryStream = Pin<Box<dyn Stream<Item = Result<pb::JobJournalEntry, Status>> + Send>>;

type Tx = mpsc::Sender<Result<pb::JobJournalEntry, Status>>;

/// Open a journal for a caller who may list jobs.
pub fn open<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::JobJournalRequest>,
) -> Result<Response<EntryStream>, Status> {
    let caller = caller(&request)?;
    // The journal is a live listing: whoever may list may read it, and
    // each entry is cut to what that caller's List would show.
    allow(&caller, Action::ListJobs, None)?;
    let permit = svc.streams.open(&caller)?;
    let journal = JobJournal {
        inbox: svc.inbox.clone(),
        store: Arc::clone(&svc.store),
        hub: svc.hub.clone(),
        caller,
    };
    Ok(Response::new(journal.start(svc.cancel.clone(), permit)))
}

/// One reader's journal: what it needs to list jobs and follow the hub.
#[derive(Debug)]
pub struct JobJournal<S> {
    /// The core's inbox, for the snapshot and new jobs' rows.
    pub inbox: mpsc::Sender<Msg>,
    /// The store, for inactive rows and lines too long for the hub.
    pub store: Arc<S>,
    /// Committed lines.
    pub hub: Hub,
    /// Who reads, which decides what each entry may hold.
    pub caller: Caller,
}

/// The reader hung up, or was told of an error: its task ends.
struct Gone;

impl<S: Store> JobJournal<S> {
    /// Run the journal on its own task until the reader hangs up or
    /// `cancel` fires (shutdown ends every stream).
    pub fn start(
        self,
        cancel: CancellationToken,
        permit: super::streams::StreamPermit,
    ) -> EntryStream {
        let (tx, rx) = mpsc::channel(JOURNAL_BUFFER);
        tokio::spawn(async move {
            let _permit = permit;
            // A caller gone ends the stream at once, not at the next entry.
            tokio::select! {
                _ = self.run(&tx) => {}
                _ = cancel.cancelled() => {}
                _ = tx.closed() => {}
            }
        });
        Box::pin(ReceiverStream::new(rx))
    }

    /// Snapshot, then follow, resyncing whenever the reader falls behind.
    async fn run(&self, tx: &Tx) -> Gone {
        loop {
            // Subscribe before listing, so no line falls between them.
            let mut rx = self.hub.subscribe();
            let mut owners = match self.snapshot(tx).await {
                Ok(o) => o,
                Err(gone) => return gone,
            };
            loop {
                let published = match rx.recv().await {
                    Ok(p) => p,
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if send(tx, entry(pb::JobJournalKind::Resync, 0))
                            .await
                            .is_err()
                        {
                            return Gone;
                        }
                        break;
                    }
                    Err(broadcast::error::RecvError::Closed) => return Gone,
                };
                let step = match published {
                    Published::Line {
                        id,
                        log: Log::Main,
                        seq,
                        line,
                    } => self.forward(id, seq, line, &mut owners, tx).await,
                    Published::Inactive { id } => {
                        owners.remove(&id);
                        Ok(())
                    }
                    Published::Line { .. } | Published::Live { .. } => Ok(()),
                };
                if let Err(gone) = step {
                    return gone;
                }
            }
        }
    }

    /// Send a row per active job and the sentinel; the owner of each.
    async fn snapshot(&self, tx: &Tx) -> Result<HashMap<JobId, u32>, Gone> {
        let filter = ListFilter {
            states: Some(StateMask::ACTIVE),
            ..ListFilter::default()
        };
        let rows = match list_rows(&self.inbox, &self.store, filter).await {
            Ok((rows, _)) => rows,
            Err(e) => return Err(fail(tx, e.into()).await),
        };
        let mut owners = HashMap::with_capacity(rows.len());
        for row in rows {
            owners.insert(row.id, row.userid);
            let mut e = entry(pb::JobJournalKind::Snapshot, row.id.into());
            e.job = Some(summary_of(row));
            send(tx, e).await?;
        }
        send(tx, entry(pb::JobJournalKind::Sentinel, 0)).await?;
        Ok(owners)
    }

    /// Send line `seq` of job `id`'s main eventlog, as far as the reader
    /// may see it.
    async fn forward(
        &self,
        id: JobId,
        seq: u64,
        line: Option<Arc<str>>,
        owners: &mut HashMap<JobId, u32>,
        tx: &Tx,
    ) -> Result<(), Gone> {
        let text = match line {
            Some(l) => l.to_string(),
            // Too long for the hub: from the store.
            None => match self.stored_line(id, seq).await {
                Ok(Some(l)) => l,
                Ok(None) => return Ok(()),
                Err(status) => return Err(fail(tx, status).await),
            },
        };
        // Stored lines were valid when written; one that is not is skipped
        // rather than ending every reader's stream.
        let Ok(event) = Event::parse_json(&text) else {
            return Ok(());
        };
        let mut e = entry(pb::JobJournalKind::Event, id.into());
        // The row tells what the event does not: the name and sizes of a
        // new job, the nodes of an allocated one.
        if matches!(event.name.as_str(), "submit" | "alloc") {
            match self.row(id).await {
                Ok(Some(row)) => {
                    owners.insert(id, row.userid);
                    e.job = Some(row);
                }
                Ok(None) => {}
                Err(status) => return Err(fail(tx, status).await),
            }
        }
        let readable = self.caller.is_owner() || owners.get(&id) == Some(&self.caller.uid);
        e.event = if readable {
            text
        } else {
            match redact(&event) {
                Some(cut) => cut.to_json(),
                None => return Ok(()),
            }
        };
        send(tx, e).await
    }

    /// Job `id`'s List row, if it is still listed.
    async fn row(&self, id: JobId) -> Result<Option<pb::JobSummary>, Status> {
        let filter = ListFilter {
            states: Some(StateMask::ALL),
            // The listing is newest first below `before`: its first row
            // below id + 1 is the job itself, when it exists.
            before: Some(JobId::from(u64::from(id).saturating_add(1))),
            max: 1,
            ..ListFilter::default()
        };
        let (rows, _) = list_rows(&self.inbox, &self.store, filter).await?;
        Ok(rows.into_iter().find(|r| r.id == id).map(summary_of))
    }

    /// Line `seq` of job `id`'s stored main eventlog.
    async fn stored_line(&self, id: JobId, seq: u64) -> Result<Option<String>, Status> {
        let store = Arc::clone(&self.store);
        let (lines, _) = tokio::task::spawn_blocking(move || {
            store.read_log_page(id.into(), Log::Main, LogPos::line(seq), 1)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))?
        .map_err(Error::from)?;
        Ok(lines.into_iter().next())
    }
}

/// An entry of `kind` about job `id` (0: none), with nothing else set.
fn entry(kind: pb::JobJournalKind, id: u64) -> pb::JobJournalEntry {
    pb::JobJournalEntry {
        kind: kind.into(),
        id,
        ..Default::default()
    }
}

/// Send one entry; [`Gone`] once the reader has hung up.
async fn send(tx: &Tx, e: pb::JobJournalEntry) -> Result<(), Gone> {
    tx.send(Ok(e)).await.map_err(|_| Gone)
}

/// Tell the reader why its stream ends.
async fn fail(tx: &Tx, status: Status) -> Gone {
    let _ = tx.send(Err(status)).await;
    Gone
}

/// What a caller who may not read a job sees of one of its events: the
/// event with only the context keys List shows, or nothing for events List
/// does not reflect (memos, dependencies, non-fatal exceptions, jobspec
/// updates, exec steps).
pub fn redact(event: &Event) -> Option<Event> {
    let keep: &[&str] = match event.name.as_str() {
        // State changes and the times List shows.
        "validate" | "depend" | "start" | "clean" => &[],
        "submit" => &["userid", "urgency"],
        "urgency" => &["urgency"],
        "priority" => &["priority"],
        "alloc" | "annotations" => &["annotations"],
        "finish" => &["status"],
        // List shows a job's fatal exception (its type and note).
        "exception" if event.ctx_i64("severity") == Ok(0) => &["type", "severity", "note"],
        _ => return None,
    };
    let mut cut = Event::at(event.timestamp, event.name.clone());
    for key in keep {
        if let Some(v) = event.ctx(key) {
            cut = cut.with(*key, v.clone());
        }
    }
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_keeps_only_what_list_shows() {
        let table: &[(&str, Option<&str>)] = &[
            (
                r#"{"timestamp":1.5,"name":"submit","context":{"userid":7,"urgency":16,"flags":0,"version":1}}"#,
                Some(r#"{"timestamp":1.5,"name":"submit","context":{"userid":7,"urgency":16}}"#),
            ),
            (
                r#"{"timestamp":2.0,"name":"validate"}"#,
                Some(r#"{"timestamp":2.0,"name":"validate"}"#),
            ),
            (
                r#"{"timestamp":3.0,"name":"exception","context":{"type":"cancel","severity":0,"userid":7,"note":"x"}}"#,
                Some(
                    r#"{"timestamp":3.0,"name":"exception","context":{"type":"cancel","severity":0,"note":"x"}}"#,
                ),
            ),
            (
                r#"{"timestamp":3.0,"name":"exception","context":{"type":"warn","severity":2,"note":"secret"}}"#,
                None,
            ),
            (
                r#"{"timestamp":4.0,"name":"memo","context":{"uri":"http://x"}}"#,
                None,
            ),
            (
                r#"{"timestamp":4.0,"name":"jobspec-update","context":{"attributes.system.duration":60}}"#,
                None,
            ),
            (
                r#"{"timestamp":5.0,"name":"finish","context":{"status":256}}"#,
                Some(r#"{"timestamp":5.0,"name":"finish","context":{"status":256}}"#),
            ),
        ];
        for (line, want) in table {
            let event = Event::parse_json(line).expect(line);
            let got = redact(&event).map(|e| e.to_json());
            let want = want.map(|w| Event::parse_json(w).expect(w).to_json());
            assert_eq!(got, want, "{line}");
        }
    }
}

//! `JobManager.WatchEventlog` and `Wait`: a job's stored log lines, then
//! (when following) the lines the hub publishes until the job is inactive;
//! and waiting for a job to end. A follower of `output` that asks for it
//! also gets the job's live output (`live.rs`), marked live: first what was
//! held while nobody followed it, then each line as it comes.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::auth::Action;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::job_service::JobManagerService;
use super::{allow, ask};
use crate::auth::caller;
use crate::core::Msg;
use crate::error::Error;
use crate::hub::{Hub, Published};
use crate::store::{Log, LogPos, Store};

/// Lines buffered per watcher before the watcher's stream is back-pressured.
const WATCH_BUFFER: usize = 256;

/// Lines a watcher reads from the store at a time.
const PAGE_LINES: usize = 256;

/// The stream a WatchEventlog call answers.
pub type LineStream = Pin<Box<dyn Stream<Item = Result<pb::EventlogLine, Status>> + Send>>;

type Tx = mpsc::Sender<Result<pb::EventlogLine, Status>>;

/// Wait for a job (or any of the caller's waitable jobs) to end.
pub async fn wait<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::WaitRequest>,
) -> Result<Response<pb::WaitResponse>, Status> {
    allow(&caller(&request)?, Action::Wait, None)?;
    let req = request.into_inner();
    let id = (req.id != 0).then(|| JobId::from(req.id));
    let r = ask(&svc.inbox, |reply| Msg::Wait { id, reply }).await??;
    Ok(Response::new(pb::WaitResponse {
        id: r.id.into(),
        success: r.success,
        error: r.error,
    }))
}

/// Stream one of a job's logs, from a line on, following it when asked.
pub async fn watch_eventlog<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::WatchEventlogRequest>,
) -> Result<Response<LineStream>, Status> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let id = JobId::from(req.id);
    svc.authorize(&caller, Action::ReadJob, req.id).await?;
    let permit = svc.streams.open(&caller)?;
    let log = Log::from_key(&req.name).ok_or_else(|| {
        Error::Invalid(format!(
            "unknown eventlog {:?}: expected eventlog, exec.eventlog or output",
            req.name
        ))
    })?;
    // Subscribe before the first read, so nothing falls between them.
    let rx = svc.hub.subscribe();
    let following = svc.hub.follow(id);
    ask(&svc.inbox, |reply| Msg::Lookup { id, reply })
        .await??
        .ok_or(Error::UnknownJob(id))?;
    // Whether the logs are final is read from the store, not from the
    // core's memory, which may be ahead of what is durable: a job the core
    // already retired may still have its last events in the writer's queue.
    let store = Arc::clone(&svc.store);
    // A watcher resuming (after a failover) starts after what it saw.
    let (finished, first, pos) =
        final_and_first_page(&store, id, log, LogPos::line(req.from_line)).await?;
    // The job exists (checked above): no line means no log (RFC 18),
    // unless the watcher saw lines before.
    if first.is_empty() && req.from_line == 0 && (finished || !req.wait_create) {
        return Err(Error::NotFound(format!("job {id} has no {}", log.key())).into());
    }
    let (tx, out) = mpsc::channel(WATCH_BUFFER);
    let follow = req.follow && !finished;
    let live = follow && req.live && log == Log::Output;
    let cancel = svc.cancel.clone();
    let hub = svc.hub.clone();
    tokio::spawn(async move {
        let (_following, _permit) = (following, permit);
        let Some(next) = send_pages(&store, id, log, pos, Some(first), &tx).await else {
            return;
        };
        if follow {
            let (_following_live, live) = if live {
                match send_held(&hub, id, &tx).await {
                    Some((guard, sent)) => (Some(guard), Some(sent)),
                    None => return,
                }
            } else {
                (None, None)
            };
            // Shutdown ends followers, so that the server can stop; a
            // caller gone ends its follower at once, not at the job's
            // next event.
            let gone = tx.clone();
            let from = Position { next, live };
            tokio::select! {
                _ = follow_log(rx, store, id, log, from, tx) => {}
                _ = cancel.cancelled() => {}
                _ = gone.closed() => {}
            }
        }
    });
    Ok(Response::new(
        Box::pin(ReceiverStream::new(out)) as LineStream
    ))
}

/// Follow job `id`'s live output from now on, after sending what was held
/// for it; the numbers of the lines sent, or `None` once the reader is gone.
async fn send_held(
    hub: &Hub,
    id: JobId,
    tx: &Tx,
) -> Option<(crate::hub::FollowingLive, VecDeque<u64>)> {
    let (guard, held) = hub.follow_live(id);
    let mut sent = VecDeque::with_capacity(held.len());
    for (n, line) in held {
        if tx.send(Ok(live_line(&line))).await.is_err() {
            return None;
        }
        sent.push_back(n);
    }
    Some((guard, sent))
}

fn live_line(line: &str) -> pb::EventlogLine {
    pb::EventlogLine {
        line: line.to_string(),
        live: true,
    }
}

/// Where a follower is: the next stored line it wants and, when it follows
/// live output, the numbers of the held live lines it was sent (the
/// channel may bring them again).
struct Position {
    next: LogPos,
    live: Option<VecDeque<u64>>,
}

/// Whether live line `n` is to be sent to a follower at `live`.
fn wants_live(live: &mut Option<VecDeque<u64>>, n: u64) -> bool {
    let Some(sent) = live else {
        return false;
    };
    while sent.front().is_some_and(|s| *s < n) {
        sent.pop_front();
    }
    if sent.front() == Some(&n) {
        sent.pop_front();
        return false;
    }
    true
}

/// One page of a stored log from `from` on, and the position after it.
async fn read_page<S: Store>(
    store: &Arc<S>,
    id: JobId,
    log: Log,
    from: LogPos,
) -> Result<(Vec<String>, LogPos), Error> {
    let store = Arc::clone(store);
    let page =
        tokio::task::spawn_blocking(move || store.read_log_page(id.into(), log, from, PAGE_LINES))
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
    Ok(page)
}

/// Send `page` (the lines before `pos`, when given), then the stored lines
/// from `pos` on, a page at a time, so that a reader that does not read
/// holds up one page, never a copy of the whole log. The position reached,
/// or `None` once the reader is gone or a read failed (the reader was told).
async fn send_pages<S: Store>(
    store: &Arc<S>,
    id: JobId,
    log: Log,
    mut pos: LogPos,
    mut page: Option<Vec<String>>,
    tx: &Tx,
) -> Option<LogPos> {
    loop {
        let lines = match page.take() {
            Some(lines) => lines,
            None => match read_page(store, id, log, pos).await {
                Ok((lines, next)) => {
                    pos = next;
                    lines
                }
                Err(e) => {
                    let _ = tx.send(Err(e.into())).await;
                    return None;
                }
            },
        };
        let more = lines.len() == PAGE_LINES;
        for line in lines {
            if tx
                .send(Ok(pb::EventlogLine { line, live: false }))
                .await
                .is_err()
            {
                return None;
            }
        }
        if !more {
            return Some(pos);
        }
    }
}

/// Whether the job's stored eventlog is final (it ends with `clean`), and
/// the first page of `log` from `from`, in one trip off the runtime.
/// Finality first, lines second: when the log was already final, the lines
/// read after hold all of it; when it was not, a subscription made before
/// this call delivers whatever comes after the read.
async fn final_and_first_page<S: Store>(
    store: &Arc<S>,
    id: JobId,
    log: Log,
    from: LogPos,
) -> Result<(bool, Vec<String>, LogPos), Error> {
    let store = Arc::clone(store);
    let read = tokio::task::spawn_blocking(move || {
        let main = store.read_log(id.into(), Log::Main)?.unwrap_or_default();
        let finished = main
            .last()
            .and_then(|l| fluxgate_shared::Event::parse_json(l).ok())
            .is_some_and(|e| e.name == "clean");
        let (lines, next) = store.read_log_page(id.into(), log, from, PAGE_LINES)?;
        Ok::<_, crate::store::StoreError>((finished, lines, next))
    })
    .await
    .map_err(|e| Error::Internal(e.to_string()))??;
    Ok(read)
}

/// Stream published lines from position `next` until the job is inactive.
async fn follow_log<S: Store>(
    mut rx: broadcast::Receiver<Published>,
    store: Arc<S>,
    id: JobId,
    log: Log,
    from: Position,
    tx: Tx,
) {
    let Position { mut next, mut live } = from;
    loop {
        let msg = match rx.recv().await {
            Ok(m) => m,
            Err(broadcast::error::RecvError::Lagged(_)) => {
                // Fell behind the hub: catch up from the store, then go on.
                match send_pages(&store, id, log, next, None, &tx).await {
                    Some(pos) => next = pos,
                    None => return,
                }
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        match msg {
            Published::Line {
                id: lid,
                log: llog,
                seq,
                line,
            } if lid == id && llog == log => {
                if seq < next.line {
                    continue;
                }
                let Some(line) = line else {
                    // Too long for the hub: this line and what follows it
                    // from the store.
                    match send_pages(&store, id, log, LogPos::line(seq), None, &tx).await {
                        Some(pos) => next = pos,
                        None => return,
                    }
                    continue;
                };
                next = LogPos::line(seq + 1);
                if tx
                    .send(Ok(pb::EventlogLine {
                        line: line.to_string(),
                        live: false,
                    }))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Published::Live { id: lid, n, line } if lid == id && wants_live(&mut live, n) => {
                let sent = tx.send(Ok(live_line(&line))).await;
                if sent.is_err() {
                    return;
                }
            }
            Published::Inactive { id: lid } if lid == id => return,
            _ => {}
        }
    }
}

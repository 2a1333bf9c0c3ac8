//! Following a job's eventlog across a failover: when the job manager that
//! served the watch goes away and standbys share its store, the watch is
//! opened again on the new leader after the last line it gave, so no line
//! is given twice or skipped.

use std::time::Instant;

use fluxgate_proto::v1 as pb;

use crate::client::{self, Instance};

/// A watch of one eventlog that resumes after a failover.
#[derive(Debug)]
pub struct LogWatch {
    inst: Instance,
    request: pb::WatchEventlogRequest,
    stream: tonic::Streaming<pb::EventlogLine>,
    /// Stored lines given so far (where a resumed watch starts); live
    /// output is no line of the log.
    seen: u64,
}

impl LogWatch {
    /// Open `request` on `inst`.
    pub async fn open(
        inst: &Instance,
        request: pb::WatchEventlogRequest,
    ) -> Result<Self, tonic::Status> {
        let mut inst = inst.clone();
        let stream = inst
            .jobs
            .watch_eventlog(request.clone())
            .await?
            .into_inner();
        Ok(LogWatch {
            inst,
            request,
            stream,
            seen: 0,
        })
    }

    /// The next line; `None` when the log is final (or the watch ends).
    pub async fn message(&mut self) -> Result<Option<pb::EventlogLine>, tonic::Status> {
        let deadline = Instant::now() + client::FAILOVER_TIMEOUT;
        loop {
            match self.stream.message().await {
                Ok(Some(line)) => {
                    self.seen += u64::from(!line.live);
                    return Ok(Some(line));
                }
                Ok(None) => return Ok(None),
                Err(status)
                    if self.inst.has_standbys()
                        && client::is_failover(&status)
                        && Instant::now() < deadline =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    if self.inst.reconnect().await.is_err() {
                        continue;
                    }
                    let request = pb::WatchEventlogRequest {
                        from_line: self.request.from_line + self.seen,
                        // The log existed when lines were seen.
                        wait_create: self.request.wait_create || self.seen > 0,
                        ..self.request.clone()
                    };
                    if let Ok(s) = self.inst.jobs.watch_eventlog(request).await {
                        self.stream = s.into_inner();
                    }
                }
                Err(status) => return Err(status),
            }
        }
    }
}

//! Forwarding this process's standard input to a running job's tasks
//! (RFC 24 input), as `flux job attach` does for `flux run`: read on a
//! thread of its own (a read from a terminal blocks, and must not hold up
//! the exit), streamed in order through `JobManager.Input`, end of file
//! included.

use std::io::Read;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tonic::Code;

use crate::client::Instance;

/// Bytes read at once.
const CHUNK: usize = 64 * 1024;
/// Chunks queued toward the job manager.
const QUEUE: usize = 16;

/// Which tasks get the input: an RFC 22 idset, or empty for all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranks(pub String);

/// Send the terminal's size on every change (SIGWINCH).
fn follow_size(id: u64, tx: mpsc::Sender<pb::InputRequest>) {
    tokio::spawn(async move {
        let mut changes = signal(SignalKind::window_change()).ok();
        loop {
            let Some(c) = &mut changes else { return };
            if c.recv().await.is_none() {
                return;
            }
            if let Some((rows, cols)) = super::terminal::size() {
                let chunk = pb::InputRequest {
                    id,
                    rows,
                    cols,
                    ..Default::default()
                };
                if tx.send(chunk).await.is_err() {
                    return;
                }
            }
        }
    });
}

/// Start forwarding stdin to job `id`. A job that takes no input, or has
/// ended, refuses the stream, and nothing is said; `quiet` says nothing of
/// other failures either (`job attach` tries every job).
pub fn forward(inst: &Instance, id: JobId, ranks: Ranks, quiet: bool, terminal: bool) {
    let (tx, rx) = mpsc::channel::<pb::InputRequest>(QUEUE);
    let id = id.as_u64();
    if terminal {
        // The size first, before any key: the task's terminal has it when
        // the first line is read.
        if let Some((rows, cols)) = super::terminal::size() {
            let size = pb::InputRequest {
                id,
                rows,
                cols,
                ..Default::default()
            };
            let _ = tx.try_send(size);
        }
        follow_size(id, tx.clone());
    }
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let (data, eof) = match stdin.read(&mut buf) {
                Ok(0) | Err(_) => (Vec::new(), true),
                Ok(n) => (buf[..n].to_vec(), false),
            };
            let chunk = pb::InputRequest {
                id,
                ranks: ranks.0.clone(),
                data,
                eof,
                ..Default::default()
            };
            if tx.blocking_send(chunk).is_err() || eof {
                return;
            }
        }
    });
    let mut jobs = inst.jobs.clone();
    tokio::spawn(async move {
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        // A job that ended before its input arrived needs none: not news.
        if let Err(e) = jobs.input(stream).await
            && !quiet
            && !matches!(e.code(), Code::FailedPrecondition | Code::NotFound)
        {
            eprintln!(
                "fluxgate-job: stdin: {}",
                crate::output::printable(e.message())
            );
        }
    });
}

//! One task's PMI connection: the service's end of the task's socket pair,
//! read line by line into the job's driver and written from a small queue.
//!
//! A task that never speaks PMI costs one idle read until it exits; its
//! end of file (or the task's exit) closes the connection.

use std::os::fd::OwnedFd;

use fluxgate_shared::pmi::wire::MAX_LINE;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tracing::Instrument;

/// Answers queued for one task: PMI-1 clients wait for each answer before
/// their next request, so a few are plenty.
const REPLY_CAPACITY: usize = 16;

/// What a task's connection delivered to the driver.
#[derive(Debug)]
pub enum ClientEvent {
    /// One request line of task `rank`, its `\n` removed.
    Line { rank: u32, line: Vec<u8> },
    /// Task `rank` broke the protocol at the byte level (a line too long).
    Broken { rank: u32, why: String },
    /// Task `rank` closed its end.
    Closed { rank: u32 },
}

/// The driver's handle on one task's connection.
#[derive(Debug)]
pub struct Client {
    replies: mpsc::Sender<String>,
}

impl Client {
    /// Serve the service's end `fd` of task `rank`'s socket pair.
    pub fn serve(
        rank: u32,
        fd: OwnedFd,
        events: mpsc::Sender<ClientEvent>,
    ) -> std::io::Result<Client> {
        let std = std::os::unix::net::UnixStream::from(fd);
        std.set_nonblocking(true)?;
        let stream = UnixStream::from_std(std)?;
        let (replies, rx) = mpsc::channel(REPLY_CAPACITY);
        tokio::spawn(converse(rank, stream, events, rx).in_current_span());
        Ok(Client { replies })
    }

    /// Queue an answer; false when the task has gone or is not reading.
    pub fn reply(&self, line: String) -> bool {
        self.replies.try_send(line).is_ok()
    }
}

async fn converse(
    rank: u32,
    stream: UnixStream,
    events: mpsc::Sender<ClientEvent>,
    mut replies: mpsc::Receiver<String>,
) {
    let (read, mut write) = stream.into_split();
    // One byte over the limit tells an overlong line from a full one.
    let mut reader = BufReader::new(read).take(MAX_LINE as u64 + 1);
    let mut line = Vec::new();
    let mut reading = true;
    loop {
        tokio::select! {
            n = reader.read_until(b'\n', &mut line), if reading => {
                let event = match n {
                    Ok(0) | Err(_) => ClientEvent::Closed { rank },
                    Ok(_) if line.last() != Some(&b'\n') => {
                        if line.len() > MAX_LINE {
                            ClientEvent::Broken {
                                rank,
                                why: format!("a line of more than {MAX_LINE} bytes"),
                            }
                        } else {
                            // End of file within a line: what came is dropped.
                            ClientEvent::Closed { rank }
                        }
                    }
                    Ok(_) => {
                        line.pop();
                        ClientEvent::Line { rank, line: std::mem::take(&mut line) }
                    }
                };
                line.clear();
                reader.set_limit(MAX_LINE as u64 + 1);
                let last = !matches!(event, ClientEvent::Line { .. });
                if events.send(event).await.is_err() || last {
                    reading = false;
                }
            }
            r = replies.recv() => match r {
                Some(answer) => {
                    if write.write_all(answer.as_bytes()).await.is_err() {
                        // The task is gone; its end of file (or exit) follows.
                        if !reading {
                            return;
                        }
                    }
                }
                // The driver let go: the job is over.
                None => return,
            },
        }
    }
}

//! The standard input of a job's local tasks (RFC 24 input): a pipe per
//! task, written in order by one task of the job that takes chunks from
//! `Exec.Input`, each chunk for some task ranks or all of them; end of file
//! closes the pipes it names.
//!
//! A job whose jobspec asks for no input service gets /dev/null instead,
//! as a `submit` without `--input` always has.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use fluxgate_shared::IdSet;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tracing::Instrument;

/// Chunks queued for a job's tasks: the caller waits beyond this many, so
/// a task that does not read slows its sender, never the service.
const CHUNK_CAPACITY: usize = 16;

/// Input for some of a job's tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The task ranks it is for; `None` for every task.
    pub ranks: Option<IdSet>,
    /// The bytes.
    pub data: Vec<u8>,
    /// The input of those ranks ends after these bytes.
    pub eof: bool,
    /// The input of every other task ends now (the first chunk of a
    /// stream meant for some tasks only: `run --input=RANKS`).
    pub others_eof: bool,
    /// The caller's terminal size (rows, columns), for the tasks' ptys.
    pub winsize: Option<(u16, u16)>,
}

/// Where one task's input goes.
#[derive(Debug)]
pub enum Target {
    /// A pipe made here, its read end the task's stdin.
    Pipe,
    /// The master end of the task's terminal.
    Pty(OwnedFd),
}

/// The read ends of a node's task pipes, by task rank, to hand to the
/// tasks, and the sender that feeds the write ends.
#[derive(Debug)]
pub struct Pipes {
    /// Each local task's stdin.
    pub readers: BTreeMap<u32, Arc<OwnedFd>>,
    /// Where the job's input chunks go.
    pub sender: mpsc::Sender<Chunk>,
}

type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// Make each task's way in and the task that writes them.
pub fn open(targets: BTreeMap<u32, Target>) -> std::io::Result<Pipes> {
    let mut readers = BTreeMap::new();
    let mut writers: BTreeMap<u32, Writer> = BTreeMap::new();
    let mut terminals = Vec::new();
    let mut terminal_ranks = Vec::new();
    for (rank, target) in targets {
        match target {
            Target::Pipe => {
                let (r, w) = std::io::pipe()?;
                readers.insert(rank, Arc::new(OwnedFd::from(r)));
                let w = pipe::Sender::from_owned_fd(OwnedFd::from(w))?;
                writers.insert(rank, Box::new(w));
            }
            Target::Pty(master) => {
                terminals.push(master.try_clone()?);
                terminal_ranks.push(rank);
                let file = tokio::fs::File::from_std(std::fs::File::from(master));
                writers.insert(rank, Box::new(file));
            }
        }
    }
    let (sender, rx) = mpsc::channel(CHUNK_CAPACITY);
    tokio::spawn(feed(writers, terminals, terminal_ranks, rx).in_current_span());
    Ok(Pipes { readers, sender })
}

async fn feed(
    mut writers: BTreeMap<u32, Writer>,
    terminals: Vec<OwnedFd>,
    terminal_ranks: Vec<u32>,
    mut rx: mpsc::Receiver<Chunk>,
) {
    while let Some(chunk) = rx.recv().await {
        if let Some((rows, cols)) = chunk.winsize {
            for t in &terminals {
                if let Err(e) = super::pty::resize(t, rows, cols) {
                    tracing::debug!(error = %e, "cannot resize a task's terminal");
                }
            }
        }
        if chunk.others_eof
            && let Some(set) = &chunk.ranks
        {
            writers.retain(|r, _| set.contains(*r));
        }
        let targets: Vec<u32> = writers
            .keys()
            .copied()
            .filter(|r| chunk.ranks.as_ref().is_none_or(|set| set.contains(*r)))
            .collect();
        for rank in targets {
            let Some(w) = writers.get_mut(&rank) else {
                continue;
            };
            // A task that has exited (or closed its stdin) takes no more.
            let written = async {
                w.write_all(&chunk.data).await?;
                w.flush().await
            };
            if !chunk.data.is_empty() && written.await.is_err() {
                writers.remove(&rank);
                continue;
            }
            if chunk.eof {
                // A terminal's end of input is its EOF character; closing
                // the master would hang the task up instead.
                if terminal_ranks.contains(&rank) {
                    let _ = w.write_all(b"\x04").await;
                    let _ = w.flush().await;
                }
                writers.remove(&rank);
            }
        }
        if writers.is_empty() {
            break;
        }
    }
}

/// Feed all of `file` to every task, then end their input.
pub async fn feed_file(mut file: tokio::fs::File, sender: mpsc::Sender<Chunk>) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buf).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the job's input file");
                0
            }
        };
        let chunk = Chunk {
            ranks: None,
            data: buf[..n].to_vec(),
            eof: n == 0,
            others_eof: false,
            winsize: None,
        };
        if sender.send(chunk).await.is_err() || n == 0 {
            return;
        }
    }
}

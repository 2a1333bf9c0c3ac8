//! A job's output (and input) files, opened with its owner's rights.
//!
//! A service running as root never resolves a path the owner wrote: it
//! spawns `fluxgate-exec open-as` (see [`crate::run_as`]), which becomes
//! the owner, enters the job's cwd, opens the files and passes their
//! descriptors back. A new file is then the owner's, created 0666 & ~umask,
//! and a symbolic link leads only where the owner may go. An unprivileged
//! service is the owner already and opens them itself, still relative to
//! the job's cwd.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};

use crate::bounded_open::{self, OPEN_TIMEOUT};
use crate::handoff::{
    Access, FileRequest, MAX_FILES, MAX_FRAME, OpenReply, OpenRequest, decode_reply, encode,
};
use crate::run_as::{self, RunAs};
use crate::wrapper::FALLBACK_DIR;

/// The mask new files are created with (the job carries none).
pub const UMASK: u32 = 0o022;

/// How much longer than [`OPEN_TIMEOUT`] the service waits for the
/// `open-as` helper (to start, switch and answer) before it kills it.
const HELPER_GRACE: Duration = Duration::from_secs(5);

/// Open `files` for a job whose cwd is `cwd`, as `who` (this process's own
/// identity when `None`). One result per file, in order, with the system's
/// words for a failure; `Err` when nothing could be tried.
pub async fn open(
    files: Vec<FileRequest>,
    cwd: Option<PathBuf>,
    who: Option<RunAs>,
) -> Result<Vec<Result<File, String>>, String> {
    if files.len() > MAX_FILES {
        return Err(format!("at most {MAX_FILES} files may be opened"));
    }
    let request = OpenRequest {
        cwd,
        umask: UMASK,
        files,
    };
    // Both ways block (a process to wait for, or a file system).
    tokio::task::spawn_blocking(move || match who {
        Some(who) => open_as(&request, &who),
        None => Ok(open_here(&request)),
    })
    .await
    .map_err(|e| format!("the file opener failed: {e}"))?
}

/// This process is the owner: open relative to the job's cwd (or /tmp when
/// it cannot be entered, where the task starts too).
fn open_here(request: &OpenRequest) -> Vec<Result<File, String>> {
    let base = match &request.cwd {
        Some(dir) if std::fs::read_dir(dir).is_ok() => Some(dir.as_path()),
        Some(_) => Some(Path::new(FALLBACK_DIR)),
        None => None,
    };
    let deadline = Instant::now() + OPEN_TIMEOUT;
    request
        .files
        .iter()
        .map(|f| {
            let path = match base {
                Some(base) => base.join(&f.path),
                None => f.path.clone(),
            };
            let mode = match f.access {
                Access::Write => bounded_open::Mode::Write {
                    create_mode: 0o666 & !request.umask,
                },
                Access::Read => bounded_open::Mode::Read,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            bounded_open::open(&path, mode, left).map_err(|e| e.to_string())
        })
        .collect()
}

/// Through `fluxgate-exec open-as`, which becomes `who` first.
fn open_as(request: &OpenRequest, who: &RunAs) -> Result<Vec<Result<File, String>>, String> {
    let exe = run_as::binary().map_err(|e| e.to_string())?;
    let (ours, theirs) =
        UnixStream::pair().map_err(|e| format!("cannot make a channel to open files: {e}"))?;
    // The temporary Command, holding our copy of `theirs`, is dropped at
    // the end of the statement: the helper's exit is then our end of file.
    // Spawned under the task spawn lock, so it inherits no task's descriptor.
    let spawning = crate::task::SPAWNING
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let child = Command::new(exe)
        .arg(run_as::OPEN_AS)
        .env_clear()
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the file opener: {e}"));
    drop(spawning);
    let mut child = child?;
    // The helper bounds its opens; this bounds the helper (a file system
    // that does not answer at all).
    let result = ours
        .set_read_timeout(Some(OPEN_TIMEOUT + HELPER_GRACE))
        .map_err(|e| format!("the file opener failed: {e}"))
        .and_then(|()| exchange(&ours, request, who));
    drop(ours);
    if result.is_ok() {
        // It answered, and exits.
        if let Err(e) = child.wait() {
            tracing::warn!(error = %e, "cannot wait for the file opener");
        }
    } else {
        let _ = child.kill();
        // Reaped elsewhere: a helper stuck in the kernel must not hold
        // this thread.
        std::thread::spawn(move || {
            let _ = child.wait();
        });
    }
    result
}

/// Send identity and request; receive the reply and its descriptors.
fn exchange(
    mut channel: &UnixStream,
    request: &OpenRequest,
    who: &RunAs,
) -> Result<Vec<Result<File, String>>, String> {
    let mut frames = encode(&Some(who)).map_err(|e| e.to_string())?;
    frames.extend(encode(request).map_err(|e| e.to_string())?);
    // A helper that failed early has closed its end: its reply says why.
    let sent = channel.write_all(&frames);
    let (bytes, mut fds) = receive(channel).map_err(|e| match &sent {
        Err(w) => format!("the file opener failed: {w}"),
        Ok(())
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            format!(
                "the file opener did not answer within {} s",
                (OPEN_TIMEOUT + HELPER_GRACE).as_secs()
            )
        }
        Ok(()) => format!("the file opener failed: {e}"),
    })?;
    let reply: OpenReply = decode_reply(&bytes)
        .map_err(|e| format!("the file opener failed: {e}"))?
        .ok_or_else(|| "the file opener ended without a reply".to_string())?;
    if let Some(error) = reply.error {
        return Err(error);
    }
    if reply.results.len() != request.files.len() {
        return Err("the file opener answered for other files than asked".into());
    }
    Ok(reply
        .results
        .into_iter()
        .map(|r| match r {
            Some(error) => Err(error),
            None => fds
                .pop_front()
                .map(File::from)
                .ok_or_else(|| "the file opener sent no descriptor".to_string()),
        })
        .collect())
}

/// Everything the helper writes until it ends, and the descriptors that
/// came with it (close-on-exec here, so no other task inherits them).
fn receive(channel: &UnixStream) -> io::Result<(Vec<u8>, VecDeque<OwnedFd>)> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FILES))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        channel,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = VecDeque::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    buf.truncate(got.bytes);
    let rest = channel;
    rest.take(MAX_FRAME as u64 + 4).read_to_end(&mut buf)?;
    Ok((buf, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unprivileged_open_is_relative_to_the_job_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let request = OpenRequest {
            cwd: Some(dir.path().to_path_buf()),
            umask: UMASK,
            files: vec![
                FileRequest {
                    path: "out".into(),
                    access: Access::Write,
                },
                FileRequest {
                    path: "missing/in".into(),
                    access: Access::Read,
                },
            ],
        };
        let got = open_here(&request);
        assert!(got[0].is_ok());
        assert!(dir.path().join("out").is_file());
        let e = got[1].as_ref().unwrap_err();
        assert!(e.contains("No such file or directory"), "{e}");
    }
}

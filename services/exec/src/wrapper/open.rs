//! `fluxgate-exec open-as`: become the job's owner, open its files from its
//! cwd, and pass the descriptors back to the exec service.

use std::fs::File;
use std::io::{IoSlice, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::Instant;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};

use crate::bounded_open::{self, OPEN_TIMEOUT};
use crate::handoff::{Access, MAX_FILES, OpenReply, OpenRequest, encode, read_frame};

/// The `open-as` mode; exits 0 once a reply was sent.
pub fn main() -> u8 {
    let mut channel = match super::take_channel() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fluxgate-exec open-as: no channel to the exec service: {e}");
            return 1;
        }
    };
    let (reply, files) = match open_all(&mut channel) {
        Ok(opened) => opened,
        Err(error) => (
            OpenReply {
                error: Some(error),
                results: Vec::new(),
            },
            Vec::new(),
        ),
    };
    match send(&channel, &reply, &files) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("fluxgate-exec open-as: cannot answer the exec service: {e}");
            1
        }
    }
}

/// Switch, read the request, open each file as the owner.
fn open_all(channel: &mut UnixStream) -> Result<(OpenReply, Vec<File>), String> {
    super::switch(channel)?;
    let request: OpenRequest =
        read_frame(channel).map_err(|e| format!("cannot read the files to open: {e}"))?;
    if request.files.len() > MAX_FILES {
        return Err(format!("at most {MAX_FILES} files may be opened"));
    }
    // Relative paths resolve against the job's cwd, as the task's own would.
    super::enter(request.cwd.as_deref())
        .map_err(|no| format!("cannot enter {}: {}", no.dir.display(), no.error))?;
    rustix::process::umask(rustix::fs::Mode::from_bits_truncate(request.umask & 0o777));
    let mut results = Vec::new();
    let mut files = Vec::new();
    // All of them within one timeout: the service waits no longer.
    let deadline = Instant::now() + OPEN_TIMEOUT;
    for file in &request.files {
        let mode = match file.access {
            Access::Write => bounded_open::Mode::Write { create_mode: 0o666 },
            Access::Read => bounded_open::Mode::Read,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match bounded_open::open(&file.path, mode, left) {
            Ok(f) => {
                files.push(f);
                results.push(None);
            }
            Err(e) => results.push(Some(e.to_string())),
        }
    }
    Ok((
        OpenReply {
            error: None,
            results,
        },
        files,
    ))
}

/// One frame, the opened files attached to its first byte.
fn send(channel: &UnixStream, reply: &OpenReply, files: &[File]) -> std::io::Result<()> {
    let frame = encode(reply)?;
    let fds: Vec<BorrowedFd<'_>> = files.iter().map(AsFd::as_fd).collect();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FILES))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other(
            "too many descriptors for one message",
        ));
    }
    let sent = sendmsg(
        channel,
        &[IoSlice::new(&frame)],
        &mut control,
        SendFlags::empty(),
    )?;
    let mut rest = channel;
    rest.write_all(frame.get(sent..).unwrap_or_default())
}

//! What the exec service hands its `run-as` and `open-as` wrappers over
//! their channel, and what they answer (the protocol is in
//! [`crate::run_as`]).
//!
//! A frame is a 4-byte big-endian length and that many bytes of JSON. JSON
//! rather than a packed layout: the messages are small, serde is already
//! here, and a frame stays readable in a trace.

use std::io::{self, Read};
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::rlimit::Rlimit;

/// Largest frame either side accepts: well above a jobspec's environment
/// (the kernel refuses more than a few MiB of argv and environment anyway).
pub const MAX_FRAME: usize = 16 << 20;

/// Most files one `open-as` request opens: stdin, stdout and stderr.
pub const MAX_FILES: usize = 3;

/// Most descriptors handed to one task: its stdin and what it inherits.
pub const MAX_INHERITED: usize = 4;

/// What `run-as` starts, read once it runs as the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskLaunch {
    /// Command and arguments; the command is looked up in the task's PATH.
    pub argv: Vec<String>,
    /// The whole environment of the task.
    pub env: Vec<(String, String)>,
    /// Working directory, when the job names one.
    pub cwd: Option<PathBuf>,
    /// Limits to set before the exec.
    pub rlimits: Vec<Rlimit>,
    /// The task's stdin comes as the first descriptor sent after this
    /// frame (otherwise it is /dev/null).
    #[serde(default)]
    pub stdin: bool,
    /// Variables naming the descriptors sent after this frame (after stdin),
    /// each set to its number in the task (`PMI_FD`).
    #[serde(default)]
    pub inherit: Vec<String>,
    /// The first descriptor sent is a terminal: the task's stdin, stdout,
    /// stderr and controlling terminal, in a session of its own.
    #[serde(default)]
    pub pty: bool,
}

/// Why `run-as` could not become the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartFailure {
    /// The command or directory that failed.
    pub what: String,
    /// The system's words for the failure.
    pub reason: String,
    /// The exit code a shell would give (127 not found, 126 not executable).
    pub code: u8,
}

/// Which way a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Access {
    /// Created if missing, truncated, write only (an output file).
    Write,
    /// Read only (an input file).
    Read,
}

/// One file a job asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRequest {
    /// The path as the job wrote it; relative to the job's cwd.
    pub path: PathBuf,
    /// How it is opened.
    pub access: Access,
}

/// What `open-as` opens, read once it runs as the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenRequest {
    /// The job's working directory (/tmp when it cannot be entered).
    pub cwd: Option<PathBuf>,
    /// File mode creation mask for new files.
    pub umask: u32,
    /// The files, in order.
    pub files: Vec<FileRequest>,
}

/// The answer of `open-as`: one entry per requested file, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenReply {
    /// Why nothing could be opened (the switch or the request failed).
    pub error: Option<String>,
    /// `None` for a file that was opened (its descriptor is the next one
    /// attached to the reply), else why it could not be.
    pub results: Vec<Option<String>>,
}

/// The frame that carries `message`.
pub fn encode<T: Serialize>(message: &T) -> io::Result<Vec<u8>> {
    let body = serde_json::to_vec(message).map_err(io::Error::other)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::other(format!("a frame of {} bytes is too large", body.len())))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Read exactly one frame from `r` and parse it.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = body_len(len)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    parse(&body)
}

/// Parse what a wrapper wrote before it ended: `None` when it wrote nothing.
pub fn decode_reply<T: DeserializeOwned>(bytes: &[u8]) -> io::Result<Option<T>> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let (len, body) = bytes
        .split_first_chunk::<4>()
        .ok_or_else(|| truncated(bytes.len()))?;
    let len = body_len(*len)?;
    let body = body.get(..len).ok_or_else(|| truncated(bytes.len()))?;
    parse(body).map(Some)
}

fn body_len(prefix: [u8; 4]) -> io::Result<usize> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::other(format!(
            "a frame of {len} bytes is too large"
        )));
    }
    Ok(len)
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> io::Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad frame: {e}")))
}

fn truncated(got: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("a frame ended early ({got} bytes)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_nothing_means_no_reply() {
        let f = StartFailure {
            what: "x".into(),
            reason: "No such file or directory".into(),
            code: 127,
        };
        let bytes = encode(&f).unwrap();
        assert_eq!(read_frame::<StartFailure>(&mut &bytes[..]).unwrap(), f);
        assert_eq!(decode_reply::<StartFailure>(&bytes).unwrap(), Some(f));
        assert_eq!(decode_reply::<StartFailure>(&[]).unwrap(), None);
        assert!(decode_reply::<StartFailure>(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading_the_body() {
        let mut bytes = u32::MAX.to_be_bytes().to_vec();
        bytes.extend_from_slice(b"{}");
        let e = read_frame::<OpenReply>(&mut &bytes[..]).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
    }
}

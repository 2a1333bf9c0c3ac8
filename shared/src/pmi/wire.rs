//! PMI-1 simple wire protocol lines (Flux RFC 13): parsing a client's
//! request and writing the server's answers.
//!
//! A line is space-separated `key=value` words ending in `\n`, the first
//! word `cmd=NAME` (or `mcmd=spawn`, the start of a multi-line spawn). A
//! word's value ends at the next blank, except `value=` of a put, which runs
//! to the end of the line (flux-core's `keyval_parse_string`): values may
//! hold blanks. Field lengths are bounded as flux-core bounds them; a field
//! that is too long is an error code in the answer, not a broken protocol.

/// Longest kvsname, in bytes (flux-core's `SIMPLE_KVS_NAME_MAX`).
pub const KVSNAME_MAX: usize = 64;
/// Longest key, in bytes.
pub const KEY_MAX: usize = 64;
/// Longest value, in bytes.
pub const VAL_MAX: usize = 1024;
/// Longest line a client may send, its `\n` included: the three fields
/// plus room for the words around them.
pub const MAX_LINE: usize = KVSNAME_MAX + KEY_MAX + VAL_MAX + 64;

/// `PMI_FAIL`: the generic failure code.
pub const RC_FAIL: i32 = -1;
/// `PMI_ERR_INVALID_KEY`: no such key.
pub const RC_INVALID_KEY: i32 = 4;
/// `PMI_ERR_INVALID_KEY_LENGTH`.
pub const RC_INVALID_KEY_LENGTH: i32 = 5;
/// `PMI_ERR_INVALID_VAL_LENGTH`.
pub const RC_INVALID_VAL_LENGTH: i32 = 7;
/// `PMI_ERR_INVALID_LENGTH`: the kvsname is too long.
pub const RC_INVALID_LENGTH: i32 = 8;

/// A line that breaks the protocol: the conversation cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Longer than [`MAX_LINE`].
    #[error("a line of more than {MAX_LINE} bytes")]
    TooLong,
    /// Not text.
    #[error("a line that is not UTF-8 text")]
    NotText,
    /// No `cmd=` (nor `mcmd=`) word.
    #[error("a line without cmd=: {0:?}")]
    NoCommand(String),
    /// A command this protocol does not have.
    #[error("unknown command {0:?}")]
    UnknownCommand(String),
    /// A request that cannot come at this point of the conversation.
    #[error("{0}")]
    OutOfOrder(&'static str),
    /// A field the command needs is missing or not a number.
    #[error("cmd={cmd}: field {field} is missing or malformed")]
    BadField {
        /// The command.
        cmd: String,
        /// The field.
        field: &'static str,
    },
}

/// One request of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `cmd=init`.
    Init {
        /// `pmi_version`.
        version: u32,
        /// `pmi_subversion`.
        subversion: u32,
    },
    /// `cmd=get_maxes`.
    GetMaxes,
    /// `cmd=get_appnum`.
    GetAppnum,
    /// `cmd=get_universe_size`.
    GetUniverseSize,
    /// `cmd=get_my_kvsname`.
    GetMyKvsname,
    /// `cmd=put`; `Err(rc)` when a field is too long.
    Put(Result<(String, String), i32>),
    /// `cmd=get`; `Err(rc)` when a field is too long.
    Get(Result<String, i32>),
    /// `cmd=barrier_in`.
    BarrierIn,
    /// `cmd=finalize`.
    Finalize,
    /// `cmd=abort`: the job is to end.
    Abort {
        /// `exitcode` (MPICH) or `exit_code` (older clients); 1 when absent.
        code: u32,
        /// `error_msg`, when the client sent one.
        message: Option<String>,
    },
    /// `cmd=publish_name`, `unpublish_name` or `lookup_name`: answered
    /// with a refusal under the given answer command.
    NotImplemented(&'static str),
    /// `mcmd=spawn`: the start of a multi-line spawn, refused at its `endcmd`.
    SpawnStart,
}

/// The value of `key=` among the line's words.
fn word<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_ascii_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// The value of `key=` to the end of the line (blanks included).
fn rest<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut at = 0;
    while let Some(i) = line[at..].find(key) {
        let start = at + i;
        let after = start + key.len();
        let boundary = start == 0 || line.as_bytes()[start - 1].is_ascii_whitespace();
        if boundary && line.as_bytes().get(after) == Some(&b'=') {
            let v = &line[after + 1..];
            return Some(v.strip_suffix('\n').unwrap_or(v));
        }
        at = start + 1;
    }
    None
}

fn number(line: &str, cmd: &str, field: &'static str) -> Result<u32, WireError> {
    word(line, field)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| WireError::BadField {
            cmd: cmd.to_string(),
            field,
        })
}

/// A bounded field: the text, `Err(rc)` when too long, a wire error when missing.
fn bounded(
    v: Option<&str>,
    max: usize,
    rc: i32,
    cmd: &str,
    field: &'static str,
) -> Result<Result<String, i32>, WireError> {
    let v = v.ok_or_else(|| WireError::BadField {
        cmd: cmd.to_string(),
        field,
    })?;
    // flux-core's buffers hold max-1 bytes and a NUL.
    Ok(if v.len() >= max {
        Err(rc)
    } else {
        Ok(v.to_string())
    })
}

/// Parse one line (with or without its `\n`).
pub fn parse(line: &[u8]) -> Result<Request, WireError> {
    if line.len() > MAX_LINE {
        return Err(WireError::TooLong);
    }
    let line = std::str::from_utf8(line).map_err(|_| WireError::NotText)?;
    if word(line, "mcmd") == Some("spawn") {
        return Ok(Request::SpawnStart);
    }
    let cmd = word(line, "cmd").ok_or_else(|| WireError::NoCommand(line.trim_end().into()))?;
    Ok(match cmd {
        "init" => Request::Init {
            version: number(line, cmd, "pmi_version")?,
            subversion: number(line, cmd, "pmi_subversion")?,
        },
        "get_maxes" => Request::GetMaxes,
        "get_appnum" => Request::GetAppnum,
        "get_universe_size" => Request::GetUniverseSize,
        "get_my_kvsname" => Request::GetMyKvsname,
        "barrier_in" => Request::BarrierIn,
        "finalize" => Request::Finalize,
        "put" => Request::Put(put_fields(line)?),
        "get" => Request::Get(get_fields(line)?),
        "abort" => Request::Abort {
            code: word(line, "exitcode")
                .or_else(|| word(line, "exit_code"))
                .and_then(|v| v.parse().ok())
                .unwrap_or(1),
            message: rest(line, "error_msg").map(str::to_string),
        },
        "publish_name" => Request::NotImplemented("publish_result"),
        "unpublish_name" => Request::NotImplemented("unpublish_result"),
        "lookup_name" => Request::NotImplemented("lookup_result"),
        other => return Err(WireError::UnknownCommand(other.to_string())),
    })
}

fn put_fields(line: &str) -> Result<Result<(String, String), i32>, WireError> {
    let name = bounded(
        word(line, "kvsname"),
        KVSNAME_MAX,
        RC_INVALID_LENGTH,
        "put",
        "kvsname",
    )?;
    let key = bounded(
        word(line, "key"),
        KEY_MAX,
        RC_INVALID_KEY_LENGTH,
        "put",
        "key",
    )?;
    let value = bounded(
        rest(line, "value"),
        VAL_MAX,
        RC_INVALID_VAL_LENGTH,
        "put",
        "value",
    )?;
    Ok(name.and(key).and_then(|k| value.map(|v| (k, v))))
}

fn get_fields(line: &str) -> Result<Result<String, i32>, WireError> {
    let name = bounded(
        word(line, "kvsname"),
        KVSNAME_MAX,
        RC_INVALID_LENGTH,
        "get",
        "kvsname",
    )?;
    let key = bounded(
        word(line, "key"),
        KEY_MAX,
        RC_INVALID_KEY_LENGTH,
        "get",
        "key",
    )?;
    Ok(name.and(key))
}

/// True for the line that ends a multi-line command.
pub fn is_endcmd(line: &[u8]) -> bool {
    line.strip_suffix(b"\n").unwrap_or(line) == b"endcmd"
}

/// The answer to `init`: version 1.1 is the one spoken.
pub fn init_reply(version: u32, subversion: u32) -> String {
    if version == 1 && subversion >= 1 {
        "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n".into()
    } else {
        format!("cmd=response_to_init rc={RC_FAIL}\n")
    }
}

/// The answer to `get_maxes`.
pub fn maxes_reply() -> String {
    format!("cmd=maxes rc=0 kvsname_max={KVSNAME_MAX} keylen_max={KEY_MAX} vallen_max={VAL_MAX}\n")
}

/// The answer to a `get`.
pub fn get_reply(value: Result<&str, i32>) -> String {
    match value {
        Ok(v) => format!("cmd=get_result rc=0 value={v}\n"),
        Err(RC_INVALID_KEY) => format!("cmd=get_result rc={RC_INVALID_KEY} msg=key_not_found\n"),
        Err(rc) => format!("cmd=get_result rc={rc}\n"),
    }
}

/// The answer a barrier's end sends every client.
pub fn barrier_out(rc: i32) -> String {
    format!("cmd=barrier_out rc={rc}\n")
}

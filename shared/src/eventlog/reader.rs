//! Reading whole eventlogs (strict and lenient) and following a growing one.

use super::{Event, EventError, parse};

/// A bad line of an eventlog: its 1-based number and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("eventlog line {line}: {error}")]
pub struct EventlogError {
    /// 1-based line number.
    pub line: usize,
    /// Why the line is not an event.
    pub error: EventError,
}

/// What a lenient read recovered: the good events, and the bad lines it skipped.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LenientEventlog {
    /// Events of the good lines, in log order.
    pub events: Vec<Event>,
    /// One entry per bad line, in log order.
    pub errors: Vec<EventlogError>,
}

/// Read a whole eventlog, failing at the first bad line (flux-core
/// `eventlog_decode()`). The empty string is a valid, empty log.
///
/// flux-core ignores text after the last newline when the log has one; here such
/// a torn last line is an error, since RFC 18 ends every event with `\n`.
pub fn parse_eventlog(log: &str) -> Result<Vec<Event>, EventlogError> {
    let mut events = Vec::new();
    for (line, parsed) in read_lines(log) {
        events.push(parsed.map_err(|error| EventlogError { line, error })?);
    }
    Ok(events)
}

/// Read a whole eventlog, keeping every good event and reporting each bad line
/// (for recovery code that must go on past a damaged record or a torn tail).
pub fn parse_eventlog_lenient(log: &str) -> LenientEventlog {
    let mut out = LenientEventlog::default();
    for (line, parsed) in read_lines(log) {
        match parsed {
            Ok(event) => out.events.push(event),
            Err(error) => out.errors.push(EventlogError { line, error }),
        }
    }
    out
}

/// Every line of `log` parsed, with its 1-based number.
fn read_lines(log: &str) -> impl Iterator<Item = (usize, Result<Event, EventError>)> {
    let mut rest = log;
    let mut line = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        line += 1;
        // Most lines are read and delimited in one pass; the others are
        // split at their newline first.
        let (parsed, len) = match parse::flux_shaped_line(rest) {
            Some((event, len)) => (Ok(event), len),
            None => {
                let len = rest.find('\n').map_or(rest.len(), |i| i + 1);
                (split_line(&rest[..len]), len)
            }
        };
        rest = &rest[len..];
        Some((line, parsed))
    })
}

/// One line (with its `\n`, which only the last line may lack) parsed.
fn split_line(text: &str) -> Result<Event, EventError> {
    match text.strip_suffix('\n') {
        None => Err(EventError::MissingNewline),
        Some("") => Err(EventError::Empty),
        Some(body) => parse::event(body),
    }
}

/// Splits a growing eventlog into complete lines, for followers that receive it in
/// arbitrary chunks (a partial line waits for the rest; chunks may split UTF-8).
#[derive(Debug, Clone, Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
    /// Start of the first line not yet returned.
    start: usize,
    /// Lines returned so far.
    lines: usize,
}

impl LineSplitter {
    /// An empty splitter at line 1.
    pub fn new() -> Self {
        LineSplitter::default()
    }

    /// Add the next bytes of the log.
    pub fn push(&mut self, chunk: &[u8]) {
        // Drop consumed lines once they are the bigger part, so the buffer stays
        // about the size of what is pending.
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete line (with its `\n`) and its 1-based number, or `None`
    /// until one has fully arrived.
    pub fn next_line(&mut self) -> Option<(usize, &[u8])> {
        let rest = &self.buf[self.start..];
        let len = rest.iter().position(|&b| b == b'\n')? + 1;
        let begin = self.start;
        self.start += len;
        self.lines += 1;
        Some((self.lines, &self.buf[begin..begin + len]))
    }

    /// The next complete line parsed as an event, or `None` until one has arrived.
    pub fn next_event(&mut self) -> Option<Result<Event, EventlogError>> {
        let (line, bytes) = self.next_line()?;
        let parsed = std::str::from_utf8(bytes)
            .map_err(|_| EventError::NotUtf8)
            .and_then(Event::parse_line)
            .map_err(|error| EventlogError { line, error });
        Some(parsed)
    }

    /// Bytes received after the last complete line.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Number of complete lines returned so far.
    pub fn lines_read(&self) -> usize {
        self.lines
    }
}

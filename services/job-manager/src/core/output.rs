//! Output accounting: each job's stored output is bounded.
//!
//! The job manager is the single writer of a job's `output` eventlog (RFC 24),
//! so the bound is kept here, where exec's lines are appended, as flux-core's
//! shell keeps it where it writes the KVS (`src/shell/output/kvs.c`): the
//! decoded bytes of `data` events are counted per job (stdout and stderr
//! together); once the count passes the limit, further data is dropped
//! (end-of-stream marks are kept, without data), the job gets one non-fatal
//! exception (type `output`, severity 1), and when it ends one `log` line per
//! stream says how much was dropped ("stdout: N of M bytes truncated", as
//! flux's shell writes it). The limit is the smaller of `[output] limit` and
//! the job's shell option `output.limit`.
//!
//! What an interactive terminal shows without `pty.capture` is not output
//! of the job's record (flux's shell leaves it out of the eventlog): exec
//! sends it apart, and it goes to the job's live watchers only, neither
//! stored nor counted against the budget.

use fluxgate_shared::{Event, JobId, Jobspec};
use serde_json::{Map, Value};

use super::Core;
use super::effect::Effect;
use crate::config::parse_size;
use crate::error::Error;
use crate::hub::HUB_LINE_MAX;
use crate::store::{Log, LogPos, Store};

/// Lines read at a time when the count is rebuilt after a restart.
const RECOUNT_PAGE: usize = 1024;

/// One job's output so far against its limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputBudget {
    /// Most data bytes kept; `None`: no limit.
    limit: Option<u64>,
    /// Data bytes seen on stdout and stderr (kept or not).
    seen: [u64; 2],
    /// Data bytes dropped on stdout and stderr.
    dropped: [u64; 2],
    /// The limit was passed (the exception is raised once).
    over: bool,
}

/// What to do with one output line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Store it as it is.
    Keep,
    /// Store this line instead (the data was dropped, the end mark kept).
    Replace(String),
    /// Store nothing.
    Drop,
}

impl OutputBudget {
    /// A budget of `limit` bytes (`None`: unlimited).
    pub fn new(limit: Option<u64>) -> OutputBudget {
        OutputBudget {
            limit,
            ..Default::default()
        }
    }

    /// The budget of a job: the smaller of the configured limit (0: none)
    /// and the job's own `output.limit` (an invalid one counts as none: it
    /// was refused at submit, so only an older stored job can hold one).
    pub fn for_job(config_limit: u64, jobspec: &Jobspec) -> OutputBudget {
        let config = (config_limit > 0).then_some(config_limit);
        let own = job_limit(jobspec).ok().flatten();
        let limit = match (config, own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        OutputBudget::new(limit)
    }

    /// The limit, if any.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Has the limit been passed?
    pub fn is_over(&self) -> bool {
        self.over
    }

    /// Count `event` (a parsed output line): whether and what to store, and
    /// whether this line is the one that passed the limit.
    pub fn account(&mut self, event: &Event) -> (Verdict, bool) {
        let Some((stream, len, eof)) = data_of(event) else {
            return (Verdict::Keep, false);
        };
        let slot = usize::from(stream == "stderr");
        self.seen[slot] += len;
        let Some(limit) = self.limit else {
            return (Verdict::Keep, false);
        };
        if len == 0 {
            return (Verdict::Keep, false);
        }
        let total = self.seen[0] + self.seen[1];
        if total <= limit {
            return (Verdict::Keep, false);
        }
        self.dropped[slot] += len;
        let first = !self.over;
        self.over = true;
        let verdict = if eof {
            Verdict::Replace(without_data(event))
        } else {
            Verdict::Drop
        };
        (verdict, first)
    }

    /// Count a line already stored (rebuilding after a restart).
    pub fn recount(&mut self, event: &Event) {
        if let Some((stream, len, _)) = data_of(event) {
            self.seen[usize::from(stream == "stderr")] += len;
        }
    }

    /// The `log` lines that say what was dropped, one per stream that lost data.
    pub fn truncation_lines(&self, now: f64) -> Vec<String> {
        ["stdout", "stderr"]
            .into_iter()
            .enumerate()
            .filter(|(i, _)| self.dropped[*i] > 0)
            .map(|(i, stream)| {
                let message = format!(
                    "{stream}: {} of {} bytes truncated",
                    self.dropped[i], self.seen[i]
                );
                let ctx: Map<String, Value> = [
                    ("rank".to_string(), Value::from(0)),
                    ("level".to_string(), Value::from(4)),
                    ("message".to_string(), Value::from(message)),
                ]
                .into_iter()
                .collect();
                Event::new(now, "log", Some(ctx)).to_json()
            })
            .collect()
    }
}

/// The job's shell option `output.limit` in bytes (`None`: not set), or why
/// it is not a size. As flux's shell: a positive integer, or a string such
/// as `10M`.
pub fn job_limit(jobspec: &Jobspec) -> Result<Option<u64>, Error> {
    let Some(value) = jobspec
        .shell_options()
        .get("output")
        .and_then(|o| o.get("limit"))
    else {
        return Ok(None);
    };
    let bytes = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => parse_size(s),
        _ => None,
    };
    match bytes {
        Some(b) if b > 0 => Ok(Some(b)),
        _ => Err(Error::Invalid(format!(
            "shell option output.limit={value}: expected a positive size such as 10M, 1G or bytes"
        ))),
    }
}

/// A size as people read it: `1 GiB`, `10 MiB`, `512 KiB`, else bytes.
pub fn human_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// Stream, decoded data length and end mark of a `data` event.
fn data_of(event: &Event) -> Option<(String, u64, bool)> {
    if event.name != "data" {
        return None;
    }
    let ctx = event.context.as_ref()?;
    let stream = ctx.get("stream")?.as_str().unwrap_or("stdout").to_string();
    let eof = ctx.get("eof").and_then(Value::as_bool).unwrap_or(false);
    let len = match ctx.get("data").and_then(Value::as_str) {
        None => 0,
        Some(d) if ctx.get("encoding").and_then(Value::as_str) == Some("base64") => {
            let pad = d.bytes().rev().take_while(|b| *b == b'=').count();
            (d.len() / 4 * 3).saturating_sub(pad) as u64
        }
        Some(d) => d.len() as u64,
    };
    Some((stream, len, eof))
}

/// `event` without its data: the end-of-stream mark alone.
fn without_data(event: &Event) -> String {
    let mut ctx: Map<String, Value> = event.context.clone().map(Into::into).unwrap_or_default();
    ctx.remove("data");
    ctx.remove("encoding");
    Event::new(event.timestamp, event.name.as_str(), Some(ctx)).to_json()
}

impl<S: Store> Core<S> {
    /// Append an output line from exec within the job's budget.
    pub(super) fn append_output(&mut self, id: JobId, event: &Event, line: String) {
        let Some(active) = self.jobs.get_mut(&id) else {
            return;
        };
        let (verdict, passed) = active.output.account(event);
        let limit = active.output.limit();
        match verdict {
            Verdict::Keep => self.append_line(id, Log::Output, line),
            Verdict::Replace(l) => self.append_line(id, Log::Output, l),
            Verdict::Drop => {}
        }
        if passed && let Some(limit) = limit {
            let note = format!(
                "output limit of {} exceeded; further output is discarded",
                human_size(limit)
            );
            tracing::info!(job = %id, %note, "output limit passed");
            let _ = self.raise(id, "output", 1, &note, None);
        }
    }

    /// Show a live-only output line to the job's watchers, in its place
    /// among the lines queued before it; never stored. Only an active
    /// job's, and only one valid `data` event short enough for the hub
    /// (exec cuts them to fit).
    pub(super) fn live_output(&mut self, id: JobId, line: String) {
        if !self.jobs.contains_key(&id) {
            return;
        }
        let valid =
            line.len() <= HUB_LINE_MAX && Event::parse_json(&line).is_ok_and(|e| e.name == "data");
        if !valid {
            tracing::warn!(job = %id, len = line.len(), "dropping a bad live output line from exec");
            return;
        }
        self.effect(Effect::Live {
            id,
            line: line.into(),
        });
    }

    /// Say in the output log what was dropped; called as the job ends.
    pub(super) fn close_output(&mut self, id: JobId) {
        let Some(active) = self.jobs.get(&id) else {
            return;
        };
        let lines = active.output.truncation_lines(crate::clock::now());
        for line in lines {
            self.append_line(id, Log::Output, line);
        }
    }

    /// Rebuild a recovered job's count from its stored output.
    pub(super) fn recount_output(
        &self,
        id: JobId,
        budget: &mut OutputBudget,
        events: &[Event],
    ) -> Result<(), Error> {
        budget.over = events.iter().any(|e| {
            e.name == "exception"
                && e.context
                    .as_ref()
                    .and_then(|c| c.get("type"))
                    .and_then(Value::as_str)
                    == Some("output")
        });
        let mut pos = LogPos::line(0);
        loop {
            let (lines, next) =
                self.store
                    .read_log_page(id.into(), Log::Output, pos, RECOUNT_PAGE)?;
            for line in &lines {
                if let Ok(e) = Event::parse_json(line) {
                    budget.recount(&e);
                }
            }
            if lines.len() < RECOUNT_PAGE {
                return Ok(());
            }
            pos = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(stream: &str, text: &str, eof: bool) -> (Event, String) {
        let mut ctx: Map<String, Value> = [
            ("stream".to_string(), Value::from(stream)),
            ("rank".to_string(), Value::from("0")),
            ("data".to_string(), Value::from(text)),
        ]
        .into_iter()
        .collect();
        if eof {
            ctx.insert("eof".into(), Value::from(true));
        }
        let e = Event::new(1.0, "data", Some(ctx));
        let line = e.to_json();
        (e, line)
    }

    #[test]
    fn data_past_the_limit_is_dropped_and_counted_once() {
        let mut b = OutputBudget::new(Some(10));
        let (e, _) = data("stdout", "12345678", false);
        assert_eq!(b.account(&e), (Verdict::Keep, false));
        let (e, _) = data("stderr", "12", false);
        assert_eq!(b.account(&e), (Verdict::Keep, false));
        let (e, _) = data("stdout", "abc", false);
        assert_eq!(b.account(&e), (Verdict::Drop, true));
        let (e, _) = data("stdout", "defg", false);
        assert_eq!(b.account(&e), (Verdict::Drop, false));
        let (e, _) = data("stdout", "x", true);
        let (v, first) = b.account(&e);
        assert!(!first);
        let Verdict::Replace(kept) = v else {
            panic!("{v:?}")
        };
        let kept = Event::parse_json(&kept).unwrap();
        let ctx = kept.context.unwrap();
        assert_eq!(ctx.get("eof"), Some(&Value::from(true)));
        assert!(ctx.get("data").is_none());
        assert!(b.is_over());
        let lines = b.truncation_lines(2.0);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("stdout: 8 of 16 bytes truncated"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn no_limit_keeps_everything() {
        let mut b = OutputBudget::new(None);
        let (e, _) = data("stdout", &"x".repeat(1000), false);
        assert_eq!(b.account(&e), (Verdict::Keep, false));
        assert!(b.truncation_lines(1.0).is_empty());
    }

    #[test]
    fn sizes_read_for_people() {
        assert_eq!(human_size(1 << 30), "1 GiB");
        assert_eq!(human_size(10 << 20), "10 MiB");
        assert_eq!(human_size(3 << 10), "3 KiB");
        assert_eq!(human_size(1000), "1000 bytes");
    }
}

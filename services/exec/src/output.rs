//! RFC 24 output eventlog lines, and the shell option that sends a stream to
//! a file instead (`attributes.system.shell.options.output`).

use base64::Engine;
use fluxgate_shared::{JobId, Jobspec};
use serde_json::{Map, Value, json};

use crate::event::{context, line};
use crate::task::Stream;

/// The `header` event: both streams UTF-8, one writer per task.
pub fn header(ntasks: u32) -> String {
    line(
        "header",
        Some(context([
            ("version", json!(1)),
            ("encoding", json!({"stdout": "UTF-8", "stderr": "UTF-8"})),
            ("count", json!({"stdout": ntasks, "stderr": ntasks})),
            ("options", json!({})),
        ])),
    )
}

/// A `data` event for one task; raw text when valid UTF-8, else base64 as flux-core does.
pub fn data(stream: Stream, task: u32, bytes: &[u8]) -> String {
    let mut ctx = base(stream, task);
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            ctx.insert("data".into(), json!(text));
        }
        Err(_) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
            ctx.insert("data".into(), json!(encoded));
            ctx.insert("encoding".into(), json!("base64"));
        }
    }
    line("data", Some(ctx))
}

/// Longest line of output shown live and not stored: the job manager's
/// watchers carry lines up to this size without the store behind them.
pub const LIVE_LINE_MAX: usize = 4096;

/// `data` events for output shown live and not stored, each at most
/// [`LIVE_LINE_MAX`] long: `bytes` split where need be (a piece that cuts a
/// character in two goes as base64; the terminal joins the bytes again).
pub fn live_data(stream: Stream, task: u32, bytes: &[u8]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut pieces = vec![bytes];
    while let Some(piece) = pieces.pop() {
        let line = data(stream, task, piece);
        if line.len() <= LIVE_LINE_MAX || piece.len() <= 1 {
            lines.push(line);
            continue;
        }
        let mut mid = piece.len() / 2;
        // On a character's boundary when there is one near, so that text stays text.
        while mid > 1 && !is_boundary(piece, mid) && piece.len() / 2 - mid < 4 {
            mid -= 1;
        }
        if !is_boundary(piece, mid) {
            mid = piece.len() / 2;
        }
        let (first, second) = piece.split_at(mid);
        pieces.push(second);
        pieces.push(first);
    }
    lines
}

/// Whether `at` does not fall inside a UTF-8 sequence of `bytes`.
fn is_boundary(bytes: &[u8], at: usize) -> bool {
    bytes.get(at).is_none_or(|b| (*b as i8) >= -0x40)
}

/// The `data` event that closes a task's stream.
pub fn eof(stream: Stream, task: u32) -> String {
    let mut ctx = base(stream, task);
    ctx.insert("eof".into(), json!(true));
    line("data", Some(ctx))
}

/// A `log` event from the shell of `shell_rank` (level: syslog, 0 = emergency).
pub fn log(shell_rank: u32, level: u8, message: &str) -> String {
    line(
        "log",
        Some(context([
            ("rank", json!(shell_rank)),
            ("level", json!(level)),
            ("message", json!(message)),
        ])),
    )
}

/// A `redirect` event: `tasks`' output on `stream` goes to `path`.
pub fn redirect(stream: Stream, tasks: &str, path: &str) -> String {
    line(
        "redirect",
        Some(context([
            ("stream", json!(stream.name())),
            ("rank", json!(tasks)),
            ("path", json!(path)),
        ])),
    )
}

fn base(stream: Stream, task: u32) -> Map<String, Value> {
    context([
        ("stream", json!(stream.name())),
        ("rank", json!(task.to_string())),
    ])
}

/// Files the job asked its output streams to be written to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redirects {
    /// Path for standard output.
    pub stdout: Option<String>,
    /// Path for standard error.
    pub stderr: Option<String>,
}

impl Redirects {
    /// Read `output.{stdout,stderr}` `{type: "file", path}` from the shell
    /// options; as in Flux, stderr follows stdout's file when only stdout is given.
    pub fn from_jobspec(jobspec: &Jobspec, id: JobId) -> Redirects {
        let output = jobspec.shell_options().get("output");
        let file = |name: &str| {
            let o = output?.get(name)?;
            if o.get("type").and_then(Value::as_str) != Some("file") {
                return None;
            }
            let path = o.get("path")?.as_str()?;
            Some(expand(path, jobspec, id))
        };
        let stdout = file("stdout");
        let stderr = file("stderr").or_else(|| stdout.clone());
        Redirects { stdout, stderr }
    }

    /// The file for `stream`, if redirected.
    pub fn path(&self, stream: Stream) -> Option<&str> {
        match stream {
            Stream::Stdout => self.stdout.as_deref(),
            Stream::Stderr => self.stderr.as_deref(),
        }
    }

    /// The distinct files, and the index among them of each stream's
    /// (stdout, stderr): stderr shares stdout's file when the paths match.
    pub fn distinct(&self) -> (Vec<&str>, [Option<usize>; 2]) {
        let mut paths: Vec<&str> = Vec::new();
        let mut index = [None, None];
        for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
            let Some(path) = self.path(stream) else {
                continue;
            };
            index[i] = Some(match paths.iter().position(|p| *p == path) {
                Some(j) => j,
                None => {
                    paths.push(path);
                    paths.len() - 1
                }
            });
        }
        (paths, index)
    }

    /// True when neither stream is redirected.
    pub fn is_empty(&self) -> bool {
        self.stdout.is_none() && self.stderr.is_none()
    }
}

/// Expand the job-level mustache tags Flux documents for output paths:
/// `{{id}}`/`{{jobid}}` (F58), `{{id.dec}}`, `{{id.hex}}`, `{{name}}`.
/// Others (per-task tags) are left as written.
fn expand(path: &str, jobspec: &Jobspec, id: JobId) -> String {
    path.replace("{{id}}", &id.to_string())
        .replace("{{jobid}}", &id.to_string())
        .replace("{{id.f58}}", &id.to_string())
        .replace("{{id.dec}}", &u64::from(id).to_string())
        .replace("{{id.hex}}", &id.to_hex())
        .replace("{{name}}", jobspec.job_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(line: &str) -> Value {
        let v: Value = serde_json::from_str(line).unwrap();
        v["context"].clone()
    }

    #[test]
    fn header_counts_one_writer_per_task() {
        let c = ctx(&header(2));
        assert_eq!(
            c,
            json!({"version":1,"encoding":{"stdout":"UTF-8","stderr":"UTF-8"},"count":{"stdout":2,"stderr":2},"options":{}})
        );
    }

    #[test]
    fn data_is_text_or_base64_and_eof_is_a_boolean() {
        assert_eq!(
            ctx(&data(Stream::Stdout, 1, b"vm\n")),
            json!({"stream":"stdout","rank":"1","data":"vm\n"})
        );
        assert_eq!(
            ctx(&data(Stream::Stderr, 0, &[0xff, b'\n'])),
            json!({"stream":"stderr","rank":"0","data":"/wo=","encoding":"base64"})
        );
        assert_eq!(
            ctx(&eof(Stream::Stderr, 0)),
            json!({"stream":"stderr","rank":"0","eof":true})
        );
    }

    #[test]
    fn live_output_is_cut_to_lines_the_watchers_carry() {
        let short = live_data(Stream::Stdout, 0, b"$ ");
        assert_eq!(short.len(), 1);
        assert_eq!(
            ctx(&short[0]),
            json!({"stream":"stdout","rank":"0","data":"$ "})
        );
        // Text, control characters (escaped six-fold in JSON) and invalid
        // bytes: every line fits, and the pieces give back the bytes.
        let mut bytes = Vec::new();
        for i in 0..20_000u32 {
            match i % 5 {
                0 => bytes.extend_from_slice("é".as_bytes()),
                1 => bytes.push(0x1b),
                2 => bytes.push(0xff),
                _ => bytes.push(b'a'),
            }
        }
        let lines = live_data(Stream::Stdout, 3, &bytes);
        assert!(lines.len() > 1);
        let mut back = Vec::new();
        for l in &lines {
            assert!(l.len() <= LIVE_LINE_MAX, "{}", l.len());
            let c = ctx(l);
            assert_eq!(c["rank"], "3");
            let d = c["data"].as_str().unwrap();
            if c["encoding"] == "base64" {
                back.extend(base64::engine::general_purpose::STANDARD.decode(d).unwrap());
            } else {
                back.extend_from_slice(d.as_bytes());
            }
        }
        assert_eq!(back, bytes);
        // Plain text is cut between characters, so it stays text.
        let text = "é".repeat(5000);
        for l in live_data(Stream::Stdout, 0, text.as_bytes()) {
            assert!(ctx(&l).get("encoding").is_none(), "{l}");
        }
    }

    #[test]
    fn log_matches_the_start_failure_event() {
        assert_eq!(
            ctx(&log(
                0,
                0,
                "task 0 (host vm): start failed: x: No such file or directory"
            )),
            json!({"rank":0,"level":0,"message":"task 0 (host vm): start failed: x: No such file or directory"})
        );
    }

    #[test]
    fn redirects_follow_flux_shell_options() {
        let js = Jobspec::parse(
            r#"{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0,"shell":{"options":{"output":{"stdout":{"type":"file","path":"/tmp/out-{{id}}.{{name}}"}}}}}}}"#,
        )
        .unwrap();
        let id = JobId::from(1234u64);
        let r = Redirects::from_jobspec(&js, id);
        let want = format!("/tmp/out-{id}.true");
        assert_eq!(r.path(Stream::Stdout), Some(want.as_str()));
        assert_eq!(r.path(Stream::Stderr), Some(want.as_str()));
        assert_eq!(r.distinct(), (vec![want.as_str()], [Some(0), Some(0)]));
        let apart = Redirects {
            stdout: None,
            stderr: Some("e".into()),
        };
        assert_eq!(apart.distinct(), (vec!["e"], [None, Some(0)]));
    }
}

//! Following a job to its end, as flux-core's `flux job attach`
//! (`src/cmd/job/attach.c`) does for `flux run` and `flux job attach`.
//!
//! The main eventlog is followed to `clean`; exceptions are printed on
//! standard error as `T.TTTs: job.exception type=TYPE severity=N NOTE` with T
//! relative to the job's first event. The `output` eventlog (RFC 24) is
//! followed at the same time: stdout data to standard output, stderr data to
//! standard error. The exit code is flux's: the `finish` wait status through
//! `WaitStatus::exit_report`, flux's `flux_job_waitstatus_to_exitcode`
//! (with its message after `fluxgate-job: `), or 1
//! when a fatal exception ended a job that did not fail otherwise.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::job::WaitStatus;
use fluxgate_shared::{Event, JobId};

pub mod interrupt;
pub mod stdin;
pub mod terminal;

use crate::client::{self, Instance};
use crate::follow::LogWatch;
use crate::output::printable;
use interrupt::{Action, CANCEL_NOTE, Interrupts, Key, Keys, suspend};
use stdin::{Ranks, forward};
use terminal::RawMode;

/// How a finished job ended, as a command reports it.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// flux's exit code for the job.
    pub exit_code: i32,
    /// What to say on standard error when the job did not succeed.
    pub message: Option<String>,
    /// The code comes from a fatal exception, not from the tasks' exit.
    pub exception: bool,
}

/// The next line of a watch.
async fn next(s: &mut LogWatch) -> Result<Option<pb::EventlogLine>, tonic::Status> {
    s.message().await
}

/// Open a watch on one of the job's eventlogs.
pub async fn watch(
    inst: &mut Instance,
    id: JobId,
    name: &str,
    follow: bool,
    wait_create: bool,
) -> anyhow::Result<LogWatch> {
    open_watch(inst, id, name, follow, wait_create)
        .await
        .map_err(client::status_error)
}

/// Follow the job's output to its end, with what its interactive terminal
/// shows live and does not store (flux's `pty.interactive` without
/// `pty.capture`).
pub async fn watch_output(inst: &mut Instance, id: JobId) -> anyhow::Result<LogWatch> {
    let request = pb::WatchEventlogRequest {
        id: id.as_u64(),
        name: "output".to_string(),
        follow: true,
        wait_create: true,
        live: true,
        ..Default::default()
    };
    LogWatch::open(inst, request)
        .await
        .map_err(client::status_error)
}

/// As [`watch`], with the server's refusal as it came, for a command that
/// words some refusals its own way (an unknown job, one it may not read).
pub async fn open_watch(
    inst: &Instance,
    id: JobId,
    name: &str,
    follow: bool,
    wait_create: bool,
) -> Result<LogWatch, tonic::Status> {
    let request = pb::WatchEventlogRequest {
        id: id.as_u64(),
        name: name.to_string(),
        follow,
        wait_create,
        ..Default::default()
    };
    LogWatch::open(inst, request).await
}

/// Fold the main eventlog's events into an outcome; `on_exception` sees each
/// exception with the seconds since the first event.
#[derive(Debug, Default)]
struct Tracker {
    t0: Option<f64>,
    status: Option<i32>,
    fatal: Option<String>,
    clean: bool,
}

impl Tracker {
    fn apply(&mut self, ev: &Event) -> Option<String> {
        let t0 = *self.t0.get_or_insert(ev.timestamp);
        match ev.name.as_str() {
            "finish" => self.status = ev.ctx_i64("status").ok().map(|s| s as i32),
            "clean" => self.clean = true,
            "exception" => {
                // Type and note are chosen by whoever raised the exception.
                let ty = printable(ev.ctx_str("type").unwrap_or(""));
                let sev = ev.ctx_i64("severity").unwrap_or(0);
                let note = printable(ev.ctx_str("note").unwrap_or(""));
                let line = format!(
                    "{:.3}s: job.exception type={ty} severity={sev} {note}",
                    ev.timestamp - t0
                );
                if sev == 0 && self.fatal.is_none() {
                    self.fatal = Some(if note.is_empty() {
                        format!("job.exception type={ty}")
                    } else {
                        note.to_string()
                    });
                }
                return Some(line);
            }
            _ => {}
        }
        None
    }

    fn outcome(&self) -> Outcome {
        let (mut code, mut message) = match self.status {
            Some(ws) => WaitStatus(ws).exit_report(),
            None => (0, None),
        };
        let exception = code == 0 && self.fatal.is_some();
        if exception {
            code = 1;
            message = None;
        }
        Outcome {
            exit_code: code,
            message,
            exception,
        }
    }
}

/// Wait for the job to be clean and say how it ended (no output shown).
pub async fn outcome(inst: &mut Instance, id: JobId) -> anyhow::Result<Outcome> {
    let mut stream = watch(inst, id, "eventlog", true, false).await?;
    let mut t = Tracker::default();
    while let Some(line) = next(&mut stream).await.map_err(client::status_error)? {
        let ev =
            client::parse_event(&line.line).context("bad eventlog line from the job manager")?;
        t.apply(&ev);
        if t.clean {
            break;
        }
    }
    Ok(t.outcome())
}

/// `--label-io`: output is shown after its task rank, `RANK: `, as flux's
/// `attach --label-io` shows it. Process-wide: set once by `run`.
static LABEL_IO: AtomicBool = AtomicBool::new(false);

/// Label the output shown from now on with its task rank.
pub(crate) fn label_io() {
    LABEL_IO.store(true, Ordering::Relaxed);
}

/// Write one RFC 24 `data` event (or `log` event) to our stdout/stderr.
pub(crate) fn show_output(ev: &Event) {
    match ev.name.as_str() {
        "data" => {
            let Some(data) = output_bytes(ev) else { return };
            let label = match ev.ctx("rank") {
                Some(r) if LABEL_IO.load(Ordering::Relaxed) && !data.is_empty() => {
                    format!("{}: ", r.to_string().trim_matches('"'))
                }
                _ => String::new(),
            };
            let out = [label.as_bytes(), &data].concat();
            if ev.ctx_str("stream").unwrap_or("stdout") == "stderr" {
                let mut e = std::io::stderr().lock();
                let _ = e.write_all(&out);
                let _ = e.flush();
            } else {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(&out);
                let _ = o.flush();
            }
        }
        "log" => {
            let rank = ev.ctx("rank").map(|r| r.to_string()).unwrap_or_default();
            let msg = ev.ctx_str("message").unwrap_or("");
            eprintln!("flux-shell[{}]: {msg}", rank.trim_matches('"'));
        }
        _ => {}
    }
}

/// The bytes a `data` event carries: its text, or what its base64 stands
/// for (bytes that are not UTF-8, such as a terminal's read that ends
/// inside a character).
fn output_bytes(ev: &Event) -> Option<Vec<u8>> {
    use base64::Engine;
    let data = ev.ctx_str("data").ok()?;
    if ev.ctx_str("encoding").ok() == Some("base64") {
        return base64::engine::general_purpose::STANDARD.decode(data).ok();
    }
    Some(data.as_bytes().to_vec())
}

/// The next key of the terminal; never, when signals are not caught.
async fn next_key(interrupts: &mut Option<Interrupts>) -> Option<Key> {
    match interrupts {
        Some(i) => Some(i.next().await),
        None => std::future::pending().await,
    }
}

/// Act on a Ctrl-C or Ctrl-Z; the action taken.
async fn on_key(inst: &mut Instance, id: JobId, keys: &mut Keys, key: Key) -> Action {
    let (action, message) = keys.press(key, std::time::Instant::now());
    if let Some(m) = message {
        eprintln!("fluxgate-job: {m}");
    }
    match action {
        Action::Cancel => {
            let request = pb::CancelRequest {
                id: id.as_u64(),
                note: CANCEL_NOTE.to_string(),
            };
            if let Err(e) = inst.jobs.cancel(request).await {
                eprintln!("fluxgate-job: cancel: {}", printable(e.message()));
            }
        }
        Action::Suspend => suspend(),
        Action::Warned | Action::Detach => {}
    }
    action
}

/// Where this process's stdin goes while it follows a job.
#[derive(Debug, Clone)]
pub struct StdinTo {
    /// The task ranks.
    pub ranks: Ranks,
    /// Say nothing when the job takes no input.
    pub quiet: bool,
    /// The job's task 0 has an interactive pty: this terminal drives it
    /// in raw mode.
    pub terminal: bool,
}

/// Stream the job's output and exit as flux run does; once the job has
/// started, this process's stdin goes to its tasks as `stdin` says.
pub async fn attach(
    inst: &mut Instance,
    id: JobId,
    stdin: Option<StdinTo>,
) -> anyhow::Result<ExitCode> {
    let mut stdin = stdin;
    // Restored when this returns, however it returns.
    let mut _raw = None;
    // Both watches open at once: the output's is not a round trip later.
    let mut out_inst = inst.clone();
    let (main, out) = tokio::join!(
        watch(inst, id, "eventlog", true, false),
        watch_output(&mut out_inst, id)
    );
    let mut main = main?;
    let output = tokio::spawn(async move {
        if let Ok(mut s) = out {
            while let Ok(Some(line)) = next(&mut s).await {
                if let Ok(ev) = client::parse_event(&line.line) {
                    show_output(&ev);
                }
            }
        }
    });
    let mut t = Tracker::default();
    let mut keys = Keys::default();
    // Without the signals (no handler could be set) Ctrl-C simply ends us.
    let mut interrupts = Interrupts::catch().ok();
    loop {
        let line = tokio::select! {
            l = next(&mut main) => l.map_err(client::status_error)?,
            Some(key) = next_key(&mut interrupts) => {
                if on_key(inst, id, &mut keys, key).await == Action::Detach {
                    output.abort();
                    return Ok(ExitCode::SUCCESS);
                }
                continue;
            }
        };
        let Some(line) = line else { break };
        let ev =
            client::parse_event(&line.line).context("bad eventlog line from the job manager")?;
        if ev.name == "start"
            && let Some(to) = stdin.take()
        {
            if to.terminal {
                _raw = RawMode::enter();
            }
            forward(inst, id, to.ranks, to.quiet, to.terminal);
        }
        if let Some(msg) = t.apply(&ev) {
            eprintln!("{msg}");
        }
        if t.clean {
            break;
        }
    }
    // The terminal is the caller's again before anything more is said.
    _raw = None;
    // The output log is final once the job is clean; a job that never started
    // may have none, so do not wait for ever.
    let mut output = output;
    if tokio::time::timeout(Duration::from_secs(5), &mut output)
        .await
        .is_err()
    {
        output.abort();
    }
    let o = t.outcome();
    if let Some(m) = &o.message {
        eprintln!("fluxgate-job: {m}");
    }
    Ok(ExitCode::from(o.exit_code.clamp(0, 255) as u8))
}

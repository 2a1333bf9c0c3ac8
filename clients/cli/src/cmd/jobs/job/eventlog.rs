//! `fluxgate job eventlog` and `fluxgate job wait-event`, as flux-core's
//! `src/cmd/job/eventlog.c` with the formatter of
//! `src/common/libeventlog/formatter.c`.
//!
//! Text lines are `TIME NAME key=value ...` (values as compact JSON); TIME is
//! `%lf` seconds (`raw`, the default), ISO 8601 (`iso`), seconds since the
//! first event (`offset`), or `human`: `[MonDD HH:MM]` when the minute
//! changes, else `[+SSSS.ssssss]` since that line. `--format=json` prints
//! the stored lines byte for byte. Times are shown in UTC.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail};
use fluxgate_shared::Event;
use fluxgate_shared::jobspec::parse_fsd;
use serde_json::Value;

use crate::client::{self, Instance};
use crate::output::printable;

/// Formatting options shared by both commands.
#[derive(Debug, Clone, clap::Args)]
pub struct FormatOpts {
    /// Specify output format: text, json.
    #[arg(
        short = 'f',
        long = "format",
        value_name = "FORMAT",
        default_value = "text"
    )]
    format: String,
    /// Specify time format: raw, iso, offset, human.
    #[arg(
        short = 'T',
        long = "time-format",
        value_name = "FORMAT",
        default_value = "raw"
    )]
    time_format: String,
    /// Display human-readable output.
    #[arg(short = 'H', long = "human")]
    human: bool,
    /// Colorize output (accepted for compatibility; output is never colored).
    #[arg(short = 'L', long = "color", value_name = "WHEN", num_args = 0..=1, default_missing_value = "always")]
    color: Option<String>,
    /// Eventlog name: eventlog, exec, output (or guest.exec.eventlog, guest.output).
    #[arg(
        short = 'p',
        long = "path",
        value_name = "PATH",
        default_value = "eventlog"
    )]
    path: String,
}

/// Arguments of `fluxgate job eventlog`.
#[derive(Debug, clap::Args)]
pub struct EventlogArgs {
    #[command(flatten)]
    fmt: FormatOpts,
    /// Follow events until the job is inactive.
    #[arg(short = 'F', long = "follow")]
    follow: bool,
    /// Job id.
    id: String,
}

/// Arguments of `fluxgate job wait-event`.
#[derive(Debug, clap::Args)]
pub struct WaitEventArgs {
    #[command(flatten)]
    fmt: FormatOpts,
    /// Timeout after DURATION.
    #[arg(short = 't', long = "timeout", value_name = "DURATION")]
    timeout: Option<String>,
    /// Match key=val in context.
    #[arg(short = 'm', long = "match-context", value_name = "KEY=VAL")]
    match_context: Option<String>,
    /// Required number of matches.
    #[arg(short = 'c', long = "count", value_name = "COUNT", default_value_t = 1)]
    count: i64,
    /// Do not output matched event.
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
    /// Output all events before matched event.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// If path does not exist, wait for its creation.
    #[arg(short = 'W', long = "waitcreate")]
    waitcreate: bool,
    /// Job id.
    id: String,
    /// Event name to wait for.
    event: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum TimeFormat {
    Raw,
    Iso,
    Offset,
    Human,
}

/// State of one formatting pass (first timestamp, last minute shown).
#[derive(Debug)]
pub struct Formatter {
    json: bool,
    time: TimeFormat,
    t0: Option<f64>,
    last_minute: Option<i64>,
    last_ts: f64,
}

impl Formatter {
    fn new(o: &FormatOpts) -> anyhow::Result<Formatter> {
        Formatter::from_parts(&o.format, &o.time_format, o.human)
    }

    /// A formatter for `--format`, `--time-format` and `--human`.
    pub fn from_parts(format: &str, time: &str, human: bool) -> anyhow::Result<Formatter> {
        let (format, time) = if human {
            ("text", "human")
        } else {
            (format, time)
        };
        let json = match format.to_ascii_lowercase().as_str() {
            "text" => false,
            "json" => true,
            _ => bail!("invalid format type '{format}'"),
        };
        let time = match time.to_ascii_lowercase().as_str() {
            "raw" => TimeFormat::Raw,
            "iso" => TimeFormat::Iso,
            "offset" => TimeFormat::Offset,
            "human" | "reltime" => TimeFormat::Human,
            _ => bail!("invalid time-format type '{time}'"),
        };
        Ok(Formatter {
            json,
            time,
            t0: None,
            last_minute: None,
            last_ts: 0.0,
        })
    }

    /// Remember the first timestamp even for events not printed.
    fn see(&mut self, ts: f64) {
        self.t0.get_or_insert(ts);
    }

    /// One output line (without newline) for a stored line. Text lines go
    /// through [`printable`]: event names, memo keys and string values are
    /// chosen by users, and JSON escapes neither DEL, C1 nor bidi overrides.
    /// `--format=json` keeps the stored bytes.
    pub fn format(&mut self, raw: &str, ev: &Event) -> String {
        if self.json {
            return raw.to_string();
        }
        printable(&self.text(ev)).into_owned()
    }

    fn text(&mut self, ev: &Event) -> String {
        self.see(ev.timestamp);
        let mut s = self.timestamp(ev.timestamp);
        s.push(' ');
        s.push_str(&ev.name);
        if let Some(ctx) = &ev.context {
            for (k, v) in ctx {
                s.push(' ');
                s.push_str(k);
                s.push('=');
                s.push_str(&compact(v));
            }
        }
        s
    }

    fn timestamp(&mut self, ts: f64) -> String {
        match self.time {
            TimeFormat::Raw => format!("{ts:.6}"),
            TimeFormat::Offset => format!("{:.6}", ts - self.t0.unwrap_or(ts)),
            TimeFormat::Iso => {
                let secs = ts.floor() as i64;
                let usec = ((ts - secs as f64) * 1e6) as u64;
                let c = civil(secs);
                format!(
                    "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{usec:06}Z",
                    c.year, c.month, c.day, c.hour, c.min, c.sec
                )
            }
            TimeFormat::Human => {
                let minute = (ts.floor() as i64).div_euclid(60);
                if self.last_minute == Some(minute) {
                    format!("[{:+11.6}]", ts - self.last_ts)
                } else {
                    self.last_minute = Some(minute);
                    self.last_ts = ts;
                    let c = civil(ts.floor() as i64);
                    const MONTHS: [&str; 12] = [
                        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                        "Nov", "Dec",
                    ];
                    format!(
                        "[{}{:02} {:02}:{:02}]",
                        MONTHS[(c.month - 1) as usize],
                        c.day,
                        c.hour,
                        c.min
                    )
                }
            }
        }
    }
}

/// Jansson's compact encoding of a context value.
fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Broken-down UTC time.
#[derive(Debug)]
pub struct Civil {
    /// Year.
    pub year: i64,
    /// Month 1-12.
    pub month: u32,
    /// Day of month.
    pub day: u32,
    /// Hour.
    pub hour: u32,
    /// Minute.
    pub min: u32,
    /// Second.
    pub sec: u32,
}

/// Seconds since the epoch to UTC date and time (Howard Hinnant's algorithm).
pub fn civil(secs: i64) -> Civil {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Civil {
        year,
        month,
        day,
        hour: (rem / 3600) as u32,
        min: (rem % 3600 / 60) as u32,
        sec: (rem % 60) as u32,
    }
}

/// flux's short names for eventlog paths, onto our key names.
fn log_name(path: &str) -> &str {
    match path {
        "exec" | "guest.exec.eventlog" => "exec.eventlog",
        "output" | "guest.output" => "output",
        other => other,
    }
}

fn not_found(status: &tonic::Status, id: &str, path: &str) -> anyhow::Error {
    if status.code() == tonic::Code::NotFound {
        if path == "eventlog" {
            anyhow!("job {id} not found")
        } else {
            anyhow!("eventlog path {path} not found")
        }
    } else {
        client::status_error(status.clone())
    }
}

/// Run `fluxgate job eventlog`.
pub fn run_eventlog(args: EventlogArgs) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    let mut fmt = Formatter::new(&args.fmt)?;
    let name = log_name(&args.fmt.path).to_string();
    client::block_on(async {
        let mut inst = client::connect().await?;
        let mut stream = inst
            .jobs
            .watch_eventlog(fluxgate_proto::v1::WatchEventlogRequest {
                id: id.as_u64(),
                name: name.clone(),
                follow: args.follow,
                wait_create: args.follow,
                ..Default::default()
            })
            .await
            .map_err(|s| not_found(&s, &args.id, &args.fmt.path))?
            .into_inner();
        let mut out = std::io::stdout().lock();
        while let Some(line) = stream
            .message()
            .await
            .map_err(|s| not_found(&s, &args.id, &args.fmt.path))?
        {
            match client::parse_event(&line.line) {
                Ok(ev) => {
                    writeln!(out, "{}", fmt.format(&line.line, &ev))?;
                    out.flush()?;
                    if args.follow && name == "eventlog" && ev.name == "clean" {
                        break;
                    }
                }
                Err(e) => eprintln!(
                    "fluxgate-job: failed to print eventlog entry: {}",
                    printable(&e.to_string())
                ),
            }
        }
        Ok(ExitCode::SUCCESS)
    })?
}

/// Run `fluxgate job wait-event`.
pub fn run_wait_event(args: WaitEventArgs) -> anyhow::Result<ExitCode> {
    let _ = client::parse_jobid(&args.id)?;
    if args.count <= 0 {
        bail!("count must be > 0");
    }
    let mut fmt = Formatter::new(&args.fmt)?;
    let matcher = match &args.match_context {
        Some(mc) => Some(
            mc.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| anyhow!("must specify a context test as key=value"))?,
        ),
        None => None,
    };
    let timeout = match &args.timeout {
        Some(t) => Some(parse_fsd(t).map_err(|e| anyhow!("invalid timeout {t:?}: {e}"))?),
        None => None,
    };
    let name = log_name(&args.fmt.path).to_string();
    client::block_on(async {
        let mut inst = client::connect().await?;
        let work = wait_event(&mut inst, &args, &name, matcher, &mut fmt);
        match timeout {
            Some(t) => {
                match tokio::time::timeout(Duration::from_secs_f64(t.max(0.0)), work).await {
                    Ok(r) => r,
                    Err(_) => Err(anyhow!("wait-event timeout on event '{}'", args.event)),
                }
            }
            None => work.await,
        }
    })?
}

async fn wait_event(
    inst: &mut Instance,
    args: &WaitEventArgs,
    name: &str,
    matcher: Option<(String, String)>,
    fmt: &mut Formatter,
) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    let mut stream = inst
        .jobs
        .watch_eventlog(fluxgate_proto::v1::WatchEventlogRequest {
            id: id.as_u64(),
            name: name.to_string(),
            follow: true,
            wait_create: args.waitcreate,
            ..Default::default()
        })
        .await
        .map_err(|s| not_found(&s, &args.id, &args.fmt.path))?
        .into_inner();
    let mut matches = 0;
    let mut out = std::io::stdout().lock();
    while let Some(line) = stream
        .message()
        .await
        .map_err(|s| not_found(&s, &args.id, &args.fmt.path))?
    {
        let Ok(ev) = client::parse_event(&line.line) else {
            continue;
        };
        fmt.see(ev.timestamp);
        let hit = ev.name == args.event
            && match &matcher {
                None => true,
                Some((k, v)) => ev
                    .ctx(k)
                    .is_some_and(|val| compact(val) == *v || val.as_str().is_some_and(|s| s == v)),
            };
        if hit {
            matches += 1;
        }
        if hit && matches == args.count {
            if !args.quiet {
                writeln!(out, "{}", fmt.format(&line.line, &ev))?;
                out.flush()?;
            }
            return Ok(ExitCode::SUCCESS);
        } else if args.verbose {
            writeln!(out, "{}", fmt.format(&line.line, &ev))?;
            out.flush()?;
        }
    }
    Err(anyhow!("event '{}' never received", args.event))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        let c = civil(1_795_326_931);
        assert_eq!(
            (c.year, c.month, c.day, c.hour, c.min),
            (2026, 11, 22, 5, 55)
        );
        let c = civil(0);
        assert_eq!((c.year, c.month, c.day), (1970, 1, 1));
    }

    #[test]
    fn text_lines_as_flux() {
        let opts = FormatOpts {
            format: "text".into(),
            time_format: "raw".into(),
            human: false,
            color: None,
            path: "eventlog".into(),
        };
        let mut f = Formatter::new(&opts).unwrap();
        let raw = r#"{"timestamp":1795326931.4986172,"name":"submit","context":{"userid":0,"urgency":16,"flags":0,"version":1}}"#;
        let ev = client::parse_event(raw).unwrap();
        assert_eq!(
            f.format(raw, &ev),
            "1795326931.498617 submit userid=0 urgency=16 flags=0 version=1"
        );
        let mut h = Formatter::new(&FormatOpts {
            human: true,
            ..opts
        })
        .unwrap();
        assert_eq!(
            h.format(raw, &ev),
            "[Nov22 05:55] submit userid=0 urgency=16 flags=0 version=1"
        );
        let raw2 = r#"{"timestamp":1795326931.5103021,"name":"validate"}"#;
        let ev2 = client::parse_event(raw2).unwrap();
        assert_eq!(h.format(raw2, &ev2), "[  +0.011685] validate");
    }
}

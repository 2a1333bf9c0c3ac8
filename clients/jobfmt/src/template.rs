//! A Flux output format string (flux-core `flux.util.OutputFormat` and
//! `UtilFormatter`): Python `str.format` fields `{name!conv:spec}` over a
//! record, plus Flux's extensions, all documented in flux-jobs(1):
//!
//! - a leading `sort:KEY,-KEY ` prefix (sort order of the listing);
//! - column prefixes `?:` (drop the column when every row is empty),
//!   `+:` (widen to the widest value) and `?+:` (both);
//! - spec suffixes `h` (empty or zero-like values print `-`) and `+`
//!   (a truncated value ends in `+`);
//! - conversions `!D` (ISO date), `!d` (strftime, with `::spec` after the
//!   time format), `!F` (FSD duration), `!H` (H:MM:SS) and `!P` (percent).
//!
//! Everything here is pure: the record supplies values, [`Ctx`] the time zone.

use std::cmp::Ordering;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use fluxgate_shared::policy::format_fsd_py;

use crate::pyfmt::{Spec, Value, float_repr, format_value, g_prec};

/// Something a format can show: one row of the listing.
pub trait Record {
    /// The value of field `name`, which [`Template::parse`] has checked.
    fn field(&self, name: &str) -> Value;
}

/// What rendering needs besides the record: the local time zone.
#[derive(Debug, Clone)]
pub struct Ctx {
    tz: TimeZone,
    local_epoch: String,
}

impl Ctx {
    /// A context that renders times in `tz`.
    pub fn new(tz: TimeZone) -> Ctx {
        let local_epoch = strftime(&tz, 0.0, "%FT%T").unwrap_or_default();
        Ctx { tz, local_epoch }
    }

    /// Values flux treats as empty for `h`, `?:` and `+:` (`empty_outputs()`).
    fn is_empty_output(&self, s: &str) -> bool {
        ["", "0s", "0.0", "0:00:00", "1970-01-01T00:00:00"].contains(&s) || s == self.local_epoch
    }
}

fn strftime(tz: &TimeZone, ts: f64, fmt: &str) -> Result<String, String> {
    let t = Timestamp::from_nanosecond((ts * 1e9).round() as i128).map_err(|e| e.to_string())?;
    jiff::fmt::strtime::format(fmt, &t.to_zoned(tz.clone())).map_err(|e| e.to_string())
}

/// One `{name!conv:spec}` of a format.
#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: String,
    conv: Option<char>,
    spec: String,
}

/// Literal text followed by an optional field, as Python's `Formatter.parse`.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    text: String,
    field: Option<Field>,
}

/// A parsed format string.
#[derive(Debug, Clone)]
pub struct Template {
    entries: Vec<Entry>,
    sort_keys: Vec<(String, bool)>,
    headings: fn(&str) -> Option<String>,
}

/// Python's error for a format string it cannot parse.
fn parse_entries(fmt: &str) -> Result<Vec<Entry>, String> {
    let c: Vec<char> = fmt.chars().collect();
    let mut out = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '{' if c.get(i + 1) == Some(&'{') => {
                text.push('{');
                i += 2;
            }
            '}' if c.get(i + 1) == Some(&'}') => {
                text.push('}');
                i += 2;
            }
            '}' => return Err("Single '}' encountered in format string".into()),
            '{' => {
                let (field, next) = parse_field(&c, i + 1)?;
                out.push(Entry {
                    text: std::mem::take(&mut text),
                    field: Some(field),
                });
                i = next;
            }
            ch => {
                text.push(ch);
                i += 1;
            }
        }
    }
    if !text.is_empty() {
        out.push(Entry { text, field: None });
    }
    Ok(out)
}

/// Parse a field starting after its `{`; returns it and the index after `}`.
fn parse_field(c: &[char], start: usize) -> Result<(Field, usize), String> {
    // Find the matching close brace; nested braces may appear in the spec.
    let mut depth = 1;
    let mut end = start;
    while end < c.len() {
        match c[end] {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
        end += 1;
    }
    if end >= c.len() {
        return Err("expected '}' before end of string".into());
    }
    let body: String = c[start..end].iter().collect();
    let name_end = body.find(['!', ':']).unwrap_or(body.len());
    let name = body[..name_end].to_string();
    let rest = &body[name_end..];
    let (conv, spec) = if let Some(r) = rest.strip_prefix('!') {
        let mut it = r.chars();
        let conv = it
            .next()
            .ok_or("end of string while looking for conversion specifier")?;
        let after = it.as_str();
        if !after.is_empty() && !after.starts_with(':') {
            return Err("expected ':' after conversion specifier".into());
        }
        (
            Some(conv),
            after.strip_prefix(':').unwrap_or("").to_string(),
        )
    } else {
        (None, rest.strip_prefix(':').unwrap_or("").to_string())
    };
    if spec.contains('{') {
        return Err("nested format fields are not supported".into());
    }
    if name.is_empty() {
        return Err("Unknown format field: ".into());
    }
    if let Some(k) = conv
        && !"rsadDFHP".contains(k)
    {
        return Err(format!("Unknown conversion specifier {k}"));
    }
    Ok((Field { name, conv, spec }, end + 1))
}

const SENTINELS: [&str; 3] = ["?+:", "?:", "+:"];

impl Template {
    /// Parse `fmt`; `headings` names every valid field (and gives its header).
    /// Errors read as flux's: "Unknown format field: foo".
    pub fn parse(fmt: &str, headings: fn(&str) -> Option<String>) -> Result<Template, String> {
        let mut entries = parse_entries(fmt)?;
        let mut t = Template {
            entries: Vec::new(),
            sort_keys: Vec::new(),
            headings,
        };
        if let Some(first) = entries.first_mut()
            && let Some(rest) = first.text.strip_prefix("sort:")
        {
            let n = rest
                .find(|c: char| c == '{' || c.is_whitespace())
                .unwrap_or(rest.len());
            // `sort:` with no key is literal text, as flux's regex needs one char.
            if n > 0 {
                t.set_sort_keys(&rest[..n])?;
                let after = &rest[n..];
                first.text = after.strip_prefix(' ').unwrap_or(after).to_string();
            }
        }
        for e in &entries {
            if let Some(f) = &e.field
                && headings(&f.name).is_none()
            {
                return Err(format!("Unknown format field: {}", f.name));
            }
        }
        t.entries = entries;
        Ok(t)
    }

    /// Replace the sort order with `keys` (`id,-t_run`), as `--sort`.
    pub fn set_sort_keys(&mut self, keys: &str) -> Result<(), String> {
        self.sort_keys.clear();
        for k in keys.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            let (k, rev) = match k.strip_prefix('-') {
                Some(k) => (k, true),
                None => (k, false),
            };
            if (self.headings)(k).is_none() {
                return Err(format!("Invalid sort key: {k}"));
            }
            self.sort_keys.push((k.to_string(), rev));
        }
        Ok(())
    }

    /// Sort `items` by the sort keys (stable), as flux's `sort_items`.
    pub fn sort<R: Record>(&self, items: &mut [R]) {
        for (key, rev) in self.sort_keys.iter().rev() {
            items.sort_by(|a, b| {
                let o = sort_cmp(&a.field(key), &b.field(key));
                if *rev { o.reverse() } else { o }
            });
        }
    }

    /// Resolve `?:`/`+:` prefixes against `items` (flux's `filter`): drop
    /// columns empty in every row, widen `+:` columns to their widest value
    /// (and header unless `no_header`), and remove the prefixes.
    pub fn resolve<R: Record>(
        &self,
        items: &[R],
        ctx: &Ctx,
        no_header: bool,
    ) -> Result<Template, String> {
        let mut out = self.clone();
        let mut keep = Vec::with_capacity(self.entries.len());
        for e in &self.entries {
            let Some(f) = &e.field else {
                keep.push(e.clone());
                continue;
            };
            let Some(sentinel) = SENTINELS.iter().find(|s| e.text.ends_with(**s)) else {
                keep.push(e.clone());
                continue;
            };
            let (filter, widen) = match *sentinel {
                "?:" => (true, false),
                "+:" => (false, true),
                _ => (true, true),
            };
            let mut width = 0;
            for item in items {
                let s = render_field(&item.field(&f.name), f.conv, "", ctx)?;
                if !ctx.is_empty_output(&s) {
                    width = width.max(s.chars().count());
                }
            }
            if filter && width == 0 {
                continue;
            }
            let mut e = e.clone();
            if widen {
                let mut fs = FluxSpec::parse(&f.spec);
                let mut max = fs.spec.width.unwrap_or(0).max(width);
                if !no_header {
                    let h = (self.headings)(&f.name).unwrap_or_default();
                    max = max.max(h.chars().count());
                }
                fs.set_width(max);
                if let Some(field) = e.field.as_mut() {
                    field.spec = fs.to_string();
                }
            }
            keep.push(e);
        }
        for e in &mut keep {
            for s in SENTINELS {
                e.text = e.text.replace(s, "");
            }
        }
        out.entries = keep;
        Ok(out)
    }

    /// The names of the fields the format shows, in order.
    pub fn field_names(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter_map(|e| e.field.as_ref().map(|f| f.name.as_str()))
    }

    /// The header line: each heading with only the field's align and width.
    pub fn header(&self) -> String {
        let mut line = String::new();
        for e in &self.entries {
            line.push_str(&e.text);
            if let Some(f) = &e.field {
                let fs = FluxSpec::parse(&f.spec);
                let h = (self.headings)(&f.name).unwrap_or_default();
                let spec = format!(
                    "{}{}",
                    fs.spec.align.map(String::from).unwrap_or_default(),
                    fs.spec.width.map(|w| w.to_string()).unwrap_or_default()
                );
                line.push_str(&format_value(&Value::Str(h.clone()), &spec).unwrap_or(h));
            }
        }
        line
    }

    /// One row.
    pub fn render<R: Record>(&self, item: &R, ctx: &Ctx) -> Result<String, String> {
        let mut line = String::new();
        for e in &self.entries {
            line.push_str(&e.text);
            if let Some(f) = &e.field {
                line.push_str(&render_field(&item.field(&f.name), f.conv, &f.spec, ctx)?);
            }
        }
        Ok(line)
    }
}

/// flux's `DisplayValue` order: unset ("" and "-") < numbers < other strings.
fn sort_cmp(a: &Value, b: &Value) -> Ordering {
    fn class(v: &Value) -> (u8, f64, String) {
        if let Some(n) = v.as_f64() {
            return (1, n, String::new());
        }
        let s = v.to_py_str();
        if s.is_empty() || s == "-" {
            return (0, 0.0, String::new());
        }
        match s.trim().parse::<f64>() {
            Ok(n) => (1, n, String::new()),
            Err(_) => (2, 0.0, s),
        }
    }
    let (ca, na, sa) = class(a);
    let (cb, nb, sb) = class(b);
    ca.cmp(&cb).then(na.total_cmp(&nb)).then(sa.cmp(&sb))
}

/// A spec as flux's `FormatSpec` splits it: an optional `TIMEFMT::` part,
/// the Python spec, and the `h` and `+` suffixes.
#[derive(Debug, Clone, Default)]
struct FluxSpec {
    time: Option<String>,
    spec: Spec,
    hyphen: bool,
    truncate: bool,
}

impl FluxSpec {
    fn parse(s: &str) -> FluxSpec {
        let (time, rest) = match s.find("::") {
            Some(i) => (Some(s[..i].to_string()), &s[i + 2..]),
            None => (None, s),
        };
        let (rest, truncate) = match rest.strip_suffix('+') {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let (rest, hyphen) = match rest.strip_suffix('h') {
            Some(r) => (r, true),
            None => (rest, false),
        };
        // A spec flux cannot split keeps none of its parts, as in flux.
        match Spec::parse(rest) {
            Ok(spec) => FluxSpec {
                time,
                spec,
                hyphen,
                truncate,
            },
            Err(_) => FluxSpec {
                time,
                ..Default::default()
            },
        }
    }

    /// `+:` widening: a string precision narrower than the width grows too.
    fn set_width(&mut self, w: usize) {
        self.spec.width = Some(w);
        if matches!(self.spec.ty, None | Some('s')) && self.spec.precision.is_some_and(|p| p < w) {
            self.spec.precision = Some(w);
        }
    }
}

impl std::fmt::Display for FluxSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.spec;
        if let Some(t) = &self.time {
            write!(f, "{t}::")?;
        }
        if let Some(a) = s.align {
            if let Some(c) = s.fill {
                write!(f, "{c}")?;
            }
            write!(f, "{a}")?;
        }
        if let Some(c) = s.sign {
            write!(f, "{c}")?;
        }
        for (on, c) in [(s.pos_zero, "z"), (s.alt, "#"), (s.zero, "0")] {
            if on {
                f.write_str(c)?;
            }
        }
        if let Some(w) = s.width {
            write!(f, "{w}")?;
        }
        if let Some(g) = s.grouping {
            write!(f, "{g}")?;
        }
        if let Some(p) = s.precision {
            write!(f, ".{p}")?;
        }
        if let Some(t) = s.ty {
            write!(f, "{t}")?;
        }
        if self.hyphen {
            f.write_str("h")?;
        }
        if self.truncate {
            f.write_str("+")?;
        }
        Ok(())
    }
}

/// A conversion's result: a plain value, or a timestamp for `!d`.
enum Converted {
    Plain(Value),
    Date(f64),
}

fn type_error(conv: char, v: &Value) -> String {
    format!(
        "!{conv} conversion of non-numeric value '{}'",
        v.to_py_str()
    )
}

fn convert(v: &Value, conv: Option<char>, ctx: &Ctx) -> Result<Converted, String> {
    let Some(k) = conv else {
        return Ok(Converted::Plain(v.clone()));
    };
    let empty_str = matches!(v, Value::Str(s) if s.is_empty());
    let num = || v.as_f64().ok_or_else(|| type_error(k, v));
    let out = match k {
        's' => Value::Str(v.to_py_str()),
        'r' | 'a' => Value::Str(match v {
            Value::Str(s) => format!("'{s}'"),
            Value::JobId(n, _) => format!("JobID({n})"),
            _ => v.to_py_str(),
        }),
        'd' if empty_str => return Ok(Converted::Date(0.0)),
        'd' => return Ok(Converted::Date(num()?)),
        'D' if !v.is_truthy() => Value::empty(),
        'D' => Value::Str(strftime(&ctx.tz, num()?, "%FT%T")?),
        'F' | 'H' | 'P' if empty_str => Value::empty(),
        'F' => Value::Str(fsd_flux(num()?)),
        'H' => Value::Str(hms(num()?)),
        'P' => {
            let p = num()? * 100.0;
            Value::Str(if 0.0 < p && p < 1.0 {
                format!("{p:.2}%")
            } else {
                format!("{}%", g_prec(p, 3))
            })
        }
        _ => return Err(format!("Unknown conversion specifier {k}")),
    };
    Ok(Converted::Plain(out))
}

/// flux's `fsd()`, with RFC 23 infinity as `inf`.
fn fsd_flux(secs: f64) -> String {
    if secs.is_infinite() {
        "inf".into()
    } else {
        format_fsd_py(secs)
    }
}

/// `!H`: `str(timedelta(seconds=round(v)))`, never rounding a positive
/// sub-second value down to zero.
fn hms(v: f64) -> String {
    let v = if 0.0 < v && v < 1.0 { 1.0 } else { v };
    // Python's round() rounds half to even.
    let total = v.round_ties_even() as i64;
    let days = total.div_euclid(86400);
    let rem = total.rem_euclid(86400);
    let hms = format!("{}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60);
    match days {
        0 => hms,
        1 | -1 => format!("{days} day, {hms}"),
        d => format!("{d} days, {hms}"),
    }
}

/// flux's `UtilFormatter.format_field` after `convert_field`.
fn render_field(v: &Value, conv: Option<char>, spec: &str, ctx: &Ctx) -> Result<String, String> {
    let (spec, truncate) = match spec.strip_suffix('+') {
        Some(s) => (s, true),
        None => (spec, false),
    };
    let (out, full) = match convert(v, conv, ctx)? {
        Converted::Date(ts) => format_date(ts, spec, ctx)?,
        Converted::Plain(v) => {
            let (v, spec) = match spec.strip_suffix('h') {
                Some(s) => {
                    let s = format!("{s}s");
                    let text = v.to_py_str();
                    let v = if ctx.is_empty_output(&text) {
                        "-".to_string()
                    } else {
                        text
                    };
                    (Value::Str(v), s)
                }
                None => (v, spec.to_string()),
            };
            (format_value(&v, &spec)?, v.to_py_str())
        }
    };
    if truncate && out.chars().count() < full.chars().count() {
        let mut t: String = out
            .chars()
            .take(out.chars().count().saturating_sub(1))
            .collect();
        t.push('+');
        return Ok(t);
    }
    Ok(out)
}

/// `UtilDatetime.__format__`: `TIMEFMT::SPEC`, empty at the epoch; returns
/// the text and Python's `str(datetime)` (for the `+` truncation test).
fn format_date(ts: f64, spec: &str, ctx: &Ctx) -> Result<(String, String), String> {
    let (timefmt, pyspec) = match spec.split_once("::") {
        Some((t, s)) => (t, s),
        None => (spec, ""),
    };
    let timefmt = if timefmt.is_empty() { "%FT%T" } else { timefmt };
    let text = if ts == 0.0 {
        String::new()
    } else {
        strftime(&ctx.tz, ts, timefmt)?
    };
    let full = if ts.fract() == 0.0 {
        strftime(&ctx.tz, ts, "%Y-%m-%d %H:%M:%S")?
    } else {
        strftime(&ctx.tz, ts, "%Y-%m-%d %H:%M:%S.%6f")?
    };
    let (text, pyspec) = match pyspec.strip_suffix('h') {
        Some(s) => (
            if text.is_empty() { "-".into() } else { text },
            format!("{s}s"),
        ),
        None => (text, pyspec.to_string()),
    };
    Ok((format_value(&Value::Str(text), &pyspec)?, full))
}

/// Python `str()` of a float, for callers that print raw values.
pub fn py_float(f: f64) -> String {
    float_repr(f)
}

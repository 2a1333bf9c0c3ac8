//! RFC 29 hostlists: ordered lists of host names with a compact string form.
//!
//! A list is kept as runs (`prefix` + zero-padded numbers `lo..=hi` [+ suffix]),
//! the way flux-core's libhostlist keeps host ranges, so `node[0-99999]` is one
//! run and `len`, `nth` and `find` walk runs rather than host names.
//!
//! Behaviour follows flux-core, which is what users' scripts see:
//!
//! * **Zero padding is per range.** The width of `lo-hi` is the number of
//!   characters of `lo` as written, so `[005,4,11-13]` expands to
//!   `005,4,11,12,13`. RFC 29 says the first element's padding applies to the
//!   whole bracket (`005,004,011,...`); flux-core does not do that.
//! * Encode walks the list in order, merging consecutive numbers of the same
//!   prefix into ranges and adjacent ranges of one prefix into one bracket.
//! * Hosts with a suffix after the bracket (`foo[1-2]-eth0`) stand alone: they
//!   are never re-compressed on encode.
//! * Host lookup (`find`, `delete`, set operations) is exact string equality:
//!   in `i[0-5]`, `i00` is not a member; in `i[00-05]` it is.
//!
//! Deliberately stricter than flux-core (which accepts these by accident):
//! `foo[0-]` (dangling hyphen), more than one bracket group in one expression
//! (`a[1-2]b[3-4]`, which flux-core expands to literal `a1b[3-4]`), `]` in a
//! prefix, and control characters in names are all rejected. A host whose
//! trailing digits overflow 64 bits is kept verbatim instead of being dropped.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::idset::IdSet;

/// Largest number of hosts one `lo-hi` range may hold (flux-core MAX_RANGE).
pub const MAX_RANGE_HOSTS: u64 = 1 << 20;

/// Largest number of comma-separated ranges in one bracket (flux-core MAX_RANGES).
pub const MAX_RANGES: usize = 10240;

/// Why a hostlist string or host name could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    /// The string breaks the RFC 29 grammar; `reason` says what and where.
    #[error("invalid hostlist {input:?}: {reason}")]
    Invalid {
        /// The whole string that was being decoded.
        input: String,
        /// What is wrong, naming the offending text and its byte position.
        reason: String,
    },
    /// A single host name is not valid.
    #[error("invalid host name {host:?}: {reason}")]
    InvalidHost {
        /// The rejected name.
        host: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn invalid(input: &str, reason: impl Into<String>) -> HostlistError {
    HostlistError::Invalid {
        input: input.to_string(),
        reason: reason.into(),
    }
}

/// A host name split as flux-core splits it: prefix, trailing number, width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostnameParts<'a> {
    /// Everything before the trailing digits (the whole name when there are none).
    pub prefix: &'a str,
    /// The trailing decimal number, if any.
    pub number: Option<u64>,
    /// Characters of the trailing digits, leading zeros included (0 if none).
    pub width: usize,
}

/// Characters that may not appear in a host name, and why.
fn bad_host_char(c: char) -> Option<&'static str> {
    match c {
        ',' => Some("',' separates hosts"),
        '[' | ']' => Some("brackets belong to range expressions"),
        c if c.is_whitespace() => Some("whitespace separates hosts"),
        c if c.is_control() => Some("control characters are not allowed"),
        _ => None,
    }
}

/// Split one host name into prefix, trailing number and its width.
///
/// `foo` → (`foo`, none, 0); `foo001` → (`foo`, 1, 3); `foo01bar` has no
/// trailing digits, so it cannot be ranged. Names that are empty or contain
/// blanks, commas or brackets are rejected. A number too large for 64 bits is
/// not treated as a number (the whole name becomes the prefix).
pub fn hostname(host: &str) -> Result<HostnameParts<'_>, HostlistError> {
    if host.is_empty() {
        return Err(HostlistError::InvalidHost {
            host: String::new(),
            reason: "a host name cannot be empty".into(),
        });
    }
    if let Some((i, c, why)) = host
        .char_indices()
        .find_map(|(i, c)| bad_host_char(c).map(|w| (i, c, w)))
    {
        return Err(HostlistError::InvalidHost {
            host: host.to_string(),
            reason: format!("character {c:?} at position {i}: {why}"),
        });
    }
    let start = host.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let digits = &host[start..];
    match digits.parse::<u64>() {
        Ok(n) if !digits.is_empty() => Ok(HostnameParts {
            prefix: &host[..start],
            number: Some(n),
            width: digits.len(),
        }),
        _ => Ok(HostnameParts {
            prefix: host,
            number: None,
            width: 0,
        }),
    }
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Zero characters `width` adds in front of `n`.
fn zero_pad(n: u64, width: usize) -> usize {
    width.saturating_sub(digits(n))
}

/// flux-core's width compatibility test for joining `n` (width `wn`) with `m`
/// (width `wm`): `Some(width)` for the joined range, `None` when the two
/// cannot share a width without changing how a number prints.
fn combine_width(n: u64, wn: usize, m: u64, wm: usize) -> Option<usize> {
    let n_same = zero_pad(n, wn) == zero_pad(n, wm);
    let m_same = zero_pad(m, wm) == zero_pad(m, wn);
    if n_same {
        Some(wm)
    } else if m_same {
        Some(wn)
    } else {
        None
    }
}

/// Does `digits` (all ASCII digits) print number `n` at width `width`?
fn prints_as(text: &str, n: u64, width: usize) -> bool {
    text.len() == width.max(digits(n))
}

/// One run of hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Run {
    /// A host without a number that can be ranged, kept verbatim.
    Single(Arc<str>),
    /// `prefix` + each of `lo..=hi` zero-padded to `width`.
    Range {
        prefix: Arc<str>,
        lo: u64,
        hi: u64,
        width: usize,
    },
    /// `prefix` + padded number + `suffix`: each host stands alone, as
    /// flux-core makes every expanded host with a suffix a single host.
    Suffixed {
        prefix: Arc<str>,
        lo: u64,
        hi: u64,
        width: usize,
        suffix: Arc<str>,
    },
}

impl Run {
    fn count(&self) -> usize {
        match self {
            Run::Single(_) => 1,
            Run::Range { lo, hi, .. } | Run::Suffixed { lo, hi, .. } => (hi - lo + 1) as usize,
        }
    }

    fn host(&self, k: usize) -> String {
        match self {
            Run::Single(name) => name.to_string(),
            Run::Range {
                prefix, lo, width, ..
            } => format!("{prefix}{:0width$}", lo + k as u64),
            Run::Suffixed {
                prefix,
                lo,
                width,
                suffix,
                ..
            } => format!("{prefix}{:0width$}{suffix}", lo + k as u64),
        }
    }

    /// Position of `host` in this run by exact name.
    fn position(&self, host: &str) -> Option<usize> {
        let (text, lo, hi, width) = match self {
            Run::Single(name) => return (**name == *host).then_some(0),
            Run::Range {
                prefix,
                lo,
                hi,
                width,
            } => (host.strip_prefix(&**prefix)?, *lo, *hi, *width),
            Run::Suffixed {
                prefix,
                lo,
                hi,
                width,
                suffix,
            } => (
                host.strip_prefix(&**prefix)?.strip_suffix(&**suffix)?,
                *lo,
                *hi,
                *width,
            ),
        };
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = text.parse::<u64>().ok()?;
        (lo <= n && n <= hi && prints_as(text, n, width)).then(|| (n - lo) as usize)
    }

    /// The same run restricted to members `a..b` (by position).
    fn slice(&self, a: usize, b: usize) -> Run {
        let mut r = self.clone();
        if let Run::Range { lo, hi, .. } | Run::Suffixed { lo, hi, .. } = &mut r {
            let base = *lo;
            *lo = base + a as u64;
            *hi = base + b as u64 - 1;
        }
        r
    }

    /// The runs flux-core would hold: a suffixed run is many single hosts.
    fn into_flux_ranges(self, out: &mut Vec<Run>) {
        match &self {
            Run::Suffixed { .. } => {
                for k in 0..self.count() {
                    out.push(Run::Single(self.host(k).into()));
                }
            }
            _ => out.push(self),
        }
    }

    /// flux-core's `hostrange_within_range`: may share one bracket.
    fn same_bracket(&self, other: &Run) -> bool {
        matches!((self, other), (Run::Range { prefix: a, .. }, Run::Range { prefix: b, .. }) if a == b)
    }

    /// The sort order of flux-core's `hostrange_cmp`, made total: prefix (a
    /// single host first), then the printed length of `lo`, then `lo`.
    fn sort_cmp(&self, other: &Run) -> Ordering {
        fn key(r: &Run) -> (&str, bool, usize, u64) {
            match r {
                Run::Single(name) => (name, false, 0, 0),
                Run::Range {
                    prefix, lo, width, ..
                } => (prefix, true, (*width).max(digits(*lo)), *lo),
                // Not present while sorting (expanded to singles first).
                Run::Suffixed {
                    prefix, lo, width, ..
                } => (prefix, true, (*width).max(digits(*lo)), *lo),
            }
        }
        let (a, b) = (key(self), key(other));
        a.0.as_bytes()
            .cmp(b.0.as_bytes())
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    }
}

/// An ordered list of host names (duplicates allowed), kept compressed.
#[derive(Debug, Clone, Default)]
pub struct Hostlist {
    runs: Vec<Run>,
    len: usize,
}

impl PartialEq for Hostlist {
    /// Equal when the expanded host names are equal, in order.
    fn eq(&self, other: &Self) -> bool {
        self.runs == other.runs || (self.len == other.len && self.iter().eq(other.iter()))
    }
}

impl Eq for Hostlist {}

/// Parse one `lo`, `lo-hi` element of a bracket.
fn parse_range(input: &str, text: &str, pos: usize) -> Result<(u64, u64, usize), HostlistError> {
    let number = |s: &str, at: usize| -> Result<u64, HostlistError> {
        if s.is_empty() {
            return Err(invalid(input, format!("missing number at position {at}")));
        }
        if let Some((i, c)) = s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
            let why = if c == '-' {
                "negative numbers and extra '-' are not allowed"
            } else {
                "only digits, ',' and '-' may appear in brackets"
            };
            return Err(invalid(
                input,
                format!("unexpected character {c:?} at position {}: {why}", at + i),
            ));
        }
        s.parse::<u64>()
            .map_err(|_| invalid(input, format!("number {s} at position {at} is too large")))
    };
    let (lo_text, hi) = match text.split_once('-') {
        None => (text, None),
        Some((a, b)) => (a, Some((b, pos + a.len() + 1))),
    };
    let lo = number(lo_text, pos)?;
    let hi = match hi {
        None => lo,
        Some((b, at)) => number(b, at)?,
    };
    if hi < lo {
        return Err(invalid(
            input,
            format!("range {text:?} at position {pos}: range end is less than its start"),
        ));
    }
    if hi - lo + 1 > MAX_RANGE_HOSTS {
        return Err(invalid(
            input,
            format!(
                "range {text:?} at position {pos} holds {} hosts, more than the limit of {MAX_RANGE_HOSTS}",
                hi - lo + 1
            ),
        ));
    }
    Ok((lo, hi, lo_text.len()))
}

/// Prefixes and suffixes obey the host name rules, so that every host they
/// expand to decodes again as a host name.
fn check_text(input: &str, text: &str, pos: usize, what: &str) -> Result<(), HostlistError> {
    if let Some((i, c, why)) = text
        .char_indices()
        .find_map(|(i, c)| bad_host_char(c).map(|w| (i, c, w)))
    {
        let why = if c == '[' || c == ']' {
            format!("unmatched {c:?} in {what} (one bracket group per host expression)")
        } else {
            why.to_string()
        };
        return Err(invalid(
            input,
            format!("character {c:?} at position {}: {why}", pos + i),
        ));
    }
    Ok(())
}

fn is_sep(b: u8) -> bool {
    matches!(b, b',' | b' ' | b'\t')
}

/// Split a hostlist string into expressions at separators outside brackets.
fn tokens(s: &str) -> Vec<(usize, &str)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && is_sep(b[i]) {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let start = i;
        let mut level = 0i64;
        while i < b.len() && (level != 0 || !is_sep(b[i])) {
            match b[i] {
                b'[' => level += 1,
                b']' => level -= 1,
                _ => {}
            }
            i += 1;
        }
        out.push((start, &s[start..i]));
    }
    out
}

impl Hostlist {
    /// The empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decode an RFC 29 string.
    pub fn parse(s: &str) -> Result<Self, HostlistError> {
        let mut hl = Hostlist::new();
        for (pos, tok) in tokens(s) {
            hl.parse_expr(s, tok, pos)?;
        }
        Ok(hl)
    }

    fn parse_expr(&mut self, input: &str, tok: &str, pos: usize) -> Result<(), HostlistError> {
        let Some(open) = tok.find('[') else {
            if let Some(i) = tok.find(']') {
                return Err(invalid(
                    input,
                    format!("unmatched ']' at position {}", pos + i),
                ));
            }
            return match hostname(tok) {
                Ok(parts) => {
                    self.push_run(run_of(tok, parts));
                    Ok(())
                }
                Err(e) => Err(invalid(input, format!("at position {pos}: {e}"))),
            };
        };
        let prefix = &tok[..open];
        check_text(input, prefix, pos, "prefix")?;
        let rest = &tok[open + 1..];
        let Some(close) = rest.find(']') else {
            return Err(invalid(
                input,
                format!("'[' at position {} is never closed", pos + open),
            ));
        };
        let inner = &rest[..close];
        let suffix = &rest[close + 1..];
        let inner_pos = pos + open + 1;
        check_text(input, suffix, inner_pos + close + 1, "suffix")?;
        if inner.is_empty() {
            return Err(invalid(
                input,
                format!("empty brackets at position {}", pos + open),
            ));
        }
        let prefix: Arc<str> = prefix.into();
        let suffix: Option<Arc<str>> = (!suffix.is_empty()).then(|| suffix.into());
        let mut at = inner_pos;
        for (n, elem) in inner.split(',').enumerate() {
            if n == MAX_RANGES {
                return Err(invalid(
                    input,
                    format!(
                        "more than {MAX_RANGES} ranges in the brackets at position {}",
                        pos + open
                    ),
                ));
            }
            let (lo, hi, width) = parse_range(input, elem, at)?;
            at += elem.len() + 1;
            self.push_run(match &suffix {
                None => Run::Range {
                    prefix: prefix.clone(),
                    lo,
                    hi,
                    width,
                },
                Some(suffix) => Run::Suffixed {
                    prefix: prefix.clone(),
                    lo,
                    hi,
                    width,
                    suffix: suffix.clone(),
                },
            });
        }
        Ok(())
    }

    /// Append a run, joining it to the last one where flux-core would.
    fn push_run(&mut self, run: Run) {
        self.len += run.count();
        if let Some(tail) = self.runs.last_mut() {
            if let Some((joined_hi, joined_width)) = touching(tail, &run)
                && let Run::Range { hi, width, .. } = tail
            {
                *hi = joined_hi;
                *width = joined_width;
                return;
            }
            match (tail, &run) {
                // Suffixed hosts print one by one, so joining them only
                // saves memory; widths must agree exactly.
                (
                    Run::Suffixed {
                        prefix: p1,
                        hi: h1,
                        width: w1,
                        suffix: s1,
                        ..
                    },
                    Run::Suffixed {
                        prefix: p2,
                        lo: l2,
                        hi: h2,
                        width: w2,
                        suffix: s2,
                    },
                ) if p1 == p2 && s1 == s2 && w1 == w2 && h1.checked_add(1) == Some(*l2) => {
                    *h1 = *h2;
                    return;
                }
                _ => {}
            }
        }
        self.runs.push(run);
    }

    /// Append a run with no joining (pieces left by a deletion stay apart).
    fn push_run_raw(&mut self, run: Run) {
        self.len += run.count();
        self.runs.push(run);
    }

    /// Encode compressed, in list order, as flux-core does.
    pub fn encode(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let runs = &self.runs;
        let mut i = 0;
        while i < runs.len() {
            if i > 0 {
                out.push(',');
            }
            match &runs[i] {
                Run::Single(name) => {
                    out.push_str(name);
                    i += 1;
                }
                r @ Run::Suffixed { .. } => {
                    for k in 0..r.count() {
                        if k > 0 {
                            out.push(',');
                        }
                        out.push_str(&r.host(k));
                    }
                    i += 1;
                }
                Run::Range { prefix, .. } => {
                    let bracket = runs[i].count() > 1
                        || runs.get(i + 1).is_some_and(|n| runs[i].same_bracket(n));
                    out.push_str(prefix);
                    if bracket {
                        out.push('[');
                    }
                    loop {
                        if let Run::Range { lo, hi, width, .. } = &runs[i] {
                            // Writing to a String cannot fail.
                            let _ = write!(out, "{lo:0width$}");
                            if lo < hi {
                                let _ = write!(out, "-{hi:0width$}");
                            }
                        }
                        i += 1;
                        if i >= runs.len() || !runs[i].same_bracket(&runs[i - 1]) {
                            break;
                        }
                        out.push(',');
                    }
                    if bracket {
                        out.push(']');
                    }
                }
            }
        }
        out
    }

    /// Number of hosts (with duplicates).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The host at index `i`.
    pub fn nth(&self, i: usize) -> Option<String> {
        let mut i = i;
        for run in &self.runs {
            let n = run.count();
            if i < n {
                return Some(run.host(i));
            }
            i -= n;
        }
        None
    }

    /// The first host.
    pub fn first(&self) -> Option<String> {
        self.runs.first().map(|r| r.host(0))
    }

    /// The last host.
    pub fn last(&self) -> Option<String> {
        self.runs.last().map(|r| r.host(r.count() - 1))
    }

    /// Index of the first occurrence of `host`.
    pub fn find(&self, host: &str) -> Option<usize> {
        let mut base = 0;
        for run in &self.runs {
            if let Some(k) = run.position(host) {
                return Some(base + k);
            }
            base += run.count();
        }
        None
    }

    /// Is `host` in the list.
    pub fn contains(&self, host: &str) -> bool {
        self.find(host).is_some()
    }

    /// Append one host name (validated).
    pub fn push(&mut self, host: &str) -> Result<(), HostlistError> {
        let parts = hostname(host)?;
        let mut run = run_of(host, parts);
        // Hosts pushed one by one mostly share the last host's prefix: share
        // its allocation too, so a long list holds one copy of "node" and
        // sorting compares prefixes that sit in cache.
        if let (
            Run::Range { prefix, .. },
            Some(Run::Range { prefix: last, .. } | Run::Suffixed { prefix: last, .. }),
        ) = (&mut run, self.runs.last())
            && prefix == last
        {
            *prefix = last.clone();
        }
        self.push_run(run);
        Ok(())
    }

    /// Append every host of `other`, in order.
    pub fn append(&mut self, other: &Hostlist) {
        for run in &other.runs {
            self.push_run(run.clone());
        }
    }

    /// Remove one occurrence (the first) of each host of `other`, as
    /// flux-core's `hostlist_delete`; returns how many were removed. A host
    /// listed twice in `other` removes two occurrences.
    pub fn delete(&mut self, other: &Hostlist) -> usize {
        if other.is_empty() || self.is_empty() {
            return 0;
        }
        let mut want: HashMap<String, usize> = HashMap::new();
        for host in other.iter() {
            *want.entry(host).or_default() += 1;
        }
        self.delete_where(|host| match want.get_mut(host) {
            Some(c) if *c > 0 => {
                *c -= 1;
                true
            }
            _ => false,
        })
    }

    /// Remove every occurrence of each host of `other`; returns how many were removed.
    pub fn delete_all(&mut self, other: &Hostlist) -> usize {
        // One pass removing every occurrence leaves the same pieces as
        // deleting one occurrence per pass until none is left, which cost a
        // pass over the list per repeat of a host.
        if other.is_empty() || self.is_empty() {
            return 0;
        }
        let names = other.name_set();
        self.delete_where(|host| names.contains(host))
    }

    /// Remove the hosts for which `hit` is true, visiting them in order;
    /// the survivors of a run stay as pieces of it. Returns how many went.
    fn delete_where(&mut self, mut hit: impl FnMut(&str) -> bool) -> usize {
        let mut removed = 0;
        let mut out = Hostlist::new();
        for run in std::mem::take(&mut self.runs) {
            // Keep maximal stretches of surviving hosts as pieces of the run.
            let n = run.count();
            let mut start = 0;
            for k in 0..n {
                if hit(&run.host(k)) {
                    if start < k {
                        out.push_run_raw(run.slice(start, k));
                    }
                    start = k + 1;
                    removed += 1;
                }
            }
            if start == 0 {
                out.push_run_raw(run);
            } else if start < n {
                out.push_run_raw(run.slice(start, n));
            }
        }
        *self = out;
        removed
    }

    /// Hosts in order, expanded.
    pub fn iter(&self) -> impl Iterator<Item = String> + '_ {
        self.runs
            .iter()
            .flat_map(|run| (0..run.count()).map(move |k| run.host(k)))
    }

    /// Call `f` with every host name in order, without allocating per host:
    /// each name is built in one reused buffer (as flux-core's iterator
    /// hands out names), so `f` sees it only for the length of the call.
    ///
    /// Consecutive numbers of a range are made by counting up the decimal
    /// digits already in the buffer, so most hosts cost one or two byte writes.
    pub fn for_each_host(&self, mut f: impl FnMut(&str)) {
        let mut buf = String::new();
        for run in &self.runs {
            match run {
                Run::Single(name) => f(name),
                Run::Range {
                    prefix,
                    lo,
                    hi,
                    width,
                } => count_up(&mut buf, prefix, *lo, *hi, *width, "", &mut f),
                Run::Suffixed {
                    prefix,
                    lo,
                    hi,
                    width,
                    suffix,
                } => count_up(&mut buf, prefix, *lo, *hi, *width, suffix, &mut f),
            }
        }
    }

    /// Hosts at positions `start..end` (clamped to the list).
    pub fn slice(&self, start: usize, end: usize) -> Hostlist {
        let end = end.min(self.len);
        let mut out = Hostlist::new();
        let mut base = 0;
        for run in &self.runs {
            let n = run.count();
            let (a, b) = (start.max(base), end.min(base + n));
            if a < b {
                out.push_run(run.slice(a - base, b - base));
            }
            base += n;
            if base >= end {
                break;
            }
        }
        out
    }

    /// Hosts at the positions in `indices`, ascending; `Err(i)` names the
    /// first position that is past the end.
    pub fn select(&self, indices: &IdSet) -> Result<Hostlist, u64> {
        if let Some(last) = indices.last()
            && u64::from(last) >= self.len as u64
        {
            return Err(u64::from(last));
        }
        let mut out = Hostlist::new();
        let mut r = 0;
        let mut base = 0usize;
        for &(lo, hi) in indices.ranges() {
            let (mut lo, hi) = (lo as usize, hi as usize + 1);
            while lo < hi {
                while base + self.runs[r].count() <= lo {
                    base += self.runs[r].count();
                    r += 1;
                }
                let run = &self.runs[r];
                let end = hi.min(base + run.count());
                out.push_run(run.slice(lo - base, end - base));
                lo = end;
            }
        }
        Ok(out)
    }

    /// Sort by prefix then number, as flux-core's `hostlist_sort` (which can
    /// leave overlapping ranges such as `[0-12,12-15,15-20]`).
    pub fn sort(&mut self) {
        let mut runs = self.flux_ranges();
        if runs.len() <= 1 {
            self.runs = runs;
            return;
        }
        sort_runs(&mut runs);
        coalesce(&mut runs);
        self.runs = runs;
    }

    /// Sort and remove duplicates.
    pub fn uniq(&mut self) {
        let mut runs = self.flux_ranges();
        if runs.len() <= 1 {
            self.runs = runs;
            return;
        }
        sort_runs(&mut runs);
        let mut out: Vec<Run> = Vec::with_capacity(runs.len());
        for run in runs {
            if let Some(prev) = out.last_mut()
                && join(prev, &run)
            {
                continue;
            }
            out.push(run);
        }
        self.len = out.iter().map(Run::count).sum();
        self.runs = out;
    }

    fn flux_ranges(&mut self) -> Vec<Run> {
        let mut runs = Vec::with_capacity(self.runs.len());
        for run in std::mem::take(&mut self.runs) {
            run.into_flux_ranges(&mut runs);
        }
        runs
    }

    /// Hosts in either list, sorted and unique.
    pub fn union(&self, other: &Hostlist) -> Hostlist {
        let mut out = self.clone();
        out.append(other);
        out.uniq();
        out
    }

    /// Hosts in both lists, sorted and unique.
    pub fn intersect(&self, other: &Hostlist) -> Hostlist {
        let names = other.name_set();
        let mut out = self.filtered(|h| names.contains(h));
        out.uniq();
        out
    }

    /// Hosts of `self` not in `other`, order kept.
    pub fn minus(&self, other: &Hostlist) -> Hostlist {
        let names = other.name_set();
        self.filtered(|h| !names.contains(h))
    }

    /// Hosts in exactly one of the lists, sorted and unique.
    pub fn xor(&self, other: &Hostlist) -> Hostlist {
        let mut out = self.minus(other);
        out.append(&other.minus(self));
        out.uniq();
        out
    }

    fn name_set(&self) -> HashSet<String> {
        self.iter().collect()
    }

    /// Hosts passing `keep`, each re-appended by name as flux-core's tool
    /// builds its results (so runs are re-split by trailing digits).
    fn filtered(&self, mut keep: impl FnMut(&str) -> bool) -> Hostlist {
        let mut out = Hostlist::new();
        for host in self.iter() {
            if keep(&host)
                && let Ok(parts) = hostname(&host)
            {
                out.push_run(run_of(&host, parts));
            }
        }
        out
    }
}

/// Call `f` with `prefix` + each of `lo..=hi` zero-padded to `width` +
/// `suffix`, built in `buf`.
fn count_up(
    buf: &mut String,
    prefix: &str,
    lo: u64,
    hi: u64,
    width: usize,
    suffix: &str,
    f: &mut impl FnMut(&str),
) {
    use std::fmt::Write as _;
    buf.clear();
    buf.push_str(prefix);
    let start = buf.len();
    // Writing to a String cannot fail.
    let _ = write!(buf, "{lo:0width$}");
    let mut end = buf.len();
    buf.push_str(suffix);
    f(buf);
    let mut n = lo;
    while n < hi {
        n += 1;
        // The digits that change are the trailing 9s (which become 0s) and
        // the digit before them (which goes up by one).
        let digits = &buf.as_bytes()[start..end];
        let nines = digits.iter().rev().take_while(|&&d| d == b'9').count();
        if nines == digits.len() {
            // 9..9 -> 10..0: one more digit; rare enough to print afresh.
            buf.truncate(start);
            let _ = write!(buf, "{n:0width$}");
            end = buf.len();
        } else {
            let at = end - nines - 1;
            let bumped = char::from(buf.as_bytes()[at] + 1);
            buf.truncate(at);
            buf.push(bumped);
            buf.extend(std::iter::repeat_n('0', nines));
        }
        buf.push_str(suffix);
        f(buf);
    }
}

/// The run for one validated host name.
fn run_of(host: &str, parts: HostnameParts<'_>) -> Run {
    match parts.number {
        Some(n) => Run::Range {
            prefix: parts.prefix.into(),
            lo: n,
            hi: n,
            width: parts.width,
        },
        None => Run::Single(host.into()),
    }
}

/// flux-core's `hostrange_join`: fold `next` into `prev` when they share a
/// prefix and overlap or touch; true when `next` is absorbed.
fn join(prev: &mut Run, next: &Run) -> bool {
    match (prev, next) {
        (Run::Single(a), Run::Single(b)) => a == b,
        (
            Run::Range {
                prefix: p1,
                lo: l1,
                hi: h1,
                width: w1,
            },
            Run::Range {
                prefix: p2,
                lo: l2,
                hi: h2,
                width: w2,
            },
        ) if p1 == p2 => {
            let Some(w) = combine_width(*l1, *w1, *l2, *w2) else {
                return false;
            };
            if h1.checked_add(1) == Some(*l2) || *h1 >= *l2 {
                *h1 = (*h1).max(*h2);
                *w1 = w;
                true
            } else {
                false
            }
        }
        _ => false,
    }
}

/// flux-core's `hostlist_coalesce` after sorting: split overlapping ranges
/// so duplicates sit next to each other, then join touching ranges.
///
/// flux-core scans pairs from the end and, after each split, starts again
/// from the end. The pairs above the split were already checked and did
/// not change, so going on from the pair just above the split makes the
/// same checks in the same order; with the list held as two stacks around
/// the pair being checked, each step is O(1) instead of an insert and a
/// rescan, and a sorted list with many duplicates coalesces in linear time.
/// Sort runs as [`Run::sort_cmp`] orders them (stably). When few prefixes
/// are shared by many runs (a long list of `nodeN` names), the runs are
/// sorted by a small key (the prefix's place among the distinct prefixes,
/// then the number) and moved once, instead of sorting the runs themselves,
/// which compares prefix text behind a pointer at every step and moves
/// large values: at 100k hosts that outgrew the cache and the sort grew
/// faster than n log n.
fn sort_runs(runs: &mut Vec<Run>) {
    /// Beyond this many prefixes the runs are sorted as they are.
    const MAX_KEYED_PREFIXES: usize = 64;
    let prefix = |r: &Run| -> Option<Arc<str>> {
        match r {
            Run::Range { prefix, .. } | Run::Suffixed { prefix, .. } => Some(Arc::clone(prefix)),
            Run::Single(_) => None,
        }
    };
    // Distinct prefix texts, looked at only where the allocation changes
    // (hosts pushed one by one share one); many of them: the plain sort.
    let mut distinct: Vec<Arc<str>> = Vec::new();
    let mut last: Option<Arc<str>> = None;
    for r in runs.iter() {
        let Some(p) = prefix(r) else {
            return runs.sort_by(Run::sort_cmp);
        };
        if last.as_ref().is_some_and(|l| Arc::ptr_eq(l, &p)) {
            continue;
        }
        if !distinct.iter().any(|d| d.as_bytes() == p.as_bytes()) {
            if distinct.len() == MAX_KEYED_PREFIXES {
                return runs.sort_by(Run::sort_cmp);
            }
            distinct.push(Arc::clone(&p));
        }
        last = Some(p);
    }
    distinct.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let place = |p: &str| -> u32 {
        // Present: every prefix was collected above.
        distinct
            .binary_search_by(|d| d.as_bytes().cmp(p.as_bytes()))
            .unwrap_or(0) as u32
    };
    // One integer a run: place, printed width, number, position (which
    // keeps the sort stable). 16 bytes instead of a 24-byte tuple keep
    // 100k keys within a core's cache, and a comparison is one compare.
    let mut keyed: Vec<u128> = Vec::with_capacity(runs.len());
    let mut cached: Option<(Arc<str>, u32)> = None;
    for (i, r) in runs.iter().enumerate() {
        let (Run::Range {
            prefix, lo, width, ..
        }
        | Run::Suffixed {
            prefix, lo, width, ..
        }) = r
        else {
            continue;
        };
        let rank = match &cached {
            Some((p, rank)) if Arc::ptr_eq(p, prefix) => *rank,
            _ => {
                let rank = place(prefix);
                cached = Some((Arc::clone(prefix), rank));
                rank
            }
        };
        let Ok(printed) = u8::try_from((*width).max(digits(*lo))) else {
            // Hundreds of leading zeros: not worth a key of their own.
            return runs.sort_by(Run::sort_cmp);
        };
        let key = u128::from(rank) << 104
            | u128::from(printed) << 96
            | u128::from(*lo) << 32
            | u128::from(i as u32);
        keyed.push(key);
    }
    keyed.sort_unstable();
    let mut slots: Vec<Option<Run>> = std::mem::take(runs).into_iter().map(Some).collect();
    runs.extend(
        keyed
            .into_iter()
            .filter_map(|key| slots.get_mut(key as u32 as usize).and_then(Option::take)),
    );
}

fn coalesce(runs: &mut Vec<Run>) {
    if runs.len() < 2 {
        return;
    }
    // `left` ends with the first run of the pair, `right` (reversed) with the second.
    let mut right = vec![runs.pop().expect("two or more runs")];
    let mut left = std::mem::take(runs);
    while let (Some(prev), Some(next)) = (left.last_mut(), right.last_mut()) {
        let Some((prefix, dup_lo, dup_hi, width, prev_hi)) = overlap(prev, next) else {
            right.extend(left.pop());
            continue;
        };
        // Shape as flux-core: prev ends at the first duplicate, next starts
        // at the last one, and each duplicate in between appears twice.
        if let Run::Range { hi, .. } = prev {
            *hi = dup_lo;
        }
        let next_lo = dup_hi;
        if let Run::Range { lo, hi, .. } = next {
            if dup_hi < prev_hi {
                *hi = prev_hi;
            }
            *lo = next_lo;
        }
        for x in dup_lo..=dup_hi {
            let one = Run::Range {
                prefix: prefix.clone(),
                lo: x,
                hi: x,
                width,
            };
            if x > dup_lo {
                left.push(one.clone());
            }
            if x < next_lo {
                left.push(one);
            }
        }
        // Go on with the pair (next, the run after it), or with (last
        // inserted, next) when next is the last run, as flux-core's rescan
        // from the end would.
        if right.len() > 1 {
            left.extend(right.pop());
        }
    }
    right.reverse();
    *runs = collapse(right);
}

/// Two neighbouring ranges of one prefix: the prefix, then (lo, hi, width)
/// of each.
type RangePair<'a> = (&'a Arc<str>, (u64, u64, usize), (u64, u64, usize));

fn range_pair<'a>(prev: &'a Run, next: &'a Run) -> Option<RangePair<'a>> {
    match (prev, next) {
        (
            Run::Range {
                prefix: p1,
                lo: l1,
                hi: h1,
                width: w1,
            },
            Run::Range {
                prefix: p2,
                lo: l2,
                hi: h2,
                width: w2,
            },
        ) if p1 == p2 => Some((p1, (*l1, *h1, *w1), (*l2, *h2, *w2))),
        _ => None,
    }
}

/// The duplicates of two neighbours of one prefix whose ranges overlap:
/// (prefix, first duplicate, last duplicate, width of `prev`, `prev`'s hi).
fn overlap(prev: &Run, next: &Run) -> Option<(Arc<str>, u64, u64, usize, u64)> {
    let (prefix, (l1, h1, w1), (l2, h2, w2)) = range_pair(prev, next)?;
    (h1 > l2 && combine_width(l1, w1, l2, w2).is_some())
        .then(|| (prefix.clone(), l2, h2.min(h1), w1, h1))
}

/// Two neighbours of one prefix whose ranges touch exactly (`prev` ends
/// right before `next` starts) and whose widths combine: the joined run's
/// (hi, width).
fn touching(prev: &Run, next: &Run) -> Option<(u64, usize)> {
    let (_, (l1, h1, w1), (l2, h2, w2)) = range_pair(prev, next)?;
    if h1.checked_add(1) != Some(l2) {
        return None;
    }
    combine_width(l1, w1, l2, w2).map(|w| (h2, w))
}

/// flux-core's `hostlist_collapse`: join exactly touching neighbours, from
/// the end (which decides the joined widths), in one pass.
fn collapse(mut runs: Vec<Run>) -> Vec<Run> {
    let Some(mut cur) = runs.pop() else {
        return runs;
    };
    // Built back to front, then reversed.
    let mut out = Vec::with_capacity(runs.len() + 1);
    while let Some(mut prev) = runs.pop() {
        match touching(&prev, &cur) {
            Some((new_hi, w)) => {
                if let Run::Range { hi, width, .. } = &mut prev {
                    *hi = new_hi;
                    *width = w;
                }
            }
            None => out.push(cur),
        }
        cur = prev;
    }
    out.push(cur);
    out.reverse();
    out
}

impl fmt::Display for Hostlist {
    /// The compressed form, as [`Hostlist::encode`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl FromStr for Hostlist {
    type Err = HostlistError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Hostlist::parse(s)
    }
}

impl FromIterator<Hostlist> for Hostlist {
    /// Concatenate lists in order.
    fn from_iter<T: IntoIterator<Item = Hostlist>>(iter: T) -> Self {
        let mut out = Hostlist::new();
        for hl in iter {
            out.append(&hl);
        }
        out
    }
}

impl serde::Serialize for Hostlist {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.encode())
    }
}

impl<'de> serde::Deserialize<'de> for Hostlist {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Hostlist;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 29 hostlist string such as \"node[0-3]\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Hostlist, E> {
                Hostlist::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// Lookups before [`FirstIndex`] indexes the list: one `find` walks the
/// runs, cheap for a few hosts; the index walks every host once.
const FIND_BEFORE_INDEX: usize = 16;

/// The first index of a host (as [`Hostlist::find`]), for many lookups: the
/// first few walk the runs, then one pass builds a map, so n lookups over a
/// list of n hosts stay linear.
#[derive(Debug)]
pub struct FirstIndex<'a> {
    hl: &'a Hostlist,
    lookups: usize,
    index: Option<HashMap<String, usize>>,
}

impl<'a> FirstIndex<'a> {
    /// An index over `hl`, built on the first lookup past a few.
    pub fn new(hl: &'a Hostlist) -> Self {
        FirstIndex {
            hl,
            lookups: 0,
            index: None,
        }
    }

    /// The first index of `host` in the list.
    pub fn of(&mut self, host: &str) -> Option<usize> {
        if self.index.is_none() {
            self.lookups += 1;
            if self.lookups <= FIND_BEFORE_INDEX {
                return self.hl.find(host);
            }
            let mut index = HashMap::with_capacity(self.hl.len());
            for (i, name) in self.hl.iter().enumerate() {
                index.entry(name).or_insert(i);
            }
            self.index = Some(index);
        }
        self.index.as_ref()?.get(host).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hl(s: &str) -> Hostlist {
        Hostlist::parse(s).unwrap()
    }

    /// `list` sorted by the plain comparison of runs: what the keyed sort
    /// must give.
    fn sorted_by_comparison(list: &Hostlist) -> Hostlist {
        let mut reference = list.clone();
        let mut runs = reference.flux_ranges();
        runs.sort_by(Run::sort_cmp);
        coalesce(&mut runs);
        reference.runs = runs;
        reference
    }

    #[test]
    fn hundreds_of_leading_zeros_sort_as_the_comparison_does() {
        let long = format!("node{}7", "0".repeat(300));
        let mut list = hl("node3,node10");
        list.push(&long).unwrap();
        list.push("node2").unwrap();
        let reference = sorted_by_comparison(&list);
        list.sort();
        assert_eq!(list.encode(), reference.encode());
        assert_eq!(list.last(), Some(long));
    }

    #[test]
    fn the_keyed_sort_orders_as_the_comparison_does() {
        // Prefixes shared by allocation and by text only, widths, and
        // numbers that sort differently as text; a pseudo-random order.
        let names = ["node", "node0", "rack", "n", "nodes"];
        let many: Vec<String> = (0..100).map(|i| format!("p{i}x")).collect();
        let mut seed = 0x9e37_79b9_u64;
        let mut list = Hostlist::new();
        let mut other = Hostlist::new();
        for _ in 0..3000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let name = names[(seed % names.len() as u64) as usize];
            let n = (seed >> 8) % 200;
            let host = if seed & 0x10000 != 0 {
                format!("{name}{n:03}")
            } else {
                format!("{name}{n}")
            };
            list.push(&host).unwrap();
            // A list of its own: the same texts in other allocations.
            other.push(&host).unwrap();
            list.append(&other);
            other = Hostlist::new();
        }
        let reference = sorted_by_comparison(&list);
        let mut sorted = list.clone();
        sorted.sort();
        assert_eq!(sorted.encode(), reference.encode());
        assert!(sorted.iter().eq(reference.iter()));
        // Past the keyed sort's prefixes: the plain sort, same order.
        for (i, p) in many.iter().enumerate() {
            list.push(&format!("{p}{}", 100 - i)).unwrap();
        }
        let reference = sorted_by_comparison(&list);
        list.sort();
        assert_eq!(list.encode(), reference.encode());
    }

    #[test]
    fn a_suffix_with_a_blank_is_refused_like_a_host_name() {
        // Found by fuzzing: a non-ASCII blank in a suffix decoded, but the hosts
        // it expanded to did not.
        let err = Hostlist::parse("u[2-3]1%\u{a0}").unwrap_err().to_string();
        assert!(err.contains("whitespace separates hosts"), "{err}");
        assert!(Hostlist::parse("\u{a0}[1-2]").is_err());
        assert!(Hostlist::parse("n[1-2]-x").is_ok());
    }

    #[test]
    fn runs_stay_compressed() {
        let h = hl("node[0-99999]");
        assert_eq!(h.runs.len(), 1);
        assert_eq!(h.len(), 100_000);
        assert_eq!(h.nth(99_999).as_deref(), Some("node99999"));
        assert_eq!(h.find("node54321"), Some(54321));
        let s = hl("n[0-9999]-eth0");
        assert_eq!(s.runs.len(), 1);
        assert_eq!(s.find("n10-eth0"), Some(10));
    }

    #[test]
    fn errors_say_where() {
        let e = Hostlist::parse("a,foo[1,3").unwrap_err().to_string();
        assert!(e.contains("'[' at position 5 is never closed"), "{e}");
        let e = Hostlist::parse("foo[3-1]").unwrap_err().to_string();
        assert!(e.contains("range end is less than its start"), "{e}");
        let e = Hostlist::parse("foo[0-1048576]").unwrap_err().to_string();
        assert!(e.contains("more than the limit of 1048576"), "{e}");
    }

    #[test]
    fn width_combine_matches_flux_core() {
        assert_eq!(combine_width(9, 1, 10, 2), Some(1));
        assert_eq!(combine_width(1, 2, 2, 1), None);
        assert_eq!(combine_width(9, 2, 10, 2), Some(2));
    }

    #[test]
    fn for_each_host_matches_iter() {
        for text in [
            "node[0-99999]",
            "a[98-102],b,c[007-011]-eth0,d[9-10],e[0099-0101],x1,y",
            "n[18446744073709551610-18446744073709551615]",
            "z[0,2,4-5]s",
            "m18446744073709551615,m[0-1]",
        ] {
            let h = hl(text);
            let mut got = Vec::new();
            h.for_each_host(|name| got.push(name.to_string()));
            let want: Vec<String> = h.iter().collect();
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn select_and_slice() {
        let h = hl("a[0-4],b,c[7-9]");
        let ids = IdSet::parse("1-2,5,7").unwrap();
        assert_eq!(h.select(&ids).unwrap().encode(), "a[1-2],b,c8");
        assert_eq!(h.select(&IdSet::from_range(9, 9)), Err(9));
        assert_eq!(h.slice(3, 7).encode(), "a[3-4],b,c7");
        assert_eq!(h.slice(7, 100).encode(), "c[8-9]");
    }

    /// flux-core's coalesce as written (insert, then rescan from the end),
    /// kept as the reference for the linear one.
    fn coalesce_by_rescan(runs: &mut Vec<Run>) {
        let mut i = runs.len().saturating_sub(1);
        while i > 0 {
            let Some((prefix, dup_lo, dup_hi, width, prev_hi)) = overlap(&runs[i - 1], &runs[i])
            else {
                i -= 1;
                continue;
            };
            // Shape as flux-core: prev ends at the first duplicate, next starts
            // at the last one, and each duplicate in between appears twice.
            if let Run::Range { hi, .. } = &mut runs[i - 1] {
                *hi = dup_lo;
            }
            let next_lo = dup_hi;
            if let Run::Range { lo, hi, .. } = &mut runs[i] {
                if dup_hi < prev_hi {
                    *hi = prev_hi;
                }
                *lo = next_lo;
            }
            let mut inserts = Vec::new();
            for x in dup_lo..=dup_hi {
                let one = Run::Range {
                    prefix: prefix.clone(),
                    lo: x,
                    hi: x,
                    width,
                };
                if x > dup_lo {
                    inserts.push(one.clone());
                }
                if x < next_lo {
                    inserts.push(one);
                }
            }
            runs.splice(i..i, inserts);
            i = runs.len() - 1;
        }
        // hostlist_collapse: join exactly touching neighbours, from the end.
        let mut i = runs.len().saturating_sub(1);
        while i > 0 {
            if let Some((new_hi, w)) = touching(&runs[i - 1], &runs[i]) {
                if let Run::Range { hi, width, .. } = &mut runs[i - 1] {
                    *hi = new_hi;
                    *width = w;
                }
                runs.remove(i);
            }
            i -= 1;
        }
    }

    proptest::proptest! {
        #[test]
        fn coalesce_matches_flux_rescan(
            ranges in proptest::collection::vec((0u8..2, 0u64..40, 0u64..6, 1usize..4), 0..24)
        ) {
            let mut runs: Vec<Run> = ranges
                .into_iter()
                .map(|(p, lo, len, width)| Run::Range {
                    prefix: if p == 0 { "a".into() } else { "b".into() },
                    lo,
                    hi: lo + len,
                    width,
                })
                .collect();
            runs.sort_by(Run::sort_cmp);
            let mut want = runs.clone();
            coalesce_by_rescan(&mut want);
            coalesce(&mut runs);
            proptest::prop_assert_eq!(runs, want);
        }
    }

    proptest::proptest! {
        #[test]
        fn delete_all_matches_deleting_until_none_left(
            hosts in proptest::collection::vec(0u8..12, 0..30),
            gone in proptest::collection::vec(0u8..12, 0..6),
        ) {
            let list = |ids: &[u8]| {
                let mut h = Hostlist::new();
                for i in ids {
                    h.push(&format!("n{i}")).unwrap();
                }
                h
            };
            let (mut h, other) = (list(&hosts), list(&gone));
            let mut want = h.clone();
            let mut total = 0;
            loop {
                let n = want.delete(&other);
                total += n;
                if n == 0 {
                    break;
                }
            }
            proptest::prop_assert_eq!(h.delete_all(&other), total);
            proptest::prop_assert_eq!(&h.runs, &want.runs);
            proptest::prop_assert_eq!(h.len(), want.len());
        }
    }

    #[test]
    fn sorting_many_scattered_hosts_coalesces() {
        // Every third number missing: many runs that touch and many that do not.
        let mut h = Hostlist::new();
        for i in (0..3000u64).rev().filter(|i| i % 3 != 2) {
            h.push(&format!("n{i}")).unwrap();
            h.push(&format!("n{i}")).unwrap();
        }
        h.sort();
        let mut want = Hostlist::new();
        for i in (0..3000u64).filter(|i| i % 3 != 2) {
            want.push(&format!("n{i}")).unwrap();
            want.push(&format!("n{i}")).unwrap();
        }
        assert_eq!(h, want);
        h.uniq();
        assert_eq!(h.len(), 2000);
    }
}

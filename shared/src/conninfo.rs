//! PostgreSQL connection strings (libpq's two forms): where their secrets are,
//! so that they can be masked in messages and refused on command lines.
//!
//! A URI (`postgres://user:secret@host/db?password=secret`) carries a password
//! in its user information or in a `password` (or `sslpassword`) parameter; a
//! `key=value` string (`host=h password='a b'`) in the same keys. Parsing is
//! deliberately generous: text that cannot be read is treated as secret from
//! the point where it stops making sense, so a mistake over-masks, never leaks.

use std::ops::Range;

/// The keys whose values are secrets.
const SECRET_KEYS: &[&str] = &["password", "sslpassword"];

/// What replaces a secret in [`hide_password`]'s answer.
const MASK: &str = "***";

/// `s` with every password replaced by `***`
/// (`postgres://u:***@h/db`, `host=h password=***`).
pub fn hide_password(s: &str) -> String {
    let mut shown = String::with_capacity(s.len());
    let mut at = 0;
    for span in secret_spans(s) {
        shown.push_str(&s[at..span.start]);
        shown.push_str(MASK);
        at = span.end;
    }
    shown.push_str(&s[at..]);
    shown
}

/// Whether `s` holds a password in any of libpq's forms.
pub fn has_password(s: &str) -> bool {
    !secret_spans(s).is_empty()
}

/// Is `s` a PostgreSQL URI (rather than a `key=value` string or a path)?
pub fn is_uri(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// The byte ranges of `s` that are secrets, in order, not overlapping.
fn secret_spans(s: &str) -> Vec<Range<usize>> {
    if let Some((scheme, _)) = s.split_once("://") {
        uri_spans(s, scheme.len() + 3)
    } else if s.contains('=') {
        conninfo_spans(s)
    } else {
        Vec::new()
    }
}

/// A URI's secrets: the user information's password (up to the last `@`, so
/// an unescaped `@` or `/` in a password is still hidden) and the secret
/// query parameters.
fn uri_spans(s: &str, start: usize) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    let rest = &s[start..];
    if let Some(at) = rest.rfind('@')
        && let Some(colon) = rest[..at].find(':')
    {
        spans.push(start + colon + 1..start + at);
    }
    // From the first `?`, even one inside what was taken as a password: an
    // overlap is merged below, a parameter missed would be shown.
    if let Some(q) = rest.find('?') {
        let mut pos = start + q + 1;
        for pair in s[pos..].split('&') {
            if let Some((key, _)) = pair.split_once('=')
                && is_secret(&percent_decode(key))
            {
                spans.push(pos + key.len() + 1..pos + pair.len());
            }
            pos += pair.len() + 1;
        }
    }
    merge(spans)
}

/// `spans` sorted, overlapping ones joined.
fn merge(mut spans: Vec<Range<usize>>) -> Vec<Range<usize>> {
    spans.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
}

/// A `key=value` string's secrets. Values are bare words or single-quoted
/// with backslash escapes, and `=` may have spaces around it.
fn conninfo_spans(s: &str) -> Vec<Range<usize>> {
    let b = s.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    loop {
        i = skip_ws(i);
        if i >= b.len() {
            return spans;
        }
        let key_start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' {
            i += 1;
        }
        let key = &s[key_start..i];
        i = skip_ws(i);
        if i >= b.len() || b[i] != b'=' {
            // Not a string libpq would accept: hide what is left if it
            // could hold a password.
            if s[key_start..].contains("password") {
                spans.push(key_start..s.len());
            }
            return spans;
        }
        i = skip_ws(i + 1);
        let value_start = i;
        i = value_end(b, i);
        if is_secret(key) {
            spans.push(value_start..i);
        }
    }
}

/// Where the value starting at `i` ends: after its closing quote, or at
/// the first unescaped white space (the end of `b` if the quote is open).
fn value_end(b: &[u8], mut i: usize) -> usize {
    let quoted = i < b.len() && b[i] == b'\'';
    if quoted {
        i += 1;
    }
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'\'' if quoted => return i + 1,
            c if !quoted && c.is_ascii_whitespace() => return i,
            _ => i += 1,
        }
    }
    b.len()
}

/// Is `key` (decoded) one whose value is a secret?
fn is_secret(key: &str) -> bool {
    SECRET_KEYS.contains(&key)
}

/// `%xx` escapes decoded (a key spelled `pass%77ord` is `password`); a bad
/// escape is kept as it is.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%' && i + 2 < b.len())
            .then(|| std::str::from_utf8(&b[i + 1..i + 3]).ok())
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_user_information_is_masked() {
        assert_eq!(
            hide_password("postgres://u:secret@h:5/db"),
            "postgres://u:***@h:5/db"
        );
        assert_eq!(
            hide_password("postgresql://u:p@ss/w@h/db"),
            "postgresql://u:***@h/db"
        );
        assert_eq!(hide_password("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(hide_password("postgres://h:5/db"), "postgres://h:5/db");
        assert!(!has_password("postgres://u@h:5/db?sslmode=require"));
        assert!(has_password("postgres://u:x@h/db"));
    }

    #[test]
    fn uri_query_passwords_are_masked() {
        assert_eq!(
            hide_password("postgres://u@h/db?sslmode=require&password=s3&x=1"),
            "postgres://u@h/db?sslmode=require&password=***&x=1"
        );
        assert_eq!(
            hide_password("postgres:///db?host=/run&pass%77ord=s3"),
            "postgres:///db?host=/run&pass%77ord=***"
        );
        assert_eq!(
            hide_password("postgres://u:a@h/db?sslpassword=k"),
            "postgres://u:***@h/db?sslpassword=***"
        );
        assert!(has_password("postgresql://h/db?password="));
        assert_eq!(
            hide_password("postgres://h:5/db?application_name=a@b&password=x"),
            "postgres://h:***@b&password=***"
        );
    }

    #[test]
    fn key_value_passwords_are_masked() {
        assert_eq!(
            hide_password("host=h password=s3 dbname=x"),
            "host=h password=*** dbname=x"
        );
        assert_eq!(
            hide_password("host=h password = 'a b\\'c' user=u"),
            "host=h password = *** user=u"
        );
        assert_eq!(hide_password("password=s\\ 3"), "password=***");
        assert_eq!(hide_password("host=h user=u"), "host=h user=u");
        assert!(!has_password("host=h user=u"));
        assert!(has_password("user=u sslpassword=k"));
        // Unreadable from `junk` on: hidden from there.
        assert_eq!(hide_password("host=h junk password=x"), "host=h ***");
    }

    #[test]
    fn paths_and_plain_words_are_left_alone() {
        assert_eq!(hide_password("/var/lib/x.db"), "/var/lib/x.db");
        assert!(!has_password("/var/lib/x.db"));
        assert!(is_uri("postgresql://x"));
        assert!(!is_uri("/var/lib/x.db"));
    }
}

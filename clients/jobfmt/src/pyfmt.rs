//! Python's format-spec mini-language (`[[fill]align][sign][z][#][0][width]
//! [grouping][.precision][type]`) applied to the few value types a job record
//! has, so that a Flux user's `flux jobs -o` strings print the same bytes.
//! Flux's own extensions (`h`, the `+` truncation mark, `::` after a date
//! format) are handled by the caller in `template.rs`; this file is plain
//! Python `format(value, spec)` and `str(value)`.

use std::fmt::Write as _;

/// A value as Python sees it when formatting a job field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A `str`.
    Str(String),
    /// An `int`.
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `bool` (an `int` subclass: `True` alone, `1` under a spec).
    Bool(bool),
    /// Flux's `JobID`, an `int` whose `str()` is its F58 encoding.
    JobId(u64, String),
}

impl Value {
    /// An empty string, flux's value for an attribute a job does not have.
    pub fn empty() -> Value {
        Value::Str(String::new())
    }

    /// Python `str(value)`.
    pub fn to_py_str(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => float_repr(*f),
            Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
            Value::JobId(_, f58) => f58.clone(),
        }
    }

    /// The number Python arithmetic would use, if the value is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::JobId(n, _) => Some(*n as f64),
            Value::Str(_) => None,
        }
    }

    /// Python truthiness (`if not value`).
    pub fn is_truthy(&self) -> bool {
        match self {
            Value::Str(s) => !s.is_empty(),
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Bool(b) => *b,
            Value::JobId(n, _) => *n != 0,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "str",
            Value::Int(_) | Value::JobId(..) => "int",
            Value::Float(_) => "float",
            Value::Bool(_) => "bool",
        }
    }
}

/// A parsed Python format spec.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spec {
    /// Fill character (default space).
    pub fill: Option<char>,
    /// One of `<`, `>`, `^`, `=`.
    pub align: Option<char>,
    /// One of `+`, `-`, space.
    pub sign: Option<char>,
    /// `z`: negative zero becomes zero.
    pub pos_zero: bool,
    /// `#`: alternate form.
    pub alt: bool,
    /// `0`: zero padding.
    pub zero: bool,
    /// Minimum width.
    pub width: Option<usize>,
    /// `,` or `_` thousands grouping.
    pub grouping: Option<char>,
    /// Digits after the point, or maximum string length.
    pub precision: Option<usize>,
    /// Presentation type, e.g. `s`, `d`, `f`.
    pub ty: Option<char>,
}

const ALIGNS: [char; 4] = ['<', '>', '^', '='];

impl Spec {
    /// Parse `spec` as Python does; the error is Python's message.
    pub fn parse(spec: &str) -> Result<Spec, String> {
        let c: Vec<char> = spec.chars().collect();
        let mut s = Spec::default();
        let mut i = 0;
        if c.len() >= 2 && ALIGNS.contains(&c[1]) {
            s.fill = Some(c[0]);
            s.align = Some(c[1]);
            i = 2;
        } else if !c.is_empty() && ALIGNS.contains(&c[0]) {
            s.align = Some(c[0]);
            i = 1;
        }
        if i < c.len() && matches!(c[i], '+' | '-' | ' ') {
            s.sign = Some(c[i]);
            i += 1;
        }
        if i < c.len() && c[i] == 'z' {
            s.pos_zero = true;
            i += 1;
        }
        if i < c.len() && c[i] == '#' {
            s.alt = true;
            i += 1;
        }
        if i < c.len() && c[i] == '0' {
            s.zero = true;
            i += 1;
        }
        let (w, n) = digits(&c[i..]);
        s.width = w;
        i += n;
        if i < c.len() && matches!(c[i], ',' | '_') {
            s.grouping = Some(c[i]);
            i += 1;
        }
        if i < c.len() && c[i] == '.' {
            let (p, n) = digits(&c[i + 1..]);
            if p.is_none() {
                return Err("Format specifier missing precision".into());
            }
            s.precision = p;
            i += 1 + n;
        }
        if i < c.len() {
            s.ty = Some(c[i]);
            i += 1;
        }
        if i < c.len() {
            return Err("Invalid format specifier".into());
        }
        Ok(s)
    }
}

fn digits(c: &[char]) -> (Option<usize>, usize) {
    let n = c.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return (None, 0);
    }
    let s: String = c[..n].iter().collect();
    (s.parse().ok(), n)
}

/// Python `format(value, spec)`.
pub fn format_value(v: &Value, spec: &str) -> Result<String, String> {
    // Python: an empty spec is `str(value)` for every type.
    if spec.is_empty() {
        return Ok(v.to_py_str());
    }
    let s = Spec::parse(spec)?;
    match v {
        Value::Str(t) => format_str(t, &s),
        Value::Int(i) => format_int(*i, &s, v),
        Value::Bool(b) => format_int(i64::from(*b), &s, v),
        Value::JobId(n, _) => format_int(i64::try_from(*n).unwrap_or(i64::MAX), &s, v),
        Value::Float(f) => format_float(*f, &s),
    }
}

fn format_str(t: &str, s: &Spec) -> Result<String, String> {
    if let Some(ty) = s.ty.filter(|&t| t != 's') {
        return Err(format!(
            "Unknown format code '{ty}' for object of type 'str'"
        ));
    }
    if s.sign.is_some() {
        return Err("Sign not allowed in string format specifier".into());
    }
    if s.alt {
        return Err("Alternate form (#) not allowed in string format specifier".into());
    }
    if s.align == Some('=') {
        return Err("'=' alignment not allowed in string format specifier".into());
    }
    let body: String = match s.precision {
        Some(p) => t.chars().take(p).collect(),
        None => t.to_string(),
    };
    let fill = s.fill.unwrap_or(if s.zero { '0' } else { ' ' });
    Ok(pad(&body, "", s.width, s.align.unwrap_or('<'), fill))
}

/// Pad `sign` + `body` to `width`; `=` puts the fill between them.
fn pad(body: &str, sign: &str, width: Option<usize>, align: char, fill: char) -> String {
    let len = body.chars().count() + sign.chars().count();
    let w = width.unwrap_or(0);
    if len >= w {
        return format!("{sign}{body}");
    }
    let n = w - len;
    let f = |k: usize| fill.to_string().repeat(k);
    match align {
        '<' => format!("{sign}{body}{}", f(n)),
        '^' => format!("{}{sign}{body}{}", f(n / 2), f(n - n / 2)),
        '=' => format!("{sign}{}{body}", f(n)),
        _ => format!("{}{sign}{body}", f(n)),
    }
}

fn sign_str(neg: bool, s: &Spec) -> &'static str {
    match (neg, s.sign) {
        (true, _) => "-",
        (false, Some('+')) => "+",
        (false, Some(' ')) => " ",
        _ => "",
    }
}

fn group(digits: &str, sep: Option<char>, every: usize) -> String {
    let Some(sep) = sep else {
        return digits.to_string();
    };
    let c: Vec<char> = digits.chars().collect();
    let mut out = String::new();
    for (i, ch) in c.iter().enumerate() {
        if i > 0 && (c.len() - i).is_multiple_of(every) {
            out.push(sep);
        }
        out.push(*ch);
    }
    out
}

fn numeric_pad(body: &str, sign: &str, s: &Spec) -> String {
    let (fill, align) = match (s.fill, s.align, s.zero) {
        (f, Some(a), _) => (f.unwrap_or(if s.zero { '0' } else { ' ' }), a),
        (f, None, true) => (f.unwrap_or('0'), '='),
        (f, None, false) => (f.unwrap_or(' '), '>'),
    };
    pad(body, sign, s.width, align, fill)
}

fn format_int(i: i64, s: &Spec, v: &Value) -> Result<String, String> {
    match s.ty {
        Some('e' | 'E' | 'f' | 'F' | 'g' | 'G' | '%') => return format_float(i as f64, s),
        // An int with no type and a precision is an error in Python.
        None | Some('d' | 'n' | 'b' | 'o' | 'x' | 'X' | 'c') if s.precision.is_some() => {
            return Err("Precision not allowed in integer format specifier".into());
        }
        None | Some('d' | 'n' | 'b' | 'o' | 'x' | 'X' | 'c') => {}
        Some(ty) => {
            return Err(format!(
                "Unknown format code '{ty}' for object of type '{}'",
                v.type_name()
            ));
        }
    }
    let neg = i < 0;
    let mag = i.unsigned_abs();
    let (digits, prefix, every) = match s.ty {
        Some('b') => (format!("{mag:b}"), "0b", 4),
        Some('o') => (format!("{mag:o}"), "0o", 4),
        Some('x') => (format!("{mag:x}"), "0x", 4),
        Some('X') => (format!("{mag:X}"), "0X", 4),
        Some('c') => {
            let ch = u32::try_from(i)
                .ok()
                .and_then(char::from_u32)
                .ok_or("%c arg not in range(0x110000)")?;
            return Ok(pad(
                &ch.to_string(),
                "",
                s.width,
                s.align.unwrap_or('<'),
                s.fill.unwrap_or(' '),
            ));
        }
        _ => (mag.to_string(), "", 3),
    };
    let body = group(&digits, s.grouping, every);
    let sign = format!("{}{}", sign_str(neg, s), if s.alt { prefix } else { "" });
    Ok(numeric_pad(&body, &sign, s))
}

fn format_float(f: f64, s: &Spec) -> Result<String, String> {
    let ty = s.ty.unwrap_or('\0');
    if !matches!(ty, 'e' | 'E' | 'f' | 'F' | 'g' | 'G' | 'n' | '%' | '\0') {
        return Err(format!(
            "Unknown format code '{ty}' for object of type 'float'"
        ));
    }
    let neg = f.is_sign_negative() && !(s.pos_zero && f == 0.0) && !f.is_nan();
    let a = f.abs();
    let mut body = match ty {
        'e' | 'E' => exp_form(a, s.precision.unwrap_or(6), s.alt),
        'f' | 'F' => fixed(a, s.precision.unwrap_or(6), s.alt),
        '%' => format!("{}%", fixed(a * 100.0, s.precision.unwrap_or(6), s.alt)),
        'g' | 'G' | 'n' => general(a, s.precision.unwrap_or(6), s.alt, false),
        // No type: repr, or `g` that always shows a point when a precision is given.
        _ => match s.precision {
            None => float_repr(a),
            Some(p) => general(a, p, s.alt, true),
        },
    };
    if matches!(ty, 'E' | 'F' | 'G') {
        body = body.to_uppercase();
    }
    if let Some(sep) = s.grouping {
        let end = body
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(body.len());
        let (int, rest) = body.split_at(end);
        body = format!("{}{rest}", group(int, Some(sep), 3));
    }
    Ok(numeric_pad(&body, sign_str(neg, s), s))
}

fn fixed(a: f64, p: usize, alt: bool) -> String {
    if !a.is_finite() {
        return nonfinite(a);
    }
    let mut s = format!("{a:.p$}");
    if alt && p == 0 {
        s.push('.');
    }
    s
}

fn nonfinite(a: f64) -> String {
    if a.is_nan() { "nan" } else { "inf" }.to_string()
}

/// `%.{p}e` as C prints it: `1.500000e+06`.
fn exp_form(a: f64, p: usize, alt: bool) -> String {
    if !a.is_finite() {
        return nonfinite(a);
    }
    let s = format!("{a:.p$e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let dot = if alt && p == 0 { "." } else { "" };
    format!(
        "{mant}{dot}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

/// `%g` with precision `p`; `repr_like` is Python's no-type form, which keeps
/// at least one digit after the point.
fn general(a: f64, p: usize, alt: bool, repr_like: bool) -> String {
    if !a.is_finite() {
        return nonfinite(a);
    }
    let p = p.max(1);
    if a == 0.0 {
        return if repr_like { "0.0".into() } else { "0".into() };
    }
    let e = format!("{a:.prec$e}", prec = p - 1);
    let exp: i32 = e
        .split_once('e')
        .and_then(|(_, x)| x.parse().ok())
        .unwrap_or(0);
    let mut out = if -4 <= exp && exp < p as i32 {
        let dec = (p as i32 - 1 - exp).max(0) as usize;
        let s = format!("{a:.dec$}");
        if alt { s } else { trim_frac(&s) }
    } else {
        let s = exp_form(a, p - 1, alt);
        if alt {
            s
        } else {
            let (m, x) = s.split_once('e').unwrap_or((&s, ""));
            format!("{}e{x}", trim_frac(m))
        }
    };
    if repr_like && !out.contains(['.', 'e', 'n', 'i']) {
        out.push_str(".0");
    }
    out
}

fn trim_frac(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// Python `repr(float)`: the shortest digits that round-trip, positional
/// from 1e-4 up to 1e16, otherwise `1e+16` style.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f < 0.0 { "-inf" } else { "inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Python's repr.
    let e = format!("{:e}", f.abs());
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    let mut out = String::from(sign);
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            out.push_str(&"0".repeat((-exp - 1) as usize));
            out.push_str(&digits);
        } else {
            let point = exp as usize + 1;
            if digits.len() <= point {
                let _ = write!(out, "{digits}{}.0", "0".repeat(point - digits.len()));
            } else {
                let _ = write!(out, "{}.{}", &digits[..point], &digits[point..]);
            }
        }
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let _ = write!(
            out,
            "{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    }
    out
}

/// Python `format(value, "%.3g")`-style helper used by `!P`.
pub fn g_prec(f: f64, p: usize) -> String {
    let s = general(f.abs(), p, false, false);
    if f < 0.0 { format!("-{s}") } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::Str(v.into())
    }

    #[test]
    fn formats_like_python() {
        let cases: &[(Value, &str, &str)] = &[
            (s("abc"), "", "abc"),
            (s("abc"), ">5", "  abc"),
            (s("abc"), "<5", "abc  "),
            (s("abc"), "^6", " abc  "),
            (s("abc"), "*^7", "**abc**"),
            (s("abcdef"), ".3", "abc"),
            (s("abcdef"), "<8.3", "abc     "),
            (s("ab"), "05", "ab000"),
            (Value::Int(42), "", "42"),
            (Value::Int(42), "6", "    42"),
            (Value::Int(42), "<6", "42    "),
            (Value::Int(-42), "06", "-00042"),
            (Value::Int(1234567), ",", "1,234,567"),
            (Value::Int(255), "#x", "0xff"),
            (Value::Int(5), "+d", "+5"),
            (Value::Int(5), ".2f", "5.00"),
            (Value::Bool(true), "", "True"),
            (Value::Bool(true), ">5", "    1"),
            (Value::Float(0.0), "", "0.0"),
            (Value::Float(1.5), ">6", "   1.5"),
            (Value::Float(1664571163.9159656), "", "1664571163.9159656"),
            (Value::Float(1e16), "", "1e+16"),
            (Value::Float(0.00001), "", "1e-05"),
            (Value::Float(2.0 / 3.0), ".3f", "0.667"),
            (Value::Float(1234.5), ".3g", "1.23e+03"),
            (Value::Float(0.5), ".1%", "50.0%"),
            (Value::Float(1.5e6), "e", "1.500000e+06"),
            (Value::Float(3.0), ".2", "3.0"),
            (Value::JobId(1234, "ƒ2".into()), "", "ƒ2"),
            (Value::JobId(1234, "ƒ2".into()), ">6", "  1234"),
        ];
        for (v, spec, want) in cases {
            assert_eq!(
                format_value(v, spec).as_deref(),
                Ok(*want),
                "{v:?} {spec:?}"
            );
        }
    }

    #[test]
    fn errors_like_python() {
        assert_eq!(
            format_value(&s("x"), "d"),
            Err("Unknown format code 'd' for object of type 'str'".into())
        );
        assert_eq!(
            format_value(&Value::Int(1), ".2"),
            Err("Precision not allowed in integer format specifier".into())
        );
        assert_eq!(
            format_value(&s("x"), "=5"),
            Err("'=' alignment not allowed in string format specifier".into())
        );
        assert_eq!(
            format_value(&s("x"), "5q!"),
            Err("Invalid format specifier".into())
        );
    }

    #[test]
    fn three_significant_digits() {
        assert_eq!(g_prec(50.0, 3), "50");
        assert_eq!(g_prec(1.5, 3), "1.5");
        assert_eq!(g_prec(100.0, 3), "100");
        assert_eq!(g_prec(33.3333, 3), "33.3");
    }
}

//! `bulksubmit --define=NAME=CODE`, as flux-bulksubmit(1): NAME becomes an
//! attribute of every input, used as `{.NAME}` or `{0.NAME}` beside the
//! built-in `{.%}`, `{./}`, ...; its value is the Python expression CODE
//! evaluated with the local `x` bound to the input string.
//!
//! CODE is Python, so Python evaluates it: one `python3` child for the
//! whole bulksubmit receives every definition and every (NAME, input) pair
//! the templates use, as JSON on stdin, and answers the values as JSON on
//! stdout. As in flux, every definition is compiled even when unused, but
//! an expression is only evaluated for the inputs it is applied to; a list
//! result is joined with the `::list::` marker that splits a command
//! argument into several, and any other result is made text by Python's
//! `format(result, "")`, which is what `str.format` does with it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{ErrorKind, Write};
use std::process::{Command, Stdio};

use anyhow::{Context, anyhow, bail};
use serde::Deserialize;
use serde_json::json;

/// One `--define=NAME=CODE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Define {
    /// The attribute name, a Python identifier.
    pub name: String,
    /// The Python expression, of the input `x`.
    pub code: String,
}

/// Parse `NAME=CODE` (clap's value parser for `--define`). The text is cut
/// at the first `=`, so CODE may hold `==` or `!=`; NAME must be an
/// identifier (ASCII letters, digits and `_`, not starting with a digit)
/// so that it cannot be mistaken for `{.%}` and the other built-ins.
pub fn parse(s: &str) -> Result<Define, String> {
    let Some((name, code)) = s.split_once('=') else {
        return Err(format!(
            "expected NAME=CODE, e.g. --define=p2='2**int(x)' (no `=` in {s:?})"
        ));
    };
    let mut chars = name.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
    if !ident {
        return Err(format!(
            "NAME {name:?} is not an identifier \
             (ASCII letters, digits and _, not starting with a digit)"
        ));
    }
    if code.trim().is_empty() {
        return Err(format!("no CODE after {name}="));
    }
    Ok(Define {
        name: name.to_string(),
        code: code.to_string(),
    })
}

/// The definitions in force: by name, a later `--define` of a name
/// replacing an earlier one, as in flux.
pub fn by_name(defines: &[Define]) -> BTreeMap<&str, &str> {
    defines
        .iter()
        .map(|d| (d.name.as_str(), d.code.as_str()))
        .collect()
}

/// The value of each (NAME, input) pair asked for.
#[derive(Debug, Default)]
pub struct Values(HashMap<(String, String), String>);

impl Values {
    /// `NAME` applied to `input`, when it was evaluated.
    pub fn get(&self, name: &str, input: &str) -> Option<String> {
        self.0.get(&(name.to_string(), input.to_string())).cloned()
    }
}

/// The Python side: compile every definition (`defs`, {NAME: CODE}), then
/// evaluate each of `eval` ([NAME, INPUT]) with `x` = INPUT, in a namespace
/// with `os` and `sys` as flux's has. The expressions' own output goes to
/// stderr so that stdout carries only the answer: {"values": [...]} in the
/// order asked, or {"error": {"name", "input"?, "message"}} for the first
/// failure.
const PROGRAM: &str = r#"
import json, os, sys
out, sys.stdout = sys.stdout, sys.stderr
req = json.load(sys.stdin)
def fail(e, **where):
    where["message"] = "%s: %s" % (type(e).__name__, e)
    json.dump({"error": where}, out)
    sys.exit(0)
code = {}
for name, text in req["defs"].items():
    try:
        code[name] = compile(text, name, "eval")
    except BaseException as e:
        fail(e, name=name)
scope = {"os": os, "sys": sys}
values = []
for name, x in req["eval"]:
    try:
        r = eval(code[name], scope, {"x": x})
        if isinstance(r, list):
            r = "::list::".join(r)
        values.append(format(r, ""))
    except BaseException as e:
        fail(e, name=name, input=x)
json.dump({"values": values}, out)
"#;

/// What the Python side answers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Answer {
    Values(Vec<String>),
    Error(Failure),
}

/// The first definition that did not compile or evaluate.
#[derive(Debug, Deserialize)]
struct Failure {
    name: String,
    /// The input, when evaluating (not compiling) failed.
    input: Option<String>,
    /// Python's exception, `Type: message`.
    message: String,
}

/// Evaluate `wanted` (NAME, input) pairs with the definitions `defs` (by
/// name, see [`by_name`]) in one `python3` child. Every definition is
/// compiled even when `wanted` is empty, so a syntax error is reported
/// whether or not the templates use it.
pub fn evaluate(
    defs: &BTreeMap<&str, &str>,
    wanted: &BTreeSet<(String, String)>,
) -> anyhow::Result<Values> {
    evaluate_with("python3", defs, wanted)
}

/// [`evaluate`] with `python` as the interpreter.
fn evaluate_with(
    python: &str,
    defs: &BTreeMap<&str, &str>,
    wanted: &BTreeSet<(String, String)>,
) -> anyhow::Result<Values> {
    let request = json!({ "defs": defs, "eval": wanted }).to_string();
    let mut child = Command::new(python)
        .args(["-c", PROGRAM])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => anyhow!("--define needs {python} on PATH ({e})"),
            _ => anyhow!("--define: cannot run {python}: {e}"),
        })?;
    // Written from a thread so that a child that stops reading early
    // cannot block us; it reads everything before it answers.
    let mut stdin = child.stdin.take().context("python3 stdin")?;
    let writer = std::thread::spawn(move || stdin.write_all(request.as_bytes()));
    let out = child
        .wait_with_output()
        .with_context(|| format!("--define: waiting for {python}"))?;
    let written = writer
        .join()
        .map_err(|_| anyhow!("--define: writing to {python} panicked"))?;
    if !out.status.success() {
        bail!(
            "--define: {python} failed ({}); see its messages above",
            out.status
        );
    }
    written.with_context(|| format!("--define: writing to {python}"))?;
    let answer: Answer = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("--define: unexpected answer from {python}"))?;
    match answer {
        Answer::Values(values) if values.len() == wanted.len() => {
            Ok(Values(wanted.iter().cloned().zip(values).collect()))
        }
        Answer::Values(values) => bail!(
            "--define: {python} answered {} values for {} inputs",
            values.len(),
            wanted.len()
        ),
        Answer::Error(f) => {
            let code = defs.get(f.name.as_str()).copied().unwrap_or_default();
            match f.input {
                Some(input) => bail!(
                    "--define={}={code}: failed for input {input:?}: {}",
                    f.name,
                    f.message
                ),
                None => bail!(
                    "--define={}={code}: not a Python expression: {}",
                    f.name,
                    f.message
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, code: &str) -> Define {
        Define {
            name: name.into(),
            code: code.into(),
        }
    }

    #[test]
    fn parses_name_and_code() {
        assert_eq!(parse("p2=2**int(x)"), Ok(def("p2", "2**int(x)")));
        // Cut at the first `=`: comparisons stay in the code.
        assert_eq!(
            parse("_is1=x == '1' or x != '2'"),
            Ok(def("_is1", "x == '1' or x != '2'"))
        );
        assert_eq!(parse("A_9=x"), Ok(def("A_9", "x")));
    }

    #[test]
    fn rejects_bad_definitions() {
        for (arg, says) in [
            ("p2", "expected NAME=CODE"),
            ("", "expected NAME=CODE"),
            ("=x", "not an identifier"),
            ("2p=x", "not an identifier"),
            ("a-b=x", "not an identifier"),
            ("%=x", "not an identifier"),
            ("a.b=x", "not an identifier"),
            ("p2=", "no CODE"),
            ("p2=  ", "no CODE"),
        ] {
            let err = parse(arg).unwrap_err();
            assert!(err.contains(says), "{arg:?}: {err}");
        }
    }

    #[test]
    fn later_definitions_replace_earlier_ones() {
        let defs = [def("a", "1"), def("b", "2"), def("a", "3")];
        assert_eq!(
            by_name(&defs).into_iter().collect::<Vec<_>>(),
            [("a", "3"), ("b", "2")]
        );
    }

    #[test]
    fn missing_interpreter_is_named() {
        let defs = BTreeMap::from([("p", "x")]);
        let err = evaluate_with("/nonexistent/python3", &defs, &BTreeSet::new()).unwrap_err();
        assert!(
            err.to_string()
                .contains("--define needs /nonexistent/python3 on PATH"),
            "{err}"
        );
    }
}

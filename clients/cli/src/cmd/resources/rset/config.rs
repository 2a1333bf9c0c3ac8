//! `fluxgate R parse-config`: R from a Flux-style resource configuration.
//!
//! The configuration is a directory of `*.toml` files (as `flux R
//! parse-config` takes), one TOML file, or one JSON file of the same shape.
//! Only the TOML needed for resource configuration is understood: tables,
//! arrays of tables, dotted keys, strings, numbers, booleans and arrays;
//! anything else is reported with its file and line.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use fluxgate_shared::ResourceSet;
use serde_json::{Map, Value};

/// Build R from the `resource` table of the configuration at `path`.
pub fn parse_config(path: &str) -> anyhow::Result<ResourceSet> {
    let p = Path::new(path);
    let conf = if p.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(p)
            .with_context(|| path.to_owned())?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|f| f.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        let mut root = Map::new();
        for f in files {
            let text = std::fs::read_to_string(&f).with_context(|| f.display().to_string())?;
            parse_toml_into(&mut root, &text, &f.display().to_string())?;
        }
        Value::Object(root)
    } else {
        let text = std::fs::read_to_string(p).with_context(|| path.to_owned())?;
        if p.extension().is_some_and(|x| x == "json") {
            serde_json::from_str(&text).map_err(|e| anyhow!("{path}: {e}"))?
        } else {
            let mut root = Map::new();
            parse_toml_into(&mut root, &text, path)?;
            Value::Object(root)
        }
    };
    let resource = conf.get("resource");
    if let Some(entries) = resource.and_then(|r| r.get("config")) {
        return ResourceSet::from_config(entries).map_err(|e| anyhow!("{e}"));
    }
    if let Some(rpath) = resource.and_then(|r| r.get("path")) {
        let rpath = rpath
            .as_str()
            .ok_or_else(|| anyhow!("resource.path must be a string"))?;
        let text = std::fs::read_to_string(rpath).with_context(|| rpath.to_owned())?;
        return ResourceSet::parse(&text).map_err(|e| anyhow!("{rpath}: {e}"));
    }
    bail!("{path}: no resource.config array or resource.path in the configuration")
}

/// Parse TOML `text` into `root`; errors name `file:line`.
fn parse_toml_into(root: &mut Map<String, Value>, text: &str, file: &str) -> anyhow::Result<()> {
    // Path of the current table; for an array of tables, its last element.
    let mut current: Vec<String> = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, raw)) = lines.next() {
        let lineno = i + 1;
        let err = |m: &str| anyhow!("invalid TOML at {file}:{lineno}: {m}");
        let mut line = strip_comment(raw).trim().to_owned();
        if line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix("[[") {
            let name = h
                .strip_suffix("]]")
                .ok_or_else(|| err("unterminated [[table]]"))?;
            current = split_key(name).map_err(|m| err(&m))?;
            let (last, parent) = current
                .split_last()
                .ok_or_else(|| err("empty table name"))?;
            let table = table_at(root, parent).map_err(|m| err(&m))?;
            let arr = table
                .entry(last.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            arr.as_array_mut()
                .ok_or_else(|| err(&format!("{last} is not an array of tables")))?
                .push(Value::Object(Map::new()));
            continue;
        }
        if let Some(h) = line.strip_prefix('[') {
            let name = h
                .strip_suffix(']')
                .ok_or_else(|| err("unterminated [table]"))?;
            current = split_key(name).map_err(|m| err(&m))?;
            table_at(root, &current).map_err(|m| err(&m))?;
            continue;
        }
        // A multi-line array continues until its brackets balance.
        while depth(&line) > 0 {
            let Some((_, more)) = lines.next() else {
                return Err(err("unterminated array"));
            };
            line.push(' ');
            line.push_str(strip_comment(more).trim());
        }
        let (key, val) = line
            .split_once('=')
            .ok_or_else(|| err("expected key = value"))?;
        let key = split_key(key).map_err(|m| err(&m))?;
        let (val, rest) = parse_value(val.trim()).map_err(|m| err(&m))?;
        if !rest.trim().is_empty() {
            return Err(err(&format!(
                "unexpected text after value: {}",
                rest.trim()
            )));
        }
        let (last, parent) = key.split_last().ok_or_else(|| err("empty key"))?;
        let mut path = current.clone();
        path.extend(parent.iter().cloned());
        let table = table_at(root, &path).map_err(|m| err(&m))?;
        if table.insert(last.clone(), val).is_some() {
            return Err(err(&format!("duplicate key {last}")));
        }
    }
    Ok(())
}

/// The table at `path`, created as needed; an array of tables yields its
/// last element.
fn table_at<'a>(
    root: &'a mut Map<String, Value>,
    path: &[String],
) -> Result<&'a mut Map<String, Value>, String> {
    let mut t = root;
    for k in path {
        let v = t
            .entry(k.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        t = match v {
            Value::Object(o) => o,
            Value::Array(a) => match a.last_mut() {
                Some(Value::Object(o)) => o,
                _ => return Err(format!("{k} is not a table")),
            },
            _ => return Err(format!("{k} is not a table")),
        };
    }
    Ok(t)
}

fn split_key(s: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    for part in s.split('.') {
        let part = part.trim();
        let part = part
            .strip_prefix('"')
            .and_then(|p| p.strip_suffix('"'))
            .unwrap_or(part);
        if part.is_empty()
            || !part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("bad key '{s}'"));
        }
        parts.push(part.to_owned());
    }
    Ok(parts)
}

fn strip_comment(line: &str) -> &str {
    let mut in_str = None;
    for (i, c) in line.char_indices() {
        match (in_str, c) {
            (None, '"' | '\'') => in_str = Some(c),
            (Some(q), c) if c == q => in_str = None,
            (None, '#') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Unclosed `[` outside strings, on the value side of the line.
fn depth(line: &str) -> i32 {
    let Some((_, val)) = line.split_once('=') else {
        return 0;
    };
    let mut d = 0;
    let mut in_str = None;
    for c in val.chars() {
        match (in_str, c) {
            (None, '"' | '\'') => in_str = Some(c),
            (Some(q), c) if c == q => in_str = None,
            (None, '[') => d += 1,
            (None, ']') => d -= 1,
            _ => {}
        }
    }
    d
}

/// One value and the text after it.
fn parse_value(s: &str) -> Result<(Value, &str), String> {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Ok((Value::String(out), &rest[i + 1..])),
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, '"')) => out.push('"'),
                    Some((_, '\\')) => out.push('\\'),
                    _ => return Err("unsupported escape in string".into()),
                },
                c => out.push(c),
            }
        }
        return Err("unterminated string".into());
    }
    if let Some(rest) = s.strip_prefix('\'') {
        let end = rest.find('\'').ok_or("unterminated string")?;
        return Ok((Value::String(rest[..end].to_owned()), &rest[end + 1..]));
    }
    if let Some(mut rest) = s.strip_prefix('[') {
        let mut items = Vec::new();
        loop {
            rest = rest.trim_start();
            if let Some(r) = rest.strip_prefix(']') {
                return Ok((Value::Array(items), r));
            }
            let (v, r) = parse_value(rest)?;
            items.push(v);
            rest = r.trim_start();
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
            } else if !rest.starts_with(']') {
                return Err("expected , or ] in array".into());
            }
        }
    }
    if s.starts_with('{') {
        return Err("inline tables are not supported here".into());
    }
    let end = s
        .find(|c: char| c == ',' || c == ']' || c.is_whitespace())
        .unwrap_or(s.len());
    let (tok, rest) = s.split_at(end);
    let v = match tok {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => {
            let t = tok.replace('_', "");
            if let Ok(n) = t.parse::<i64>() {
                Value::from(n)
            } else if let Ok(f) = t.parse::<f64>() {
                Value::from(f)
            } else {
                return Err(format!("cannot read value '{tok}'"));
            }
        }
    };
    Ok((v, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resource_config_tables() {
        let mut root = Map::new();
        parse_toml_into(
            &mut root,
            "[[resource.config]]\nhosts = \"foo[0-2]\" # comment\ncores = \"0-1\"\n\
             [[resource.config]]\nhosts = \"foo0\"\nproperties = [\"login\",\n \"x\"]\n\
             [resource]\nnoverify = true\n",
            "t.toml",
        )
        .unwrap();
        let v = Value::Object(root);
        assert_eq!(v["resource"]["config"][0]["hosts"], "foo[0-2]");
        assert_eq!(v["resource"]["config"][1]["properties"][1], "x");
        assert_eq!(v["resource"]["noverify"], true);
    }

    #[test]
    fn dotted_keys_and_errors() {
        let mut root = Map::new();
        parse_toml_into(&mut root, "resource.path = \"R.json\"\n", "t").unwrap();
        assert_eq!(root["resource"]["path"], "R.json");
        let mut root = Map::new();
        let e = parse_toml_into(&mut root, "[[resource.config]\n", "t").unwrap_err();
        assert!(e.to_string().contains("t:1"), "{e}");
    }
}

//! `--conf` of `batch` and `alloc`: the child instance's configuration,
//! built as flux's `BatchConfig` builds it, one option after another: a
//! multi-line JSON or TOML text, a dotted `KEY=VALUE` (the value JSON when
//! it parses), a `.toml` or `.json` file, or a configuration named NAME
//! found as `fluxgate/config/NAME.toml` (or `.json`) under
//! `$XDG_CONFIG_HOME` (`~/.config`) or `$XDG_CONFIG_DIRS` (`/etc/xdg`).
//!
//! As flux does, the result travels in the jobspec as the RFC 37 file
//! `conf.json` (its `data` the object itself); the child's job manager
//! reads it as its configuration file (the same keys as `--config`).

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use serde_json::{Map, Value};

/// The configuration so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchConfig(pub Map<String, Value>);

impl BatchConfig {
    /// The configuration of `--conf` options, in order.
    pub fn from_options(values: &[String]) -> anyhow::Result<Option<BatchConfig>> {
        if values.is_empty() {
            return Ok(None);
        }
        let mut c = BatchConfig::default();
        for v in values {
            c.update(v)?;
        }
        Ok(Some(c))
    }

    /// Apply one `--conf` value (flux's rules, in flux's order).
    pub fn update(&mut self, value: &str) -> anyhow::Result<()> {
        if value.contains('\n') {
            let conf = parse_text(value)
                .ok_or_else(|| anyhow!("--conf: failed to parse multiline as TOML or JSON"))?;
            merge(&mut self.0, conf);
            return Ok(());
        }
        if let Some((key, val)) = value.split_once('=') {
            let val = serde_json::from_str(val).unwrap_or_else(|_| Value::from(val));
            return set_dotted(&mut self.0, key, val);
        }
        match Path::new(value).extension().and_then(|e| e.to_str()) {
            Some(ext @ ("toml" | "json")) => {
                let text = std::fs::read_to_string(value).map_err(|e| {
                    anyhow!(
                        "--conf: {}",
                        crate::cmd::jobs::submit::python_os_error(&e, value)
                    )
                })?;
                let conf = parse_as(&text, ext)
                    .map_err(|e| anyhow!("--conf: parse error: {value}: {e}"))?;
                merge(&mut self.0, conf);
                Ok(())
            }
            _ => self.update_named(value),
        }
    }

    /// A configuration found by name in the standard places.
    fn update_named(&mut self, name: &str) -> anyhow::Result<()> {
        for dir in search_path() {
            for ext in ["toml", "json"] {
                let path = dir.join(format!("{name}.{ext}"));
                if !path.exists() {
                    continue;
                }
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| anyhow!("--conf={name}: {}: {e}", path.display()))?;
                let conf = parse_as(&text, ext)
                    .map_err(|e| anyhow!("--conf={name}: {}: {e}", path.display()))?;
                merge(&mut self.0, conf);
                return Ok(());
            }
        }
        bail!("--conf: named config '{name}' not found")
    }

    /// The RFC 37 file object flux writes for it: the object as `data`.
    pub fn fileref(&self) -> Value {
        serde_json::json!({"mode": 0o100600, "data": Value::Object(self.0.clone())})
    }
}

/// Where named configurations are looked for, in order.
fn search_path() -> Vec<PathBuf> {
    let home = std::env::var("HOME").unwrap_or_default();
    let config_home = std::env::var("XDG_CONFIG_HOME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("{home}/.config"));
    let dirs = std::env::var("XDG_CONFIG_DIRS")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/etc/xdg".into());
    std::iter::once(config_home)
        .chain(dirs.split(':').map(str::to_string))
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(&d).join("fluxgate/config"))
        .collect()
}

/// JSON, else TOML, as an object.
fn parse_text(text: &str) -> Option<Map<String, Value>> {
    parse_as(text, "json")
        .or_else(|_| parse_as(text, "toml"))
        .ok()
}

fn parse_as(text: &str, ext: &str) -> Result<Map<String, Value>, String> {
    let v: Value = if ext == "json" {
        serde_json::from_str(text).map_err(|e| e.to_string())?
    } else {
        toml::from_str(text).map_err(|e| e.to_string())?
    };
    match v {
        Value::Object(m) => Ok(m),
        _ => Err("the configuration is not a table".into()),
    }
}

/// flux's `dict_merge`: tables merge key by key, anything else replaces.
fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => merge(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

/// flux's `set_treedict`: `a.b.c` into nested tables.
fn set_dotted(into: &mut Map<String, Value>, key: &str, value: Value) -> anyhow::Result<()> {
    let (parents, last) = match key.rsplit_once('.') {
        Some((p, l)) => (p.split('.').collect::<Vec<_>>(), l),
        None => (Vec::new(), key),
    };
    let mut at = into;
    for p in parents {
        let entry = at
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        at = entry
            .as_object_mut()
            .with_context(|| format!("failed to set {key}"))?;
    }
    at.insert(last.to_string(), value);
    Ok(())
}

/// The configuration file for the child's job manager (TOML) from the
/// jobspec's `conf.json` file object.
pub fn toml_of_fileref(file: &Value) -> anyhow::Result<String> {
    let data = file
        .get("data")
        .and_then(Value::as_object)
        .context("files.conf.json has no object as data")?;
    toml::to_string(data).context("files.conf.json cannot be written as TOML")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_build_one_config_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[queues.debug]\n[policy]\nmaxdepth = 3\n").unwrap();
        let c = BatchConfig::from_options(&[
            "resource.noverify=true".into(),
            "tbon.topo=\"kary:2\"".into(),
            "a.b=word".into(),
            file.to_string_lossy().into_owned(),
            "{\"policy\": {\"x\": 1}}\n".into(),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            Value::Object(c.0.clone()),
            json!({
                "resource": {"noverify": true},
                "tbon": {"topo": "kary:2"},
                "a": {"b": "word"},
                "queues": {"debug": {}},
                "policy": {"maxdepth": 3, "x": 1}
            })
        );
        assert_eq!(c.fileref()["mode"], 0o100600);
        let toml = toml_of_fileref(&c.fileref()).unwrap();
        assert!(toml.contains("maxdepth = 3"), "{toml}");
    }

    #[test]
    fn bad_conf_gets_flux_words() {
        let mut c = BatchConfig::default();
        let e = c.update("a = [\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--conf: failed to parse multiline as TOML or JSON"
        );
        let e = c.update("nosuchname").unwrap_err();
        assert_eq!(e.to_string(), "--conf: named config 'nosuchname' not found");
        let e = c.update("/nonexistent/x.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--conf: [Errno 2] No such file or directory: '/nonexistent/x.toml'"
        );
    }
}

//! Configuration in layers, each overriding the one before: the struct's
//! defaults, then a TOML file, then `FLUXGATE_*` environment variables, then
//! flags and `--set KEY=VALUE`.
//!
//! A configuration is one struct per subsystem (a TOML table each), and every
//! key has a dotted name as in the file (`resource.torpid_timeout`). The
//! environment and `--set` both name a key and give its value as text; both go
//! through the struct's [`Layered::set`], so a key's parsing is written once.
//! A key's environment variable is `FLUXGATE_` and the dotted key in upper
//! case with `_` for `.` ([`env_name`]), unless the struct names others
//! ([`Layered::env_names`]).

use std::path::Path;

use serde::de::DeserializeOwned;

/// A configuration read in layers.
pub trait Layered: Default + DeserializeOwned {
    /// Every dotted key that has an environment variable.
    const KEYS: &'static [&'static str];

    /// Set one key (dotted, as in the file) from its text, as an environment
    /// variable or `--set` gives it.
    fn set(&mut self, key: &str, value: &str) -> Result<(), SetError>;

    /// The environment variables of `key`, read in this order (a later one
    /// wins): by default only [`env_name`].
    fn env_names(key: &str) -> Vec<String> {
        vec![env_name(key)]
    }

    /// Checks of a whole file that no single key can make (e.g. two keys
    /// that exclude each other); `path` names the file in the message.
    fn check_file(&self, path: &Path) -> Result<(), ConfigError> {
        let _ = path;
        Ok(())
    }
}

/// The environment variable of a dotted key: `FLUXGATE_RESOURCE_SIZE` for `resource.size`.
pub fn env_name(key: &str) -> String {
    format!("FLUXGATE_{}", key.replace('.', "_").to_ascii_uppercase())
}

/// Defaults overlaid with the TOML file at `path`, if any.
pub fn load<T: Layered>(path: Option<&Path>) -> Result<T, ConfigError> {
    let Some(path) = path else {
        return Ok(T::default());
    };
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let config: T = toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    config.check_file(path)?;
    Ok(config)
}

/// Overlay the `FLUXGATE_*` variables of `env` that name keys of `T`; other
/// variables are ignored.
pub fn apply_env<T: Layered>(
    config: &mut T,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(), ConfigError> {
    let env: Vec<(String, String)> = env
        .into_iter()
        .filter(|(name, _)| name.starts_with("FLUXGATE_"))
        .collect();
    for key in T::KEYS {
        for name in T::env_names(key) {
            let Some((_, value)) = env.iter().find(|(n, _)| *n == name) else {
                continue;
            };
            config.set(key, value).map_err(|e| ConfigError::Env {
                name: name.clone(),
                value: value.clone(),
                message: e.to_string(),
            })?;
        }
    }
    Ok(())
}

/// Apply `--set KEY=VALUE` arguments in order.
pub fn apply_sets<T: Layered>(
    config: &mut T,
    sets: impl IntoIterator<Item = impl AsRef<str>>,
) -> Result<(), ConfigError> {
    for kv in sets {
        let kv = kv.as_ref();
        let set = |message: String| ConfigError::Set {
            arg: kv.to_string(),
            message,
        };
        let (key, value) = kv
            .split_once('=')
            .ok_or_else(|| set("expected KEY=VALUE".into()))?;
        config
            .set(key.trim(), value)
            .map_err(|e| set(e.to_string()))?;
    }
    Ok(())
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("config {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong, with the line.
        message: String,
    },
    /// An environment variable holds a bad value.
    #[error("environment variable {name}={value:?}: {message}")]
    Env {
        /// The variable.
        name: String,
        /// Its value.
        value: String,
        /// Why it was refused.
        message: String,
    },
    /// A `--set` argument is not `KEY=VALUE` of a known key.
    #[error("--set {arg:?}: {message}")]
    Set {
        /// The argument.
        arg: String,
        /// Why it was refused.
        message: String,
    },
    /// The file breaks a rule across keys.
    #[error("config {path}: {message}")]
    File {
        /// The file.
        path: String,
        /// The rule.
        message: String,
    },
}

/// Why one key could not be set.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// No such key.
    #[error("unknown key {0:?}")]
    UnknownKey(String),
    /// The text is not a value of the key's type.
    #[error("{key} expects {expected}")]
    Value {
        /// The key.
        key: String,
        /// What it takes.
        expected: &'static str,
    },
}

/// Parsers of a key's text, each refusing with the key's name and type.
pub mod value {
    use super::SetError;

    fn bad(key: &str, expected: &'static str) -> SetError {
        SetError::Value {
            key: key.to_string(),
            expected,
        }
    }

    /// A number (seconds, fractions).
    pub fn number(key: &str, v: &str) -> Result<f64, SetError> {
        v.parse().map_err(|_| bad(key, "a number"))
    }

    /// A whole number.
    pub fn count<N: std::str::FromStr>(key: &str, v: &str) -> Result<N, SetError> {
        v.parse().map_err(|_| bad(key, "a whole number"))
    }

    /// A value of any type with `FromStr`, described as `expected`.
    pub fn parsed<N: std::str::FromStr>(
        key: &str,
        v: &str,
        expected: &'static str,
    ) -> Result<N, SetError> {
        v.parse().map_err(|_| bad(key, expected))
    }

    /// A boolean as clap's boolish flags read it: `true`/`yes`/`on`/`1`/`y`/`t`
    /// or `false`/`no`/`off`/`0`/`n`/`f`, in any case.
    pub fn boolean(key: &str, v: &str) -> Result<bool, SetError> {
        match v.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" | "y" | "t" => Ok(true),
            "false" | "no" | "off" | "0" | "n" | "f" => Ok(false),
            _ => Err(bad(key, "true or false")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Demo {
        name: Option<String>,
        part: Part,
    }

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Part {
        size: u32,
        on: bool,
    }

    impl Layered for Demo {
        const KEYS: &'static [&'static str] = &["name", "part.size", "part.on"];
        fn set(&mut self, key: &str, v: &str) -> Result<(), SetError> {
            match key {
                "name" => self.name = Some(v.to_string()),
                "part.size" => self.part.size = value::count(key, v)?,
                "part.on" => self.part.on = value::boolean(key, v)?,
                _ => return Err(SetError::UnknownKey(key.to_string())),
            }
            Ok(())
        }
        fn env_names(key: &str) -> Vec<String> {
            match key {
                "name" => vec!["FLUXGATE_OLD_NAME".into(), env_name(key)],
                _ => vec![env_name(key)],
            }
        }
    }

    #[test]
    fn layers_override_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demo.toml");
        std::fs::write(&path, "name = \"file\"\n[part]\nsize = 3\n").unwrap();
        let mut d: Demo = load(Some(&path)).unwrap();
        assert_eq!(d.name.as_deref(), Some("file"));
        assert_eq!(d.part.size, 3);
        let env = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        apply_env(&mut d, env(&[("FLUXGATE_PART_ON", "yes"), ("HOME", "/")])).unwrap();
        assert!(d.part.on);
        // The canonical name wins over an older one.
        apply_env(
            &mut d,
            env(&[("FLUXGATE_NAME", "new"), ("FLUXGATE_OLD_NAME", "old")]),
        )
        .unwrap();
        assert_eq!(d.name.as_deref(), Some("new"));
        apply_sets(&mut d, ["part.size=9", "name=x=y"]).unwrap();
        assert_eq!(d.part.size, 9);
        assert_eq!(d.name.as_deref(), Some("x=y"));
    }

    #[test]
    fn mistakes_are_named() {
        let mut d = Demo::default();
        let e = apply_env(&mut d, [("FLUXGATE_PART_SIZE".into(), "many".into())]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "environment variable FLUXGATE_PART_SIZE=\"many\": part.size expects a whole number"
        );
        let e = apply_sets(&mut d, ["part.sise=1"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--set \"part.sise=1\": unknown key \"part.sise\""
        );
        let e = apply_sets(&mut d, ["part.size"]).unwrap_err();
        assert!(e.to_string().ends_with("expected KEY=VALUE"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demo.toml");
        std::fs::write(&path, "[part]\nsise = 1\n").unwrap();
        let e = load::<Demo>(Some(&path)).unwrap_err().to_string();
        assert!(e.contains("sise"), "{e}");
    }
}

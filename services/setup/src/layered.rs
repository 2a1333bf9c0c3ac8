//! Configuration in layers, each overriding the one before: the struct's
//! defaults, then a TOML file, then `FLUXGATE_*` environment variables, then
//! flags and `--set KEY=VALUE`.
//!
//! A configuration is one struct per subsystem (a TOML table each), and every
//! key has a dotted name as in the file (`resource.torpid_timeout`). Each
//! service declares its keys once, in one table of [`Key`]s
//! ([`Layered::KEYS`]): a key's name, its setter, its environment variable
//! and its flag. The environment, the flags ([`Flags`]) and `--set` all name
//! a key and give its value as text, and all go through the key's setter, so
//! a key's parsing is written once. A key's environment variable is
//! `FLUXGATE_` and the dotted key in upper case with `_` for `.`
//! ([`env_name`]), unless its entry names another prefix.

mod flags;
mod key;

use std::path::Path;

use serde::de::DeserializeOwned;

pub use flags::Flags;
pub use key::{Flag, Key, Setter, unnamed_in};

/// A configuration read in layers.
pub trait Layered: Default + DeserializeOwned + 'static {
    /// Every key of a fixed name, in the order the environment is read.
    const KEYS: &'static [Key<Self>];

    /// Set one key (dotted, as in the file) from its text, as an environment
    /// variable, a flag or `--set` gives it.
    fn set(&mut self, key: &str, value: &str) -> Result<(), SetError> {
        match Self::KEYS.iter().find(|k| k.name == key) {
            Some(k) => (k.set)(self, key, value),
            None => self
                .set_named(key, value)
                .unwrap_or_else(|| Err(SetError::UnknownKey(key.to_string()))),
        }
    }

    /// Set a key that is not in [`Layered::KEYS`] because it names an entry
    /// of a table (`queues.batch.requires`); `None` when `key` is none.
    /// Such keys have no environment variable.
    fn set_named(&mut self, key: &str, value: &str) -> Option<Result<(), SetError>> {
        let _ = (key, value);
        None
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
    format!("FLUXGATE_{}", key::upper_key(key))
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
        let name = key.env_name();
        let Some((_, value)) = env.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        (key.set)(config, key.name, value).map_err(|e| ConfigError::Env {
            name,
            value: value.clone(),
            message: e.to_string(),
        })?;
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
    /// A flag holds a bad value.
    #[error("--{flag} {value:?}: {message}")]
    Flag {
        /// The flag, without `--`.
        flag: String,
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

    /// The refusal of `key`'s text, saying what it takes.
    pub fn bad(key: &str, expected: &'static str) -> SetError {
        SetError::Value {
            key: key.to_string(),
            expected,
        }
    }

    /// Store a parsed value in its field.
    pub fn put<T>(slot: &mut T, parsed: Result<T, SetError>) -> Result<(), SetError> {
        *slot = parsed?;
        Ok(())
    }

    /// Store a parsed value in its optional field.
    pub fn put_some<T>(slot: &mut Option<T>, parsed: Result<T, SetError>) -> Result<(), SetError> {
        *slot = Some(parsed?);
        Ok(())
    }

    /// Text, taken as it is.
    pub fn text(v: &str) -> Result<String, SetError> {
        Ok(v.to_string())
    }

    /// A path, taken as it is.
    pub fn path(v: &str) -> Result<std::path::PathBuf, SetError> {
        Ok(v.into())
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

    /// The closures' argument types come from the alias.
    type DemoKey = Key<Demo>;

    impl Layered for Demo {
        const KEYS: &'static [Key<Demo>] = &[
            DemoKey::new("name", |d, _, v| {
                value::put_some(&mut d.name, value::text(v))
            })
            .env_prefix("FLUXGATE_DEMO_"),
            DemoKey::new("part.size", |d, k, v| {
                value::put(&mut d.part.size, value::count(k, v))
            })
            .flag(Flag::value("N", "The size")),
            DemoKey::new("part.on", |d, k, v| {
                value::put(&mut d.part.on, value::boolean(k, v))
            })
            .flag(Flag::boolean("Turn it on").long("on")),
        ];

        fn set_named(&mut self, key: &str, v: &str) -> Option<Result<(), SetError>> {
            let size = key.strip_prefix("sizes.")?;
            Some(value::count(key, v).map(|n| {
                self.part.size = n;
                self.name = Some(size.to_string());
            }))
        }
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        flags: Flags<Demo>,
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
        // A key read from its own prefix only.
        apply_env(
            &mut d,
            env(&[("FLUXGATE_NAME", "other"), ("FLUXGATE_DEMO_NAME", "new")]),
        )
        .unwrap();
        assert_eq!(d.name.as_deref(), Some("new"));
        let cli =
            <Cli as clap::Parser>::try_parse_from(["demo", "--part-size", "4", "--on=no"]).unwrap();
        assert_eq!(cli.flags.get("part.size"), Some("4"));
        cli.flags.apply(&mut d).unwrap();
        assert_eq!((d.part.size, d.part.on), (4, false));
        apply_sets(&mut d, ["part.size=9", "name=x=y"]).unwrap();
        assert_eq!(d.part.size, 9);
        assert_eq!(d.name.as_deref(), Some("x=y"));
        apply_sets(&mut d, ["sizes.big=12"]).unwrap();
        assert_eq!((d.part.size, d.name.as_deref()), (12, Some("big")));
        let cli = <Cli as clap::Parser>::try_parse_from(["demo", "--on"]).unwrap();
        cli.flags.apply(&mut d).unwrap();
        assert!(d.part.on);
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
        let e = apply_sets(&mut d, ["sizes.big=many"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--set \"sizes.big=many\": sizes.big expects a whole number"
        );
        let e = <Cli as clap::Parser>::try_parse_from(["demo", "--part-size", "many"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("part.size expects a whole number"), "{e}");
        let e = apply_sets(&mut d, ["part.size"]).unwrap_err();
        assert!(e.to_string().ends_with("expected KEY=VALUE"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demo.toml");
        std::fs::write(&path, "[part]\nsise = 1\n").unwrap();
        let e = load::<Demo>(Some(&path)).unwrap_err().to_string();
        assert!(e.contains("sise"), "{e}");
    }
}

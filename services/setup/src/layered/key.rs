//! One entry of a service's key table: a key's dotted name, how its text is
//! set, its environment variable and, where it has one, its flag. A service
//! declares each key once, in one table ([`super::Layered::KEYS`]); the
//! environment layer, `--set`, the flags and the documentation's check all
//! read that table.

use super::SetError;

/// What sets a key from its text: the settings, the key's name (for the
/// message of a refusal) and the text.
pub type Setter<S> = fn(&mut S, &str, &str) -> Result<(), SetError>;

/// One key of a service's configuration.
pub struct Key<S: 'static> {
    /// The dotted name, as in the file (`resource.torpid_timeout`).
    pub name: &'static str,
    /// Parses the text and stores it.
    pub set: Setter<S>,
    /// What the environment variable starts with, before the key in upper case.
    pub env_prefix: &'static str,
    /// The command-line flag that is an alias of this key, if any.
    pub flag: Option<Flag>,
}

impl<S> std::fmt::Debug for Key<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("name", &self.name)
            .field("env", &self.env_name())
            .field("flag", &self.flag)
            .finish()
    }
}

impl<S> Key<S> {
    /// A key read from `FLUXGATE_<KEY>`, without a flag.
    pub const fn new(name: &'static str, set: Setter<S>) -> Self {
        Key {
            name,
            set,
            env_prefix: "FLUXGATE_",
            flag: None,
        }
    }

    /// The key read from `<prefix><KEY>` instead (`FLUXGATE_EXEC_` where
    /// both services have a key of that name and often share one environment).
    pub const fn env_prefix(self, prefix: &'static str) -> Self {
        Key {
            env_prefix: prefix,
            ..self
        }
    }

    /// The key with a flag as its alias.
    pub const fn flag(self, flag: Flag) -> Self {
        Key {
            flag: Some(flag),
            ..self
        }
    }

    /// The key's environment variable.
    pub fn env_name(&self) -> String {
        format!("{}{}", self.env_prefix, upper_key(self.name))
    }
}

/// What of `keys` a documentation `section` does not name: each key and
/// its variable in backquotes, and each flag as `` `--flag`` (followed by
/// a backquote, a space or `[`). For the services' tests of docs/CONFIG.md.
pub fn unnamed_in<S>(section: &str, keys: &[Key<S>]) -> Vec<String> {
    let flag_named = |long: &str| {
        ['`', ' ', '[']
            .iter()
            .any(|end| section.contains(&format!("`--{long}{end}")))
    };
    keys.iter()
        .flat_map(|k| [format!("`{}`", k.name), format!("`{}`", k.env_name())])
        .filter(|name| !section.contains(name.as_str()))
        .chain(
            keys.iter()
                .filter_map(|k| k.flag.map(|f| f.long_name(k.name)))
                .filter(|long| !flag_named(long))
                .map(|long| format!("--{long}")),
        )
        .collect()
}

/// A dotted key as a variable's tail: `resource.size` is `RESOURCE_SIZE`.
pub(super) fn upper_key(key: &str) -> String {
    key.replace('.', "_").to_ascii_uppercase()
}

/// A command-line flag that sets one key.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    /// The flag's name without `--` [default: the key with `-` for `_` and `.`].
    pub long: Option<&'static str>,
    /// What the value is called in the help (`SECS`).
    pub value_name: &'static str,
    /// The help line.
    pub help: &'static str,
    /// A boolean: `--flag` alone means true, `--flag=false` turns it off.
    pub boolean: bool,
    /// The key whose flag may not be given with this one.
    pub conflicts_with: Option<&'static str>,
}

impl Flag {
    /// A flag that takes a value.
    pub const fn value(value_name: &'static str, help: &'static str) -> Self {
        Flag {
            long: None,
            value_name,
            help,
            boolean: false,
            conflicts_with: None,
        }
    }

    /// A boolean flag: `--flag`, `--flag=true`, `--flag=false`.
    pub const fn boolean(help: &'static str) -> Self {
        Flag {
            boolean: true,
            ..Flag::value("BOOL", help)
        }
    }

    /// The flag named `--long` rather than after its key.
    pub const fn long(self, long: &'static str) -> Self {
        Flag {
            long: Some(long),
            ..self
        }
    }

    /// The flag refused beside the flag of `key`.
    pub const fn conflicts_with(self, key: &'static str) -> Self {
        Flag {
            conflicts_with: Some(key),
            ..self
        }
    }

    /// The flag's name without `--`, for the key `key`.
    pub fn long_name(&self, key: &str) -> String {
        match self.long {
            Some(long) => long.to_string(),
            None => key.replace(['_', '.'], "-"),
        }
    }
}

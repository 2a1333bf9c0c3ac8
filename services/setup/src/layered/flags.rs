//! The flags of a key table as clap arguments: every key whose entry names
//! a [`Flag`](super::Flag) gets one, checked by the key's own setter while
//! the command line is parsed, so a bad value is refused there, naming the
//! flag. Flatten [`Flags`] into a clap `Parser` and apply it as the layer
//! between the environment and `--set`.

use std::marker::PhantomData;

use clap::builder::{BoolishValueParser, TypedValueParser};
use clap::{Arg, ArgAction, ArgMatches, Command};

use super::{ConfigError, Key, Layered};

/// The flags given on a command line, each the alias of a key of `T`.
pub struct Flags<T: 'static> {
    given: Vec<(&'static Key<T>, String)>,
    of: PhantomData<fn() -> T>,
}

impl<T: Layered> Flags<T> {
    /// Set each key whose flag was given, in the table's order.
    pub fn apply(&self, config: &mut T) -> Result<(), ConfigError> {
        for (key, value) in &self.given {
            (key.set)(config, key.name, value).map_err(|e| ConfigError::Flag {
                flag: key.flag.map(|f| f.long_name(key.name)).unwrap_or_default(),
                value: value.clone(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// The text given to the flag of `key`, if it was given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.given
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v.as_str())
    }
}

impl<T> Default for Flags<T> {
    fn default() -> Self {
        Flags {
            given: Vec::new(),
            of: PhantomData,
        }
    }
}

impl<T> Clone for Flags<T> {
    fn clone(&self) -> Self {
        Flags {
            given: self.given.clone(),
            of: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Flags<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.given.iter().map(|(k, v)| (k.name, v)))
            .finish()
    }
}

impl<T: Layered> clap::FromArgMatches for Flags<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = Flags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for key in T::KEYS.iter().filter(|k| k.flag.is_some()) {
            if let Ok(Some(value)) = matches.try_get_one::<String>(key.name) {
                self.given.retain(|(k, _)| k.name != key.name);
                self.given.push((key, value.clone()));
            }
        }
        Ok(())
    }
}

impl<T: Layered> clap::Args for Flags<T> {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(T::KEYS.iter().filter_map(arg))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// The clap argument of `key`'s flag, if it has one; its id is the key.
fn arg<T: Layered>(key: &'static Key<T>) -> Option<Arg> {
    let flag = key.flag?;
    let arg = Arg::new(key.name)
        .long(flag.long_name(key.name))
        .value_name(flag.value_name)
        .help(flag.help)
        .action(ArgAction::Set);
    let arg = if flag.boolean {
        // clap's boolish words, the same the setter reads: `--flag` alone
        // is true and `=` is required, so a word after it stays an argument.
        arg.num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
            .value_parser(BoolishValueParser::new().map(|b| b.to_string()))
    } else {
        arg.value_parser(move |v: &str| {
            (key.set)(&mut T::default(), key.name, v).map(|()| v.to_string())
        })
    };
    Some(match flag.conflicts_with {
        Some(other) => arg.conflicts_with(other),
        None => arg,
    })
}

//! Parsing the command line without building every subcommand's options.
//!
//! clap builds the whole tree of commands and options before it looks at
//! the first word: for this CLI that is about 0.4 ms of a process that
//! `fluxgate run true` waits for end to end. The commands scripts call most
//! are parsed against their own options alone; anything that does not parse
//! there (help, a mistake, another command) is parsed again against the
//! whole tree, so help and errors read exactly as before.

use std::ffi::OsString;

use clap::{Args, Command, FromArgMatches};

/// What adds a subcommand's options to its command.
type Augment = fn(Command) -> Command;

/// Subcommands parsed on their own, and how their options are added.
const QUICK: &[(&str, Augment)] = &[
    ("run", crate::cmd::jobs::submit::RunArgs::augment_args),
    ("submit", crate::cmd::jobs::submit::SubmitArgs::augment_args),
    ("job", crate::cmd::jobs::job::Args::augment_args),
    ("jobs", crate::cmd::jobs::list::Args::augment_args),
    ("cancel", crate::cmd::jobs::cancel::Args::augment_args),
];

/// `argv` parsed against its subcommand alone, when that is one of
/// [`QUICK`] and it parses; `None` means: parse it against the whole tree.
pub fn quick<T: FromArgMatches>(argv: &[OsString]) -> Option<T> {
    let name = argv.get(1)?.to_str()?;
    let &(name, augment) = QUICK.iter().find(|(n, _)| *n == name)?;
    let command = Command::new("fluxgate").subcommand(augment(Command::new(name)));
    let matches = command.try_get_matches_from(argv).ok()?;
    T::from_arg_matches(&matches).ok()
}

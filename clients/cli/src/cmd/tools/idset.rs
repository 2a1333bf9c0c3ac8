//! `fluxgate idset`: decode, combine and encode RFC 22 idsets.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context;
use fluxgate_shared::idset::{EncodeFlags, IdSet};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
With several IDSETs and no operation flag the result is their union;
--intersect and --minus fold left over the arguments (the first IDSET minus
all the others). With no IDSET arguments, idsets are read from stdin,
separated by whitespace.

The result is printed with ranges (0-3,5) unless --expand is given. An
empty result prints nothing. --first and --last print nothing and exit with
status 1 when the result is empty.")]
pub struct Args {
    /// Print every id instead of ranges (0,1,2,3 not 0-3).
    #[arg(short = 'e', long)]
    expand: bool,
    /// Wrap the result in brackets when it has more than one id.
    #[arg(short = 'b', long)]
    brackets: bool,
    /// Print the number of ids instead of the set.
    #[arg(short = 'c', long, conflicts_with_all = ["first", "last"])]
    count: bool,
    /// Print the smallest id.
    #[arg(long, conflicts_with = "last")]
    first: bool,
    /// Print the largest id.
    #[arg(long)]
    last: bool,
    /// Union of all IDSETs (the default).
    #[arg(short = 'u', long, conflicts_with_all = ["intersect", "minus"])]
    union: bool,
    /// Ids present in every IDSET.
    #[arg(short = 'i', long, conflicts_with = "minus")]
    intersect: bool,
    /// The first IDSET minus all the others.
    #[arg(short = 'm', long)]
    minus: bool,
    /// RFC 22 idsets such as 0-3,7 or [1,5-6].
    #[arg(value_name = "IDSET")]
    idsets: Vec<String>,
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let texts = if args.idsets.is_empty() {
        let mut input = String::new();
        std::io::stdin()
            .read_to_string(&mut input)
            .context("reading idsets from stdin")?;
        input.split_whitespace().map(str::to_string).collect()
    } else {
        args.idsets.clone()
    };
    let sets = texts
        .iter()
        .map(|t| IdSet::parse(t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut sets = sets.into_iter();
    // Union and minus gather the ranges of all the sets and sort them once:
    // folding set after set costs a pass over the growing result per set,
    // quadratic for many small sets on stdin. (A - B - C is A - (B | C).)
    let union_of = |sets: std::vec::IntoIter<IdSet>| {
        IdSet::from_ranges(sets.flat_map(|s| s.ranges().to_vec()))
    };
    let result = if args.intersect {
        let first = sets.next().unwrap_or_default();
        sets.fold(first, |acc, s| acc.intersection(&s))
    } else if args.minus {
        let first = sets.next().unwrap_or_default();
        first.difference(&union_of(sets))
    } else {
        union_of(sets)
    };

    let line = if args.count {
        Some(result.count().to_string())
    } else if args.first || args.last {
        let id = if args.first {
            result.first()
        } else {
            result.last()
        };
        match id {
            Some(id) => Some(id.to_string()),
            None => return Ok(ExitCode::FAILURE),
        }
    } else if result.is_empty() {
        None
    } else {
        Some(result.encode(EncodeFlags {
            range: !args.expand,
            brackets: args.brackets,
        }))
    };
    if let Some(line) = line {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").context("writing to stdout")?;
    }
    Ok(ExitCode::SUCCESS)
}

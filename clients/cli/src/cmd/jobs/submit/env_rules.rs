//! `--env`, `--env-remove` and `--env-file` as one list of rules in
//! command-line order, as flux's argparse actions keep them: a removal is
//! `-PATTERN`, a file `^FILE`, so that `--env-file=F --env=-*` and
//! `--env=-* --env-file=F` differ as they do in flux.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

/// The environment rules, in the order they were given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvRules(pub Vec<String>);

/// Each option, its help, and the prefix its values get in the list.
const OPTIONS: [(&str, &str, &str, &str); 3] = [
    (
        "env",
        "RULE",
        "",
        "Control environment export: -PATTERN removes, ^FILE reads rules from \
         FILE, VAR=VAL sets, PATTERN copies; rules apply in order",
    ),
    (
        "env-remove",
        "PATTERN",
        "-",
        "Remove environment variables matching PATTERN",
    ),
    (
        "env-file",
        "FILE",
        "^",
        "Read a set of environment rules from FILE",
    ),
];

impl FromArgMatches for EnvRules {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut rules: Vec<(usize, String)> = Vec::new();
        for (id, _, prefix, _) in OPTIONS {
            let (Some(values), Some(at)) = (m.get_many::<String>(id), m.indices_of(id)) else {
                continue;
            };
            rules.extend(at.zip(values.map(|v| format!("{prefix}{v}"))));
        }
        rules.sort_by_key(|(at, _)| *at);
        Ok(EnvRules(rules.into_iter().map(|(_, r)| r).collect()))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for EnvRules {
    fn augment_args(cmd: Command) -> Command {
        OPTIONS.iter().fold(cmd, |cmd, (id, value, _, help)| {
            cmd.arg(
                Arg::new(*id)
                    .long(*id)
                    .value_name(*value)
                    .action(ArgAction::Append)
                    .help(*help),
            )
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Opts {
        #[command(flatten)]
        env: EnvRules,
        #[arg(long)]
        other: Option<String>,
    }

    #[test]
    fn rules_keep_command_line_order() {
        let o = <Opts as clap::Parser>::try_parse_from([
            "x",
            "--env-file=f1",
            "--env=-*",
            "--other=o",
            "--env-remove",
            "FOO*",
            "--env",
            "A=1",
            "--env-file",
            "f2",
        ])
        .unwrap();
        assert_eq!(o.env.0, ["^f1", "-*", "-FOO*", "A=1", "^f2"]);
        assert_eq!(o.other.as_deref(), Some("o"));
        let none = <Opts as clap::Parser>::try_parse_from(["x"]).unwrap();
        assert!(none.env.0.is_empty());
    }
}

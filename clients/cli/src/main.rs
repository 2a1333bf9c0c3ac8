//! `fluxgate`: the user and admin command line.

use fluxgate_cli::{cmd, output, parse};

use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Fluxgate: a job manager that follows the Flux RFCs.
#[derive(Debug, Parser)]
#[command(name = "fluxgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode, combine and encode RFC 22 idsets.
    Idset(cmd::tools::idset::Args),
    /// Manipulate RFC 29 hostlists (as flux-hostlist).
    Hostlist(cmd::tools::hostlist::Args),
    /// Encode, decode and combine RFC 20 resource sets (as flux R).
    #[command(name = "R")]
    R(cmd::resources::rset::Args),
    /// Job commands.
    Job(cmd::jobs::job::Args),
    /// Submit a job (as flux submit).
    Submit(cmd::jobs::submit::SubmitArgs),
    /// Submit one job per combination of inputs (as flux bulksubmit).
    Bulksubmit(cmd::jobs::bulksubmit::Args),
    /// Run a job interactively (as flux run).
    Run(cmd::jobs::submit::RunArgs),
    /// Submit a batch script that runs in a new instance inside the job (as flux batch).
    Batch(cmd::instance::nested::BatchArgs),
    /// Start a new instance inside a job and run a command or shell in it (as flux alloc).
    Alloc(cmd::instance::nested::AllocArgs),
    /// Run a command in the instance a job runs (as flux proxy).
    Proxy(cmd::instance::nested::ProxyArgs),
    /// Print the URI of the instance a job runs (as flux uri).
    Uri(cmd::instance::nested::UriArgs),
    /// Change a job's duration (as flux update).
    Update(cmd::jobs::update::Args),
    /// One task of a batch or alloc job: its node of the new instance.
    #[command(hide = true)]
    Instance(cmd::instance::nested::InstanceArgs),
    /// List jobs (as flux jobs).
    Jobs(cmd::jobs::list::Args),
    /// Jobs and the instances inside them as a tree (as flux pstree).
    Pstree(cmd::jobs::pstree::Args),
    /// A live view of the instance: resources, jobs, eventlogs (as flux top).
    Top(cmd::jobs::top::Args),
    /// Follow the output of jobs until they end (as flux watch).
    Watch(cmd::jobs::watch::Args),
    /// Cancel jobs (as flux cancel).
    Cancel(cmd::jobs::cancel::Args),
    /// Resource status and administration (as flux resource).
    Resource(cmd::resources::resource::Args),
    /// Queue control (as flux queue).
    Queue(cmd::resources::queue::Args),
    /// Fair share: each user's usage, shares and fair-share factor.
    Accounting(cmd::resources::accounting::Args),
    /// Start an instance on this machine and run a command in it (as flux start).
    Start(cmd::instance::start::Args),
    /// Make tokens for users of an instance that requires credentials.
    Token(cmd::instance::token::Args),
    /// gRPC health check of a job manager or exec service (exit 0 when SERVING).
    Health(cmd::instance::health::Args),
    /// Measure an instance: throughput, latency, memory, restart time
    /// (runs fluxgate-bench).
    #[command(after_long_help = cmd::tools::bench::HELP)]
    Bench(cmd::tools::bench::Args),
    /// Replay a workload trace (SWF) through the scheduler in virtual time.
    Simulate(cmd::tools::simulate::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::tools::docs::CompletionsArgs),
    /// Write man pages for fluxgate and its subcommands into DIR.
    #[command(hide = true)]
    Man(cmd::tools::docs::ManArgs),
}

impl Command {
    /// Does it start services (job manager, exec services) on this machine?
    fn starts_services(&self) -> bool {
        matches!(self, Command::Start(_) | Command::Instance(_))
    }
}

/// `batch` with the script's directives as options before the ones given
/// (so that those win); other commands as parsed. A script read from
/// stdin (no SCRIPT, as flux) is read here, once, and kept in the args.
fn with_directives(cli: Cli) -> anyhow::Result<Cli> {
    let Command::Batch(batch) = &cli.command else {
        return Ok(cli);
    };
    let (name, text) = match batch.script_path() {
        Some(path) => (
            path.to_string(),
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read batch script {path}"))?,
        ),
        None if batch.reads_stdin() => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|_| {
                anyhow::anyhow!(
                    "stdin does not appear to be a script, or failed to encode as utf-8"
                )
            })?;
            ("stdin".to_string(), text)
        }
        None => return Ok(cli),
    };
    let keep_stdin = |mut cli: Cli| {
        if let Command::Batch(b) = &mut cli.command
            && b.reads_stdin()
        {
            b.set_stdin_script(text.clone());
        }
        cli
    };
    let extra = cmd::instance::nested::directives::directive_args(&text)
        .map_err(|e| anyhow::anyhow!("{name}: directive {e}"))?;
    if extra.is_empty() {
        return Ok(keep_stdin(cli));
    }
    // No global options exist, so the subcommand is the first `batch` word.
    let given: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let at = given
        .iter()
        .position(|a| a == "batch")
        .context("cannot find the batch subcommand")?;
    let argv = given[..=at]
        .iter()
        .cloned()
        .chain(extra.into_iter().map(Into::into))
        .chain(given[at + 1..].iter().cloned());
    let matches = Cli::command()
        .args_override_self(true)
        .try_get_matches_from(argv)
        .map_err(|e| anyhow::anyhow!("{name}: directive: {e}"))?;
    Ok(keep_stdin(Cli::from_arg_matches(&matches)?))
}

/// The command line, parsed.
fn parse_args() -> Cli {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    parse::quick(&argv).unwrap_or_else(|| Cli::parse_from(argv))
}

fn main() -> ExitCode {
    let cli = match with_directives(parse_args()) {
        Ok(cli) => cli,
        Err(err) => {
            eprintln!("fluxgate-batch: {}", output::printable(&format!("{err:#}")));
            return ExitCode::FAILURE;
        }
    };
    // Before a runtime or any service is started (parsing opens nothing):
    // descriptors the calling shell left open must not reach the services,
    // nor through them anyone's job. Other commands keep them, so that a
    // path such as bash's `<(...)` (/dev/fd/63) still reads. A failure
    // leaves them open, which is no worse than before; say so.
    if cli.command.starts_services()
        && let Err(e) = fluxgate_os::fds::close_inherited()
    {
        eprintln!("fluxgate: cannot close inherited descriptors: {e}");
    }
    let (name, result) = match cli.command {
        Command::Idset(args) => ("idset", cmd::tools::idset::run(args)),
        Command::Hostlist(args) => ("hostlist", cmd::tools::hostlist::run(args)),
        Command::R(args) => ("R", cmd::resources::rset::run(args)),
        Command::Job(args) => ("job", cmd::jobs::job::run(args)),
        Command::Submit(args) => ("submit", cmd::jobs::submit::run_submit(args)),
        Command::Bulksubmit(args) => ("bulksubmit", cmd::jobs::bulksubmit::run(args)),
        Command::Run(args) => ("run", cmd::jobs::submit::run_run(args)),
        Command::Batch(args) => ("batch", cmd::instance::nested::run_batch(args)),
        Command::Alloc(args) => ("alloc", cmd::instance::nested::run_alloc(args)),
        Command::Proxy(args) => ("proxy", cmd::instance::nested::run_proxy(args)),
        Command::Uri(args) => ("uri", cmd::instance::nested::run_uri(args)),
        Command::Update(args) => ("update", cmd::jobs::update::run(args)),
        Command::Instance(args) => ("instance", cmd::instance::nested::run_instance(args)),
        Command::Jobs(args) => ("jobs", cmd::jobs::list::run(args)),
        Command::Pstree(args) => ("pstree", cmd::jobs::pstree::run(args)),
        Command::Top(args) => ("top", cmd::jobs::top::run(args)),
        Command::Watch(args) => ("watch", cmd::jobs::watch::run(args)),
        Command::Cancel(args) => ("cancel", cmd::jobs::cancel::run(args)),
        Command::Resource(args) => ("resource", cmd::resources::resource::run(args)),
        Command::Queue(args) => ("queue", cmd::resources::queue::run(args)),
        Command::Accounting(args) => ("accounting", cmd::resources::accounting::run(args)),
        Command::Start(args) => ("start", cmd::instance::start::run(args)),
        Command::Token(args) => ("token", cmd::instance::token::run(args)),
        Command::Health(args) => ("health", cmd::instance::health::run(args)),
        Command::Bench(args) => ("bench", cmd::tools::bench::run(args)),
        Command::Simulate(args) => ("simulate", cmd::tools::simulate::run(args)),
        Command::Completions(args) => (
            "completions",
            cmd::tools::docs::run_completions(args, Cli::command()),
        ),
        Command::Man(args) => ("man", cmd::tools::docs::run_man(args, Cli::command())),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // One line a person can act on, as flux's tools print it.
            // Messages may echo names and notes other users chose.
            eprintln!(
                "fluxgate-{name}: {}",
                output::printable(&format!("{err:#}"))
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What parsing `argv` gives, by the quick path and by the whole tree.
    fn both(argv: &[&str]) -> (Option<String>, Option<String>) {
        let argv: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
        let quick = parse::quick::<Cli>(&argv).map(|c| format!("{c:?}"));
        let full = Cli::try_parse_from(&argv).ok().map(|c| format!("{c:?}"));
        (quick, full)
    }

    #[test]
    fn the_quick_parse_gives_what_the_whole_tree_gives() {
        for argv in [
            &["fluxgate", "run", "true"][..],
            &["fluxgate", "run", "-N2", "-n", "4", "--", "hostname", "-s"],
            &["fluxgate", "submit", "--cc", "1-3", "--wait", "sleep", "1"],
            &["fluxgate", "submit", "--dry-run", "-t", "5m", "true"],
            &["fluxgate", "job", "status", "f1", "f2"],
            &["fluxgate", "job", "eventlog", "-p", "exec", "f1"],
            &["fluxgate", "jobs", "-a", "-o", "{id.f58} {result}"],
            &["fluxgate", "cancel", "--all", "-u", "alice"],
        ] {
            let (quick, full) = both(argv);
            assert!(full.is_some(), "{argv:?} parses");
            assert_eq!(quick, full, "{argv:?}");
        }
    }

    #[test]
    fn help_mistakes_and_other_commands_go_to_the_whole_tree() {
        for argv in [
            &["fluxgate"][..],
            &["fluxgate", "--help"],
            &["fluxgate", "--version"],
            &["fluxgate", "run", "--help"],
            &["fluxgate", "run", "--no-such-option", "true"],
            &["fluxgate", "job"],
            &["fluxgate", "idset", "--count", "1-3"],
            &["fluxgate", "nosuch"],
        ] {
            assert_eq!(both(argv).0, None, "{argv:?}");
        }
    }
}

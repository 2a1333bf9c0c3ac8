//! `fluxgate bulksubmit`: one job per combination of inputs, as
//! flux-bulksubmit(1). Inputs come from `::: A B` lists on the command line,
//! from files after `::::` (one input a line, `-` is stdin), or from stdin
//! when neither is given; several lists combine as a cross product.

pub mod template;

use std::io::BufRead;
use std::process::ExitCode;

use anyhow::{Context, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;

use crate::client;
use crate::cmd::copies::{CopyOpts, progress_bar};
use crate::cmd::submit::{JobOpts, submit_one};

/// Arguments of `fluxgate bulksubmit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    opts: JobOpts,
    #[command(flatten)]
    copy: CopyOpts,
    /// Print the commands that would be submitted, and exit.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// Command template, then `::: INPUTS...` or `:::: FILES...` lists.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// The command template and where its inputs come from.
#[derive(Debug, PartialEq, Eq)]
struct Split {
    template: Vec<String>,
    /// Lists given on the command line; files are already read.
    lists: Vec<Vec<String>>,
}

/// Split `COMMAND ::: A B :::: FILE` into the template and the input lists.
fn split(
    args: &[String],
    read: &mut dyn FnMut(&str) -> anyhow::Result<Vec<String>>,
) -> anyhow::Result<Split> {
    let mut template = Vec::new();
    let mut lists: Vec<Vec<String>> = Vec::new();
    // What the current group is: the template, a ::: list, or :::: files.
    let mut files = false;
    let mut in_template = true;
    for a in args {
        match a.as_str() {
            ":::" => {
                in_template = false;
                files = false;
                lists.push(Vec::new());
            }
            "::::" => {
                in_template = false;
                files = true;
            }
            _ if in_template => template.push(a.clone()),
            _ if files => lists.push(read(a)?),
            _ => {
                if let Some(l) = lists.last_mut() {
                    l.push(a.clone());
                }
            }
        }
    }
    if template.is_empty() {
        bail!("no command given before the inputs");
    }
    Ok(Split { template, lists })
}

/// The lines of `path` (`-` is stdin), one input each, blank lines skipped.
fn read_lines(path: &str) -> anyhow::Result<Vec<String>> {
    let lines: Vec<String> = if path == "-" {
        std::io::stdin()
            .lock()
            .lines()
            .collect::<Result<_, _>>()
            .context("cannot read inputs from stdin")?
    } else {
        let f = std::fs::File::open(path).with_context(|| path.to_string())?;
        std::io::BufReader::new(f)
            .lines()
            .collect::<Result<_, _>>()
            .with_context(|| path.to_string())?
    };
    Ok(lines.into_iter().filter(|l| !l.trim().is_empty()).collect())
}

/// One job of the bulk: its command line and the options filled for it.
struct Job {
    command: Vec<String>,
    opts: JobOpts,
}

/// Each job: the template filled with one combination (with no replacement
/// field for inputs, the inputs are appended, as xargs), and the options
/// that take text filled the same way, each on its own as flux formats them.
fn jobs(split: &Split, opts: &JobOpts) -> anyhow::Result<Vec<Job>> {
    let append = !template::has_input_fields(&split.template);
    template::cross_product(&split.lists)
        .into_iter()
        .enumerate()
        .map(|(seq, inputs)| {
            let mut next = 0;
            let mut command = split
                .template
                .iter()
                .map(|a| template::fill(a, &inputs, seq, &mut next))
                .collect::<Result<Vec<_>, _>>()?;
            let opts = opts.map_text(|s| template::fill(s, &inputs, seq, &mut 0))?;
            if append {
                command.extend(inputs);
            }
            Ok(Job { command, opts })
        })
        .collect()
}

/// Run `fluxgate bulksubmit`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut split = split(&args.command, &mut read_lines)?;
    if split.lists.is_empty() {
        split.lists.push(read_lines("-")?);
    }
    let jobs = jobs(&split, &args.opts)?;
    let copies: Vec<Option<(u32, bool)>> = match args.copy.copies()? {
        Some((set, env)) => set.iter().map(|id| Some((id, env))).collect(),
        None => vec![None],
    };
    let mut requests = Vec::with_capacity(jobs.len() * copies.len());
    for job in &jobs {
        let cmd = &job.command;
        for cc in &copies {
            if args.dry_run {
                let shown: Vec<String> = cmd
                    .iter()
                    .map(|a| match cc {
                        Some((id, _)) => a.replace("{cc}", &id.to_string()),
                        None => a.clone(),
                    })
                    .collect();
                println!("bulksubmit: submit {}", shown.join(" "));
                continue;
            }
            requests.push(job.opts.request(cmd, *cc)?);
        }
    }
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    submit_all(&args, requests)
}

/// Submit `requests` in order, print the ids, and with --wait wait for all.
fn submit_all(args: &Args, requests: Vec<pb::SubmitRequest>) -> anyhow::Result<ExitCode> {
    client::block_on(async {
        let mut inst = client::connect().await?;
        let bar = progress_bar(args.copy.progress, requests.len() as u64, "submitting");
        let mut ids: Vec<JobId> = Vec::new();
        for req in requests {
            let id = submit_one(&mut inst, req).await?;
            args.copy.print_id(&bar, id);
            ids.push(id);
            bar.inc(1);
        }
        bar.finish_and_clear();
        let code = args.copy.wait_all(&mut inst, &ids, 0).await?;
        Ok(ExitCode::from(code.clamp(0, 255) as u8))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn split_of(args: &[&str]) -> Split {
        split(&v(args), &mut |path| {
            Ok(vec![format!("{path}.1"), format!("{path}.2")])
        })
        .unwrap()
    }

    #[test]
    fn splits_lists_and_files() {
        let s = split_of(&["echo", "{}", ":::", "1", "2", "::::", "f", ":::", "x"]);
        assert_eq!(s.template, v(&["echo", "{}"]));
        assert_eq!(s.lists, vec![v(&["1", "2"]), v(&["f.1", "f.2"]), v(&["x"])]);
    }

    fn commands(s: &Split) -> anyhow::Result<Vec<Vec<String>>> {
        Ok(jobs(s, &opts(&[]))?
            .into_iter()
            .map(|j| j.command)
            .collect())
    }

    fn opts(argv: &[&str]) -> JobOpts {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            opts: JobOpts,
        }
        Cli::try_parse_from(std::iter::once("bulksubmit").chain(argv.iter().copied()))
            .unwrap()
            .opts
    }

    #[test]
    fn options_are_filled_too() {
        let s = split_of(&["echo", ":::", "a", "b"]);
        let o = opts(&["--output={}.out", "--job-name=j{seq1}"]);
        let got = jobs(&s, &o).unwrap();
        let spec = |j: &Job| -> serde_json::Value {
            serde_json::from_str(&j.opts.request(&j.command, None).unwrap().jobspec).unwrap()
        };
        let second = spec(&got[1]);
        assert_eq!(second["attributes"]["system"]["job"]["name"], "j2");
        assert_eq!(
            second["attributes"]["system"]["shell"]["options"]["output"]["stdout"]["path"],
            "b.out"
        );
    }

    #[test]
    fn commands_as_the_flux_man_page() {
        let s = split_of(&["echo", "{1}", "{0}", ":::", "1", "2", ":::", "3", "4"]);
        let got = commands(&s).unwrap();
        assert_eq!(
            got,
            vec![
                v(&["echo", "3", "1"]),
                v(&["echo", "4", "1"]),
                v(&["echo", "3", "2"]),
                v(&["echo", "4", "2"])
            ]
        );
    }

    #[test]
    fn inputs_are_appended_without_fields() {
        let s = split_of(&["echo", "{seq}", ":::", "a", "b"]);
        assert_eq!(
            commands(&s).unwrap(),
            vec![v(&["echo", "0", "a"]), v(&["echo", "1", "b"])]
        );
    }

    #[test]
    fn no_command_is_an_error() {
        assert!(split(&v(&[":::", "a"]), &mut |_| Ok(vec![])).is_err());
    }
}

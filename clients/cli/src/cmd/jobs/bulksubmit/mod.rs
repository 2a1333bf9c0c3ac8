//! `fluxgate bulksubmit`: one job per combination of inputs, as
//! flux-bulksubmit(1). Inputs come from `::: A B` lists on the command line,
//! from files after `::::` (one input a line, or split by `--sep`; `-` is
//! stdin), or from stdin when neither is given; several lists combine as a
//! cross product, and a list after `:::+` or `::::+` is linked to the one
//! before it instead (one of its items per item there, cycled).
//! `--define=NAME=CODE` adds the attribute `{.NAME}`, a Python expression
//! of the input (see [`define`]).

pub mod define;
pub mod template;

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::{Context, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;

use crate::client;
use crate::cmd::jobs::submit::copies::{CopyOpts, progress_bar};
use crate::cmd::jobs::submit::{JobOpts, submit_one};

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
    /// Separator of inputs read from files and stdin (default: newline;
    /// `none`: any run of whitespace).
    #[arg(long, value_name = "STRING")]
    sep: Option<String>,
    /// Submit the jobs in a random order.
    #[arg(long)]
    shuffle: bool,
    /// Define a named method for transforming any input, used as `{.NAME}`
    /// or `{0.NAME}`: CODE is a Python expression in which `x` is the input
    /// string, evaluated with python3, e.g. --define=p2='2**int(x)' -n {.p2}.
    /// May be given several times. A list result becomes several arguments.
    #[arg(long = "define", value_name = "NAME=CODE", value_parser = define::parse)]
    define: Vec<define::Define>,
    /// Command template, then `::: INPUTS...` or `:::: FILES...` lists.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// The command template and where its inputs come from.
#[derive(Debug, PartialEq, Eq)]
struct Split {
    template: Vec<String>,
    /// Lists given on the command line, with those linked to them; files
    /// are already read.
    lists: Vec<template::Group>,
}

/// Split `COMMAND ::: A B :::+ C :::: FILE` into the template and the
/// input lists.
fn split(
    args: &[String],
    read: &mut dyn FnMut(&str) -> anyhow::Result<Vec<String>>,
) -> anyhow::Result<Split> {
    let mut template = Vec::new();
    let mut lists: Vec<template::Group> = Vec::new();
    // What the current group is: the template, a ::: list, or :::: files,
    // and whether it is linked to the list before.
    let mut files = false;
    let mut linked = false;
    let mut in_template = true;
    for a in args {
        match a.as_str() {
            ":::" | ":::+" => {
                in_template = false;
                files = false;
                linked = a == ":::+" && !lists.is_empty();
                if linked {
                    if let Some(g) = lists.last_mut() {
                        g.linked.push(Vec::new());
                    }
                } else {
                    lists.push(template::Group::default());
                }
            }
            "::::" | "::::+" => {
                in_template = false;
                files = true;
                linked = a == "::::+" && !lists.is_empty();
            }
            _ if in_template => template.push(a.clone()),
            _ if files => {
                let items = read(a)?;
                match lists.last_mut() {
                    Some(g) if linked => g.linked.push(items),
                    _ => lists.push(template::Group {
                        items,
                        linked: Vec::new(),
                    }),
                }
            }
            _ => {
                if let Some(g) = lists.last_mut() {
                    match g.linked.last_mut() {
                        Some(l) if linked => l.push(a.clone()),
                        _ => g.items.push(a.clone()),
                    }
                }
            }
        }
    }
    if template.is_empty() {
        bail!("no command given before the inputs");
    }
    Ok(Split { template, lists })
}

/// The inputs in `path` (`-` is stdin): one a line, or split by `sep`
/// (`none`: whitespace); empty inputs are skipped.
fn read_inputs(path: &str, sep: Option<&str>) -> anyhow::Result<Vec<String>> {
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read inputs from stdin")?
    } else {
        std::fs::read_to_string(path).with_context(|| path.to_string())?
    };
    Ok(split_inputs(&text, sep))
}

/// `text` cut into inputs as `--sep` says.
fn split_inputs(text: &str, sep: Option<&str>) -> Vec<String> {
    let parts: Vec<&str> = match sep {
        None | Some("\\n") => text.lines().collect(),
        Some("none") => text.split_whitespace().collect(),
        Some(s) => text.split(s).collect(),
    };
    parts
        .into_iter()
        .map(|p| p.trim_end_matches('\n'))
        .filter(|p| !p.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Shuffle `items` (Fisher-Yates) with a seed from the clock and the
/// process id: the order only has to differ from run to run.
fn shuffle<T>(items: &mut [T]) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut state = nanos ^ (u64::from(std::process::id()) << 32) | 1;
    for i in (1..items.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        items.swap(i, (state % (i as u64 + 1)) as usize);
    }
}

/// One job of the bulk: its command line and the options filled for it.
struct Job {
    command: Vec<String>,
    opts: JobOpts,
}

/// What splits one filled command argument into several: flux's marker
/// between the items of a `--define` result that is a list.
const LIST_MARK: &str = "::list::";

/// Each job: the template filled with one combination (with no replacement
/// field for inputs in it or in the options, the inputs are appended, as
/// xargs), and the options that take text filled the same way, each on its
/// own as flux formats them; a filled argument holding [`LIST_MARK`] becomes
/// several.
/// With `--define`, a first pass records which definitions apply to which
/// inputs, python3 evaluates those, and a second pass fills them in.
fn jobs(split: &Split, opts: &JobOpts, defines: &[define::Define]) -> anyhow::Result<Vec<Job>> {
    if defines.is_empty() {
        return fill_jobs(split, opts, &mut |_, _| None);
    }
    let defs = define::by_name(defines);
    let mut wanted = BTreeSet::new();
    fill_jobs(split, opts, &mut |name, input| {
        defs.contains_key(name).then(|| {
            wanted.insert((name.to_string(), input.to_string()));
            String::new()
        })
    })?;
    let values = define::evaluate(&defs, &wanted)?;
    fill_jobs(split, opts, &mut |name, input| values.get(name, input))
}

/// [`jobs`], with `defined` giving the `--define` attributes.
fn fill_jobs(
    split: &Split,
    opts: &JobOpts,
    defined: &mut template::Defined,
) -> anyhow::Result<Vec<Job>> {
    let append = !template::has_input_fields(&split.template)
        && !template::has_input_fields(&opts.fillable_texts());
    template::combinations(&split.lists)
        .into_iter()
        .enumerate()
        .map(|(seq, inputs)| {
            let mut next = 0;
            let mut command = Vec::with_capacity(split.template.len());
            for a in &split.template {
                let filled = template::fill(a, &inputs, seq, &mut next, defined)?;
                command.extend(filled.split(LIST_MARK).map(str::to_string));
            }
            let opts = opts.map_text(|s| template::fill(s, &inputs, seq, &mut 0, defined))?;
            if append {
                command.extend(inputs);
            }
            Ok(Job { command, opts })
        })
        .collect()
}

/// Run `fluxgate bulksubmit`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let sep = args.sep.as_deref();
    let mut split = split(&args.command, &mut |path| read_inputs(path, sep))?;
    if split.lists.is_empty() {
        split.lists.push(template::Group {
            items: read_inputs("-", sep)?,
            linked: Vec::new(),
        });
    }
    let mut jobs = jobs(&split, &args.opts, &args.define)?;
    if args.shuffle {
        shuffle(&mut jobs);
    }
    let copies: Vec<Option<(u32, bool)>> = match args.copy.copies()? {
        Some((set, env)) => set.iter().map(|id| Some((id, env))).collect(),
        None => vec![None],
    };
    let mut requests = Vec::with_capacity(jobs.len() * copies.len());
    for job in &jobs {
        let cmd = &job.command;
        for cc in &copies {
            if args.dry_run {
                // As flux: the options the inputs changed, then the command.
                let shown: Vec<String> = job
                    .opts
                    .changed_from(&args.opts)
                    .into_iter()
                    .chain(cmd.iter().cloned())
                    .map(|a| match cc {
                        Some((id, _)) => a.replace("{cc}", &id.to_string()),
                        None => a,
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
        let one = |items: &[&str]| template::Group {
            items: v(items),
            linked: Vec::new(),
        };
        assert_eq!(
            s.lists,
            vec![one(&["1", "2"]), one(&["f.1", "f.2"]), one(&["x"])]
        );
    }

    #[test]
    fn linked_lists_attach_to_the_list_before() {
        let s = split_of(&[
            "echo", ":::", "1", "2", ":::+", "a", "::::+", "f", ":::", "x",
        ]);
        assert_eq!(s.lists.len(), 2);
        assert_eq!(s.lists[0].items, v(&["1", "2"]));
        assert_eq!(s.lists[0].linked, vec![v(&["a"]), v(&["f.1", "f.2"])]);
        assert_eq!(s.lists[1].items, v(&["x"]));
        // A leading :::+ has nothing to link to: a list of its own.
        let s = split_of(&["echo", ":::+", "1"]);
        assert_eq!(s.lists[0].items, v(&["1"]));
    }

    #[test]
    fn inputs_split_by_lines_or_the_separator() {
        assert_eq!(split_inputs("a b\nc\n\n", None), v(&["a b", "c"]));
        assert_eq!(split_inputs("a b\n c\n", Some("none")), v(&["a", "b", "c"]));
        assert_eq!(split_inputs("a,b,,c\n", Some(",")), v(&["a", "b", "c"]));
    }

    #[test]
    fn shuffle_keeps_every_item() {
        let mut items: Vec<u32> = (0..100).collect();
        shuffle(&mut items);
        let mut sorted = items.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
    }

    fn commands(s: &Split) -> anyhow::Result<Vec<Vec<String>>> {
        Ok(jobs(s, &opts(&[]), &[])?
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
        let got = jobs(&s, &o, &[]).unwrap();
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

    fn def(name: &str, code: &str) -> define::Define {
        define::Define {
            name: name.into(),
            code: code.into(),
        }
    }

    #[test]
    fn definitions_fill_commands_and_options() {
        let s = split_of(&["echo", "{0.p2}", "{0.sq}", ":::", "1", "3"]);
        let o = opts(&["-n", "{.p2}", "--output={.%}.out"]);
        let defs = [def("p2", "2**int(x)"), def("sq", "int(x)*int(x)")];
        let got = jobs(&s, &o, &defs).unwrap();
        let cmds: Vec<_> = got.iter().map(|j| j.command.clone()).collect();
        assert_eq!(cmds, vec![v(&["echo", "2", "1"]), v(&["echo", "8", "9"])]);
        assert_eq!(got[1].opts.changed_from(&o), v(&["-n8", "--output=3.out"]));
    }

    #[test]
    fn list_results_become_several_arguments() {
        let s = split_of(&["echo", "<{.parts}>", "end", ":::", "a,b"]);
        let got = jobs(&s, &opts(&[]), &[def("parts", "x.split(',')")]).unwrap();
        assert_eq!(got[0].command, v(&["echo", "<a", "b>", "end"]));
    }

    #[test]
    fn definitions_are_evaluated_only_where_used() {
        // {0} is not a number, but p2 only applies to input 1.
        let s = split_of(&["echo", "{0}", "{1.p2}", ":::", "x", ":::", "4"]);
        let got = jobs(&s, &opts(&[]), &[def("p2", "2**int(x)")]).unwrap();
        assert_eq!(got[0].command, v(&["echo", "x", "16"]));
        // An unused definition is still compiled, as flux does.
        let err = jobs(&s, &opts(&[]), &[def("p2", "2**int(x)"), def("bad", "2**")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("--define=bad=2**: not a Python expression"),
            "{err}"
        );
    }

    #[test]
    fn no_command_is_an_error() {
        assert!(split(&v(&[":::", "a"]), &mut |_| Ok(vec![])).is_err());
    }
}

//! `fluxgate batch` and `fluxgate alloc`: submit a job that runs a new
//! instance, with a script in it (batch) or a command attached to this
//! terminal (alloc).

use super::*;

/// Run `fluxgate batch`: submit the instance job and print its id. The
/// script is SCRIPT, or stdin without it; `--wrap` makes a /bin/sh script
/// of the arguments (or of stdin), as flux's `batch` does.
pub fn run_batch(args: BatchArgs) -> anyhow::Result<ExitCode> {
    let mut script = args.script.clone();
    if script.first().map(String::as_str) == Some("--") {
        script.remove(0);
    }
    let (text, name, script_args) = match script.split_first() {
        // As flux: the words joined, unquoted, and passed on as arguments.
        Some((first, rest)) if args.wrap => (
            format!("#!/bin/sh\n{}\n", script.join(" ")),
            first.clone(),
            rest.to_vec(),
        ),
        Some((path, rest)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read batch script {path}"))?;
            (text, path.clone(), rest.to_vec())
        }
        None => {
            let text = args
                .stdin_script
                .clone()
                .context("batch script must be provided via stdin or command line")?;
            let text = if args.wrap {
                format!("#!/bin/sh\n{text}")
            } else {
                text
            };
            (text, "batch".to_string(), Vec::new())
        }
    };
    let exe = std::env::current_exe().context("cannot find the fluxgate executable")?;
    // The script travels in the jobspec's files (RFC 37), where rank 0 of
    // the instance reads it: never on a command line every user can read.
    let conf = conf::BatchConfig::from_options(&args.conf)?;
    let mut command = vec![
        exe.to_string_lossy().into_owned(),
        "instance".into(),
        "--script-from-jobspec".into(),
    ];
    if conf.is_some() {
        command.push("--conf-from-jobspec".into());
    }
    command.push("--".into());
    command.extend(script_args);
    let job = InstanceJob {
        name: Some(&name),
        output: Some("flux-{{id}}.out"),
        script: Some(&text),
        interactive: false,
        conf: conf.map(|c| c.fileref()),
    };
    let request = || args.opts.instance_request(&command, &job);
    if args.dry_run {
        // No instance is needed to show what would be submitted.
        println!("{}", request()?.jobspec);
        return Ok(ExitCode::SUCCESS);
    }
    let uri = client::uri()?;
    let req = request()?;
    client::block_on(async {
        let mut inst = client::connect_to(&uri).await?;
        let id = submit_one(&mut inst, req).await?;
        if !args.quiet {
            println!("{}", client::f58(id));
        }
        Ok(ExitCode::SUCCESS)
    })?
}

/// Run `fluxgate alloc`: as flux's, the job starts a child instance and
/// runs CMD (default $SHELL) inside it, on its first node, with the
/// child's URI in its environment; alloc attaches to the job as `run`
/// does (this terminal driving the job's pty when stdin is one, `-o
/// pty.interactive`), and the job's exit code, CMD's, is alloc's.
pub fn run_alloc(args: AllocArgs) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find the fluxgate executable")?;
    let conf = conf::BatchConfig::from_options(&args.conf)?;
    let mut command = vec![
        exe.to_string_lossy().into_owned(),
        "instance".into(),
        "--alloc".into(),
    ];
    if conf.is_some() {
        command.push("--conf-from-jobspec".into());
    }
    command.push("--".into());
    command.extend(args.command.iter().cloned());
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdin());
    // As flux: no default job name, no output file; a terminal only when
    // stdin is one.
    let job = InstanceJob {
        interactive: terminal,
        conf: conf.map(|c| c.fileref()),
        ..InstanceJob::default()
    };
    let mut req = args.opts.instance_request(&command, &job)?;
    // This stdin goes to the initial program, task 0.
    req.jobspec = with_input_service(&req.jobspec)?;
    if args.dry_run {
        println!("{}", req.jobspec);
        return Ok(ExitCode::SUCCESS);
    }
    let stdin = attach::StdinTo {
        ranks: Ranks("0".into()),
        quiet: false,
        terminal,
    };
    client::block_on(async {
        let mut inst = client::connect().await?;
        let id = submit_one(&mut inst, req).await?;
        attach::attach(&mut inst, id, Some(stdin)).await
    })?
}

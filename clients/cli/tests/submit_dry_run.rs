//! `fluxgate submit --dry-run` (and run, batch, alloc): the jobspec is
//! printed and nothing is contacted.

use std::process::{Command, Output};

use serde_json::Value;

/// Run `fluxgate submit --dry-run ARGS` with an instance URI nobody listens on.
fn dry_run(args: &[&str]) -> Output {
    dry_run_of("submit", args)
}

/// Run `fluxgate CMD --dry-run ARGS` the same way.
fn dry_run_of(cmd: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fluxgate"))
        .arg(cmd)
        .arg("--dry-run")
        .args(args)
        // A closed port: contacting it would fail the command.
        .env("FLUXGATE_URI", "http://127.0.0.1:1")
        .output()
        .unwrap()
}

fn jobspecs(out: &Output) -> Vec<Value> {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn prints_the_jobspec_and_exits_0() {
    let out = dry_run(&["-N2", "-n4", "--job-name=probe", "hostname", "-s"]);
    let specs = jobspecs(&out);
    assert_eq!(specs.len(), 1);
    let spec = &specs[0];
    assert_eq!(spec["version"], 1);
    assert_eq!(
        spec["tasks"][0]["command"],
        serde_json::json!(["hostname", "-s"])
    );
    assert_eq!(spec["attributes"]["system"]["job"]["name"], "probe");
    assert_eq!(spec["resources"][0]["type"], "node");
    assert_eq!(spec["resources"][0]["count"], 2);
}

#[test]
fn one_jobspec_per_copy_with_cc_substituted() {
    let out = dry_run(&["--cc=1-3", "echo", "{cc}"]);
    let specs = jobspecs(&out);
    let args: Vec<Value> = specs
        .iter()
        .map(|s| s["tasks"][0]["command"][1].clone())
        .collect();
    assert_eq!(args, vec!["1", "2", "3"]);
    assert_eq!(
        specs[0]["attributes"]["system"]["environment"]["FLUX_JOB_CC"],
        "1"
    );
}

#[test]
fn a_bad_option_fails_before_anything_is_sent() {
    let out = dry_run(&["-t", "nonsense", "true"]);
    assert!(!out.status.success());
}

#[test]
fn run_batch_and_alloc_print_their_jobspec_too() {
    let run = jobspecs(&dry_run_of("run", &["-n2", "true"]));
    assert_eq!(run[0]["tasks"][0]["command"], serde_json::json!(["true"]));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("job.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n# flux: --job-name=scripted\nhostname\n",
    )
    .unwrap();
    let batch = jobspecs(&dry_run_of("batch", &["-N2", script.to_str().unwrap()]));
    assert_eq!(batch[0]["resources"][0]["count"], 2);
    assert_eq!(batch[0]["attributes"]["system"]["job"]["name"], "scripted");
    // flux's nested jobspec: one task a slot, one broker a node.
    assert_eq!(
        batch[0]["tasks"][0]["count"],
        serde_json::json!({"per_slot": 1})
    );
    let sys = &batch[0]["attributes"]["system"];
    assert_eq!(
        sys["shell"]["options"]["per-resource"],
        serde_json::json!({"type": "node"}),
        "one broker a node"
    );
    assert_eq!(
        sys["files"]["script"]["data"],
        "#!/bin/sh\n# flux: --job-name=scripted\nhostname\n"
    );
    assert_eq!(
        sys["shell"]["options"]["output"]["stdout"]["path"],
        "flux-{{id}}.out"
    );
    // The script is in the files, not on the command line.
    let command = batch[0]["tasks"][0]["command"].to_string();
    assert!(!command.contains("hostname"), "{command}");
    // alloc: no default name and no output file, as flux.
    let alloc = jobspecs(&dry_run_of("alloc", &["-N1"]));
    assert_eq!(alloc[0]["attributes"]["system"].get("job"), None);
    assert_eq!(
        alloc[0]["attributes"]["system"]["shell"]["options"].get("output"),
        None
    );
}

#[test]
fn batch_reads_its_script_from_stdin() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let run = |args: &[&str], stdin: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fluxgate"))
            .arg("batch")
            .arg("--dry-run")
            .args(args)
            .env("FLUXGATE_URI", "http://127.0.0.1:1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(&["-N1"], "#!/bin/sh\n# flux: -t 5m\necho from-stdin\n");
    assert!(out.status.success(), "{out:?}");
    let v = &jobspecs(&out)[0];
    let sys = &v["attributes"]["system"];
    assert_eq!(sys["job"]["name"], "batch");
    assert_eq!(sys["duration"], 300.0, "a directive read from stdin");
    assert_eq!(
        sys["files"]["script"]["data"],
        "#!/bin/sh\n# flux: -t 5m\necho from-stdin\n"
    );
    // --wrap with stdin: the text under a /bin/sh line.
    let out = run(&["-N1", "--wrap"], "hostname\n");
    assert!(out.status.success(), "{out:?}");
    let v = &jobspecs(&out)[0];
    assert_eq!(
        v["attributes"]["system"]["files"]["script"]["data"],
        "#!/bin/sh\nhostname\n"
    );
    // --wrap with arguments: the first word names the job.
    let out = run(&["-N1", "--wrap", "echo", "hi"], "");
    let v = &jobspecs(&out)[0];
    assert_eq!(v["attributes"]["system"]["job"]["name"], "echo");
    assert_eq!(
        v["attributes"]["system"]["files"]["script"]["data"],
        "#!/bin/sh\necho hi\n"
    );
    // Not a script: flux's words.
    let out = run(&["-N1"], "echo no shebang\n");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("batch does not appear to start with '#!'"),
        "{out:?}"
    );
}

#[test]
fn conf_goes_in_the_files_as_flux_puts_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("job.sh");
    std::fs::write(&script, "#!/bin/sh\ntrue\n").unwrap();
    let out = dry_run_of(
        "batch",
        &[
            "-N1",
            "--conf=resource.noverify=true",
            "--conf=tbon.fanout=4",
            script.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let v = &jobspecs(&out)[0];
    let files = &v["attributes"]["system"]["files"];
    let names: Vec<&String> = files.as_object().unwrap().keys().collect();
    assert_eq!(names, ["conf.json", "script"]);
    assert_eq!(
        files["conf.json"],
        serde_json::json!({"mode": 0o100600, "data": {"resource": {"noverify": true}, "tbon": {"fanout": 4}}})
    );
    let command = v["tasks"][0]["command"].to_string();
    assert!(command.contains("--conf-from-jobspec"), "{command}");
    // Key order as flux writes it: the nested options after the output
    // ones and before what apply_options adds (rlimit, -o).
    let opts: Vec<&String> = v["attributes"]["system"]["shell"]["options"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        opts,
        ["output", "per-resource", "mpi", "exit-timeout", "rlimit"],
        "{opts:?}"
    );
    let alloc = dry_run_of("alloc", &["-N1", "--conf=a.b=1"]);
    assert!(alloc.status.success(), "{alloc:?}");
    assert_eq!(
        jobspecs(&alloc)[0]["attributes"]["system"]["files"]["conf.json"]["data"],
        serde_json::json!({"a": {"b": 1}})
    );
    let bad = dry_run_of("alloc", &["-N1", "--conf=nosuch"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--conf: named config 'nosuch' not found"),
        "{bad:?}"
    );
}

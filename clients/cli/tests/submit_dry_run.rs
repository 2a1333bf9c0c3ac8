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
    assert_eq!(
        batch[0]["tasks"][0]["count"]["total"], 2,
        "one broker a node"
    );
    let alloc = jobspecs(&dry_run_of("alloc", &["-N1"]));
    assert_eq!(alloc[0]["attributes"]["system"]["job"]["name"], "alloc");
}

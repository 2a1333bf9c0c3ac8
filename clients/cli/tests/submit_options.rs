//! flux's submission options that become shell options and attributes
//! (`--signal`, `--unbuffered`, `--label-io`, `--env-file`, `--rlimit`,
//! `--cores`, `--tasks-per-node`, `--tasks-per-core`, `--gpus-per-node`,
//! `--begin-time`, `--add-file`, `--requires`): the jobspec `--dry-run` prints, key for
//! key and in key order, as flux-core 0.88 writes it, and flux's words for
//! values it refuses. One instance test runs `run --label-io`.

mod common;

use std::process::{Command, Output};

use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
use serde_json::{Value, json};

/// `fluxgate CMD --dry-run` with a fixed environment and directory, and
/// `ARGS`, with an instance URI nobody listens on.
fn dry_run_of(cmd: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fluxgate"))
        .arg(cmd)
        .arg("--dry-run")
        .args(["--env=-*", "--cwd=/w"])
        .args(args)
        .env("FLUXGATE_URI", "http://127.0.0.1:1")
        .output()
        .unwrap()
}

/// The one jobspec `submit --dry-run ARGS` prints, as text (key order kept).
fn spec_text(args: &[&str]) -> String {
    let out = dry_run_of("submit", args);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The same, parsed.
fn spec(args: &[&str]) -> Value {
    serde_json::from_str(&spec_text(args)).unwrap()
}

/// The shell options of `submit --dry-run --rlimit=-* ARGS`.
fn shell_options(args: &[&str]) -> Value {
    let mut all = vec!["--rlimit=-*"];
    all.extend_from_slice(args);
    spec(&all)["attributes"]["system"]["shell"]["options"].clone()
}

/// `submit --dry-run ARGS` fails, saying `words`.
fn refused(args: &[&str], words: &str) {
    let out = dry_run_of("submit", args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} was accepted");
    assert!(err.contains(words), "{args:?}: {err:?} lacks {words:?}");
    assert!(out.stdout.is_empty(), "{args:?} printed a jobspec");
}

/// A one-slot, one-core jobspec of `true` in /w as flux writes it, with
/// `system` after `duration`, `environment` and `cwd`.
fn flux_spec(system_tail: Value) -> String {
    let mut system = json!({"duration": 0, "environment": {}, "cwd": "/w"});
    for (k, v) in system_tail.as_object().unwrap() {
        system[k] = v.clone();
    }
    json!({
        "resources": [{"type": "slot", "count": 1,
            "with": [{"type": "core", "count": 1}], "label": "task"}],
        "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": system},
        "version": 1
    })
    .to_string()
}

#[test]
fn signal_is_flux_parse_signal_option() {
    let sig = |arg: &str| shell_options(&[arg, "true"])["signal"].clone();
    assert_eq!(
        sig("--signal=SIGUSR2@2m").to_string(),
        r#"{"signum":12,"timeleft":120.0}"#
    );
    // Default signal SIGUSR1, default time an integer 60; a TIME is a float.
    assert_eq!(
        sig("--signal=@30").to_string(),
        r#"{"signum":10,"timeleft":30.0}"#
    );
    assert_eq!(
        sig("--signal=TERM").to_string(),
        r#"{"signum":15,"timeleft":60}"#
    );
    assert_eq!(
        sig("--signal=9@1.5").to_string(),
        r#"{"signum":9,"timeleft":1.5}"#
    );
    // The value may follow as the next word, as argparse takes it.
    let spaced = shell_options(&["--signal", "USR1@1h", "true"]);
    assert_eq!(
        spaced["signal"].to_string(),
        r#"{"signum":10,"timeleft":3600.0}"#
    );
    // An empty value asks for nothing, as in flux.
    assert_eq!(shell_options(&["--signal=", "true"]), Value::Null);
    // The whole jobspec, in flux's key order.
    assert_eq!(
        spec_text(&["--rlimit=-*", "--signal=USR2@2m", "true"]),
        flux_spec(json!({"shell": {"options":
            {"signal": {"signum": 12, "timeleft": 120.0}}}}))
    );
}

#[test]
fn bad_signals_get_flux_words() {
    refused(
        &["--signal=FOO", "true"],
        "--signal=FOO: signal 'FOO' is invalid",
    );
    refused(&["--signal=0", "true"], "--signal=0: signal must be > 0");
    refused(
        &["--signal=-3@1", "true"],
        "--signal=-3@1: signal must be > 0",
    );
    refused(
        &["--signal=USR1@soon", "true"],
        "--signal=USR1@soon: invalid Flux standard duration",
    );
}

#[test]
fn unbuffered_is_flux_unbuffered_setter() {
    assert_eq!(
        spec_text(&["--rlimit=-*", "--unbuffered", "true"]),
        flux_spec(json!({"shell": {"options": {
            "output": {
                "stdout": {"buffer": {"type": "none"}},
                "stderr": {"buffer": {"type": "none"}},
                "batch-timeout": 0.05
            },
            "input": {"batch-timeout": 0.0}
        }}}))
    );
    assert_eq!(
        shell_options(&["-u", "true"]),
        shell_options(&["--unbuffered", "true"])
    );
}

#[test]
fn label_io_labels_only_output_to_a_file() {
    // Without --output, flux writes nothing (the label is attach's).
    assert_eq!(shell_options(&["--label-io", "true"]), Value::Null);
    let opts = shell_options(&["-l", "--output=o.{{id}}", "--error=e.txt", "true"]);
    assert_eq!(
        opts["output"].to_string(),
        json!({
            "stdout": {"type": "file", "path": "o.{{id}}", "label": true},
            "stderr": {"type": "file", "path": "e.txt", "label": true}
        })
        .to_string()
    );
    // With --unbuffered too: the buffer after the label, as flux sets them.
    let opts = shell_options(&["-l", "-u", "--output=o.txt", "true"]);
    assert_eq!(
        opts.to_string(),
        json!({
            "output": {
                "stdout": {"type": "file", "path": "o.txt", "label": true,
                    "buffer": {"type": "none"}},
                "stderr": {"buffer": {"type": "none"}},
                "batch-timeout": 0.05
            },
            "input": {"batch-timeout": 0.0}
        })
        .to_string()
    );
}

#[test]
fn env_file_rules_apply_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("env");
    std::fs::write(&file, "  A=1\nB=$A/x\n\nHOME\n-DROP*\n").unwrap();
    let f = file.to_str().unwrap();
    let env = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_fluxgate"))
            .args(["submit", "--dry-run", "--env=-*"])
            .args(args)
            .arg("true")
            .env("FLUXGATE_URI", "http://127.0.0.1:1")
            .env("HOME", "/home/u")
            .env("DROP_ME", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["attributes"]["system"]["environment"].clone()
    };
    let want = json!({"A": "1", "B": "1/x", "HOME": "/home/u"});
    assert_eq!(env(&[&format!("--env-file={f}")]), want);
    assert_eq!(env(&[&format!("--env=^{f}")]), want);
    // Later --env rules see what the file set; the file's -DROP* removes.
    assert_eq!(
        env(&["--env=DROP_X=y", &format!("--env=^{f}"), "--env=C=$B"]),
        json!({"A": "1", "B": "1/x", "C": "1/x", "HOME": "/home/u"})
    );
    // Rules apply in command-line order, whichever option gave them.
    assert_eq!(env(&[&format!("--env-file={f}"), "--env=-*"]), json!({}));
    assert_eq!(
        env(&["--env=X=1", "--env-remove=X", "--env=Y=2"]),
        json!({"Y": "2"})
    );
    assert_eq!(env(&["--env-remove=X", "--env=X=1"]), json!({"X": "1"}));
    // A variable the job already has is not copied over it.
    assert_eq!(
        env(&["--env=HOME=/else", &format!("--env-file={f}")])["HOME"],
        "/else"
    );
    refused(
        &["--env-file=/nonexistent/env", "true"],
        "--env: [Errno 2] No such file or directory: '/nonexistent/env'",
    );
    refused(
        &["--env=^/nonexistent/env", "true"],
        "--env: [Errno 2] No such file or directory: '/nonexistent/env'",
    );
}

/// This process's soft limit as flux writes it (-1 unlimited).
fn soft(res: Resource) -> Value {
    let (soft, _) = getrlimit(res).unwrap();
    if soft == RLIM_INFINITY {
        json!(-1)
    } else {
        json!(soft)
    }
}

#[test]
fn rlimits_are_the_submitters_soft_limits() {
    let rlimit = |args: &[&str]| {
        let mut all = args.to_vec();
        all.push("true");
        spec(&all)["attributes"]["system"]["shell"]["options"]["rlimit"].clone()
    };
    // flux's default: every limit but memlock, ofile, msgqueue, nice,
    // rtprio, rttime, sigpending, in Python's order.
    let all = rlimit(&[]);
    let names: Vec<&str> = all
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "cpu", "fsize", "data", "stack", "core", "nofile", "as", "rss", "nproc"
        ]
    );
    assert_eq!(all["nofile"], soft(Resource::RLIMIT_NOFILE));
    assert_eq!(all["stack"], soft(Resource::RLIMIT_STACK));
    assert_eq!(all["core"], soft(Resource::RLIMIT_CORE));
    assert_eq!(
        rlimit(&["--rlimit=-*,core"]),
        json!({"core": soft(Resource::RLIMIT_CORE)})
    );
    assert_eq!(
        rlimit(&["--rlimit=-*", "--rlimit=core=16,nofile=unlimited"]),
        json!({"core": 16, "nofile": -1})
    );
    assert_eq!(
        rlimit(&["--rlimit=-*", "--rlimit=memlock"]),
        json!({"memlock": soft(Resource::RLIMIT_MEMLOCK)})
    );
    let core16 = rlimit(&["--rlimit=core=16"]);
    assert_eq!(core16["core"], 16);
    assert_eq!(core16.as_object().unwrap().len(), 9);
    // Nothing propagated: no option at all, as flux.
    assert_eq!(shell_options(&["true"]), Value::Null);
    // The limits come after the output options, before -o ones.
    let opts = spec(&["--rlimit=-*,core=1", "-u", "-o", "verbose", "true"]);
    let keys: Vec<String> = opts["attributes"]["system"]["shell"]["options"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["output", "input", "rlimit", "verbose"]);
}

#[test]
fn bad_rlimits_get_flux_words() {
    refused(
        &["--rlimit=foo", "true"],
        "No corresponding rlimit matching \"foo\"",
    );
    refused(&["--rlimit=bogus=1", "true"], "Invalid rlimit \"bogus\"");
    refused(&["--rlimit=core=x", "true"], "Invalid value in core=x");
}

#[test]
fn per_resource_shapes_are_flux_per_resource() {
    let v = spec(&[
        "--rlimit=-*",
        "-N2",
        "--tasks-per-node=2",
        "--gpus-per-node=1",
        "true",
    ]);
    assert_eq!(
        v["resources"].to_string(),
        json!([{"type": "node", "count": 2, "exclusive": true, "with": [
            {"type": "slot", "count": 1, "with": [
                {"type": "core", "count": 1}, {"type": "gpu", "count": 1}
            ], "label": "task"}
        ]}])
        .to_string()
    );
    assert_eq!(v["tasks"][0]["count"], json!({"per_slot": 1}));
    // per-resource is set before the environment, as flux's constructor does.
    let system: Vec<String> = v["attributes"]["system"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(system, ["duration", "shell", "environment", "cwd"]);
    assert_eq!(
        v["attributes"]["system"]["shell"]["options"]["per-resource"],
        json!({"type": "node", "count": 2})
    );

    let v = spec(&["--rlimit=-*", "--cores=4", "--tasks-per-core=2", "true"]);
    assert_eq!(
        v["resources"],
        json!([{"type": "slot", "count": 4, "with": [{"type": "core", "count": 1}],
            "label": "task"}])
    );
    assert_eq!(
        v["attributes"]["system"]["shell"]["options"]["per-resource"],
        json!({"type": "core", "count": 2})
    );

    // -N with --cores: cores spread over the nodes, not exclusive.
    let v = spec(&["--rlimit=-*", "-N2", "--cores=8", "true"]);
    assert_eq!(
        v["resources"],
        json!([{"type": "node", "count": 2, "with": [{"type": "slot", "count": 1,
            "with": [{"type": "core", "count": 4}], "label": "task"}]}])
    );
    assert_eq!(v["attributes"]["system"].get("shell"), None);
}

#[test]
fn bad_per_resource_requests_get_flux_words() {
    refused(
        &["-N1", "--tasks-per-node=1", "--tasks-per-core=1", "true"],
        "Do not specify both the number of tasks per node and per core",
    );
    refused(
        &["-N1", "--tasks-per-node=0", "true"],
        "--tasks-per-node must be >= 1",
    );
    refused(
        &["--cores=2", "--tasks-per-core=0", "true"],
        "--tasks-per-core must be >= 1",
    );
    refused(
        &["--gpus-per-node=1", "--cores=2", "true"],
        "--gpus-per-node requires --nodes",
    );
    refused(
        &["-n2", "--cores=2", "true"],
        "Per-resource options can't be used with per-task options. (See --help for details)",
    );
    refused(
        &["--tasks-per-node=2", "true"],
        "must specify node or core count with per_resource",
    );
    refused(
        &["-N2", "--cores=3", "true"],
        "number of cores must be evenly divisible by node count",
    );
    refused(
        &["-N4", "--cores=2", "true"],
        "number of cores cannot be less than nnodes",
    );
    refused(&["--cores=0", "true"], "ncores must be an integer >= 1");
}

#[test]
fn begin_time_is_a_begin_time_dependency() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let v = spec(&["--dependency=afterok:fA", "--begin-time=+1h", "true"]);
    let deps = v["attributes"]["system"]["dependencies"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(deps[0], json!({"scheme": "afterok", "value": "fA"}));
    assert_eq!(deps[1]["scheme"], "begin-time");
    let at: f64 = deps[1]["value"].as_str().unwrap().parse().unwrap();
    assert!(
        (at - now - 3600.0).abs() < 600.0,
        "{at} is not an hour from {now}"
    );
    let v = spec(&["--begin-time=2030-01-02T03:04:05Z", "true"]);
    assert_eq!(
        v["attributes"]["system"]["dependencies"],
        json!([{"scheme": "begin-time", "value": "1893553445.0"}])
    );
    refused(
        &["--begin-time=whenever", "true"],
        "Invalid datetime: \"whenever\"",
    );
}

#[test]
fn add_file_puts_rfc37_files_in_the_jobspec() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.txt");
    std::fs::write(&path, "hello\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let bin = dir.path().join("blob");
    std::fs::write(&bin, [0xff, 0x00, 0x41]).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o600)).unwrap();
    let p = path.to_str().unwrap();
    let v = spec(&[
        "--rlimit=-*",
        &format!("--add-file={p}"),
        &format!("--add-file=named={p}"),
        "--add-file=run.sh:0755=#!/bin/sh\\necho hi\\n",
        &format!("--add-file=b={}", bin.to_str().unwrap()),
        "true",
    ]);
    assert_eq!(
        v["attributes"]["system"]["files"].to_string(),
        json!({
            "data.txt": {"mode": 0o100640, "size": 6, "data": "hello\n", "encoding": "utf-8"},
            "named": {"mode": 0o100640, "size": 6, "data": "hello\n", "encoding": "utf-8"},
            "run.sh": {"mode": 0o100755, "data": "#!/bin/sh\necho hi\n", "encoding": "utf-8"},
            "b": {"mode": 0o100600, "size": 3, "data": "/wBB", "encoding": "base64"}
        })
        .to_string()
    );
    // files come last, after -S attributes.
    let v = spec(&["--add-file=x=a\\n", "-S", "foo=1", "true"]);
    let keys: Vec<&String> = v["attributes"]["system"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys.last().map(|k| k.as_str()), Some("files"));
    refused(
        &["--add-file=/nonexistent/f", "true"],
        "--add-file=/nonexistent/f: [Errno 2] No such file or directory: '/nonexistent/f'",
    );
    refused(
        &["--add-file=a\\nb", "true"],
        "--add-file: file name missing",
    );
}

#[test]
fn run_batch_and_alloc_take_the_options_too() {
    for (cmd, command) in [("run", Some("true")), ("alloc", None)] {
        let mut args = vec!["--signal=USR1@5m", "--rlimit=-*,core=0", "-u", "-N1"];
        args.extend(command);
        let out = dry_run_of(cmd, &args);
        assert!(out.status.success(), "{cmd}: {out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let opts = &v["attributes"]["system"]["shell"]["options"];
        assert_eq!(
            opts["signal"],
            json!({"signum": 10, "timeleft": 300.0}),
            "{cmd}"
        );
        assert_eq!(opts["rlimit"], json!({"core": 0}), "{cmd}");
        assert_eq!(opts["output"]["stdout"]["buffer"]["type"], "none", "{cmd}");
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("job.sh");
    std::fs::write(&script, "#!/bin/sh\n# flux: --signal=TERM@1m\nhostname\n").unwrap();
    let out = dry_run_of("batch", &["-N1", script.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["attributes"]["system"]["shell"]["options"]["signal"],
        json!({"signum": 15, "timeleft": 60.0})
    );
}

#[test]
fn requires_is_an_rfc35_query() {
    let constraints = |cmd: &str, args: &[&str]| {
        let out = dry_run_of(cmd, args);
        assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["attributes"]["system"]["constraints"].clone()
    };
    let want = json!({"and": [
        {"hostlist": ["node[1-4]"]},
        {"or": [{"properties": ["gpu"]}, {"not": [{"properties": ["slow"]}]}]}
    ]});
    let q = "--requires=host:node[1-4] and (gpu or -slow)";
    assert_eq!(constraints("submit", &[q, "true"]), want);
    assert_eq!(constraints("run", &[q, "true"]), want);
    assert_eq!(constraints("alloc", &["-N1", q]), want);
    assert_eq!(constraints("batch", &["-N1", q, "--wrap", "true"]), want);
    // Two options are one query joined by a space.
    assert_eq!(
        constraints("submit", &["--requires=ssd", "--requires=^slow", "true"]),
        json!({"properties": ["ssd", "^slow"]})
    );
    refused(
        &["--requires=foo and", "true"],
        "--requires='foo and': Unexpected end of input in 'foo and'",
    );
    refused(
        &["--requires=(a or b", "true"],
        "--requires='(a or b': Unclosed parenthesis in position 0",
    );
}

#[test]
fn run_label_io_prefixes_each_task_rank() {
    let out = common::in_instance(
        "echo == labelled; $F run -n2 --label-io sh -c 'echo out-$FLUX_TASK_RANK' | sort; \
         echo == plain; $F run -n1 echo plain",
    );
    let stdout = common::text(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        common::section(&stdout, "labelled"),
        ["0: out-0", "1: out-1"]
    );
    assert_eq!(common::section(&stdout, "plain"), ["plain"]);
}

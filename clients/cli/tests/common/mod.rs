//! A real instance for the CLI's system tests: each runs a script under
//! `fluxgate start --size 2` (the job manager and exec binaries must sit
//! beside the CLI binary: `cargo build --workspace`).

// Each test file uses a part of it.
#![allow(dead_code, unused_imports)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use fluxgate_integration_tests::exits_within_blocking;

/// The CLI under test.
pub fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fluxgate"))
}

/// Fail with a clear message when the services were not built.
pub fn require_services() {
    let dir = cli().parent().expect("bin dir").to_path_buf();
    for b in ["fluxgate-job-manager", "fluxgate-exec"] {
        assert!(
            dir.join(b).is_file(),
            "{b} is missing from {}: run `cargo build --workspace` first",
            dir.display()
        );
    }
}

/// Run `script` (sh) inside a 2-node instance; `$F` is the CLI and `env`
/// hands the hostile strings to the script without quoting trouble.
pub fn in_instance_with(script: &str, env: &[(&str, String)]) -> Output {
    require_services();
    // In a directory of its own: batch jobs write their output files
    // (`flux-{{id}}.out`) where they were submitted.
    let cwd = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(cli());
    cmd.current_dir(cwd.path());
    cmd.args([
        "start",
        "--size",
        "2",
        "--kill-timeout",
        "1",
        "--",
        "sh",
        "-c",
        script,
    ])
    .env("F", cli())
    .env("LC_ALL", "C.UTF-8")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn fluxgate start");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    // The guard kills the whole group if the run hangs or the test panics.
    let mut run = Group {
        child: Some(child),
        grace: Duration::from_secs(5),
    };
    let c = run.child.as_mut().expect("child");
    let status = exits_within_blocking(c, Duration::from_secs(120), "fluxgate start");
    run.child = None;
    Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    }
}

pub use fluxgate_integration_tests::command::Group;
pub use fluxgate_integration_tests::text;

/// The lines a script printed after its `== NAME` marker, up to the next
/// marker; none when the marker is missing.
pub fn section(stdout: &str, name: &str) -> Vec<String> {
    stdout
        .split(&format!("== {name}\n"))
        .nth(1)
        .unwrap_or("")
        .lines()
        .take_while(|l| !l.starts_with("== "))
        .map(str::to_string)
        .collect()
}

/// Run `script` (sh) inside a 2-node instance; `$F` is the CLI.
pub fn in_instance(script: &str) -> Output {
    in_instance_with(script, &[])
}

//! `fluxgate health` against the real job manager and exec binaries (they
//! must sit beside the CLI binary: `cargo build --workspace`), and both
//! services ending with status 0 on SIGTERM, as container runtimes expect.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use fluxgate_integration_tests::{exits_within_blocking, text};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn bin(name: &str) -> PathBuf {
    let cli = PathBuf::from(env!("CARGO_BIN_EXE_fluxgate"));
    let path = cli.parent().expect("bin dir").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace` first",
        path.display()
    );
    path
}

/// A service process, killed if the test fails before stopping it.
struct Service(Option<Child>);

impl Service {
    /// Spawn and read the address it prints on its first line.
    fn start(cmd: &mut Command) -> (Service, String) {
        let mut child = cmd
            .env("FLUXGATE_LOG", "warn")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn service");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read address");
        assert!(line.starts_with("http://"), "no address: {line:?}");
        (Service(Some(child)), line.trim().to_string())
    }

    /// SIGTERM and the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        let mut child = self.0.take().expect("running");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
        exits_within_blocking(&mut child, Duration::from_secs(30), "SIGTERM")
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn health(args: &[&str]) -> Output {
    Command::new(bin("fluxgate"))
        .arg("health")
        .args(args)
        .env_remove("FLUXGATE_URI")
        .output()
        .expect("run fluxgate health")
}

#[test]
fn health_answers_for_both_services_and_sigterm_exits_zero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (jm, uri) = Service::start(
        Command::new(bin("fluxgate-job-manager"))
            .args(["--listen", "127.0.0.1:0", "--size", "1", "--statedir"])
            .arg(dir.path()),
    );
    let (exec, exec_uri) = Service::start(Command::new(bin("fluxgate-exec")).args([
        "--job-manager",
        &uri,
        "--hostname",
        "node0",
        "--cores-count",
        "1",
    ]));

    let out = health(&[&uri]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "SERVING\n");

    let out = health(&["--service", "fluxgate.v1.JobManager", "-q", &uri]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");

    // Without a scheme, as compose and Kubernetes probes write addresses.
    let bare = exec_uri.trim_start_matches("http://");
    let out = health(&["--service", "fluxgate.v1.Exec", bare]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // An exec service says how it contains jobs (a cgroup per job as
    // root on this machine, process groups where none can be written).
    let said = text(&out.stdout);
    let mode = said
        .lines()
        .find_map(|l| l.strip_prefix("containment: "))
        .unwrap_or_else(|| panic!("no containment in {said:?}"));
    assert!(["v1", "v2", "off"].contains(&mode), "{said}");

    let out = health(&["--service", "fluxgate.v1.Nope", &uri]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("unknown service"),
        "{}",
        text(&out.stderr)
    );

    // FLUXGATE_URI is the default address.
    let out = Command::new(bin("fluxgate"))
        .arg("health")
        .env("FLUXGATE_URI", &uri)
        .output()
        .expect("run fluxgate health");
    assert!(out.status.success(), "{}", text(&out.stderr));

    assert_eq!(exec.terminate().code(), Some(0), "exec after SIGTERM");
    assert_eq!(jm.terminate().code(), Some(0), "job manager after SIGTERM");

    let out = health(&["--timeout", "2", &uri]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("cannot connect"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn without_an_address_or_uri_it_says_what_to_set() {
    let out = health(&[]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("FLUXGATE_URI"),
        "{}",
        text(&out.stderr)
    );
}

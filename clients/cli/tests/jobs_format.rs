//! `fluxgate jobs -o` formats against a real instance (`fluxgate start
//! --size 2`; the job manager and exec binaries must sit beside the CLI
//! binary: `cargo build --workspace`), compared with what flux-jobs(1)
//! prints for the same jobs.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fluxgate"))
}

fn require_services() {
    let dir = cli().parent().expect("bin dir").to_path_buf();
    for b in ["fluxgate-job-manager", "fluxgate-exec"] {
        assert!(
            dir.join(b).is_file(),
            "{b} is missing from {}: run `cargo build --workspace` first",
            dir.display()
        );
    }
}

/// A `fluxgate start` run; its process group is killed if the test fails.
struct Run {
    child: Option<Child>,
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let pg = Pid::from_raw(c.id() as i32);
            let _ = killpg(pg, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = killpg(pg, Signal::SIGKILL);
            let _ = c.wait();
        }
    }
}

/// Run `script` (sh) inside a 2-node instance; `$F` is the CLI.
fn in_instance(script: &str) -> Output {
    use std::io::Read;
    require_services();
    let mut child = Command::new(cli())
        .args([
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
        .process_group(0)
        .spawn()
        .expect("spawn fluxgate start");
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
    let mut run = Run { child: Some(child) };
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        let c = run.child.as_mut().expect("child");
        if let Some(st) = c.try_wait().expect("try_wait") {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "fluxgate start did not finish in 120 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    run.child = None;
    Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn jobs_formats_as_flux_jobs() {
    let out = in_instance(
        r#"a=$($F submit true); b=$($F submit false);
           $F job wait-event -q $a clean; $F job wait-event -q $b clean;
           echo "ids $a $b"
           echo "== f58"; $F jobs -a -o '{id.f58} {result}'
           echo "== long"; $F jobs -a -o long
           echo "== deps"; $F jobs -a -o deps
           echo "== endreason"; $F jobs -a -o endreason
           echo "== stats"; $F jobs --stats-only; echo "rc=$?"
           echo "== bad"; $F jobs -a -o '{nosuch}'; echo "rc=$?""#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let section = |name: &str| -> Vec<String> {
        stdout
            .split(&format!("== {name}\n"))
            .nth(1)
            .unwrap_or("")
            .lines()
            .take_while(|l| !l.starts_with("== "))
            .map(str::to_string)
            .collect()
    };
    let ids: Vec<&str> = stdout
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("ids "))
        .map(|l| l.split(' ').collect())
        .unwrap_or_default();
    assert_eq!(ids.len(), 2, "{stdout} {stderr}");
    let (a, b) = (ids[0], ids[1]);
    // Inactive jobs are listed most recent first, as job-list orders them.
    assert_eq!(
        section("f58"),
        [
            "JOBID RESULT".to_string(),
            format!("{b} FAILED"),
            format!("{a} COMPLETED")
        ]
    );

    let long = section("long");
    assert_eq!(
        long[0],
        "       JOBID USER     NAME          STATUS NTASKS NNODES     T_SUBMIT  T_REMAINING     TIME INFO"
    );
    assert!(long[1].starts_with(&format!("{b:>12} ")), "{long:?}");
    assert!(
        long[1].contains(" false         FAILED      1      1 "),
        "{long:?}"
    );
    assert!(
        long[2].contains(" true       COMPLETED      1      1 "),
        "{long:?}"
    );

    let deps = section("deps");
    assert_eq!(
        deps[0],
        "       JOBID NAME       URG PRI          STATE    DEPENDENCIES"
    );
    assert!(
        deps[1].starts_with(&format!("{b:>12} false      16  ")),
        "{deps:?}"
    );
    assert!(deps[1].ends_with(" INACTIVE "), "{deps:?}");

    let end = section("endreason");
    assert_eq!(
        end[0],
        "       JOBID USER     NAME       ST   T_INACTIVE INACTIVE-REASON"
    );
    assert!(
        end[1].contains(" false       F ") && end[1].ends_with(" Exit 1"),
        "{end:?}"
    );
    assert!(
        end[2].contains(" true       CD ") && end[2].ends_with(" Exit 0"),
        "{end:?}"
    );

    // No job is active: flux exits 1 so `while flux jobs --stats-only` ends.
    assert_eq!(
        section("stats"),
        [
            "0 running, 1 completed, 1 failed, 0 pending, 0 inactive purged",
            "rc=1"
        ]
    );
    assert_eq!(section("bad"), ["rc=1"]);
    assert!(
        stderr.contains("fluxgate-jobs: Error in user format: Unknown format field: nosuch\n"),
        "{stderr}"
    );
}

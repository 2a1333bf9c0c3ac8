//! `fluxgate top` driven in tmux on a 2-node instance: the header and the
//! job list follow submissions and state changes, Enter shows a job's
//! eventlog and opens the instance a batch job runs, Esc and `q` go back,
//! `q` quits with status 0 and the terminal back in cooked mode.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Group, cli, require_services, text};
use fluxgate_integration_tests::command::has_program;
use fluxgate_integration_tests::eventually_blocking;
use fluxgate_integration_tests::poll::poll_until_blocking;

/// How long anything awaited on the screen may take.
const DEADLINE: Duration = Duration::from_secs(60);

/// A private tmux server (its own socket), killed when the test ends.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        assert!(out.status.success(), "tmux {args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    }

    fn capture(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", "top", keys]);
    }

    /// The screen once `ok` holds for it; fail with the last screen at
    /// the deadline.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        eventually_blocking(DEADLINE, || {
            let screen = self.capture();
            if ok(&screen) {
                Ok(screen)
            } else {
                Err(format!("no {what} on screen:\n{screen}"))
            }
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .stderr(Stdio::null())
            .status();
    }
}

/// Wait for `path` to exist, then read it.
fn wait_file(path: &Path) -> String {
    eventually_blocking(DEADLINE, || {
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
    })
}

/// Run the CLI with the instance's environment; its trimmed stdout.
fn fluxgate(env: &[(String, String)], args: &[&str]) -> String {
    let out = Command::new(cli())
        .args(args)
        .envs(env.iter().cloned())
        .output()
        .expect("run fluxgate");
    assert!(
        out.status.success(),
        "fluxgate {args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout).trim().to_string()
}

/// The screen line showing `job`.
fn row<'a>(screen: &'a str, job: &str) -> Option<&'a str> {
    screen.lines().find(|l| l.contains(job))
}

/// The state column of `job`'s row is `st`.
fn in_state(screen: &str, job: &str, st: &str) -> bool {
    row(screen, job).is_some_and(|l| l.split_whitespace().any(|w| w == st))
}

#[test]
fn top_follows_jobs_opens_eventlogs_and_instances_and_quits() {
    assert!(
        has_program("tmux", "-V"),
        "tmux is not on PATH (apt-get install tmux; CI installs it)"
    );
    require_services();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();

    // An instance that lives as long as the test: its script leaves the
    // instance's environment in a file and waits.
    let script = format!(
        "env | grep ^FLUXGATE_ > {0}/env.tmp && mv {0}/env.tmp {0}/env; sleep 600",
        d.display()
    );
    let child = Command::new(cli())
        .args(["start", "--size", "2", "--kill-timeout", "1", "--"])
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn fluxgate start");
    let _instance = Group {
        child: Some(child),
        grace: Duration::from_secs(5),
    };
    let mut env: Vec<(String, String)> = wait_file(&d.join("env"))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.push(("LC_ALL".into(), "C.UTF-8".into()));

    let before = fluxgate(&env, &["submit", "--job-name=before", "sleep", "300"]);

    // top in a 160x40 pane; after it, its status and the terminal modes.
    let exports: String = env
        .iter()
        .map(|(k, v)| format!("export {k}='{v}'\n"))
        .collect();
    let run = d.join("top.sh");
    std::fs::write(
        &run,
        format!(
            "{exports}'{cli}' top\necho $? > {d}/status.tmp && mv {d}/status.tmp {d}/status\nstty -a > {d}/stty.tmp && mv {d}/stty.tmp {d}/stty\n",
            cli = cli().display(),
            d = d.display()
        ),
    )
    .expect("write the pane's script");
    let tmux = Tmux {
        socket: format!("fluxgate-top-{}", std::process::id()),
    };
    let pane = format!("sh {}", run.display());
    tmux.run(&[
        "new-session",
        "-d",
        "-x",
        "160",
        "-y",
        "40",
        "-s",
        "top",
        &pane,
    ]);

    let screen = tmux.wait_for("header and running job", |s| {
        s.contains("size: 2 nodes, 4 cores  uptime: ") && in_state(s, &before, "R")
    });
    for col in ["JOBID", "USER", "ST", "NTASKS", "NNODES", "RUNTIME", "NAME"] {
        assert!(screen.contains(col), "{col} in\n{screen}");
    }
    assert!(screen.contains("nodes [") && screen.contains("cores ["));
    assert!(row(&screen, &before).is_some_and(|l| l.ends_with("before")));

    // A held job appears pending, runs once released, then is inactive.
    let later = fluxgate(
        &env,
        &["submit", "--urgency=hold", "--job-name=later", "sleep", "1"],
    );
    tmux.wait_for("the held job", |s| {
        in_state(s, &later, "S") && s.contains("1 pending")
    });
    fluxgate(&env, &["job", "urgency", &later, "default"]);
    tmux.wait_for("the released job running", |s| in_state(s, &later, "R"));
    tmux.wait_for("the job inactive", |s| {
        in_state(s, &later, "I") && s.contains("1 inactive")
    });

    // Enter on the selected job (the running one, listed first): its
    // eventlog; Esc back to the list.
    let screen = tmux.capture();
    assert!(
        row(&screen, &before).is_some_and(|l| l.starts_with("> ")),
        "the running job is selected:\n{screen}"
    );
    tmux.keys("Enter");
    tmux.wait_for("the eventlog", |s| {
        s.contains(&format!("{before} eventlog"))
            && s.contains(" submit ")
            && s.contains(" alloc ")
            && s.contains(" start")
    });
    tmux.keys("Escape");
    tmux.wait_for("the list again", |s| s.contains("JOBID"));

    // A batch job runs an instance: Enter opens top on it, q comes back.
    let batch = d.join("batch.sh");
    std::fs::write(
        &batch,
        format!(
            "#!/bin/sh\n'{}' submit --job-name=inner sleep 300 >/dev/null\nsleep 300\n",
            cli().display()
        ),
    )
    .expect("write the batch script");
    let out = d.join("outer.out");
    let outer = fluxgate(
        &env,
        &[
            "batch",
            "-n1",
            "--job-name=outer",
            &format!("--output={}", out.display()),
            &batch.display().to_string(),
        ],
    );
    tmux.wait_for("the batch job running", |s| in_state(s, &outer, "R"));
    // Newest running first: the batch job is at the top; select it.
    tmux.keys("k");
    tmux.wait_for("the batch job selected", |s| {
        row(s, &outer).is_some_and(|l| l.starts_with("> "))
    });
    // Its instance may take a moment to serve and to run its job: Enter
    // again (from its eventlog, if it was not up yet) until it shows.
    eventually_blocking(DEADLINE, || {
        tmux.keys("Enter");
        let shown = poll_until_blocking(Duration::from_secs(3), || {
            let s = tmux.capture();
            let inner = s.contains(&format!("> {outer}  size: 1 nodes")) && s.contains("inner");
            inner.then_some(()).ok_or(s)
        });
        if shown.is_ok() {
            return Ok(());
        }
        // Back to the outer list (from its eventlog or a half-open view).
        tmux.keys("Escape");
        tmux.wait_for("the outer list", |s| {
            s.contains("size: 2 nodes") && s.contains("JOBID")
        });
        Err(format!("no inner instance:\n{}", tmux.capture()))
    });
    tmux.keys("q");
    tmux.wait_for("the outer instance again", |s| {
        s.contains("size: 2 nodes") && row(s, &outer).is_some()
    });

    // q at the top quits: status 0, the terminal out of raw mode.
    tmux.keys("q");
    assert_eq!(wait_file(&d.join("status")).trim(), "0");
    let stty = wait_file(&d.join("stty"));
    let modes: Vec<&str> = stty.split_whitespace().collect();
    assert!(
        modes.contains(&"icanon") && modes.contains(&"echo"),
        "cooked mode after top:\n{stty}"
    );
    fluxgate(&env, &["cancel", &before, &outer]);
}

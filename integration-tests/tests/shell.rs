//! The job shell as a user meets it through `fluxgate run`: stdin reaching
//! the tasks (all, some, or a file), Ctrl-C (one warns, two cancel),
//! affinity, the task environment, and unknown shell options named.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use fluxgate_integration_tests::{GuestUser, Instance, binary, eventually_blocking, output_data};
use fluxgate_shared::JobId;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// `fluxgate ARGS` against the instance, in `dir`, with `stdin`.
fn command(inst: &Instance, dir: &Path, args: &[&str], stdin: Stdio) -> Command {
    let mut cmd = Command::new(binary("fluxgate"));
    cmd.args(args)
        .env("FLUXGATE_URI", &inst.uri)
        .env_remove("FLUXGATE_TOKEN")
        .current_dir(dir)
        .stdin(stdin);
    cmd
}

/// Run to the end with `input` as stdin.
fn run_with_input(inst: &Instance, dir: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = command(inst, dir, args, Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run fluxgate");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write stdin");
    drop(stdin);
    child.wait_with_output().expect("wait for fluxgate")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn sorted(b: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = text(b).lines().map(str::to_string).collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn stdin_reaches_the_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let inst = Instance::start(2, 2).await;

    // Every task of a two-node job reads all of it, end of file included.
    let out = run_with_input(
        &inst,
        dir.path(),
        &["run", "-N2", "-n3", "cat"],
        b"one\ntwo\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        sorted(&out.stdout),
        ["one", "one", "one", "two", "two", "two"]
    );

    // --input=RANKS: only task 1 reads it; the others see end of file.
    let script = "cat | sed \"s/^/$FLUX_TASK_RANK: /\"; echo \"$FLUX_TASK_RANK: end\"";
    let out = run_with_input(
        &inst,
        dir.path(),
        &["run", "-N2", "-n3", "--input=1", "sh", "-c", script],
        b"hello\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        sorted(&out.stdout),
        ["0: end", "1: end", "1: hello", "2: end"]
    );

    // --input=FILE: read by the job, whole, by each task.
    std::fs::write(dir.path().join("in.txt"), "a\nb\nc\n").unwrap();
    let out = run_with_input(
        &inst,
        dir.path(),
        &["run", "-N2", "-n2", "--input=in.txt", "wc", "-l"],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(sorted(&out.stdout), ["3", "3"]);

    // A file that is not there fails the job, naming it.
    let out = run_with_input(
        &inst,
        dir.path(),
        &["run", "--input=missing.txt", "cat"],
        b"",
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("cannot open missing.txt for stdin"),
        "{}",
        text(&out.stderr)
    );

    // A submitted job without --input reads /dev/null and ends.
    let out = command(
        &inst,
        dir.path(),
        &["submit", "--wait", "cat"],
        Stdio::null(),
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Read `child`'s stderr until a line containing `words`; the lines read.
fn stderr_until(lines: &mut impl Iterator<Item = String>, words: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let hit = line.contains(words);
        seen.push(line);
        if hit {
            return seen;
        }
    }
    panic!("stderr ended before {words:?}: {seen:?}");
}

fn interrupt(child: &Child) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_ctrl_c_warns_two_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let inst = Instance::start(1, 1).await;
    let mut child = command(
        &inst,
        dir.path(),
        &["run", "sh", "-c", "echo started >&2; exec sleep 300"],
        Stdio::null(),
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok);
    stderr_until(&mut lines, "started");

    interrupt(&child);
    stderr_until(
        &mut lines,
        "one more ctrl-C within 2s to cancel or ctrl-Z to detach",
    );
    // The job runs on: run has not ended, and the job is still R.
    assert!(child.try_wait().unwrap().is_none());
    let jobs = command(
        &inst,
        dir.path(),
        &["jobs", "-no", "{state}"],
        Stdio::null(),
    )
    .output()
    .unwrap();
    assert_eq!(text(&jobs.stdout).trim(), "RUN");

    // Two in a row cancel it. Should the machine stall past the window
    // between the two, the second only warns again: press once more.
    eventually_blocking(Duration::from_secs(60), || {
        interrupt(&child);
        let seen = stderr_until(&mut lines, "ctrl-C");
        if seen.iter().any(|l| l.contains("interrupted by ctrl-C")) {
            Ok(())
        } else {
            Err("no cancel after repeated Ctrl-C".to_string())
        }
    });
    let status = child.wait().unwrap();
    assert!(!status.success());
}

/// The CPUs a task may run on, as the kernel says.
const CPUS: &str = "grep Cpus_allowed_list /proc/self/status | cut -f2";

#[tokio::test(flavor = "multi_thread")]
async fn affinity_environment_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let inst = Instance::start(2, 2).await;
    let run = |args: &[&str]| {
        let out = command(&inst, dir.path(), args, Stdio::null())
            .output()
            .unwrap();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };

    // flux's default: every task bound to all of the job's cores there.
    let (ok, out, err) = run(&["run", "-N1", "-n2", "-c1", "sh", "-c", CPUS]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["0-1", "0-1"]);
    let (ok, out, err) = run(&[
        "run",
        "-N1",
        "-n2",
        "-c1",
        "-o",
        "cpu-affinity=per-task",
        "sh",
        "-c",
        CPUS,
    ]);
    assert!(ok, "{err}");
    let mut cpus: Vec<&str> = out.lines().collect();
    cpus.sort();
    assert_eq!(cpus, ["0", "1"]);
    let (ok, out, err) = run(&[
        "run",
        "-N1",
        "-n1",
        "-c2",
        "-o",
        "cpu-affinity=map:1",
        "sh",
        "-c",
        CPUS,
    ]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "1");

    // The task environment: the node list and the instance, whatever the
    // submitter's environment said.
    let (ok, out, err) = run(&[
        "run",
        "-N2",
        "-n2",
        "--env=-*",
        "/bin/sh",
        "-c",
        "echo $FLUX_JOB_NODELIST $FLUXGATE_URI",
    ]);
    assert!(ok, "{err}");
    let expect = format!("node[0-1] {}", inst.uri);
    assert_eq!(out.lines().collect::<Vec<_>>(), [&expect, &expect]);

    // An option nobody knows is named once; a bad value is refused.
    let (ok, _, err) = run(&["run", "-n2", "-o", "frobnicate=3", "true"]);
    assert!(ok, "{err}");
    assert_eq!(
        err.matches("fluxgate-shell: unknown option -o frobnicate")
            .count(),
        1,
        "{err}"
    );
    let (ok, _, err) = run(&["run", "-o", "cpu-affinity=sideways", "true"]);
    assert!(!ok);
    assert!(err.contains("cpu-affinity"), "{err}");

    // exit-on-error: the first failure ends the others at once.
    let (ok, _, err) = run(&[
        "run",
        "-n2",
        "-o",
        "exit-on-error",
        "sh",
        "-c",
        "test $FLUX_TASK_RANK = 0 && exit 3; exec sleep 300",
    ]);
    assert!(!ok);
    assert!(
        err.contains("task rank 0 on host node0 failed (Exit 3) and exit-on-error is set"),
        "{err}"
    );
    // exit-timeout: the others have that long after the first exit.
    let (ok, _, err) = run(&[
        "run",
        "-n2",
        "-o",
        "exit-timeout=0.5s",
        "sh",
        "-c",
        "test $FLUX_TASK_RANK = 0 || exec sleep 300",
    ]);
    assert!(!ok);
    assert!(
        err.contains("exited (Exit 0) and exit-timeout=0.5s has expired"),
        "{err}"
    );

    // The warning signal comes before the time limit, not at it.
    let (ok, out, err) = run(&[
        "run",
        "-t",
        "60s",
        "-o",
        "signal.signum=10",
        "-o",
        "signal.timeleft=59",
        "sh",
        "-c",
        "trap 'echo warned; exit 0' USR1; sleep 100 & wait",
    ]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "warned");
}

/// The screen of tmux session `s`.
fn screen(s: &str) -> String {
    let out = Command::new("tmux")
        .args(["capture-pane", "-p", "-t", s])
        .output()
        .expect("tmux (.ci/run installs it)");
    text(&out.stdout)
}

/// Wait until the screen shows `words`; the screen.
fn until_screen(s: &str, words: &str) -> String {
    eventually_blocking(Duration::from_secs(60), || {
        let shown = screen(s);
        if shown.contains(words) {
            Ok(shown)
        } else {
            Err(format!("no {words:?} on screen:\n{shown}"))
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interactive_pty_is_driven_from_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let inst = Instance::start(1, 1).await;
    let session = format!("fluxgate-pty-{}", std::process::id());
    let line = format!(
        "cd {} && FLUXGATE_URI={} {} run -o pty.interactive sh; echo EXIT=$?; sleep 600",
        dir.path().display(),
        inst.uri,
        binary("fluxgate").display()
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "100",
            "-y",
            "20",
            &line,
        ])
        .env_remove("TMUX")
        .status()
        .expect("tmux (.ci/run installs it)");
    assert!(started.success());
    let keys = |k: &str| {
        Command::new("tmux")
            .args(["send-keys", "-t", &session, k, "Enter"])
            .status()
            .unwrap();
    };
    // The task sees a terminal of the caller's size.
    keys("tty; stty size; echo $((6*7))");
    let shown = until_screen(&session, "42");
    assert!(shown.contains("/dev/pts/"), "{shown}");
    assert!(shown.contains("20 100"), "{shown}");
    // Ctrl-C is a character for the task's terminal, not a cancel. It is
    // typed once the foreground job runs (its words are on screen, not
    // just its echo), so that it reaches that job and not the shell.
    keys("sh -c 'echo slee\"\"ping; exec sleep 300'");
    until_screen(&session, "sleeping");
    Command::new("tmux")
        .args(["send-keys", "-t", &session, "C-c"])
        .status()
        .unwrap();
    keys("echo still $((1+1))");
    until_screen(&session, "still 2");
    keys("exit 7");
    let shown = until_screen(&session, "EXIT=7");
    let _ = Command::new("tmux")
        .args(["kill-session", "-t", &session])
        .status();
    assert!(!shown.contains("job.exception"), "{shown}");
}

/// The `data` of a job's stored output, all of it.
async fn stored_output(inst: &Instance, id: JobId) -> String {
    output_data(&inst.log(id, "output").await).concat()
}

/// `pty.interactive` without `pty.capture`, as flux: what the terminal shows
/// reaches the attached client (also what it showed before anyone
/// attached, and a flood of it) and none of it is stored, so a later
/// attach sees none of it; with `pty.capture` it is stored too.
#[tokio::test(flavor = "multi_thread")]
async fn an_interactive_terminal_is_shown_live_and_stored_only_when_captured() {
    let dir = tempfile::tempdir().unwrap();
    let inst = Instance::start(1, 1).await;
    let spoke = dir.path().join("spoke");
    // It speaks before anyone attaches, waits for a line, floods its terminal.
    let script = format!(
        "echo first-$((6*7)); touch {}; read x; echo got-$x; head -c 1000000 /dev/zero | tr '\\0' z; echo; exit 3",
        spoke.display()
    );
    let out = command(
        &inst,
        dir.path(),
        &["submit", "-o", "pty.interactive", "sh", "-c", &script],
        Stdio::null(),
    )
    .output()
    .expect("submit");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id_text = text(&out.stdout).trim().to_string();
    let id: JobId = id_text.parse().expect("a job id");
    eventually_blocking(Duration::from_secs(60), || {
        spoke
            .exists()
            .then_some(())
            .ok_or_else(|| "the task has not spoken".to_string())
    });
    let attach = ["job", "attach", id_text.as_str()];
    let out = run_with_input(&inst, dir.path(), &attach, b"live\n");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("first-42"), "{shown:.300}");
    assert!(shown.contains("got-live"), "{shown:.300}");
    assert_eq!(shown.matches('z').count(), 1_000_000);
    // None of it is stored: not a line of it, not a byte of the flood.
    let stored = stored_output(&inst, id).await;
    assert!(stored.len() < 100, "{stored:.300}");
    for words in ["first-42", "got-live", "z"] {
        assert!(!stored.contains(words), "{stored:.300}");
    }
    // So an attach once the job has ended shows none of it.
    let out = run_with_input(&inst, dir.path(), &attach, b"");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("first-42"),
        "{}",
        text(&out.stdout)
    );

    // With pty.capture, what the terminal shows is shown and stored.
    let out = run_with_input(
        &inst,
        dir.path(),
        &[
            "run",
            "-o",
            "pty.interactive",
            "-o",
            "pty.capture",
            "sh",
            "-c",
            "read x; echo got-$x",
        ],
        b"kept\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("got-kept"),
        "{}",
        text(&out.stdout)
    );
    let captured = inst
        .list(127)
        .await
        .into_iter()
        .map(|j| JobId::from(j.id))
        .find(|j| *j != id)
        .expect("the captured job");
    let stored = stored_output(&inst, captured).await;
    assert!(stored.contains("got-kept"), "{stored}");
}

/// `FLUX_JOB_TMPDIR`: one directory per node, the owner's and private, with
/// the jobspec's files (`--add-file`) in it, `{{tmpdir}}` in the command and
/// in `--env` rendered to it, and nothing of it left once the job is over.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_tmpdir_holds_its_files_and_goes_with_the_job() {
    let guest = GuestUser::create("tmp");
    let inst = Instance::start_auth(2, 1).await;
    let token = inst.token(&guest.name, guest.uid, Some(3600));
    let f = binary("fluxgate");
    let env = [
        ("FLUXGATE_URI", inst.uri.as_str()),
        ("FLUXGATE_TOKEN", token.as_str()),
        ("F", f.to_str().expect("path")),
    ];
    // One line a task: the directory's owner and mode, the file's text and
    // mode, whether {{tmpdir}} became the directory, and the directory.
    let script = r#"
        $F run -N2 -n2 '--add-file=note:600=hello\nworld\n' '--env=MINE={{tmpdir}}/y' sh -c '
            d=$FLUX_JOB_TMPDIR
            same=no; [ "$1" = "$d/x" ] && [ "$MINE" = "$d/y" ] && same=yes
            echo "$(stat -c %U:%a "$d") $(tr "\n" , <"$d/note") $(stat -c %a "$d/note") $same $d"
        ' sh '{{tmpdir}}/x'
    "#;
    let out = guest.shell(script, &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = sorted(&out.stdout);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let mut dirs = Vec::new();
    for line in &lines {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(
            words[..4],
            [
                format!("{}:700", guest.name).as_str(),
                "hello,world,",
                "600",
                "yes"
            ],
            "{line}"
        );
        dirs.push(words[4].to_string());
    }
    // A directory per node, named as flux names them.
    dirs.sort();
    assert_ne!(dirs[0], dirs[1]);
    assert!(dirs[0].contains("/jobtmp-0-"), "{dirs:?}");
    assert!(dirs[1].contains("/jobtmp-1-"), "{dirs:?}");
    for d in &dirs {
        assert!(!Path::new(d).exists(), "{d} outlived its job");
    }
}

/// `fluxgate alloc` from a terminal: the shell runs in the job, under the
/// job's pty, inside the child instance (its URI in the environment).
#[tokio::test(flavor = "multi_thread")]
async fn alloc_runs_its_shell_in_the_job_under_a_pty() {
    let dir = tempfile::tempdir().unwrap();
    let inst = Instance::start(2, 1).await;
    let session = format!("fluxgate-alloc-{}", std::process::id());
    let fluxgate = binary("fluxgate");
    let bindir = fluxgate.parent().unwrap();
    let line = format!(
        "cd {} && PATH={}:$PATH SHELL=/bin/sh FLUXGATE_URI={} PARENT_URI={} fluxgate alloc -N2; echo EXIT=$?; sleep 600",
        dir.path().display(),
        bindir.display(),
        inst.uri,
        inst.uri,
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "120",
            "-y",
            "30",
            &line,
        ])
        .env_remove("TMUX")
        .status()
        .expect("tmux (.ci/run installs it)");
    assert!(started.success());
    let keys = |k: &str| {
        Command::new("tmux")
            .args(["send-keys", "-t", &session, k, "Enter"])
            .status()
            .unwrap();
    };
    keys("tty; echo rank=$FLUX_TASK_RANK; fluxgate resource list; echo $((6*7))");
    let shown = until_screen(&session, "42");
    // A terminal, on the job's first node (task rank 0), whose instance
    // is the child: its two nodes up.
    assert!(shown.contains("/dev/pts/"), "{shown}");
    assert!(shown.contains("rank=0"), "{shown}");
    assert!(shown.contains("node[0-1]"), "{shown}");
    keys(
        "test \"$FLUXGATE_URI\" != \"\" && test \"$FLUXGATE_URI\" != \"$PARENT_URI\" && echo child-uri-ok",
    );
    until_screen(&session, "child-uri-ok");
    keys("exit 5");
    let shown = until_screen(&session, "EXIT=5");
    let _ = Command::new("tmux")
        .args(["kill-session", "-t", &session])
        .status();
    assert!(!shown.contains("job.exception"), "{shown}");
}

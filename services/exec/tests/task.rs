//! Real processes: output order, exit statuses, start failures, signals, binding.

use std::time::Duration;

use fluxgate_exec::rlimit::Rlimit;
use fluxgate_exec::status::WaitStatus;
use fluxgate_exec::task::{self, Stream, TaskEvent, TaskSpec};
use nix::sys::signal::Signal;
use tokio::sync::mpsc;

fn spec(argv: &[&str]) -> TaskSpec {
    TaskSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
        cwd: None,
        cpus: Vec::new(),
        rank: 3,
        ..TaskSpec::default()
    }
}

/// Every event of one task, up to and including `Exited`.
async fn run(spec: TaskSpec) -> Vec<TaskEvent> {
    let (tx, mut rx) = mpsc::channel(16);
    task::spawn(&spec, tx).await.unwrap();
    until_exit(&mut rx).await
}

/// The events still to come from a task, up to and including `Exited`.
async fn until_exit(rx: &mut mpsc::Receiver<TaskEvent>) -> Vec<TaskEvent> {
    let mut events = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap()
    {
        let done = matches!(ev, TaskEvent::Exited { .. });
        events.push(ev);
        if done {
            break;
        }
    }
    events
}

fn output(events: &[TaskEvent], which: Stream) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            TaskEvent::Output { stream, data, .. } if *stream == which => {
                Some(String::from_utf8_lossy(data).into_owned())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn output_lines_then_eof_then_exit_status() {
    let events = run(spec(&[
        "sh",
        "-c",
        "echo one; echo two; echo oops >&2; printf tail; exit 3",
    ]))
    .await;
    assert_eq!(output(&events, Stream::Stdout), "one\ntwo\ntail");
    assert_eq!(output(&events, Stream::Stderr), "oops\n");
    let lines: Vec<&TaskEvent> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                TaskEvent::Output {
                    stream: Stream::Stdout,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(lines.len(), 3, "one event per line: {lines:?}");
    let n = events.len();
    assert_eq!(
        events[n - 1],
        TaskEvent::Exited {
            rank: 3,
            status: WaitStatus::exited(3)
        }
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, TaskEvent::Eof { rank: 3, .. }))
            .count(),
        2
    );
}

#[tokio::test]
async fn environment_and_cwd_are_the_specs_own() {
    let dir = std::env::temp_dir();
    let mut s = spec(&["sh", "-c", "echo $GREETING; pwd; echo ${HOME:-unset}"]);
    s.env.push(("GREETING".into(), "hello".into()));
    s.cwd = Some(dir.clone());
    let events = run(s).await;
    let canonical = dir.canonicalize().unwrap();
    assert_eq!(
        output(&events, Stream::Stdout),
        format!("hello\n{}\nunset\n", canonical.display())
    );
}

#[tokio::test]
async fn a_missing_command_fails_to_start_like_a_shell() {
    let (tx, _rx) = mpsc::channel(4);
    let err = task::spawn(&spec(&["nosuchcommand-xyz"]), tx)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "nosuchcommand-xyz: No such file or directory"
    );
    assert_eq!(err.status.0, 32512);
}

#[tokio::test]
async fn a_directory_that_cannot_be_entered_falls_back_to_tmp_as_flux_does() {
    let mut s = spec(&["sh", "-c", "pwd; echo after >&2"]);
    s.cwd = Some("/no/such/dir".into());
    let events = run(s).await;
    let tmp = std::path::Path::new("/tmp").canonicalize().unwrap();
    assert_eq!(
        output(&events, Stream::Stdout),
        format!("{}\n", tmp.display())
    );
    assert_eq!(
        output(&events, Stream::Stderr),
        "Could not change dir to /no/such/dir: No such file or directory. \
         Going to /tmp instead\nafter\n"
    );
}

#[tokio::test]
async fn a_signal_reaches_the_whole_process_group() {
    let (tx, mut rx) = mpsc::channel(16);
    // The shell starts a child that would outlive it if only the shell were signalled.
    let t = task::spawn(&spec(&["sh", "-c", "sleep 300 & echo started; wait"]), tx)
        .await
        .unwrap();
    match rx.recv().await.unwrap() {
        TaskEvent::Output { data, .. } => assert_eq!(data, b"started\n"),
        other => panic!("expected output first, got {other:?}"),
    }
    t.signal(Signal::SIGTERM).unwrap();
    let status = loop {
        match tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .unwrap()
            .unwrap()
        {
            TaskEvent::Exited { status, .. } => break status,
            _ => continue,
        }
    };
    assert_eq!(status.signal(), Some(15));
    assert_eq!(status.as_shell_status().0, 36608);
    // Signalling a finished task is not an error.
    t.signal(Signal::SIGKILL).unwrap();
}

#[tokio::test]
async fn tasks_are_bound_to_their_cpus() {
    let mut s = spec(&["grep", "Cpus_allowed_list", "/proc/self/status"]);
    s.cpus = vec![0];
    let events = run(s).await;
    assert_eq!(output(&events, Stream::Stdout), "Cpus_allowed_list:\t0\n");

    // Cores this machine lacks (a virtual node's) leave the task unbound.
    let mut s = spec(&["true"]);
    s.cpus = vec![100_000];
    let events = run(s).await;
    assert!(matches!(
        events.last(),
        Some(TaskEvent::Exited { status, .. }) if status.0 == 0
    ));
}

#[tokio::test]
async fn unbuffered_output_comes_before_its_newline() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!(
        "printf part; while [ ! -e {0} ]; do sleep 0.05; done; echo end",
        go.display()
    );
    let mut s = spec(&["sh", "-c", &script]);
    s.unbuffered = true;
    let (tx, mut rx) = mpsc::channel(16);
    task::spawn(&s, tx).await.unwrap();
    // The task waits for `go` until its half line has come out.
    let first = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("the half line was held back")
        .unwrap();
    assert_eq!(
        first,
        TaskEvent::Output {
            rank: 3,
            stream: Stream::Stdout,
            data: b"part".to_vec()
        }
    );
    std::fs::write(&go, "").unwrap();
    let rest = until_exit(&mut rx).await;
    assert_eq!(output(&rest, Stream::Stdout), "end\n");
}

#[tokio::test]
async fn a_long_line_arrives_in_bounded_chunks() {
    let events = run(spec(&["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"])).await;
    let chunks: Vec<usize> = events
        .iter()
        .filter_map(|e| match e {
            TaskEvent::Output { data, .. } => Some(data.len()),
            _ => None,
        })
        .collect();
    assert_eq!(chunks.iter().sum::<usize>(), 200_000);
    assert!(chunks.iter().all(|&n| n <= task::MAX_CHUNK), "{chunks:?}");
}

#[tokio::test]
async fn limits_are_set_in_the_task_through_the_wrapper() {
    let mut s = spec(&["sh", "-c", "ulimit -n; ulimit -c"]);
    s.rlimits = vec![
        Rlimit {
            name: "nofile".into(),
            value: Some(64),
        },
        Rlimit {
            name: "core".into(),
            value: Some(0),
        },
    ];
    let events = run(s).await;
    assert_eq!(output(&events, Stream::Stdout), "64\n0\n");
}

#[tokio::test]
async fn the_wrapper_reports_start_failures_as_the_direct_spawn_does() {
    let limited = |argv: &[&str]| {
        let mut s = spec(argv);
        s.rlimits = vec![Rlimit {
            name: "nofile".into(),
            value: Some(256),
        }];
        s
    };
    let (tx, _rx) = mpsc::channel(4);
    let err = task::spawn(&limited(&["nosuchcommand-xyz"]), tx)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "nosuchcommand-xyz: No such file or directory"
    );
    assert_eq!(err.status.0, 32512);

    // A directory that cannot be entered: /tmp, with flux's warning first.
    let mut s = limited(&["sh", "-c", "pwd; echo after >&2"]);
    s.cwd = Some("/no/such/dir".into());
    let events = run(s).await;
    assert_eq!(output(&events, Stream::Stdout), "/tmp\n");
    assert_eq!(
        output(&events, Stream::Stderr),
        "Could not change dir to /no/such/dir: No such file or directory. \
         Going to /tmp instead\nafter\n"
    );

    // A file without #! runs through /bin/sh, as execvp would; SIGPIPE is
    // back to its default for the task although this binary ignores it.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("plain");
    std::fs::write(&script, "grep SigIgn /proc/self/status\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let events = run(limited(&[script.to_str().unwrap()])).await;
    let ignored = output(&events, Stream::Stdout);
    let mask = u64::from_str_radix(ignored.trim().trim_start_matches("SigIgn:").trim(), 16)
        .unwrap_or_else(|_| panic!("{ignored:?}"));
    assert_eq!(mask & (1 << (13 - 1)), 0, "SIGPIPE ignored: {ignored:?}");
}

//! Instance commands against a real instance: each test runs a script under
//! `fluxgate start --size 2` (the job manager and exec binaries must sit
//! beside the CLI binary: `cargo build --workspace`).

mod common;

use common::{in_instance, text};

#[test]
fn run_on_two_nodes_prints_two_lines() {
    let out = in_instance(r#"$F run -N2 hostname"#);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "stdout: {stdout}");
}

#[test]
fn run_false_exits_1_with_flux_message() {
    let out = in_instance(r#"$F run false; echo "rc=$?""#);
    assert_eq!(text(&out.stdout), "rc=1\n");
    assert_eq!(
        text(&out.stderr),
        "fluxgate-job: task(s) exited with exit code 1\n"
    );
}

#[test]
fn run_streams_stdout_and_stderr_and_exit_code() {
    let out = in_instance(r#"$F run sh -c 'echo out; echo err >&2; exit 3'; echo "rc=$?""#);
    assert_eq!(text(&out.stdout), "out\nrc=3\n");
    assert!(
        text(&out.stderr).starts_with("err\n"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn submit_then_wait_event_clean_and_eventlog_json() {
    let out = in_instance(
        r#"id=$($F submit true) && $F job wait-event -q $id clean && $F job eventlog --format=json $id"#,
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let names: Vec<String> = stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            v["name"].as_str().expect("name").to_string()
        })
        .collect();
    assert_eq!(names.first().map(String::as_str), Some("submit"));
    assert_eq!(names.last().map(String::as_str), Some("clean"));
    for n in [
        "validate", "depend", "priority", "alloc", "start", "finish", "release", "free",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
}

#[test]
fn jobs_shows_completed_and_failed_rows() {
    let out = in_instance(
        r#"a=$($F submit true); b=$($F submit false);
           $F job wait-event -q $a clean; $F job wait-event -q $b clean;
           $F jobs -a"#,
    );
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "       JOBID USER     NAME       ST NTASKS NNODES     TIME INFO"
    );
    assert_eq!(lines.len(), 3, "{stdout}");
    let st: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().nth(3).unwrap_or(""))
        .collect();
    assert!(st.contains(&"CD") && st.contains(&"F"), "{stdout}");
}

#[test]
fn cancel_running_job_gives_ca() {
    let out = in_instance(
        r#"a=$($F submit sleep 30); $F job wait-event -q -t 10 $a start;
           $F cancel $a; $F job wait-event -q -t 10 $a clean;
           $F jobs -a -n"#,
    );
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout} {}", text(&out.stderr));
    assert_eq!(stdout.split_whitespace().nth(3), Some("CA"), "{stdout}");
}

#[test]
fn time_limit_gives_to() {
    let out = in_instance(
        r#"a=$($F submit -t 1s sleep 10); $F job wait-event -q -t 15 $a clean; $F jobs -a -n"#,
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout.split_whitespace().nth(3),
        Some("TO"),
        "{stdout} {}",
        text(&out.stderr)
    );
}

#[test]
fn urgency_hold_then_release() {
    let out = in_instance(
        r#"a=$($F submit --urgency=hold true); sleep 0.5; $F jobs -n;
           $F job urgency $a default; $F job wait-event -q -t 10 $a clean && echo done"#,
    );
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout} {}", text(&out.stderr));
    assert_eq!(lines[0].split_whitespace().nth(3), Some("S"), "{stdout}");
    assert_eq!(lines[1], "done");
}

#[test]
fn start_exits_with_command_status_and_leaves_nothing() {
    let out = in_instance("exit 7");
    assert_eq!(out.status.code(), Some(7));
}

#[test]
fn a_huge_cc_range_against_a_disabled_queue_ends_at_once() {
    // Two billion copies: built a batch at a time, and the first batch
    // refused whole ends the command, with the server's reason.
    let out = in_instance(
        r#"$F queue disable "maintenance"; $F submit --quiet --cc 0-2000000000 true; echo "rc=$?""#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(stdout.contains("rc=1"), "{stdout} {stderr}");
    let refusals = stderr.lines().filter(|l| l.contains("maintenance")).count();
    assert!((1..=1000).contains(&refusals), "{refusals}: {stderr}");
}

//! `fluxgate-bench`: every workload run tiny on an instance of its own (the
//! job manager, exec and CLI binaries must sit beside it: `cargo build
//! --workspace`). The figures are checked for shape, counts and sign,
//! never against a time: how fast a machine is says nothing about the code.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::Value;

use fluxgate_integration_tests::command::Group;

/// The bench under test.
fn bench_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fluxgate-bench"))
}

/// Fail with a clear message when the services or the CLI were not built.
fn require_services() {
    let dir = bench_bin().parent().expect("bin dir").to_path_buf();
    for b in ["fluxgate-job-manager", "fluxgate-exec", "fluxgate"] {
        assert!(
            dir.join(b).is_file(),
            "{b} is missing from {}: run `cargo build --workspace` first",
            dir.display()
        );
    }
}

/// Keys every row has, measured or null.
const KEYS: &[&str] = &[
    "workload",
    "jobs",
    "nodes",
    "jobs_per_sec",
    "submit_per_sec",
    "sched_per_sec",
    "p50_ms",
    "p99_ms",
    "rss_bytes",
    "events_per_commit",
    "elapsed_s",
    "loadavg",
    "cpu_ms_per_job",
];

fn spawn(args: &[&str]) -> Group {
    require_services();
    let child = Command::new(bench_bin())
        .args(args)
        .env_remove("FLUXGATE_URI")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn fluxgate-bench");
    // SIGTERM first: the bench then stops the services it started.
    Group {
        child: Some(child),
        grace: Duration::from_secs(15),
    }
}

/// Run `fluxgate-bench ARGS -v` to the end; the statedirs it reported are
/// checked to be gone (the services are stopped before they are removed).
fn bench(args: &[&str]) -> Output {
    // The bench's own bound keeps a hang from hanging the test.
    let mut all = args.to_vec();
    all.extend(["-v", "--timeout", "120"]);
    let mut run = spawn(&all);
    let child = run.child.take().expect("child");
    let out = child.wait_with_output().expect("bench output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench {args:?} failed: {stderr}");
    let dirs = statedirs(&stderr);
    assert!(!dirs.is_empty(), "no instance reported: {stderr}");
    for d in dirs {
        assert!(!d.exists(), "{} was left behind", d.display());
        assert!(
            no_process_uses(&d),
            "a service of {} still runs",
            d.display()
        );
    }
    out
}

/// The statedirs named by `-v` lines (`..., logs in DIR`).
fn statedirs(stderr: &str) -> Vec<PathBuf> {
    stderr
        .lines()
        .filter_map(|l| l.split_once(", logs in ").map(|(_, d)| PathBuf::from(d)))
        .collect()
}

/// No process has `dir` on its command line.
fn no_process_uses(dir: &Path) -> bool {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().all(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        !String::from_utf8_lossy(&cmdline).contains(&needle)
    })
}

/// The JSON rows of a run, each with every key.
fn rows(out: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for r in &rows {
        for k in KEYS {
            assert!(r.get(*k).is_some(), "{k} missing from {r}");
        }
    }
    rows
}

fn positive(row: &Value, key: &str) -> f64 {
    let v = row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {row}"));
    assert!(v > 0.0, "{key} is {v} in {row}");
    v
}

#[test]
fn sim_runs_every_combination() {
    let out = bench(&["sim", "--jobs", "50", "--nodes", "1,4", "--json"]);
    let rows = rows(&out);
    assert_eq!(rows.len(), 2);
    for (row, nodes) in rows.iter().zip([1, 4]) {
        assert_eq!(row["workload"], "sim");
        assert_eq!(row["jobs"], 50);
        assert_eq!(row["nodes"], nodes);
        assert_eq!(row["failed"], 0);
        for k in [
            "jobs_per_sec",
            "submit_per_sec",
            "sched_per_sec",
            "p50_ms",
            "p99_ms",
            "rss_bytes",
            "events_per_commit",
            "elapsed_s",
        ] {
            positive(row, k);
        }
        assert!(positive(row, "p99_ms") >= positive(row, "p50_ms"), "{row}");
        assert_eq!(row["loadavg"].as_array().map(Vec::len), Some(3), "{row}");
    }
}

#[test]
fn real_runs_true_jobs() {
    let rows = rows(&bench(&["real", "--jobs", "10", "--json"]));
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(
        (row["workload"].as_str(), row["jobs"].as_u64()),
        (Some("real"), Some(10))
    );
    assert_eq!(row["failed"], 0, "{row}");
    for k in [
        "jobs_per_sec",
        "submit_per_sec",
        "p50_ms",
        "rss_bytes",
        "events_per_commit",
    ] {
        positive(row, k);
    }
    // Ten jobs may cost less than a clock tick: measured, not positive.
    let cpu = &row["cpu_ms_per_job"];
    for k in ["job_manager", "exec", "tasks"] {
        let ms = cpu[k].as_f64().unwrap_or_else(|| panic!("{k} in {row}"));
        assert!(ms >= 0.0, "{k} is {ms} in {row}");
    }
}

#[test]
fn latency_times_whole_runs() {
    let rows = rows(&bench(&["latency", "--jobs", "3", "--json"]));
    let row = &rows[0];
    assert_eq!(
        (row["workload"].as_str(), row["jobs"].as_u64()),
        (Some("latency"), Some(3))
    );
    for k in ["jobs_per_sec", "p50_ms", "p99_ms", "rss_bytes"] {
        positive(row, k);
    }
    // Not measured by this workload: null, not a made-up number.
    assert!(row["submit_per_sec"].is_null(), "{row}");
}

#[test]
fn held_measures_memory_per_job() {
    let rows = rows(&bench(&["held", "--jobs", "200", "--json"]));
    let row = &rows[0];
    assert_eq!(
        (row["workload"].as_str(), row["jobs"].as_u64()),
        (Some("held"), Some(200))
    );
    for k in [
        "submit_per_sec",
        "rss_bytes",
        "rss_before_bytes",
        "events_per_commit",
    ] {
        positive(row, k);
    }
    assert!(row["rss_per_job_bytes"].is_number(), "{row}");
    assert!(row["jobs_per_sec"].is_null(), "{row}");
}

#[test]
fn restart_times_both_kinds_of_stop() {
    let rows = rows(&bench(&["restart", "--jobs", "100", "--json"]));
    let row = &rows[0];
    assert_eq!(
        (row["workload"].as_str(), row["jobs"].as_u64()),
        (Some("restart"), Some(100))
    );
    for k in [
        "restart_ms",
        "restart_sigkill_ms",
        "stop_ms",
        "rss_bytes",
        "events_per_commit",
    ] {
        positive(row, k);
    }
}

#[test]
fn table_is_the_default() {
    let out = bench(&["sim", "--jobs", "5"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("load average at start: "), "{stdout}");
    assert!(lines[1].starts_with("WORKLOAD "), "{stdout}");
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines[2].starts_with("sim "), "{stdout}");
}

#[test]
fn remote_instances_refuse_what_needs_a_local_one() {
    for args in [&["restart"][..], &["sim", "--nodes", "2"][..]] {
        let out = Command::new(bench_bin())
            .args(args)
            .env("FLUXGATE_URI", "http://127.0.0.1:9")
            .output()
            .expect("run bench");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        assert!(stderr.contains("remote instance"), "{args:?}: {stderr}");
        assert!(
            stderr.contains("unset FLUXGATE_URI") || stderr.contains("unset it"),
            "{stderr}"
        );
    }
}

#[test]
fn an_interrupted_bench_stops_its_instance() {
    // Far more held jobs than can be submitted before the signal.
    let mut run = spawn(&["held", "--jobs", "100000000", "-v"]);
    let child = run.child.as_mut().expect("child");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let dir = loop {
        let line = lines
            .next()
            .expect("the bench ended before reporting its instance")
            .expect("read stderr");
        if let Some(d) = statedirs(&line).pop() {
            break d;
        }
    };
    assert!(dir.exists(), "{} missing while running", dir.display());
    nix::sys::signal::kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().expect("wait");
    run.child = None;
    assert!(!status.success());
    assert!(
        rest.iter().any(|l| l.contains("interrupted by SIGINT")),
        "{rest:?}"
    );
    assert!(!dir.exists(), "{} was left behind", dir.display());
    assert!(
        no_process_uses(&dir),
        "a service of {} still runs",
        dir.display()
    );
}

#[test]
fn nodes_join_idle_and_start_a_job_on_every_node() {
    let out = bench(&["nodes", "--nodes", "16", "--idle", "0.5", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    let row = &rows[0];
    assert_eq!(row["workload"], "nodes");
    assert_eq!(row["nodes"], 16);
    assert!(row["error"].is_null(), "{row}");
    positive(row, "join_s");
    positive(row, "start_s");
    positive(row, "rss_bytes");
    assert!(
        row["idle_cpu_percent"].as_f64().is_some_and(|c| c >= 0.0),
        "{row}"
    );
    assert_eq!(row["heartbeat_s"], 2.0);
}

#[test]
fn fluxgate_bench_runs_fluxgate_bench() {
    require_services();
    let cli = bench_bin().with_file_name("fluxgate");
    let out = Command::new(cli)
        .args(["bench", "--help"])
        .output()
        .expect("run fluxgate bench --help");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("Usage: fluxgate-bench"), "{stdout}");
    assert!(stdout.contains("WORKLOADS"), "{stdout}");
}

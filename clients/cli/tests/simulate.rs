//! `fluxgate simulate`: SWF traces replayed through the scheduler's code.

use std::process::Command;

use serde_json::Value;

fn fluxgate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fluxgate"))
}

fn simulate(trace: &str, policy: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.swf");
    std::fs::write(&path, trace).unwrap();
    let out = fluxgate()
        .args([
            "simulate",
            "--nodes",
            "4",
            "--cores-per-node",
            "4",
            "--json",
        ])
        .arg("--policy")
        .arg(policy)
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// 3 of 4 nodes busy until 100; a whole-machine job; a short one and a
/// long one (procs are cores: 4 per node).
const TRACE: &str = "; hand-made\n\
1 0 -1 100 12 -1 -1 12 100 -1 1 1 -1 -1 -1 -1 -1 -1\n\
2 1 -1 50 16 -1 -1 16 60 -1 1 2 -1 -1 -1 -1 -1 -1\n\
3 2 -1 20 4 -1 -1 4 30 -1 1 3 -1 -1 -1 -1 -1 -1\n\
4 3 -1 20 3 -1 -1 3 500 -1 1 3 -1 -1 -1 -1 -1 -1\n\
5 4 -1 -1 4 -1 -1 4 10 -1 0 3 -1 -1 -1 -1 -1 -1\n";

fn starts(rows: &[Value]) -> Vec<(u64, f64)> {
    rows.iter()
        .filter(|r| r.get("summary").is_none())
        .map(|r| (r["id"].as_u64().unwrap(), r["start"].as_f64().unwrap()))
        .collect()
}

#[test]
fn easy_backfills_the_short_job_and_fcfs_keeps_order() {
    let easy = simulate(TRACE, "easy");
    assert_eq!(starts(&easy), [(1, 0.0), (2, 100.0), (3, 2.0), (4, 150.0)]);
    let fcfs = simulate(TRACE, "fcfs");
    assert_eq!(
        starts(&fcfs),
        [(1, 0.0), (2, 100.0), (3, 150.0), (4, 150.0)]
    );
    let summary = easy.last().unwrap();
    assert_eq!(summary["summary"], true);
    assert_eq!(summary["jobs"], 4);
    for key in [
        "utilization",
        "mean_wait",
        "p95_wait",
        "mean_bounded_slowdown",
        "makespan",
    ] {
        assert!(summary[key].as_f64().is_some(), "{key} in {summary}");
    }
    let job4 = easy.iter().find(|r| r["id"] == 4).unwrap();
    assert_eq!(job4["nodes"], 1, "3 processors take one 4-core node");
    assert_eq!(job4["end"], 170.0);
}

#[test]
fn a_generated_trace_is_reproducible_and_replays() {
    let generate = |seed: &str| {
        fluxgate()
            .args(["simulate", "--generate", "300", "--nodes", "16"])
            .args(["--cores-per-node", "4", "--seed", seed])
            .output()
            .unwrap()
            .stdout
    };
    assert_eq!(generate("5"), generate("5"));
    let text = String::from_utf8(generate("5")).unwrap();
    assert_eq!(text.lines().filter(|l| !l.starts_with(';')).count(), 300);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.swf");
    std::fs::write(&path, &text).unwrap();
    let out = fluxgate()
        .args(["simulate", "--nodes", "16", "--cores-per-node", "4"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("        ID"), "{table}");
    assert!(table.contains("mean bounded slowdown"), "{table}");
}

#[test]
fn the_shipped_trace_reads() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/synthetic-10000.swf"
    );
    let out = fluxgate()
        .args(["simulate", "--nodes", "128", "--cores-per-node", "16"])
        .args(["--policy", "fcfs", "--json", path])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["jobs"], 10000);
}

#[test]
fn a_bad_trace_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.swf");
    std::fs::write(&path, "1 2 3\n").unwrap();
    let out = fluxgate()
        .args(["simulate", "--nodes", "4", "--cores-per-node", "4"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 1"), "{err}");
}

/// 3 of 4 nodes busy until 100; a 3-node job (one node spare when it
/// starts), a whole-machine job after it, then a 1-node job for 250 s.
const SECOND_IN_LINE: &str = "; hand-made\n\
1 0 -1 100 12 -1 -1 12 100 -1 1 1 -1 -1 -1 -1 -1 -1\n\
2 1 -1 100 12 -1 -1 12 100 -1 1 2 -1 -1 -1 -1 -1 -1\n\
3 2 -1 100 16 -1 -1 16 100 -1 1 3 -1 -1 -1 -1 -1 -1\n\
4 3 -1 250 4 -1 -1 4 250 -1 1 4 -1 -1 -1 -1 -1 -1\n";

#[test]
fn conservative_keeps_the_second_blocked_job_from_being_pushed_back() {
    let easy = simulate(SECOND_IN_LINE, "easy");
    let mut easy = starts(&easy);
    easy.sort_by_key(|s| s.0);
    assert_eq!(easy, [(1, 0.0), (2, 100.0), (3, 253.0), (4, 3.0)]);
    let cons = simulate(SECOND_IN_LINE, "conservative");
    let mut cons = starts(&cons);
    cons.sort_by_key(|s| s.0);
    assert_eq!(cons, [(1, 0.0), (2, 100.0), (3, 200.0), (4, 300.0)]);
}

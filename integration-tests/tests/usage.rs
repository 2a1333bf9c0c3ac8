//! Containment seen from the job manager, on this machine's cgroups (as
//! root, as CI runs): what a two-node job used comes back from both nodes
//! and is shown by `fluxgate job usage` and `fluxgate jobs -o` (and, while
//! the job runs, what it has used so far), and a job
//! over its memory limit ends with the `oom` exception while one under it
//! completes.

use std::process::Output;
use std::time::Duration;

use fluxgate_integration_tests::{Instance, binary, eventually, output_data};
use fluxgate_shared::jobspec::JobspecBuilder;
use serde_json::{Value, json};
use tokio::process::Command;

/// `fluxgate ARGS` against `inst`, run to its end.
async fn fluxgate(inst: &Instance, args: &[&str]) -> Output {
    let mut cmd = Command::new(binary("fluxgate"));
    cmd.args(args)
        .env("FLUXGATE_URI", &inst.uri)
        .kill_on_drop(true);
    if let Some(t) = &inst.owner_token {
        cmd.env("FLUXGATE_TOKEN", t);
    }
    cmd.output().await.expect("run fluxgate")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The CPU seconds the `times` builtin of each task printed (the shell's
/// and its children's, user and system), summed.
fn self_measured(output: &[String]) -> f64 {
    output
        .concat()
        .split_whitespace()
        .filter_map(|t| {
            let (m, s) = t.strip_suffix('s')?.split_once('m')?;
            Some(m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_node_jobs_usage_is_shown_per_node_and_in_total() {
    let inst = Instance::start(2, 1).await;
    // A busy loop that reports what it burned: the cgroups' count must agree.
    let busy = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; times";
    let id = inst
        .submit(
            &JobspecBuilder::new(["sh", "-c", busy]).nodes(2).ntasks(2),
            None,
        )
        .await;
    inst.wait_clean(id).await;
    let burned = self_measured(&output_data(&inst.log(id, "output").await));
    assert!(burned > 0.1, "the busy loop burned {burned} s");
    let id = id.to_string();

    let out = fluxgate(&inst, &["job", "usage", "--json", &id]).await;
    assert!(out.status.success(), "{out:?}");
    let usage: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let nodes = usage["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{usage}");
    let cpu = |v: &Value| v["user"].as_f64().unwrap() + v["system"].as_f64().unwrap();
    assert!(nodes.iter().all(|n| cpu(n) > 0.0), "{usage}");
    let sum: f64 = nodes.iter().map(cpu).sum();
    assert!((cpu(&usage["total"]) - sum).abs() < 1e-6, "{usage}");
    assert!(
        (sum - burned).abs() <= 0.2 * burned,
        "the cgroups counted {sum} s, the tasks {burned} s: {usage}"
    );
    assert!(usage["total"]["max_rss"].as_u64().unwrap() > 0, "{usage}");

    let out = fluxgate(&inst, &["job", "usage", &id]).await;
    let table = stdout(&out);
    assert!(table.starts_with("RANKS"), "{table}");
    assert!(
        table.lines().last().unwrap().starts_with("total"),
        "{table}"
    );

    let out = fluxgate(&inst, &["jobs", "-a", "-n", "-o", "{cpu_time} {max_rss}"]).await;
    let line = stdout(&out);
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.len(), 2, "{line:?}");
    let shown: f64 = fields[0].parse().unwrap();
    assert!(
        (shown - cpu(&usage["total"])).abs() < 1e-3,
        "{line} vs {usage}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_jobs_usage_so_far_is_read_from_its_cgroups() {
    let inst = Instance::start(2, 1).await;
    // Burns some CPU on each node, then holds still until cancelled.
    let busy = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec sleep 600";
    let id = inst
        .submit(
            &JobspecBuilder::new(["sh", "-c", busy]).nodes(2).ntasks(2),
            None,
        )
        .await;
    inst.events_until(id, "eventlog", "start").await;
    let shown = id.to_string();
    let cpu = |v: &Value| v["user"].as_f64().unwrap_or(0.0) + v["system"].as_f64().unwrap_or(0.0);
    let live = eventually(Duration::from_secs(60), async || {
        let out = fluxgate(&inst, &["job", "usage", "--json", &shown]).await;
        if !out.status.success() {
            return Err(format!("{out:?}"));
        }
        let usage: Value = serde_json::from_str(&stdout(&out)).map_err(|e| e.to_string())?;
        let nodes = usage["nodes"].as_array().cloned().unwrap_or_default();
        if nodes.len() == 2 && nodes.iter().all(|n| cpu(n) > 0.05) {
            Ok(usage)
        } else {
            Err(format!("not yet burning on both nodes: {usage}"))
        }
    })
    .await;
    assert_eq!(live["running"], true, "{live}");
    assert!(live["total"]["max_rss"].as_u64().unwrap() > 0, "{live}");
    let table = stdout(&fluxgate(&inst, &["job", "usage", &shown]).await);
    assert!(table.contains("running"), "{table}");

    let out = fluxgate(&inst, &["cancel", &shown]).await;
    assert!(out.status.success(), "{out:?}");
    inst.wait_clean(id).await;
    // Once ended, the stored usage: at least what was seen while it ran.
    let out = fluxgate(&inst, &["job", "usage", "--json", &shown]).await;
    let ended: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(ended["running"], false, "{ended}");
    assert!(
        cpu(&ended["total"]) >= cpu(&live["total"]),
        "{ended} vs {live}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_over_its_memory_limit_ends_with_the_oom_exception() {
    let inst = Instance::start(1, 1).await;
    // Under the same limit, a job completes.
    let under = inst
        .submit(
            &JobspecBuilder::new(["dd", "if=/dev/zero", "of=/dev/null", "bs=4M", "count=1"])
                .setopt("cgroup", json!({"memory": {"max": "32M"}})),
            None,
        )
        .await;
    let events = inst.wait_clean(under).await;
    assert!(events.iter().all(|e| e.name != "exception"), "{events:?}");
    let finish = events.iter().find(|e| e.name == "finish").expect("finish");
    let ctx = serde_json::to_value(finish.context.as_ref().unwrap()).unwrap();
    assert_eq!(ctx["status"], 0, "{ctx}");
    let id = inst
        .submit(
            &JobspecBuilder::new(["dd", "if=/dev/zero", "of=/dev/null", "bs=128M", "count=1"])
                .setopt("cgroup", json!({"memory": {"max": "32M"}})),
            None,
        )
        .await;
    let events = inst.wait_clean(id).await;
    let exception = events
        .iter()
        .find(|e| e.name == "exception")
        .unwrap_or_else(|| panic!("no exception in {events:?}"));
    let ctx = serde_json::to_value(exception.context.as_ref().unwrap()).unwrap();
    assert_eq!(ctx["type"], "oom", "{ctx}");
    assert_eq!(ctx["severity"], 0, "{ctx}");
    let note = ctx["note"].as_str().unwrap();
    assert!(note.contains("went over its memory limit of 32M"), "{note}");
}

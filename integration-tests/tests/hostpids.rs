//! `fluxgate job hostpids` against a real instance (credentials required,
//! so the leader exec service must present the node credential to its
//! peer): the pids printed are the job's live task processes on the hosts
//! R names, `--ranks` and `--delimiter` shape the output, a pending job is
//! waited for, and an inactive job, an unknown one and one the caller may
//! not read are refused in flux's words.

use std::process::Output;
use std::time::Duration;

use fluxgate_integration_tests::{Instance, binary};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::jobspec::JobspecBuilder;
use tokio::process::Command;

/// `fluxgate job hostpids ARGS` as the caller holding `token`, not yet run.
fn hostpids_cmd(inst: &Instance, token: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(binary("fluxgate"));
    cmd.args(["job", "hostpids"])
        .args(args)
        .env("FLUXGATE_URI", &inst.uri)
        .env("FLUXGATE_TOKEN", token)
        .kill_on_drop(true);
    cmd
}

/// `fluxgate job hostpids ARGS` as the instance owner, run to its end.
async fn hostpids(inst: &Instance, args: &[&str]) -> Output {
    let owner = inst
        .owner_token
        .clone()
        .expect("an instance with credentials");
    hostpids_cmd(inst, &owner, args)
        .output()
        .await
        .expect("run fluxgate job hostpids")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The `host:pid` pairs of one line of output.
fn pairs(line: &str, delimiter: &str) -> Vec<(String, i32)> {
    line.trim_end_matches('\n')
        .split(delimiter)
        .map(|p| {
            let (host, pid) = p.rsplit_once(':').unwrap_or_else(|| panic!("{p:?}"));
            (
                host.to_string(),
                pid.parse().unwrap_or_else(|_| panic!("{p:?}")),
            )
        })
        .collect()
}

/// The command line of live process `pid`, as its arguments.
fn cmdline(pid: i32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_else(|e| panic!("pid {pid} is not a live process: {e}"));
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Each pid runs `sleep SECS` (the exec service starts the command by its
/// resolved path, so argv[0] ends in `sleep`).
fn assert_sleeping(found: &[(String, i32)], secs: &str) {
    for (_, pid) in found {
        let argv = cmdline(*pid);
        assert!(
            argv.first().is_some_and(|a| a.ends_with("sleep")) && argv[1..] == [secs],
            "pid {pid} runs {argv:?}, not sleep {secs}"
        );
    }
}

/// The hostname R gives each of its nodes, in R's order.
async fn hosts_of(inst: &Instance, id: JobId) -> Vec<String> {
    inst.r(id)
        .await
        .nodes()
        .iter()
        .map(|n| n.hostname().expect("R names its hosts").to_string())
        .collect()
}

async fn cancel(inst: &Instance, id: JobId) {
    inst.jobs()
        .await
        .cancel(pb::CancelRequest {
            id: id.into(),
            note: String::new(),
        })
        .await
        .expect("cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostpids_lists_the_live_tasks_of_a_job_on_the_hosts_of_its_r() {
    let inst = Instance::start_auth(2, 2).await;

    // Two tasks on two nodes: the leader lists its own and asks its peer.
    let spread = inst
        .submit(
            &JobspecBuilder::new(["sleep", "30"]).nodes(2).ntasks(2),
            None,
        )
        .await;
    inst.events_until(spread, "eventlog", "start").await;
    let spread_id = spread.to_string();
    let out = hostpids(&inst, &[&spread_id]).await;
    assert!(out.status.success(), "{out:?}");
    let found = pairs(&stdout(&out), ",");
    let hosts = hosts_of(&inst, spread).await;
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    let found_hosts: Vec<&str> = found.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(
        found_hosts, hosts,
        "task 0 on R's first node, task 1 on its second"
    );
    assert_ne!(found[0].1, found[1].1);
    assert_sleeping(&found, "30");

    // --ranks keeps those task ranks; --delimiter joins them (`\n`: newline).
    let out = hostpids(&inst, &["--ranks", "1", &spread_id]).await;
    assert_eq!(stdout(&out), format!("{}:{}\n", found[1].0, found[1].1));
    let out = hostpids(&inst, &["-d", "\\n", &spread_id]).await;
    let lines: Vec<String> = found.iter().map(|(h, p)| format!("{h}:{p}\n")).collect();
    assert_eq!(stdout(&out), lines.concat());
    let out = hostpids(&inst, &["--delimiter", " ", "-r", "0-1", &spread_id]).await;
    assert_eq!(pairs(&stdout(&out), " "), found);
    let out = hostpids(&inst, &["--ranks", "one", &spread_id]).await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--ranks=one: "), "{}", stderr(&out));

    // Two tasks on one node cannot start while each node has a core taken:
    // pending, waited for, and listed once it starts.
    let local = inst
        .submit(
            &JobspecBuilder::new(["sleep", "31"]).nodes(1).ntasks(2),
            None,
        )
        .await;
    let local_id = local.to_string();
    let out = hostpids(&inst, &["-t", "0.3s", &local_id]).await;
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "fluxgate-job: hostpids: timeout waiting for start event\n"
    );
    let owner = inst.owner_token.clone().expect("owner token");
    let mut waiting = hostpids_cmd(&inst, &owner, &[&local_id])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn fluxgate job hostpids");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        waiting.try_wait().expect("try_wait").is_none(),
        "hostpids did not wait for the pending job"
    );
    cancel(&inst, spread).await;
    let out = tokio::time::timeout(Duration::from_secs(60), waiting.wait_with_output())
        .await
        .expect("hostpids ends once the job has started")
        .expect("hostpids output");
    assert!(out.status.success(), "{out:?}");
    let found = pairs(&stdout(&out), ",");
    let host = hosts_of(&inst, local).await;
    assert_eq!(host.len(), 1, "{host:?}");
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found.iter().all(|(h, _)| *h == host[0]),
        "{found:?} on {host:?}"
    );
    assert_ne!(found[0].1, found[1].1);
    assert_sleeping(&found, "31");

    // An inactive job, an unknown one, and one the caller may not read.
    inst.wait_clean(spread).await;
    let out = hostpids(&inst, &[&spread_id]).await;
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!("fluxgate-job: hostpids: job {spread_id} is inactive\n")
    );
    let unknown = JobId::from(1u64).to_string();
    let out = hostpids(&inst, &[&unknown]).await;
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!("fluxgate-job: {unknown}: No such job\n")
    );
    let intruder = inst.token("intruder", 4242, None);
    let out = hostpids_cmd(&inst, &intruder, &[&local_id])
        .output()
        .await
        .expect("run fluxgate job hostpids");
    assert!(!out.status.success());
    assert_eq!(stderr(&out), "fluxgate-job: hostpids: Permission denied\n");

    cancel(&inst, local).await;
    inst.wait_clean(local).await;
}

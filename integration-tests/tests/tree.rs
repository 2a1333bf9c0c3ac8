//! A job over more exec services than their fan-out runs down a tree of
//! them: five exec services with `--fanout 2`, so the leader (node0)
//! starts node1 and node3, which start node2 and node4 in turn. Every
//! node's output arrives once, the finish status is the largest of all,
//! an MPI program's barriers complete across all five nodes (the PMI
//! fence goes up and down the tree), and an interior node that dies fails
//! the job as a lost peer does, its subtree torn down with it.

use std::path::Path;
use std::time::Duration;

use fluxgate_integration_tests::{
    Instance, Setup, cmd, compile_mpi, eventually, fluxgate_in, names, output_data, sorted_lines,
};

/// Exec services in the test instance.
const NODES: usize = 5;

/// An instance of five one-core nodes whose exec services have two
/// children each at most in a job's tree.
async fn tree_instance(cores: u32) -> Instance {
    let setup = Setup {
        exec_args: vec!["--fanout".into(), "2".into()],
        ..Setup::default()
    };
    Instance::start_setup(NODES, cores, setup).await
}

/// The `status` of the job's `finish` event.
fn finish_status(ev: &[fluxgate_shared::Event]) -> i64 {
    ev.iter()
        .find(|e| e.name == "finish")
        .and_then(|e| e.context.as_ref()?.get("status")?.as_i64())
        .unwrap_or_else(|| panic!("no finish status in {:?}", names(ev)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_and_the_largest_status_come_up_the_tree() {
    let inst = tree_instance(1).await;
    // Each task exits with its rank: the largest, 4, is node4's, a leaf
    // below node3.
    let script = "echo from task $FLUX_TASK_RANK of $FLUX_JOB_NNODES nodes; exit $FLUX_TASK_RANK";
    let id = inst
        .submit(&cmd(&["sh", "-c", script]).nodes(NODES as u64), None)
        .await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(finish_status(&ev), 4 << 8, "{:?}", names(&ev));
    assert!(!names(&ev).contains(&"exception"), "{:?}", names(&ev));
    let out = inst.log(id, "output").await;
    let mut lines = output_data(&out);
    lines.sort();
    assert_eq!(
        lines,
        (0..NODES)
            .map(|r| format!("from task {r} of {NODES} nodes\n"))
            .collect::<Vec<_>>(),
        "each node's output once"
    );
    // Only the leader writes the exec eventlog, whatever the tree's shape.
    let exec = inst.log(id, "exec.eventlog").await;
    assert_eq!(
        names(&exec),
        ["init", "starting", "shell-exit", "complete", "done"]
    );
    assert_eq!(ev.iter().filter(|e| e.name == "release").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mpi_barriers_complete_across_a_tree_of_five_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let hello = compile_mpi(dir.path(), "hello");
    let allreduce = compile_mpi(dir.path(), "allreduce");
    let inst = tree_instance(2).await;

    let out = fluxgate_in(
        &inst.uri,
        dir.path(),
        &["run", "-N5", "-n10", hello.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut want: Vec<String> = (0..10).map(|r| format!("rank {r} of 10")).collect();
    want.sort();
    assert_eq!(sorted_lines(&out.stdout), want);

    let out = fluxgate_in(
        &inst.uri,
        dir.path(),
        &["run", "-N5", "-n10", allreduce.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sorted_lines(&out.stdout), ["sum 55 over 10 ranks"]);
}

/// The pid the task of `rank` wrote, once it has.
fn task_pid(dir: &Path, rank: usize) -> Option<i32> {
    std::fs::read_to_string(dir.join(format!("pid.{rank}")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// True while process `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interior_node_that_dies_fails_the_job_as_a_lost_peer() {
    let dir = tempfile::tempdir().unwrap();
    let mut inst = tree_instance(1).await;
    let script = format!(
        "echo $$ > {}/pid.$FLUX_TASK_RANK; exec sleep 300",
        dir.path().display()
    );
    let id = inst
        .submit(&cmd(&["sh", "-c", &script]).nodes(NODES as u64), None)
        .await;
    inst.events_until(id, "eventlog", "start").await;
    let pids: Vec<i32> = eventually(Duration::from_secs(60), async || {
        (0..NODES)
            .map(|r| task_pid(dir.path(), r).ok_or(format!("no pid of task {r} yet")))
            .collect()
    })
    .await;
    // node1 started node2: it is an interior node of the job's tree.
    inst.kill_exec(1);
    let ev = inst.wait_clean(id).await;
    let exc = ev
        .iter()
        .find(|e| e.name == "exception")
        .unwrap_or_else(|| panic!("no exception: {:?}", names(&ev)));
    let ctx = exc.context.as_ref().unwrap();
    assert_eq!(ctx["severity"], 0);
    assert_eq!(ctx["type"], "exec");
    let note = ctx["note"].as_str().unwrap();
    assert!(
        note.contains("lost the exec service of rank(s) 1 at "),
        "{ctx:?}"
    );
    // Every other node's task is ended: those below the dead node too,
    // which nobody else could reach.
    for (rank, &pid) in pids.iter().enumerate() {
        if rank == 1 {
            // Its exec service was killed outright: its task is an orphan.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            continue;
        }
        eventually(Duration::from_secs(60), async || {
            if alive(pid) {
                Err(format!("task {rank} (pid {pid}) still runs"))
            } else {
                Ok(())
            }
        })
        .await;
    }
}

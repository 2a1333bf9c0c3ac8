//! Real MPI programs (Debian's MPICH, compiled here with `mpicc`) run by
//! `fluxgate run` over two exec services: one job of N ranks through the
//! PMI-1 server, an allreduce across the nodes, and an `MPI_Abort` that
//! ends the whole job; with `-o pmi=off` the ranks are singletons again.

use std::path::Path;

use fluxgate_integration_tests::{Instance, compile_mpi, fluxgate_in, sorted_lines};

#[tokio::test(flavor = "multi_thread")]
async fn mpi_jobs_span_two_exec_services() {
    let dir = tempfile::tempdir().unwrap();
    let hello = compile_mpi(dir.path(), "hello");
    let allreduce = compile_mpi(dir.path(), "allreduce");
    let abort = compile_mpi(dir.path(), "abort");
    let inst = Instance::start(2, 2).await;

    let out = fluxgate_in(
        &inst.uri,
        dir.path(),
        &["run", "-N2", "-n4", hello.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sorted_lines(&out.stdout),
        ["rank 0 of 4", "rank 1 of 4", "rank 2 of 4", "rank 3 of 4"]
    );

    let out = fluxgate_in(
        &inst.uri,
        dir.path(),
        &["run", "-N2", "-n4", allreduce.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sorted_lines(&out.stdout), ["sum 10 over 4 ranks"]);

    // Rank 1 aborts while the others wait in MPI_Barrier: the whole job
    // ends, with flux's exception, and run exits non-zero.
    let out = fluxgate_in(
        &inst.uri,
        dir.path(),
        &["run", "-N2", "-n4", abort.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("job.exception type=exec severity=0 PMI_Abort: aborted"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("job.exception").count(),
        1,
        "one exception: {stderr}"
    );

    // Without PMI every rank is a singleton.
    let out = fluxgate_in(
        &inst.uri,
        dir.path(),
        &[
            "run",
            "-N2",
            "-n2",
            "-o",
            "pmi=off",
            hello.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sorted_lines(&out.stdout), ["rank 0 of 1", "rank 0 of 1"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pmi_client_of_its_own_exchanges_keys_across_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mpi/pmi_client.py");
    let script = script.to_str().unwrap();
    let inst = Instance::start(2, 2).await;

    let out = fluxgate_in(
        &inst.uri,
        dir.path(),
        &["run", "-N2", "-n3", "python3", script],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Task 0 and 1 on the first node, 2 on the second.
    let all = "from task 0,from task 1,from task 2";
    assert_eq!(
        sorted_lines(&out.stdout),
        [
            format!("0 (vector,(0,1,2),(1,1,1)) {all}"),
            format!("1 (vector,(0,1,2),(1,1,1)) {all}"),
            format!("2 (vector,(0,1,2),(1,1,1)) {all}"),
        ]
    );

    // A task that leaves without finalizing, while the others go on to a
    // barrier it will never enter, ends the job instead of leaving them
    // waiting for ever.
    let out = fluxgate_in(
        &inst.uri,
        dir.path(),
        &["run", "-N2", "-n4", "python3", script, "leave"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("PMI_Abort: task 1 exited before PMI_Finalize"),
        "{stderr}"
    );
}

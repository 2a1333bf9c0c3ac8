//! Prolog and epilog commands run around each job, in the RFC 21 order, and a
//! failing prolog keeps the job from starting.

use fluxgate_integration_tests::{Instance, names};
use fluxgate_shared::jobspec::JobspecBuilder;

async fn with_perilog(prolog: &str, epilog: &str) -> (Instance, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jm.toml");
    std::fs::write(
        &config,
        format!("[perilog]\nprolog = {prolog:?}\nepilog = {epilog:?}\ntimeout = 30\n"),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_string();
    let inst = Instance::start_with(1, 1, &["--config", &config]).await;
    (inst, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prolog_and_epilog_run_around_the_job() {
    let marks = tempfile::tempdir().unwrap();
    let file = marks.path().join("marks");
    let f = file.display();
    let (inst, _cfg) = with_perilog(
        &format!("echo prolog $FLUX_JOB_ID >> {f}"),
        &format!("echo epilog $FLUX_JOB_ID >> {f}"),
    )
    .await;
    let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(
        names(&ev),
        [
            "submit",
            "validate",
            "depend",
            "priority",
            "alloc",
            "prolog-start",
            "prolog-finish",
            "start",
            "finish",
            "release",
            "epilog-start",
            "epilog-finish",
            "free",
            "clean"
        ]
    );
    let finish = ev.iter().find(|e| e.name == "prolog-finish").unwrap();
    assert_eq!(finish.context.as_ref().unwrap()["status"], 0);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("prolog {id}\nepilog {id}\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_prolog_keeps_the_job_from_starting() {
    let (inst, _cfg) = with_perilog("exit 3", "true").await;
    let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    let ev = inst.wait_clean(id).await;
    let n = names(&ev);
    assert!(!n.contains(&"start"), "{n:?}");
    let exc = ev.iter().find(|e| e.name == "exception").unwrap();
    let ctx = exc.context.as_ref().unwrap();
    assert_eq!(ctx["type"], "prolog");
    assert_eq!(ctx["severity"], 0);
    let finish = ev.iter().find(|e| e.name == "prolog-finish").unwrap();
    assert_eq!(finish.context.as_ref().unwrap()["status"], 768);
    assert_eq!(n.last(), Some(&"clean"));
}

//! Instances inside jobs (`fluxgate batch`, `proxy`, `update`): the child
//! instance on the job's re-ranked R (resource-define method job-info), its
//! URI as memo `uri`, jobs inside it, two levels deep, expiration flowing
//! down every level, teardown on cancel of the enclosing job, and property
//! constraints honoured after a run-time change.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use fluxgate_integration_tests::{
    Authed, Bearer, GuestUser, Instance, binary, eventually, exits_within, instance_token, names,
    script,
};
use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::job_manager_client::JobManagerClient;
use fluxgate_proto::v1::resource_client::ResourceClient;
use fluxgate_shared::jobspec::JobspecBuilder;
use fluxgate_shared::{Event, JobId};

/// A `fluxgate` command line against the instance at `uri`, run in `dir`,
/// with the workspace binaries first in PATH (scripts run inside jobs call
/// `fluxgate` by name).
fn fluxgate_command(uri: &str, dir: &Path, args: &[&str]) -> Command {
    let exe = binary("fluxgate");
    let bin_dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    let mut path = std::ffi::OsString::from(bin_dir.as_os_str());
    if let Some(old) = std::env::var_os("PATH") {
        path.push(":");
        path.push(old);
    }
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env("FLUXGATE_URI", uri)
        .env("PATH", path)
        .current_dir(dir)
        .stdin(Stdio::null());
    // An instance inside a job admits its owner only: the token it keeps
    // for its user (this test's) is the credential to use there.
    match instance_token(uri) {
        Some(t) => cmd.env("FLUXGATE_TOKEN", t),
        None => cmd.env_remove("FLUXGATE_TOKEN"),
    };
    cmd
}

/// A channel to the instance at `uri` and the credential to use there (the
/// token a child instance keeps for this test's user, none for the
/// enclosing instance, which runs open).
async fn connect(uri: &str) -> (tonic::transport::Channel, Bearer) {
    let channel = tonic::transport::Endpoint::from_shared(uri.to_string())
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    (channel, Bearer::new(instance_token(uri).as_deref()))
}

/// A JobManager client of the instance at `uri`, with its credential.
async fn jobs_at(uri: &str) -> JobManagerClient<Authed> {
    let (channel, bearer) = connect(uri).await;
    JobManagerClient::with_interceptor(channel, bearer)
}

/// Run `fluxgate ARGS` against `uri` in `dir`; its output, whatever its status.
fn fluxgate(uri: &str, dir: &Path, args: &[&str]) -> std::process::Output {
    fluxgate_command(uri, dir, args)
        .output()
        .expect("run fluxgate")
}

/// `fluxgate batch ARGS` against `uri`: the job id it printed.
fn batch(uri: &str, dir: &Path, args: &[&str]) -> JobId {
    let mut all = vec!["batch"];
    all.extend_from_slice(args);
    let out = fluxgate(uri, dir, &all);
    assert!(
        out.status.success(),
        "batch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    JobId::parse(text.trim()).unwrap_or_else(|_| panic!("batch printed {text:?}"))
}

fn status_of(events: &[Event]) -> i64 {
    events
        .iter()
        .find(|e| e.name == "finish")
        .and_then(|e| e.context.as_ref())
        .and_then(|c| c.get("status"))
        .and_then(serde_json::Value::as_i64)
        .unwrap_or_else(|| panic!("no finish in {:?}", names(events)))
}

/// A batch job's output: its default file, `flux-{{id}}.out` in `dir`.
fn batch_output(dir: &Path, id: JobId) -> String {
    std::fs::read_to_string(dir.join(format!("flux-{id}.out"))).unwrap_or_default()
}

/// Wait for the `uri` memo of a job.
/// Cancel job `id` (it may have ended already) and wait until it is clean.
async fn end_job(inst: &Instance, id: JobId) {
    let _ = inst
        .jobs()
        .await
        .cancel(pb::CancelRequest {
            id: id.into(),
            note: String::new(),
        })
        .await;
    inst.wait_clean(id).await;
}

/// The first active job of the instance at `uri` that `pred` accepts,
/// waiting up to 30 s for one (`what` names it in the failure).
async fn job_in(uri: &str, what: &str, pred: impl Fn(&pb::JobSummary) -> bool) -> JobId {
    eventually(Duration::from_secs(30), async || {
        let jobs = active(uri).await;
        let found = jobs.iter().find(|j| pred(j)).map(|j| JobId::from(j.id));
        found.ok_or_else(|| format!("no {what} in {uri}"))
    })
    .await
}

/// Follow the eventlog of job `id` of the (open) instance at `uri`.
async fn follow_eventlog(uri: &str, id: JobId) -> tonic::Streaming<pb::EventlogLine> {
    jobs_at(uri)
        .await
        .watch_eventlog(pb::WatchEventlogRequest {
            id: id.into(),
            name: "eventlog".into(),
            follow: true,
            wait_create: false,
            ..Default::default()
        })
        .await
        .expect("watch")
        .into_inner()
}

/// The events of `watch` up to `clean`, or up to a 20 s silence or its end.
async fn until_clean(watch: &mut tonic::Streaming<pb::EventlogLine>) -> Vec<Event> {
    let mut seen = Vec::new();
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(20), watch.message()).await
    {
        let ev = Event::parse_json(&line.line).expect("RFC 18");
        let clean = ev.name == "clean";
        seen.push(ev);
        if clean {
            break;
        }
    }
    seen
}

/// The one job of the instance at `level1`, and the URI of the instance it runs.
async fn inner_instance(level1: &str) -> (JobId, String) {
    let inner = job_in(level1, "a job", |_| true).await;
    let mut jobs = jobs_at(level1).await;
    (inner, memo_uri(&mut jobs, inner).await)
}

async fn memo_uri(jobs: &mut JobManagerClient<Authed>, id: JobId) -> String {
    eventually(Duration::from_secs(30), async || {
        let text = jobs
            .info(pb::InfoRequest {
                id: id.into(),
                keys: vec!["eventlog".into()],
                ..Default::default()
            })
            .await
            .expect("info")
            .into_inner()
            .values
            .remove("eventlog")
            .unwrap_or_default();
        for line in text.lines() {
            let ev = Event::parse_json(line).expect("RFC 18");
            if ev.name == "memo"
                && let Some(u) = ev.ctx("uri").and_then(|v| v.as_str())
            {
                return Ok(u.to_string());
            }
        }
        Err(format!("no uri memo on {id}: {text}"))
    })
    .await
}

/// The stored resource eventlog of the instance at `uri`.
async fn resource_eventlog(uri: &str) -> Vec<Event> {
    let (channel, bearer) = connect(uri).await;
    let mut r = ResourceClient::with_interceptor(channel, bearer);
    let mut s = r
        .eventlog(pb::ResourceEventlogRequest { follow: false })
        .await
        .expect("eventlog")
        .into_inner();
    let mut out = Vec::new();
    while let Some(e) = s.message().await.expect("stream") {
        out.push(Event::parse_json(&e.line).expect("RFC 18"));
    }
    out
}

/// Wait until the instance at `uri` has a resource-update with `expiration`.
async fn wait_resource_update(uri: &str, expiration: f64) {
    eventually(Duration::from_secs(20), async || {
        let log = resource_eventlog(uri).await;
        let seen = log.iter().any(|e| {
            e.name == "resource-update"
                && e.ctx("expiration")
                    .and_then(|v| v.as_f64())
                    .is_some_and(|t| (t - expiration).abs() < 1.0)
        });
        if seen {
            return Ok(());
        }
        Err(format!(
            "no resource-update expiration={expiration} at {uri}: {:?}",
            names(&log)
        ))
    })
    .await;
}

/// Active jobs of the instance at `uri`.
async fn active(uri: &str) -> Vec<pb::JobSummary> {
    jobs_at(uri)
        .await
        .list(pb::ListRequest::default())
        .await
        .expect("list")
        .into_inner()
        .jobs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_runs_100_jobs_in_its_instance() {
    let inst = Instance::start(2, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    script(
        dir.path(),
        "hundred.sh",
        "#!/bin/sh\n\
         fluxgate resource eventlog | grep -q 'method=\"job-info\"' || exit 10\n\
         fluxgate submit --cc 1-100 --quiet --wait true || exit 11\n\
         n=$(fluxgate jobs -a --no-header | wc -l)\n\
         test \"$n\" -eq 100 || { echo \"$n jobs\"; exit 12; }\n\
         exit 0\n",
    );
    let id = batch(&inst.uri, dir.path(), &["-N2", "hundred.sh"]);
    let ev = inst.wait_clean(id).await;
    assert_eq!(
        status_of(&ev),
        0,
        "batch output: {}",
        batch_output(dir.path(), id)
    );
    assert!(
        ev.iter()
            .any(|e| e.name == "memo" && e.ctx("uri").is_some())
    );
    let r = inst.r(id).await;
    assert_eq!(r.nnodes(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_script_status_is_the_jobs() {
    let inst = Instance::start(1, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    script(dir.path(), "three.sh", "#!/bin/sh\nexit 3\n");
    let id = batch(&inst.uri, dir.path(), &["-N1", "three.sh"]);
    let ev = inst.wait_clean(id).await;
    assert_eq!(status_of(&ev), 3 << 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_instance_two_levels_deep() {
    let inst = Instance::start(2, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    // Level 2: its R is re-ranked from 0, defined by job-info.
    script(
        dir.path(),
        "inner.sh",
        "#!/bin/sh\n\
         fluxgate resource eventlog | grep -q 'method=\"job-info\"' || exit 20\n\
         fluxgate resource list --json | grep -q '\"rank\": *\"0\"' || { fluxgate resource list --json; exit 21; }\n\
         fluxgate run true || exit 22\n",
    );
    // Level 1 runs level 2 on one of its two nodes and passes its status on.
    script(
        dir.path(),
        "outer.sh",
        "#!/bin/sh\n\
         id=$(fluxgate batch -N1 inner.sh) || exit 30\n\
         fluxgate job attach $id\n",
    );
    let id = batch(&inst.uri, dir.path(), &["-N2", "outer.sh"]);
    let ev = inst.wait_clean(id).await;
    assert_eq!(
        status_of(&ev),
        0,
        "outer output: {}",
        batch_output(dir.path(), id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_and_uri_descend_through_nested_instances() {
    let inst = Instance::start(1, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    script(dir.path(), "inner.sh", "#!/bin/sh\nsleep 300\n");
    script(
        dir.path(),
        "outer.sh",
        "#!/bin/sh\nfluxgate batch -n1 inner.sh >/dev/null || exit 1\nsleep 300\n",
    );
    let id = batch(&inst.uri, dir.path(), &["-N1", "outer.sh"]);
    let mut jobs = inst.jobs().await;
    let level1 = memo_uri(&mut jobs, id).await;
    let (inner, level2) = inner_instance(&level1).await;
    let path = format!("{id}/{inner}");
    let out = fluxgate(&inst.uri, dir.path(), &["uri", &path]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), level2);
    let out = fluxgate(
        &inst.uri,
        dir.path(),
        &["proxy", &path, "sh", "-c", "echo $FLUXGATE_URI"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), level2);
    end_job(&inst, id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiration_change_is_seen_at_every_level() {
    let inst = Instance::start(1, 4).await;
    let dir = tempfile::tempdir().expect("tempdir");
    script(dir.path(), "inner.sh", "#!/bin/sh\nsleep 300\n");
    script(
        dir.path(),
        "outer.sh",
        "#!/bin/sh\nfluxgate batch -n1 -c1 inner.sh >/dev/null || exit 1\nsleep 300\n",
    );
    let id = batch(&inst.uri, dir.path(), &["-N1", "-t", "10m", "outer.sh"]);
    let mut jobs = inst.jobs().await;
    let level1 = memo_uri(&mut jobs, id).await;
    let (inner, level2) = inner_instance(&level1).await;

    // A child job without a limit in an instance that expires gets the time left.
    let r = inst.r(id).await;
    let start = r.starttime().expect("starttime");
    assert!((r.expiration().expect("expiration") - (start + 600.0)).abs() < 1.0);

    let out = fluxgate(
        &inst.uri,
        dir.path(),
        &["update", &id.to_string(), "duration=20m"],
    );
    assert!(
        out.status.success(),
        "update: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new = start + 1200.0;
    let ev = inst.log(id, "eventlog").await;
    let n = names(&ev);
    let ju = n
        .iter()
        .position(|x| *x == "jobspec-update")
        .expect("jobspec-update");
    let ru = n
        .iter()
        .position(|x| *x == "resource-update")
        .expect("resource-update");
    assert!(ju < ru, "{n:?}");
    assert_eq!(
        ev[ju]
            .ctx("attributes.system.duration")
            .and_then(|v| v.as_f64()),
        Some(1200.0)
    );
    assert!((inst.r(id).await.expiration().expect("expiration") - new).abs() < 1.0);
    // Level 1 posts its own resource-update; its job (level 2's instance)
    // follows, and so does level 2.
    wait_resource_update(&level1, new).await;
    wait_resource_update(&level2, new).await;
    assert!(
        (JobManagerClientExt::r(&level1, inner)
            .await
            .expiration()
            .expect("exp")
            - new)
            .abs()
            < 1.0
    );

    // Level 2 refuses a job that would outlive it.
    let out = fluxgate(&level2, dir.path(), &["run", "-t", "30m", "true"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("remaining time"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = fluxgate(&level2, dir.path(), &["run", "-t", "1m", "true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    end_job(&inst, id).await;
}

/// Reading a job's R from another instance.
struct JobManagerClientExt;

impl JobManagerClientExt {
    async fn r(uri: &str, id: JobId) -> fluxgate_shared::ResourceSet {
        let mut jobs = jobs_at(uri).await;
        let v = jobs
            .info(pb::InfoRequest {
                id: id.into(),
                keys: vec!["R".into()],
                ..Default::default()
            })
            .await
            .expect("info")
            .into_inner()
            .values;
        fluxgate_shared::ResourceSet::parse(&v["R"]).expect("R")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_cancel_tears_down_the_child_and_its_jobs() {
    let inst = Instance::start(2, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    script(
        dir.path(),
        "hold.sh",
        "#!/bin/sh\nfluxgate submit -N2 sleep 300 >/dev/null\nsleep 300\n",
    );
    let id = batch(&inst.uri, dir.path(), &["-N2", "hold.sh"]);
    let mut jobs = inst.jobs().await;
    let child = memo_uri(&mut jobs, id).await;
    let child_job = job_in(&child, "a running job", |j| j.state == "RUN").await;
    let mut watch = follow_eventlog(&child, child_job).await;

    jobs.cancel(pb::CancelRequest {
        id: id.into(),
        note: "done".into(),
    })
    .await
    .expect("cancel");

    // The child's job ends with an exception before the child goes away.
    let seen = until_clean(&mut watch).await;
    assert!(
        seen.iter().any(|e| e.name == "exception"),
        "{:?}",
        names(&seen)
    );
    assert_eq!(seen.last().map(|e| e.name.as_str()), Some("clean"));

    let ev = inst.wait_clean(id).await;
    let exc = ev
        .iter()
        .find(|e| e.name == "exception")
        .expect("exception");
    assert_eq!(exc.ctx("type").and_then(|v| v.as_str()), Some("cancel"));
    // The child instance is gone.
    eventually(
        Duration::from_secs(10),
        async || match JobManagerClient::connect(child.clone()).await {
            Ok(_) => Err("child instance still serving".to_string()),
            Err(_) => Ok(()),
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_reaches_the_child_instance() {
    let inst = Instance::start(1, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    script(dir.path(), "wait.sh", "#!/bin/sh\nsleep 300\n");
    let id = batch(&inst.uri, dir.path(), &["-N1", "wait.sh"]);
    let mut jobs = inst.jobs().await;
    let child = memo_uri(&mut jobs, id).await;
    let out = fluxgate(
        &inst.uri,
        dir.path(),
        &["proxy", &id.to_string(), "sh", "-c", "echo $FLUXGATE_URI"],
    );
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), child);
    end_job(&inst, id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn property_constraints_follow_run_time_changes() {
    let inst = Instance::start(2, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut res = inst.resource().await;
    let mut acquire = res
        .acquire(pb::AcquireRequest {})
        .await
        .expect("acquire")
        .into_inner();
    let first = acquire.message().await.expect("stream").expect("first");
    assert!(first.resources.is_some());

    let ok = |args: &[&str]| {
        let out = fluxgate(&inst.uri, dir.path(), args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    ok(&["resource", "property", "add", "ssd", "node1"]);
    let msg = acquire
        .message()
        .await
        .expect("stream")
        .expect("property-add");
    let add: serde_json::Value =
        serde_json::from_str(msg.property_add.as_deref().expect("property-add")).expect("JSON");
    assert_eq!(add, serde_json::json!({"ssd": "1"}));

    // A job that requires the property runs where it is.
    let id = JobId::parse(&ok(&["submit", "--requires=ssd", "true"])).expect("id");
    let ev = inst.wait_clean(id).await;
    assert_eq!(status_of(&ev), 0);
    assert_eq!(inst.r(id).await.ranks().to_string(), "1");
    // Without it: only rank 0.
    let id = JobId::parse(&ok(&["submit", "--requires=^ssd", "true"])).expect("id");
    inst.wait_clean(id).await;
    assert_eq!(inst.r(id).await.ranks().to_string(), "0");

    ok(&["resource", "property", "remove", "ssd", "1"]);
    let msg = acquire
        .message()
        .await
        .expect("stream")
        .expect("property-remove");
    assert!(msg.property_remove.is_some());
    let id = JobId::parse(&ok(&["submit", "--requires=ssd", "true"])).expect("id");
    let ev = inst.wait_clean(id).await;
    let exc = ev
        .iter()
        .find(|e| e.name == "exception")
        .expect("exception");
    assert_eq!(exc.ctx("type").and_then(|v| v.as_str()), Some("alloc"));

    // A raw RFC 31 constraint with or/not.
    ok(&["resource", "property", "add", "big", "0"]);
    let spec = JobspecBuilder::new(["true"]).setattr(
        "system.constraints",
        serde_json::json!({"or": [{"properties": ["big"]}, {"hostlist": ["node9"]}]}),
    );
    let id = inst.submit(&spec, None).await;
    inst.wait_clean(id).await;
    assert_eq!(inst.r(id).await.ranks().to_string(), "0");
}

/// The job's stored jobspec, parsed.
async fn stored_jobspec(inst: &Instance, id: JobId) -> serde_json::Value {
    let mut jobs = inst.jobs().await;
    let info = jobs
        .info(pb::InfoRequest {
            id: id.as_u64(),
            keys: vec!["jobspec".into()],
            ..Default::default()
        })
        .await
        .expect("info")
        .into_inner();
    serde_json::from_str(&info.values["jobspec"]).expect("jobspec JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc35_requires_queries_place_jobs() {
    let inst = Instance::start(3, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let submit = |args: &[&str]| {
        let out = fluxgate(&inst.uri, dir.path(), args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        JobId::parse(String::from_utf8_lossy(&out.stdout).trim()).expect("id")
    };
    // host:X or rank:1 on two whole nodes: exactly those two.
    let id = submit(&["submit", "-N2", "--requires=host:node2 or rank:1", "true"]);
    assert_eq!(status_of(&inst.wait_clean(id).await), 0);
    assert_eq!(inst.r(id).await.ranks().to_string(), "1-2");
    assert_eq!(
        stored_jobspec(&inst, id).await["attributes"]["system"]["constraints"],
        serde_json::json!({"or": [{"hostlist": ["node2"]}, {"ranks": ["1"]}]})
    );
    // not, parentheses, -term: only rank 0 is left.
    let id = submit(&[
        "submit",
        "-N1",
        "--requires=not (host:node1 or rank:2)",
        "true",
    ]);
    inst.wait_clean(id).await;
    assert_eq!(inst.r(id).await.ranks().to_string(), "0");
    let id = submit(&["submit", "--requires=-host:node[0-1]", "true"]);
    inst.wait_clean(id).await;
    assert_eq!(inst.r(id).await.ranks().to_string(), "2");
    // A query no node meets is refused at once, as unsatisfiable.
    let id = submit(&["submit", "--requires=host:node0 rank:1", "true"]);
    let ev = inst.wait_clean(id).await;
    let exc = ev
        .iter()
        .find(|e| e.name == "exception")
        .expect("exception");
    assert_eq!(exc.ctx("type").and_then(|v| v.as_str()), Some("alloc"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn singleton_jobs_run_one_at_a_time() {
    let inst = Instance::start(1, 4).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let submit = |args: &[&str]| {
        let mut all = vec!["submit"];
        all.extend_from_slice(args);
        let out = fluxgate(&inst.uri, dir.path(), &all);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        JobId::parse(String::from_utf8_lossy(&out.stdout).trim()).expect("id")
    };
    let first = submit(&["--job-name=step", "sleep", "300"]);
    inst.events_until(first, "eventlog", "start").await;
    // Same user and name: held in DEPEND while the first is active.
    let second = submit(&["--job-name=step", "--dependency=singleton", "true"]);
    let third = submit(&["--job-name=step", "--dependency=singleton", "true"]);
    let ev = inst
        .events_until(second, "eventlog", "dependency-add")
        .await;
    assert_eq!(
        ev.last().and_then(|e| e.ctx_str("description").ok()),
        Some("singleton")
    );
    // Another name is not held.
    let other = submit(&["--job-name=other", "--dependency=singleton", "true"]);
    assert_eq!(status_of(&inst.wait_clean(other).await), 0);
    let stored = stored_jobspec(&inst, second).await;
    assert_eq!(
        stored["attributes"]["system"]["dependencies"],
        serde_json::json!([{"scheme": "singleton", "value": ""}])
    );
    let held = inst.list(127).await;
    for id in [second, third] {
        let j = held.iter().find(|j| j.id == id.as_u64()).expect("listed");
        assert_eq!(j.state, "DEPEND", "{j:?}");
    }
    // Without a name: flux's words.
    let out = fluxgate(
        &inst.uri,
        dir.path(),
        &["submit", "--dependency=singleton", "true"],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("singleton jobs require a job name"),
        "{out:?}"
    );
    // The first ends: the second runs, then the third.
    end_job(&inst, first).await;
    let ev = inst.wait_clean(second).await;
    assert_eq!(status_of(&ev), 0);
    assert!(names(&ev).contains(&"dependency-remove"));
    let ev = inst.wait_clean(third).await;
    assert_eq!(status_of(&ev), 0);
    let start = |ev: &[Event]| ev.iter().find(|e| e.name == "start").map(|e| e.timestamp);
    let second_clean = inst.log(second, "eventlog").await;
    let clean2 = second_clean
        .iter()
        .find(|e| e.name == "clean")
        .map(|e| e.timestamp);
    assert!(
        start(&ev) >= clean2,
        "the third started before the second ended"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn properties_survive_a_restart() {
    let mut inst = Instance::start(2, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let out = fluxgate(
        &inst.uri,
        dir.path(),
        &["resource", "property", "add", "fast", "1"],
    );
    assert!(out.status.success());
    inst.restart_jm(true).await;
    let spec = JobspecBuilder::new(["true"]).setattr(
        "system.constraints",
        serde_json::json!({"properties": ["fast"]}),
    );
    let id = inst.submit(&spec, None).await;
    inst.wait_clean(id).await;
    assert_eq!(inst.r(id).await.ranks().to_string(), "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alloc_runs_a_command_in_a_new_instance() {
    let inst = Instance::start(2, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let out = fluxgate_command(
        &inst.uri,
        dir.path(),
        &[
            "alloc",
            "-N2",
            "sh",
            "-c",
            "test \"$FLUXGATE_URI\" != \"$PARENT\" && fluxgate run -N2 true && fluxgate resource eventlog && exit 4",
        ],
    )
    .env("PARENT", &inst.uri)
    .output()
    .expect("run alloc");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("method=\"job-info\""), "{stdout}");
    // The command ran in the job, and the job ended with it, with its exit
    // code, as flux's alloc. As flux, it has no name of its own: the
    // listing shows its command's.
    let jobs = inst.list(127).await;
    let job = jobs
        .iter()
        .find(|j| j.name == "fluxgate")
        .expect("alloc job");
    assert_eq!(job.result, "FAILED", "{job:?}");
    assert_eq!(job.waitstatus, Some(4 << 8), "{job:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_update_reaches_the_acquirer_and_the_scheduler() {
    let inst = Instance::start(1, 2).await;
    let mut res = inst.resource().await;
    let mut acquire = res
        .acquire(pb::AcquireRequest {})
        .await
        .expect("acquire")
        .into_inner();
    acquire.message().await.expect("stream").expect("first");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let expiration = (now + 120.0).floor();
    res.update(pb::ResourceUpdateRequest { expiration })
        .await
        .expect("update");
    let msg = acquire
        .message()
        .await
        .expect("stream")
        .expect("expiration");
    assert_eq!(msg.expiration, Some(expiration));
    wait_resource_update(&inst.uri, expiration).await;
    // A job with no limit gets the time left.
    let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    inst.wait_clean(id).await;
    assert_eq!(inst.r(id).await.expiration(), Some(expiration));
    // A longer one is refused at submit, as flux-core's duration validator does.
    let long = JobspecBuilder::new(["true"]).duration_secs(600.0);
    let js = long.build().expect("jobspec").to_json();
    let err = inst.submit_json(js, None, 0).await.expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("remaining time"),
        "{}",
        err.message()
    );
    // One queued before the expiration shrank is not started.
    let held = inst
        .submit(&JobspecBuilder::new(["true"]).duration_secs(90.0), Some(0))
        .await;
    res.update(pb::ResourceUpdateRequest {
        expiration: (now + 60.0).floor(),
    })
    .await
    .expect("update");
    // Nor may a pending job be updated to outlive the instance.
    let err = inst
        .jobs()
        .await
        .update(pb::UpdateRequest {
            id: held.into(),
            updates: r#"{"attributes.system.duration": 600}"#.into(),
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    inst.jobs()
        .await
        .set_urgency(pb::SetUrgencyRequest {
            id: held.into(),
            urgency: 16,
        })
        .await
        .expect("release");
    let ev = inst.wait_clean(held).await;
    let exc = ev
        .iter()
        .find(|e| e.name == "exception")
        .expect("exception");
    assert_eq!(exc.ctx("type").and_then(|v| v.as_str()), Some("alloc"));
    assert!(!ev.iter().any(|e| e.name == "start"), "{:?}", names(&ev));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_redefines_the_resources() {
    let inst = Instance::start(2, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let r = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-1"}}],"nodelist":["node[0-1]"],"properties":{"gpu":"1"},"starttime":0,"expiration":0}}"#;
    std::fs::write(dir.path().join("R.json"), r).expect("write R");
    let out = fluxgate(&inst.uri, dir.path(), &["resource", "reload", "R.json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = resource_eventlog(&inst.uri).await;
    let last_define = log
        .iter()
        .rev()
        .find(|e| e.name == "resource-define")
        .expect("resource-define");
    assert_eq!(
        last_define.ctx("method").and_then(|v| v.as_str()),
        Some("reload")
    );
    inst.wait_up(2).await;
    let spec = JobspecBuilder::new(["true"]).setattr(
        "system.constraints",
        serde_json::json!({"properties": ["gpu"]}),
    );
    let id = inst.submit(&spec, None).await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(status_of(&ev), 0);
    assert_eq!(inst.r(id).await.ranks().to_string(), "1");
    // Hostnames that are not the instance's are refused.
    let bad = r#"{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"nodelist":["other0"]}}"#;
    std::fs::write(dir.path().join("bad.json"), bad).expect("write R");
    let out = fluxgate(&inst.uri, dir.path(), &["resource", "reload", "bad.json"]);
    assert!(!out.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_of_a_pending_job_sets_the_limit_it_runs_with() {
    let inst = Instance::start(1, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = JobspecBuilder::new(["true"]).duration_secs(60.0);
    let id = inst.submit(&spec, Some(0)).await;
    let out = fluxgate(
        &inst.uri,
        dir.path(),
        &["update", &id.to_string(), "duration=+1m"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Only the duration can change.
    let out = fluxgate(
        &inst.uri,
        dir.path(),
        &["update", &id.to_string(), "name=x"],
    );
    assert!(!out.status.success());
    let mut jobs = inst.jobs().await;
    jobs.set_urgency(pb::SetUrgencyRequest {
        id: id.into(),
        urgency: 16,
    })
    .await
    .expect("urgency");
    let ev = inst.wait_clean(id).await;
    let update = ev
        .iter()
        .find(|e| e.name == "jobspec-update")
        .expect("jobspec-update");
    assert_eq!(
        update
            .ctx("attributes.system.duration")
            .and_then(|v| v.as_f64()),
        Some(120.0)
    );
    assert!(!ev.iter().any(|e| e.name == "resource-update"));
    let r = inst.r(id).await;
    let (start, end) = (r.starttime().expect("start"), r.expiration().expect("end"));
    assert!((end - start - 120.0).abs() < 1e-3, "{start} {end}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_limit_of_the_enclosing_job_ends_the_child_and_its_jobs() {
    let inst = Instance::start(1, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    script(
        dir.path(),
        "hold.sh",
        "#!/bin/sh\nfluxgate submit sleep 300 >/dev/null\nsleep 300\n",
    );
    let id = batch(&inst.uri, dir.path(), &["-N1", "-t", "4s", "hold.sh"]);
    let mut jobs = inst.jobs().await;
    let child = memo_uri(&mut jobs, id).await;
    let child_job = job_in(&child, "a running job", |j| j.state == "RUN").await;
    // A job without a limit inside ends no later than the instance.
    let r = JobManagerClientExt::r(&child, child_job).await;
    assert!(r.expiration().is_some(), "child job has no expiration");
    let mut watch = follow_eventlog(&child, child_job).await;
    let seen = until_clean(&mut watch).await;
    assert!(
        seen.iter().any(|e| e.name == "exception"),
        "{:?}",
        names(&seen)
    );
    let ev = inst.wait_clean(id).await;
    let exc = ev
        .iter()
        .find(|e| e.name == "exception")
        .expect("exception");
    assert_eq!(exc.ctx("type").and_then(|v| v.as_str()), Some("timeout"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_instance_runs_on_the_jobs_r_reranked_from_zero() {
    let inst = Instance::start(3, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    // Rank 0 is taken, so the batch job gets ranks 1-2.
    let hold = JobspecBuilder::new(["sleep", "300"]).nodes(1);
    let holder = inst.submit(&hold, None).await;
    inst.events_until(holder, "eventlog", "start").await;
    script(
        dir.path(),
        "r.sh",
        "#!/bin/sh\nfluxgate resource R\nfluxgate run -N2 true || exit 1\n",
    );
    let id = batch(&inst.uri, dir.path(), &["-N2", "r.sh"]);
    let ev = inst.wait_clean(id).await;
    let out = batch_output(dir.path(), id);
    assert_eq!(status_of(&ev), 0, "{out}");
    assert_eq!(inst.r(id).await.ranks().to_string(), "1-2");
    let line = out.lines().next().expect("R printed");
    let child = fluxgate_shared::ResourceSet::parse(line).expect("child R");
    assert_eq!(child.ranks().to_string(), "0-1");
    assert_eq!(
        child.nodelist().map(|h| h.encode()).as_deref(),
        Some("node[1-2]")
    );
    end_job(&inst, holder).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alloc_runs_a_command_on_the_jobs_first_node() {
    let inst = Instance::start(2, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let out = fluxgate_command(
        &inst.uri,
        dir.path(),
        &[
            "alloc",
            "-N2",
            "sh",
            "-c",
            "echo job=$FLUX_JOB_ID rank=$FLUX_TASK_RANK; fluxgate resource info",
        ],
    )
    .output()
    .expect("run alloc");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs = inst.list(127).await;
    let job = jobs
        .iter()
        .find(|j| j.name == "fluxgate")
        .expect("alloc job");
    assert_eq!(job.result, "COMPLETED", "{job:?}");
    // In the job, as its task 0, and the child instance has both nodes.
    let id = JobId::from(job.id);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], format!("job={id} rank=0"), "{stdout}");
    assert!(stdout.contains("2 Nodes"), "{stdout}");
    // The stored jobspec: flux's nested shape, the command in the job.
    let spec = stored_jobspec(&inst, id).await;
    let command = spec["tasks"][0]["command"].as_array().expect("command");
    assert!(command.iter().any(|a| a == "--alloc"), "{command:?}");
    assert_eq!(
        spec["attributes"]["system"]["shell"]["options"]["per-resource"],
        serde_json::json!({"type": "node"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_conf_configures_the_child_instance() {
    let inst = Instance::start(1, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    script(dir.path(), "q.sh", "#!/bin/sh\nfluxgate queue list\n");
    let id = batch(
        &inst.uri,
        dir.path(),
        &[
            "-N1",
            "--conf=queues.debug={}",
            "--conf=queues.batch={}",
            "q.sh",
        ],
    );
    let ev = inst.wait_clean(id).await;
    let out = batch_output(dir.path(), id);
    assert_eq!(status_of(&ev), 0, "{out}");
    assert!(out.contains("debug") && out.contains("batch"), "{out}");
    // As flux: the configuration is the jobspec's file conf.json.
    let spec = stored_jobspec(&inst, id).await;
    assert_eq!(
        spec["attributes"]["system"]["files"]["conf.json"]["data"],
        serde_json::json!({"queues": {"debug": {}, "batch": {}}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alloc_ends_when_its_job_is_cancelled() {
    let inst = Instance::start(1, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut alloc = fluxgate_command(&inst.uri, dir.path(), &["alloc", "-N1", "sleep", "300"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn alloc");
    let id = eventually(Duration::from_secs(30), async || {
        let jobs = inst.list(127).await;
        let alloc = jobs.iter().find(|j| j.name == "fluxgate");
        alloc
            .map(|j| JobId::from(j.id))
            .ok_or("no alloc job".to_string())
    })
    .await;
    let mut jobs = inst.jobs().await;
    memo_uri(&mut jobs, id).await;
    jobs.cancel(pb::CancelRequest {
        id: id.into(),
        note: String::new(),
    })
    .await
    .expect("cancel");
    inst.wait_clean(id).await;
    let status = exits_within(
        &mut alloc,
        Duration::from_secs(15),
        "alloc after its job was cancelled",
    )
    .await;
    assert!(!status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_instance_admits_only_its_owner() {
    let guest = GuestUser::create("ch");
    // The enclosing instance requires credentials: the job's tasks get its
    // per-job credential, from which every node derives the child's key.
    let inst = Instance::start_auth(2, 2).await;
    let owner = inst.owner_token.clone().expect("owner token");
    let dir = tempfile::tempdir().expect("tempdir");
    // The job's temporary directory is one every user may write in, where
    // the guest has put a link by the name root's credentials once took.
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let victim = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(victim.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let squat = guest.shell(
        &format!(
            "ln -s {} {}/fluxgate-0",
            victim.path().display(),
            tmp.path().display()
        ),
        &[],
    );
    assert!(squat.status.success(), "{squat:?}");
    script(
        dir.path(),
        "hold.sh",
        "#!/bin/sh\n\
         # marker-of-the-script-text\n\
         test -n \"$FLUXGATE_TOKEN\" || exit 4\n\
         fluxgate run -N2 true || exit 5\n\
         fluxgate jobs -a >/dev/null || exit 6\n\
         fluxgate submit sleep 300 >/dev/null || exit 7\n\
         sleep 300\n",
    );
    let out = fluxgate_command(&inst.uri, dir.path(), &["batch", "-N2", "hold.sh"])
        .env("FLUXGATE_TOKEN", &owner)
        .env("TMPDIR", tmp.path())
        .output()
        .expect("batch");
    assert!(
        out.status.success(),
        "batch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = JobId::parse(String::from_utf8_lossy(&out.stdout).trim()).expect("job id");
    let mut jobs = inst.jobs().await;
    let child = memo_uri(&mut jobs, id).await;
    job_in(&child, "the script's sleep running", |j| {
        j.state == "RUN" && j.name == "sleep"
    })
    .await;
    // The squatted name was neither followed nor changed, and the script's
    // text is on no command line the guest can read.
    let mode = std::fs::metadata(victim.path())
        .expect("victim")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o755, "the link's target was changed");
    assert_eq!(std::fs::read_dir(victim.path()).expect("victim").count(), 0);
    let ps = guest.shell("ps -eo args", &[]);
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(ps.contains("fluxgate instance"), "{ps}");
    assert!(!ps.contains("marker-of-the-script-text"), "{ps}");

    // Without a credential the child refuses everyone.
    let bare = JobManagerClient::connect(child.clone())
        .await
        .expect("connect")
        .list(pb::ListRequest::default())
        .await
        .expect_err("a caller without a token was served");
    assert_eq!(bare.code(), tonic::Code::Unauthenticated, "{bare:?}");
    // The owner reaches it through proxy, which finds the kept token.
    let out = fluxgate_command(
        &inst.uri,
        dir.path(),
        &[
            "proxy",
            &id.to_string(),
            "sh",
            "-c",
            "fluxgate jobs --no-header",
        ],
    )
    .env("FLUXGATE_TOKEN", &owner)
    .output()
    .expect("proxy");
    assert!(
        out.status.success(),
        "proxy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("sleep"), "{listed}");
    let kept = fluxgate_os::private::instance_token_path(nix::unistd::getuid().as_raw(), &child);
    assert!(kept.exists(), "{} missing", kept.display());
    // Another user on this machine can neither call it nor read its token.
    let f = binary("fluxgate");
    let out = guest.shell(
        &format!("{} jobs -a", f.display()),
        &[("FLUXGATE_URI", child.as_str())],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("requires credentials"), "{err}");
    let out = guest.shell(&format!("cat {}", kept.display()), &[]);
    assert!(!out.status.success(), "the guest read the child's token");
    end_job(&inst, id).await;
    assert!(!kept.exists(), "{} outlived the instance", kept.display());
}

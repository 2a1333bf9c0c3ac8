//! The job journal (`JobManager.Journal`): a snapshot of the active jobs as
//! List shows them, a sentinel, then every job's events as they commit; the
//! owner of the instance sees every line as stored, a guest sees its own
//! jobs' lines and of others' jobs no more than List shows.

use std::time::Duration;

use fluxgate_integration_tests::{Instance, eventually};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::JobspecBuilder;
use fluxgate_shared::{Event, JobId};
use tonic::Streaming;

/// A guest's uid with no account: its jobs are held, they never run.
const GUEST: u32 = 4242;

/// Each read of a journal waits at most this long.
const READ_LIMIT: Duration = Duration::from_secs(30);

fn held(argv: &[&str]) -> pb::SubmitRequest {
    pb::SubmitRequest {
        jobspec: JobspecBuilder::new(argv.iter().copied())
            .build()
            .expect("jobspec")
            .to_json(),
        urgency: Some(0),
        ..Default::default()
    }
}

async fn next(stream: &mut Streaming<pb::JobJournalEntry>) -> pb::JobJournalEntry {
    tokio::time::timeout(READ_LIMIT, stream.message())
        .await
        .expect("a journal entry in time")
        .expect("the journal stream")
        .expect("the journal goes on")
}

/// The snapshot rows, read up to the sentinel.
async fn snapshot(stream: &mut Streaming<pb::JobJournalEntry>) -> Vec<pb::JobSummary> {
    let mut rows = Vec::new();
    loop {
        let e = next(stream).await;
        match e.kind() {
            pb::JobJournalKind::Snapshot => rows.push(e.job.expect("a snapshot row")),
            pb::JobJournalKind::Sentinel => return rows,
            k => panic!("{k:?} before the sentinel"),
        }
    }
}

/// Events up to and including `name` of job `until`.
async fn events_until(
    stream: &mut Streaming<pb::JobJournalEntry>,
    until: JobId,
    name: &str,
) -> Vec<(JobId, Event, Option<pb::JobSummary>)> {
    let mut out = Vec::new();
    loop {
        let e = next(stream).await;
        assert_eq!(e.kind(), pb::JobJournalKind::Event, "{e:?}");
        let event = Event::parse_json(&e.event).expect("an RFC 18 line");
        let id = JobId::from(e.id);
        let done = id == until && event.name.as_str() == name;
        out.push((id, event, e.job));
        if done {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_streams_state_changes_and_a_guest_sees_no_more_than_list() {
    let inst = Instance::start_auth(1, 2).await;
    let guest_token = inst.token("guest", GUEST, None);
    let mut owner = inst.jobs().await;
    let mut guest = inst.jobs_as(Some(&guest_token)).await;

    // An active job before anyone watches: it is in both snapshots.
    let before = JobId::from(
        owner
            .submit(held(&["sleep", "1"]))
            .await
            .expect("submit")
            .into_inner()
            .id,
    );
    let mut as_owner = owner
        .journal(pb::JobJournalRequest {})
        .await
        .expect("the owner's journal")
        .into_inner();
    let mut as_guest = guest
        .journal(pb::JobJournalRequest {})
        .await
        .expect("a guest's journal")
        .into_inner();
    let listed = inst.list(0).await;
    for rows in [snapshot(&mut as_owner).await, snapshot(&mut as_guest).await] {
        assert_eq!(
            rows, listed,
            "the snapshot is List's rows of the active jobs"
        );
        assert!(rows.iter().any(|r| JobId::from(r.id) == before));
    }

    // The owner memos its held job (List shows no memo), the guest submits
    // a job of its own and memos it, and a job runs to its end.
    owner
        .memo(pb::MemoRequest {
            id: before.into(),
            memo: r#"{"secret":"owner only"}"#.into(),
            ..Default::default()
        })
        .await
        .expect("memo");
    let mine = JobId::from(
        guest
            .submit(held(&["true"]))
            .await
            .expect("guest submit")
            .into_inner()
            .id,
    );
    guest
        .memo(pb::MemoRequest {
            id: mine.into(),
            memo: r#"{"note":"mine"}"#.into(),
            ..Default::default()
        })
        .await
        .expect("guest memo");
    let ran = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    inst.wait_clean(ran).await;

    let seen_by_owner = events_until(&mut as_owner, ran, "clean").await;
    let seen_by_guest = events_until(&mut as_guest, ran, "clean").await;
    let names = |seen: &[(JobId, Event, Option<pb::JobSummary>)], id: JobId| -> Vec<String> {
        seen.iter()
            .filter(|(j, _, _)| *j == id)
            .map(|(_, e, _)| e.name.as_str().to_string())
            .collect()
    };

    // The owner sees every line as stored.
    // (The held jobs' later steps, depend and priority, may land on either
    // side of the subscription; the memos come after it.)
    assert!(names(&seen_by_owner, before).contains(&"memo".to_string()));
    let owner_mine = names(&seen_by_owner, mine);
    for step in ["submit", "validate", "memo"] {
        assert!(
            owner_mine.iter().any(|n| n == step),
            "{step} in {owner_mine:?}"
        );
    }
    let stored = inst.log(ran, "eventlog").await;
    let stored_names: Vec<&str> = stored.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names(&seen_by_owner, ran), stored_names);
    let (_, submit, row) = seen_by_owner
        .iter()
        .find(|(j, e, _)| *j == ran && e.name.as_str() == "submit")
        .expect("the submit event");
    assert_eq!(*submit, stored[0], "the line as stored");
    let row = row.as_ref().expect("submit carries the job's row");
    assert_eq!((row.ntasks, row.nnodes, row.name.as_str()), (1, 1, "true"));

    // The guest sees its own job's lines, and of the others only what List
    // reflects: no memo, no exec steps, no context List does not show.
    let guest_before = names(&seen_by_guest, before);
    assert!(
        !guest_before.iter().any(|n| n == "memo"),
        "{guest_before:?}"
    );
    assert_eq!(
        names(&seen_by_guest, mine),
        owner_mine,
        "a guest's own job in full"
    );
    let guest_ran = names(&seen_by_guest, ran);
    for step in ["submit", "alloc", "start", "finish", "clean"] {
        assert!(
            guest_ran.iter().any(|n| n == step),
            "{step} in {guest_ran:?}"
        );
    }
    for name in ["release", "free", "memo"] {
        assert!(
            !guest_ran.iter().any(|n| n == name),
            "{name} in {guest_ran:?}"
        );
    }
    for (id, event, _) in seen_by_guest.iter().filter(|(j, _, _)| *j == ran) {
        let keys: Vec<&str> = event
            .context
            .as_ref()
            .map(|c| c.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let allowed = ["userid", "urgency", "priority", "annotations", "status"];
        assert!(
            keys.iter().all(|k| allowed.contains(k)),
            "job {id} event {} shows {keys:?}",
            event.name.as_str()
        );
    }
    // The row a guest gets with `submit` is the row its List gives.
    let (_, _, guest_row) = seen_by_guest
        .iter()
        .find(|(j, e, _)| *j == ran && e.name.as_str() == "submit")
        .expect("the guest sees the submit");
    let guest_list = guest
        .list(pb::ListRequest {
            states: 0x7f,
            ..Default::default()
        })
        .await
        .expect("guest list")
        .into_inner()
        .jobs;
    let listed = guest_list
        .iter()
        .find(|r| JobId::from(r.id) == ran)
        .expect("List shows the job to a guest");
    let guest_row = guest_row.as_ref().expect("a row");
    assert_eq!(
        (
            guest_row.id,
            guest_row.userid,
            &guest_row.name,
            guest_row.ntasks
        ),
        (listed.id, listed.userid, &listed.name, listed.ntasks)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_falls_behind_is_told_to_resync_and_gets_a_fresh_snapshot() {
    let inst = Instance::start(1, 2).await;
    // The reader's HTTP/2 stream window bounds what the transport holds for
    // it while it does not read (hyper's default, 2 MiB, holds thousands of
    // entries): with 64 KiB the job manager must fall behind the hub.
    let mut jobs = inst.jobs_with_stream_window(64 << 10).await;
    let mut stream = jobs
        .journal(pb::JobJournalRequest {})
        .await
        .expect("journal")
        .into_inner();
    assert!(snapshot(&mut stream).await.is_empty());

    // Held jobs write submit, validate, depend and priority: four lines
    // each, past the hub's 16384 while the reader does not read.
    const JOBS: usize = 5000;
    let mut submitter = inst.jobs().await;
    let mut last = JobId::from(0u64);
    for _ in 0..JOBS / 1000 {
        let many = pb::SubmitManyRequest {
            jobs: (0..1000).map(|_| held(&["true"])).collect(),
        };
        let r = submitter.submit_many(many).await.expect("submit many");
        for r in r.into_inner().results {
            match r.result {
                Some(pb::submit_result::Result::Id(id)) => last = last.max(JobId::from(id)),
                other => panic!("a job was not submitted: {other:?}"),
            }
        }
    }
    // Wait until the last of them is held in SCHED, as List shows.
    eventually(READ_LIMIT, async || {
        let list = inst.list(0).await;
        let held = list.iter().filter(|j| j.state == "SCHED").count();
        (held >= JOBS)
            .then_some(())
            .ok_or(format!("{held} of {JOBS} jobs held"))
    })
    .await;
    // List shows a state before its lines are durable, and lines are
    // published only then: wait until the last job's last line is stored.
    eventually(READ_LIMIT, async || {
        let log = inst.log(last, "eventlog").await;
        let stored = log.iter().any(|e| e.name.as_str() == "priority");
        stored
            .then_some(())
            .ok_or(format!("lines never stored: {log:?}"))
    })
    .await;

    // What was buffered, then RESYNC, then every held job in a snapshot.
    loop {
        let e = next(&mut stream).await;
        match e.kind() {
            pb::JobJournalKind::Event => {}
            pb::JobJournalKind::Resync => break,
            k => panic!("{k:?} before the resync"),
        }
    }
    let rows = snapshot(&mut stream).await;
    assert_eq!(rows.len(), JOBS, "the fresh snapshot has every active job");
    assert!(rows.iter().all(|r| r.state == "SCHED"));
}

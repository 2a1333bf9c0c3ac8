//! Soak: many simulated jobs through an instance whose job manager is killed
//! with SIGKILL and restarted several times while they flow. At the end every
//! acknowledged job is INACTIVE exactly once with a whole eventlog (strict
//! parse, one `submit` first, one `clean` last, replays to INACTIVE), and the
//! resource eventlog parses and replays.
//!
//! CI runs a short version. The long one (the 100,000 jobs) is
//! `FLUXGATE_SOAK_JOBS=100000 FLUXGATE_SOAK_KILLS=5 cargo test -p
//! fluxgate-integration-tests --test soak -- --nocapture`; it prints its figures.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use fluxgate_integration_tests::{Instance, eventually, stored_log};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::eventlog::parse_eventlog;
use fluxgate_shared::job::{JobState, replay};
use fluxgate_shared::jobspec::JobspecBuilder;
use fluxgate_shared::resource::{ResourceState, replay_into};

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_survive_repeated_sigkill_of_the_job_manager() {
    let total = env_num("FLUXGATE_SOAK_JOBS", 2000);
    let kills = env_num("FLUXGATE_SOAK_KILLS", 3);
    let batch = 250.min(total.max(1));
    let started = Instant::now();
    let mut inst = Instance::start(4, 64).await;
    let jobspec = JobspecBuilder::new(["true"])
        .setattr_kv("system.exec.test.run_duration=0")
        .build()
        .unwrap()
        .to_json();

    // Kill after roughly every total/(kills+1) acknowledged submits; a
    // submit batch cut off by the kill counts only what was acknowledged.
    let mut acked: Vec<u64> = Vec::with_capacity(total);
    let mut killed = 0;
    let mut lost_batches = 0;
    while acked.len() < total {
        let mut jobs = inst.jobs().await;
        let n = batch.min(total - acked.len());
        let req = pb::SubmitManyRequest {
            jobs: (0..n)
                .map(|_| pb::SubmitRequest {
                    jobspec: jobspec.clone(),
                    urgency: None,
                    flags: 0,
                    ..Default::default()
                })
                .collect(),
        };
        let kill_at = (killed + 1) * total / (kills + 1);
        if killed < kills && acked.len() + n > kill_at {
            // Kill while this batch is in flight.
            let sent = tokio::spawn(async move { jobs.submit_many(req).await });
            tokio::time::sleep(Duration::from_millis(5)).await;
            inst.restart_jm(false).await;
            killed += 1;
            match sent.await.unwrap() {
                Ok(r) => acked.extend(ids(r.into_inner())),
                Err(_) => lost_batches += 1,
            }
            continue;
        }
        let r = jobs.submit_many(req).await.expect("submit");
        acked.extend(ids(r.into_inner()));
    }
    let submitted_in = started.elapsed();

    // Every acknowledged job reaches INACTIVE, and appears once.
    let within = Duration::from_secs(60 + total as u64 / 20);
    eventually(within, async || match inst.list(63).await.len() {
        0 => Ok(()),
        active => Err(format!(
            "{active} jobs still active; {} acknowledged",
            acked.len()
        )),
    })
    .await;
    let list = inst.list(127).await;
    assert!(list.iter().all(|j| j.state == "INACTIVE"));
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for j in &list {
        *seen.entry(j.id).or_default() += 1;
    }
    assert!(seen.values().all(|n| *n == 1), "a job is listed twice");
    for id in &acked {
        assert_eq!(seen.get(id), Some(&1), "acknowledged job {id} is missing");
    }
    let all_done_in = started.elapsed();

    // Each eventlog is whole.
    let mut jobs = inst.jobs().await;
    let mut events_checked = 0usize;
    for j in &list {
        let events = stored_log(&mut jobs, JobId::from(j.id), "eventlog").await;
        let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names.first(), Some(&"submit"), "{}: {names:?}", j.id);
        assert_eq!(names.last(), Some(&"clean"), "{}: {names:?}", j.id);
        for once in ["submit", "validate", "clean", "free"] {
            let n = names.iter().filter(|n| **n == once).count();
            assert!(n <= 1, "{}: {once} {n} times: {names:?}", j.id);
        }
        let job = replay(&events).unwrap_or_else(|e| panic!("{}: {e}", j.id));
        assert_eq!(job.state(), JobState::Inactive, "{}", j.id);
        events_checked += events.len();
    }

    // The resource eventlog is whole and replays.
    let mut res = inst.resource().await;
    let mut stream = res
        .eventlog(pb::ResourceEventlogRequest { follow: false })
        .await
        .unwrap()
        .into_inner();
    let mut text = String::new();
    while let Some(entry) = stream.message().await.unwrap() {
        text.push_str(&entry.line);
        text.push('\n');
    }
    let resource_events = parse_eventlog(&text).expect("resource eventlog parses");
    let defines = resource_events
        .iter()
        .filter(|e| e.name == "resource-define")
        .count();
    assert!(
        (1..=killed + 1).contains(&defines),
        "{defines} resource-define events for {} starts",
        killed + 1
    );
    for e in &resource_events {
        assert!(
            ["resource-define", "resource-update", "drain", "undrain"].contains(&e.name.as_str()),
            "{} is not a persistent resource event",
            e.name
        );
    }
    let mut state = ResourceState::new();
    replay_into(&mut state, &resource_events).expect("resource eventlog replays");
    assert!(state.drained().is_empty());

    eprintln!(
        "soak: {} jobs acknowledged ({} listed), {killed} SIGKILL restarts, {lost_batches} \
         batches cut off; submitted in {:.1}s, all inactive after {:.1}s; {events_checked} \
         job events and {} resource events checked in {:.1}s total",
        acked.len(),
        list.len(),
        submitted_in.as_secs_f64(),
        all_done_in.as_secs_f64(),
        resource_events.len(),
        started.elapsed().as_secs_f64()
    );
}

fn ids(r: pb::SubmitManyResponse) -> Vec<u64> {
    r.results
        .into_iter()
        .filter_map(|res| match res.result {
            Some(pb::submit_result::Result::Id(id)) => Some(id),
            _ => None,
        })
        .collect()
}

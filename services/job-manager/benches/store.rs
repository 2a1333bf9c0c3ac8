//! The store: what a submit's commit costs, how far group commit spreads
//! one fsync, and the reads a job manager does of a large store.
//!
//! - `store/commit 1 submit`: one batch (a new job and its submit event)
//!   committed and acknowledged alone, so one fsync per batch.
//! - `store/group commit 1000 submits`: 1,000 such batches enqueued at once,
//!   then every acknowledgement awaited; the commits and events per commit
//!   it achieved are printed from `Store::stats`.
//! - `store/read_log 12 lines (100k jobs)`: one inactive job's eventlog from
//!   a store holding 100,000 of them, a different job each time.
//! - `store/load_jobs 10k active`: recovery's read of a store holding
//!   10,000 pending jobs (jobspec and eventlog each).
//!
//! Commits wait for fsync, so the stores live on a disk, not in memory:
//! under `FLUXGATE_BENCH_DIR` (default `/var/tmp`), never in a tmpfs.
//!
//! `cargo bench -p fluxgate-job-manager --bench store -- --warm-up-time 1 --measurement-time 3`

use std::path::PathBuf;
use std::time::Instant;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use fluxgate_job_manager::store::{Batch, CommitStats, Log, SqliteStore, Store, Write};
use fluxgate_shared::jobspec::JobspecBuilder;
use tokio::runtime::Runtime;

const R: &str = r#"{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"starttime":0,"expiration":0,"nodelist":["node0"]}}"#;

const SUBMIT: &str = r#"{"userid":1000,"urgency":16,"flags":0,"version":1}"#;

/// An inactive job's eventlog as the job manager writes it, with prolog.
const INACTIVE_LOG: [(&str, &str); 12] = [
    ("submit", SUBMIT),
    ("validate", ""),
    ("depend", ""),
    ("priority", r#"{"priority":16}"#),
    ("alloc", ""),
    ("prolog-start", r#"{"description":"job-manager.prolog"}"#),
    (
        "prolog-finish",
        r#"{"description":"job-manager.prolog","status":0}"#,
    ),
    ("start", ""),
    ("finish", r#"{"status":0}"#),
    ("release", r#"{"ranks":"all","final":true}"#),
    ("free", ""),
    ("clean", ""),
];

/// Writes per commit while filling a store: large, as a restore would.
const FILL_BATCH: usize = 50_000;

fn bench_dir() -> PathBuf {
    std::env::var_os("FLUXGATE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp"))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

fn line(t: f64, name: &str, context: &str) -> String {
    if context.is_empty() {
        format!(r#"{{"timestamp":{t:.6},"name":"{name}"}}"#)
    } else {
        format!(r#"{{"timestamp":{t:.6},"name":"{name}","context":{context}}}"#)
    }
}

fn jobspec() -> String {
    JobspecBuilder::new(["true"])
        .build()
        .expect("jobspec")
        .to_json()
}

/// Ids in FLUID shape: time in the high bits, increasing.
fn job_id(n: u64) -> u64 {
    (n + 1) << 22
}

/// What a submit makes durable: the job and its first event.
fn submit(id: u64, jobspec: &str) -> Batch {
    vec![
        Write::NewJob {
            id,
            userid: 1000,
            jobspec: jobspec.to_owned(),
        },
        Write::Append {
            id,
            log: Log::Main,
            line: line(1_700_000_000.0, "submit", SUBMIT),
        },
    ]
}

/// A store in a fresh directory holding `jobs` jobs: inactive ones with the
/// twelve-line eventlog, R and a summary, or pending ones (four lines).
fn filled(rt: &Runtime, jobs: u64, inactive: bool) -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir_in(bench_dir()).expect("bench directory");
    let store = SqliteStore::open(&dir.path().join("store.sqlite")).expect("store");
    let jobspec = jobspec();
    let log = if inactive {
        &INACTIVE_LOG[..]
    } else {
        &INACTIVE_LOG[..4]
    };
    let started = Instant::now();
    let mut batch = Vec::new();
    for n in 0..jobs {
        let id = job_id(n);
        let t = 1_700_000_000.0 + n as f64 * 1e-3;
        batch.push(Write::NewJob {
            id,
            userid: 1000,
            jobspec: jobspec.clone(),
        });
        for (i, (name, context)) in log.iter().enumerate() {
            batch.push(Write::Append {
                id,
                log: Log::Main,
                line: line(t + i as f64 * 1e-4, name, context),
            });
        }
        if inactive {
            batch.push(Write::SetR { id, r: R.into() });
            batch.push(Write::Summary {
                id,
                summary: format!(
                    r#"{{"userid":1000,"name":"true","result":"COMPLETED","waitstatus":0,"t_submit":{t:.6},"t_run":{:.6},"t_inactive":{:.6},"urgency":16,"ntasks":1,"nnodes":1,"nodelist":"node0","waitable":false}}"#,
                    t + 7e-4,
                    t + 1.1e-3
                ),
            });
        }
        if batch.len() >= FILL_BATCH {
            rt.block_on(store.commit(std::mem::take(&mut batch)))
                .expect("fill");
        }
    }
    if !batch.is_empty() {
        rt.block_on(store.commit(batch)).expect("fill");
    }
    eprintln!(
        "store: {jobs} {} jobs written in {:.1} s",
        if inactive { "inactive" } else { "pending" },
        started.elapsed().as_secs_f64()
    );
    (dir, store)
}

fn per_commit(before: CommitStats, after: CommitStats) -> String {
    let commits = (after.commits - before.commits).max(1) as f64;
    format!(
        "{} commits; per commit {:.1} batches (one submit event each), {:.1} writes",
        after.commits - before.commits,
        (after.batches - before.batches) as f64 / commits,
        (after.writes - before.writes) as f64 / commits,
    )
}

fn commit(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir_in(bench_dir()).expect("bench directory");
    let store = SqliteStore::open(&dir.path().join("store.sqlite")).expect("store");
    let jobspec = jobspec();
    let mut next = 0u64;
    let mut group = c.benchmark_group("store");
    // Milliseconds per iteration: criterion's growing sample sizes would
    // run far past the measurement time.
    group.sampling_mode(SamplingMode::Flat).sample_size(10);

    let before = store.stats();
    group.bench_function("commit 1 submit", |b| {
        b.iter(|| {
            next += 1;
            rt.block_on(store.commit(submit(job_id(next), &jobspec)))
                .expect("commit")
        })
    });
    eprintln!(
        "store/commit 1 submit: {}",
        per_commit(before, store.stats())
    );

    let before = store.stats();
    group.bench_function("group commit 1000 submits", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut acks = Vec::with_capacity(1000);
                for _ in 0..1000 {
                    next += 1;
                    let batch = submit(job_id(next), &jobspec);
                    acks.push(store.enqueue(batch).await.expect("enqueue"));
                }
                for ack in acks {
                    ack.wait().await.expect("durable");
                }
            })
        })
    });
    eprintln!(
        "store/group commit 1000 submits: {}",
        per_commit(before, store.stats())
    );
    group.finish();
}

fn reads(c: &mut Criterion) {
    let rt = runtime();
    const INACTIVE: u64 = 100_000;
    let (_dir, store) = filled(&rt, INACTIVE, true);
    // A prime step visits every job in a scattered order, as reads of
    // inactive jobs arrive, rather than walking the index in order.
    let mut n = 0u64;
    c.bench_function("store/read_log 12 lines (100k jobs)", |b| {
        b.iter(|| {
            n = (n + 48_271) % INACTIVE;
            let lines = store
                .read_log(job_id(n), Log::Main)
                .expect("read")
                .expect("a job with a log");
            debug_assert_eq!(lines.len(), INACTIVE_LOG.len());
            lines
        })
    });
    drop(store);

    const ACTIVE: u64 = 10_000;
    let (_dir, store) = filled(&rt, ACTIVE, false);
    let mut group = c.benchmark_group("store");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    group.bench_function("load_jobs 10k active", |b| {
        b.iter(|| {
            let jobs = store.load_jobs().expect("load");
            assert_eq!(jobs.len() as u64, ACTIVE);
            jobs
        })
    });
    group.finish();
}

criterion_group!(benches, commit, reads);
criterion_main!(benches);

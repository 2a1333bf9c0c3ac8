//! The embedded store: durability across reopen, atomic batches, group commit,
//! and refusal to open what is not a healthy fluxgate store.

use std::sync::Arc;

use fluxgate_job_manager::store::{Log, LogPos, SqliteStore, Store, StoreError, Urgency, Write};

fn new_job(id: u64) -> Write {
    Write::NewJob {
        id,
        userid: 1000,
        jobspec: format!(r#"{{"version":1,"id":{id}}}"#),
    }
}

fn line(name: &str) -> String {
    format!(r#"{{"timestamp":1700000000.5,"name":"{name}"}}"#)
}

fn append(id: u64, log: Log, name: &str) -> Write {
    Write::Append {
        id,
        log,
        line: line(name),
    }
}

#[tokio::test]
async fn committed_writes_survive_reopen_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .commit(vec![
                new_job(7),
                append(7, Log::Main, "submit"),
                append(7, Log::Main, "validate"),
            ])
            .await
            .unwrap();
        store
            .commit(vec![
                append(7, Log::Exec, "init"),
                Write::SetR {
                    id: 7,
                    r: r#"{"version":1}"#.into(),
                },
                Write::ResourceEvent {
                    line: line("restart"),
                },
                Write::Meta {
                    key: "last_id".into(),
                    value: "7".into(),
                },
            ])
            .await
            .unwrap();
        store.close();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.read_log(7, Log::Main).unwrap(),
        Some(vec![line("submit"), line("validate")])
    );
    assert_eq!(
        store.read_log(7, Log::Exec).unwrap(),
        Some(vec![line("init")])
    );
    assert_eq!(store.read_log(7, Log::Output).unwrap(), None);
    assert_eq!(store.read_log(8, Log::Main).unwrap(), None);
    let job = store.read_job(7).unwrap().unwrap();
    assert_eq!(job.userid, 1000);
    assert_eq!(job.r.as_deref(), Some(r#"{"version":1}"#));
    assert_eq!(job.eventlog.len(), 2);
    assert_eq!(store.resource_eventlog().unwrap(), vec![line("restart")]);
    assert_eq!(store.meta("last_id").unwrap().as_deref(), Some("7"));
}

#[tokio::test]
async fn a_failing_batch_leaves_nothing_and_spares_its_neighbours() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    store
        .commit(vec![new_job(1), append(1, Log::Main, "submit")])
        .await
        .unwrap();

    // Same id again: the new job and its events are refused whole.
    let dup = store.commit(vec![new_job(1), append(1, Log::Main, "validate")]);
    // An append to a job that does not exist: the job created in the same batch goes too.
    let unknown = store.commit(vec![new_job(2), append(99, Log::Main, "submit")]);
    let good = store.commit(vec![new_job(3), append(3, Log::Main, "submit")]);
    let (dup, unknown, good) = tokio::join!(dup, unknown, good);
    assert_eq!(dup, Err(StoreError::Duplicate(1)));
    assert_eq!(unknown, Err(StoreError::UnknownJob(99)));
    assert_eq!(good, Ok(()));

    assert_eq!(
        store.read_log(1, Log::Main).unwrap(),
        Some(vec![line("submit")])
    );
    assert!(store.read_job(2).unwrap().is_none());
    let ids: Vec<u64> = store.load_jobs().unwrap().iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![1, 3]);

    // The writer is left with no transaction or savepoint open: the next commit lands.
    store
        .commit(vec![new_job(4), append(4, Log::Main, "submit")])
        .await
        .unwrap();
    let ids: Vec<u64> = store.load_jobs().unwrap().iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![1, 3, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_share_commits() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let mut tasks = Vec::new();
    for id in 1..=2000u64 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            store
                .commit(vec![new_job(id), append(id, Log::Main, "submit")])
                .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let stats = store.stats();
    assert_eq!(stats.batches, 2000);
    assert_eq!(stats.writes, 4000);
    // Waiting batches are folded together rather than fsynced one by one.
    assert!(stats.commits < stats.batches, "{stats:?}");
    let jobs = store.load_jobs().unwrap();
    assert_eq!(jobs.len(), 2000);
    assert!(jobs.iter().all(|j| j.eventlog == vec![line("submit")]));
}

#[tokio::test]
async fn lazy_batches_ride_the_next_urgent_commit_or_commit_alone_soon() {
    let dir = tempfile::tempdir().unwrap();
    // A window no test machine outlasts: the lazy batches wait for the urgent one.
    let long = std::time::Duration::from_secs(600);
    let store = SqliteStore::open_lazy_window(&dir.path().join("s.db"), long).unwrap();
    store.commit(vec![new_job(1)]).await.unwrap();
    let before = store.stats().commits;
    // Nobody waits for these: they wait for company.
    let mut acks = Vec::new();
    for name in ["init", "starting", "complete"] {
        acks.push(
            store
                .enqueue_with(vec![append(1, Log::Exec, name)], Urgency::Lazy)
                .await
                .unwrap(),
        );
    }
    // An urgent batch takes them into its own commit, in order.
    store
        .commit(vec![append(1, Log::Main, "alloc")])
        .await
        .unwrap();
    for ack in acks {
        ack.wait().await.unwrap();
    }
    assert_eq!(store.stats().commits, before + 1);
    store.close();
    // Alone, a lazy batch still becomes durable, within the window.
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let before = store.stats().commits;
    store
        .enqueue_with(vec![append(1, Log::Exec, "done")], Urgency::Lazy)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(store.stats().commits, before + 1);
    let exec = store.read_log(1, Log::Exec).unwrap().unwrap();
    let names = ["init", "starting", "complete", "done"].map(line);
    assert_eq!(exec, names);
}

#[test]
fn a_foreign_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let text = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &text).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), text);

    // Another application's SQLite database.
    let other = dir.path().join("other.db");
    foreign_sqlite_file(&other);
    let err = SqliteStore::open(&other).unwrap_err();
    assert!(err.to_string().contains("not a fluxgate store"), "{err}");
}

#[tokio::test]
async fn a_damaged_store_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        for id in 1..=200u64 {
            store
                .commit(vec![new_job(id), append(id, Log::Main, "submit")])
                .await
                .unwrap();
        }
        store.close();
    }
    // Overwrite a page in the middle of the file with garbage.
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 8192, "store is {} bytes", bytes.len());
    for b in &mut bytes[4096..8192] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err}");
}

/// A closed store of 200 jobs whose last page is overwritten with garbage.
async fn store_with_a_damaged_last_page(path: &std::path::Path) {
    {
        let store = SqliteStore::open(path).unwrap();
        for id in 1..=200u64 {
            store
                .commit(vec![new_job(id), append(id, Log::Main, "submit")])
                .await
                .unwrap();
        }
        store.close();
    }
    let mut bytes = std::fs::read(path).unwrap();
    let n = bytes.len();
    assert!(n > 8192, "store is {n} bytes");
    for b in &mut bytes[n - 4096..] {
        *b = 0xA5;
    }
    std::fs::write(path, &bytes).unwrap();
}

#[tokio::test]
async fn a_large_store_closed_cleanly_opens_at_once_and_is_checked_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    store_with_a_damaged_last_page(&path).await;
    // Small enough to check at open: refused there.
    assert!(matches!(
        SqliteStore::open(&path).unwrap_err(),
        StoreError::Open { .. }
    ));
    // Counted as large: opened, and the check that is owed finds the damage.
    let store = SqliteStore::open_with(&path, 0).unwrap();
    assert!(store.check_owed());
    let err = store.check().unwrap().run().unwrap_err();
    assert!(
        matches!(&err, StoreError::Open { reason, .. } if reason.contains("damaged")),
        "{err}"
    );
}

#[tokio::test]
async fn a_store_not_closed_cleanly_is_checked_at_open_however_large() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store.commit(vec![new_job(1)]).await.unwrap();
        store.close();
    }
    // Clean: nothing owed when small, owed when counted as large.
    assert!(!SqliteStore::open(&path).unwrap().check_owed());
    let store = SqliteStore::open_with(&path, 0).unwrap();
    assert!(store.check_owed());
    store.check().unwrap().run().unwrap();
    // While a job manager holds it, and after a crash, it is not clean.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let clean: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'clean_close'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(clean, "0");
    drop(conn);
    std::mem::forget(store);
    let store = SqliteStore::open_with(&path, 0).unwrap();
    assert!(!store.check_owed(), "checked at open after a crash");
}

#[tokio::test]
async fn an_interrupted_check_still_closes_the_store_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store.commit(vec![new_job(1)]).await.unwrap();
        store.close();
    }
    let store = SqliteStore::open_with(&path, 0).unwrap();
    assert!(store.check_owed());
    let check = store.check().unwrap();
    // A shutdown before the check ends: the check no longer holds the store.
    check.interrupt_handle().interrupt();
    store.close();
    let _ = check.run();
    let store = SqliteStore::open_with(&path, 0).unwrap();
    assert!(
        store.check_owed(),
        "closed cleanly, so the check is owed again"
    );
}

/// A healthy SQLite database that another application made: a fresh store whose
/// application id (header offset 68, big-endian) is cleared.
fn foreign_sqlite_file(path: &std::path::Path) {
    SqliteStore::open(path).unwrap().close();
    let mut bytes = std::fs::read(path).unwrap();
    bytes[68..72].copy_from_slice(&0u32.to_be_bytes());
    std::fs::write(path, &bytes).unwrap();
}

fn summary(t_inactive: f64, waitable: bool) -> String {
    format!(r#"{{"name":"done","t_inactive":{t_inactive},"waitable":{waitable}}}"#)
}

#[tokio::test]
async fn inactive_jobs_stay_in_the_store_and_are_read_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    for id in 1..=4 {
        store
            .commit(vec![new_job(id), append(id, Log::Main, "submit")])
            .await
            .unwrap();
    }
    store
        .commit(vec![
            Write::Summary {
                id: 1,
                summary: summary(30.0, false),
            },
            Write::Summary {
                id: 2,
                summary: summary(10.0, true),
            },
            // No readable time: recovery must read the job whole.
            Write::Summary {
                id: 3,
                summary: r#"{"name":"x"}"#.into(),
            },
        ])
        .await
        .unwrap();
    let missing = store.commit(vec![Write::Summary {
        id: 9,
        summary: "{}".into(),
    }]);
    assert_eq!(missing.await, Err(StoreError::UnknownJob(9)));

    let jobs = store.load_jobs().unwrap();
    let ids: Vec<u64> = jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![3, 4]);
    assert_eq!(jobs[0].summary.as_deref(), Some(r#"{"name":"x"}"#));
    assert_eq!(jobs[0].eventlog, vec![line("submit")]);
    assert!(jobs[1].jobspec.contains(r#""id":4"#));

    assert_eq!(store.inactive_count().unwrap(), 2);
    assert_eq!(store.inactive_before(20.0).unwrap(), 1);
    assert_eq!(
        store.oldest_inactive(10).unwrap(),
        vec![(10.0, 2), (30.0, 1)]
    );
    assert_eq!(store.oldest_inactive(1).unwrap(), vec![(10.0, 2)]);
    assert_eq!(store.waitable_ids().unwrap(), vec![2]);
    assert_eq!(store.summary(1).unwrap(), Some(Some(summary(30.0, false))));
    assert_eq!(store.summary(4).unwrap(), Some(None));
    assert_eq!(store.summary(9).unwrap(), None);
    assert_eq!(store.max_job_id().unwrap(), Some(4));

    let mut seen = Vec::new();
    store
        .scan_inactive(None, None, &mut |id, _| {
            seen.push(id);
            true
        })
        .unwrap();
    assert_eq!(seen, vec![2, 1]);
    seen.clear();
    store
        .scan_inactive(None, Some(20.0), &mut |id, _| {
            seen.push(id);
            true
        })
        .unwrap();
    assert_eq!(seen, vec![1]);
    seen.clear();
    store
        .scan_inactive(Some(1000), None, &mut |id, _| {
            seen.push(id);
            false
        })
        .unwrap();
    assert_eq!(seen, vec![2], "the scan stops when asked");

    // Reaping rewrites the summary; the waitable index follows it.
    store
        .commit(vec![Write::Summary {
            id: 2,
            summary: summary(10.0, false),
        }])
        .await
        .unwrap();
    assert!(store.waitable_ids().unwrap().is_empty());
    // Reads of one job still find everything.
    let one = store.read_job(1).unwrap().unwrap();
    assert_eq!(one.eventlog, vec![line("submit")]);
    assert!(one.jobspec.contains(r#""id":1"#));
}

#[tokio::test]
async fn ids_in_the_upper_half_are_the_largest() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    assert_eq!(store.max_job_id().unwrap(), None);
    for id in [5, u64::MAX - 1, 1 << 63, 7] {
        store.commit(vec![new_job(id)]).await.unwrap();
    }
    assert_eq!(store.max_job_id().unwrap(), Some(u64::MAX - 1));
}

#[tokio::test]
async fn the_resource_eventlog_is_replaced_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = SqliteStore::open(&path).unwrap();
    let many: Vec<Write> = (0..100)
        .map(|_| Write::ResourceEvent {
            line: line("drain"),
        })
        .collect();
    store.commit(many).await.unwrap();
    store
        .commit(vec![Write::ReplaceResourceEventlog {
            lines: vec![line("resource-define"), line("drain")],
        }])
        .await
        .unwrap();
    store
        .commit(vec![Write::ResourceEvent {
            line: line("restart"),
        }])
        .await
        .unwrap();
    store.close();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.resource_eventlog().unwrap(),
        vec![line("resource-define"), line("drain"), line("restart")]
    );
}

/// Turn a store written by this build back into what format `to` wrote.
fn downgrade(path: &std::path::Path, to: u32) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("ALTER TABLE events DROP COLUMN n;")
        .unwrap();
    if to == 4 {
        conn.execute(
            "UPDATE meta SET value = '4' WHERE key = 'format_version'",
            [],
        )
        .unwrap();
        return;
    }
    conn.execute_batch(
        "DROP TRIGGER jobs_inactive_set; DROP TRIGGER jobs_inactive_gone; DROP TABLE counters; \
         DROP INDEX jobs_by_age; DROP INDEX jobs_waitable; DROP INDEX jobs_active; \
         DROP INDEX jobs_by_key; ALTER TABLE jobs DROP COLUMN idem_key; \
         ALTER TABLE jobs DROP COLUMN waitable; ALTER TABLE jobs DROP COLUMN t_inactive;",
    )
    .unwrap();
    if to == 1 {
        conn.execute_batch("ALTER TABLE jobs DROP COLUMN summary;")
            .unwrap();
    }
    conn.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'format_version'",
        [to.to_string()],
    )
    .unwrap();
}

#[tokio::test]
async fn a_format_1_store_is_upgraded_and_keeps_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .commit(vec![new_job(5), append(5, Log::Main, "submit")])
            .await
            .unwrap();
        store.close();
    }
    downgrade(&path, 1);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.meta("format_version").unwrap().as_deref(), Some("5"));
    let jobs = store.load_jobs().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].eventlog, vec![line("submit")]);
    store
        .commit(vec![Write::Summary {
            id: 5,
            summary: summary(1.0, false),
        }])
        .await
        .unwrap();
    assert!(store.load_jobs().unwrap().is_empty());
}

#[tokio::test]
async fn a_format_2_store_is_upgraded_and_its_summaries_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        for id in [1, 2, 3] {
            store
                .commit(vec![new_job(id), append(id, Log::Main, "submit")])
                .await
                .unwrap();
        }
        store
            .commit(vec![
                Write::Summary {
                    id: 1,
                    summary: summary(5.0, true),
                },
                Write::Summary {
                    id: 2,
                    summary: "not json".into(),
                },
            ])
            .await
            .unwrap();
        store.close();
    }
    downgrade(&path, 2);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.meta("format_version").unwrap().as_deref(), Some("5"));
    assert_eq!(store.inactive_count().unwrap(), 1);
    assert_eq!(store.waitable_ids().unwrap(), vec![1]);
    // The unreadable summary leaves its job to be rebuilt at start.
    let ids: Vec<u64> = store.load_jobs().unwrap().iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![2, 3]);
}

#[tokio::test]
async fn log_lengths_are_counted_per_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    store
        .commit(vec![
            new_job(1),
            append(1, Log::Main, "submit"),
            append(1, Log::Exec, "init"),
            append(1, Log::Exec, "starting"),
        ])
        .await
        .unwrap();
    assert_eq!(store.log_len(1, Log::Main).unwrap(), 1);
    assert_eq!(store.log_len(1, Log::Exec).unwrap(), 2);
    assert_eq!(store.log_len(1, Log::Output).unwrap(), 0);
    assert_eq!(store.log_len(2, Log::Main).unwrap(), 0);
}

#[tokio::test]
async fn a_log_is_read_a_page_at_a_time_from_any_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    store.commit(vec![new_job(1), new_job(2)]).await.unwrap();
    // Interleaved with another job's and another log's lines.
    let mut batch = Vec::new();
    for i in 0..600 {
        batch.push(append(1, Log::Output, &format!("out{i}")));
        batch.push(append(2, Log::Output, &format!("other{i}")));
        batch.push(append(1, Log::Main, &format!("main{i}")));
    }
    store.commit(batch).await.unwrap();
    let name = |l: &String| {
        fluxgate_shared::Event::parse_json(l)
            .unwrap()
            .name
            .to_string()
    };

    let mut pos = LogPos::line(0);
    let mut sizes = Vec::new();
    let mut names = Vec::new();
    loop {
        let (page, next) = store.read_log_page(1, Log::Output, pos, 256).unwrap();
        assert_eq!(next.line, pos.line + page.len() as u64);
        sizes.push(page.len());
        names.extend(page.iter().map(name));
        pos = next;
        if page.is_empty() {
            break;
        }
    }
    assert_eq!(sizes, [256, 256, 88, 0]);
    assert_eq!(
        names,
        (0..600).map(|i| format!("out{i}")).collect::<Vec<_>>()
    );

    // From a line number alone (a follower that fell behind the hub).
    let (page, next) = store
        .read_log_page(1, Log::Output, LogPos::line(590), 256)
        .unwrap();
    assert_eq!(
        page.iter().map(name).collect::<Vec<_>>(),
        (590..600).map(|i| format!("out{i}")).collect::<Vec<_>>()
    );
    assert_eq!(next.line, 600);
    // A log that does not exist, and a job that does not: no lines.
    assert!(
        store
            .read_log_page(2, Log::Exec, LogPos::line(0), 256)
            .unwrap()
            .0
            .is_empty()
    );
    assert!(
        store
            .read_log_page(9, Log::Main, LogPos::line(0), 256)
            .unwrap()
            .0
            .is_empty()
    );
}

/// Rows of the events table (each holds one batch's lines of one job log).
/// Every line of job `id`'s `log`, read `limit` lines a page from the
/// start (each page at most `limit` lines, each position just past its
/// page), and the position where the walk stopped.
fn walk_pages(store: &SqliteStore, id: u64, log: Log, limit: usize) -> (Vec<String>, LogPos) {
    let mut pos = LogPos::line(0);
    let mut got = Vec::new();
    loop {
        let (page, next) = store.read_log_page(id, log, pos, limit).unwrap();
        assert!(page.len() <= limit);
        assert_eq!(next.line, pos.line + page.len() as u64);
        pos = next;
        if page.is_empty() {
            return (got, pos);
        }
        got.extend(page);
    }
}

fn event_rows(path: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_batch_stores_one_row_per_job_log_and_pages_cross_rows_from_any_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = SqliteStore::open(&path).unwrap();
    store.commit(vec![new_job(1), new_job(2)]).await.unwrap();
    let mut expected = Vec::new();
    let mut rows = 0;
    for (b, k) in [1, 5, 3, 7, 1, 10, 2].into_iter().enumerate() {
        let mut batch = Vec::new();
        for i in 0..k {
            let name = format!("b{b}l{i}");
            batch.push(append(1, Log::Exec, &name));
            batch.push(append(2, Log::Exec, &name));
            expected.push(line(&name));
        }
        store.commit(batch).await.unwrap();
        rows += 2;
    }
    assert_eq!(event_rows(&path), rows);
    assert_eq!(store.log_len(1, Log::Exec).unwrap(), expected.len() as u64);
    assert_eq!(store.read_log(1, Log::Exec).unwrap().unwrap(), expected);

    // Walked a page at a time, whatever the page size.
    for limit in 1..=9 {
        let (got, pos) = walk_pages(&store, 1, Log::Exec, limit);
        assert_eq!(got, expected, "pages of {limit}");
        // Lines appended later are found from where the walk stopped.
        if limit == 4 {
            store
                .commit(vec![append(1, Log::Exec, "late")])
                .await
                .unwrap();
            let (page, _) = store.read_log_page(1, Log::Exec, pos, limit).unwrap();
            assert_eq!(page, vec![line("late")]);
            expected.push(line("late"));
        }
    }
    // From any line number alone.
    for from in 0..=expected.len() {
        let (page, next) = store
            .read_log_page(1, Log::Exec, LogPos::line(from as u64), 3)
            .unwrap();
        let want: Vec<String> = expected.iter().skip(from).take(3).cloned().collect();
        assert_eq!(page, want, "from line {from}");
        let (rest, _) = store.read_log_page(1, Log::Exec, next, usize::MAX).unwrap();
        assert_eq!(rest.len(), expected.len() - from - want.len());
    }
}

#[tokio::test]
async fn a_format_4_store_of_one_line_rows_is_upgraded_and_read_alike() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store.commit(vec![new_job(3)]).await.unwrap();
        for name in ["submit", "validate", "depend"] {
            store
                .commit(vec![append(3, Log::Main, name)])
                .await
                .unwrap();
        }
        store.close();
    }
    downgrade(&path, 4);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.meta("format_version").unwrap().as_deref(), Some("5"));
    store
        .commit(vec![
            append(3, Log::Main, "priority"),
            append(3, Log::Main, "alloc"),
        ])
        .await
        .unwrap();
    let want: Vec<String> = ["submit", "validate", "depend", "priority", "alloc"]
        .into_iter()
        .map(line)
        .collect();
    assert_eq!(store.read_log(3, Log::Main).unwrap().unwrap(), want);
    assert_eq!(store.log_len(3, Log::Main).unwrap(), 5);
    assert_eq!(store.load_jobs().unwrap()[0].eventlog, want);
    let (page, next) = store
        .read_log_page(3, Log::Main, LogPos::line(2), 2)
        .unwrap();
    assert_eq!(page, want[2..4]);
    let (page, _) = store.read_log_page(3, Log::Main, next, 9).unwrap();
    assert_eq!(page, want[4..]);
    assert_eq!(event_rows(&path), 4);
}

#[tokio::test]
async fn a_line_holding_a_newline_keeps_a_row_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = SqliteStore::open(&path).unwrap();
    let odd = "{\"name\":\"odd\"}\n{\"still\":\"one line\"}".to_string();
    store
        .commit(vec![
            new_job(1),
            append(1, Log::Output, "a"),
            Write::Append {
                id: 1,
                log: Log::Output,
                line: odd.clone(),
            },
            append(1, Log::Output, "b"),
        ])
        .await
        .unwrap();
    let want = vec![line("a"), odd, line("b")];
    assert_eq!(store.read_log(1, Log::Output).unwrap().unwrap(), want);
    assert_eq!(store.log_len(1, Log::Output).unwrap(), 3);
    assert_eq!(event_rows(&path), 3);
}

#[tokio::test]
async fn a_long_batch_of_one_log_is_cut_into_rows_of_bounded_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = SqliteStore::open(&path).unwrap();
    store.commit(vec![new_job(1)]).await.unwrap();
    // About 100 bytes a line: 3,000 lines are about 300 KB in one batch.
    let lines: Vec<String> = (0..3000)
        .map(|i| line(&format!("data{i:05}{}", "x".repeat(50))))
        .collect();
    let batch = lines
        .iter()
        .map(|l| Write::Append {
            id: 1,
            log: Log::Output,
            line: l.clone(),
        })
        .collect();
    store.commit(batch).await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let (rows, longest): (i64, i64) = conn
        .query_row("SELECT count(*), max(length(line)) FROM events", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert!(rows > 1, "{rows} rows");
    assert!(longest < 17 << 10, "a row of {longest} bytes");
    assert_eq!(store.read_log(1, Log::Output).unwrap().unwrap(), lines);
    assert_eq!(store.log_len(1, Log::Output).unwrap(), 3000);
    assert_eq!(walk_pages(&store, 1, Log::Output, 256).0, lines);
}

#[tokio::test]
async fn a_jobs_usage_is_kept_apart_from_its_eventlogs_and_purged_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let usage = r#"{"nodes":[{"ranks":"0","hostname":"n0","user":1.5,"system":0.5,"max_rss":4096}],"total":{"user":1.5,"system":0.5,"max_rss":4096}}"#;
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .commit(vec![
                new_job(9),
                append(9, Log::Main, "finish"),
                Write::Append {
                    id: 9,
                    log: Log::Usage,
                    line: usage.into(),
                },
            ])
            .await
            .unwrap();
        store.close();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.read_log(9, Log::Usage).unwrap(),
        Some(vec![usage.to_string()])
    );
    assert_eq!(store.log_len(9, Log::Exec).unwrap(), 0);
    assert_eq!(store.read_job(9).unwrap().unwrap().eventlog.len(), 1);
    store.commit(vec![Write::Purge { id: 9 }]).await.unwrap();
    assert_eq!(store.read_log(9, Log::Usage).unwrap(), None);
}

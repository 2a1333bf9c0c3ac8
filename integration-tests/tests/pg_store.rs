//! The store conformance suite: the memory and PostgreSQL stores against
//! the SQLite one: the same batches give the same outcomes (a bad batch
//! fails alone, with the same error) and the same reads, byte for byte; a
//! PostgreSQL writer whose epoch is over cannot commit.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use fluxgate_integration_tests::postgres::PgServer;
use fluxgate_job_manager::ha::Elector;
use fluxgate_job_manager::store::postgres::PgConnect;
use fluxgate_job_manager::store::{
    Batch, Log, LogPos, MemoryStore, PgStore, SqliteStore, Store, StoreError, Write,
};
use tokio::sync::watch;

fn line(name: &str, i: u64) -> String {
    format!(r#"{{"timestamp":1700000000.{i},"name":"{name}","context":{{"i":{i}}}}}"#)
}

fn new_job(id: u64) -> Write {
    Write::NewJob {
        id,
        userid: 1000 + (id % 3) as u32,
        jobspec: format!(r#"{{"version":1,"id":{id},"text":"ünïcode \\u0000 \n"}}"#),
    }
}

fn append(id: u64, log: Log, i: u64) -> Write {
    Write::Append {
        id,
        log,
        line: line("ev", i),
    }
}

fn summary(t: f64, waitable: bool) -> String {
    format!(r#"{{"t_inactive":{t},"waitable":{waitable},"result":"COMPLETED"}}"#)
}

/// Batches that exercise every write, with failures mixed in.
fn workload() -> Vec<Batch> {
    let mut batches: Vec<Batch> = Vec::new();
    for id in 1..=40u64 {
        batches.push(vec![new_job(id), append(id, Log::Main, 0)]);
        batches.push(vec![
            append(id, Log::Main, 1),
            append(id, Log::Exec, 2),
            append(id, Log::Output, 3),
            Write::SetR {
                id,
                r: format!(r#"{{"version":1,"n":{id}}}"#),
            },
            Write::IdempotencyKey {
                id,
                key: format!("k{id}"),
            },
        ]);
        // A duplicate id fails alone, and so does a write to no job.
        batches.push(vec![new_job(id)]);
        batches.push(vec![append(1000 + id, Log::Main, 9)]);
        if id % 2 == 0 {
            batches.push(vec![
                append(id, Log::Main, 4),
                Write::Summary {
                    id,
                    summary: summary(id as f64, id % 4 == 0),
                },
            ]);
        }
        if id % 10 == 0 {
            batches.push(vec![Write::Purge { id: id - 8 }]);
            batches.push(vec![Write::ResourceEvent {
                line: line("online", id),
            }]);
        }
    }
    batches.push(vec![Write::ReplaceResourceEventlog {
        lines: vec![line("checkpoint", 1)],
    }]);
    batches.push(vec![Write::ResourceEvent {
        line: line("after", 2),
    }]);
    batches.push(vec![
        Write::Meta {
            key: "a".into(),
            value: "1".into(),
        },
        Write::Meta {
            key: "a".into(),
            value: "2".into(),
        },
    ]);
    batches
}

/// Everything a reader can see of a store.
fn snapshot(s: &impl Store) -> String {
    let mut out = String::new();
    for id in 0..=45u64 {
        for log in [Log::Main, Log::Exec, Log::Output] {
            out.push_str(&format!(
                "{id} {log:?} {:?}\n",
                s.read_log(id, log).unwrap()
            ));
            out.push_str(&format!("len {}\n", s.log_len(id, log).unwrap()));
            let (page, next) = s.read_log_page(id, log, LogPos::line(1), 1).unwrap();
            out.push_str(&format!("page {page:?} {}\n", next.line));
        }
        out.push_str(&format!("{:?}\n", s.read_job(id).unwrap()));
        out.push_str(&format!("{:?}\n", s.summary(id).unwrap()));
    }
    let load: Vec<_> = s
        .load_jobs()
        .unwrap()
        .into_iter()
        .map(|j| (j.id, j.eventlog))
        .collect();
    out.push_str(&format!("load {load:?}\n"));
    out.push_str(&format!("max {:?}\n", s.max_job_id().unwrap()));
    out.push_str(&format!("inactive {}\n", s.inactive_count().unwrap()));
    out.push_str(&format!("before {}\n", s.inactive_before(20.0).unwrap()));
    out.push_str(&format!("oldest {:?}\n", s.oldest_inactive(5).unwrap()));
    out.push_str(&format!("waitable {:?}\n", s.waitable_ids().unwrap()));
    let mut seen = Vec::new();
    s.scan_inactive_below(Some(1001), None, Some(38), &mut |id, text| {
        seen.push((id, text.to_string()));
        seen.len() < 5
    })
    .unwrap();
    out.push_str(&format!("scan {seen:?}\n"));
    out.push_str(&format!("resource {:?}\n", s.resource_eventlog().unwrap()));
    out.push_str(&format!("meta {:?}\n", s.meta("a").unwrap()));
    out.push_str(&format!(
        "key {:?} {:?}\n",
        s.job_by_key(1000 + 7 % 3, "k7").unwrap(),
        s.job_by_key(1, "k7").unwrap()
    ));
    out
}

/// Lead the store at `url`: its epoch.
async fn lead(url: &str) -> (PgConnect, i64) {
    let connect = PgConnect::new(url, None).unwrap();
    let elector = Elector {
        connect: connect.clone(),
        holder: "test".into(),
        uri: "http://test".into(),
        lease: Duration::from_secs(60),
        poll: Duration::from_millis(50),
    };
    let (tx, _rx) = watch::channel(None);
    let stop = Arc::new(AtomicBool::new(false));
    let (leadership, session) = tokio::task::spawn_blocking(move || elector.campaign(&tx, &stop))
        .await
        .unwrap()
        .unwrap()
        .expect("leads");
    // The lock session is not needed here: closed off the runtime.
    std::thread::spawn(move || drop(session)).join().unwrap();
    (connect, leadership.epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_store_answers_as_sqlite_does() {
    let pg = PgServer::start();
    let url = pg.new_database();
    let (connect, epoch) = lead(&url).await;
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let postgres = tokio::task::spawn_blocking(move || PgStore::open(connect, epoch))
        .await
        .unwrap()
        .unwrap();
    let memory = MemoryStore::new();
    // Enqueued together, so that each store groups many batches per commit.
    let mut acks = Vec::new();
    for batch in workload() {
        let a = sqlite.enqueue(batch.clone()).await.unwrap();
        let b = postgres.enqueue(batch.clone()).await.unwrap();
        let c = memory.enqueue(batch).await.unwrap();
        acks.push((a, b, c));
    }
    for (i, (a, b, c)) in acks.into_iter().enumerate() {
        let (a, b, c) = (a.wait().await, b.wait().await, c.wait().await);
        assert_eq!(a, b, "batch {i}: the same outcome on PostgreSQL");
        assert_eq!(a, c, "batch {i}: the same outcome in memory");
    }
    let (sqlite, postgres) = (Arc::new(sqlite), Arc::new(postgres));
    let (s, p) = (Arc::clone(&sqlite), Arc::clone(&postgres));
    let (a, b, c) =
        tokio::task::spawn_blocking(move || (snapshot(&*s), snapshot(&*p), snapshot(&memory)))
            .await
            .unwrap();
    for (other, name) in [(&b, "PostgreSQL"), (&c, "memory")] {
        for (la, lb) in a.lines().zip(other.lines()) {
            assert_eq!(la, lb, "{name}");
        }
        assert_eq!(&a, other, "{name}");
    }
    // The lengths read at once are those read one by one.
    let p = Arc::clone(&postgres);
    tokio::task::spawn_blocking(move || {
        let lens = p.active_log_lens().unwrap().expect("read at once");
        for job in p.load_jobs().unwrap() {
            let got = lens.get(&job.id).copied().unwrap_or_default();
            let want = [Log::Exec, Log::Output].map(|l| p.log_len(job.id, l).unwrap());
            assert_eq!(got, want, "job {}", job.id);
        }
    })
    .await
    .unwrap();
    drop(sqlite);
    let postgres = Arc::into_inner(postgres).unwrap();
    tokio::task::spawn_blocking(move || postgres.close())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_whose_epoch_is_over_cannot_commit() {
    let pg = PgServer::start();
    let url = pg.new_database();
    let (connect, epoch) = lead(&url).await;
    let old = tokio::task::spawn_blocking(move || PgStore::open(connect, epoch))
        .await
        .unwrap()
        .unwrap();
    old.commit(vec![new_job(1)]).await.unwrap();
    // Another job manager takes the lead (the first one's lock session is gone).
    let (connect, newer) = lead(&url).await;
    assert_eq!(newer, epoch + 1);
    let e = old.commit(vec![new_job(2)]).await.unwrap_err();
    assert!(matches!(e, StoreError::Deposed(_)), "{e:?}");
    let new = tokio::task::spawn_blocking(move || PgStore::open(connect, newer))
        .await
        .unwrap()
        .unwrap();
    new.commit(vec![new_job(3)]).await.unwrap();
    let ids: Vec<u64> = tokio::task::spawn_blocking({
        let new = Arc::new(new);
        move || new.load_jobs().unwrap().iter().map(|j| j.id).collect()
    })
    .await
    .unwrap();
    assert_eq!(
        ids,
        vec![1, 3],
        "nothing of the deposed writer after its epoch"
    );
    std::thread::spawn(move || drop(old)).join().unwrap();
}

/// A CA and a server certificate for 127.0.0.1, signed by it (PEM): the
/// CA, the server's certificate and its key.
fn server_pki() -> (String, Vec<u8>, Vec<u8>) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "store test CA");
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca =
        rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    (
        ca.pem(),
        cert.pem().into_bytes(),
        key.serialize_pem().into_bytes(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_is_tls_verified_against_the_ca_given() {
    let (ca, cert, key) = server_pki();
    let pg = PgServer::start_tls(&cert, &key);
    let url = format!("{}?sslmode=require", pg.new_database());
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    // Without the CA the server's certificate is unknown: refused, said so.
    let connect = PgConnect::new(&url, None).unwrap();
    let e = tokio::task::spawn_blocking(move || {
        connect
            .connect()
            .map(|c| std::thread::spawn(move || drop(c)).join())
    })
    .await
    .unwrap()
    .unwrap_err();
    assert!(
        e.to_string().contains("certificate") || e.to_string().contains("CA"),
        "{e}"
    );
    // With it, the store works over TLS.
    let connect = PgConnect::new(&url, Some(&ca_file)).unwrap();
    let ssl = tokio::task::spawn_blocking(move || {
        let mut c = connect.connect().unwrap();
        let on: bool = c
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0);
        std::thread::spawn(move || drop(c)).join().unwrap();
        on
    })
    .await
    .unwrap();
    assert!(ssl, "the session is encrypted");
}

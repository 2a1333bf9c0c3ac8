//! Who may do what, against the real binaries with credentials required:
//! every denial of docs/SECURITY.md, the happy paths of the owner and a
//! guest, bad tokens, wrong certificates, rogue nodes and callers, and jobs
//! whose processes really run as their owner.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use fluxgate_integration_tests::{Instance, Setup, binary, names, output_data};
use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::node_client::NodeClient;
use fluxgate_shared::jobspec::JobspecBuilder;
use fluxgate_shared::{Event, JobId};
use tonic::{Code, Status};

/// A guest's uid with no account: its jobs stay held, they never run.
const GUEST: u32 = 4242;
/// `nobody`: a guest whose jobs can run.
const NOBODY: u32 = 65534;

fn owner_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

fn jobspec(argv: &[&str]) -> String {
    JobspecBuilder::new(argv.iter().copied())
        .build()
        .expect("jobspec")
        .to_json()
}

fn submit_request(urgency: u32, flags: u32) -> pb::SubmitRequest {
    pb::SubmitRequest {
        jobspec: jobspec(&["true"]),
        urgency: Some(urgency),
        flags,
        ..Default::default()
    }
}

/// Submit a held job (urgency 0) as the holder of `token`.
async fn submit_held(inst: &Instance, token: &str) -> JobId {
    let r = inst
        .jobs_as(Some(token))
        .await
        .submit(submit_request(0, 0))
        .await
        .expect("submit held job");
    JobId::from(r.into_inner().id)
}

/// Assert a call was refused with `code`, with a message saying something.
#[track_caller]
fn refused<T: std::fmt::Debug>(r: Result<T, Status>, code: Code, what: &str) -> String {
    let status = match r {
        Ok(v) => panic!("{what}: expected {code:?}, got {v:?}"),
        Err(s) => s,
    };
    assert_eq!(status.code(), code, "{what}: {status:?}");
    assert!(!status.message().is_empty(), "{what}: no message");
    status.message().to_string()
}

#[track_caller]
fn denied<T: std::fmt::Debug>(r: Result<T, Status>, what: &str) -> String {
    refused(r, Code::PermissionDenied, what)
}

#[track_caller]
fn unauthenticated<T: std::fmt::Debug>(r: Result<T, Status>, what: &str) -> String {
    refused(r, Code::Unauthenticated, what)
}

fn context_u64(events: &[Event], name: &str, key: &str) -> u64 {
    events
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.context.as_ref())
        .and_then(|c| c.get(key))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("{name}.{key} missing in {:?}", names(events)))
}

async fn main_log(inst: &Instance, id: JobId) -> Vec<Event> {
    fluxgate_integration_tests::stored_log(&mut inst.jobs().await, id, "eventlog").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_is_denied_what_is_not_theirs() {
    let inst = Instance::start_auth(1, 2).await;
    let owner = inst.owner_token.clone().expect("owner token");
    let guest = inst.token("bob", GUEST, Some(3600));
    let theirs = submit_held(&inst, &owner).await;
    let mine = submit_held(&inst, &guest).await;
    let mut jobs = inst.jobs_as(Some(&guest)).await;
    let mut res = inst.resource_as(Some(&guest)).await;
    let id = u64::from(theirs);

    // Another user's job: no control, no reading.
    let m = denied(
        jobs.cancel(pb::CancelRequest {
            id,
            note: String::new(),
        })
        .await,
        "cancel another's job",
    );
    assert!(m.contains("user bob (uid 4242)"), "{m}");
    assert!(
        m.contains("only the job's owner or the instance owner"),
        "{m}"
    );
    denied(
        jobs.raise_exception(pb::RaiseExceptionRequest {
            id,
            r#type: "test".into(),
            severity: 0,
            note: String::new(),
        })
        .await,
        "exception on another's job",
    );
    denied(
        jobs.kill(pb::KillRequest { id, signum: 15 }).await,
        "signal another's job",
    );
    denied(
        jobs.set_urgency(pb::SetUrgencyRequest { id, urgency: 10 })
            .await,
        "urgency of another's job",
    );
    denied(
        jobs.memo(pb::MemoRequest {
            id,
            memo: r#"{"a":1}"#.into(),
            volatile: false,
        })
        .await,
        "memo on another's job",
    );
    for key in ["jobspec", "eventlog", "exec.eventlog", "output", "R"] {
        denied(
            jobs.info(pb::InfoRequest {
                id,
                keys: vec![key.into()],
                ..Default::default()
            })
            .await,
            &format!("read {key} of another's job"),
        );
    }
    for log in ["eventlog", "output"] {
        denied(
            jobs.watch_eventlog(pb::WatchEventlogRequest {
                id,
                name: log.into(),
                follow: false,
                wait_create: false,
                ..Default::default()
            })
            .await
            .map(|_| ()),
            &format!("watch {log} of another's job"),
        );
    }

    // Own job: urgency up to 16 only.
    let m = denied(
        jobs.set_urgency(pb::SetUrgencyRequest {
            id: mine.into(),
            urgency: 17,
        })
        .await,
        "urgency above 16",
    );
    assert!(m.contains("above 16"), "{m}");
    denied(
        jobs.submit(submit_request(20, 0)).await,
        "submit with urgency above 16",
    );
    denied(
        jobs.submit(submit_request(16, pb::SubmitFlag::Waitable as u32))
            .await,
        "submit waitable",
    );

    // The instance is the owner's.
    denied(
        res.drain(pb::DrainRequest {
            targets: "0".into(),
            reason: "mine".into(),
            mode: 0,
        })
        .await,
        "drain",
    );
    denied(
        res.undrain(pb::UndrainRequest {
            targets: "0".into(),
            force: true,
            reason: String::new(),
        })
        .await,
        "undrain",
    );
    for action in [pb::QueueAction::Stop, pb::QueueAction::Start] {
        denied(
            jobs.queue(pb::QueueRequest {
                action: action as i32,
                reason: "mine".into(),
                ..Default::default()
            })
            .await,
            &format!("queue {action:?}"),
        );
    }
    denied(
        res.journal(pb::JournalRequest {}).await.map(|_| ()),
        "resource journal",
    );
    denied(
        res.eventlog(pb::ResourceEventlogRequest { follow: false })
            .await
            .map(|_| ()),
        "resource eventlog",
    );
    denied(
        res.acquire(pb::AcquireRequest {}).await.map(|_| ()),
        "acquire",
    );
    denied(
        jobs.purge(pb::PurgeRequest {
            age_limit: None,
            num_limit: Some(0),
            force: true,
            batch: 0,
        })
        .await,
        "purge",
    );
    denied(jobs.wait(pb::WaitRequest { id: 0 }).await, "wait");

    // Nothing above changed anything: the owner's job is still held.
    let ev = main_log(&inst, theirs).await;
    assert!(!names(&ev).contains(&"exception"), "{:?}", names(&ev));
    let q = inst
        .jobs()
        .await
        .queue(pb::QueueRequest {
            action: pb::QueueAction::Status as i32,
            reason: String::new(),
            ..Default::default()
        })
        .await
        .expect("queue status")
        .into_inner();
    assert!(q.started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_lists_others_jobs_in_summary_and_acts_on_their_own() {
    let inst = Instance::start_auth(1, 2).await;
    let owner = inst.owner_token.clone().expect("owner token");
    let guest = inst.token("bob", GUEST, None);
    // Nothing runs here: jobs given an urgency stay pending.
    inst.resource()
        .await
        .drain(pb::DrainRequest {
            targets: "0".into(),
            reason: "hold everything".into(),
            mode: 0,
        })
        .await
        .expect("the owner drains");
    let theirs = submit_held(&inst, &owner).await;
    let mine = submit_held(&inst, &guest).await;
    let mut jobs = inst.jobs_as(Some(&guest)).await;

    // Both jobs listed, each with its owner; a summary holds no jobspec,
    // environment or output.
    let list = jobs
        .list(pb::ListRequest::default())
        .await
        .expect("guest list")
        .into_inner()
        .jobs;
    let owners: Vec<(u64, u32)> = list.iter().map(|j| (j.id, j.userid)).collect();
    assert!(owners.contains(&(theirs.into(), owner_uid())), "{owners:?}");
    assert!(owners.contains(&(mine.into(), GUEST)), "{owners:?}");
    // Status reads are anyone's.
    let status = inst
        .resource_as(Some(&guest))
        .await
        .status(pb::StatusRequest {})
        .await
        .expect("guest resource status");
    assert!(!status.into_inner().status.is_empty());

    // Their own job: read it, change its urgency, memo it, cancel it.
    let info = jobs
        .info(pb::InfoRequest {
            id: mine.into(),
            keys: vec!["jobspec".into(), "eventlog".into()],
            ..Default::default()
        })
        .await
        .expect("guest reads own job")
        .into_inner();
    assert!(info.values["eventlog"].contains("submit"));
    let old = jobs
        .set_urgency(pb::SetUrgencyRequest {
            id: mine.into(),
            urgency: 5,
        })
        .await
        .expect("guest urgency 5")
        .into_inner();
    assert_eq!(old.old_urgency, 0);
    jobs.memo(pb::MemoRequest {
        id: mine.into(),
        memo: r#"{"note":"mine"}"#.into(),
        volatile: false,
    })
    .await
    .expect("guest memo");
    jobs.cancel(pb::CancelRequest {
        id: mine.into(),
        note: "done".into(),
    })
    .await
    .expect("guest cancels own job");
    let ev = inst.wait_clean(mine).await;

    // The userids recorded are the verified ones.
    assert_eq!(context_u64(&ev, "submit", "userid"), u64::from(GUEST));
    assert_eq!(context_u64(&ev, "urgency", "userid"), u64::from(GUEST));
    assert_eq!(context_u64(&ev, "exception", "userid"), u64::from(GUEST));

    // The owner may do all of it to anyone's job.
    let other = submit_held(&inst, &guest).await;
    let mut boss = inst.jobs().await;
    boss.set_urgency(pb::SetUrgencyRequest {
        id: other.into(),
        urgency: 0,
    })
    .await
    .expect("owner urgency");
    boss.info(pb::InfoRequest {
        id: other.into(),
        keys: vec!["jobspec".into()],
        ..Default::default()
    })
    .await
    .expect("owner reads a guest's jobspec");
    boss.cancel(pb::CancelRequest {
        id: other.into(),
        note: String::new(),
    })
    .await
    .expect("owner cancels a guest's job");
    let ev = inst.wait_clean(other).await;
    assert_eq!(context_u64(&ev, "submit", "userid"), u64::from(GUEST));
    assert_eq!(
        context_u64(&ev, "urgency", "userid"),
        u64::from(owner_uid())
    );
    assert_eq!(
        context_u64(&ev, "exception", "userid"),
        u64::from(owner_uid())
    );
    inst.jobs()
        .await
        .cancel(pb::CancelRequest {
            id: theirs.into(),
            note: String::new(),
        })
        .await
        .expect("owner cancels own job");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_forged_expired_and_garbled_tokens_are_unauthenticated() {
    let inst = Instance::start_auth(1, 1).await;

    let m = unauthenticated(
        inst.jobs_as(None).await.submit(submit_request(16, 0)).await,
        "no token",
    );
    assert!(m.contains("FLUXGATE_TOKEN"), "{m}");
    unauthenticated(
        inst.jobs_as(None)
            .await
            .list(pb::ListRequest::default())
            .await,
        "list without a token",
    );
    unauthenticated(
        inst.resource_as(None)
            .await
            .status(pb::StatusRequest {})
            .await,
        "status without a token",
    );

    // Signed with another key, claiming to be the owner.
    let forged = fluxgate_shared::auth::Claims::user("mallory", owner_uid(), 0, None)
        .sign(b"some other instance's key, 32 b")
        .expect("sign");
    let m = unauthenticated(
        inst.jobs_as(Some(&forged))
            .await
            .submit(submit_request(16, 0))
            .await,
        "forged token",
    );
    assert!(m.contains("signature"), "{m}");

    // A real token altered to name another uid.
    let real = inst.token("bob", GUEST, None);
    let (_, tag) = real.rsplit_once('.').expect("token parts");
    let root_claims = fluxgate_shared::auth::Claims::user("bob", owner_uid(), 0, None);
    let other = root_claims
        .sign(b"0123456789abcdef0123456789abcdef")
        .expect("sign");
    let (body, _) = other.rsplit_once('.').expect("token parts");
    unauthenticated(
        inst.jobs_as(Some(&format!("{body}.{tag}")))
            .await
            .submit(submit_request(16, 0))
            .await,
        "altered token",
    );

    // Expired a second after it was made.
    let short = inst.token("bob", GUEST, Some(1));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let m = unauthenticated(
        inst.jobs_as(Some(&short))
            .await
            .list(pb::ListRequest::default())
            .await,
        "expired token",
    );
    assert!(m.contains("expired"), "{m}");

    unauthenticated(
        inst.jobs_as(Some("not-a-token"))
            .await
            .submit(submit_request(16, 0))
            .await,
        "garbage token",
    );
    // Health stays open for probes.
    let out = Command::new(binary("fluxgate"))
        .args(["health", &inst.uri])
        .env_remove("FLUXGATE_TOKEN")
        .output()
        .expect("fluxgate health");
    assert!(out.status.success(), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_need_the_node_credential_to_join() {
    let inst = Instance::start_auth(1, 1).await;
    let hello = || pb::JoinMessage {
        message: Some(pb::join_message::Message::Hello(pb::Hello {
            nodes: vec![pb::NodeInfo {
                hostname: "node0".into(),
                cores: "0".into(),
                gpus: String::new(),
                ..Default::default()
            }],
            exec_address: "http://127.0.0.1:1".into(),
            ..Default::default()
        })),
    };
    let mut node = NodeClient::new(inst.channel().await);
    let m = unauthenticated(
        node.join(tokio_stream::iter(vec![hello()]))
            .await
            .map(|_| ()),
        "join without a credential",
    );
    assert!(m.contains("credentials"), "{m}");
    let guest = inst.token("bob", GUEST, None);
    let mut node = NodeClient::with_interceptor(
        inst.channel().await,
        fluxgate_integration_tests::Bearer::new(Some(&guest)),
    );
    let m = denied(
        node.join(tokio_stream::iter(vec![hello()]))
            .await
            .map(|_| ()),
        "join with a user token",
    );
    assert!(m.contains("node credential"), "{m}");

    // A rogue exec process without the credential is turned away.
    let mut rogue = Command::new(binary("fluxgate-exec"))
        .args(["--job-manager", &inst.uri, "--listen", "127.0.0.1:0"])
        .args(["--hostname", "node9", "--cores-count", "1"])
        .env("FLUXGATE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rogue exec");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let _ = rogue.kill();
    let out = rogue.wait_with_output().expect("rogue exec output");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("requires credentials"), "{log}");
    let st = inst.status().await;
    assert_eq!(st["online"], "0", "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_job_manager_still_reaches_its_nodes() {
    let mut inst = Instance::start_auth(1, 1).await;
    let id = inst
        .submit(&JobspecBuilder::new(["sleep", "1"]), None)
        .await;
    inst.events_until(id, "eventlog", "start").await;
    // The node credential is the same text after the restart, so the job
    // manager's reattach is accepted by the exec service.
    inst.restart_jm(true).await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(context_u64(&ev, "finish", "status"), 0, "{:?}", names(&ev));
    assert!(!names(&ev).contains(&"exception"), "{:?}", names(&ev));
}

/// Start an extra exec service of `inst` (with its credential) and read the
/// address it serves on.
fn extra_exec(inst: &Instance) -> (std::process::Child, String) {
    let mut child = Command::new(binary("fluxgate-exec"))
        .args(["--job-manager", &inst.uri, "--listen", "127.0.0.1:0"])
        .args(["--hostname", "extra", "--cores-count", "1"])
        .args(inst.exec_auth_args())
        .env("FLUXGATE_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn exec");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("exec address");
    (child, line.trim().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_service_runs_nothing_for_a_caller_without_the_node_credential() {
    let inst = Instance::start_auth(1, 1).await;
    let (mut child, address) = extra_exec(&inst);
    let channel = tonic::transport::Endpoint::from_shared(address.clone())
        .expect("address")
        .connect()
        .await
        .expect("connect to exec");
    let start = || {
        pb::StartRequest {
        id: 77,
        userid: 0,
        jobspec: jobspec(&["touch", "/tmp/fluxgate-rogue-was-here"]),
        r: r#"{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"nodelist":["extra"]}}"#.into(),
        reattach: false,
        ranks: String::new(),
        peers: [(0, address.clone())].into(),
        credential: String::new(),
    }
    };
    let mut exec = ExecClient::new(channel.clone());
    let m = unauthenticated(
        exec.start(start()).await.map(|_| ()),
        "Exec.Start without a credential",
    );
    assert!(m.contains("node credential"), "{m}");
    unauthenticated(
        exec.kill(pb::ExecKillRequest { id: 77, signum: 9 }).await,
        "Exec.Kill without a credential",
    );
    // A user's token, even the owner's, is not the node credential.
    let owner = inst.owner_token.clone().expect("owner token");
    let mut as_owner = ExecClient::with_interceptor(
        channel,
        fluxgate_integration_tests::Bearer::new(Some(&owner)),
    );
    let m = unauthenticated(
        as_owner.start(start()).await.map(|_| ()),
        "Exec.Start with a user token",
    );
    assert!(m.contains("does not match"), "{m}");
    let _ = child.kill();
    let _ = child.wait();
    assert!(!std::path::Path::new("/tmp/fluxgate-rogue-was-here").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_as_its_owner() {
    fluxgate_integration_tests::require_root("running jobs as another uid");
    let inst = Instance::start_auth(1, 1).await;
    let nobody = inst.token("nobody", NOBODY, Some(600));
    let r = inst
        .jobs_as(Some(&nobody))
        .await
        .submit(pb::SubmitRequest {
            jobspec: jobspec(&["sh", "-c", "id -u; id -g"]),
            urgency: None,
            flags: 0,
            ..Default::default()
        })
        .await
        .expect("nobody submits");
    let id = JobId::from(r.into_inner().id);
    let ev = inst.wait_clean(id).await;
    assert_eq!(context_u64(&ev, "finish", "status"), 0, "{ev:?}");
    let out = inst.log(id, "output").await;
    let data: String = output_data(&out).concat();
    let gid = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(NOBODY))
        .expect("passwd")
        .expect("nobody exists")
        .gid
        .as_raw();
    assert_eq!(data, format!("{NOBODY}\n{gid}\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_jobs_are_refused_unless_allowed() {
    fluxgate_integration_tests::require_root("a root-owned instance");
    let setup = Setup {
        auth: true,
        refuse_root_jobs: true,
        ..Setup::default()
    };
    let inst = Instance::start_setup(1, 1, setup).await;
    let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    let ev = inst.wait_clean(id).await;
    let exception = ev
        .iter()
        .find(|e| e.name == "exception")
        .unwrap_or_else(|| panic!("no exception in {:?}", names(&ev)));
    let note = exception.context.as_ref().expect("context")["note"]
        .as_str()
        .expect("note")
        .to_string();
    assert!(note.contains("--allow-root-jobs"), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unprivileged_exec_service_runs_only_its_own_uids_jobs() {
    fluxgate_integration_tests::require_root("starting an exec service as another uid");
    // The instance is root's; its node runs as nobody: root's job is refused.
    let setup = Setup {
        exec_uid: Some(NOBODY),
        ..Setup::default()
    };
    let inst = Instance::start_setup(1, 1, setup).await;
    let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    let ev = inst.wait_clean(id).await;
    let note = ev
        .iter()
        .find(|e| e.name == "exception")
        .and_then(|e| {
            e.context
                .as_ref()?
                .get("note")?
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no exception in {:?}", names(&ev)));
    assert!(
        note.contains("runs only the instance owner's jobs"),
        "{note}"
    );
    drop(inst);

    // The instance is nobody's, as is its node: the owner's job runs.
    let setup = Setup {
        exec_uid: Some(NOBODY),
        jm_args: vec!["--set".into(), format!("owner_uid={NOBODY}")],
        ..Setup::default()
    };
    let inst = Instance::start_setup(1, 1, setup).await;
    let id = inst.submit(&JobspecBuilder::new(["id", "-u"]), None).await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(context_u64(&ev, "submit", "userid"), u64::from(NOBODY));
    assert_eq!(context_u64(&ev, "finish", "status"), 0, "{:?}", names(&ev));
    let out = inst.log(id, "output").await;
    let data: String = output_data(&out).concat();
    assert_eq!(data, format!("{NOBODY}\n"));
}

/// A CA, and certificates it signs, written as PEM files in `dir`.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let key = rcgen::KeyPair::generate().expect("key");
        let ca = rcgen::CertifiedIssuer::self_signed(params, key).expect("CA");
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write CA");
        Pki { dir, ca }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Issue a certificate for `cn` (server when `server`); its PEM cert and key.
    fn issue(&self, cn: &str, server: bool) -> (Vec<u8>, Vec<u8>) {
        let sans = if server {
            vec!["localhost".to_string(), "127.0.0.1".to_string()]
        } else {
            Vec::new()
        };
        let mut params = rcgen::CertificateParams::new(sans).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.ca).expect("sign");
        let (cert, key) = (cert.pem().into_bytes(), key.serialize_pem().into_bytes());
        std::fs::write(self.path(&format!("{cn}.pem")), &cert).expect("write cert");
        std::fs::write(self.path(&format!("{cn}.key")), &key).expect("write key");
        (cert, key)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_identify_users_over_mutual_tls() {
    let pki = Pki::new("fluxgate test CA");
    pki.issue("server", true);
    let (alice_cert, alice_key) = pki.issue("alice", false);
    let (root_cert, root_key) = pki.issue("root", false);
    let rogue_pki = Pki::new("another CA");
    let (rogue_cert, rogue_key) = rogue_pki.issue("alice", false);

    let set = |kv: String| ["--set".to_string(), kv];
    let mut jm_args = Vec::new();
    jm_args.extend(set(format!("tls.cert={}", pki.path("server.pem"))));
    jm_args.extend(set(format!("tls.key={}", pki.path("server.key"))));
    jm_args.extend(set(format!("tls.client_ca={}", pki.path("ca.pem"))));
    jm_args.extend(set(format!("auth.users.alice={GUEST}")));
    let setup = Setup {
        auth: true,
        jm_args,
        exec_args: vec!["--tls-ca".into(), pki.path("ca.pem")],
        tls_ca: Some(std::fs::read(pki.path("ca.pem")).expect("CA")),
        ..Setup::default()
    };
    let inst = Instance::start_setup(1, 1, setup).await;
    assert!(inst.uri.starts_with("https://"), "{}", inst.uri);

    // alice's certificate: a guest with the configured uid.
    let channel = inst
        .channel_with(Some((&alice_cert, &alice_key)))
        .await
        .expect("TLS connection with alice's certificate");
    let mut alice = pb::job_manager_client::JobManagerClient::new(channel.clone());
    let r = alice
        .submit(submit_request(0, 0))
        .await
        .expect("alice submits");
    let id = JobId::from(r.into_inner().id);
    let ev = main_log(&inst, id).await;
    assert_eq!(context_u64(&ev, "submit", "userid"), u64::from(GUEST));
    let mut alice_res = pb::resource_client::ResourceClient::new(channel);
    let m = denied(
        alice_res
            .drain(pb::DrainRequest {
                targets: "0".into(),
                reason: String::new(),
                mode: 0,
            })
            .await,
        "alice drains",
    );
    assert!(m.contains("user alice (uid 4242)"), "{m}");

    // root's certificate: the owner (uid from the account database).
    if owner_uid() == 0 {
        let channel = inst
            .channel_with(Some((&root_cert, &root_key)))
            .await
            .expect("TLS connection with root's certificate");
        let mut root = pb::resource_client::ResourceClient::new(channel);
        root.drain(pb::DrainRequest {
            targets: "0".into(),
            reason: "by certificate".into(),
            mode: 0,
        })
        .await
        .expect("the owner drains");
        root.undrain(pb::UndrainRequest {
            targets: "0".into(),
            force: false,
            reason: String::new(),
        })
        .await
        .expect("the owner undrains");
    }

    // The command line, with alice's certificate from the environment.
    let cli = |args: &[&str]| {
        Command::new(binary("fluxgate"))
            .args(args)
            .env("FLUXGATE_URI", &inst.uri)
            .env("FLUXGATE_TLS_CA", pki.path("ca.pem"))
            .env("FLUXGATE_CLIENT_CERT", pki.path("alice.pem"))
            .env("FLUXGATE_CLIENT_KEY", pki.path("alice.key"))
            .env_remove("FLUXGATE_TOKEN")
            .output()
            .expect("fluxgate")
    };
    let out = cli(&["submit", "--urgency", "0", "true"]);
    assert!(out.status.success(), "{out:?}");
    let out = cli(&["queue", "stop"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("user alice (uid 4242) may not stop"), "{err}");

    // TLS without a certificate or token: unauthenticated.
    let mut anonymous = pb::job_manager_client::JobManagerClient::new(inst.channel().await);
    unauthenticated(
        anonymous.list(pb::ListRequest::default()).await,
        "TLS without credentials",
    );
    // A token still works over TLS.
    inst.jobs()
        .await
        .list(pb::ListRequest::default())
        .await
        .expect("owner token over TLS");

    // A certificate from another CA is refused in the handshake.
    let refused = match inst.channel_with(Some((&rogue_cert, &rogue_key))).await {
        Err(_) => true,
        Ok(channel) => pb::job_manager_client::JobManagerClient::new(channel)
            .list(pb::ListRequest::default())
            .await
            .is_err(),
    };
    assert!(refused, "a certificate of another CA was accepted");
}

#[test]
fn fluxgate_start_auth_gives_the_owner_a_token_and_guests_need_one() {
    let statedir = tempfile::tempdir().expect("tempdir");
    let script = r#"
        set -e
        test -n "$FLUXGATE_TOKEN"
        test "$FLUXGATE_TOKEN" = "$(cat "$FLUXGATE_STATEDIR/owner.token")"
        $F queue status >/dev/null
        guest=$($F token create --user bob --uid 4242 --ttl 1h)
        if FLUXGATE_TOKEN=$guest $F queue stop 2>err; then exit 10; fi
        grep -q 'may not stop or start the queue' err
        if FLUXGATE_TOKEN= $F jobs 2>err; then exit 11; fi
        grep -q 'requires credentials' err
        FLUXGATE_TOKEN=$guest $F submit --urgency 0 true >/dev/null
        echo ok
    "#;
    let out = Command::new(binary("fluxgate"))
        .args(["start", "--size", "1", "--auth", "--kill-timeout", "1"])
        .arg("--statedir")
        .arg(statedir.path())
        .args(["--", "sh", "-c", script])
        .env("F", binary("fluxgate"))
        .env_remove("FLUXGATE_TOKEN")
        // The script writes `err` files: into the private state directory,
        // not the source tree.
        .current_dir(statedir.path())
        .stdin(Stdio::null())
        .output()
        .expect("fluxgate start --auth");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "status {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(statedir.path().join("instance.key"))
            .expect("instance.key")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_services_serve_tls_to_the_job_manager_and_to_each_other() {
    let pki = Pki::new("fluxgate nodes CA");
    pki.issue("node", true);
    let setup = Setup {
        auth: true,
        jm_args: vec![
            "--set".into(),
            format!("exec.tls_ca={}", pki.path("ca.pem")),
        ],
        exec_args: vec![
            "--tls-cert".into(),
            pki.path("node.pem"),
            "--tls-key".into(),
            pki.path("node.key"),
            "--tls-ca".into(),
            pki.path("ca.pem"),
        ],
        ..Setup::default()
    };
    let inst = Instance::start_setup(2, 1, setup).await;
    // Two nodes: the job manager starts the leader over TLS, which starts
    // its peer over TLS, each call with the node credential.
    let id = inst
        .submit(&JobspecBuilder::new(["true"]).nodes(2).ntasks(2), None)
        .await;
    let ev = inst.wait_clean(id).await;
    assert_eq!(context_u64(&ev, "finish", "status"), 0, "{:?}", names(&ev));
    assert!(!names(&ev).contains(&"exception"), "{:?}", names(&ev));
    assert_eq!(inst.r(id).await.ranks().count(), 2);
    let out = inst.log(id, "exec.eventlog").await;
    assert!(names(&out).contains(&"complete"), "{:?}", names(&out));

    // The exec API no longer answers in clear text.
    let (mut child, address) = extra_exec(&inst);
    assert!(address.starts_with("https://"), "{address}");
    let plain = address.replacen("https://", "http://", 1);
    let answered = match tonic::transport::Endpoint::from_shared(plain)
        .expect("address")
        .connect()
        .await
    {
        Err(_) => false,
        Ok(channel) => ExecClient::new(channel)
            .kill(pb::ExecKillRequest { id: 1, signum: 9 })
            .await
            .is_ok(),
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(!answered, "the exec service answered in clear text");
}

/// Every entry under `dir` (itself included): directories 0700, files 0600.
fn assert_private_tree(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(dir).expect("stat");
    let mode = meta.permissions().mode() & 0o777;
    if meta.is_dir() {
        assert_eq!(mode, 0o700, "{} is {mode:o}", dir.display());
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            assert_private_tree(&entry.expect("entry").path());
        }
    } else {
        assert_eq!(mode, 0o600, "{} is {mode:o}", dir.display());
    }
}

#[test]
fn fluxgate_start_keeps_its_state_private_and_admits_only_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let guest = fluxgate_integration_tests::GuestUser::create("st");
    // A parent others may enter, so only the state directory's own mode
    // keeps the guest out; the state directory starts loose, as an old one.
    let top = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let statedir = top.path().join("state");
    std::fs::create_dir(&statedir).expect("mkdir");
    std::fs::set_permissions(&statedir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // Run as root with no --auth: CMD has the owner's token, the guest
    // (a real other user on this machine) has only the address.
    let script = r#"
        set -e
        test -n "$FLUXGATE_TOKEN"
        $F run true
        as_guest() { runuser -u "$GUEST" -- env -u FLUXGATE_TOKEN FLUXGATE_URI="$FLUXGATE_URI" "$@"; }
        if as_guest $F jobs -a 2>err; then exit 10; fi
        grep -q 'requires credentials' err
        if as_guest $F submit true 2>err; then exit 11; fi
        grep -q 'requires credentials' err
        if as_guest cat "$FLUXGATE_STATEDIR/fluxgate.db" >/dev/null 2>&1; then exit 12; fi
        if as_guest cat "$FLUXGATE_STATEDIR/owner.token" >/dev/null 2>&1; then exit 13; fi
        echo ok
    "#;
    let out = Command::new(binary("fluxgate"))
        .args(["start", "--size", "1", "--kill-timeout", "1"])
        .arg("--statedir")
        .arg(&statedir)
        .args(["--", "sh", "-c", script])
        .env("F", binary("fluxgate"))
        .env("GUEST", &guest.name)
        .env_remove("FLUXGATE_TOKEN")
        .current_dir(top.path())
        .stdin(Stdio::null())
        .output()
        .expect("fluxgate start");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "status {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The store, its -wal and -shm, the logs, the key, the tokens, the URI.
    for name in [
        "fluxgate.db",
        "job-manager.log",
        "exec-0.log",
        "owner.token",
        "uri",
    ] {
        assert!(statedir.join(name).exists(), "no {name}");
    }
    assert_private_tree(&statedir);
    let refused = guest.shell(&format!("cat {}/fluxgate.db", statedir.display()), &[]);
    assert!(!refused.status.success(), "the guest read the store");
}

#[test]
fn a_state_directory_of_another_user_is_refused() {
    let guest = fluxgate_integration_tests::GuestUser::create("sd");
    let top = tempfile::tempdir().expect("tempdir");
    let statedir = top.path().join("theirs");
    std::fs::create_dir(&statedir).expect("mkdir");
    nix::unistd::chown(&statedir, Some(nix::unistd::Uid::from_raw(guest.uid)), None)
        .expect("chown");
    let out = Command::new(binary("fluxgate-job-manager"))
        .args(["--listen", "127.0.0.1:0", "--size", "1"])
        .arg("--statedir")
        .arg(&statedir)
        .stdin(Stdio::null())
        .output()
        .expect("job manager");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("belongs to uid {}", guest.uid)),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&statedir).expect("read").count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_credential_acts_for_its_owner_only_while_the_job_runs() {
    use std::os::unix::fs::PermissionsExt;
    let guest = fluxgate_integration_tests::GuestUser::create("jc");
    let inst = Instance::start_auth(1, 2).await;
    let owner = inst.owner_token.clone().expect("owner token");
    let others = submit_held(&inst, &owner).await;
    // Where the guest's task leaves its credential for the test.
    let drop_dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(drop_dir.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod");
    let kept = drop_dir.path().join("token");
    let script = format!(
        "set -e\n\
         export FLUXGATE_URI={uri}\n\
         F={f}\n\
         test -n \"$FLUXGATE_TOKEN\"\n\
         $F jobs -a >/dev/null && echo jobs-ok\n\
         $F job info $FLUX_JOB_ID R >/dev/null && echo info-ok\n\
         if $F job info {others} eventlog 2>err; then echo read-others; fi\n\
         grep -q 'may not' err && echo others-denied\n\
         if $F cancel {others} 2>/dev/null; then echo cancelled-others; fi\n\
         echo \"$FLUXGATE_TOKEN\" > {kept}\n",
        uri = inst.uri,
        f = binary("fluxgate").display(),
        others = others,
        kept = kept.display(),
    );
    let guest_token = inst.token(&guest.name, guest.uid, Some(600));
    let spec = JobspecBuilder::new(["sh", "-c", script.as_str()])
        .cwd("/tmp")
        .build()
        .expect("jobspec")
        .to_json();
    let id = JobId::from(
        inst.jobs_as(Some(&guest_token))
            .await
            .submit(pb::SubmitRequest {
                jobspec: spec,
                urgency: None,
                flags: 0,
                ..Default::default()
            })
            .await
            .expect("the guest submits")
            .into_inner()
            .id,
    );
    let ev = inst.wait_clean(id).await;
    let out = output_data(&inst.log(id, "output").await).concat();
    assert_eq!(context_u64(&ev, "finish", "status"), 0, "{out}");
    assert!(out.contains("jobs-ok") && out.contains("info-ok"), "{out}");
    assert!(out.contains("others-denied"), "{out}");
    assert!(
        !out.contains("read-others") && !out.contains("cancelled-others"),
        "{out}"
    );
    // The owner's job is untouched.
    let theirs = main_log(&inst, others).await;
    assert!(
        !names(&theirs).contains(&"exception"),
        "{:?}",
        names(&theirs)
    );

    // The credential named the guest and the job, and it ended with the job.
    let token = std::fs::read_to_string(&kept).expect("the task kept its token");
    let claims = fluxgate_shared::auth::token::peek(&token).expect("a token");
    assert_eq!((claims.uid, claims.job), (guest.uid, Some(id.as_u64())));
    let e = unauthenticated(
        inst.jobs_as(Some(token.trim()))
            .await
            .list(pb::ListRequest::default())
            .await,
        "a job's credential after the job",
    );
    assert!(
        e.contains(&format!(
            "the credential of job {id} is no longer valid: the job has ended"
        )),
        "{e}"
    );
    // Nor does it enter what is stored of the job.
    let stored = inst
        .jobs()
        .await
        .info(pb::InfoRequest {
            id: id.into(),
            keys: vec!["jobspec".into(), "eventlog".into()],
            ..Default::default()
        })
        .await
        .expect("info")
        .into_inner();
    for (key, text) in &stored.values {
        assert!(
            !text.contains(token.trim()),
            "the credential is in the {key}"
        );
    }
}

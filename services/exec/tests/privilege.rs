//! Jobs of other users on a root exec service: nothing the job's owner
//! controls is used while a process is still root. Each attack is made as a
//! real unprivileged account, created here and removed after; without root
//! the tests say so and do nothing.

mod common;

use std::collections::HashMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use fluxgate_exec::config::Config;
use fluxgate_exec::server::{self, Running};
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::start_response::Response as R;
use fluxgate_proto::v1::{StartRequest, StartResponse};
use fluxgate_shared::IdSet;
use serde_json::{Value, json};

use common::fake_jm;

// ---------------------------------------------------------------- accounts

/// useradd and userdel lock the account files: one at a time here, and a
/// retry when another process holds the lock.
static ACCOUNTS: Mutex<()> = Mutex::new(());

/// A real unprivileged account, removed on drop.
struct Guest {
    name: String,
    uid: u32,
    gid: u32,
}

impl Guest {
    /// A new account; creating users and switching to them needs root,
    /// which CI runs as.
    fn create(tag: &str) -> Guest {
        assert!(
            nix::unistd::geteuid().is_root(),
            "creating users and switching to them needs root (CI runs as root)"
        );
        let name = format!("fgx{}{tag}", std::process::id());
        let _lock = ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner());
        let args = [
            "--no-create-home",
            "--user-group",
            "--shell",
            "/bin/sh",
            name.as_str(),
        ];
        account_command("useradd", &args);
        let user = nix::unistd::User::from_name(&name)
            .unwrap()
            .expect("the account just created");
        Guest {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            name,
        }
    }

    /// Make `path` this account's.
    fn own(&self, path: &Path) {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).unwrap();
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _lock = ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner());
        account_command("userdel", &[self.name.as_str()]);
    }
}

/// Run an account tool, again while the account files are locked by
/// someone else (exit 10 from useradd, 10 from userdel).
fn account_command(tool: &str, args: &[&str]) {
    for _ in 0..100 {
        let out = Command::new(tool).args(args).output().unwrap();
        if out.status.success() {
            return;
        }
        if out.status.code() != Some(10) {
            panic!(
                "{tool} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{tool} {args:?}: the account files stayed locked");
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

// ---------------------------------------------------------------- service

/// A root exec service joined to a fake job manager.
async fn exec() -> Running {
    let (jm_uri, jm) = fake_jm().await;
    let mut config = Config::single(&jm_uri, "vm", IdSet::from_range(0, 1));
    config.kill_timeout = Duration::from_secs(2);
    let running = server::start(config).await.unwrap();
    jm.wait_hellos(1).await;
    running
}

fn jobspec(command: &[&str], system: Value) -> String {
    let mut sys = json!({"duration": 0, "environment": {"PATH": "/usr/local/bin:/usr/bin:/bin"}});
    if let Value::Object(extra) = system {
        for (k, v) in extra {
            if k == "environment" {
                for (name, value) in v.as_object().unwrap() {
                    sys["environment"][name] = value.clone();
                }
            } else {
                sys[k] = v;
            }
        }
    }
    json!({
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": command, "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": sys},
    })
    .to_string()
}

/// Run job `id` of `userid` to its end; every response.
async fn run(addr: &str, id: u64, userid: u32, jobspec: String) -> Vec<StartResponse> {
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "nodelist": ["vm"]}});
    let request = StartRequest {
        id,
        userid,
        jobspec,
        r: r.to_string(),
        reattach: false,
        ranks: String::new(),
        peers: [(0, addr.to_string())].into(),
        credential: String::new(),
    };
    let mut client = ExecClient::connect(addr.to_string()).await.unwrap();
    let mut stream = client.start(request).await.unwrap().into_inner();
    let mut all = Vec::new();
    let fut = async {
        while let Some(r) = stream.message().await.unwrap() {
            all.push(r);
        }
    };
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("the job's stream did not end");
    all
}

/// Output text per stream name ("stdout", "stderr").
fn output(all: &[StartResponse]) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    for r in all {
        if let Some(R::OutputEvent(line)) = &r.response {
            let v: Value = serde_json::from_str(line).unwrap();
            let c = &v["context"];
            if let (Some(stream), Some(data)) = (c["stream"].as_str(), c["data"].as_str()) {
                out.entry(stream.to_string()).or_default().push_str(data);
            }
        }
    }
    out
}

fn exceptions(all: &[StartResponse]) -> Vec<String> {
    all.iter()
        .filter_map(|r| match &r.response {
            Some(R::Exception(e)) => Some(e.note.clone()),
            _ => None,
        })
        .collect()
}

fn finish(all: &[StartResponse]) -> Option<i32> {
    all.iter().find_map(|r| match &r.response {
        Some(R::Finish(f)) => Some(f.status),
        _ => None,
    })
}

/// Files in `dir` by name.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn loader_variables_of_a_job_run_only_as_its_owner() {
    let guest = Guest::create("ld");
    assert!(
        Command::new("gcc").arg("--version").output().is_ok(),
        "gcc is needed to build the preloaded library"
    );
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let log = dir.path().join("log");
    std::fs::create_dir(&log).unwrap();
    chmod(&log, 0o777);
    let seen = log.join("euid");
    let source = dir.path().join("evil.c");
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n#include <unistd.h>\n\
             __attribute__((constructor)) static void who(void) {{\n\
             FILE *f = fopen(\"{}\", \"a\");\n\
             if (f) {{ fprintf(f, \"%u\\n\", (unsigned) geteuid()); fclose(f); }}\n}}\n",
            seen.display()
        ),
    )
    .unwrap();
    let lib = dir.path().join("evil.so");
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&source)
        .status()
        .unwrap();
    assert!(built.success());
    chmod(&lib, 0o755);

    let ex = exec().await;
    let js = jobspec(
        &["sh", "-c", "id -u; echo $LD_PRELOAD"],
        json!({"environment": {
            "LD_PRELOAD": lib.to_str().unwrap(),
            "LD_LIBRARY_PATH": "/nonexistent",
            "GCONV_PATH": "/nonexistent",
            "MALLOC_CHECK_": "3",
            "MALLOC_ARENA_MAX": "1",
        }}),
    );
    let all = run(&ex.exec_address, 1, guest.uid, js).await;
    assert_eq!(
        output(&all).get("stdout").map(String::as_str),
        Some(format!("{}\n{}\n", guest.uid, lib.display()).as_str()),
        "{all:?}"
    );
    assert_eq!(finish(&all), Some(0));
    // The library ran (in the task), and only ever as the job's owner.
    let euids = std::fs::read_to_string(&seen).unwrap();
    assert!(!euids.is_empty());
    for line in euids.lines() {
        assert_eq!(line, guest.uid.to_string(), "euids seen: {euids:?}");
    }
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn path_lookup_and_cwd_are_the_owners_not_roots() {
    let guest = Guest::create("path");
    // Only root may enter this directory.
    let private = tempfile::tempdir().unwrap();
    chmod(private.path(), 0o700);
    let tool = private.path().join("fgtool");
    std::fs::write(&tool, "#!/bin/sh\necho ran\n").unwrap();
    chmod(&tool, 0o755);
    let path = format!("{}:/usr/bin:/bin", private.path().display());
    let js = jobspec(&["fgtool"], json!({"environment": {"PATH": path}}));
    let ex = exec().await;

    // Root's own job finds it ...
    let all = run(&ex.exec_address, 2, 0, js.clone()).await;
    assert_eq!(output(&all)["stdout"], "ran\n");
    // ... the guest's does not: the lookup is made with the guest's rights.
    let all = run(&ex.exec_address, 3, guest.uid, js).await;
    assert_eq!(
        exceptions(&all),
        ["task 0 (host vm): start failed: fgtool: No such file or directory"]
    );
    assert_eq!(finish(&all), Some(127 << 8));

    // A cwd only root may enter: the guest's task starts in /tmp, warned.
    let js = jobspec(
        &["sh", "-c", "pwd"],
        json!({"cwd": private.path().to_str().unwrap()}),
    );
    let all = run(&ex.exec_address, 4, guest.uid, js).await;
    let out = output(&all);
    assert_eq!(out["stdout"], "/tmp\n");
    assert_eq!(
        out["stderr"],
        format!(
            "Could not change dir to {}: Permission denied. Going to /tmp instead\n",
            private.path().display()
        )
    );
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn output_files_are_opened_as_the_owner_through_a_swapped_link() {
    let guest = Guest::create("out");
    let base = tempfile::tempdir().unwrap();
    chmod(base.path(), 0o755);
    // Root's directory, with a file of root's the guest would like to clobber.
    let victim = base.path().join("root");
    std::fs::create_dir(&victim).unwrap();
    chmod(&victim, 0o755);
    let keep = victim.join("keep");
    std::fs::write(&keep, "root data\n").unwrap();
    // The guest's directory, with `out` a link the guest controls.
    let home = base.path().join("guest");
    let real = home.join("real");
    std::fs::create_dir_all(&real).unwrap();
    guest.own(&home);
    guest.own(&real);
    let out = home.join("out");
    std::os::unix::fs::symlink(&victim, &out).unwrap();

    let ex = exec().await;
    let output_to = |path: &str, cwd: &Path| {
        jobspec(
            &["sh", "-c", "echo guest data"],
            json!({"cwd": cwd.to_str().unwrap(),
                   "shell": {"options": {"output": {"stdout": {"type": "file", "path": path}}}}}),
        )
    };

    // Through the link as it stands: refused, as it would be for the guest.
    let target = format!("{}/keep", out.display());
    let all = run(&ex.exec_address, 10, guest.uid, output_to(&target, &real)).await;
    assert_eq!(
        exceptions(&all),
        [format!(
            "cannot open {target} for stdout: Permission denied (os error 13)"
        )]
    );
    assert_eq!(finish(&all), Some(1 << 8));

    // The guest flips the link between its directory and root's while jobs
    // write through it.
    let mut flipper = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while :; do ln -sfn {v} {o}; ln -sfn {r} {o}; done",
            v = victim.display(),
            r = real.display(),
            o = out.display()
        ))
        .uid(guest.uid)
        .gid(guest.gid)
        .spawn()
        .unwrap();
    let mut jobs = Vec::new();
    for i in 0..60u64 {
        let path = if i % 2 == 0 {
            format!("{}/f{{{{id}}}}", out.display())
        } else {
            target.clone()
        };
        let js = output_to(&path, &real);
        let addr = ex.exec_address.clone();
        let uid = guest.uid;
        jobs.push(tokio::spawn(
            async move { run(&addr, 100 + i, uid, js).await },
        ));
    }
    let mut results = Vec::new();
    for job in jobs {
        results.push(job.await.unwrap());
    }
    flipper.kill().unwrap();
    flipper.wait().unwrap();
    for all in &results {
        // Each job either wrote into the guest's directory or was refused.
        for note in exceptions(all) {
            assert!(note.starts_with("cannot open "), "{note}");
        }
    }
    assert_eq!(listing(&victim), ["keep"]);
    assert_eq!(std::fs::read_to_string(&keep).unwrap(), "root data\n");
    assert_eq!(std::fs::metadata(&keep).unwrap().uid(), 0);
    for name in listing(&real) {
        let meta = std::fs::metadata(real.join(&name)).unwrap();
        assert_eq!(meta.uid(), guest.uid, "{name}");
    }

    // A relative path is the job's cwd's, and the new file is the guest's.
    let all = run(&ex.exec_address, 11, guest.uid, output_to("rel.txt", &real)).await;
    assert_eq!(finish(&all), Some(0), "{all:?}");
    let rel = real.join("rel.txt");
    assert_eq!(std::fs::read_to_string(&rel).unwrap(), "guest data\n");
    let meta = std::fs::metadata(&rel).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (guest.uid, 0o644));
    ex.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rlimits_are_set_in_the_owners_task() {
    let guest = Guest::create("rl");
    let ex = exec().await;
    let js = jobspec(
        &["sh", "-c", "ulimit -n; id -u"],
        json!({"shell": {"options": {"rlimit": {"nofile": 64}}}}),
    );
    let all = run(&ex.exec_address, 20, guest.uid, js).await;
    assert_eq!(output(&all)["stdout"], format!("64\n{}\n", guest.uid));
    ex.stop().await.unwrap();
}

/// A Start of job `id` on core `core`, for a session.
fn start_request(addr: &str, id: u64, userid: u32, core: u32, jobspec: String) -> StartRequest {
    let r = json!({"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": core.to_string()}}], "nodelist": ["vm"]}});
    StartRequest {
        id,
        userid,
        jobspec,
        r: r.to_string(),
        reattach: false,
        ranks: String::new(),
        peers: [(0, addr.to_string())].into(),
        credential: String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fifo_nobody_reads_fails_its_job_and_a_kill_flood_stalls_no_other() {
    use fluxgate_exec::bounded_open::OPEN_TIMEOUT;
    use fluxgate_proto::v1::session_request::Request as S;
    use fluxgate_proto::v1::{ExecKillRequest, SessionRequest};

    let guest = Guest::create("fifo");
    let base = tempfile::tempdir().unwrap();
    chmod(base.path(), 0o755);
    let home = base.path().join("guest");
    std::fs::create_dir(&home).unwrap();
    guest.own(&home);
    // The guest's FIFO, which nobody will read.
    let fifo = home.join("f");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .uid(guest.uid)
        .gid(guest.gid)
        .status()
        .unwrap();
    assert!(made.success());

    let ex = exec().await;
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    let mut client = ExecClient::connect(ex.exec_address.clone()).await.unwrap();
    let mut stream = client
        .session(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let send = |r: S| {
        let tx = tx.clone();
        async move { tx.send(SessionRequest { request: Some(r) }).await.unwrap() }
    };
    let to_fifo = jobspec(
        &["true"],
        json!({"cwd": home.to_str().unwrap(),
               "shell": {"options": {"output": {"stdout": {"type": "file", "path": "f"}}}}}),
    );
    let started = std::time::Instant::now();
    send(S::Start(start_request(
        &ex.exec_address,
        30,
        guest.uid,
        0,
        to_fifo,
    )))
    .await;
    // `fluxgate job kill`, again and again, while its driver waits on the FIFO.
    for _ in 0..300 {
        send(S::Kill(ExecKillRequest { id: 30, signum: 15 })).await;
    }
    // Another job on the same session (another user's, in the attack).
    let other = jobspec(&["sh", "-c", "echo other"], json!({}));
    send(S::Start(start_request(
        &ex.exec_address,
        31,
        guest.uid,
        1,
        other,
    )))
    .await;

    let mut other_done = None;
    let mut fifo_note = None;
    let read = async {
        while other_done.is_none() || fifo_note.is_none() {
            let resp = stream
                .message()
                .await
                .unwrap()
                .expect("the session stays open");
            match (&resp.response, resp.id) {
                (Some(R::Finish(f)), 31) => {
                    assert_eq!(f.status, 0);
                    other_done = Some(started.elapsed());
                }
                (Some(R::Exception(e)), 30) if fifo_note.is_none() => {
                    fifo_note = Some((e.note.clone(), started.elapsed()));
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(OPEN_TIMEOUT * 4, read)
        .await
        .expect("both jobs ended");
    let other_done = other_done.unwrap();
    let (note, failed_at) = fifo_note.unwrap();
    println!(
        "the other job finished after {other_done:?}; the FIFO's job failed after {failed_at:?}"
    );
    assert!(
        note.contains("cannot open f for stdout")
            && note.contains("FIFO nobody opened for reading within 10 s"),
        "{note}"
    );
    assert!(
        other_done < failed_at,
        "the other job waited for the FIFO: {other_done:?} >= {failed_at:?}"
    );
    drop(tx);
    ex.stop().await.unwrap();
}

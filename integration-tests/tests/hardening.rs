//! The second round of attacks of docs/SECURITY.md, each made as a real
//! unprivileged account (created here, removed after) against a job manager
//! that requires credentials: secrets on command lines, connection floods,
//! stream floods and eventlog growth. Without root the tests say so and do
//! nothing.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fluxgate_integration_tests::{GuestUser, Instance, Setup, binary, eventually};

/// A password no output may show.
const PASSWORD: &str = "Sekr3tPW";

/// The password the refusal test puts on command lines on purpose: another
/// one, so the test that lists every process's arguments never sees it.
const REFUSED: &str = "Refu5edPW";

/// `fluxgate ARGS` as the instance's owner, and how long it took.
fn owner_cli(inst: &Instance, args: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let out = Command::new(binary("fluxgate"))
        .args(args)
        .env("FLUXGATE_URI", &inst.uri)
        .env(
            "FLUXGATE_TOKEN",
            inst.owner_token.as_deref().expect("owner token"),
        )
        .stdin(Stdio::null())
        .output()
        .expect("fluxgate");
    (out, started.elapsed())
}

#[track_caller]
fn assert_ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// CPU seconds `pid` used so far (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').expect("stat format").1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// Open descriptors of `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

// ------------------------------------------------------------ secrets (4)

#[test]
fn a_store_password_is_refused_on_command_lines() {
    let url = format!("postgres://fg:{REFUSED}@127.0.0.1:1/db");
    let out = Command::new(binary("fluxgate"))
        .args(["start", "--size", "1", "--store-url", &url, "--", "true"])
        .env_remove("FLUXGATE_STORE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("fluxgate start");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--store-url holds a password")
            && err.contains("FLUXGATE_STORE_URL")
            && err.contains("--store-url-file"),
        "{err}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    for (flag, value) in [
        ("--set", format!("store.url={url}")),
        (
            "--set",
            format!("store.url=postgres://h/db?password={REFUSED}"),
        ),
        ("--store-url", url.clone()),
    ] {
        let out = Command::new(binary("fluxgate-job-manager"))
            .args(["--listen", "127.0.0.1:0", "--size", "1", flag, &value])
            .arg("--statedir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("job manager");
        assert!(!out.status.success(), "{flag} {value} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("holds a password"), "{err}");
        assert!(!err.contains(REFUSED), "{err}");
    }
}

#[test]
fn a_store_password_given_by_file_is_in_no_command_line_nor_log() {
    let guest = GuestUser::create("ps");
    let pg = fluxgate_integration_tests::postgres::PgServer::start();
    // The server trusts local connections: the password is carried, unused.
    let url = pg
        .new_database()
        .replacen("postgres@", &format!("postgres:{PASSWORD}@"), 1);
    let top = tempfile::tempdir().expect("tempdir");
    let url_file = top.path().join("store-url");
    fluxgate_os::private::write_file(&url_file, url.as_bytes()).expect("url file");
    let statedir = top.path().join("state");
    // The guest lists every process's arguments while the instance runs.
    let script = r#"
        set -e
        $F jobs >/dev/null
        runuser -u "$GUEST" -- ps -eo args > "$OUT"
    "#;
    let seen = top.path().join("ps.txt");
    let out = Command::new(binary("fluxgate"))
        .args([
            "start",
            "--size",
            "1",
            "--kill-timeout",
            "1",
            "--standby",
            "1",
        ])
        .arg("--store-url-file")
        .arg(&url_file)
        .arg("--statedir")
        .arg(&statedir)
        .args(["--", "sh", "-c", script])
        .env("F", binary("fluxgate"))
        .env("GUEST", &guest.name)
        .env("OUT", &seen)
        .env_remove("FLUXGATE_TOKEN")
        .env_remove("FLUXGATE_STORE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("fluxgate start");
    assert_ok(&out, "fluxgate start --store-url-file");
    let ps = std::fs::read_to_string(&seen).expect("ps output");
    assert!(ps.contains("fluxgate-job-manager"), "{ps}");
    assert!(
        !ps.contains(PASSWORD),
        "the password is on a command line:\n{ps}"
    );
    let log = std::fs::read_to_string(statedir.join("job-manager.log")).expect("log");
    assert!(!log.contains(PASSWORD), "the password is in the log");
    assert!(log.contains(":***@"), "the URL is not logged masked");
}

// ------------------------------------------------------- connections (2)

/// The guest's flood: `n` connections to `port` that send nothing, opened
/// again as they are closed, for `secs`; prints how many it opened.
const FLOOD: &str = r#"
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
socks, opened, end = [], 0, time.time() + secs
print("started", flush=True)
while time.time() < end:
    socks = [s for s in socks if s.fileno() >= 0]
    while len(socks) < n and time.time() < end:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            socks.append(s)
            opened += 1
        except OSError:
            time.sleep(0.01)
            break
    # Drop the ones the service closed.
    alive = []
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                s.close()
                continue
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            continue
        alive.append(s)
    socks = alive
    time.sleep(0.05)
print(opened, flush=True)
"#;

/// Start the guest's flood; returns once it is connecting.
fn flood(guest: &GuestUser, port: u16, n: usize, secs: u32) -> Child {
    let mut child = Command::new("runuser")
        .args(["-u", &guest.name, "--", "/usr/bin/python3", "-c", FLOOD])
        .args([port.to_string(), n.to_string(), secs.to_string()])
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("flood");
    let mut line = String::new();
    let stdout = child.stdout.as_mut().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("flood started");
    child
}

fn port_of(uri: &str) -> u16 {
    uri.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_flood_leaves_the_owner_served() {
    let guest = GuestUser::create("cf");
    let setup = Setup {
        auth: true,
        jm_args: [
            "--set",
            "limits.max_connections=400",
            "--set",
            "limits.max_connections_per_peer=300",
            "--set",
            "limits.handshake_timeout=5",
        ]
        .map(String::from)
        .to_vec(),
        ..Setup::default()
    };
    let inst = Instance::start_setup(1, 2, setup).await;
    let jm = inst.jm_pid();
    let port = port_of(&inst.uri);
    // 2,000 connections that say nothing, reopened as they are closed.
    let mut attack = flood(&guest, port, 2000, 20);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu_before = cpu_seconds(jm);
    let window = Instant::now();
    let (out, jobs_took) = owner_cli(&inst, &["jobs", "-a"]);
    assert_ok(&out, "owner's jobs under the flood");
    let (out, run_took) = owner_cli(&inst, &["run", "true"]);
    assert_ok(&out, "owner's run under the flood");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cpu = cpu_seconds(jm) - cpu_before;
    let fds = open_fds(jm);
    println!(
        "under the flood: owner's jobs {jobs_took:?}, run true {run_took:?}; job manager \
         {cpu:.2} s CPU in {:?}, {fds} descriptors open",
        window.elapsed()
    );
    assert!(
        fds < 400 + 256,
        "{fds} descriptors open: the cap did not hold"
    );
    let _ = attack.kill();
    let _ = attack.wait();

    // The descriptor limit itself reached: accepts fail with EMFILE, and
    // the job manager pauses rather than spins.
    let limit = open_fds(jm) + 50;
    let lowered = Command::new("prlimit")
        .args([
            "--pid",
            &jm.to_string(),
            &format!("--nofile={limit}:{limit}"),
        ])
        .status()
        .expect("prlimit");
    assert!(lowered.success());
    let mut attack = flood(&guest, port, 2000, 8);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu_before = cpu_seconds(jm);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let cpu = cpu_seconds(jm) - cpu_before;
    println!("at the descriptor limit ({limit}): job manager {cpu:.2} s CPU in 4 s");
    assert!(
        cpu < 2.0,
        "the job manager spun at EMFILE: {cpu:.2} s CPU in 4 s"
    );
    let _ = attack.kill();
    let _ = attack.wait();
    // Once the flood is gone, the owner is served again.
    eventually(Duration::from_secs(30), async || {
        let (out, _) = owner_cli(&inst, &["jobs", "-a"]);
        if out.status.success() {
            Ok(())
        } else {
            Err("the owner was not served again".to_string())
        }
    })
    .await;
}

// ------------------------------------------------------------ streams (6)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_holds_no_more_streams_than_the_cap() {
    let guest = GuestUser::create("sf");
    let setup = Setup {
        auth: true,
        jm_args: ["--set", "limits.max_streams_per_user=4"]
            .map(String::from)
            .to_vec(),
        ..Setup::default()
    };
    let inst = Instance::start_setup(1, 1, setup).await;
    let token = inst.token(&guest.name, guest.uid, Some(3600));
    let f = binary("fluxgate");
    let env = [
        ("FLUXGATE_URI", inst.uri.as_str()),
        ("FLUXGATE_TOKEN", token.as_str()),
        ("F", f.to_str().expect("path")),
    ];
    // A held job of the guest's, followed by four watchers; the fifth is
    // refused, naming the limit.
    let script = r#"
        set -e
        err=$(mktemp)
        id=$($F submit --urgency 0 true)
        dir=$(mktemp -d)
        for i in 1 2 3 4; do $F job eventlog -F "$id" >"$dir/$i" 2>&1 & done
        # Each has its stream once it printed the first event.
        n=0
        until [ -s "$dir/1" ] && [ -s "$dir/2" ] && [ -s "$dir/3" ] && [ -s "$dir/4" ]; do
            n=$((n + 1)); [ $n -lt 600 ] || exit 11; sleep 0.1
        done
        if $F job eventlog -F "$id" 2>"$err"; then exit 10; fi
        cat "$err"; rm -f "$err"
        $F cancel "$id"
        wait
        rm -rf "$dir"
    "#;
    let started = Instant::now();
    let out = guest.shell(script, &env);
    let err = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?} {err} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(err.contains("limits.max_streams_per_user"), "{err}");
    // The owner's own streams are not counted.
    let (out, took) = owner_cli(&inst, &["jobs", "-a"]);
    assert_ok(&out, "owner's jobs");
    println!(
        "the fifth stream was refused; the guest's script took {:?}, the owner's jobs {took:?}",
        started.elapsed()
    );
}

// --------------------------------------------------------------- memos (7)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_memos_cannot_grow_its_eventlog_without_bound() {
    let guest = GuestUser::create("mm");
    let inst = Instance::start_auth(1, 1).await;
    let token = inst.token(&guest.name, guest.uid, Some(3600));
    let f = binary("fluxgate");
    let env = [
        ("FLUXGATE_URI", inst.uri.as_str()),
        ("FLUXGATE_TOKEN", token.as_str()),
        ("F", f.to_str().expect("path")),
    ];
    // 60 KB memos set and cleared until refused.
    let script = r#"
        id=$($F submit --urgency 0 true) || exit 20
        err=$(mktemp)
        big=$(head -c 61440 /dev/zero | tr '\0' x)
        n=0
        while [ $n -lt 100 ]; do
            $F job memo "$id" "a=$big" 2>"$err" || break
            $F job memo "$id" a=null 2>"$err" || break
            n=$((n + 1))
        done
        echo "$n"
        cat "$err"; rm -f "$err"
        $F job eventlog "$id" | wc -c
    "#;
    let out = guest.shell(script, &env);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let rounds: u32 = lines.next().and_then(|l| l.parse().ok()).expect("rounds");
    let rest: Vec<&str> = lines.collect();
    let bytes: u64 = rest
        .last()
        .and_then(|l| l.trim().parse().ok())
        .expect("eventlog size");
    println!("refused after {rounds} rounds; the eventlog is {bytes} bytes");
    assert!(rounds < 100, "never refused: {text}");
    assert!(
        rest.join("\n").contains("over the limit of 1048576 bytes"),
        "{text}"
    );
    assert!(bytes < 2 << 20, "eventlog of {bytes} bytes");
}

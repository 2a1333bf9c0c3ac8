//! Restart time against the size of the store: how long the job manager
//! binary takes from exec to serving (its URI file written) over a fresh
//! store, and over stores holding many inactive jobs (and pending ones).
//!
//! `cargo bench -p fluxgate-job-manager --bench restart` prints, for each
//! store, the median of three starts and its ratio to the fresh store's.
//! Sizes: FLUXGATE_BENCH_RESTART="inactive:pending,..." (default
//! "0:0,100000:10000,1000000:0").
//!
//! The stores are written through the store API with what the job manager
//! writes for a simulated job: jobspec, R, a twelve-line eventlog and, for
//! inactive jobs, the summary.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fluxgate_job_manager::core::Inactive;
use fluxgate_job_manager::store::{Log, SqliteStore, Store, Write};
use fluxgate_shared::job::JobResult;
use fluxgate_shared::jobspec::JobspecBuilder;

const R: &str = r#"{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"starttime":0,"expiration":0,"nodelist":["node0"]}}"#;

fn main() {
    let sizes = std::env::var("FLUXGATE_BENCH_RESTART")
        .unwrap_or_else(|_| "0:0,100000:10000,1000000:0".into());
    let mut baseline = None;
    for spec in sizes.split(',') {
        let (inactive, pending) = spec
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
            .unwrap_or_else(|| panic!("bad size {spec:?}: expected INACTIVE:PENDING"));
        let dir = tempfile::tempdir().expect("tempdir");
        let t = Instant::now();
        fill(dir.path(), inactive, pending);
        let filled = t.elapsed();
        let mut runs: Vec<Duration> = (0..3)
            .map(|_| start_to_serving(dir.path(), inactive, pending))
            .collect();
        runs.sort();
        let median = runs[1];
        let base = *baseline.get_or_insert(median);
        let size = std::fs::metadata(fluxgate_job_manager::server::store_path(dir.path()))
            .map(|m| m.len())
            .unwrap_or(0);
        println!(
            "restart {inactive:>8} inactive + {pending:>6} pending: median {:>8.1} ms \
             (runs {:?} ms), {:.2}x fresh; store {} MiB written in {:.1} s",
            median.as_secs_f64() * 1e3,
            runs.iter().map(|d| d.as_millis()).collect::<Vec<_>>(),
            median.as_secs_f64() / base.as_secs_f64(),
            size >> 20,
            filled.as_secs_f64()
        );
    }
}

/// Time from exec to the URI file, then stop it (SIGTERM, so the next start
/// finds a cleanly closed store, as after maintenance). Its log must show
/// that it recovered the jobs the store holds.
fn start_to_serving(statedir: &Path, inactive: u64, pending: u64) -> Duration {
    let uri = statedir.join("uri");
    let log_path = statedir.join("jm.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let _ = std::fs::remove_file(&uri);
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fluxgate-job-manager"))
        .args(["--listen", "127.0.0.1:0", "--nodelist", "node0"])
        .arg("--statedir")
        .arg(statedir)
        .env("FLUXGATE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn fluxgate-job-manager");
    while !uri.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("job manager exited: {status}");
        }
        assert!(t.elapsed() < Duration::from_secs(600), "no start in 600 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = t.elapsed();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let want = format!("active={pending} inactive={inactive} ");
    assert!(
        text.contains(&want),
        "the job manager did not recover {want}: {text}"
    );
    took
}

fn line(t: f64, name: &str, context: &str) -> String {
    if context.is_empty() {
        format!(r#"{{"timestamp":{t:.6},"name":"{name}"}}"#)
    } else {
        format!(r#"{{"timestamp":{t:.6},"name":"{name}","context":{context}}}"#)
    }
}

fn fill(statedir: &Path, inactive: u64, pending: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let store =
        SqliteStore::open(&fluxgate_job_manager::server::store_path(statedir)).expect("store");
    let jobspec = JobspecBuilder::new(["true"])
        .setattr_kv("system.exec.test.run_duration=0")
        .build()
        .expect("jobspec")
        .to_json();
    let t0 = 1_700_000_000.0;
    let mut batch = Vec::new();
    for n in 0..inactive + pending {
        // Ids in FLUID shape: time in the high bits, increasing.
        let id = (n + 1) << 22;
        let t = t0 + n as f64 * 1e-3;
        batch.push(Write::NewJob {
            id,
            userid: 1000,
            jobspec: jobspec.clone(),
        });
        let mut names: Vec<(&str, String)> = vec![
            (
                "submit",
                r#"{"userid":1000,"urgency":16,"flags":0,"version":1}"#.into(),
            ),
            ("validate", String::new()),
            ("depend", String::new()),
            ("priority", r#"{"priority":16}"#.into()),
        ];
        if n < inactive {
            names.extend([
                ("alloc", String::new()),
                ("start", String::new()),
                ("finish", r#"{"status":0}"#.into()),
                ("release", r#"{"ranks":"all","final":true}"#.into()),
                ("free", String::new()),
                ("clean", String::new()),
            ]);
        }
        for (i, (name, ctx)) in names.iter().enumerate() {
            batch.push(Write::Append {
                id,
                log: Log::Main,
                line: line(t + i as f64 * 1e-4, name, ctx),
            });
        }
        if n < inactive {
            batch.push(Write::SetR { id, r: R.into() });
            let summary = Inactive {
                userid: 1000,
                name: "true".into(),
                result: JobResult::Completed,
                waitstatus: Some(0),
                t_submit: t,
                t_run: Some(t + 5e-4),
                t_inactive: t + 9e-4,
                urgency: 16,
                ntasks: 1,
                nnodes: 1,
                nodelist: "node0".into(),
                exception: None,
                waitable: false,
                queue: None,
                usage: None,
            };
            batch.push(Write::Summary {
                id,
                summary: summary.to_summary(),
            });
        }
        if batch.len() >= 50_000 {
            runtime
                .block_on(store.commit(std::mem::take(&mut batch)))
                .expect("commit");
        }
    }
    if !batch.is_empty() {
        runtime.block_on(store.commit(batch)).expect("commit");
    }
    store.close();
}

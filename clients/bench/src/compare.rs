//! The same workload on another job manager, in the same run: HyperQueue
//! (`--compare-hq PATH`) or Flux (`--compare-flux PATH`), so that a ratio is
//! measured beside Fluxgate's figure under the same load, not remembered.
//!
//! - HyperQueue: a server and one worker in a private server directory,
//!   then one array job of N `true` tasks, `hq submit --array 1-N --wait`;
//!   the figure is tasks per second from submit to the last task's end.
//! - Flux: `flux start` with a script that times `flux submit --cc=1-N
//!   --quiet --wait true` (for `sim`, with flux's test execution,
//!   `system.exec.test.run_duration`, on `--test-size=K` brokers).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// A job manager measured beside Fluxgate.
#[derive(Debug, Clone)]
pub enum Peer {
    /// The `hq` binary.
    HyperQueue(PathBuf),
    /// The `flux` binary.
    Flux(PathBuf),
}

impl Peer {
    /// Its name in the rows.
    pub fn name(&self) -> &'static str {
        match self {
            Peer::HyperQueue(_) => "hyperqueue",
            Peer::Flux(_) => "flux",
        }
    }
}

/// What one comparison run measured.
#[derive(Debug, Clone)]
pub struct PeerFigures {
    /// The peer's name.
    pub peer: &'static str,
    /// The workload (`real` or `sim`).
    pub workload: &'static str,
    /// Jobs (or tasks) run.
    pub jobs: u64,
    /// Seconds from the first submit to the last end.
    pub elapsed_s: f64,
    /// The load average before the run, where the system tells it.
    pub loadavg: Option<[f64; 3]>,
}

impl PeerFigures {
    /// Jobs per second.
    pub fn jobs_per_sec(&self) -> f64 {
        self.jobs as f64 / self.elapsed_s.max(f64::MIN_POSITIVE)
    }

    /// The row as JSON.
    pub fn json(&self) -> Value {
        json!({
            "workload": self.workload,
            "peer": self.peer,
            "jobs": self.jobs,
            "elapsed_s": self.elapsed_s,
            "jobs_per_sec": self.jobs_per_sec(),
            "loadavg": self.loadavg,
        })
    }

    /// The row as a line of text.
    pub fn line(&self) -> String {
        let load = self
            .loadavg
            .map(|l| format!(" (load {:.2})", l[0]))
            .unwrap_or_default();
        format!(
            "{} {} jobs={} elapsed={:.3}s rate={:.0} jobs/s{load}",
            self.peer,
            self.workload,
            self.jobs,
            self.elapsed_s,
            self.jobs_per_sec(),
        )
    }

    /// `ours` over this peer's rate, as a row.
    pub fn ratio_line(&self, ours: f64) -> String {
        format!(
            "fluxgate / {}: {:.2}x ({:.0} vs {:.0} jobs/s)",
            self.peer,
            ours / self.jobs_per_sec().max(f64::MIN_POSITIVE),
            ours,
            self.jobs_per_sec()
        )
    }
}

/// Run `jobs` jobs of `workload` (`real`, or `sim` on `nodes` nodes) on `peer`.
pub async fn run(
    peer: &Peer,
    workload: &'static str,
    jobs: u64,
    nodes: u32,
) -> anyhow::Result<PeerFigures> {
    let loadavg = super::figures::loadavg();
    let elapsed = match peer {
        Peer::HyperQueue(hq) => {
            if workload != "real" {
                bail!("HyperQueue runs only real tasks: use --compare-hq with bench real");
            }
            hyperqueue(hq, jobs).await?
        }
        Peer::Flux(flux) => flux_run(flux, workload, jobs, nodes).await?,
    };
    Ok(PeerFigures {
        peer: peer.name(),
        workload,
        jobs,
        elapsed_s: elapsed,
        loadavg,
    })
}

/// A child killed when dropped, whatever happened.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

fn spawn(program: &Path, args: &[&str], cwd: &Path) -> anyhow::Result<Reaped> {
    let child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {}", program.display()))?;
    Ok(Reaped(child))
}

async fn output(program: &Path, args: &[&str], cwd: &Path) -> anyhow::Result<std::process::Output> {
    Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run {}", program.display()))
}

/// Poll `ready` every 50 ms for up to 30 s.
async fn wait_for(what: &str, mut ready: impl AsyncFnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if ready().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(anyhow!("{what} did not come up within 30 s"))
}

/// Seconds HyperQueue takes to run an array of `jobs` `true` tasks.
async fn hyperqueue(hq: &Path, jobs: u64) -> anyhow::Result<f64> {
    // The server directory, and the working directory of every hq
    // command: tasks write their job-N/ output files there, not here.
    let dir = tempfile::tempdir().context("cannot make a server directory")?;
    let cwd = dir.path();
    let sd = cwd.join("server").to_string_lossy().into_owned();
    let global = ["--server-dir", sd.as_str()];
    let with = |rest: &[&str]| -> Vec<String> {
        global
            .iter()
            .chain(rest.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let args = with(&["server", "start"]);
    let _server = spawn(
        hq,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        cwd,
    )?;
    let info = with(&["server", "info"]);
    wait_for("the HyperQueue server", async || {
        let a: Vec<&str> = info.iter().map(String::as_str).collect();
        output(hq, &a, cwd).await.is_ok_and(|o| o.status.success())
    })
    .await?;
    let args = with(&["worker", "start"]);
    let _worker = spawn(
        hq,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        cwd,
    )?;
    let list = with(&["--output-mode", "json", "worker", "list"]);
    wait_for("a HyperQueue worker", async || {
        let a: Vec<&str> = list.iter().map(String::as_str).collect();
        match output(hq, &a, cwd).await {
            Ok(o) if o.status.success() => serde_json::from_slice::<Value>(&o.stdout)
                .ok()
                .and_then(|v| v.as_array().map(|w| !w.is_empty()))
                .unwrap_or(false),
            _ => false,
        }
    })
    .await?;
    let array = format!("1-{jobs}");
    let submit = with(&["submit", "--array", &array, "--wait", "--", "true"]);
    let started = Instant::now();
    let out = output(
        hq,
        &submit.iter().map(String::as_str).collect::<Vec<_>>(),
        cwd,
    )
    .await?;
    let elapsed = started.elapsed().as_secs_f64();
    let stop = with(&["server", "stop"]);
    let _ = output(
        hq,
        &stop.iter().map(String::as_str).collect::<Vec<_>>(),
        cwd,
    )
    .await;
    if !out.status.success() {
        bail!(
            "hq submit failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(elapsed)
}

/// Seconds Flux takes to run `jobs` `true` jobs (real) or test-executed
/// jobs on `nodes` test brokers (sim), timed inside `flux start`.
async fn flux_run(flux: &Path, workload: &str, jobs: u64, nodes: u32) -> anyhow::Result<f64> {
    let (size, attr) = match workload {
        "sim" => (
            nodes.max(1),
            "--setattr=system.exec.test.run_duration=0.001s",
        ),
        _ => (1, ""),
    };
    // The broker's own start is not timed: the script reads the clock
    // around the submit, as the Fluxgate figure does.
    let script = format!(
        "t0=$(date +%s.%N); flux submit --cc=1-{jobs} --quiet --wait {attr} true || exit 1; \
         t1=$(date +%s.%N); echo \"elapsed $t0 $t1\""
    );
    let size = format!("--test-size={size}");
    let dir = tempfile::tempdir().context("cannot make a working directory")?;
    let out = output(flux, &["start", &size, "sh", "-c", &script], dir.path()).await?;
    if !out.status.success() {
        bail!(
            "flux start failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_elapsed(&String::from_utf8_lossy(&out.stdout))
}

/// The seconds between the two times of the script's `elapsed T0 T1` line.
fn parse_elapsed(stdout: &str) -> anyhow::Result<f64> {
    let line = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("elapsed "))
        .context("the flux script printed no times")?;
    let mut t = line.split_whitespace().map(str::parse::<f64>);
    match (t.next(), t.next()) {
        (Some(Ok(a)), Some(Ok(b))) if b >= a => Ok(b - a),
        _ => Err(anyhow!("cannot read the flux script's times: {line:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flux_scripts_times_are_read() {
        let got = parse_elapsed("noise\nelapsed 100.25 102.75\n").unwrap();
        assert!((got - 2.5).abs() < 1e-9);
        assert!(parse_elapsed("").is_err());
        assert!(parse_elapsed("elapsed 5 4").is_err());
    }

    #[test]
    fn rows_give_the_rate_and_the_ratio() {
        let f = PeerFigures {
            peer: "hyperqueue",
            workload: "real",
            jobs: 1000,
            elapsed_s: 2.0,
            loadavg: Some([1.0, 1.0, 1.0]),
        };
        assert_eq!(f.jobs_per_sec(), 500.0);
        assert_eq!(f.json()["jobs_per_sec"], 500.0);
        assert!(
            f.ratio_line(1000.0)
                .starts_with("fluxgate / hyperqueue: 2.00x")
        );
    }
}

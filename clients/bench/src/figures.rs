//! The figures of one run, and how they are shown: a table line or one JSON
//! object. A figure that was not measured stays `None` and shows as `-` in
//! the table and `null` in JSON, never as a made-up number.

use std::io::{self, Write};

use serde_json::{Value, json};

use fluxgate_cli::output::Render;

use super::cpu::{CpuPerJob, CpuTimes};
use super::metrics::Counters;

/// The figures of one run.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Workload name.
    pub workload: &'static str,
    /// Jobs asked for.
    pub jobs: u64,
    /// Which run of this combination (1-based).
    pub run: u32,
    /// Nodes up in the instance.
    pub nodes: Option<u64>,
    /// Cores per node of a local instance, when set by the bench.
    pub cores_per_node: Option<u32>,
    /// Whether the instance was the one named by FLUXGATE_URI.
    pub remote: bool,
    /// /proc/loadavg when the run started.
    pub loadavg: Option<[f64; 3]>,
    /// Wall time of the measured part of the run.
    pub elapsed_s: Option<f64>,
    /// End-to-end job throughput.
    pub jobs_per_sec: Option<f64>,
    /// Submission throughput.
    pub submit_per_sec: Option<f64>,
    /// Jobs started per second.
    pub sched_per_sec: Option<f64>,
    /// Median latency, milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile latency, milliseconds.
    pub p99_ms: Option<f64>,
    /// Job manager VmRSS at the end.
    pub rss_bytes: Option<u64>,
    /// Job manager VmRSS before submitting (held).
    pub rss_before_bytes: Option<u64>,
    /// RSS growth per job (held).
    pub rss_per_job_bytes: Option<f64>,
    /// Events committed during the run.
    pub events: Option<u64>,
    /// Store transactions during the run.
    pub commits: Option<u64>,
    /// Jobs that did not complete successfully.
    pub failed: Option<u64>,
    /// Median exec -> SERVING after SIGTERM (restart).
    pub restart_ms: Option<f64>,
    /// Median exec -> SERVING after SIGKILL (restart).
    pub restart_sigkill_ms: Option<f64>,
    /// Median SIGTERM -> exit (restart).
    pub stop_ms: Option<f64>,
    /// CPU a job cost the local instance's processes (sim, real, latency).
    pub cpu: Option<CpuPerJob>,
}

impl Figures {
    /// Empty figures of one run.
    pub fn new(workload: &'static str, jobs: u64, run: u32, loadavg: Option<[f64; 3]>) -> Self {
        Figures {
            workload,
            jobs,
            run,
            loadavg,
            ..Figures::default()
        }
    }

    /// Record what the job manager counted between `before` and `after`,
    /// when both could be read.
    pub fn set_counters(&mut self, before: Option<Counters>, after: Option<Counters>) {
        if let (Some(b), Some(a)) = (before, after) {
            let d = a.since(b);
            self.events = Some(d.events);
            self.commits = Some(d.commits);
        }
    }

    /// Which run this is, for messages: `sim 100 jobs on 4 nodes, run 2`.
    pub fn title(&self) -> String {
        let nodes = match self.nodes {
            Some(n) => format!(" on {n} nodes"),
            None => String::new(),
        };
        format!(
            "{} {} jobs{nodes}, run {}",
            self.workload, self.jobs, self.run
        )
    }

    /// Events per store transaction, when both were counted.
    pub fn events_per_commit(&self) -> Option<f64> {
        match (self.events, self.commits) {
            (Some(e), Some(c)) if c > 0 => Some(e as f64 / c as f64),
            _ => None,
        }
    }

    /// Set [`Figures::cpu`] from the instance's CPU times around the run.
    pub fn set_cpu(&mut self, before: Option<CpuTimes>, after: Option<CpuTimes>) {
        if let (Some(b), Some(a)) = (before, after) {
            self.cpu = a.per_job_since(b, self.jobs);
        }
    }

    fn extra(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = &self.cpu {
            parts.push(format!(
                "CPU/job {:.3}ms (job manager {:.3}, exec {:.3}, tasks {:.3})",
                c.total(),
                c.job_manager,
                c.exec,
                c.tasks
            ));
        }
        if let Some(b) = self.rss_per_job_bytes {
            parts.push(format!("{b:.0} B/job"));
        }
        if let Some(ms) = self.restart_ms {
            parts.push(format!("restart {ms:.0}ms"));
        }
        if let Some(ms) = self.restart_sigkill_ms {
            parts.push(format!("after SIGKILL {ms:.0}ms"));
        }
        if let Some(ms) = self.stop_ms {
            parts.push(format!("stop {ms:.0}ms"));
        }
        if let Some(f) = self.failed.filter(|f| *f > 0) {
            parts.push(format!("{f} failed"));
        }
        parts.join(", ")
    }
}

/// `x` per second over `secs`, when the span is measurable.
pub fn rate(count: u64, secs: f64) -> Option<f64> {
    (secs > 0.0 && secs.is_finite()).then(|| count as f64 / secs)
}

/// The `p`th percentile (nearest rank) of `sorted`.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The median of `values` (mean of the middle two when even).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

/// The machine's load average (1, 5 and 15 minutes), if /proc tells it.
pub fn loadavg() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|s| s.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

fn num(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(x) => format!("{x:.decimals$}"),
        None => "-".into(),
    }
}

fn mib(v: Option<u64>) -> String {
    match v {
        Some(b) => format!("{:.1}M", b as f64 / (1024.0 * 1024.0)),
        None => "-".into(),
    }
}

/// Column header and widths of the table.
const HEADER: &str = "WORKLOAD     JOBS  NODES    JOBS/S  SUBMIT/S   SCHED/S    P50ms    P99ms      RSS  EV/COMMIT  ELAPSED  LOAD  EXTRA";

impl Render for Figures {
    fn table(&self, out: &mut dyn Write) -> io::Result<()> {
        let nodes = self.nodes.map_or("-".into(), |n| n.to_string());
        let line = format!(
            "{:<8} {:>8} {:>6} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10} {:>8} {:>5}  {}",
            self.workload,
            self.jobs,
            nodes,
            num(self.jobs_per_sec, 1),
            num(self.submit_per_sec, 1),
            num(self.sched_per_sec, 1),
            num(self.p50_ms, 1),
            num(self.p99_ms, 1),
            mib(self.rss_bytes),
            num(self.events_per_commit(), 2),
            num(self.elapsed_s.map(|s| s.max(0.0)), 2),
            num(self.loadavg.map(|l| l[0]), 2),
            self.extra(),
        );
        writeln!(out, "{}", line.trim_end())
    }

    fn json(&self) -> Value {
        json!({
            "workload": self.workload,
            "jobs": self.jobs,
            "run": self.run,
            "nodes": self.nodes,
            "cores_per_node": self.cores_per_node,
            "remote": self.remote,
            "loadavg": self.loadavg,
            "elapsed_s": self.elapsed_s,
            "jobs_per_sec": self.jobs_per_sec,
            "submit_per_sec": self.submit_per_sec,
            "sched_per_sec": self.sched_per_sec,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "rss_bytes": self.rss_bytes,
            "rss_before_bytes": self.rss_before_bytes,
            "rss_per_job_bytes": self.rss_per_job_bytes,
            "events_per_commit": self.events_per_commit(),
            "events": self.events,
            "commits": self.commits,
            "failed": self.failed,
            "restart_ms": self.restart_ms,
            "restart_sigkill_ms": self.restart_sigkill_ms,
            "stop_ms": self.stop_ms,
            "cpu_ms_per_job": self.cpu.map(|c| json!({
                "job_manager": c.job_manager,
                "exec": c.exec,
                "tasks": c.tasks,
            })),
        })
    }
}

/// The table's header, printed once before the first row.
#[derive(Debug, Default)]
pub struct Table {
    printed: bool,
}

impl Table {
    /// Print the load average and the column names, the first time only.
    pub fn header_once(&mut self, loadavg: Option<[f64; 3]>) {
        if std::mem::replace(&mut self.printed, true) {
            return;
        }
        match loadavg {
            Some([a, b, c]) => println!("load average at start: {a:.2} {b:.2} {c:.2}"),
            None => println!("load average at start: unknown"),
        }
        println!("{HEADER}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn unmeasured_figures_are_null() {
        let f = Figures::new("sim", 10, 1, None);
        let v = f.json();
        assert!(v["jobs_per_sec"].is_null());
        assert!(v["events_per_commit"].is_null());
        assert_eq!(v["jobs"], 10);
        assert_eq!(rate(10, 0.0), None);
    }
}

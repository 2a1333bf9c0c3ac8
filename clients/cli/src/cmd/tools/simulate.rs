//! `fluxgate simulate`: replay a workload trace (SWF) in virtual time
//! through the scheduler's own code (`shared::sched`), or generate one.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use fluxgate_shared::sched::simulate::{self, Machine, Replay, Summary};
use fluxgate_shared::sched::swf;
use fluxgate_shared::sched::{Policy, RESERVATION_DEPTH};
use serde_json::json;

/// Arguments of `fluxgate simulate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The trace (Standard Workload Format); `-` reads standard input.
    #[arg(value_name = "TRACE.swf", required_unless_present = "generate")]
    trace: Option<String>,
    /// Nodes of the machine.
    #[arg(long, value_name = "N")]
    nodes: u32,
    /// Cores of each node: a job asking P processors gets ceil(P / C)
    /// whole nodes.
    #[arg(long, value_name = "C")]
    cores_per_node: u32,
    /// The scheduling policy.
    #[arg(long, value_enum, default_value = "easy")]
    policy: PolicyArg,
    /// Blocked jobs that get a reservation under `conservative`.
    #[arg(long, value_name = "N", default_value_t = RESERVATION_DEPTH)]
    reservation_depth: usize,
    /// Waiting jobs looked at in each pass (as `sched.queue_depth`);
    /// every one when not given.
    #[arg(long, value_name = "N")]
    queue_depth: Option<usize>,
    /// One JSON line per job (id, submit, start, end, nodes), then one
    /// summary line.
    #[arg(long)]
    json: bool,
    /// Instead of replaying, print a synthetic trace of N jobs for this
    /// machine (see `shared::sched::swf::generate` for the model).
    #[arg(long, value_name = "N")]
    generate: Option<usize>,
    /// Seed of the generated trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PolicyArg {
    Fcfs,
    Easy,
    Conservative,
}

/// Run `fluxgate simulate`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.nodes == 0 || args.cores_per_node == 0 {
        bail!("--nodes and --cores-per-node must be at least 1");
    }
    let mut out = std::io::stdout().lock();
    if let Some(n) = args.generate {
        let text = swf::generate_text(
            n,
            u64::from(args.nodes),
            u64::from(args.cores_per_node),
            args.seed,
        );
        out.write_all(text.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = args.trace.as_deref().unwrap_or("-");
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read the trace")?
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?
    };
    let trace = swf::parse(&text).with_context(|| format!("{path}: not a valid SWF trace"))?;
    if trace.skipped > 0 {
        eprintln!(
            "fluxgate-simulate: {} job(s) skipped: no run time or processor count",
            trace.skipped
        );
    }
    let policy = match args.policy {
        PolicyArg::Fcfs => Policy::Fcfs,
        PolicyArg::Easy => Policy::Easy,
        PolicyArg::Conservative => Policy::Conservative {
            depth: args.reservation_depth.max(1),
        },
    };
    let machine = Machine {
        nodes: args.nodes,
        cores_per_node: args.cores_per_node,
    };
    let depth = args.queue_depth.unwrap_or(usize::MAX).max(1);
    let replay = simulate::replay(&trace.jobs, machine, policy, depth);
    if !replay.unsatisfiable.is_empty() {
        eprintln!(
            "fluxgate-simulate: {} job(s) need more than the machine's {} nodes and never ran",
            replay.unsatisfiable.len(),
            args.nodes
        );
    }
    let summary = simulate::summarize(&replay, args.nodes);
    if args.json {
        print_json(&mut out, &replay, &summary, &args)?;
    } else {
        print_table(&mut out, &replay, &summary)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_json(
    out: &mut impl Write,
    replay: &Replay,
    s: &Summary,
    args: &Args,
) -> anyhow::Result<()> {
    let mut jobs: Vec<_> = replay.jobs.iter().collect();
    jobs.sort_by_key(|j| j.id);
    for j in jobs {
        let line = json!({
            "id": j.id, "submit": j.submit, "start": j.start, "end": j.end, "nodes": j.nodes,
        });
        writeln!(out, "{line}")?;
    }
    let policy = match args.policy {
        PolicyArg::Fcfs => "fcfs",
        PolicyArg::Easy => "easy",
        PolicyArg::Conservative => "conservative",
    };
    let summary = json!({
        "summary": true,
        "policy": policy,
        "nodes": args.nodes,
        "cores_per_node": args.cores_per_node,
        "jobs": s.jobs,
        "unsatisfiable": replay.unsatisfiable.len(),
        "utilization": s.utilization,
        "mean_wait": s.mean_wait,
        "p95_wait": s.p95_wait,
        "mean_bounded_slowdown": s.mean_bounded_slowdown,
        "makespan": s.makespan,
    });
    writeln!(out, "{summary}")?;
    Ok(())
}

fn print_table(out: &mut impl Write, replay: &Replay, s: &Summary) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:>10} {:>12} {:>12} {:>12} {:>6}",
        "ID", "SUBMIT", "START", "END", "NODES"
    )?;
    let mut jobs: Vec<_> = replay.jobs.iter().collect();
    jobs.sort_by_key(|j| j.id);
    for j in jobs {
        writeln!(
            out,
            "{:>10} {:>12.0} {:>12.0} {:>12.0} {:>6}",
            j.id, j.submit, j.start, j.end, j.nodes
        )?;
    }
    writeln!(
        out,
        "jobs {}  utilization {:.3}  mean wait {:.1}s  p95 wait {:.1}s  mean bounded slowdown {:.2}  makespan {:.0}s",
        s.jobs, s.utilization, s.mean_wait, s.p95_wait, s.mean_bounded_slowdown, s.makespan
    )?;
    Ok(())
}

//! Workload traces in the Standard Workload Format (SWF, the Parallel
//! Workloads Archive's): one job per line, 18 whitespace-separated fields,
//! `;` comments. Of them a replay needs the job number (1), submit time (2),
//! run time (4), allocated (5) and requested (8) processors, requested time
//! (9) and user (12); `-1` means unknown.
//!
//! Also a generator of synthetic traces, for tests and benchmarks.

/// One job of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct SwfJob {
    /// The job number.
    pub id: u64,
    /// Seconds from the start of the trace.
    pub submit: f64,
    /// Seconds it ran.
    pub run: f64,
    /// Processors (cores) it asked for, else those it was given.
    pub procs: u64,
    /// Its time limit in seconds, if it gave one.
    pub requested: Option<f64>,
    /// Its user, if known.
    pub user: Option<u64>,
}

/// A trace read from text: the jobs a replay can use and how many lines
/// it could not (a run time below 0 or no processor count).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The usable jobs, in the trace's order.
    pub jobs: Vec<SwfJob>,
    /// Job lines skipped for an unknown run time or processor count.
    pub skipped: usize,
}

/// Why a trace cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SwfError {
    /// A job line has fewer fields than the format's 18 (12 are needed).
    #[error("line {line}: {found} fields, an SWF job line has 18")]
    Short { line: usize, found: usize },
    /// A field is not a number.
    #[error("line {line}: field {field} ({text:?}) is not a number")]
    NotNumber {
        line: usize,
        field: usize,
        text: String,
    },
}

/// Read a trace.
pub fn parse(text: &str) -> Result<Trace, SwfError> {
    let mut trace = Trace::default();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 12 {
            return Err(SwfError::Short {
                line: n + 1,
                found: fields.len(),
            });
        }
        let num = |field: usize| -> Result<f64, SwfError> {
            fields[field - 1]
                .parse::<f64>()
                .map_err(|_| SwfError::NotNumber {
                    line: n + 1,
                    field,
                    text: fields[field - 1].to_string(),
                })
        };
        let (id, submit, run) = (num(1)?, num(2)?, num(4)?);
        let procs = match num(8)? {
            p if p > 0.0 => p,
            _ => num(5)?,
        };
        if run < 0.0 || procs <= 0.0 || id < 0.0 {
            trace.skipped += 1;
            continue;
        }
        let requested = Some(num(9)?).filter(|t| *t > 0.0);
        let user = Some(num(12)?).filter(|u| *u >= 0.0).map(|u| u as u64);
        trace.jobs.push(SwfJob {
            id: id as u64,
            submit: submit.max(0.0),
            run,
            procs: procs as u64,
            requested,
            user,
        });
    }
    Ok(trace)
}

/// One job as an SWF line (unknown fields `-1`).
pub fn format_job(j: &SwfJob) -> String {
    let requested = j.requested.map_or(-1.0, |t| t);
    let user = j.user.map_or(-1, |u| u as i64);
    format!(
        "{} {:.0} -1 {:.0} {} -1 -1 {} {:.0} -1 1 {} -1 -1 -1 -1 -1 -1",
        j.id, j.submit, j.run, j.procs, j.procs, requested, user
    )
}

/// A small, seedable generator (SplitMix64): traces are reproducible from
/// their seed on every machine.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Log-uniform in [lo, hi].
    fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + self.unit() * (hi.ln() - lo.ln())).exp()
    }
}

/// A synthetic trace of `count` jobs for a machine of `nodes` nodes of
/// `cores` cores, from `seed`. The model, simpler than Lublin and
/// Feitelson's but with the features backfilling depends on:
///
/// - sizes: a node count log-uniform in 1..=nodes, rounded to a power of
///   two half the time (as real workloads favour), times `cores`; one job
///   in five is a single core;
/// - run times log-uniform from 10 s to 8 h;
/// - time limits: the run time times a factor uniform in 1..3, rounded up
///   to a minute (users overestimate); one job in twenty runs into its limit;
/// - arrivals: Poisson, the mean interarrival chosen so that the offered
///   load is about 0.9 of the machine;
/// - users: 40, a few of them submitting most jobs.
pub fn generate(count: usize, nodes: u64, cores: u64, seed: u64) -> Vec<SwfJob> {
    let mut rng = Rng(seed);
    let nodes = nodes.max(1);
    let cores = cores.max(1);
    let mut jobs = Vec::with_capacity(count);
    let mut work = 0.0;
    for id in 1..=count as u64 {
        let procs = if rng.unit() < 0.2 {
            1
        } else {
            let mut n = rng.log_uniform(1.0, nodes as f64).round().max(1.0) as u64;
            if rng.unit() < 0.5 {
                n = n.next_power_of_two().min(nodes);
            }
            n * cores
        };
        let mut run = rng.log_uniform(10.0, 8.0 * 3600.0).round();
        let requested = ((run * (1.0 + 2.0 * rng.unit())) / 60.0).ceil() * 60.0;
        if rng.unit() < 0.05 {
            run = requested;
        }
        let user = (rng.unit().powi(3) * 40.0) as u64;
        work += run * procs.div_ceil(cores) as f64;
        jobs.push(SwfJob {
            id,
            submit: 0.0,
            run,
            procs,
            requested: Some(requested),
            user: Some(user),
        });
    }
    // Offered load 0.9: the trace spans the work over 0.9 of the machine.
    let span = work / (nodes as f64 * 0.9);
    let mean_gap = span / count.max(1) as f64;
    let mut t: f64 = 0.0;
    for j in &mut jobs {
        j.submit = t.round();
        t += -mean_gap * (1.0 - rng.unit()).ln();
    }
    jobs
}

/// A generated trace as SWF text, with a header saying how it was made.
pub fn generate_text(count: usize, nodes: u64, cores: u64, seed: u64) -> String {
    let mut out = format!(
        "; Synthetic trace: {count} jobs for {nodes} nodes of {cores} cores, seed {seed}\n\
         ; (fluxgate simulate --generate; the model is described in `shared::sched::swf::generate`)\n\
         ; MaxNodes: {nodes}\n; MaxProcs: {}\n",
        nodes * cores
    );
    for j in generate(count, nodes, cores, seed) {
        out.push_str(&format_job(&j));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_with_requested_before_allocated_processors() {
        let text = "; comment\n\
            1 0 5 100 8 -1 -1 16 200 -1 1 3 -1 -1 -1 -1 -1 -1\n\
            2 10 0 50 4 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n\
            3 20 0 -1 4 -1 -1 4 60 -1 0 1 -1 -1 -1 -1 -1 -1\n";
        let t = parse(text).unwrap();
        assert_eq!(t.skipped, 1);
        assert_eq!(t.jobs[0].procs, 16);
        assert_eq!(t.jobs[0].requested, Some(200.0));
        assert_eq!(t.jobs[0].user, Some(3));
        assert_eq!(t.jobs[1].procs, 4);
        assert_eq!(t.jobs[1].requested, None);
        assert_eq!(t.jobs[1].user, None);
    }

    #[test]
    fn bad_lines_name_the_line_and_field() {
        assert_eq!(parse("1 2 3\n"), Err(SwfError::Short { line: 1, found: 3 }));
        let e = parse("1 x 0 1 1 -1 -1 1 1 -1 1 1 -1 -1 -1 -1 -1 -1").unwrap_err();
        assert!(e.to_string().contains("field 2"), "{e}");
    }

    #[test]
    fn generated_traces_are_reproducible_and_read_back() {
        let a = generate_text(200, 64, 16, 7);
        assert_eq!(a, generate_text(200, 64, 16, 7));
        assert_ne!(a, generate_text(200, 64, 16, 8));
        let t = parse(&a).unwrap();
        assert_eq!(t.jobs.len(), 200);
        assert!(t.jobs.windows(2).all(|w| w[0].submit <= w[1].submit));
        assert!(t.jobs.iter().all(|j| j.procs >= 1 && j.procs <= 64 * 16));
        assert!(t.jobs.iter().all(|j| j.requested.unwrap() >= j.run));
    }
}

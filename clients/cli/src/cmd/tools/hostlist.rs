//! `fluxgate hostlist`: combine and print RFC 29 hostlists, as flux-hostlist(1).
//!
//! Options, order of operations and output follow flux-core's
//! `flux-hostlist`: sources are concatenated (or intersected, subtracted,
//! xor-ed), then `--exclude`, `--sort`, `--union`, `--limit`, `--nth` are
//! applied in that order, and the result is printed as indices (`--find`), a
//! count, an expanded list or the compressed form. Like flux-core, hosts
//! picked by index are re-appended by name.
//!
//! Reading stdin (the `stdin` or `-` source, and the default source) waits
//! at most 15 seconds for input to start, as flux-hostlist does since its
//! default source changed from the instance to stdin: a script that still
//! expects the old default fails instead of hanging. The wait can be set
//! with `FLUXGATE_HOSTLIST_STDIN_TIMEOUT` or flux's own
//! `FLUX_HOSTLIST_STDIN_TIMEOUT` (seconds).

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use fluxgate_shared::hostlist::Hostlist;
use fluxgate_shared::idset::IdSet;
use fluxgate_shared::jobid::JobId;

const SOURCES: &str = "\
SOURCES may include:
instance     hosts from the broker 'hostlist' attribute.
jobid        hosts assigned to a job
local        hosts assigned to current job if FLUX_JOB_ID is set, otherwise
             returns the 'instance' hostlist
avail[able]  instance hostlist minus those nodes down or drained
stdin, '-'   read a list of hosts on stdin (waiting at most 15s for input;
             FLUXGATE_HOSTLIST_STDIN_TIMEOUT or FLUX_HOSTLIST_STDIN_TIMEOUT
             sets the seconds)
hosts        literal list of hosts

The default when no SOURCES are supplied is 'stdin', unless the -l, --local
option is used, in which case the default is 'local'.

instance, local, avail and job ids need a running instance; without one they
are errors (use --fallback to read a job-id-like argument such as 'foo1' as a
host name).";

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = SOURCES)]
pub struct Args {
    /// Expand hostlist using defined output delimiter
    #[arg(short = 'e', long, conflicts_with = "count")]
    expand: bool,
    /// Set output delimiter for expanded hostlist (default=' ')
    #[arg(short = 'd', long, value_name = "S", default_value = " ")]
    delimiter: String,
    /// Print the total number of hosts
    #[arg(short = 'c', long)]
    count: bool,
    /// Output hosts at indices in idset IDS (-IDS to index from end)
    #[arg(short = 'n', long, value_name = "[-]IDS", allow_hyphen_values = true)]
    nth: Option<String>,
    /// Output indices of HOSTS in target in hostlist. Fails if any host is not found.
    #[arg(short = 'F', long, value_name = "HOSTS")]
    find: Option<Hostlist>,
    /// Output at most N hosts (-N for the last N hosts)
    #[arg(short = 'L', long, value_name = "N", allow_negative_numbers = true)]
    limit: Option<i64>,
    /// Return sorted result
    #[arg(short = 'S', long)]
    sort: bool,
    /// Exclude all occurrences of HOSTS or indices from final result
    #[arg(short = 'x', long, value_name = "IDS|HOSTS")]
    exclude: Option<Hostlist>,
    /// Return only unique hosts in the final hostlist. Without other options,
    /// this is the same as the union of all hostlist args (default mode is append).
    #[arg(short = 'u', long, visible_alias = "unique")]
    union: bool,
    /// Return the intersection of all hostlists
    #[arg(short = 'i', long, conflicts_with_all = ["minus", "xor"])]
    intersect: bool,
    /// Subtract all hostlist args from first argument
    #[arg(short = 'm', long, conflicts_with = "xor")]
    minus: bool,
    /// Return the symmetric difference of all hostlists
    #[arg(short = 'X', long)]
    xor: bool,
    /// Fallback to treating jobids that are not found as hostnames
    /// (for hostnames that are also valid jobids e.g. f1, fuzz100, etc)
    #[arg(short = 'f', long)]
    fallback: bool,
    /// Set the default source to 'local' instead of 'stdin'
    #[arg(short = 'l', long)]
    local: bool,
    /// No output. Exit with nonzero exit status if hostlist is empty
    #[arg(short = 'q', long)]
    quiet: bool,
    /// (optional) One or more hostlist sources
    #[arg(value_name = "SOURCES")]
    sources: Vec<String>,
}

/// Seconds flux-hostlist waits for stdin by default.
const STDIN_TIMEOUT: f64 = 15.0;

/// Variables that set the stdin wait, ours first.
const STDIN_TIMEOUT_ENV: [&str; 2] = [
    "FLUXGATE_HOSTLIST_STDIN_TIMEOUT",
    "FLUX_HOSTLIST_STDIN_TIMEOUT",
];

/// The stdin wait in seconds, from the environment or the default.
fn stdin_timeout() -> anyhow::Result<f64> {
    let Some((name, value)) = STDIN_TIMEOUT_ENV
        .iter()
        .find_map(|name| std::env::var(name).ok().map(|v| (name, v)))
    else {
        return Ok(STDIN_TIMEOUT);
    };
    match value.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => Ok(secs),
        _ => bail!("{name}={value:?}: expected a number of seconds, 0 or more"),
    }
}

/// Hosts read from stdin, one hostlist per line. Like flux-hostlist, fail
/// if no input (nor end of input) arrives within the timeout; once input
/// has started, read it to the end.
fn read_stdin() -> anyhow::Result<Hostlist> {
    let timeout = stdin_timeout()?;
    let (started, wait) = mpsc::channel();
    // A thread, because a blocking read cannot be given a deadline; if the
    // wait runs out, the process exits with it still blocked.
    let reader = std::thread::spawn(move || -> anyhow::Result<Hostlist> {
        let mut input = std::io::stdin().lock();
        input.fill_buf().context("reading hosts from stdin")?;
        // The receiver is gone only when the wait already ran out.
        let _ = started.send(());
        let mut hl = Hostlist::new();
        for line in input.lines() {
            let line = line.context("reading hosts from stdin")?;
            hl.append(&Hostlist::parse(line.trim_end())?);
        }
        Ok(hl)
    });
    // Too long for a Duration is as good as no limit.
    let limit = Duration::try_from_secs_f64(timeout).unwrap_or(Duration::MAX);
    if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
        // As Python prints the float: 15.0, 0.5.
        bail!("timeout after {timeout:?}s waiting for stdin");
    }
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("reading hosts from stdin failed"))?
}

/// Read one source into a hostlist.
fn resolve(arg: &str, fallback: bool) -> anyhow::Result<Hostlist> {
    match arg {
        "stdin" | "-" => read_stdin(),
        "instance" | "local" | "avail" | "available" => {
            bail!("source '{arg}' needs a running instance")
        }
        _ if JobId::parse(arg).is_ok() => {
            if fallback {
                Hostlist::parse(arg).with_context(|| format!("Invalid jobid or hostlist {arg}"))
            } else {
                bail!(
                    "job {arg}: looking up a job needs a running instance \
                     (use --fallback to treat it as a host name)"
                )
            }
        }
        _ => Hostlist::parse(arg).with_context(|| format!("Invalid jobid or hostlist {arg}")),
    }
}

/// Hosts re-appended one by one by name, as flux-core builds picked results.
fn by_name(hosts: impl Iterator<Item = String>) -> anyhow::Result<Hostlist> {
    let mut hl = Hostlist::new();
    for host in hosts {
        hl.push(&host)?;
    }
    Ok(hl)
}

/// The hosts at `spec` (an idset, or `-IDS` counting from the end).
fn nth(hl: &Hostlist, spec: &str) -> anyhow::Result<Hostlist> {
    let len = hl.len() as u64;
    let out_of_range = |i: u64| anyhow::anyhow!("index {i} is out of range for {len} hosts");
    if let Some(rest) = spec.strip_prefix('-') {
        let ids = IdSet::parse(rest)?;
        // Largest offset first, so the result keeps the list order; -0 is
        // the first host, as Python's hl[-0].
        let mut picked = Vec::new();
        let mut zero = false;
        for x in ids.iter().collect::<Vec<_>>().into_iter().rev() {
            let x = u64::from(x);
            if x > len || len == 0 {
                return Err(out_of_range(x));
            }
            if x == 0 {
                zero = true;
            } else {
                picked.push((len - x) as u32);
            }
        }
        // Largest offset first is smallest index first: already ascending.
        let picked: IdSet = picked.into_iter().collect();
        let mut names: Vec<String> = hl.select(&picked).map_err(out_of_range)?.iter().collect();
        if zero && let Some(first) = hl.first() {
            names.push(first);
        }
        return by_name(names.into_iter());
    }
    let ids = IdSet::parse(spec)?;
    let picked = hl.select(&ids).map_err(out_of_range)?;
    by_name(picked.iter())
}

/// The line the command prints for the list `hl`: the indices of `--find`,
/// the count, the expansion or the encoding (`None` for an empty list).
fn answer(args: &Args, hl: &Hostlist) -> anyhow::Result<Option<String>> {
    Ok(if let Some(find) = &args.find {
        let mut ids = Vec::new();
        let mut missing = Hostlist::new();
        let mut index = fluxgate_shared::hostlist::FirstIndex::new(hl);
        for host in find.iter() {
            match index.of(&host) {
                Some(i) => ids.push(i.to_string()),
                None => missing.push(&host)?,
            }
        }
        if !missing.is_empty() {
            let s = if missing.len() > 1 { "s" } else { "" };
            bail!("host{s} '{missing}' not found");
        }
        Some(ids.join(" "))
    } else if args.count {
        Some(hl.len().to_string())
    } else if hl.is_empty() {
        None
    } else if args.expand {
        let delim = args.delimiter.replace("\\n", "\n");
        Some(hl.iter().collect::<Vec<_>>().join(&delim))
    } else {
        Some(hl.encode())
    })
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let sources = if args.sources.is_empty() {
        vec![if args.local { "local" } else { "stdin" }.to_string()]
    } else {
        args.sources.clone()
    };
    let mut lists = sources
        .iter()
        .map(|s| resolve(s, args.fallback))
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter();

    let mut hl = if args.intersect {
        let first = lists.next().unwrap_or_default();
        lists.fold(first, |acc, x| acc.intersect(&x))
    } else if args.xor {
        let first = lists.next().unwrap_or_default();
        lists.fold(first, |acc, x| acc.xor(&x))
    } else if args.minus {
        // Deleting each list in turn removes the same first occurrences as
        // deleting them all at once, which walks the first list only once.
        let mut acc = lists.next().unwrap_or_default();
        let all: Hostlist = lists.collect();
        acc.delete(&all);
        acc
    } else {
        lists.collect()
    };

    if let Some(exclude) = args.exclude.as_ref().filter(|x| !x.is_empty()) {
        let count = hl.len();
        hl.delete_all(exclude);
        if hl.len() == count {
            // Nothing matched by name: try the argument as an idset of indices.
            if let Ok(ids) = IdSet::parse(&exclude.encode()) {
                let kept = hl
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| !u32::try_from(i).is_ok_and(|i| ids.contains(i)))
                    .map(|(_, h)| h);
                hl = by_name(kept)?;
            }
        }
    }

    if args.sort {
        hl.sort();
    }
    if args.union {
        hl.uniq();
    }
    if let Some(limit) = args.limit.filter(|&l| l != 0) {
        let n = usize::try_from(limit.unsigned_abs()).unwrap_or(usize::MAX);
        let len = hl.len();
        let (a, b) = if limit > 0 {
            (0, n.min(len))
        } else {
            (len.saturating_sub(n), len)
        };
        hl = by_name(hl.slice(a, b).iter())?;
    }
    if let Some(spec) = &args.nth {
        hl = nth(&hl, spec)?;
    }

    let line = answer(&args, &hl)?;
    if let Some(line) = line
        && !args.quiet
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").context("writing to stdout")?;
    }
    if args.quiet && hl.is_empty() {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

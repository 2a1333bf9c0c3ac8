//! `fluxgate token create --user NAME --uid N [--ttl DURATION] [--key FILE]`:
//! print a token signed with the instance key, for the instance owner to
//! hand to a user, who puts it in `FLUXGATE_TOKEN`.
//!
//! The key is the job manager's `instance.key` (`--key`, else the one in
//! `$FLUXGATE_STATEDIR`, which `fluxgate start` sets for its command). Only
//! who can read it can make tokens: the instance owner.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use fluxgate_shared::auth::Claims;
use fluxgate_shared::auth::token::{key_from_text, parse_duration};

/// Arguments of `fluxgate token`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: TokenCommand,
}

/// What to do with tokens.
#[derive(Debug, clap::Subcommand)]
enum TokenCommand {
    /// Print a new token for a user.
    Create(CreateArgs),
}

/// Arguments of `fluxgate token create`.
#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// The user's name (shown in logs and messages).
    #[arg(long, value_name = "NAME")]
    user: String,
    /// The user's uid: their jobs are owned by it and run as it.
    #[arg(long, value_name = "N")]
    uid: u32,
    /// How long the token is valid: e.g. 30m, 12h, 7d, or `never`.
    #[arg(long, value_name = "DURATION", default_value = "1d")]
    ttl: String,
    /// The instance key (default: $FLUXGATE_STATEDIR/instance.key).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
}

/// Run `fluxgate token`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        TokenCommand::Create(a) => create(a),
    }
}

fn create(args: CreateArgs) -> anyhow::Result<ExitCode> {
    if args.user.is_empty() {
        bail!("--user must not be empty");
    }
    let ttl = match args.ttl.as_str() {
        "never" => None,
        text => match parse_duration(text).map_err(|e| anyhow!("--ttl {e}"))? {
            0 => bail!("--ttl must be longer than 0 (or `never`)"),
            secs => Some(secs),
        },
    };
    let path = match args.key {
        Some(p) => p,
        None => std::env::var_os("FLUXGATE_STATEDIR")
            .map(|d| PathBuf::from(d).join("instance.key"))
            .ok_or_else(|| {
                anyhow!(
                    "no instance key: pass --key STATEDIR/instance.key \
                     (or run inside `fluxgate start --auth`)"
                )
            })?,
    };
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read the instance key {} (only the instance owner can make tokens)",
            path.display()
        )
    })?;
    let key = key_from_text(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let token = Claims::user(&args.user, args.uid, now, ttl)
        .sign(&key)
        .map_err(|e| anyhow!("{e}"))?;
    println!("{token}");
    Ok(ExitCode::SUCCESS)
}

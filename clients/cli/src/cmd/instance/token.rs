//! `fluxgate token create --user NAME --uid N [--ttl DURATION] [--key FILE | --statedir DIR]`:
//! print a token signed with the instance key, for the instance owner to
//! hand to a user, who puts it in `FLUXGATE_TOKEN`.
//!
//! `fluxgate token create --node --uid OWNER_UID --key FILE` prints the node
//! credential the job manager derives from the same key (its `node.token`),
//! so that a deployment can hand it to exec services as a secret before the
//! job manager first starts (`deploy/make-secrets.sh`).
//!
//! The key is the job manager's `instance.key` (`--key`, else the one in
//! `--statedir` or `$FLUXGATE_STATEDIR`, which `fluxgate start` sets for its
//! command). Only who can read it can make tokens: the instance owner.

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
    #[arg(long, value_name = "NAME", required_unless_present = "node")]
    user: Option<String>,
    /// The user's uid: their jobs are owned by it and run as it (with
    /// `--node`: the instance owner's uid, the job manager's `owner_uid`).
    #[arg(long, value_name = "N")]
    uid: u32,
    /// How long the token is valid: e.g. 30m, 12h, 7d, or `never`.
    #[arg(long, value_name = "DURATION", default_value = "1d")]
    ttl: String,
    /// Print the node credential of exec services instead (the job
    /// manager's `node.token`; it never expires).
    #[arg(long, conflicts_with_all = ["user", "ttl"])]
    node: bool,
    /// The instance key (default: STATEDIR/instance.key).
    #[arg(long, value_name = "FILE", conflicts_with = "statedir")]
    key: Option<PathBuf>,
    /// The instance's state directory, holding instance.key (default:
    /// $FLUXGATE_STATEDIR).
    #[arg(long, value_name = "DIR")]
    statedir: Option<PathBuf>,
}

/// Run `fluxgate token`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        TokenCommand::Create(a) => create(a),
    }
}

fn create(args: CreateArgs) -> anyhow::Result<ExitCode> {
    let user = args.user.clone().unwrap_or_default();
    if !args.node && user.is_empty() {
        bail!("--user must not be empty");
    }
    let ttl = match args.ttl.as_str() {
        "never" => None,
        text => match parse_duration(text).map_err(|e| anyhow!("--ttl {e}"))? {
            0 => bail!("--ttl must be longer than 0 (or `never`)"),
            secs => Some(secs),
        },
    };
    let statedir = args.statedir.or_else(|| {
        std::env::var_os("FLUXGATE_STATEDIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
    });
    let path = match (args.key, statedir) {
        (Some(p), _) => p,
        (None, Some(d)) => d.join("instance.key"),
        (None, None) => bail!(
            "no instance key: pass --statedir DIR or --key FILE \
             (inside `fluxgate start --auth` FLUXGATE_STATEDIR says)"
        ),
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
    // The node credential is issued at time 0, as the job manager issues it,
    // so both make the same text from the same key.
    let claims = if args.node {
        Claims::node(args.uid, 0)
    } else {
        Claims::user(&user, args.uid, now, ttl)
    };
    let token = claims.sign(&key).map_err(|e| anyhow!("{e}"))?;
    println!("{token}");
    Ok(ExitCode::SUCCESS)
}

//! `fluxgate accounting show`: each user's and bank's usage, shares and
//! fair share, as flux-accounting's `flux account view-user` shows them.

use std::io::{self, Write};
use std::process::ExitCode;

use fluxgate_proto::v1 as pb;
use serde_json::{Value, json};

use crate::client;
use crate::output::{self, Mode, Render, pad, printable};

/// Arguments of `fluxgate accounting`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Usage (decayed core-seconds), shares and fair share of each user.
    Show {
        /// Print the rows as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn username(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => uid.to_string(),
    }
}

#[derive(Debug)]
struct Accounts {
    enabled: bool,
    rows: Vec<(String, pb::AccountRow)>,
}

impl Render for Accounts {
    fn table(&self, out: &mut dyn Write) -> io::Result<()> {
        if !self.enabled {
            writeln!(
                out,
                "accounting is not enabled ([accounting] enabled = true)"
            )?;
            return Ok(());
        }
        writeln!(
            out,
            "{} {} {} {} {}",
            pad("USER", 10, Some(10), false),
            pad("BANK", 10, Some(10), false),
            pad("USAGE", 12, None, true),
            pad("SHARES", 8, None, true),
            pad("FAIRSHARE", 10, None, true)
        )?;
        for (user, r) in &self.rows {
            let bank = if r.bank.is_empty() { "-" } else { &r.bank };
            writeln!(
                out,
                "{} {} {} {} {}",
                pad(&printable(user), 10, Some(10), false),
                pad(&printable(bank), 10, Some(10), false),
                pad(&format!("{:.1}", r.usage), 12, None, true),
                pad(&format!("{}", r.shares), 8, None, true),
                pad(&format!("{:.6}", r.fairshare), 10, None, true)
            )?;
        }
        Ok(())
    }

    fn json(&self) -> Value {
        json!({
            "enabled": self.enabled,
            "associations": self.rows.iter().map(|(user, r)| json!({
                "username": user,
                "userid": r.userid,
                "bank": r.bank,
                "usage": r.usage,
                "shares": r.shares,
                "fairshare": r.fairshare,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Run `fluxgate accounting`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Command::Show { json } = args.command;
    let r = client::block_on(async {
        let mut inst = client::connect().await?;
        inst.jobs
            .accounting(pb::AccountingRequest {})
            .await
            .map_err(client::status_error)
            .map(tonic::Response::into_inner)
    })??;
    let mut rows: Vec<(String, pb::AccountRow)> = r
        .rows
        .into_iter()
        .map(|r| (username(r.userid), r))
        .collect();
    // Highest fair share first, as the weighted walk ranks them.
    rows.sort_by(|a, b| {
        b.1.fairshare
            .total_cmp(&a.1.fairshare)
            .then_with(|| a.0.cmp(&b.0))
    });
    output::emit(
        Mode::from_flags(json, false),
        &Accounts {
            enabled: r.enabled,
            rows,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

//! `fluxgate-bench sim-nodes`: one process's slice of the nodes of a
//! `bench nodes` run. A process holds a connection per node it simulates,
//! so a run of more nodes than one process may hold files for is spread
//! over several. Each node joins its parent (the relay above it, or the job
//! manager); the process says `ready INTERVAL` on standard output once all
//! of its nodes are welcomed, and keeps them alive until standard input
//! closes.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use anyhow::{anyhow, bail};
use tokio::task::JoinSet;

use super::sim;

/// Connections opened at once while joining (a real cluster's nodes boot
/// at about the same time; a bound keeps the accept queues sane).
const CONNECTING: usize = 1024;

/// The nodes of one process.
#[derive(Debug, Clone)]
pub struct Slice {
    /// The first node's index.
    pub first: u32,
    /// How many nodes.
    pub count: u32,
    /// Where the nodes join: the job manager alone, or the relays of the
    /// tree's lowest level, `fanout` nodes each in node order.
    pub parents: Vec<String>,
    /// Nodes per relay; 0 when they join the job manager directly.
    pub fanout: u32,
}

impl Slice {
    /// Where node `i` joins.
    fn parent(&self, i: u32) -> anyhow::Result<&str> {
        // Fan-out 0: every node joins the one parent, the job manager.
        let at = i.checked_div(self.fanout).unwrap_or(0) as usize;
        self.parents
            .get(at)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("no parent for node sim{i}: {} given", self.parents.len()))
    }
}

/// Join the slice's nodes and keep them alive until standard input closes.
pub async fn run(slice: Slice) -> anyhow::Result<()> {
    super::raise_open_files(slice.count)?;
    let exec_addr = sim::serve_exec().await?;
    let joined = Arc::new(AtomicU32::new(0));
    let interval = Arc::new(std::sync::Mutex::new(None::<f64>));
    let mut alive = JoinSet::new();
    let mut connecting = JoinSet::new();
    for i in slice.first..slice.first + slice.count {
        if connecting.len() >= CONNECTING
            && let Some(r) = connecting.join_next().await
        {
            alive.spawn(r??);
        }
        let (uri, addr) = (slice.parent(i)?.to_string(), exec_addr.clone());
        let (joined, interval) = (Arc::clone(&joined), Arc::clone(&interval));
        connecting.spawn(async move { sim::node(i, uri, addr, joined, interval).await });
    }
    while let Some(r) = connecting.join_next().await {
        alive.spawn(r??);
    }
    let every = interval
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or(0.0);
    println!("ready {every}");
    std::io::stdout().flush()?;
    let closed = tokio::task::spawn_blocking(|| {
        let mut buf = [0u8; 64];
        while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
    });
    tokio::select! {
        r = alive.join_next() => match r {
            Some(r) => {
                r??;
                bail!("a node's join stream ended");
            }
            None => Ok(()),
        },
        _ = closed => Ok(()),
    }
}

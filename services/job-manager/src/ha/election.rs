//! Leader election on the PostgreSQL store, with a lease and an epoch.
//!
//! The leader holds a session-level advisory lock and the `leader` row: its
//! epoch, URI, lock session and when it last renewed its lease. A standby
//! tries the lock every poll; a leader that crashed loses its session and
//! the lock with it, so a standby takes over at its next poll. A leader
//! that is alive but silent (paused, cut off) keeps its session: once its
//! lease is older than `ha.lease`, a standby ends its sessions and takes
//! over. Taking over bumps the epoch, and every commit checks the epoch in
//! its own transaction (`store/postgres/writer.rs`): a deposed leader can
//! never commit again, whatever it believes.
//!
//! A leader that cannot renew its lease (the database away, or itself cut
//! off from it) steps down once the lease could have expired: a standby
//! may lead by then, and two job managers must not both serve clients and
//! hold the nodes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::Client;
use tokio::sync::watch;

use crate::store::StoreError;
use crate::store::postgres::PgConnect;
use crate::store::postgres::connect::describe;

/// The advisory lock whose holder leads ("FLXG" and 2).
const LEADER_LOCK: i64 = 0x464c_5847_0002;

/// How one job manager campaigns: where the database is, what it tells
/// clients while it leads, and its timing.
#[derive(Debug, Clone)]
pub struct Elector {
    /// Connections tagged with this job manager's holder name.
    pub connect: PgConnect,
    /// Unique per process: names its database sessions.
    pub holder: String,
    /// The URI clients are sent to while this one leads.
    pub uri: String,
    /// How long a silent leader keeps the lead.
    pub lease: Duration,
    /// Between a standby's attempts.
    pub poll: Duration,
}

/// The lead, once won: the epoch every commit must still carry.
#[derive(Debug)]
pub struct Leadership {
    /// This leader's epoch.
    pub epoch: i64,
    /// When the request that took the lead was sent: its lease runs from
    /// no earlier than this.
    pub since: Instant,
}

/// The part of the lease a leader keeps in hand: it steps down this much
/// before the lease could have expired, so that it has stopped serving
/// when a standby may take over (clocks and the step down take time).
const LEASE_MARGIN: f64 = 0.1;

/// Could the lease of a leader whose last renewal that succeeded was sent
/// `since` ago have expired, for a lease of `lease`? Counted from the send,
/// which is no later than the database's `renewed = now()`.
pub fn lease_may_have_expired(since: Duration, lease: Duration) -> bool {
    since.as_secs_f64() >= lease.as_secs_f64() * (1.0 - LEASE_MARGIN)
}

impl Elector {
    /// Block until this job manager leads (or `stop` is set: `None`),
    /// publishing the current leader's URI to `leader` meanwhile. Waits for
    /// a database that is down, however long; an error only for a store
    /// that cannot be used at all (not ours, a newer format).
    pub fn campaign(
        &self,
        leader: &watch::Sender<Option<String>>,
        stop: &AtomicBool,
    ) -> Result<Option<(Leadership, Client)>, StoreError> {
        let mut client: Option<Client> = None;
        let mut prepared = false;
        let mut said_standby = false;
        while !stop.load(Ordering::Acquire) {
            let c = match client.as_mut() {
                Some(c) if !c.is_closed() => c,
                _ => match self.connect.connect() {
                    Ok(c) => client.insert(c),
                    Err(e) => {
                        tracing::warn!(error = %e, "store unreachable; retrying");
                        std::thread::sleep(self.poll.max(Duration::from_millis(500)));
                        continue;
                    }
                },
            };
            if !prepared {
                match crate::store::postgres::prepare(c) {
                    Ok(()) => prepared = true,
                    Err(reason) if c.is_closed() => {
                        tracing::warn!(%reason, "store connection lost; retrying");
                        continue;
                    }
                    Err(reason) => {
                        return Err(StoreError::Open {
                            path: self.connect.shown().to_string(),
                            reason,
                        });
                    }
                }
            }
            let since = Instant::now();
            match self.try_lead(c) {
                Ok(Some(epoch)) => {
                    let _ = leader.send(Some(self.uri.clone()));
                    tracing::info!(epoch, uri = %self.uri, "leading");
                    let Some(c) = client.take() else { continue };
                    return Ok(Some((Leadership { epoch, since }, c)));
                }
                Ok(None) => {
                    if !said_standby {
                        tracing::info!("standby: another job manager leads");
                        said_standby = true;
                    }
                    if let Err(e) = self.watch_leader(c, leader) {
                        tracing::warn!(error = %describe(&e), "cannot read the leader row");
                    }
                }
                Err(e) => tracing::warn!(error = %describe(&e), "election attempt failed"),
            }
            std::thread::sleep(self.poll);
        }
        Ok(None)
    }

    /// Take the lock if it is free; then the lead, with a new epoch.
    fn try_lead(&self, c: &mut Client) -> Result<Option<i64>, postgres::Error> {
        let got: bool = c
            .query_one("SELECT pg_try_advisory_lock($1)", &[&LEADER_LOCK])?
            .try_get(0)?;
        if !got {
            return Ok(None);
        }
        // Sessions of a leader that was ended may still hold the row in a
        // transaction: wait a bounded time, never forever.
        c.batch_execute("SET lock_timeout = '5s'")?;
        let epoch: i64 = c
            .query_one(
                "INSERT INTO leader (id, epoch, uri, pid, renewed, holder) \
                 VALUES (1, 1, $1, pg_backend_pid(), now(), $2) \
                 ON CONFLICT (id) DO UPDATE SET epoch = leader.epoch + 1, \
                     uri = excluded.uri, pid = excluded.pid, renewed = now(), \
                     holder = excluded.holder, last_group = 0 \
                 RETURNING epoch",
                &[&self.uri, &self.holder],
            )?
            .try_get(0)?;
        c.batch_execute("SET lock_timeout = 0")?;
        Ok(Some(epoch))
    }

    /// Publish who leads; end the sessions of a leader whose lease ran out.
    fn watch_leader(
        &self,
        c: &mut Client,
        leader: &watch::Sender<Option<String>>,
    ) -> Result<(), postgres::Error> {
        let Some(row) = c.query_opt(
            "SELECT uri, holder, extract(epoch FROM now() - renewed)::float8 \
             FROM leader WHERE id = 1",
            &[],
        )?
        else {
            return Ok(());
        };
        let uri: String = row.try_get(0)?;
        let holder: String = row.try_get(1)?;
        let age: f64 = row.try_get(2)?;
        // A row naming this job manager is a lead it lost and has not
        // been taken yet: no leader to send clients to.
        let shown = (uri != self.uri).then(|| uri.clone());
        leader.send_if_modified(|known| {
            let changed = *known != shown;
            if changed {
                known.clone_from(&shown);
            }
            changed
        });
        if age > self.lease.as_secs_f64() {
            tracing::warn!(
                %uri,
                seconds = age,
                "the leader stopped renewing its lease; ending its database sessions"
            );
            c.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1 AND pid <> pg_backend_pid()",
                &[&session_name(&holder)],
            )?;
        }
        Ok(())
    }
}

/// The application name of a job manager's database sessions.
pub fn session_name(holder: &str) -> String {
    format!("fluxgate-jm-{holder}")
}

/// A fresh holder name: 16 random hex digits.
pub fn new_holder() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What a leader does once when its lead is gone.
type OnLost = Box<dyn FnOnce(String) + Send>;

/// Keep the lead: renew the lease every third of it on the lock session;
/// call `lost` (once) when the lead is gone: another job manager holds the
/// epoch or the lock, or no renewal has succeeded for as long as the lease
/// could last (a renewal that hangs on a database cut off included: a
/// watchdog thread judges the time). Runs until `stop` is set.
pub fn keep(
    elector: Elector,
    leadership: &Leadership,
    client: Client,
    stop: Arc<AtomicBool>,
    lost: impl FnOnce(String) + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let epoch = leadership.epoch;
    let renewed = Arc::new(Mutex::new(leadership.since));
    let lost: Arc<Mutex<Option<OnLost>>> = Arc::new(Mutex::new(Some(Box::new(lost))));
    let step_down = {
        let lost = Arc::clone(&lost);
        move |why: String| {
            let taken = lost.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(f) = taken {
                f(why);
            }
        }
    };
    {
        let (renewed, stop, step_down) =
            (Arc::clone(&renewed), Arc::clone(&stop), step_down.clone());
        let lease = elector.lease;
        std::thread::Builder::new()
            .name("leader-watchdog".into())
            .spawn(move || {
                let every = (lease / 10).clamp(Duration::from_millis(10), Duration::from_secs(1));
                while !stop.load(Ordering::Acquire) {
                    std::thread::sleep(every);
                    let since = renewed.lock().unwrap_or_else(|e| e.into_inner()).elapsed();
                    if lease_may_have_expired(since, lease) && !stop.load(Ordering::Acquire) {
                        return step_down(format!(
                            "no lease renewal for {:.1}s (lease {:?}): another job manager \
                             may lead; stepping down",
                            since.as_secs_f64(),
                            lease
                        ));
                    }
                }
            })?;
    }
    std::thread::Builder::new()
        .name("leader-lease".into())
        .spawn(move || renew_loop(elector, epoch, client, renewed, stop, step_down))
}

/// Renew the lease every third of it until `stop`, recording in `renewed`
/// when each renewal that succeeded was sent.
fn renew_loop(
    elector: Elector,
    epoch: i64,
    mut client: Client,
    renewed: Arc<Mutex<Instant>>,
    stop: Arc<AtomicBool>,
    lost: impl Fn(String),
) {
    let every = elector.lease / 3;
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(every);
        if stop.load(Ordering::Acquire) {
            break;
        }
        let sent = Instant::now();
        match renew(&mut client, epoch) {
            Ok(true) => *renewed.lock().unwrap_or_else(|e| e.into_inner()) = sent,
            Ok(false) => {
                return lost(format!(
                    "another job manager took the lead (epoch {epoch} is over)"
                ));
            }
            // Stepped down while the renewal hung: no lead to reclaim.
            Err(_) if stop.load(Ordering::Acquire) => break,
            Err(e) => {
                tracing::warn!(error = %describe(&e), "cannot renew the lease; reconnecting");
                match elector.connect.connect() {
                    Ok(mut c) => match reclaim(&mut c, epoch) {
                        Ok(true) => {
                            *renewed.lock().unwrap_or_else(|e| e.into_inner()) = sent;
                            client = c;
                        }
                        Ok(false) => {
                            return lost(format!(
                                "the lead was lost with the database session (epoch {epoch})"
                            ));
                        }
                        Err(e) => tracing::warn!(error = %describe(&e), "cannot reclaim the lead"),
                    },
                    Err(e) => tracing::warn!(error = %e, "store unreachable"),
                }
            }
        }
    }
}

fn renew(c: &mut Client, epoch: i64) -> Result<bool, postgres::Error> {
    Ok(c.execute(
        "UPDATE leader SET renewed = now() WHERE id = 1 AND epoch = $1",
        &[&epoch],
    )? == 1)
}

/// After a lost session: the lock again, if nobody took it, and the epoch
/// still ours.
fn reclaim(c: &mut Client, epoch: i64) -> Result<bool, postgres::Error> {
    let got: bool = c
        .query_one("SELECT pg_try_advisory_lock($1)", &[&LEADER_LOCK])?
        .try_get(0)?;
    if !got {
        return Ok(false);
    }
    Ok(c.execute(
        "UPDATE leader SET renewed = now(), pid = pg_backend_pid() WHERE id = 1 AND epoch = $1",
        &[&epoch],
    )? == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_steps_down_just_before_its_lease_could_have_expired() {
        let lease = Duration::from_secs(10);
        assert!(!lease_may_have_expired(Duration::from_secs(3), lease));
        assert!(!lease_may_have_expired(Duration::from_millis(8900), lease));
        assert!(lease_may_have_expired(Duration::from_secs(9), lease));
        assert!(lease_may_have_expired(Duration::from_secs(60), lease));
    }
}

//! Reading submitted jobspecs: off the async workers, bounded per caller.
//!
//! A jobspec is user text. YAML with anchors costs the parser up to a few
//! milliseconds even within its alias bound, and one SubmitMany carries up
//! to `limits.max_batch` of them: parsed on the runtime's worker threads,
//! four batches of 60 alias bombs once stalled every other caller's RPCs
//! for 18 s. So parsing runs on tokio's blocking pool behind two gates:
//! [`PER_USER_PARSES`] at once per user, so one user's requests queue
//! behind each other, and one per core in all, so parsing never takes every
//! thread from the runtime. Both gates are fair (first come, first served),
//! and a batch takes them again every [`BATCH_CHUNK`] jobspecs, so another
//! user's jobspec waits for at most one chunk.
//!
//! A small JSON jobspec (what the CLI and the Python client send) is read in
//! place: JSON has no aliases, its cost is linear in its size, and below
//! [`INLINE_MAX_BYTES`] it is cheaper than the hop to the pool.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};

use fluxgate_proto::v1 as pb;
use fluxgate_shared::Jobspec;
use fluxgate_shared::auth::{Action, Caller};
use fluxgate_shared::jobspec::Limits;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::allow;
use crate::core::SubmitArgs;
use crate::error::Error;
use crate::policy::SitePolicy;
use crate::values::Urgency;

/// Jobspecs of one user parsed at the same time.
pub const PER_USER_PARSES: usize = 2;

/// Users with a gate kept at once; idle gates are dropped past this.
pub const MAX_TRACKED_USERS: usize = 4096;

/// Jobspecs of one SubmitMany parsed per turn at the gates.
pub const BATCH_CHUNK: usize = 64;

/// Largest JSON jobspec read on the async worker itself: about 100 us of
/// parsing and validation in a debug build.
pub const INLINE_MAX_BYTES: usize = 16 * 1024;

/// The two gates in front of the blocking pool.
#[derive(Debug)]
pub struct ParseGate {
    all: Arc<Semaphore>,
    users: Mutex<HashMap<u32, Arc<Semaphore>>>,
}

/// What a parse holds while it runs: its user's permit and one of the
/// global ones.
type Admission = (OwnedSemaphorePermit, OwnedSemaphorePermit);

impl ParseGate {
    /// A gate admitting `parallel` parses at once in all.
    pub fn new(parallel: usize) -> Self {
        ParseGate {
            all: Arc::new(Semaphore::new(parallel.max(1))),
            users: Mutex::new(HashMap::new()),
        }
    }

    /// A gate with one parse per core of this machine.
    pub fn per_core() -> Self {
        Self::new(std::thread::available_parallelism().map_or(2, NonZeroUsize::get))
    }

    /// The gate of user `uid`, made on first use. Gates nobody holds or
    /// waits for are dropped when the map is full; when every one is busy,
    /// the caller is told to come back.
    fn user_gate(&self, uid: u32) -> Result<Arc<Semaphore>, Error> {
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(gate) = users.get(&uid) {
            return Ok(Arc::clone(gate));
        }
        if users.len() >= MAX_TRACKED_USERS {
            // Only the map holds an idle gate.
            users.retain(|_, gate| Arc::strong_count(gate) > 1);
            if users.len() >= MAX_TRACKED_USERS {
                return Err(Error::Exhausted(format!(
                    "{MAX_TRACKED_USERS} users are submitting at once; retry shortly"
                )));
            }
        }
        let gate = Arc::new(Semaphore::new(PER_USER_PARSES));
        users.insert(uid, Arc::clone(&gate));
        Ok(gate)
    }

    /// Wait for a turn of user `uid`: the user's gate first, so that a user's
    /// queued requests hold no global permit while they wait.
    async fn admit(&self, uid: u32) -> Result<Admission, Error> {
        let closed = |_| Error::Unavailable("the job manager is shutting down".into());
        let user = self.user_gate(uid)?.acquire_owned().await.map_err(closed)?;
        let all = Arc::clone(&self.all)
            .acquire_owned()
            .await
            .map_err(closed)?;
        Ok((user, all))
    }

    /// Run `work` on the blocking pool in a turn of user `uid`.
    pub async fn run<T: Send + 'static>(
        &self,
        uid: u32,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Error> {
        let admission = self.admit(uid).await?;
        tokio::task::spawn_blocking(move || {
            let out = work();
            drop(admission);
            out
        })
        .await
        .map_err(|e| Error::Unavailable(format!("reading the jobspec failed: {e}")))
    }

    /// Read one submission: in place when it is small JSON, else in a turn.
    pub async fn parse_one(
        &self,
        req: pb::SubmitRequest,
        caller: &Caller,
        max_bytes: usize,
        site: &Arc<SitePolicy>,
    ) -> Result<SubmitArgs, Error> {
        if is_cheap(&req) {
            return parse_submit(req, caller, max_bytes, site);
        }
        let who = caller.clone();
        let site = Arc::clone(site);
        self.run(caller.uid, move || {
            parse_submit(req, &who, max_bytes, &site)
        })
        .await?
    }

    /// Read the submissions of a SubmitMany, in order, a chunk per turn;
    /// each one's own result.
    pub async fn parse_many(
        &self,
        jobs: Vec<pb::SubmitRequest>,
        caller: &Caller,
        max_bytes: usize,
        site: &Arc<SitePolicy>,
    ) -> Result<Vec<Result<SubmitArgs, Error>>, Error> {
        let mut parsed = Vec::with_capacity(jobs.len());
        let mut jobs = jobs.into_iter().peekable();
        while jobs.peek().is_some() {
            let chunk: Vec<pb::SubmitRequest> = jobs.by_ref().take(BATCH_CHUNK).collect();
            let who = caller.clone();
            let site = Arc::clone(site);
            let results = self
                .run(caller.uid, move || {
                    chunk
                        .into_iter()
                        .map(|j| parse_submit(j, &who, max_bytes, &site))
                        .collect::<Vec<_>>()
                })
                .await?;
            parsed.extend(results);
        }
        Ok(parsed)
    }
}

/// Cheap enough to read on an async worker: small JSON.
pub fn is_cheap(req: &pb::SubmitRequest) -> bool {
    req.jobspec.len() <= INLINE_MAX_BYTES && req.jobspec.trim_start().starts_with('{')
}

/// Parse and authorize one submission; the job is the caller's. The
/// jobspec is stored without credentials (see `strip_credentials`), with
/// the site's defaults and queue constraints applied (flux's ingest).
pub fn parse_submit(
    req: pb::SubmitRequest,
    caller: &Caller,
    max_bytes: usize,
    site: &SitePolicy,
) -> Result<SubmitArgs, Error> {
    if req.jobspec.len() > max_bytes {
        return Err(Error::Invalid(format!(
            "jobspec is {} bytes, over the limit of {max_bytes} bytes",
            req.jobspec.len()
        )));
    }
    let key = idempotency_key(req.idempotency_key)?;
    // The alias bound of YAML is tied to the size limit in force.
    let limits = Limits {
        max_bytes,
        ..Limits::default()
    };
    let mut jobspec = Jobspec::parse_with(&req.jobspec, &limits)
        .map_err(|e| Error::Invalid(format!("jobspec: {e}")))?;
    // A known shell option with a value the job shell cannot take is the
    // submitter's mistake, said now rather than when the job starts.
    jobspec
        .shell()
        .map_err(|e| Error::Invalid(format!("jobspec: {e}")))?;
    let urgency = Urgency::new(req.urgency.unwrap_or(u32::from(Urgency::DEFAULT.get())))?;
    const KNOWN: u32 = 2 | 4 | 8;
    if req.flags & !KNOWN != 0 {
        return Err(Error::Invalid(format!(
            "unknown submit flags {:#x}",
            req.flags & !KNOWN
        )));
    }
    let action = Action::Submit {
        urgency: urgency.get(),
        waitable: req.flags & pb::SubmitFlag::Waitable as u32 != 0,
        novalidate: req.flags & pb::SubmitFlag::Novalidate as u32 != 0,
    };
    allow(caller, action, None)?;
    if let Some(applied) = site.ingest(&jobspec)? {
        jobspec = applied;
    }
    // Whatever the client copied from its environment, a credential is not
    // stored: the store is read by the service and its backups.
    jobspec.strip_credentials();
    Ok(SubmitArgs {
        jobspec_json: jobspec.to_json(),
        jobspec: Arc::new(jobspec),
        urgency,
        flags: i64::from(req.flags),
        // The verified identity, never a userid from the request.
        userid: caller.uid,
        antecedents: Default::default(),
        key,
        prior: None,
    })
}

/// Longest idempotency key: a UUID is 36 bytes; room for a prefix.
const KEY_MAX_BYTES: usize = 128;

/// An idempotency key as the request gives it: empty is none.
fn idempotency_key(key: String) -> Result<Option<String>, Error> {
    if key.is_empty() {
        return Ok(None);
    }
    if key.len() > KEY_MAX_BYTES || key.chars().any(char::is_control) {
        return Err(Error::Invalid(format!(
            "idempotency_key must be at most {KEY_MAX_BYTES} bytes of printable text"
        )));
    }
    Ok(Some(key))
}

#[cfg(test)]
mod tests {
    use fluxgate_shared::auth::Role;

    use super::*;

    fn guest(uid: u32) -> Caller {
        Caller {
            user: format!("u{uid}"),
            uid,
            role: Role::Guest,
        }
    }

    fn request(jobspec: impl Into<String>) -> pb::SubmitRequest {
        pb::SubmitRequest {
            jobspec: jobspec.into(),
            urgency: None,
            flags: 0,
            ..Default::default()
        }
    }

    const JSON: &str = r#"{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],"tasks":[{"command":["env"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0,"environment":{"A":"1","FLUXGATE_TOKEN":"secret","B":"2"}}}}"#;

    fn bomb() -> String {
        let mut s = String::from("a0: &a0 [lol]\n");
        for i in 1..9 {
            s.push_str(&format!(
                "a{i}: &a{i} [{}]\n",
                vec![format!("*a{}", i - 1); 9].join(",")
            ));
        }
        s
    }

    #[test]
    fn the_stored_jobspec_is_the_submitted_one_minus_the_token() {
        let args =
            parse_submit(request(JSON), &guest(1000), 1 << 20, &SitePolicy::default()).unwrap();
        let want = JSON.replace(r#","FLUXGATE_TOKEN":"secret""#, "");
        assert_eq!(args.jobspec_json, want);
        assert!(!args.jobspec.environment().contains_key("FLUXGATE_TOKEN"));
        assert_eq!(args.userid, 1000);
    }

    #[test]
    fn a_bomb_is_invalid_with_the_alias_message() {
        let err = parse_submit(
            request(bomb()),
            &guest(1000),
            1 << 20,
            &SitePolicy::default(),
        )
        .unwrap_err();
        let Error::Invalid(msg) = err else {
            panic!("expected Invalid, got {err:?}");
        };
        assert!(
            msg.starts_with("jobspec: jobspec YAML expands aliases past 4096"),
            "{msg}"
        );
    }

    #[test]
    fn only_small_json_is_cheap() {
        assert!(is_cheap(&request(JSON)));
        assert!(!is_cheap(&request(bomb())));
        let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(INLINE_MAX_BYTES));
        assert!(!is_cheap(&request(big)));
    }

    #[tokio::test]
    async fn a_batch_keeps_its_order_across_chunks() {
        let gate = ParseGate::new(2);
        let jobs: Vec<_> = (0..BATCH_CHUNK * 2 + 3)
            .map(|i| request(if i % 3 == 0 { bomb() } else { JSON.to_string() }))
            .collect();
        let parsed = gate
            .parse_many(jobs, &guest(7), 1 << 20, &Arc::default())
            .await
            .unwrap();
        assert_eq!(parsed.len(), BATCH_CHUNK * 2 + 3);
        for (i, r) in parsed.iter().enumerate() {
            assert_eq!(r.is_err(), i % 3 == 0, "job {i}");
        }
    }

    #[tokio::test]
    async fn a_user_holds_at_most_its_share() {
        let gate = ParseGate::new(8);
        let a = gate.admit(1).await.unwrap();
        let b = gate.admit(1).await.unwrap();
        // The third turn of the same user waits; another user goes ahead.
        let third = gate.admit(1);
        tokio::pin!(third);
        assert!(futures_now(&mut third).await.is_none());
        let other = gate.admit(2).await.unwrap();
        assert_eq!(gate.all.available_permits(), 5);
        drop(a);
        assert!(futures_now(&mut third).await.is_some());
        drop((b, other));
    }

    #[test]
    fn idle_user_gates_are_dropped_when_the_map_is_full() {
        let gate = ParseGate::new(1);
        let busy = gate.user_gate(0).unwrap();
        for uid in 1..MAX_TRACKED_USERS as u32 {
            gate.user_gate(uid).unwrap();
        }
        // Full: the idle ones go, the busy one stays.
        gate.user_gate(u32::MAX).unwrap();
        let users = gate.users.lock().unwrap();
        assert_eq!(users.len(), 2);
        assert!(users.contains_key(&0));
        drop(busy);
    }

    /// Poll a future once: its output if it is ready now.
    async fn futures_now<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        use std::task::Poll;
        std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *f).poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => Poll::Ready(None),
        })
        .await
    }
}

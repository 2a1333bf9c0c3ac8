//! The resource module (RFC 44 events, RFC 28 acquire) inside the core.
//!
//! Every resource change is a `ResourceEvent` applied to one
//! `shared::resource::ResourceState` (the same fold replay uses). Persistent
//! ones (resource-define, resource-update, drain, undrain) go to the store's
//! resource eventlog; all go to the in-memory journal once committed. After
//! each change the schedulable set (online, not drained, not torpid) is
//! recomputed; its delta moves the scheduler's pool and is the RFC 28
//! `{up, down}` response sent to the one acquirer.

use std::collections::HashMap;
use std::time::Instant;

use fluxgate_shared::eventlog::parse_eventlog_lenient;
use fluxgate_shared::resource::{
    AcquireDelta, DrainMode, ResourceEvent, ResourceState, StatusGroups, checkpoint,
    last_definition_times,
};
use fluxgate_shared::rset::Pool;
use fluxgate_shared::{Hostlist, IdSet, ResourceSet};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::Core;
use super::effect::Effect;
use crate::clock;
use crate::error::Error;
use crate::store::{Store, Write};

/// Acquire responses buffered for a slow acquirer before it is dropped.
pub const ACQUIRE_BUFFER: usize = 1024;

/// Requests to the resource module.
#[derive(Debug)]
pub enum ResourceMsg {
    /// Drain targets.
    Drain {
        targets: String,
        reason: Option<String>,
        mode: DrainMode,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    /// Undrain targets.
    Undrain {
        targets: String,
        reason: Option<String>,
        force: bool,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    /// Start an RFC 28 acquire stream (one at a time).
    Acquire {
        reply: oneshot::Sender<Result<mpsc::Receiver<Map<String, Value>>, Error>>,
    },
    /// Status groups and the inventory views.
    Status {
        reply: oneshot::Sender<ResourceView>,
    },
    /// The instance's expiration changed (RFC 44 resource-update).
    Update {
        expiration: f64,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    /// Add or remove a property on targets (RFC 28 property-add/remove).
    Property {
        name: String,
        targets: String,
        remove: bool,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    /// Re-define the inventory (resource-define, method `reload`).
    Reload {
        r: ResourceSet,
        reply: oneshot::Sender<Result<(), Error>>,
    },
}

/// The store's meta key holding the inventory's properties as changed at
/// run time (an RFC 20 properties object), applied over the inventory at start.
pub const PROPERTIES_META: &str = "resource.properties";

/// What the core knows of the stored resource eventlog, to checkpoint it.
#[derive(Debug, Default, Clone, Copy)]
pub struct ResLog {
    /// Lines stored.
    len: usize,
    /// Time of the last `resource-define` and `resource-update` stored.
    define: Option<f64>,
    update: Option<f64>,
    /// Checkpoint when `len` passes this.
    threshold: usize,
}

/// The resource module's own state, as flux-core's resource module keeps
/// it: the RFC 44 fold, what is stored of its eventlog, the targets the
/// scheduler may use, the one acquirer (RFC 28) and when each rank was
/// last heard from (torpid detection).
#[derive(Debug, Default)]
pub struct Resources {
    /// Drain, online and torpid state: the fold of the resource eventlog.
    state: ResourceState,
    /// What is stored of the resource eventlog.
    log: ResLog,
    /// Schedulable targets, as last told to the scheduler and acquirer.
    up: IdSet,
    /// The scheduler that acquired the resources, while it listens.
    acquirer: Option<mpsc::Sender<Map<String, Value>>>,
    /// When each rank's exec service was last heard from.
    last_heard: HashMap<u32, Instant>,
    /// Ranks silent past the lost timeout, until they are heard again.
    lost: IdSet,
    /// Properties changed at run time, as stored: read once at start and
    /// kept as written, so a later definition applies them without a read.
    properties: Option<Value>,
}

impl Resources {
    /// The `resource-drain` event that drains `targets`, once `reason`
    /// is within bounds and the targets are valid.
    fn plan_drain(
        &self,
        targets: &str,
        reason: Option<&str>,
        mode: DrainMode,
    ) -> Result<ResourceEvent, Error> {
        if let Some(r) = reason {
            super::bounds::check_note("drain reason", r)?;
        }
        let planned = self.state.plan_drain(targets, reason, mode, &IdSet::new());
        planned.map_err(|e| Error::Invalid(e.to_string()))
    }

    /// The `resource-undrain` event that undrains `targets` (none when
    /// nothing changes), once `reason` is within bounds.
    fn plan_undrain(
        &self,
        targets: &str,
        reason: Option<&str>,
        force: bool,
    ) -> Result<Option<ResourceEvent>, Error> {
        if let Some(r) = reason {
            super::bounds::check_note("undrain reason", r)?;
        }
        let planned = self.state.plan_undrain(targets, reason, force);
        planned.map_err(|e| Error::Invalid(e.to_string()))
    }

    /// What `Resource.Status` shows, with the scheduler's `pool` (none
    /// before the inventory is defined).
    fn view(&self, pool: Option<&Pool>) -> ResourceView {
        let allocated = pool.map(Pool::allocated);
        let alloc_ranks = allocated.as_ref().map(|r| r.ranks()).unwrap_or_default();
        let groups = self.state.status(&IdSet::new(), &alloc_ranks);
        let drains = self
            .state
            .drain_groups()
            .iter()
            .map(|g| {
                (
                    g.ranks.clone(),
                    self.state.nodelist(&g.ranks).encode(),
                    g.timestamp,
                    g.reason.clone().unwrap_or_default(),
                )
            })
            .collect();
        ResourceView {
            inventory: pool.map(|p| p.inventory().clone()),
            groups,
            up: self.up.clone(),
            drains,
            allocated,
        }
    }

    /// The RFC 44 state.
    pub fn state(&self) -> &ResourceState {
        &self.state
    }

    /// Schedulable targets.
    pub fn up(&self) -> &IdSet {
        &self.up
    }

    /// Rank `rank` was heard from at `now`.
    pub fn heard(&mut self, rank: u32, now: Instant) {
        self.last_heard.insert(rank, now);
        self.lost.remove(rank);
    }

    /// Seconds since `rank` was last heard from at `now` (infinite if never).
    pub fn silence(&self, rank: u32, now: Instant) -> f64 {
        self.last_heard.get(&rank).map_or(f64::INFINITY, |t| {
            now.saturating_duration_since(*t).as_secs_f64()
        })
    }

    /// Ranks heard from once and silent for `limit` seconds at `now`, not
    /// yet lost: they are lost from now on (until heard again).
    fn newly_lost(&mut self, now: Instant, limit: f64) -> IdSet {
        let mut lost = IdSet::new();
        for (&rank, &t) in &self.last_heard {
            if !self.lost.contains(rank) && now.saturating_duration_since(t).as_secs_f64() >= limit
            {
                lost.insert(rank);
            }
        }
        for rank in lost.iter() {
            self.lost.insert(rank);
        }
        lost
    }

    /// Note that `ranks` were heard from at `now`; those of them that were
    /// torpid, which are lively again.
    fn heard_from(&mut self, ranks: &[u32], now: Instant) -> IdSet {
        let mut lively = IdSet::new();
        for &r in ranks {
            self.heard(r, now);
            if self.state.torpid().contains(r) {
                lively.insert(r);
            }
        }
        lively
    }

    /// Ranks of `online` not heard from within `limit` of `now` and not
    /// yet torpid.
    fn newly_silent(&self, online: &IdSet, now: Instant, limit: std::time::Duration) -> IdSet {
        let mut silent = IdSet::new();
        for rank in online.iter() {
            let quiet = self
                .last_heard
                .get(&rank)
                .is_none_or(|t| now.duration_since(*t) > limit);
            if quiet && !self.state.torpid().contains(rank) {
                silent.insert(rank);
            }
        }
        silent
    }

    /// The acquirer, while it still listens.
    fn live_acquirer(&mut self) -> Option<mpsc::Sender<Map<String, Value>>> {
        if self.acquirer.as_ref().is_some_and(mpsc::Sender::is_closed) {
            self.acquirer = None;
        }
        self.acquirer.clone()
    }

    /// Record a stored event in what is known of the stored eventlog.
    fn stored(&mut self, event: &ResourceEvent, timestamp: f64) {
        self.log.len += 1;
        match event {
            ResourceEvent::ResourceDefine { .. } => self.log.define = Some(timestamp),
            ResourceEvent::ResourceUpdate { .. } => self.log.update = Some(timestamp),
            _ => {}
        }
    }

    /// The checkpoint of the stored eventlog, when it holds more than
    /// `max` lines (0: never); then it is what is stored.
    fn checkpoint_due(&mut self, max: usize) -> Option<Vec<String>> {
        if max == 0 || self.log.len <= self.log.threshold.max(max) {
            return None;
        }
        let events = checkpoint(&self.state, self.log.define, self.log.update);
        let lines: Vec<String> = events.iter().map(|e| e.to_json()).collect();
        tracing::info!(
            from = self.log.len,
            to = lines.len(),
            "resource eventlog checkpointed"
        );
        self.log.len = lines.len();
        // A checkpoint as long as the limit (thousands of distinct drains)
        // must not be redone on every event.
        self.log.threshold = max.max(2 * lines.len());
        Some(lines)
    }
}

/// A snapshot of resource state for status and list.
#[derive(Debug, Clone, Default)]
pub struct ResourceView {
    /// The inventory, once defined.
    pub inventory: Option<ResourceSet>,
    /// `flux resource status` groups.
    pub groups: StatusGroups,
    /// Schedulable targets.
    pub up: IdSet,
    /// Drain reasons and times by rank group: (ranks, hosts, timestamp, reason).
    pub drains: Vec<(IdSet, String, f64, String)>,
    /// Allocated resources.
    pub allocated: Option<ResourceSet>,
}

impl<S: Store> Core<S> {
    /// Build the resource state at start: replay the stored eventlog (a bad line
    /// is reported and skipped), then post `restart` and, for a configured
    /// inventory, `resource-define`.
    pub(super) fn resource_start(&mut self, hosts: Option<Hostlist>, method: Option<&str>) {
        let mut state = match &hosts {
            Some(h) => ResourceState::with_hosts(h.clone()),
            None => ResourceState::new(),
        };
        match self.store.resource_eventlog() {
            Ok(lines) => {
                let mut text = lines.join("\n");
                if !text.is_empty() {
                    text.push('\n');
                }
                let log = parse_eventlog_lenient(&text);
                for err in &log.errors {
                    tracing::warn!(error = %err, "skipping a bad resource eventlog line");
                }
                for event in &log.events {
                    if let Err(e) = state.apply(event) {
                        tracing::warn!(event = %event.name, error = %e, "skipping a resource event");
                    }
                }
                let (define, update) = last_definition_times(&log.events);
                self.res.log = ResLog {
                    len: lines.len(),
                    define,
                    update,
                    threshold: self.config.resource.eventlog_max,
                };
            }
            Err(e) => tracing::error!(error = %e, "cannot read the resource eventlog"),
        }
        self.res.state = state;
        // Without a host map yet (size mode) a checkpoint would lose the
        // hostnames that let drains follow their nodes; it waits for one.
        if hosts.is_some() {
            self.checkpoint_if_due();
        }
        if let Some(hosts) = hosts {
            self.post_restart(hosts);
        }
        if let Some(method) = method {
            self.post_resource(ResourceEvent::ResourceDefine {
                method: method.to_string(),
            });
        }
    }

    fn post_restart(&mut self, hosts: Hostlist) {
        let n = hosts.len() as u32;
        self.post_resource(ResourceEvent::Restart {
            ranks: if n == 0 {
                IdSet::new()
            } else {
                IdSet::from_range(0, n - 1)
            },
            online: self.nodes.online().clone(),
            nodelist: hosts,
        });
    }

    /// The inventory became known by discovery.
    pub(super) fn define_discovered(&mut self, inventory: ResourceSet, first_definition: bool) {
        if first_definition && self.res.state.ranks().is_empty() {
            // Size mode: the hostnames are known only now.
            let hosts = inventory.nodelist().unwrap_or_default();
            self.post_restart(hosts);
        }
        self.sched.define(inventory);
        self.apply_stored_properties();
        self.mark_held();
        self.post_resource(ResourceEvent::ResourceDefine {
            method: "dynamic-discovery".into(),
        });
    }

    /// Apply, store (if persistent), journal and propagate one resource event.
    pub(super) fn post_resource(&mut self, event: ResourceEvent) {
        let e = event.to_event(clock::now());
        self.res.state.apply_typed(e.timestamp, &event);
        if event.is_persistent() {
            self.out
                .writes
                .push(Write::ResourceEvent { line: e.to_json() });
            self.res.stored(&event, e.timestamp);
            self.checkpoint_if_due();
        }
        self.effect(Effect::Journal(e));
        self.update_up();
    }

    /// Replace the stored resource eventlog by its checkpoint once it holds
    /// more than `eventlog_max` lines. The replacement is one write in the
    /// batch, so a crash leaves either the old log or the checkpoint.
    fn checkpoint_if_due(&mut self) {
        if let Some(lines) = self.res.checkpoint_due(self.config.resource.eventlog_max) {
            self.out
                .writes
                .push(Write::ReplaceResourceEventlog { lines });
        }
    }

    /// Recompute the schedulable targets and tell the scheduler and acquirer.
    fn update_up(&mut self) {
        let Some(pool) = self.sched.pool() else {
            return;
        };
        let new_up = self
            .res
            .state
            .schedulable(&IdSet::new())
            .intersection(pool.ranks());
        let delta = AcquireDelta::between(&self.res.up, &new_up);
        if delta.is_empty() {
            return;
        }
        self.sched.set_up(&delta.up, true);
        self.sched.set_up(&delta.down, false);
        self.res.up = new_up;
        self.out.resched = true;
        self.send_acquire(delta.to_json());
    }

    fn send_acquire(&mut self, msg: Map<String, Value>) {
        if let Some(tx) = self.res.live_acquirer() {
            self.effect(Effect::Acquire { to: tx, msg });
        }
    }

    pub(super) fn resource_msg(&mut self, msg: ResourceMsg) {
        match msg {
            ResourceMsg::Drain {
                targets,
                reason,
                mode,
                reply,
            } => {
                let planned = self.res.plan_drain(&targets, reason.as_deref(), mode);
                let r = planned.map(|ev| self.post_resource(ev));
                self.reply(reply, r);
            }
            ResourceMsg::Undrain {
                targets,
                reason,
                force,
                reply,
            } => {
                let planned = self.res.plan_undrain(&targets, reason.as_deref(), force);
                let r = planned.map(|ev| ev.map_or((), |ev| self.post_resource(ev)));
                self.reply(reply, r);
            }
            ResourceMsg::Acquire { reply } => {
                let _ = reply.send(self.acquire());
            }
            ResourceMsg::Update { expiration, reply } => {
                let r = self.update_expiration(expiration);
                self.reply(reply, r);
            }
            ResourceMsg::Property {
                name,
                targets,
                remove,
                reply,
            } => {
                let r = self.change_property(&name, &targets, remove);
                self.reply(reply, r);
            }
            ResourceMsg::Reload { r, reply } => {
                let r = self.reload(r);
                self.reply(reply, r);
            }
            ResourceMsg::Status { reply } => {
                let view = self.res.view(self.sched.pool());
                // Answered after what is already queued is committed, so that a
                // caller who sees a change also finds it in the journal.
                self.reply(reply, view);
            }
        }
    }

    /// A scheduler acquires the resources (RFC 28): the channel of its
    /// responses, the first of which is queued now; refused while another
    /// holds them or before the inventory is defined.
    fn acquire(&mut self) -> Result<mpsc::Receiver<Map<String, Value>>, Error> {
        if self.res.acquirer.as_ref().is_some_and(|tx| !tx.is_closed()) {
            return Err(Error::Unavailable(
                "resources are already acquired by another scheduler (EBUSY)".into(),
            ));
        }
        let Some(pool) = self.sched.pool() else {
            return Err(Error::Unavailable(
                "the resource inventory is not defined yet: waiting for nodes to join".into(),
            ));
        };
        let (tx, rx) = mpsc::channel(ACQUIRE_BUFFER);
        let first =
            fluxgate_shared::resource::acquire_initial(pool.inventory().to_json(), &self.res.up);
        // Queued behind what is already committed, so the deltas that
        // follow apply to exactly this first response.
        self.effect(Effect::Acquire {
            to: tx.clone(),
            msg: first,
        });
        self.res.acquirer = Some(tx);
        Ok(rx)
    }

    /// Post `resource-update` and tell the acquirer; the scheduler starts no
    /// job that would outlive the new expiration (0: none).
    fn update_expiration(&mut self, expiration: f64) -> Result<(), Error> {
        if !(expiration >= 0.0 && expiration.is_finite()) {
            return Err(Error::Invalid(format!(
                "expiration {expiration} must be seconds since the epoch, or 0 for none"
            )));
        }
        tracing::info!(expiration, "instance expiration updated");
        self.post_resource(ResourceEvent::ResourceUpdate { expiration });
        if let Some(pool) = self.sched.pool_mut() {
            pool.set_expiration(expiration);
        }
        let mut msg = Map::new();
        msg.insert("expiration".into(), Value::from(expiration));
        self.send_acquire(msg);
        self.instance_expiration_changed();
        self.out.resched = true;
        Ok(())
    }

    /// Add or remove property `name` on `targets` (ranks or hosts); stored
    /// so a restart keeps it, sent to the acquirer as property-add/remove.
    fn change_property(&mut self, name: &str, targets: &str, remove: bool) -> Result<(), Error> {
        fluxgate_shared::rset::validate_property_name(name)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let ranks = self
            .res
            .state
            .resolve_targets(targets)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let Some(pool) = self.sched.pool_mut() else {
            return Err(Error::Unavailable(
                "the resource inventory is not defined yet: waiting for nodes to join".into(),
            ));
        };
        if remove {
            pool.remove_property(name, &ranks);
        } else {
            pool.add_property(name, &ranks)
                .map_err(|e| Error::Invalid(e.to_string()))?;
        }
        let props: Map<String, Value> = pool
            .inventory()
            .properties()
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.to_string())))
            .collect();
        self.store_properties(Value::Object(props));
        let mut change = Map::new();
        change.insert(name.to_string(), Value::from(ranks.to_string()));
        let key = if remove {
            "property-remove"
        } else {
            "property-add"
        };
        tracing::info!(property = name, ranks = %ranks, key, "property changed");
        let mut msg = Map::new();
        msg.insert(key.into(), Value::Object(change));
        self.send_acquire(msg);
        // A constrained job at the head may fit now.
        self.sched.unstall();
        self.out.resched = true;
        Ok(())
    }

    /// Read the properties changed at run time from the store (at start,
    /// before the core's loop runs).
    pub(super) fn load_stored_properties(&mut self) {
        self.res.properties = match self.store.meta(PROPERTIES_META) {
            Ok(Some(text)) => match serde_json::from_str::<Value>(&text) {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(error = %e, "skipping bad stored resource properties");
                    None
                }
            },
            Ok(None) => None,
            Err(e) => {
                tracing::error!(error = %e, "cannot read stored resource properties");
                None
            }
        };
    }

    /// Keep `props` as the properties of the inventory, across restarts.
    fn store_properties(&mut self, props: Value) {
        self.out.writes.push(Write::Meta {
            key: PROPERTIES_META.into(),
            value: props.to_string(),
        });
        self.res.properties = Some(props);
    }

    /// Apply properties changed at run time over the inventory, once it is defined.
    pub(super) fn apply_stored_properties(&mut self) {
        let (Some(props), Some(pool)) = (&self.res.properties, self.sched.pool_mut()) else {
            return;
        };
        if let Err(e) = pool.replace_properties(props) {
            tracing::warn!(error = %e, "stored resource properties do not fit the inventory");
        }
    }

    /// Replace the inventory by `r` (`flux resource reload`): only while no
    /// job holds resources, and with every rank's hostname unchanged, so
    /// joined nodes keep their ranks.
    fn reload(&mut self, r: ResourceSet) -> Result<(), Error> {
        let Some(pool) = self.sched.pool() else {
            return Err(Error::Unavailable(
                "the resource inventory is not defined yet: waiting for nodes to join".into(),
            ));
        };
        let held = self.jobs.values().filter(|a| a.r.is_some()).count();
        if held > 0 {
            return Err(Error::WrongState(format!(
                "cannot reload resources while {held} job(s) hold resources"
            )));
        }
        let old = pool.inventory();
        for node in r.nodes() {
            let was = old.node(node.rank()).and_then(|n| n.hostname());
            if was.is_none() || was != node.hostname() {
                return Err(Error::Invalid(format!(
                    "rank {} ({}) is not a rank of the current inventory with that hostname",
                    node.rank(),
                    node.hostname().unwrap_or("no hostname")
                )));
            }
        }
        tracing::info!(nodes = r.nnodes(), "resources reloaded");
        let props = r.properties().clone();
        self.sched.define(r);
        // The new R's properties replace any changed at run time.
        if let Some(pool) = self.sched.pool_mut() {
            let obj: Map<String, Value> = props
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.to_string())))
                .collect();
            let obj = Value::Object(obj);
            let _ = pool.replace_properties(&obj);
            self.store_properties(obj);
        }
        // Every target is down in the new pool: the delta from nothing brings
        // the schedulable ones up again.
        self.res.up = IdSet::new();
        self.post_resource(ResourceEvent::ResourceDefine {
            method: "reload".into(),
        });
        self.mark_held();
        self.out.resched = true;
        Ok(())
    }

    /// Heartbeat bookkeeping: silence past the torpid timeout posts `torpid`,
    /// a heartbeat from a torpid node posts `lively`.
    pub(super) fn heartbeat(&mut self, ranks: &[u32], now: Instant) {
        let lively = self.res.heard_from(ranks, now);
        if !lively.is_empty() {
            self.post_resource(ResourceEvent::Lively { idset: lively });
        }
    }

    /// Periodic check for torpid nodes, and for lost ones: a node silent
    /// past the lost timeout (never before its exec service fenced itself)
    /// fails its running jobs, once.
    pub(super) fn check_torpid(&mut self) {
        let limit =
            std::time::Duration::from_secs_f64(self.config.resource.torpid_timeout.max(0.1));
        let now = Instant::now();
        let torpid = self.res.newly_silent(self.nodes.online(), now, limit);
        if !torpid.is_empty() {
            tracing::warn!(ranks = %torpid, "nodes stopped heartbeating");
            self.post_resource(ResourceEvent::Torpid { idset: torpid });
        }
        let lost_after = self.config.resource.liveness().lost_after().max(0.1);
        let lost = self.res.newly_lost(now, lost_after);
        if !lost.is_empty() {
            tracing::warn!(ranks = %lost, silent = lost_after, "nodes lost");
            let why = format!("no heartbeat for {lost_after}s from");
            self.fail_jobs_on(&lost, &why);
            self.detach_jobs_led_on(&lost);
        }
    }
}

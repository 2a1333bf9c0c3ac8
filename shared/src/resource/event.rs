//! RFC 44 resource events, typed, converted from and to [`Event`].
//!
//! Context keys are written in the order flux-core 0.88 writes them, so an
//! emitted event is byte-identical to flux's (see the golden journal).

use serde_json::{Map, Value};

use crate::eventlog::{Context, Event, Member};
use crate::hostlist::Hostlist;
use crate::idset::IdSet;

/// Why an event is not a well-formed RFC 44 event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceEventError {
    /// A required key is missing or has the wrong type or value.
    #[error("{event} event: context {key:?} {problem}")]
    BadContext {
        /// The event name.
        event: String,
        /// The offending key (`context` for the object itself).
        key: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// How a `drain` applies to targets that are already drained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Overwrite {
    /// 0: leave drained targets that have a reason as they are.
    Keep,
    /// 1: replace the reason, keep the original timestamp.
    Reason,
    /// 2: replace the reason and the timestamp.
    ReasonAndTimestamp,
}

impl Overwrite {
    /// The integer written in the event.
    pub fn code(self) -> i64 {
        match self {
            Overwrite::Keep => 0,
            Overwrite::Reason => 1,
            Overwrite::ReasonAndTimestamp => 2,
        }
    }

    /// The mode for an integer code.
    pub fn from_code(code: i64) -> Option<Overwrite> {
        match code {
            0 => Some(Overwrite::Keep),
            1 => Some(Overwrite::Reason),
            2 => Some(Overwrite::ReasonAndTimestamp),
            _ => None,
        }
    }
}

/// One RFC 44 event, without its timestamp.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceEvent {
    /// The resource service (re)started.
    Restart {
        /// Valid execution targets.
        ranks: IdSet,
        /// Targets online at the time.
        online: IdSet,
        /// Rank-to-hostname map, one host per rank.
        nodelist: Hostlist,
    },
    /// The instance R was defined (`method`: configuration,
    /// dynamic-discovery, reload, job-info, kvs).
    ResourceDefine {
        /// How R was obtained.
        method: String,
    },
    /// R's expiration changed.
    ResourceUpdate {
        /// New expiration, seconds since the epoch.
        expiration: f64,
    },
    /// Targets drained.
    Drain {
        /// Drained ranks.
        idset: IdSet,
        /// Hostnames of those ranks, in rank order.
        nodelist: Hostlist,
        /// Why; absent when none was given.
        reason: Option<String>,
        /// How already-drained targets are treated.
        overwrite: Overwrite,
    },
    /// Targets undrained.
    Undrain {
        /// Undrained ranks.
        idset: IdSet,
        /// Hostnames of those ranks, in rank order.
        nodelist: Hostlist,
        /// Why; absent when none was given.
        reason: Option<String>,
    },
    /// Targets came online.
    Online {
        /// The ranks.
        idset: IdSet,
    },
    /// Targets went offline.
    Offline {
        /// The ranks.
        idset: IdSet,
    },
    /// Targets stopped answering but are not yet offline.
    Torpid {
        /// The ranks.
        idset: IdSet,
    },
    /// Torpid targets answer again.
    Lively {
        /// The ranks.
        idset: IdSet,
    },
    /// Older journal entries were dropped.
    Truncate,
    /// An event this version does not know (kept for forward compatibility).
    Other {
        /// Its name.
        name: String,
    },
}

struct Ctx<'a> {
    event: &'a str,
    context: Option<&'a Context>,
}

impl<'a> Ctx<'a> {
    fn bad(&self, key: &str, problem: impl Into<String>) -> ResourceEventError {
        ResourceEventError::BadContext {
            event: self.event.to_string(),
            key: key.to_string(),
            problem: problem.into(),
        }
    }

    /// A member read in place from the context text.
    fn get(&self, key: &str) -> Option<Member<'a>> {
        self.context.and_then(|c| c.member(key))
    }

    fn string(&self, key: &str) -> Result<&'a str, ResourceEventError> {
        match self.get(key) {
            None => Err(self.bad(key, "is required")),
            Some(v) => v
                .as_str()
                .ok_or_else(|| self.bad(key, format!("must be a string, not {v}"))),
        }
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, ResourceEventError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.string(key).map(|s| Some(s.to_string())),
        }
    }

    fn idset(&self, key: &str) -> Result<IdSet, ResourceEventError> {
        IdSet::parse(self.string(key)?).map_err(|e| self.bad(key, e.to_string()))
    }

    fn hostlist(&self, key: &str) -> Result<Hostlist, ResourceEventError> {
        Hostlist::parse(self.string(key)?).map_err(|e| self.bad(key, e.to_string()))
    }
}

fn object(pairs: Vec<(&str, Value)>) -> Option<Context> {
    let map: Map<String, Value> = pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    Some(Context::from(map))
}

impl ResourceEvent {
    /// The RFC 44 event name.
    pub fn name(&self) -> &str {
        match self {
            ResourceEvent::Restart { .. } => "restart",
            ResourceEvent::ResourceDefine { .. } => "resource-define",
            ResourceEvent::ResourceUpdate { .. } => "resource-update",
            ResourceEvent::Drain { .. } => "drain",
            ResourceEvent::Undrain { .. } => "undrain",
            ResourceEvent::Online { .. } => "online",
            ResourceEvent::Offline { .. } => "offline",
            ResourceEvent::Torpid { .. } => "torpid",
            ResourceEvent::Lively { .. } => "lively",
            ResourceEvent::Truncate => "truncate",
            ResourceEvent::Other { name } => name,
        }
    }

    /// Is this event kept in the persistent (KVS) resource eventlog, as
    /// flux-core does: drain, undrain, resource-define, resource-update.
    pub fn is_persistent(&self) -> bool {
        matches!(
            self,
            ResourceEvent::ResourceDefine { .. }
                | ResourceEvent::ResourceUpdate { .. }
                | ResourceEvent::Drain { .. }
                | ResourceEvent::Undrain { .. }
        )
    }

    /// Decode an eventlog entry.
    pub fn from_event(event: &Event) -> Result<ResourceEvent, ResourceEventError> {
        let c = Ctx {
            event: &event.name,
            context: event.context.as_ref(),
        };
        Ok(match event.name.as_str() {
            "restart" => ResourceEvent::Restart {
                ranks: c.idset("ranks")?,
                online: c.idset("online")?,
                nodelist: c.hostlist("nodelist")?,
            },
            "resource-define" => ResourceEvent::ResourceDefine {
                method: c.string("method")?.to_string(),
            },
            "resource-update" => match c.get("expiration").and_then(|m| m.as_f64()) {
                Some(expiration) if expiration >= 0.0 => {
                    ResourceEvent::ResourceUpdate { expiration }
                }
                _ => return Err(c.bad("expiration", "must be a non-negative number")),
            },
            "drain" => {
                // Logs from before the overwrite key existed replay as
                // overwrite=1, as flux-core's replay does.
                let overwrite = match c.get("overwrite") {
                    None => Overwrite::Reason,
                    Some(v) => v
                        .as_i64()
                        .and_then(Overwrite::from_code)
                        .ok_or_else(|| c.bad("overwrite", format!("must be 0, 1 or 2, not {v}")))?,
                };
                ResourceEvent::Drain {
                    idset: c.idset("idset")?,
                    nodelist: c.hostlist("nodelist")?,
                    reason: c.opt_string("reason")?,
                    overwrite,
                }
            }
            "undrain" => ResourceEvent::Undrain {
                idset: c.idset("idset")?,
                nodelist: c.hostlist("nodelist")?,
                reason: c.opt_string("reason")?,
            },
            "online" => ResourceEvent::Online {
                idset: c.idset("idset")?,
            },
            "offline" => ResourceEvent::Offline {
                idset: c.idset("idset")?,
            },
            "torpid" => ResourceEvent::Torpid {
                idset: c.idset("idset")?,
            },
            "lively" => ResourceEvent::Lively {
                idset: c.idset("idset")?,
            },
            "truncate" => ResourceEvent::Truncate,
            other => ResourceEvent::Other {
                name: other.to_string(),
            },
        })
    }

    /// Encode as an eventlog entry at `timestamp`.
    pub fn to_event(&self, timestamp: f64) -> Event {
        let s = |v: &IdSet| Value::from(v.to_string());
        let context = match self {
            ResourceEvent::Restart {
                ranks,
                online,
                nodelist,
            } => object(vec![
                ("ranks", s(ranks)),
                ("online", s(online)),
                ("nodelist", Value::from(nodelist.encode())),
            ]),
            ResourceEvent::ResourceDefine { method } => {
                object(vec![("method", Value::from(method.as_str()))])
            }
            ResourceEvent::ResourceUpdate { expiration } => {
                let v = if expiration.fract() == 0.0 && *expiration < 9.0e15 {
                    Value::from(*expiration as i64)
                } else {
                    Value::from(*expiration)
                };
                object(vec![("expiration", v)])
            }
            ResourceEvent::Drain {
                idset,
                nodelist,
                reason,
                overwrite,
            } => {
                let mut v = vec![
                    ("idset", s(idset)),
                    ("nodelist", Value::from(nodelist.encode())),
                ];
                if let Some(r) = reason {
                    v.push(("reason", Value::from(r.as_str())));
                }
                v.push(("overwrite", Value::from(overwrite.code())));
                object(v)
            }
            ResourceEvent::Undrain {
                idset,
                nodelist,
                reason,
            } => {
                let mut v = vec![
                    ("idset", s(idset)),
                    ("nodelist", Value::from(nodelist.encode())),
                ];
                if let Some(r) = reason {
                    v.push(("reason", Value::from(r.as_str())));
                }
                // flux-core 0.88 writes overwrite 0 on undrain too.
                v.push(("overwrite", Value::from(0)));
                object(v)
            }
            ResourceEvent::Online { idset }
            | ResourceEvent::Offline { idset }
            | ResourceEvent::Torpid { idset }
            | ResourceEvent::Lively { idset } => object(vec![("idset", s(idset))]),
            ResourceEvent::Truncate | ResourceEvent::Other { .. } => None,
        };
        Event {
            timestamp,
            name: self.name().into(),
            context,
        }
    }
}

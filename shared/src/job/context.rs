//! Typed reads of event context keys, with errors naming event and key.
//!
//! Scalars are read from the context text in place ([`Member`]); only the
//! event that takes a whole object (`jobspec-update`) builds the context's
//! map, so replaying a log costs little more than reading it.

use serde_json::{Map, Value};

use super::TransitionError;
use crate::eventlog::{Context, Event, Member};

/// Borrowed view of one event's context for typed key lookups.
pub(super) struct Ctx<'a> {
    event: &'a str,
    context: Option<&'a Context>,
}

impl<'a> Ctx<'a> {
    pub(super) fn of(event: &'a Event) -> Self {
        Ctx {
            event: &event.name,
            context: event.context.as_ref(),
        }
    }

    fn bad(&self, key: &str, problem: impl Into<String>) -> TransitionError {
        TransitionError::BadContext {
            event: self.event.to_string(),
            key: key.to_string(),
            problem: problem.into(),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<Member<'a>> {
        self.context.and_then(|c| c.member(key))
    }

    /// The whole context; an error when it is missing.
    pub(super) fn context(&self) -> Result<&'a Context, TransitionError> {
        self.context
            .ok_or_else(|| self.bad("context", "is required for this event"))
    }

    /// The whole context object as a map; an error when it is missing.
    pub(super) fn object(&self) -> Result<&'a Map<String, Value>, TransitionError> {
        self.context().map(Context::as_map)
    }

    pub(super) fn int(&self, key: &str, lo: i64, hi: i64) -> Result<i64, TransitionError> {
        match self.get(key) {
            None => Err(self.bad(key, "is required")),
            Some(v) => self.int_in(key, v, lo, hi),
        }
    }

    pub(super) fn opt_int(
        &self,
        key: &str,
        lo: i64,
        hi: i64,
    ) -> Result<Option<i64>, TransitionError> {
        self.get(key)
            .map(|v| self.int_in(key, v, lo, hi))
            .transpose()
    }

    fn int_in(&self, key: &str, v: Member<'a>, lo: i64, hi: i64) -> Result<i64, TransitionError> {
        match v.as_i64() {
            Some(n) if (lo..=hi).contains(&n) => Ok(n),
            Some(n) => Err(self.bad(key, format!("is {n}, outside {lo}..={hi}"))),
            None => Err(self.bad(key, format!("must be an integer, not {v}"))),
        }
    }

    pub(super) fn number(&self, key: &str) -> Result<f64, TransitionError> {
        match self.get(key) {
            None => Err(self.bad(key, "is required")),
            Some(v) => match v.as_f64() {
                Some(n) if n >= 0.0 => Ok(n),
                _ => Err(self.bad(key, format!("must be a non-negative number, not {v}"))),
            },
        }
    }

    pub(super) fn string(&self, key: &str) -> Result<&'a str, TransitionError> {
        match self.get(key) {
            None => Err(self.bad(key, "is required")),
            Some(v) => self.string_in(key, v),
        }
    }

    pub(super) fn opt_string(&self, key: &str) -> Result<Option<&'a str>, TransitionError> {
        self.get(key).map(|v| self.string_in(key, v)).transpose()
    }

    fn string_in(&self, key: &str, v: Member<'a>) -> Result<&'a str, TransitionError> {
        v.as_str()
            .ok_or_else(|| self.bad(key, format!("must be a string, not {v}")))
    }

    pub(super) fn boolean(&self, key: &str) -> Result<bool, TransitionError> {
        match self.get(key) {
            None => Err(self.bad(key, "is required")),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.bad(key, format!("must be true or false, not {v}"))),
        }
    }

    pub(super) fn string_array(&self, key: &str) -> Result<Vec<&'a str>, TransitionError> {
        let arr = match self.get(key).map(|m| m.value()) {
            None => return Err(self.bad(key, "is required")),
            Some(Value::Array(a)) => a,
            Some(v) => return Err(self.bad(key, format!("must be an array of strings, not {v}"))),
        };
        arr.iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| self.bad(key, format!("must hold only strings, not {v}")))
            })
            .collect()
    }
}

//! Typed reads of event context keys, with errors naming event and key.

use serde_json::{Map, Value};

use super::TransitionError;
use crate::eventlog::Event;

/// Borrowed view of one event's context for typed key lookups.
pub(super) struct Ctx<'a> {
    event: &'a str,
    map: Option<&'a Map<String, Value>>,
}

impl<'a> Ctx<'a> {
    pub(super) fn of(event: &'a Event) -> Self {
        Ctx {
            event: &event.name,
            map: event.context.as_ref(),
        }
    }

    fn bad(&self, key: &str, problem: impl Into<String>) -> TransitionError {
        TransitionError::BadContext {
            event: self.event.to_string(),
            key: key.to_string(),
            problem: problem.into(),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key))
    }

    /// The whole context object; an error when it is missing.
    pub(super) fn object(&self) -> Result<&'a Map<String, Value>, TransitionError> {
        self.map
            .ok_or_else(|| self.bad("context", "is required for this event"))
    }

    pub(super) fn int(&self, key: &str, lo: i64, hi: i64) -> Result<i64, TransitionError> {
        match self.get(key) {
            None => Err(self.bad(key, "is required")),
            Some(v) => match v.as_i64() {
                Some(n) if (lo..=hi).contains(&n) => Ok(n),
                Some(n) => Err(self.bad(key, format!("is {n}, outside {lo}..={hi}"))),
                None => Err(self.bad(key, format!("must be an integer, not {v}"))),
            },
        }
    }

    pub(super) fn opt_int(
        &self,
        key: &str,
        lo: i64,
        hi: i64,
    ) -> Result<Option<i64>, TransitionError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.int(key, lo, hi).map(Some),
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
            Some(v) => v
                .as_str()
                .ok_or_else(|| self.bad(key, format!("must be a string, not {v}"))),
        }
    }

    pub(super) fn opt_string(&self, key: &str) -> Result<Option<&'a str>, TransitionError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.string(key).map(Some),
        }
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
        let arr = match self.get(key) {
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

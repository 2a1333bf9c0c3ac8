//! Bounds on what users may make the job manager keep: the text of notes
//! and reasons, memos, and each user's number of active jobs.
//!
//! Every one of these ends up in an eventlog that every listing or watcher
//! reads back, so an unbounded one lets a single user make every reader's
//! replies too large (one user's 3.5 MB cancel notes once made `jobs -A`
//! fail for all). They are refused with a message, never cut silently,
//! except for text from exec services, which is cut to the bound.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::error::Error;

/// Longest exception or cancel note, drain reason or queue stop reason, in bytes.
pub const NOTE_MAX: usize = 4096;

/// Largest memo, serialized: per request, and the job's merged memo in total.
pub const MEMO_MAX: usize = 64 * 1024;

/// Most memo bytes one job's eventlog takes over its life: each memo is an
/// event kept forever, so a job's memo set and cleared again and again
/// would grow its eventlog (and every reader's replies) without bound.
pub const MEMO_HISTORY_MAX: u64 = 1 << 20;

/// Refuse a memo of `size` bytes on a job whose eventlog already holds
/// `logged` bytes of memos, past [`MEMO_HISTORY_MAX`].
pub fn check_memo_history(logged: u64, size: usize) -> Result<(), Error> {
    if logged.saturating_add(size as u64) > MEMO_HISTORY_MAX {
        return Err(Error::Exhausted(format!(
            "the job's memos in its eventlog would reach {} bytes, over the limit of \
             {MEMO_HISTORY_MAX} bytes a job may post over its life",
            logged.saturating_add(size as u64)
        )));
    }
    Ok(())
}

/// Refuse `text` (what it is: "exception note", "drain reason") when it is
/// longer than [`NOTE_MAX`].
pub fn check_note(what: &str, text: &str) -> Result<(), Error> {
    if text.len() > NOTE_MAX {
        return Err(Error::Invalid(format!(
            "{what} is {} bytes, over the limit of {NOTE_MAX} bytes",
            text.len()
        )));
    }
    Ok(())
}

/// `text` cut to at most [`NOTE_MAX`] bytes, on a character boundary.
pub fn cut_note(mut text: String) -> String {
    if text.len() > NOTE_MAX {
        let mut end = NOTE_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Refuse a memo update whose text is larger than [`MEMO_MAX`].
pub fn check_memo_request(text: &str) -> Result<(), Error> {
    if text.len() > MEMO_MAX {
        return Err(Error::Invalid(format!(
            "memo is {} bytes, over the limit of {MEMO_MAX} bytes",
            text.len()
        )));
    }
    Ok(())
}

/// Refuse `update` when the job's memo `current` with it merged in (as
/// flux-core merges: objects key by key, null deletes) would serialize to
/// more than [`MEMO_MAX`] bytes.
pub fn check_memo_total(
    current: &Map<String, Value>,
    update: &Map<String, Value>,
) -> Result<(), Error> {
    let mut merged = current.clone();
    merge(&mut merged, update);
    let size = Value::Object(merged).to_string().len();
    if size > MEMO_MAX {
        return Err(Error::Invalid(format!(
            "the job's memo would be {size} bytes, over the limit of {MEMO_MAX} bytes"
        )));
    }
    Ok(())
}

fn merge(target: &mut Map<String, Value>, update: &Map<String, Value>) {
    for (key, value) in update {
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(inner) => {
                let slot = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(t) = slot {
                    merge(t, inner);
                }
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
}

/// Active jobs per user, kept as jobs enter and leave, so a submit checks
/// its user's limit in O(1).
#[derive(Debug, Default)]
pub struct ActiveCounts {
    by_user: HashMap<u32, u64>,
}

impl ActiveCounts {
    /// Active jobs of `userid`.
    pub fn of(&self, userid: u32) -> u64 {
        self.by_user.get(&userid).copied().unwrap_or(0)
    }

    /// A job of `userid` became active (submitted or recovered).
    pub fn added(&mut self, userid: u32) {
        *self.by_user.entry(userid).or_default() += 1;
    }

    /// A job of `userid` became inactive.
    pub fn removed(&mut self, userid: u32) {
        if let Some(n) = self.by_user.get_mut(&userid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.by_user.remove(&userid);
            }
        }
    }

    /// Refuse one more job of `userid` when it already holds `limit` (`None`: no limit).
    pub fn admit(&self, userid: u32, limit: Option<u64>) -> Result<(), Error> {
        match limit {
            Some(max) if self.of(userid) >= max => Err(Error::Exhausted(format!(
                "user {userid} has reached the limit of {max} active jobs"
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn notes_past_the_bound_are_refused_or_cut() {
        assert!(check_note("note", &"x".repeat(NOTE_MAX)).is_ok());
        let err = check_note("exception note", &"x".repeat(NOTE_MAX + 1)).unwrap_err();
        assert!(
            err.to_string().contains("over the limit of 4096 bytes"),
            "{err}"
        );
        let cut = cut_note("é".repeat(NOTE_MAX));
        assert!(cut.len() <= NOTE_MAX && cut.chars().all(|c| c == 'é'));
    }

    #[test]
    fn the_merged_memo_is_bounded() {
        let half = "x".repeat(MEMO_MAX / 2);
        let mut memo = Map::new();
        let a = json!({"a": half}).as_object().unwrap().clone();
        check_memo_total(&memo, &a).unwrap();
        merge(&mut memo, &a);
        // Replacing a key does not add to the total; a second key does.
        check_memo_total(&memo, &a).unwrap();
        let b = json!({"b": half}).as_object().unwrap().clone();
        assert!(check_memo_total(&memo, &b).is_err());
        let drop_a = json!({"a": null, "b": half}).as_object().unwrap().clone();
        check_memo_total(&memo, &drop_a).unwrap();
        check_memo_history(MEMO_HISTORY_MAX - 10, 10).unwrap();
        let e = check_memo_history(MEMO_HISTORY_MAX - 10, 11).unwrap_err();
        assert!(e.to_string().contains("over the limit"), "{e}");
    }

    #[test]
    fn active_counts_refuse_past_the_limit() {
        let mut c = ActiveCounts::default();
        c.added(7);
        c.added(7);
        assert!(c.admit(7, Some(3)).is_ok());
        c.added(7);
        let err = c.admit(7, Some(3)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "user 7 has reached the limit of 3 active jobs"
        );
        assert!(c.admit(7, None).is_ok());
        c.removed(7);
        assert!(c.admit(7, Some(3)).is_ok());
        assert_eq!(c.of(8), 0);
    }
}

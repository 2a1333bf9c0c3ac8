//! The job's memo object, merged from its `memo` events.
//!
//! flux-core merges with `jpath_update()` then `jpath_clear_null()`: objects
//! merge key by key, other values replace, and null deletes. The update is
//! read straight from the context text, so a key is copied only when it is
//! new to the memo and nothing is built for the update itself.
//!
//! Only listings read the memo; the state machine never does. So updates
//! are kept as their text until the memo is first read, and a replay of a
//! log full of memo events does not merge them one by one into a map that
//! may never be looked at. Once read, the memo takes each update at once.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::eventlog::{Context, decode_key, raw_members, raw_to_value};

/// Text of updates kept unmerged at most; beyond it they are merged, which
/// bounds the memory a job that is never listed can hold.
const MAX_PENDING: usize = 64 * 1024;

/// A job's memo: the merged object, built when first read.
#[derive(Debug, Clone, Default)]
pub(super) struct Memo {
    /// The merged object, once read.
    merged: OnceLock<Map<String, Value>>,
    /// Updates not merged yet, in event order, one per line (context text
    /// holds no raw newline); cleared by the first update after a read.
    pending: String,
}

impl Memo {
    /// Take one `memo` event's context.
    pub(super) fn update(&mut self, update: &Context) {
        if self.merged.get().is_none() && self.pending.len() < MAX_PENDING {
            self.pending.push_str(update.as_json());
            self.pending.push('\n');
            return;
        }
        // Merges what is pending, unless a read already did.
        self.get();
        self.pending = String::new();
        if let Some(map) = self.merged.get_mut() {
            merge(map, update.as_json());
        }
    }

    /// The merged object.
    pub(super) fn get(&self) -> &Map<String, Value> {
        self.merged.get_or_init(|| {
            let mut map = Map::new();
            for update in self.pending.lines() {
                merge(&mut map, update);
            }
            map
        })
    }
}

impl PartialEq for Memo {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// Merge `update`, the canonical text of a JSON object (an event context or
/// an object inside one), into `target`.
fn merge(target: &mut Map<String, Value>, update: &str) {
    for (key, raw) in raw_members(update) {
        let key = decode_key(key);
        if raw == "null" {
            target.remove(key.as_ref());
        } else if raw.starts_with('{') {
            let slot = match target.get_mut(key.as_ref()) {
                Some(slot) => slot,
                None => target.entry(key.into_owned()).or_insert(Value::Null),
            };
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Value::Object(inner) = slot {
                merge(inner, raw);
            }
        } else {
            let value = raw_to_value(raw);
            match target.get_mut(key.as_ref()) {
                Some(slot) => *slot = value,
                None => {
                    target.insert(key.into_owned(), value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::eventlog::Context;

    #[test]
    fn reading_early_late_or_never_gives_the_same_memo() {
        // Enough updates to pass the unmerged limit.
        let count = MAX_PENDING as i64 / 20 + 10;
        let updates: Vec<Context> = (0..count)
            .map(|i| {
                let Value::Object(m) = json!({"n": i, "t": {format!("k{}", i % 3): i}}) else {
                    unreachable!()
                };
                Context::from(m)
            })
            .collect();
        let last = count - 1;
        let want = json!({"n": last, "t": {
            format!("k{}", last % 3): last,
            format!("k{}", (last - 1) % 3): last - 1,
            format!("k{}", (last - 2) % 3): last - 2,
        }});
        for read_at in [0, 1, 5, count as usize - 3, usize::MAX] {
            let mut memo = Memo::default();
            for (i, update) in updates.iter().enumerate() {
                if i == read_at {
                    memo.get();
                }
                memo.update(update);
            }
            assert_eq!(Value::Object(memo.get().clone()), want, "read at {read_at}");
        }
    }

    #[test]
    fn merges_as_jpath_update_then_clear_null() {
        let mut memo = Map::new();
        let steps = [
            json!({"a": 1, "t": {"x": 1, "y": [1, "s"]}, "s": "é\n"}),
            json!({"t": {"x": null, "z": {}}, "a": null, "b": 2.5}),
            json!({"s": {"deep": {"n": -3}}, "b": null, "t": 7, "q\"k": true}),
            json!({"nothing": null}),
        ];
        for step in steps {
            let Value::Object(update) = step else {
                unreachable!()
            };
            merge(&mut memo, Context::from(update).as_json());
        }
        assert_eq!(
            Value::Object(memo),
            json!({"t": 7, "s": {"deep": {"n": -3}}, "q\"k": true})
        );
    }
}

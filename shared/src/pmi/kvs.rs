//! The key-value space of one job as one node's PMI server sees it.
//!
//! As flux-core's job shell keeps it: keys put since the last barrier are
//! pending and invisible to gets until the barrier has exchanged them across
//! the job's nodes; keys set by the server itself (`PMI_process_mapping`,
//! `flux.taskmap`) and `local::` keys are node-local and never exchanged.

use std::collections::{BTreeMap, HashMap};

/// Keys and values exchanged at a barrier.
pub type Dict = BTreeMap<String, String>;

/// Bytes of keys and values one node holds for a job, so that a task
/// cannot grow the exec service without bound.
pub const MAX_BYTES: usize = 64 << 20;

/// A put refused because the space is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// One job's key-value space on one node.
#[derive(Debug, Default)]
pub struct Kvs {
    locals: HashMap<String, String>,
    pending: Dict,
    global: HashMap<String, String>,
    bytes: usize,
}

impl Kvs {
    /// Set a node-local key (never exchanged).
    pub fn preset(&mut self, key: &str, value: &str) {
        self.bytes += key.len() + value.len();
        self.locals.insert(key.to_string(), value.to_string());
    }

    /// A task's put: pending until the next barrier, or local for `local::` keys.
    pub fn put(&mut self, key: String, value: String) -> Result<(), Full> {
        let size = key.len() + value.len();
        if self.bytes + size > MAX_BYTES {
            return Err(Full);
        }
        self.bytes += size;
        if key.starts_with("local::") {
            self.locals.insert(key, value);
        } else {
            self.pending.insert(key, value);
        }
        Ok(())
    }

    /// A task's get: local keys first, then those exchanged.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.locals
            .get(key)
            .or_else(|| self.global.get(key))
            .map(String::as_str)
    }

    /// The keys put since the last barrier, to exchange.
    pub fn take_pending(&mut self) -> Dict {
        let pending = std::mem::take(&mut self.pending);
        // Counted again when they come back in the union.
        let size: usize = pending.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.bytes = self.bytes.saturating_sub(size);
        pending
    }

    /// The union of every node's pending keys, once exchanged.
    pub fn commit(&mut self, merged: Dict) {
        for (k, v) in merged {
            self.bytes += k.len() + v.len();
            self.global.insert(k, v);
        }
    }
}

//! RFC 29 hostlists: ordered lists of host names with a compact string form.

/// Why a hostlist string could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    /// Placeholder until the module is written.
    #[error("invalid hostlist {input:?}: {reason}")]
    Invalid { input: String, reason: String },
}

/// An ordered list of host names (duplicates allowed), kept compressed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hostlist {
    // representation is the implementer's choice: runs of prefix/number/width/suffix
}

impl Hostlist {
    /// The empty list.
    pub fn new() -> Self {
        Self::default()
    }
    /// Decode an RFC 29 string.
    pub fn parse(_s: &str) -> Result<Self, HostlistError> {
        unimplemented!()
    }
    /// Encode compressed, in list order, as flux-core does.
    pub fn encode(&self) -> String {
        unimplemented!()
    }
    /// Number of hosts (with duplicates).
    pub fn len(&self) -> usize {
        unimplemented!()
    }
    /// True when the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The host at index `i`.
    pub fn nth(&self, _i: usize) -> Option<String> {
        unimplemented!()
    }
    /// Index of the first occurrence of `host`.
    pub fn find(&self, _host: &str) -> Option<usize> {
        unimplemented!()
    }
    /// Append one host name (validated).
    pub fn push(&mut self, _host: &str) -> Result<(), HostlistError> {
        unimplemented!()
    }
    /// Append every host of `other`, in order.
    pub fn append(&mut self, _other: &Hostlist) {
        unimplemented!()
    }
    /// Remove every occurrence of each host of `other`; returns how many were removed.
    pub fn delete(&mut self, _other: &Hostlist) -> usize {
        unimplemented!()
    }
    /// Hosts in order, expanded.
    pub fn iter(&self) -> impl Iterator<Item = String> + '_ {
        std::iter::empty()
    }
    /// Sort by prefix then number.
    pub fn sort(&mut self) {
        unimplemented!()
    }
    /// Sort and remove duplicates.
    pub fn uniq(&mut self) {
        unimplemented!()
    }
    /// Hosts in either list, sorted and unique.
    pub fn union(&self, _other: &Hostlist) -> Hostlist {
        unimplemented!()
    }
    /// Hosts in both lists, sorted and unique.
    pub fn intersect(&self, _other: &Hostlist) -> Hostlist {
        unimplemented!()
    }
    /// Hosts of `self` not in `other`, order kept.
    pub fn minus(&self, _other: &Hostlist) -> Hostlist {
        unimplemented!()
    }
}

// Also to provide: Display (= encode), FromStr, FromIterator of names,
// serde as the string form.

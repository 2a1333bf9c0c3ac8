//! RFC 22 idsets: sets of non-negative integers with a compact string form.
//!
//! Stored as sorted, disjoint, non-adjacent inclusive ranges, so memory is
//! proportional to the number of ranges, not members.

/// Largest id flux-core accepts (universe size limit 2^31).
pub const MAX_ID: u32 = i32::MAX as u32;

/// Why an idset string could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdSetError {
    /// Placeholder until the module is written.
    #[error("invalid idset {input:?}: {reason}")]
    Invalid { input: String, reason: String },
}

/// Flags for [`IdSet::encode`], as flux-core's IDSET_FLAG_RANGE/BRACKETS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncodeFlags {
    /// Compress runs of two or more consecutive ids into `lo-hi`.
    pub range: bool,
    /// Wrap in `[...]` when the set has more than one id.
    pub brackets: bool,
}

/// A set of ids (ranks, cores, gpus) kept as ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct IdSet {
    ranges: Vec<(u32, u32)>,
}

impl IdSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }
    /// The ids `lo..=hi`; empty when `hi < lo`.
    pub fn from_range(_lo: u32, _hi: u32) -> Self {
        unimplemented!()
    }
    /// Decode an RFC 22 string (strict, as flux-core decodes).
    pub fn parse(_s: &str) -> Result<Self, IdSetError> {
        unimplemented!()
    }
    /// Encode with the given flags.
    pub fn encode(&self, _flags: EncodeFlags) -> String {
        unimplemented!()
    }
    /// Number of ids.
    pub fn count(&self) -> u64 {
        unimplemented!()
    }
    /// True when there are no ids.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    /// Smallest id.
    pub fn first(&self) -> Option<u32> {
        unimplemented!()
    }
    /// Largest id.
    pub fn last(&self) -> Option<u32> {
        unimplemented!()
    }
    /// The id at position `n` in ascending order.
    pub fn nth(&self, _n: u64) -> Option<u32> {
        unimplemented!()
    }
    /// Is `id` a member.
    pub fn contains(&self, _id: u32) -> bool {
        unimplemented!()
    }
    /// Add one id.
    pub fn insert(&mut self, _id: u32) {
        unimplemented!()
    }
    /// Add `lo..=hi`.
    pub fn insert_range(&mut self, _lo: u32, _hi: u32) {
        unimplemented!()
    }
    /// Remove one id.
    pub fn remove(&mut self, _id: u32) {
        unimplemented!()
    }
    /// Ids in either set.
    pub fn union(&self, _other: &IdSet) -> IdSet {
        unimplemented!()
    }
    /// Ids in `self` but not in `other`.
    pub fn difference(&self, _other: &IdSet) -> IdSet {
        unimplemented!()
    }
    /// Ids in both sets.
    pub fn intersection(&self, _other: &IdSet) -> IdSet {
        unimplemented!()
    }
    /// Is every id of `self` in `other`.
    pub fn is_subset(&self, _other: &IdSet) -> bool {
        unimplemented!()
    }
    /// The inclusive ranges, ascending.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }
    /// Ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(lo, hi)| lo..=hi)
    }
}

// Also to provide: Display (canonical RANGE form, no brackets), FromStr,
// FromIterator<u32>, Extend<u32>, serde Serialize/Deserialize as the string form.

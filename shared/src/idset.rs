//! RFC 22 idsets: sets of non-negative integers with a compact string form.
//!
//! Stored as sorted, disjoint, non-adjacent inclusive ranges, so memory is
//! proportional to the number of ranges, not members, and every set operation
//! is a linear merge over ranges.
//!
//! Decoding follows flux-core's `idset_decode()`: strict about order, leading
//! zeros, brackets and `lo-hi` with `hi > lo`, but lenient about empty
//! elements (`1,,2`, `,`), which flux-core skips.

use std::fmt;
use std::str::FromStr;

use smallvec::{SmallVec, smallvec};

/// Largest id flux-core accepts (universe size limit 2^31).
pub const MAX_ID: u32 = i32::MAX as u32;

/// Why an idset string could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdSetError {
    /// The string breaks the RFC 22 grammar; `reason` says what and where.
    #[error("invalid idset {input:?}: {reason}")]
    Invalid {
        /// The whole string that was being decoded.
        input: String,
        /// What is wrong, naming the offending text and its byte position.
        reason: String,
    },
}

impl IdSetError {
    fn invalid(input: &str, reason: impl Into<String>) -> Self {
        IdSetError::Invalid {
            input: input.to_string(),
            reason: reason.into(),
        }
    }
}

/// Flags for [`IdSet::encode`], as flux-core's IDSET_FLAG_RANGE/BRACKETS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncodeFlags {
    /// Compress runs of two or more consecutive ids into `lo-hi`.
    pub range: bool,
    /// Wrap in `[...]` when the set has more than one id.
    pub brackets: bool,
}

impl EncodeFlags {
    /// Every id listed, no brackets (`1,2,3`).
    pub const PLAIN: EncodeFlags = EncodeFlags {
        range: false,
        brackets: false,
    };
    /// Runs compressed, no brackets (`1-3`): the canonical form.
    pub const RANGE: EncodeFlags = EncodeFlags {
        range: true,
        brackets: false,
    };
    /// Every id listed, bracketed when more than one (`[1,2,3]`).
    pub const BRACKETS: EncodeFlags = EncodeFlags {
        range: false,
        brackets: true,
    };
    /// Runs compressed and bracketed when more than one id (`[1-3]`).
    pub const RANGE_BRACKETS: EncodeFlags = EncodeFlags {
        range: true,
        brackets: true,
    };
}

/// A set of ids (ranks, cores, gpus) kept as ranges.
///
/// Any `u32` may be inserted, but only ids up to [`MAX_ID`] survive an
/// encode/decode round trip, as in flux-core.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct IdSet {
    // Invariant: sorted by lo, lo <= hi, and each lo > previous hi + 1.
    ranges: Ranges,
}

/// The ranges of a set: inline up to two, as most sets are (a node's
/// cores, a job's ranks), so that a set costs no allocation of its own.
type Ranges = SmallVec<[(u32, u32); 2]>;

/// Append a range to an ascending range list, coalescing with the last range
/// when they touch or overlap. `lo` must be >= the last range's `lo`.
fn push_merge(out: &mut Ranges, lo: u32, hi: u32) {
    if let Some(last) = out.last_mut()
        && u64::from(lo) <= u64::from(last.1) + 1
    {
        last.1 = last.1.max(hi);
        return;
    }
    out.push((lo, hi));
}

/// Parse one decimal id at byte offset `pos` of `input`.
fn parse_id(input: &str, text: &str, pos: usize) -> Result<u32, IdSetError> {
    if text.is_empty() {
        return Err(IdSetError::invalid(
            input,
            format!("missing id at position {pos}"),
        ));
    }
    // One pass over the bytes: fast on million-id plain lists.
    let mut value: u64 = 0;
    for (i, b) in text.bytes().enumerate() {
        if !b.is_ascii_digit() {
            let c = text[i..].chars().next().unwrap_or('?');
            return Err(IdSetError::invalid(
                input,
                format!("unexpected character {c:?} at position {}", pos + i),
            ));
        }
        // Saturate: anything past MAX_ID is reported below, not wrapped.
        value = (value * 10 + u64::from(b - b'0')).min(u64::from(MAX_ID) + 1);
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err(IdSetError::invalid(
            input,
            format!("id {text:?} at position {pos} has a leading zero"),
        ));
    }
    if value > u64::from(MAX_ID) {
        return Err(IdSetError::invalid(
            input,
            format!("id {text} at position {pos} is larger than {MAX_ID}"),
        ));
    }
    Ok(value as u32)
}

impl IdSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ids `lo..=hi`; empty when `hi < lo`.
    pub fn from_range(lo: u32, hi: u32) -> Self {
        if hi < lo {
            return Self::new();
        }
        IdSet {
            ranges: smallvec![(lo, hi)],
        }
    }

    /// Build from inclusive ranges in any order; overlaps are merged and
    /// ranges with `hi < lo` are ignored.
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let mut v: Vec<(u32, u32)> = ranges.into_iter().filter(|(lo, hi)| lo <= hi).collect();
        v.sort_unstable();
        let mut out = Ranges::with_capacity(v.len());
        for (lo, hi) in v {
            push_merge(&mut out, lo, hi);
        }
        IdSet { ranges: out }
    }

    /// Build from ids in any order, duplicates allowed: one sort and one
    /// merge, so a million ids cost a few milliseconds where inserting them
    /// one by one would move the range vector once per id.
    pub fn from_ids(ids: impl IntoIterator<Item = u32>) -> Self {
        let mut v: Vec<u32> = ids.into_iter().collect();
        v.sort_unstable();
        Self::from_sorted_ids(v)
    }

    /// Build from ids already ascending (duplicates allowed) in one pass.
    pub(crate) fn from_sorted_ids(ids: impl IntoIterator<Item = u32>) -> Self {
        let mut out = Ranges::new();
        for id in ids {
            push_merge(&mut out, id, id);
        }
        IdSet { ranges: out }
    }

    /// Add `id`, which must not be below the largest member: O(1), for
    /// loops that visit ids in ascending order.
    pub(crate) fn push_ascending(&mut self, id: u32) {
        debug_assert!(self.last().is_none_or(|last| last <= id));
        push_merge(&mut self.ranges, id, id);
    }

    /// Decode an RFC 22 string (strict, as flux-core decodes).
    pub fn parse(s: &str) -> Result<Self, IdSetError> {
        let (body, offset) = match (s.strip_prefix('['), s.ends_with(']')) {
            (Some(inner), true) => (&inner[..inner.len() - 1], 1),
            (Some(_), false) => return Err(IdSetError::invalid(s, "'[' is never closed by ']'")),
            (None, true) => {
                return Err(IdSetError::invalid(
                    s,
                    format!("unmatched ']' at position {}", s.len() - 1),
                ));
            }
            (None, false) => (s, 0),
        };
        let mut ranges = Ranges::new();
        let mut pos = offset;
        for elem in body.split(',') {
            let start = pos;
            pos += elem.len() + 1;
            // flux-core skips empty elements (`1,,2`, `,`): keep that leniency.
            if elem.is_empty() {
                continue;
            }
            let (lo, hi) = match elem.split_once('-') {
                None => {
                    let id = parse_id(s, elem, start)?;
                    (id, id)
                }
                Some((a, b)) => {
                    let lo = parse_id(s, a, start)?;
                    let hi = parse_id(s, b, start + a.len() + 1)?;
                    if hi <= lo {
                        return Err(IdSetError::invalid(
                            s,
                            format!(
                                "range {elem:?} at position {start}: range end must be greater than start"
                            ),
                        ));
                    }
                    (lo, hi)
                }
            };
            if let Some(&(_, prev)) = ranges.last()
                && lo <= prev
            {
                return Err(IdSetError::invalid(
                    s,
                    format!(
                        "{elem:?} at position {start} is not above the previous id {prev}: ids must be ascending and unique"
                    ),
                ));
            }
            push_merge(&mut ranges, lo, hi);
        }
        Ok(IdSet { ranges })
    }

    /// Encode with the given flags.
    pub fn encode(&self, flags: EncodeFlags) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let bracket = flags.brackets && self.count() > 1;
        if bracket {
            out.push('[');
        }
        for (i, &(lo, hi)) in self.ranges.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            // Writing to a String cannot fail.
            if lo == hi {
                let _ = write!(out, "{lo}");
            } else if flags.range {
                let _ = write!(out, "{lo}-{hi}");
            } else {
                for id in lo..=hi {
                    if id != lo {
                        out.push(',');
                    }
                    let _ = write!(out, "{id}");
                }
            }
        }
        if bracket {
            out.push(']');
        }
        out
    }

    /// Number of ids.
    pub fn count(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u64::from(hi - lo) + 1)
            .sum()
    }

    /// True when there are no ids.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Smallest id.
    pub fn first(&self) -> Option<u32> {
        self.ranges.first().map(|r| r.0)
    }

    /// Largest id.
    pub fn last(&self) -> Option<u32> {
        self.ranges.last().map(|r| r.1)
    }

    /// The id at position `n` in ascending order.
    pub fn nth(&self, mut n: u64) -> Option<u32> {
        for &(lo, hi) in &self.ranges {
            let len = u64::from(hi - lo) + 1;
            if n < len {
                return Some(lo + n as u32);
            }
            n -= len;
        }
        None
    }

    /// The smallest member greater than `id`, as flux-core's `idset_next()`.
    pub fn next_after(&self, id: u32) -> Option<u32> {
        let next = id.checked_add(1)?;
        let i = self.ranges.partition_point(|&(_, hi)| hi < next);
        self.ranges.get(i).map(|&(lo, _)| lo.max(next))
    }

    /// Is `id` a member.
    pub fn contains(&self, id: u32) -> bool {
        let i = self.ranges.partition_point(|&(_, hi)| hi < id);
        self.ranges.get(i).is_some_and(|&(lo, _)| lo <= id)
    }

    /// Add one id. Each call may move the ranges above `id`, so building a
    /// set from many ids in no particular order belongs to
    /// [`IdSet::from_ids`] (or `collect`), not a loop of inserts.
    pub fn insert(&mut self, id: u32) {
        self.insert_range(id, id);
    }

    /// Add `lo..=hi`.
    pub fn insert_range(&mut self, lo: u32, hi: u32) {
        if hi < lo {
            return;
        }
        // First range that touches or follows lo, and first that lies wholly
        // beyond hi + 1: everything in between merges with the new range.
        let i = self
            .ranges
            .partition_point(|&(_, h)| u64::from(h) + 1 < u64::from(lo));
        let j = self
            .ranges
            .partition_point(|&(l, _)| u64::from(l) <= u64::from(hi) + 1);
        if i == j {
            self.ranges.insert(i, (lo, hi));
        } else {
            let merged = (lo.min(self.ranges[i].0), hi.max(self.ranges[j - 1].1));
            self.ranges[i] = merged;
            self.ranges.drain(i + 1..j);
        }
    }

    /// Remove one id.
    pub fn remove(&mut self, id: u32) {
        self.remove_range(id, id);
    }

    /// Remove `lo..=hi`.
    pub fn remove_range(&mut self, lo: u32, hi: u32) {
        if hi < lo {
            return;
        }
        let i = self.ranges.partition_point(|&(_, h)| h < lo);
        let j = self.ranges.partition_point(|&(l, _)| l <= hi);
        if i >= j {
            return;
        }
        let mut keep = Ranges::new();
        let (first_lo, _) = self.ranges[i];
        let (_, last_hi) = self.ranges[j - 1];
        if first_lo < lo {
            keep.push((first_lo, lo - 1));
        }
        if last_hi > hi {
            keep.push((hi + 1, last_hi));
        }
        self.ranges.drain(i..j);
        self.ranges.insert_many(i, keep);
    }

    /// Ids in either set.
    pub fn union(&self, other: &IdSet) -> IdSet {
        let (a, b) = (&self.ranges, &other.ranges);
        let mut out = Ranges::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let take_a = j >= b.len() || (i < a.len() && a[i].0 <= b[j].0);
            let (lo, hi) = if take_a {
                i += 1;
                a[i - 1]
            } else {
                j += 1;
                b[j - 1]
            };
            push_merge(&mut out, lo, hi);
        }
        IdSet { ranges: out }
    }

    /// Ids in `self` but not in `other`.
    pub fn difference(&self, other: &IdSet) -> IdSet {
        let b = &other.ranges;
        let mut out = Ranges::with_capacity(self.ranges.len());
        let mut j = 0;
        for &(lo, hi) in &self.ranges {
            // Skip subtrahend ranges wholly below this one.
            while j < b.len() && b[j].1 < lo {
                j += 1;
            }
            let mut cur = u64::from(lo);
            let mut k = j;
            while k < b.len() && b[k].0 <= hi {
                if u64::from(b[k].0) > cur {
                    out.push((cur as u32, b[k].0 - 1));
                }
                cur = cur.max(u64::from(b[k].1) + 1);
                k += 1;
            }
            if cur <= u64::from(hi) {
                out.push((cur as u32, hi));
            }
            // A subtrahend range reaching past hi may cut the next range too.
            j = k.saturating_sub(1).max(j);
        }
        IdSet { ranges: out }
    }

    /// Ids in both sets.
    pub fn intersection(&self, other: &IdSet) -> IdSet {
        let (a, b) = (&self.ranges, &other.ranges);
        let mut out = Ranges::new();
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            let lo = a[i].0.max(b[j].0);
            let hi = a[i].1.min(b[j].1);
            if lo <= hi {
                out.push((lo, hi));
            }
            if a[i].1 < b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        IdSet { ranges: out }
    }

    /// Add every id of `other` to `self` (flux-core `idset_add`).
    pub fn add(&mut self, other: &IdSet) {
        if other.ranges.len() <= 2 {
            for &(lo, hi) in &other.ranges {
                self.insert_range(lo, hi);
            }
        } else {
            *self = self.union(other);
        }
    }

    /// Remove every id of `other` from `self` (flux-core `idset_subtract`).
    pub fn subtract(&mut self, other: &IdSet) {
        if other.ranges.len() <= 2 {
            for &(lo, hi) in &other.ranges {
                self.remove_range(lo, hi);
            }
        } else {
            *self = self.difference(other);
        }
    }

    /// Is every id of `self` in `other`.
    pub fn is_subset(&self, other: &IdSet) -> bool {
        let b = &other.ranges;
        let mut j = 0;
        for &(lo, hi) in &self.ranges {
            while j < b.len() && b[j].1 < lo {
                j += 1;
            }
            // Ranges are non-adjacent, so one range of `other` must cover it.
            match b.get(j) {
                Some(&(blo, bhi)) if blo <= lo && hi <= bhi => {}
                _ => return false,
            }
        }
        true
    }

    /// Do the sets share no id.
    pub fn is_disjoint(&self, other: &IdSet) -> bool {
        self.intersection(other).is_empty()
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

impl fmt::Display for IdSet {
    /// The canonical form: ranges, no brackets (`0-3,7`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode(EncodeFlags::RANGE))
    }
}

impl FromStr for IdSet {
    type Err = IdSetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IdSet::parse(s)
    }
}

impl FromIterator<u32> for IdSet {
    /// Ids in any order: sorted and merged once (see [`IdSet::from_ids`]).
    fn from_iter<T: IntoIterator<Item = u32>>(iter: T) -> Self {
        IdSet::from_ids(iter)
    }
}

impl Extend<u32> for IdSet {
    /// The new ids are sorted and merged on their own, then joined to the set
    /// in one linear union, so one `extend` costs O(n + m log m).
    fn extend<T: IntoIterator<Item = u32>>(&mut self, iter: T) {
        let more = IdSet::from_ids(iter);
        self.add(&more);
    }
}

impl<'a> IntoIterator for &'a IdSet {
    type Item = u32;
    type IntoIter = Box<dyn Iterator<Item = u32> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl serde::Serialize for IdSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.encode(EncodeFlags::RANGE))
    }
}

impl<'de> serde::Deserialize<'de> for IdSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = IdSet;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 22 idset string such as \"0-3,7\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IdSet, E> {
                IdSet::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> IdSet {
        IdSet::parse(s).unwrap()
    }

    #[test]
    fn error_names_the_problem_and_place() {
        let e = IdSet::parse("1-1").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid idset \"1-1\": range \"1-1\" at position 0: range end must be greater than start"
        );
        let e = IdSet::parse("0,1x").unwrap_err().to_string();
        assert!(e.contains("unexpected character 'x' at position 3"), "{e}");
        let e = IdSet::parse("2147483648").unwrap_err().to_string();
        assert!(e.contains("larger than 2147483647"), "{e}");
    }

    #[test]
    fn insert_and_remove_keep_ranges_canonical() {
        let mut s = set("1-3,7-9");
        s.insert(5);
        assert_eq!(s.to_string(), "1-3,5,7-9");
        s.insert(4);
        s.insert(6);
        assert_eq!(s.ranges(), &[(1, 9)]);
        s.remove(5);
        assert_eq!(s.to_string(), "1-4,6-9");
        s.remove_range(0, 100);
        assert!(s.is_empty());
        s.insert_range(u32::MAX - 1, u32::MAX);
        s.insert(u32::MAX - 2);
        assert_eq!(s.ranges(), &[(u32::MAX - 2, u32::MAX)]);
    }

    #[test]
    fn difference_with_long_subtrahend_cuts_several_ranges() {
        let a = set("0-2,4-6,8-10");
        assert_eq!(a.difference(&set("1-9")).to_string(), "0,10");
        assert_eq!(a.difference(&set("2,4,6,8")).to_string(), "0-1,5,9-10");
    }

    #[test]
    fn serde_uses_the_string_form() {
        let s = set("[0-3,7]");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"0-3,7\"");
        let back: IdSet = serde_json::from_str("\"0-3,7\"").unwrap();
        assert_eq!(back, s);
        assert!(serde_json::from_str::<IdSet>("\"3,2\"").is_err());
    }

    #[test]
    fn next_after_walks_members() {
        let s = set("1,5-6");
        assert_eq!(s.next_after(0), Some(1));
        assert_eq!(s.next_after(1), Some(5));
        assert_eq!(s.next_after(5), Some(6));
        assert_eq!(s.next_after(6), None);
    }
}

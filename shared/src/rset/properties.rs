//! RFC 20 properties: `name -> ranks`.
//!
//! A name may carry an `@suffix` (e.g. `amd-mi50@gpu`). RFC 20 reserves it
//! for schedulers; flux-core keeps the whole string as the property name,
//! so `amd-mi50@gpu` and `amd-mi50` are two distinct properties and a
//! constraint matches the literal name. We do the same.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{ResourceSet, RsetError};
use crate::idset::IdSet;

/// Characters flux-core refuses in a property name inside R.
///
/// RFC 20 also lists `!`; flux-core's `property_string_invalid` does not,
/// and R written by flux-core may hold it, so it is accepted here too.
const ILLEGAL: &[char] = &['^', '&', '\'', '"', '`', '|', '(', ')'];

/// Check a property name; the error names the first illegal character.
pub fn validate_property_name(name: &str) -> Result<(), RsetError> {
    if name.is_empty() {
        return Err(RsetError::Property("property name is empty".into()));
    }
    if let Some(c) = name.chars().find(|c| ILLEGAL.contains(c)) {
        return Err(RsetError::Property(format!(
            "invalid character '{c}' in property \"{name}\""
        )));
    }
    Ok(())
}

/// Apply an `execution.properties` object, validating all before applying any.
pub(crate) fn assign_json(rs: &mut ResourceSet, v: &Value) -> Result<(), RsetError> {
    let obj = v
        .as_object()
        .ok_or_else(|| RsetError::Property("properties must be an object".into()))?;
    let mut parsed = Vec::with_capacity(obj.len());
    for (name, val) in obj {
        let Some(s) = val.as_str() else {
            return Err(RsetError::Property(format!(
                "properties value '{val}' not a string"
            )));
        };
        validate_property_name(name)?;
        let ids = IdSet::parse(s).map_err(|_| {
            RsetError::Property(format!(
                "invalid idset '{s}' specified for property \"{name}\""
            ))
        })?;
        parsed.push((name.clone(), ids));
    }
    for (_, ids) in &parsed {
        rs.check_known_ranks(ids)?;
    }
    for (name, ids) in parsed {
        rs.set_property(&name, &ids)?;
    }
    Ok(())
}

impl ResourceSet {
    /// Property name -> ranks holding it.
    pub fn properties(&self) -> &BTreeMap<String, IdSet> {
        &self.properties
    }

    /// Apply an RFC 20 `properties` object (`name -> idset string`); all
    /// entries are checked before any is applied.
    pub fn assign_properties(&mut self, v: &Value) -> Result<(), RsetError> {
        assign_json(self, v)
    }

    /// Names of the properties of `rank`, sorted.
    pub fn node_properties(&self, rank: u32) -> Vec<&str> {
        self.properties
            .iter()
            .filter(|(_, ids)| ids.contains(rank))
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// Does `rank` hold property `name` (the literal name, `@suffix` included).
    pub fn has_property(&self, rank: u32, name: &str) -> bool {
        self.properties
            .get(name)
            .is_some_and(|ids| ids.contains(rank))
    }

    /// Add property `name` to `ranks` (added to any ranks already holding it).
    /// Every rank must be in the set.
    pub fn set_property(&mut self, name: &str, ranks: &IdSet) -> Result<(), RsetError> {
        validate_property_name(name)?;
        self.check_known_ranks(ranks)?;
        if ranks.is_empty() {
            return Ok(());
        }
        let entry = self.properties.entry(name.to_owned()).or_default();
        *entry = entry.union(ranks);
        Ok(())
    }

    /// Apply `NAME[:RANKS]` as `flux R set-property` does (no RANKS = all ranks).
    pub fn set_property_spec(&mut self, spec: &str) -> Result<(), RsetError> {
        let (name, ranks) = match spec.split_once(':') {
            Some((name, ranks)) => {
                let ids = IdSet::parse(ranks).map_err(|_| {
                    RsetError::Property(format!(
                        "invalid idset '{ranks}' specified for property \"{name}\""
                    ))
                })?;
                (name, ids)
            }
            None => (spec, self.ranks()),
        };
        self.set_property(name, &ranks)
    }

    /// Remove property `name` from `ranks`.
    pub fn remove_property(&mut self, name: &str, ranks: &IdSet) {
        if let Some(ids) = self.properties.get_mut(name) {
            *ids = ids.difference(ranks);
            if ids.is_empty() {
                self.properties.remove(name);
            }
        }
    }

    pub(crate) fn check_known_ranks(&self, ranks: &IdSet) -> Result<(), RsetError> {
        let unknown = ranks.difference(&self.ranks());
        if unknown.is_empty() {
            return Ok(());
        }
        let which = if unknown.count() == 1 {
            "rank"
        } else {
            "ranks"
        };
        Err(RsetError::Property(format!(
            "{which} {} not found in target resource list",
            super::range_str(&unknown)
        )))
    }

    /// Keep only the properties of ranks in `ranks` (drop emptied names).
    pub(crate) fn restrict_properties(&mut self, ranks: &IdSet) {
        self.properties.retain(|_, ids| {
            *ids = ids.intersection(ranks);
            !ids.is_empty()
        });
    }
}

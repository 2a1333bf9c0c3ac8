//! RFC 31 job constraints, matched against the nodes of a resource set.
//!
//! A constraint is evaluated as set algebra over ranks rather than node by
//! node, so filtering a large set costs a few idset operations.

use std::collections::HashSet;

use serde_json::Value;

use super::{ResourceSet, RsetError};
use crate::hostlist::Hostlist;
use crate::idset::IdSet;

/// Characters refused in a property query; `^` is allowed there as "not".
const QUERY_ILLEGAL: &[char] = &['!', '&', '\'', '"', '`', '|', '(', ')'];

/// A parsed RFC 31 constraint.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// `{}`: matches every node.
    Any,
    /// Node has every listed property (`^name`: must not have it). A node's
    /// hostname also counts as one of its properties (flux-core).
    Properties(Vec<String>),
    /// Node's hostname is in the list.
    Hostlist(Hostlist),
    /// Node's rank is in the set.
    Ranks(IdSet),
    /// All of the constraints (`and: []` matches everything).
    And(Vec<Constraint>),
    /// Any of the constraints (`or: []` matches everything, as flux-core).
    Or(Vec<Constraint>),
    /// Not all of the constraints (`not: []` matches nothing).
    Not(Vec<Constraint>),
}

fn err(msg: impl Into<String>) -> RsetError {
    RsetError::Constraint(msg.into())
}

impl Constraint {
    /// Parse a constraint object, e.g. `{"properties":["ssd"]}`.
    pub fn from_json(v: &Value) -> Result<Self, RsetError> {
        let obj = v
            .as_object()
            .ok_or_else(|| err("constraint must be JSON object"))?;
        let mut parts = Vec::with_capacity(obj.len());
        for (op, values) in obj {
            parts.push(Self::operator(op, values)?);
        }
        // Several operators in one object are ANDed (RFC 31 digest of
        // flux-core's behaviour).
        Ok(match parts.len() {
            0 => Constraint::Any,
            1 => parts.pop().unwrap_or(Constraint::Any),
            _ => Constraint::And(parts),
        })
    }

    /// Parse constraint JSON text.
    pub fn parse(s: &str) -> Result<Self, RsetError> {
        let v: Value = serde_json::from_str(s).map_err(|e| err(e.to_string()))?;
        Self::from_json(&v)
    }

    fn operator(op: &str, values: &Value) -> Result<Self, RsetError> {
        let arr = values
            .as_array()
            .ok_or_else(|| err(format!("{op} operator value must be an array")))?;
        match op {
            "properties" => {
                let mut props = Vec::with_capacity(arr.len());
                for v in arr {
                    let s = v
                        .as_str()
                        .ok_or_else(|| err("non-string property specified"))?;
                    if let Some(c) = s.chars().find(|c| QUERY_ILLEGAL.contains(c)) {
                        return Err(err(format!("invalid character '{c}' in property \"{s}\"")));
                    }
                    props.push(s.to_owned());
                }
                Ok(Constraint::Properties(props))
            }
            "hostlist" => {
                let mut hl = Hostlist::new();
                for v in arr {
                    let part = v
                        .as_str()
                        .and_then(|s| Hostlist::parse(s).ok())
                        .ok_or_else(|| err(format!("invalid hostlist {v} in {values}")))?;
                    hl.append(&part);
                }
                Ok(Constraint::Hostlist(hl))
            }
            "ranks" => {
                let mut ids = IdSet::new();
                for v in arr {
                    let part = v
                        .as_str()
                        .and_then(|s| IdSet::parse(s).ok())
                        .ok_or_else(|| err(format!("invalid idset {v} in {values}")))?;
                    ids = ids.union(&part);
                }
                Ok(Constraint::Ranks(ids))
            }
            "and" | "or" | "not" => {
                let subs = arr
                    .iter()
                    .map(Constraint::from_json)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(match op {
                    "and" => Constraint::And(subs),
                    "or" => Constraint::Or(subs),
                    _ => Constraint::Not(subs),
                })
            }
            _ => Err(err(format!("unknown constraint operator: {op}"))),
        }
    }

    /// The ranks of `rs` whose nodes satisfy the constraint.
    pub fn matching_ranks(&self, rs: &ResourceSet) -> IdSet {
        let all = rs.ranks();
        self.eval(rs, &all)
    }

    fn eval(&self, rs: &ResourceSet, all: &IdSet) -> IdSet {
        match self {
            Constraint::Any => all.clone(),
            Constraint::Properties(props) => {
                let mut acc = all.clone();
                for p in props {
                    let (name, negate) = match p.strip_prefix('^') {
                        Some(rest) => (rest, true),
                        None => (p.as_str(), false),
                    };
                    let mut has = rs.properties.get(name).cloned().unwrap_or_default();
                    for n in &rs.nodes {
                        if n.hostname.as_deref() == Some(name) {
                            has.insert(n.rank);
                        }
                    }
                    acc = if negate {
                        acc.difference(&has)
                    } else {
                        acc.intersection(&has)
                    };
                }
                acc
            }
            Constraint::Hostlist(hl) => {
                let hosts: HashSet<String> = hl.iter().collect();
                IdSet::from_sorted_ids(
                    rs.nodes
                        .iter()
                        .filter(|n| n.hostname.as_ref().is_some_and(|h| hosts.contains(h)))
                        .map(|n| n.rank),
                )
            }
            Constraint::Ranks(ids) => ids.intersection(all),
            Constraint::And(subs) => subs
                .iter()
                .fold(all.clone(), |acc, c| acc.intersection(&c.eval(rs, all))),
            Constraint::Or(subs) if subs.is_empty() => all.clone(),
            Constraint::Or(subs) => subs
                .iter()
                .fold(IdSet::new(), |acc, c| acc.union(&c.eval(rs, all))),
            Constraint::Not(subs) => {
                let and = subs
                    .iter()
                    .fold(all.clone(), |acc, c| acc.intersection(&c.eval(rs, all)));
                all.difference(&and)
            }
        }
    }
}

impl ResourceSet {
    /// A new set with only the nodes that satisfy `constraint` (properties kept).
    pub fn copy_constraint(&self, constraint: &Constraint) -> ResourceSet {
        self.copy_ranks(&constraint.matching_ranks(self))
    }
}

#[cfg(test)]
mod requires_tests {
    use super::*;
    use crate::rset::constraint_query::requires_constraint;

    fn rs() -> ResourceSet {
        let mut r = ResourceSet::parse(
            r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-1"}}],"nodelist":["n[0-3]"]}}"#,
        )
        .unwrap();
        r.set_property("ssd", &IdSet::parse("1-2").unwrap())
            .unwrap();
        r.set_property("gpu", &IdSet::parse("2-3").unwrap())
            .unwrap();
        r
    }

    /// `--requires` queries select the nodes flux's would.
    #[test]
    fn queries_match_the_nodes_flux_selects() {
        // (requires options, matching ranks)
        let cases: &[(&[&str], &str)] = &[
            (&["ssd"], "1-2"),
            (&["ssd,gpu"], "2"),
            (&["ssd", "gpu"], "2"),
            (&["-ssd"], "0,3"),
            (&["^gpu"], "0-1"),
            (&["ssd", "host:n[2-3]"], "2"),
            (&["rank:0-1"], "0-1"),
            (&["host:n0 or rank:1"], "0-1"),
            (&["ssd or gpu"], "1-3"),
            (&["not (ssd or gpu)"], "0"),
            (&["(ssd or rank:0) and -gpu"], "0-1"),
            (&["n3"], "3"),
            (&["host:n[0-3] -ssd -gpu"], "0"),
        ];
        for (req, ranks) in cases {
            let v = requires_constraint(req).unwrap();
            let c = Constraint::from_json(&v).unwrap();
            assert_eq!(c.matching_ranks(&rs()).to_string(), *ranks, "{req:?}");
        }
    }
}

//! Set algebra and rank selection, with flux-core's rlist semantics.
//!
//! As in flux-core, operations that build a new set (`diff`, `union`,
//! `intersect`, `copy_ranks`) start from an empty list: the result has no
//! starttime, expiration or nslots; the opaque `scheduling` key comes from
//! the first operand (the second for `union` when the first has none),
//! and only when the result is not empty. In-place operations (`append`,
//! `add`, `remove_ranks`, `remap`, `rerank`) keep the receiver's times.

use std::collections::HashMap;

use super::{Node, ResourceSet, RsetError, check_disjoint};
use crate::hostlist::Hostlist;
use crate::idset::IdSet;

impl ResourceSet {
    /// Resources of `self` not in `other` (rank by rank; emptied ranks dropped).
    pub fn diff(&self, other: &ResourceSet) -> ResourceSet {
        let mut nodes = Vec::with_capacity(self.nodes.len());
        let mut j = 0;
        for a in &self.nodes {
            while j < other.nodes.len() && other.nodes[j].rank < a.rank {
                j += 1;
            }
            match other.nodes.get(j) {
                Some(b) if b.rank == a.rank => {
                    let n = Node {
                        rank: a.rank,
                        hostname: a.hostname.clone(),
                        cores: a.cores.difference(&b.cores),
                        gpus: a.gpus.difference(&b.gpus),
                    };
                    if !n.is_empty() {
                        nodes.push(n);
                    }
                }
                _ => nodes.push(a.clone()),
            }
        }
        let mut out = ResourceSet {
            nodes,
            properties: self.properties.clone(),
            ..ResourceSet::default()
        };
        out.restrict_properties(&out.ranks());
        out.scheduling = self.scheduling.clone();
        out
    }

    /// Resources in either set. Where a rank survives `self - other` it keeps
    /// `self`'s hostname; otherwise it takes `other`'s (as flux-core's
    /// diff-then-append does).
    ///
    /// One merge of the two node lists: the same result as `self - other`
    /// followed by appending `other`, without the first list built in between.
    pub fn union(&self, other: &ResourceSet) -> ResourceSet {
        let mut nodes = Vec::with_capacity(self.nodes.len() + other.nodes.len());
        // Ranks of `self` that keep something of their own: its properties
        // stay on these only, as they would through `diff`.
        let mut surviving = IdSet::new();
        let mut b = other.nodes.iter().peekable();
        for a in &self.nodes {
            while let Some(y) = b.next_if(|y| y.rank < a.rank) {
                nodes.push(y.clone());
            }
            let Some(y) = b.next_if(|y| y.rank == a.rank) else {
                surviving.push_ascending(a.rank);
                nodes.push(a.clone());
                continue;
            };
            let covered = a.cores.is_subset(&y.cores) && a.gpus.is_subset(&y.gpus);
            if !covered {
                surviving.push_ascending(a.rank);
            }
            nodes.push(Node {
                rank: a.rank,
                hostname: match &a.hostname {
                    Some(name) if !covered => Some(name.clone()),
                    _ => y.hostname.clone(),
                },
                cores: a.cores.union(&y.cores),
                gpus: a.gpus.union(&y.gpus),
            });
        }
        nodes.extend(b.cloned());
        let mut out = ResourceSet {
            nodes,
            properties: self.properties.clone(),
            ..ResourceSet::default()
        };
        out.restrict_properties(&surviving);
        for (name, ids) in &other.properties {
            let e = out.properties.entry(name.clone()).or_default();
            *e = e.union(ids);
        }
        out.scheduling = self.scheduling.clone().or_else(|| other.scheduling.clone());
        out
    }

    /// Resources in both sets. Ranks whose hostnames differ do not intersect;
    /// properties are dropped (flux-core builds fresh nodes here).
    pub fn intersect(&self, other: &ResourceSet) -> ResourceSet {
        let mut nodes = Vec::new();
        let mut i = 0;
        for b in &other.nodes {
            while i < self.nodes.len() && self.nodes[i].rank < b.rank {
                i += 1;
            }
            let Some(a) = self.nodes.get(i).filter(|a| a.rank == b.rank) else {
                continue;
            };
            if let (Some(ha), Some(hb)) = (&a.hostname, &b.hostname)
                && ha != hb
            {
                continue;
            }
            let n = Node {
                rank: a.rank,
                hostname: a.hostname.clone(),
                cores: a.cores.intersection(&b.cores),
                gpus: a.gpus.intersection(&b.gpus),
            };
            if !n.is_empty() {
                nodes.push(n);
            }
        }
        let mut out = ResourceSet {
            nodes,
            ..ResourceSet::default()
        };
        if !out.is_empty() {
            out.scheduling = self.scheduling.clone();
        }
        out
    }

    /// Merge `other` into `self`; fails, changing nothing, if any core or gpu
    /// of a rank is in both.
    pub fn append(&mut self, other: &ResourceSet) -> Result<(), RsetError> {
        let mut i = 0;
        for b in &other.nodes {
            while i < self.nodes.len() && self.nodes[i].rank < b.rank {
                i += 1;
            }
            if let Some(a) = self.nodes.get(i).filter(|a| a.rank == b.rank) {
                check_disjoint(a, b)?;
            }
        }
        self.merge_disjoint(other);
        Ok(())
    }

    /// Merge `other` into `self`, overlap allowed (resources already present
    /// are not added twice).
    pub fn add(&mut self, other: &ResourceSet) {
        let extra = other.diff(self);
        self.merge_disjoint(&extra);
    }

    /// Merge assuming no overlap: ids are unioned, an existing hostname kept,
    /// properties unioned, `scheduling` kept or taken from `other`.
    fn merge_disjoint(&mut self, other: &ResourceSet) {
        let mut merged = Vec::with_capacity(self.nodes.len() + other.nodes.len());
        let mut a = std::mem::take(&mut self.nodes).into_iter().peekable();
        let mut b = other.nodes.iter().peekable();
        loop {
            let order = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => x.rank.cmp(&y.rank),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => break,
            };
            match order {
                std::cmp::Ordering::Less => merged.extend(a.next()),
                std::cmp::Ordering::Greater => merged.extend(b.next().cloned()),
                std::cmp::Ordering::Equal => {
                    if let (Some(mut x), Some(y)) = (a.next(), b.next()) {
                        x.cores = x.cores.union(&y.cores);
                        x.gpus = x.gpus.union(&y.gpus);
                        if x.hostname.is_none() {
                            x.hostname = y.hostname.clone();
                        }
                        merged.push(x);
                    }
                }
            }
        }
        self.nodes = merged;
        for (name, ids) in &other.properties {
            let e = self.properties.entry(name.clone()).or_default();
            *e = e.union(ids);
        }
        if self.scheduling.is_none() {
            self.scheduling = other.scheduling.clone();
        }
    }

    /// A new set with only the ranks in `ranks` (unknown ranks ignored).
    pub fn copy_ranks(&self, ranks: &IdSet) -> ResourceSet {
        let nodes: Vec<Node> = self
            .nodes
            .iter()
            .filter(|n| ranks.contains(n.rank))
            .cloned()
            .collect();
        let mut out = ResourceSet {
            nodes,
            properties: self.properties.clone(),
            ..ResourceSet::default()
        };
        out.restrict_properties(&out.ranks());
        if !out.is_empty() {
            out.scheduling = self.scheduling.clone();
        }
        out
    }

    /// Remove the ranks in `ranks`; returns how many were present.
    pub fn remove_ranks(&mut self, ranks: &IdSet) -> usize {
        let before = self.nodes.len();
        self.nodes.retain(|n| !ranks.contains(n.rank));
        let removed = before - self.nodes.len();
        if removed > 0 {
            let left = self.ranks();
            self.restrict_properties(&left);
        }
        removed
    }

    /// Same as [`copy_ranks`](Self::copy_ranks) (`flux R decode --include`).
    pub fn include(&self, ranks: &IdSet) -> ResourceSet {
        self.copy_ranks(ranks)
    }

    /// A copy without the ranks in `ranks` (`flux R decode --exclude`).
    pub fn exclude(&self, ranks: &IdSet) -> ResourceSet {
        let mut out = self.clone();
        out.remove_ranks(ranks);
        out
    }

    /// A new set with only the ranks of `hosts`; every host must be present.
    pub fn include_hosts(&self, hosts: &str) -> Result<ResourceSet, RsetError> {
        Ok(self.copy_ranks(&self.hosts_to_ranks(hosts)?))
    }

    /// A copy without the ranks of `hosts`; every host must be present.
    pub fn exclude_hosts(&self, hosts: &str) -> Result<ResourceSet, RsetError> {
        Ok(self.exclude(&self.hosts_to_ranks(hosts)?))
    }

    /// The ranks of the hosts in RFC 29 hostlist `hosts` (a host may own
    /// several ranks); fails naming the hosts that are not in the set.
    pub fn hosts_to_ranks(&self, hosts: &str) -> Result<IdSet, RsetError> {
        let hl = Hostlist::parse(hosts)
            .map_err(|_| RsetError::Hosts("Hostlist cannot be decoded".into()))?;
        let mut by_host: HashMap<&str, Vec<u32>> = HashMap::new();
        for n in &self.nodes {
            if let Some(h) = n.hostname.as_deref() {
                by_host.entry(h).or_default().push(n.rank);
            }
        }
        // Hosts come in any order: gather the ranks, then sort them once.
        let mut ids = Vec::new();
        let mut missing = Hostlist::new();
        for host in hl.iter() {
            match by_host.get(host.as_str()) {
                Some(ranks) => ids.extend_from_slice(ranks),
                None => {
                    let _ = missing.push(&host);
                }
            }
        }
        if !missing.is_empty() {
            return Err(RsetError::Hosts(format!(
                "invalid hosts: {}",
                missing.encode()
            )));
        }
        Ok(IdSet::from_ids(ids))
    }

    /// Renumber ranks 0..n-1 in rank order and core ids 0..count-1 on each
    /// rank; gpu ids are kept (flux-core's `noremap` list holds `gpu`).
    pub fn remap(&mut self) {
        let mut map = HashMap::with_capacity(self.nodes.len());
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let new = i as u32;
            map.insert(n.rank, new);
            n.rank = new;
            let count = n.cores.count();
            if count > 0
                && !(n.cores.first() == Some(0) && n.cores.last() == Some(count as u32 - 1))
            {
                n.cores = IdSet::from_range(0, count as u32 - 1);
            }
        }
        self.renumber_properties(&map);
    }

    /// Renumber ranks by the order of `hosts` (first host becomes rank 0),
    /// as `flux R rerank`. The host count must equal the node count.
    pub fn rerank(&mut self, hosts: &str) -> Result<(), RsetError> {
        let hl = Hostlist::parse(hosts)
            .map_err(|e| RsetError::Hosts(format!("hostlist_decode: {hosts}: {e}")))?;
        let n = self.nodes.len();
        if hl.len() > n {
            return Err(RsetError::Hosts(format!(
                "Number of hosts ({}) is greater than node count ({n})",
                hl.len()
            )));
        }
        if hl.len() < n {
            return Err(RsetError::Hosts(format!(
                "Number of hosts ({}) is less than node count ({n})",
                hl.len()
            )));
        }
        let mut by_host: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, node) in self.nodes.iter().enumerate().rev() {
            if let Some(h) = node.hostname.as_deref() {
                by_host.entry(h).or_default().push(i);
            }
        }
        let mut order = Vec::with_capacity(n);
        for host in hl.iter() {
            let idx = by_host
                .get_mut(host.as_str())
                .and_then(Vec::pop)
                .ok_or_else(|| RsetError::Hosts(format!("Host {host} not found in resources")))?;
            order.push(idx);
        }
        let mut map = HashMap::with_capacity(n);
        for (new, &idx) in order.iter().enumerate() {
            map.insert(self.nodes[idx].rank, new as u32);
        }
        for node in &mut self.nodes {
            node.rank = map[&node.rank];
        }
        self.nodes.sort_by_key(|n| n.rank);
        self.renumber_properties(&map);
        Ok(())
    }

    fn renumber_properties(&mut self, map: &HashMap<u32, u32>) {
        for ids in self.properties.values_mut() {
            // New ranks come in any order (rerank): sort once, not insert each.
            *ids = IdSet::from_ids(ids.iter().filter_map(|r| map.get(&r).copied()));
        }
    }
}

impl ResourceSet {
    /// Check a single-rank `actual` (what a node found) against `self` (what
    /// was expected), as flux-core's `rlist_verify`: `Err` when the rank is
    /// unknown, the hostname differs or resources are missing; `Ok(Some(msg))`
    /// when `actual` has extra resources; `Ok(None)` when they match.
    pub fn verify(&self, actual: &ResourceSet) -> Result<Option<String>, RsetError> {
        let [n] = actual.nodes.as_slice() else {
            return Err(RsetError::Verify(
                "Verification supported on single rank only".into(),
            ));
        };
        let Some(exp) = self.node(n.rank) else {
            return Err(RsetError::Verify(format!(
                "rank {} not found in expected ranks",
                n.rank
            )));
        };
        if let (Some(got), Some(want)) = (&n.hostname, &exp.hostname)
            && got != want
        {
            return Err(RsetError::Verify(format!(
                "rank {} got hostname '{got}', expected '{want}'",
                n.rank
            )));
        }
        let host = n.hostname.as_deref().unwrap_or("unknown");
        let missing = super::children_dumps(
            &exp.cores.difference(&n.cores),
            &exp.gpus.difference(&n.gpus),
        );
        if !missing.is_empty() {
            return Err(RsetError::Verify(format!(
                "rank {} ({host}) missing resources: {missing}",
                n.rank
            )));
        }
        let extra = super::children_dumps(
            &n.cores.difference(&exp.cores),
            &n.gpus.difference(&exp.gpus),
        );
        if extra.is_empty() {
            Ok(None)
        } else {
            Ok(Some(format!(
                "rank {} ({host}) has extra resources: {extra}",
                n.rank
            )))
        }
    }
}

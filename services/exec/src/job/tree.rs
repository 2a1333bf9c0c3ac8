//! The shape of a job's tree of exec services.
//!
//! The job manager starts a job on one exec service, the leader (the one of
//! the first rank of R). The other exec services of the job are its
//! members, in the order of their first rank of R; the leader splits them
//! into at most `fanout` contiguous blocks of nearly equal size, and starts
//! the first member of each block (a child) with the rest of the block (its
//! subtree below it). Each child splits what it was given the same way, so
//! the tree is about log_fanout(members) deep and no exec service holds more
//! than `fanout` streams for a job. With `fanout` at least the number of
//! members every block is a single member: the leader starts each one
//! itself, a star, as flux-core's job-exec did before its shell tree.
//!
//! ```text
//! members 1..=7, fanout 2:      leader
//!                              /      \
//!                            1          5
//!                          /   \      /   \
//!                         2     4    6     7
//!                         |
//!                         3
//! ```

use std::collections::{BTreeMap, HashMap};

use fluxgate_shared::IdSet;

/// Children of one exec service in a job's tree, unless configured
/// otherwise (the `fanout` key): a 16,384-node job is then three levels
/// deep and no stream of it is shared by more than 16 nodes' traffic.
pub const DEFAULT_FANOUT: usize = 16;

/// An exec service running some ranks of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its Exec address.
    pub address: String,
    /// The ranks of R it runs.
    pub ranks: IdSet,
}

/// A child in the job's tree and the members of its subtree below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch {
    /// The child, started by this exec service.
    pub head: Member,
    /// The members the child starts in turn (directly or further down).
    pub below: Vec<Member>,
}

impl Branch {
    /// Every rank of the subtree, the child's own included.
    pub fn ranks(&self) -> IdSet {
        let mut all = self.head.ranks.clone();
        for m in &self.below {
            all.add(&m.ranks);
        }
        all
    }

    /// The Exec address of each rank below the child: what its start
    /// request carries as `peers`.
    pub fn below_addresses(&self) -> HashMap<u32, String> {
        self.below
            .iter()
            .flat_map(|m| m.ranks.iter().map(|r| (r, m.address.clone())))
            .collect()
    }
}

/// The members of a rank → address map: one per address, in the order of
/// their first rank.
pub fn members<'a>(addresses: impl IntoIterator<Item = (u32, &'a String)>) -> Vec<Member> {
    let mut by_address: BTreeMap<&String, IdSet> = BTreeMap::new();
    for (rank, address) in addresses {
        by_address.entry(address).or_default().insert(rank);
    }
    let mut members: Vec<Member> = by_address
        .into_iter()
        .map(|(address, ranks)| Member {
            address: address.clone(),
            ranks,
        })
        .collect();
    members.sort_by_key(|m| m.ranks.first());
    members
}

/// Split `members` (in order) into at most `fanout` branches of nearly
/// equal size, the larger first; a fan-out of 0 counts as 1.
pub fn branches(members: Vec<Member>, fanout: usize) -> Vec<Branch> {
    let n = members.len();
    if n == 0 {
        return Vec::new();
    }
    let k = fanout.clamp(1, n);
    let (base, extra) = (n / k, n % k);
    let mut rest = members.into_iter();
    let mut out = Vec::with_capacity(k);
    for i in 0..k {
        let size = base + usize::from(i < extra);
        let mut block = rest.by_ref().take(size);
        let Some(head) = block.next() else { break };
        out.push(Branch {
            head,
            below: block.collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(i: u32) -> Member {
        Member {
            address: format!("http://node{i}"),
            ranks: IdSet::from_range(i, i),
        }
    }

    fn heads(b: &[Branch]) -> Vec<(u32, usize)> {
        b.iter()
            .map(|b| (b.head.ranks.first().unwrap(), b.below.len()))
            .collect()
    }

    #[test]
    fn a_fanout_at_least_the_members_is_a_star() {
        let m: Vec<Member> = (1..=5).map(member).collect();
        for k in [5, 16] {
            let b = branches(m.clone(), k);
            assert_eq!(heads(&b), [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]);
            assert!(b.iter().all(|b| b.below_addresses().is_empty()));
        }
    }

    #[test]
    fn members_are_split_into_contiguous_blocks_larger_first() {
        let m: Vec<Member> = (1..=7).map(member).collect();
        let b = branches(m, 2);
        assert_eq!(heads(&b), [(1, 3), (5, 2)]);
        assert_eq!(b[0].ranks().to_string(), "1-4");
        assert_eq!(b[1].ranks().to_string(), "5-7");
        // What the first child gets splits again the same way.
        let below = branches(b[0].below.clone(), 2);
        assert_eq!(heads(&below), [(2, 1), (4, 0)]);
        assert_eq!(
            below[0].below_addresses(),
            HashMap::from([(3, "http://node3".to_string())])
        );
    }

    #[test]
    fn every_member_is_started_once_and_the_tree_is_shallow() {
        fn walk(members: Vec<Member>, k: usize, depth: usize, seen: &mut Vec<(u32, usize)>) {
            for b in branches(members, k) {
                seen.push((b.head.ranks.first().unwrap(), depth));
                walk(b.below, k, depth + 1, seen);
            }
        }
        let mut seen = Vec::new();
        walk((1..64).map(member).collect(), 4, 1, &mut seen);
        let mut ranks: Vec<u32> = seen.iter().map(|s| s.0).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (1..64).collect::<Vec<_>>());
        // 64 exec services, 4 children each: 3 levels below the leader.
        assert_eq!(seen.iter().map(|s| s.1).max(), Some(3));
    }

    #[test]
    fn a_fanout_of_one_is_a_chain_and_zero_counts_as_one() {
        let m: Vec<Member> = (1..=3).map(member).collect();
        assert_eq!(heads(&branches(m.clone(), 1)), [(1, 2)]);
        assert_eq!(heads(&branches(m, 0)), [(1, 2)]);
        assert!(branches(Vec::new(), 4).is_empty());
    }

    #[test]
    fn members_group_ranks_by_address_in_rank_order() {
        let (a, b) = ("http://b".to_string(), "http://a".to_string());
        let map = [(3, &b), (1, &a), (2, &b), (4, &a)];
        let m = members(map);
        assert_eq!(m[0].address, "http://b");
        assert_eq!(m[0].ranks.to_string(), "1,4");
        assert_eq!(m[1].ranks.to_string(), "2-3");
    }
}

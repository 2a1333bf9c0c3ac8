//! Fair share as flux-accounting computes it: each association's (bank and
//! user's) usage decays with a half-life, and a weighted walk of the bank →
//! user tree ranks associations by shares against usage.
//!
//! Weight of a node among its siblings: (its shares / their shares) over
//! (its usage / their usage). Banks are ranked by weight, then users within
//! a bank; the association ranked r-th of N gets fair share (N − r + 1) / N,
//! so 1.0 is the least used relative to its shares. Associations whose bank
//! and own weights are equal share one rank (flux-accounting's ties), so
//! users who have used nothing all get 1.0.

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Decayed usage (core-seconds) of one association, as of a time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Core-seconds, decayed to `t`.
    pub value: f64,
    /// When `value` was last brought up to date (seconds since the epoch).
    pub t: f64,
}

impl Usage {
    /// The usage decayed to `now`: halved every `half_life` seconds.
    pub fn at(&self, now: f64, half_life: f64) -> f64 {
        let dt = (now - self.t).max(0.0);
        if half_life <= 0.0 || dt == 0.0 {
            return self.value;
        }
        self.value * 0.5f64.powf(dt / half_life)
    }

    /// Add `amount` core-seconds used up to `now`.
    pub fn add(&mut self, amount: f64, now: f64, half_life: f64) {
        let decayed = self.at(now, half_life);
        self.value = decayed + amount.max(0.0);
        self.t = self.t.max(now);
    }
}

/// One association of the tree: a user within a bank.
#[derive(Debug, Clone, PartialEq)]
pub struct Association {
    /// Bank name ("" for jobs without one).
    pub bank: String,
    /// The user's uid.
    pub user: u32,
    /// The user's shares within the bank.
    pub shares: f64,
    /// Decayed usage now.
    pub usage: f64,
}

/// Weight of a node with `shares` and `usage` among siblings totalling
/// `all_shares` and `all_usage`: infinite when it has shares and used
/// nothing, 0 when it has no shares.
fn weight(shares: f64, all_shares: f64, usage: f64, all_usage: f64) -> f64 {
    let s = if all_shares > 0.0 {
        shares / all_shares
    } else {
        0.0
    };
    if s <= 0.0 {
        return 0.0;
    }
    let u = if all_usage > 0.0 {
        usage / all_usage
    } else {
        0.0
    };
    if u <= 0.0 { f64::INFINITY } else { s / u }
}

/// Fair share of each association (same order as `assocs`), with
/// `bank_shares` giving each bank's shares (a bank not listed has 1).
pub fn fairshare(assocs: &[Association], bank_shares: &BTreeMap<String, f64>) -> Vec<f64> {
    let n = assocs.len();
    if n == 0 {
        return Vec::new();
    }
    // Per bank: usage and the sum of its users' shares.
    let mut banks: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for a in assocs {
        let e = banks.entry(a.bank.as_str()).or_default();
        e.0 += a.usage.max(0.0);
        e.1 += a.shares.max(0.0);
    }
    let shares_of = |b: &str| bank_shares.get(b).copied().unwrap_or(1.0).max(0.0);
    let all_shares: f64 = banks.keys().map(|b| shares_of(b)).sum();
    let all_usage: f64 = banks.values().map(|(u, _)| *u).sum();
    let bank_weight: BTreeMap<&str, f64> = banks
        .iter()
        .map(|(b, (u, _))| (*b, weight(shares_of(b), all_shares, *u, all_usage)))
        .collect();
    let keys: Vec<(f64, f64)> = assocs
        .iter()
        .map(|a| {
            let (bank_usage, bank_user_shares) = banks[a.bank.as_str()];
            (
                bank_weight[a.bank.as_str()],
                weight(
                    a.shares.max(0.0),
                    bank_user_shares,
                    a.usage.max(0.0),
                    bank_usage,
                ),
            )
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    // Highest bank weight first, then highest user weight.
    let cmp =
        |x: &(f64, f64), y: &(f64, f64)| y.0.total_cmp(&x.0).then_with(|| y.1.total_cmp(&x.1));
    order.sort_by(|&i, &j| cmp(&keys[i], &keys[j]));
    let mut out = vec![0.0; n];
    let mut rank = 1;
    for (pos, &i) in order.iter().enumerate() {
        if pos > 0 && cmp(&keys[order[pos - 1]], &keys[i]) != Ordering::Equal {
            rank = pos + 1;
        }
        out[i] = (n - rank + 1) as f64 / n as f64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assoc(bank: &str, user: u32, shares: f64, usage: f64) -> Association {
        Association {
            bank: bank.into(),
            user,
            shares,
            usage,
        }
    }

    #[test]
    fn the_flux_accounting_example_ranks_as_documented() {
        // doc/components/fair-share.rst: banks with shares 1000, 100, 10.
        let assocs = [
            assoc("account1", 11, 10000.0, 100.0),
            assoc("account1", 12, 1000.0, 11.0),
            assoc("account1", 13, 100000.0, 10.0),
            assoc("account2", 21, 100000.0, 8.0),
            assoc("account2", 22, 10000.0, 3.0),
            assoc("account3", 31, 100.0, 0.0),
            assoc("account3", 32, 10.0, 1.0),
        ];
        let banks = BTreeMap::from([
            ("account1".to_string(), 1000.0),
            ("account2".to_string(), 100.0),
            ("account3".to_string(), 10.0),
        ]);
        let f = fairshare(&assocs, &banks);
        let want = [2.0, 1.0, 3.0, 5.0, 4.0, 7.0, 6.0].map(|r| r / 7.0);
        for (got, want) in f.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{f:?}");
        }
    }

    #[test]
    fn less_usage_for_the_same_shares_ranks_higher_and_ties_share_a_rank() {
        let f = fairshare(
            &[
                assoc("", 1, 1.0, 500.0),
                assoc("", 2, 1.0, 0.0),
                assoc("", 3, 1.0, 0.0),
            ],
            &BTreeMap::new(),
        );
        assert_eq!(f, vec![1.0 / 3.0, 1.0, 1.0]);
        let none = fairshare(&[assoc("", 1, 1.0, 0.0)], &BTreeMap::new());
        assert_eq!(none, vec![1.0]);
    }

    #[test]
    fn usage_halves_every_half_life() {
        let mut u = Usage::default();
        u.add(100.0, 1000.0, 60.0);
        assert_eq!(u.at(1000.0, 60.0), 100.0);
        assert!((u.at(1060.0, 60.0) - 50.0).abs() < 1e-9);
        u.add(10.0, 1120.0, 60.0);
        assert!((u.value - 35.0).abs() < 1e-9);
        assert_eq!(u.t, 1120.0);
    }
}

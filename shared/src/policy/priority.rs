//! The multi-factor priority of flux-accounting's `mf_priority` plugin,
//! with an age factor as Slurm's multifactor plugin has:
//!
//! priority = W_fairshare·fairshare + W_queue·queue + W_bank·bank
//!          + W_urgency·(urgency − 16) + W_age·age
//!
//! rounded, where fairshare and age are in 0-1 and queue and bank are the
//! configured factors of the job's queue and bank. Urgency 0 holds (priority
//! 0) and 31 expedites (the largest priority) whatever the factors, as in
//! flux; any other job gets at least 1, so that only a hold holds it.

use serde::{Deserialize, Serialize};

/// Urgency that holds a job (RFC 21).
pub const URGENCY_HOLD: u8 = 0;
/// The urgency of a job that asks for none.
pub const URGENCY_DEFAULT: u8 = 16;
/// Urgency that puts a job ahead of all others.
pub const URGENCY_EXPEDITE: u8 = 31;
/// The largest priority (flux's `FLUX_JOB_PRIORITY_MAX`).
pub const PRIORITY_MAX: u32 = u32::MAX;

/// Weight of each factor (`[accounting.weights]`); flux-accounting's
/// defaults, and no age weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Weights {
    /// Fair share (0-1).
    pub fairshare: u64,
    /// The queue's priority factor.
    pub queue: u64,
    /// The bank's priority factor.
    pub bank: u64,
    /// Urgency above or below the default.
    pub urgency: u64,
    /// Time pending, as a fraction of `accounting.age_max` (0-1).
    pub age: u64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            fairshare: 100_000,
            queue: 10_000,
            bank: 0,
            urgency: 1000,
            age: 0,
        }
    }
}

/// A job's factors.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Factors {
    /// Its association's fair share, 0-1.
    pub fairshare: f64,
    /// Its queue's priority factor.
    pub queue: i64,
    /// Its bank's priority factor.
    pub bank: i64,
    /// Its urgency, 0-31.
    pub urgency: u8,
    /// How long it has waited against the age limit, 0-1.
    pub age: f64,
}

impl Weights {
    /// The priority of a job with `f`.
    pub fn priority(&self, f: &Factors) -> u32 {
        match f.urgency {
            URGENCY_HOLD => return 0,
            URGENCY_EXPEDITE => return PRIORITY_MAX,
            _ => {}
        }
        let p = self.fairshare as f64 * f.fairshare.clamp(0.0, 1.0)
            + self.queue as f64 * f.queue as f64
            + self.bank as f64 * f.bank as f64
            + self.urgency as f64 * (f64::from(f.urgency) - f64::from(URGENCY_DEFAULT))
            + self.age as f64 * f.age.clamp(0.0, 1.0);
        let p = p.round();
        if p.is_nan() || p < 1.0 {
            1
        } else if p >= f64::from(PRIORITY_MAX - 1) {
            PRIORITY_MAX - 1
        } else {
            p as u32
        }
    }
}

/// The age factor of a job pending since `t_submit`: the fraction of
/// `age_max` seconds it has waited, at most 1.
pub fn age(t_submit: f64, now: f64, age_max: f64) -> f64 {
    if age_max <= 0.0 {
        return 0.0;
    }
    ((now - t_submit) / age_max).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flux_accounting_example() {
        // doc/components/job-priorities.rst: a first job gets 50000.
        let w = Weights::default();
        let f = Factors {
            fairshare: 0.5,
            urgency: 16,
            ..Factors::default()
        };
        assert_eq!(w.priority(&f), 50_000);
        let f = Factors {
            fairshare: 1.0,
            queue: 1,
            urgency: 20,
            ..Factors::default()
        };
        assert_eq!(w.priority(&f), 100_000 + 10_000 + 4_000);
    }

    #[test]
    fn hold_and_expedite_keep_their_meaning_and_nothing_else_holds() {
        let w = Weights::default();
        let base = Factors {
            fairshare: 1.0,
            ..Factors::default()
        };
        assert_eq!(w.priority(&Factors { urgency: 0, ..base }), 0);
        assert_eq!(
            w.priority(&Factors {
                urgency: 31,
                ..base
            }),
            PRIORITY_MAX
        );
        let low = Factors {
            fairshare: 0.0,
            urgency: 1,
            ..Factors::default()
        };
        assert_eq!(w.priority(&low), 1);
    }

    #[test]
    fn age_grows_to_one() {
        assert_eq!(age(100.0, 100.0, 50.0), 0.0);
        assert_eq!(age(100.0, 125.0, 50.0), 0.5);
        assert_eq!(age(100.0, 1000.0, 50.0), 1.0);
        assert_eq!(age(100.0, 1000.0, 0.0), 0.0);
        let w = Weights {
            age: 1000,
            ..Weights::default()
        };
        let f = Factors {
            urgency: 16,
            age: 0.5,
            ..Factors::default()
        };
        assert_eq!(w.priority(&f), 500);
    }
}

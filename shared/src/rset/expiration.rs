//! When a job's resources expire inside an instance whose own resources
//! expire (an instance that is itself a job of an enclosing instance).
//!
//! flux-core's rule: a job with no time limit gets the time the instance has
//! left; a job whose time limit would take it past the instance's
//! expiration is not started, since it would be killed before it finished.

/// Why a job cannot start before the instance expires.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExpirationError {
    /// The job's time limit reaches past the instance's expiration.
    #[error("job duration ({duration}s) exceeds the instance's remaining time ({remaining:.0}s)")]
    ExceedsInstance {
        /// The job's time limit in seconds.
        duration: f64,
        /// Seconds the instance has left.
        remaining: f64,
    },
    /// The instance's resources have already expired.
    #[error("the instance's resources have expired")]
    Expired,
}

/// The expiration of a job started at `now` with time limit `duration`
/// (0: none) in an instance expiring at `instance` (`None` or 0: never).
/// `Ok(None)` means the job may run without limit.
pub fn job_expiration(
    now: f64,
    duration: f64,
    instance: Option<f64>,
) -> Result<Option<f64>, ExpirationError> {
    let own = (duration > 0.0).then_some(now + duration);
    let Some(end) = instance.filter(|t| *t > 0.0) else {
        return Ok(own);
    };
    if end <= now {
        return Err(ExpirationError::Expired);
    }
    match own {
        None => Ok(Some(end)),
        Some(t) if t <= end => Ok(Some(t)),
        Some(_) => Err(ExpirationError::ExceedsInstance {
            duration,
            remaining: end - now,
        }),
    }
}

/// The expiration a job already running since `start` with time limit
/// `duration` (0: none) should have once the instance's expiration becomes
/// `instance` (`None` or 0: never): its own limit, cut to the instance's end,
/// or the instance's end when it has none. 0 means no expiration.
pub fn running_job_expiration(start: f64, duration: f64, instance: Option<f64>) -> f64 {
    let own = (duration > 0.0).then_some(start + duration);
    match (own, instance.filter(|t| *t > 0.0)) {
        (Some(t), Some(end)) => t.min(end),
        (Some(t), None) => t,
        (None, Some(end)) => end,
        (None, None) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_jobs_follow_the_instance() {
        assert_eq!(running_job_expiration(100.0, 0.0, Some(500.0)), 500.0);
        assert_eq!(running_job_expiration(100.0, 50.0, Some(500.0)), 150.0);
        assert_eq!(running_job_expiration(100.0, 500.0, Some(300.0)), 300.0);
        assert_eq!(running_job_expiration(100.0, 50.0, None), 150.0);
        assert_eq!(running_job_expiration(100.0, 0.0, Some(0.0)), 0.0);
    }

    /// (now, duration, instance expiration, expected: `None` for an error).
    type Case = (f64, f64, Option<f64>, Option<Option<f64>>);

    #[test]
    fn table() {
        // (now, duration, instance expiration, expected)
        let cases: &[Case] = &[
            (100.0, 0.0, None, Some(None)),
            (100.0, 10.0, None, Some(Some(110.0))),
            (100.0, 10.0, Some(0.0), Some(Some(110.0))),
            (100.0, 0.0, Some(0.0), Some(None)),
            (100.0, 0.0, Some(150.0), Some(Some(150.0))),
            (100.0, 50.0, Some(150.0), Some(Some(150.0))),
            (100.0, 10.0, Some(150.0), Some(Some(110.0))),
            (100.0, 51.0, Some(150.0), None),
            (100.0, 0.0, Some(100.0), None),
            (100.0, 0.0, Some(90.0), None),
        ];
        for (now, duration, instance, want) in cases {
            let got = job_expiration(*now, *duration, *instance).ok();
            assert_eq!(
                &got, want,
                "now={now} duration={duration} instance={instance:?}"
            );
        }
    }

    #[test]
    fn message_says_how_much_time_is_left() {
        let e = job_expiration(100.0, 60.0, Some(130.0)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "job duration (60s) exceeds the instance's remaining time (30s)"
        );
    }
}

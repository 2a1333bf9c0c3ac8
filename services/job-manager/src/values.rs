//! Request values checked once, at the edge: a value of these types is in
//! range by construction, so the core never checks it again.

use std::fmt;

use crate::error::Error;

/// A job's urgency (RFC 21 / flux-core: 0 holds, 31 expedites, 16 is the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Urgency(u8);

impl Urgency {
    /// Held: never scheduled until the urgency changes.
    pub const HOLD: Urgency = Urgency(0);
    /// What a job gets when it asks for nothing else.
    pub const DEFAULT: Urgency = Urgency(16);
    /// Ahead of every other urgency.
    pub const EXPEDITE: Urgency = Urgency(31);

    /// `value`, if it is in 0-31.
    pub fn new(value: u32) -> Result<Urgency, Error> {
        u8::try_from(value)
            .ok()
            .filter(|u| *u <= Self::EXPEDITE.0)
            .map(Urgency)
            .ok_or_else(|| Error::Invalid(format!("urgency {value} is out of range 0-31")))
    }

    /// The number.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for Urgency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An exception's severity (RFC 21: 0 is fatal, up to 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Severity(u8);

impl Severity {
    /// Ends the job.
    pub const FATAL: Severity = Severity(0);
    /// The least severe.
    pub const LEAST: Severity = Severity(7);

    /// `value`, if it is in 0-7.
    pub fn new(value: u32) -> Result<Severity, Error> {
        u8::try_from(value)
            .ok()
            .filter(|s| *s <= Self::LEAST.0)
            .map(Severity)
            .ok_or_else(|| Error::Invalid(format!("severity {value} is out of range 0-7")))
    }

    /// `value`, cut to 0-7: for what a trusted peer (an exec service) says.
    pub fn clamped(value: u32) -> Severity {
        Severity(u8::try_from(value.min(7)).unwrap_or(Self::LEAST.0))
    }

    /// The number.
    pub fn get(self) -> u8 {
        self.0
    }

    /// Severity 0.
    pub fn is_fatal(self) -> bool {
        self == Self::FATAL
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urgency_and_severity_are_checked_once() {
        assert_eq!(Urgency::new(31).map(Urgency::get), Ok(31));
        assert!(
            matches!(Urgency::new(32), Err(Error::Invalid(m)) if m == "urgency 32 is out of range 0-31")
        );
        assert!(Urgency::new(u32::MAX).is_err());
        assert_eq!(Severity::new(7).map(Severity::get), Ok(7));
        assert!(
            matches!(Severity::new(8), Err(Error::Invalid(m)) if m == "severity 8 is out of range 0-7")
        );
        assert_eq!(Severity::clamped(300), Severity::LEAST);
        assert!(Severity::clamped(0).is_fatal());
    }
}

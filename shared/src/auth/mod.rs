//! Who may do what: signed bearer tokens and the role rules of an instance.
//!
//! RFC 21 lets the instance owner and a job's owner act on a job, and nobody
//! else. The pure parts live here, with no clock and no files: [`token`]
//! signs and verifies credentials given a key and the time, [`policy`]
//! decides whether a verified caller may do an action on a job owned by
//! someone. The services read keys and certificates and apply these rules
//! at their gRPC edge.

pub mod policy;
pub mod token;

pub use policy::{Action, Caller, Denied, Role};
pub use token::{Claims, TokenError, TokenRole};

/// Compare two byte strings in time that depends only on their lengths, so a
/// shared secret cannot be guessed byte by byte from response times.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn equal_only_when_every_byte_is() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret!"));
        assert!(constant_time_eq(b"", b""));
    }
}

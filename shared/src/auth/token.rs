//! Bearer tokens signed with the instance key.
//!
//! ```text
//! fgt1.<payload>.<mac>
//!   payload = base64url(JSON {"user": NAME, "uid": N, "role": "user"|"node",
//!                             "iat": SECS, "exp": SECS (absent: no expiry),
//!                             "job": ID (absent: not a job's credential)})
//!   mac     = base64url(HMAC-SHA256(instance key, "fgt1." + payload))
//! ```
//!
//! base64url is without padding. The MAC covers the version prefix, so a
//! token of another format cannot be replayed as this one. Verification
//! checks the MAC in constant time before it reads the payload, then the
//! expiry against the clock value it is given.
//!
//! A job's credential (`job` set) is what the job manager hands a job's tasks
//! at start: its holder acts as the job's owner, and the job manager accepts it
//! only while that job is active, so it is revoked when the job ends. Tokens
//! without the claim serialize as before, so existing tokens stay valid.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The format prefix of every token.
pub const PREFIX: &str = "fgt1.";
/// Shortest instance key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 16;
/// How far in the future a token's issue time may be (clocks differ a little).
pub const CLOCK_SKEW_SECS: u64 = 300;

/// What a token lets its holder be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenRole {
    /// A person (or their programs); the owner if `uid` is the instance owner's.
    User,
    /// An exec service: may join as a node, nothing else.
    Node,
}

/// What a token says about its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The user name, shown in logs and messages.
    pub user: String,
    /// The uid jobs are owned by and run as.
    pub uid: u32,
    /// User or node.
    pub role: TokenRole,
    /// When it was issued, seconds since the epoch.
    pub iat: u64,
    /// When it stops being valid, seconds since the epoch; none: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    /// The job whose tasks hold this credential (a job id, RFC 19); valid only
    /// while that job is active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u64>,
}

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a fluxgate token at all.
    #[error("the token is malformed ({0}); expected the text `fluxgate token create` prints")]
    Malformed(String),
    /// The MAC does not match: forged, altered, or signed with another key.
    #[error(
        "the token's signature does not match this instance's key \
         (altered, forged, or made for another instance)"
    )]
    BadSignature,
    /// Past its expiry.
    #[error(
        "the token expired {ago} seconds ago; ask the instance owner for a new one \
         (`fluxgate token create`)"
    )]
    Expired {
        /// Seconds since it expired.
        ago: u64,
    },
    /// Issued further in the future than clock skew explains.
    #[error("the token is issued {ahead} seconds in the future; check this machine's clock")]
    NotYetValid {
        /// Seconds ahead.
        ahead: u64,
    },
    /// The key is too short to sign with.
    #[error("the instance key is {0} bytes; at least {MIN_KEY_BYTES} are needed")]
    WeakKey(usize),
}

fn mac(key: &[u8], signed: &str) -> Result<Hmac<Sha256>, TokenError> {
    if key.len() < MIN_KEY_BYTES {
        return Err(TokenError::WeakKey(key.len()));
    }
    let mut mac =
        Hmac::<Sha256>::new_from_slice(key).map_err(|_| TokenError::WeakKey(key.len()))?;
    mac.update(signed.as_bytes());
    Ok(mac)
}

impl Claims {
    /// A user's claims issued at `now`, valid for `ttl` seconds (forever if `None`).
    pub fn user(user: &str, uid: u32, now: u64, ttl: Option<u64>) -> Claims {
        Claims {
            user: user.to_string(),
            uid,
            role: TokenRole::User,
            iat: now,
            exp: ttl.map(|t| now.saturating_add(t)),
            job: None,
        }
    }

    /// The credential of job `job`'s tasks, owned by `user` (`uid`), issued
    /// at `now` and expiring at `exp` (seconds since the epoch).
    pub fn job(user: &str, uid: u32, job: u64, now: u64, exp: u64) -> Claims {
        Claims {
            user: user.to_string(),
            uid,
            role: TokenRole::User,
            iat: now,
            exp: Some(exp),
            job: Some(job),
        }
    }

    /// The node credential of an instance owned by `uid`, issued at `now`.
    pub fn node(uid: u32, now: u64) -> Claims {
        Claims {
            user: "node".into(),
            uid,
            role: TokenRole::Node,
            iat: now,
            exp: None,
            job: None,
        }
    }

    /// The signed token text.
    pub fn sign(&self, key: &[u8]) -> Result<String, TokenError> {
        // Serializing a struct of strings and integers cannot fail.
        let json = serde_json::to_vec(self).unwrap_or_default();
        let signed = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(json));
        let tag = mac(key, &signed)?.finalize().into_bytes();
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag)))
    }
}

/// A key derived from a secret and a label: HMAC-SHA256(secret, label).
/// Whoever holds `secret` computes the same key and no one else can; an
/// instance inside a job keys itself with its job's credential this way, so
/// that the job's tasks on every node sign the same node credential without
/// sending a secret anywhere.
pub fn derive_key(secret: &[u8], label: &str) -> Vec<u8> {
    // HMAC takes a key of any length, including an empty one.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| <Hmac<Sha256> as Mac>::new_from_slice(&[0u8; 32]).expect("fixed key"));
    mac.update(label.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// Check `token` against `key` at time `now` (seconds since the epoch).
pub fn verify(token: &str, key: &[u8], now: u64) -> Result<Claims, TokenError> {
    let token = token.trim();
    let rest = token
        .strip_prefix(PREFIX)
        .ok_or_else(|| TokenError::Malformed(format!("it does not start with {PREFIX:?}")))?;
    let (payload, tag) = rest
        .split_once('.')
        .ok_or_else(|| TokenError::Malformed("it has no signature part".into()))?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| TokenError::Malformed("the signature is not base64url".into()))?;
    let signed = &token[..PREFIX.len() + payload.len()];
    mac(key, signed)?
        .verify_slice(&tag)
        .map_err(|_| TokenError::BadSignature)?;
    let json = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| TokenError::Malformed("the payload is not base64url".into()))?;
    let claims: Claims = serde_json::from_slice(&json)
        .map_err(|e| TokenError::Malformed(format!("the payload: {e}")))?;
    if let Some(exp) = claims.exp
        && now >= exp
    {
        return Err(TokenError::Expired { ago: now - exp });
    }
    if claims.iat > now.saturating_add(CLOCK_SKEW_SECS) {
        return Err(TokenError::NotYetValid {
            ahead: claims.iat - now,
        });
    }
    Ok(claims)
}

/// The claims of `token` without checking its signature: for a client to
/// learn whom its own token names (the server verifies it on every call).
pub fn peek(token: &str) -> Option<Claims> {
    let rest = token.trim().strip_prefix(PREFIX)?;
    let (payload, _) = rest.split_once('.')?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
}

/// The text form of an instance key, as its file holds it: lower-case hex.
pub fn key_to_text(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// An instance key from its file's text (hex, surrounding blanks ignored).
pub fn key_from_text(text: &str) -> Result<Vec<u8>, TokenError> {
    let t = text.trim();
    if !t.len().is_multiple_of(2) || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(TokenError::Malformed(
            "the instance key file must hold hex digits only".into(),
        ));
    }
    let key: Vec<u8> = (0..t.len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(&t[i..i + 2], 16).ok())
        .collect();
    if key.len() < MIN_KEY_BYTES {
        return Err(TokenError::WeakKey(key.len()));
    }
    Ok(key)
}

/// Parse a duration such as `90`, `30s`, `15m`, `12h`, `7d` into seconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, ""),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 30s, 15m, 12h or 7d"))?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!("{text:?}: unknown unit {unit:?}; use s, m, h or d"));
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too long a duration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
    const OTHER: &[u8] = b"fedcba9876543210fedcba9876543210";

    #[test]
    fn a_signed_token_verifies_to_its_claims() {
        let c = Claims::user("alice", 1001, 1000, Some(60));
        let t = c.sign(KEY).unwrap();
        assert!(t.starts_with(PREFIX));
        assert_eq!(verify(&t, KEY, 1030).unwrap(), c);
        assert_eq!(verify(&format!(" {t}\n"), KEY, 1030).unwrap(), c);
    }

    #[test]
    fn expiry_is_exclusive() {
        let t = Claims::user("a", 1, 1000, Some(60)).sign(KEY).unwrap();
        assert!(verify(&t, KEY, 1059).is_ok());
        assert_eq!(verify(&t, KEY, 1060), Err(TokenError::Expired { ago: 0 }));
        assert_eq!(verify(&t, KEY, 1100), Err(TokenError::Expired { ago: 40 }));
        let forever = Claims::user("a", 1, 1000, None).sign(KEY).unwrap();
        assert!(verify(&forever, KEY, u64::MAX).is_ok());
    }

    #[test]
    fn another_key_or_an_altered_payload_is_a_bad_signature() {
        let t = Claims::user("alice", 1001, 1000, None).sign(KEY).unwrap();
        assert_eq!(verify(&t, OTHER, 1000), Err(TokenError::BadSignature));
        // Claim to be root with alice's signature.
        let (_, tag) = t.rsplit_once('.').unwrap();
        let forged = Claims::user("alice", 0, 1000, None).sign(OTHER).unwrap();
        let (signed, _) = forged.rsplit_once('.').unwrap();
        let spliced = format!("{signed}.{tag}");
        assert_eq!(verify(&spliced, KEY, 1000), Err(TokenError::BadSignature));
    }

    #[test]
    fn malformed_tokens_say_what_is_wrong() {
        for bad in ["", "hello", "fgt1.", "fgt1.abc", "fgt1.abc.!!", "Bearer x"] {
            let e = verify(bad, KEY, 0).unwrap_err();
            assert!(matches!(e, TokenError::Malformed(_)), "{bad:?}: {e:?}");
        }
        // A valid MAC over a payload that is not claims.
        let signed = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(b"[1]"));
        let tag = mac(KEY, &signed).unwrap().finalize().into_bytes();
        let t = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag));
        assert!(matches!(verify(&t, KEY, 0), Err(TokenError::Malformed(_))));
    }

    #[test]
    fn tokens_from_the_future_are_refused_beyond_skew() {
        let t = Claims::user("a", 1, 10_000, None).sign(KEY).unwrap();
        assert!(verify(&t, KEY, 10_000 - CLOCK_SKEW_SECS).is_ok());
        assert!(matches!(
            verify(&t, KEY, 1000),
            Err(TokenError::NotYetValid { .. })
        ));
    }

    #[test]
    fn short_keys_are_refused() {
        let c = Claims::node(0, 0);
        assert_eq!(c.sign(b"short"), Err(TokenError::WeakKey(5)));
        let t = c.sign(KEY).unwrap();
        assert_eq!(verify(&t, b"short", 0), Err(TokenError::WeakKey(5)));
        assert_eq!(verify(&t, KEY, 0).unwrap().role, TokenRole::Node);
    }

    #[test]
    fn a_job_credential_names_its_job_and_others_do_not() {
        let c = Claims::job("alice", 1001, 77, 1000, 1060);
        let t = c.sign(KEY).unwrap();
        let back = verify(&t, KEY, 1030).unwrap();
        assert_eq!(
            (back.job, back.exp, back.role),
            (Some(77), Some(1060), TokenRole::User)
        );
        assert!(matches!(
            verify(&t, KEY, 1060),
            Err(TokenError::Expired { .. })
        ));
        // Without the claim the payload is what it was before the claim
        // existed, so tokens made then verify the same.
        let old = Claims::user("alice", 1001, 5, None).sign(KEY).unwrap();
        let (payload, _) = old[PREFIX.len()..].split_once('.').unwrap();
        let json = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        assert!(!json.contains("job"), "{json}");
        assert_eq!(verify(&old, KEY, 6).unwrap().job, None);
    }

    #[test]
    fn derived_keys_depend_on_secret_and_label() {
        let a = derive_key(b"secret", "child");
        assert_eq!(a.len(), 32);
        assert_eq!(a, derive_key(b"secret", "child"));
        assert_ne!(a, derive_key(b"secret!", "child"));
        assert_ne!(a, derive_key(b"secret", "other"));
        assert!(Claims::node(1, 0).sign(&a).is_ok());
    }

    #[test]
    fn peek_reads_claims_without_the_key() {
        let c = Claims::user("alice", 1001, 5, None);
        assert_eq!(peek(&c.sign(KEY).unwrap()), Some(c));
        assert_eq!(peek("nonsense"), None);
    }

    #[test]
    fn keys_round_trip_through_text() {
        let text = key_to_text(KEY);
        assert_eq!(text.len(), 64);
        assert_eq!(key_from_text(&format!("{text}\n")).unwrap(), KEY);
        assert!(matches!(key_from_text("zz"), Err(TokenError::Malformed(_))));
        assert_eq!(key_from_text("abcd"), Err(TokenError::WeakKey(2)));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("30s"), Ok(30));
        assert_eq!(parse_duration("15m"), Ok(900));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("7d"), Ok(604_800));
        assert!(parse_duration("1w").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
    }
}

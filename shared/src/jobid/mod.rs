//! RFC 19 job ids: FLUIDs (Flux Locally Unique IDs), their bit layout, the generator
//! that issues them, and every text form Flux users meet (decimal, hex, dothex, kvs,
//! mnemonic words, F58, emoji).
//!
//! Parsing follows flux-core's `flux_job_id_parse()` (`src/common/libjob/id.c`,
//! `src/common/libutil/fluid.c`) so that any id a Flux tool prints is accepted here.

mod emoji;
mod encode;
mod generator;

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

pub use generator::{FluidGenerator, GeneratorError};

/// Bits of the millisecond timestamp (the top of the id).
pub const TIMESTAMP_BITS: u32 = 40;
/// Bits of the generator id (the middle of the id).
pub const GENERATOR_BITS: u32 = 14;
/// Bits of the per-millisecond sequence number (the bottom of the id).
pub const SEQUENCE_BITS: u32 = 10;
/// Largest timestamp a FLUID holds (about 34.8 years of milliseconds).
pub const MAX_TIMESTAMP: u64 = (1 << TIMESTAMP_BITS) - 1;
/// Largest generator id.
pub const MAX_GENERATOR: u16 = (1 << GENERATOR_BITS) - 1;
/// Largest sequence number within one millisecond.
pub const MAX_SEQUENCE: u16 = (1 << SEQUENCE_BITS) - 1;

/// A job id: an RFC 19 FLUID, `timestamp:40 | generator:14 | sequence:10`.
///
/// `Display` writes F58 with the `ƒ` prefix (`{:#}` uses the ASCII `f`); `FromStr`
/// accepts every encoding, detected as flux-core does. Serialized as a JSON integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct JobId(u64);

/// The text forms of a job id, named as `flux job id --to=NAME` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Decimal: `6731191091817518`.
    Dec,
    /// `0x` and lowercase hex without padding: `0x17e9fb8df16c2e`.
    Hex,
    /// Four dot-separated groups of four hex digits: `0017.e9fb.8df1.6c2e`.
    Dothex,
    /// The job's KVS directory: `job.0017.e9fb.8df1.6c2e`.
    Kvs,
    /// Mnemonicode words: `reform-remote-galileo--heart-package-academy`.
    Words,
    /// Base 58 with the `ƒ` prefix: `ƒuZZybuNNy`.
    F58,
    /// Base 58 with the ASCII `f` prefix: `fuZZybuNNy`.
    F58Plain,
    /// Base 576 over the RFC 19 emoji table.
    Emoji,
}

impl Encoding {
    /// Every encoding, in the order `flux job id` documents them.
    pub const ALL: [Encoding; 8] = [
        Encoding::Dec,
        Encoding::Kvs,
        Encoding::Hex,
        Encoding::Dothex,
        Encoding::Words,
        Encoding::F58,
        Encoding::F58Plain,
        Encoding::Emoji,
    ];

    /// The name used on the command line (`dec`, `hex`, `f58plain`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Encoding::Dec => "dec",
            Encoding::Hex => "hex",
            Encoding::Dothex => "dothex",
            Encoding::Kvs => "kvs",
            Encoding::Words => "words",
            Encoding::F58 => "f58",
            Encoding::F58Plain => "f58plain",
            Encoding::Emoji => "emoji",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An encoding name that is not one of [`Encoding::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown job id encoding {0:?} (expected dec, kvs, hex, dothex, words, f58, f58plain or emoji)"
)]
pub struct UnknownEncoding(pub String);

impl FromStr for Encoding {
    type Err = UnknownEncoding;

    /// Case-insensitive, as flux-core compares with `strcasecmp`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownEncoding(s.to_owned()))
    }
}

/// Why a string is not a job id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid job id {input:?}: {reason}")]
pub struct JobIdError {
    /// The text that was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: JobIdErrorReason,
}

/// What is wrong with a job id string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobIdErrorReason {
    /// Nothing (or only whitespace) to parse.
    #[error("it is empty")]
    Empty,
    /// A character that has no place in a decimal or `0x` hex id.
    #[error("unexpected {0:?} in a number (ids are decimal, 0x-hex, dothex, words, F58 or emoji)")]
    BadNumber(char),
    /// The number does not fit in 64 bits.
    #[error("it is larger than the largest id 18446744073709551615")]
    Overflow,
    /// Not four groups of one to four hex digits.
    #[error(
        "dothex ids are 4 groups of 1 to 4 hex digits separated by '.', e.g. 0000.0000.0000.002a"
    )]
    Dothex,
    /// A word that is not in the mnemonicode word list.
    #[error("{0:?} is not a mnemonicode word")]
    UnknownWord(String),
    /// Words that are valid alone but do not spell a 64-bit id.
    #[error("mnemonic ids are six words, w-w-w--w-w-w ({0})")]
    Words(String),
    /// Missing `ƒ` or `f` prefix.
    #[error("F58 ids start with 'ƒ' or 'f'")]
    F58Prefix,
    /// No digits after the F58 prefix.
    #[error("no F58 digits after the prefix")]
    F58Empty,
    /// More digits than any 64-bit id needs.
    #[error("{0} F58 digits, at most 12 are allowed")]
    F58TooLong(usize),
    /// A character outside the base 58 alphabet.
    #[error("{0:?} is not an F58 digit (the alphabet has no 0, O, I or l)")]
    F58Digit(char),
    /// Not a sequence of the RFC 19 emoji digits.
    #[error("{0:?} is not one of the 576 RFC 19 emoji digits")]
    EmojiDigit(String),
    /// Too many emoji digits.
    #[error("{0} emoji digits, at most 7 are allowed")]
    EmojiTooLong(usize),
}

impl JobIdError {
    fn new(input: &str, reason: JobIdErrorReason) -> Self {
        JobIdError {
            input: input.to_owned(),
            reason,
        }
    }
}

/// A field given to [`JobId::from_parts`] that does not fit its bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// Timestamp past 40 bits.
    #[error("timestamp {0} ms does not fit in 40 bits (max {MAX_TIMESTAMP})")]
    Timestamp(u64),
    /// Generator id past 14 bits.
    #[error("generator id {0} does not fit in 14 bits (max {MAX_GENERATOR})")]
    Generator(u16),
    /// Sequence number past 10 bits.
    #[error("sequence number {0} does not fit in 10 bits (max {MAX_SEQUENCE})")]
    Sequence(u16),
}

impl JobId {
    /// The id with this integer value.
    pub const fn new(id: u64) -> Self {
        JobId(id)
    }

    /// The integer value.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Assemble `(timestamp_ms << 24) | (generator << 10) | sequence`.
    pub fn from_parts(
        timestamp_ms: u64,
        generator: u16,
        sequence: u16,
    ) -> Result<Self, LayoutError> {
        if timestamp_ms > MAX_TIMESTAMP {
            return Err(LayoutError::Timestamp(timestamp_ms));
        }
        if generator > MAX_GENERATOR {
            return Err(LayoutError::Generator(generator));
        }
        if sequence > MAX_SEQUENCE {
            return Err(LayoutError::Sequence(sequence));
        }
        Ok(JobId(
            (timestamp_ms << (GENERATOR_BITS + SEQUENCE_BITS))
                | (u64::from(generator) << SEQUENCE_BITS)
                | u64::from(sequence),
        ))
    }

    /// Milliseconds since the issuing instance's FLUID epoch.
    pub const fn timestamp_ms(self) -> u64 {
        self.0 >> (GENERATOR_BITS + SEQUENCE_BITS)
    }

    /// The generator that issued the id (in Flux, the broker rank).
    pub const fn generator(self) -> u16 {
        ((self.0 >> SEQUENCE_BITS) & MAX_GENERATOR as u64) as u16
    }

    /// The sequence number within its millisecond.
    pub const fn sequence(self) -> u16 {
        (self.0 & MAX_SEQUENCE as u64) as u16
    }

    /// The id in the given text form.
    pub fn encode(self, encoding: Encoding) -> String {
        match encoding {
            Encoding::Dec => self.0.to_string(),
            Encoding::Hex => self.to_hex(),
            Encoding::Dothex => self.to_dothex(),
            Encoding::Kvs => self.to_kvs(),
            Encoding::Words => self.to_words(),
            Encoding::F58 => self.to_f58(),
            Encoding::F58Plain => self.to_f58_ascii(),
            Encoding::Emoji => self.to_emoji(),
        }
    }

    /// `0x` and lowercase hex digits, no padding: `0x2a`.
    pub fn to_hex(self) -> String {
        format!("{:#x}", self.0)
    }

    /// `xxxx.xxxx.xxxx.xxxx`, most significant group first, zero padded.
    pub fn to_dothex(self) -> String {
        encode::dothex(self.0)
    }

    /// The job's KVS directory, `job.` and dothex: `job.0000.0000.0000.002a`.
    pub fn to_kvs(self) -> String {
        format!("job.{}", encode::dothex(self.0))
    }

    /// A key under the job's KVS directory: `job.0000.0000.0000.002a.eventlog`.
    pub fn kvs_key(self, key: &str) -> String {
        format!("job.{}.{key}", encode::dothex(self.0))
    }

    /// Mnemonicode words of the little-endian bytes: `w-w-w--w-w-w`.
    pub fn to_words(self) -> String {
        mnemonic::to_string(self.0.to_le_bytes())
    }

    /// F58 with the `ƒ` prefix (U+0192), as Flux prints ids in a UTF-8 locale.
    pub fn to_f58(self) -> String {
        let mut s = String::with_capacity(14);
        s.push('ƒ');
        encode::push_b58(&mut s, self.0);
        s
    }

    /// F58 with the ASCII `f` prefix (flux-core's `f58plain`).
    pub fn to_f58_ascii(self) -> String {
        let mut s = String::with_capacity(13);
        s.push('f');
        encode::push_b58(&mut s, self.0);
        s
    }

    /// Base 576 over the RFC 19 emoji table, most significant digit first.
    pub fn to_emoji(self) -> String {
        encode::emoji(self.0)
    }

    /// Parse any text form, detecting the encoding as flux-core's
    /// `flux_job_id_parse()` does: leading whitespace and a `job.` prefix are skipped;
    /// then a `.` means dothex, a `-` words, a `ƒ`/`f` prefix F58, bytes `F0 9F`
    /// emoji, `0x` hex, and anything else decimal (trailing whitespace allowed only for
    /// the last two).
    pub fn parse(s: &str) -> Result<Self, JobIdError> {
        let err = |reason| JobIdError::new(s, reason);
        let rest = trim_c_space_start(s);
        let rest = rest.strip_prefix("job.").unwrap_or(rest);
        // flux-core checks for an empty string before skipping whitespace; blank text
        // then reaches strtoull() and reads as 0. Blank is refused here instead.
        let rest = trim_c_space_start(rest);
        if rest.is_empty() {
            return Err(err(JobIdErrorReason::Empty));
        }
        let id = if rest.contains('.') {
            encode::parse_dothex(rest)
        } else if rest.contains('-') {
            encode::parse_words(rest)
        } else if rest.starts_with('ƒ') || rest.starts_with('f') {
            encode::parse_f58(rest)
        } else if rest.as_bytes().starts_with(&[0xf0, 0x9f]) {
            encode::parse_emoji(rest)
        } else if let Some(hex) = rest.strip_prefix("0x") {
            encode::parse_integer(hex, 16)
        } else {
            encode::parse_integer(rest.strip_prefix('+').unwrap_or(rest), 10)
        };
        id.map(JobId).map_err(err)
    }

    /// Parse exactly one encoding, with no whitespace or foreign prefix allowed.
    /// `F58` and `F58Plain` both accept either prefix.
    pub fn decode(s: &str, encoding: Encoding) -> Result<Self, JobIdError> {
        let err = |reason| JobIdError::new(s, reason);
        let id = match encoding {
            Encoding::Dec => encode::parse_digits(s, 10),
            Encoding::Hex => match s.strip_prefix("0x") {
                Some(hex) => encode::parse_digits(hex, 16),
                None => Err(JobIdErrorReason::BadNumber(s.chars().next().unwrap_or('x'))),
            },
            Encoding::Dothex => encode::parse_dothex(s),
            Encoding::Kvs => match s.strip_prefix("job.") {
                Some(dothex) => encode::parse_dothex(dothex),
                None => Err(JobIdErrorReason::Dothex),
            },
            Encoding::Words => encode::parse_words(s),
            Encoding::F58 | Encoding::F58Plain => encode::parse_f58(s),
            Encoding::Emoji => encode::parse_emoji(s),
        };
        id.map(JobId).map_err(err)
    }
}

/// C `isspace()` in the "C" locale: space, \t, \n, \v, \f, \r.
pub(crate) fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn trim_c_space_start(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_ascii() && is_c_space(c as u8))
}

impl fmt::Display for JobId {
    /// F58: `ƒ...`, or `f...` with the alternate flag (`{:#}`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(14);
        s.push(if f.alternate() { 'f' } else { 'ƒ' });
        encode::push_b58(&mut s, self.0);
        f.pad(&s)
    }
}

impl FromStr for JobId {
    type Err = JobIdError;

    /// Any encoding, auto-detected (see [`JobId::parse`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobId::parse(s)
    }
}

impl From<u64> for JobId {
    fn from(id: u64) -> Self {
        JobId(id)
    }
}

impl From<JobId> for u64 {
    fn from(id: JobId) -> Self {
        id.0
    }
}

impl Serialize for JobId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for JobId {
    /// A JSON integer, or (as RFC 19 recommends for JSON) a string in any encoding.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JobIdVisitor)
    }
}

struct JobIdVisitor;

impl Visitor<'_> for JobIdVisitor {
    type Value = JobId;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a job id: an unsigned 64-bit integer or an encoded id string")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<JobId, E> {
        Ok(JobId(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<JobId, E> {
        u64::try_from(v)
            .map(JobId)
            .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<JobId, E> {
        JobId::parse(v).map_err(E::custom)
    }
}

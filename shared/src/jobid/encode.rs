//! The digit-level work of each job id encoding: u64 <-> text, no prefixes or
//! whitespace handling beyond what each format itself defines.

use super::JobIdErrorReason as Reason;
use super::emoji;
use super::is_c_space;

/// The F58 alphabet: base 58 without `0`, `O`, `I` and `l`.
const B58_ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// Longest F58 body flux-core accepts (u64::MAX needs 11; one leading `1` may pad).
const MAX_F58_DIGITS: usize = 12;

/// Most emoji digits a 64-bit value needs: ceil(64 / log2(576)).
const MAX_EMOJI_DIGITS: usize = 7;

/// Value of each ASCII byte as an F58 digit, or -1.
const B58_VALUES: [i8; 128] = {
    let mut map = [-1i8; 128];
    let mut i = 0;
    while i < B58_ALPHABET.len() {
        map[B58_ALPHABET[i] as usize] = i as i8;
        i += 1;
    }
    map
};

pub(super) fn dothex(id: u64) -> String {
    format!(
        "{:04x}.{:04x}.{:04x}.{:04x}",
        (id >> 48) & 0xffff,
        (id >> 32) & 0xffff,
        (id >> 16) & 0xffff,
        id & 0xffff
    )
}

/// Append the base 58 digits of `id`, most significant first (0 is `1`).
pub(super) fn push_b58(out: &mut String, mut id: u64) {
    let mut buf = [0u8; 11];
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = B58_ALPHABET[(id % 58) as usize];
        id /= 58;
        if id == 0 {
            break;
        }
    }
    out.extend(buf[start..].iter().map(|&b| char::from(b)));
}

pub(super) fn emoji(mut id: u64) -> String {
    let mut digits = [0usize; MAX_EMOJI_DIGITS];
    let mut n = 0;
    loop {
        digits[n] = (id % emoji::BASE) as usize;
        n += 1;
        id /= emoji::BASE;
        if id == 0 {
            break;
        }
    }
    let mut s = String::with_capacity(4 * n);
    for &d in digits[..n].iter().rev() {
        s.push_str(&emoji::DIGITS[4 * d..4 * d + 4]);
    }
    s
}

/// Digits in `radix` as C `strtoull()` reads them after any sign or `0x`: at least
/// one digit, then nothing but whitespace.
pub(super) fn parse_integer(s: &str, radix: u32) -> Result<u64, Reason> {
    let end = s.find(|c: char| !c.is_digit(radix)).unwrap_or(s.len());
    let (digits, tail) = s.split_at(end);
    if digits.is_empty() {
        return Err(match s.chars().next() {
            Some(c) => Reason::BadNumber(c),
            None => Reason::Empty,
        });
    }
    // strtoull() reports ERANGE before anyone looks at what follows the digits.
    let value = accumulate(digits, radix)?;
    match tail
        .chars()
        .find(|&c| !(c.is_ascii() && is_c_space(c as u8)))
    {
        Some(c) => Err(Reason::BadNumber(c)),
        None => Ok(value),
    }
}

/// Only digits in `radix`, at least one.
pub(super) fn parse_digits(s: &str, radix: u32) -> Result<u64, Reason> {
    match s.chars().find(|c| !c.is_digit(radix)) {
        Some(c) => Err(Reason::BadNumber(c)),
        None if s.is_empty() => Err(Reason::Empty),
        None => accumulate(s, radix),
    }
}

fn accumulate(digits: &str, radix: u32) -> Result<u64, Reason> {
    digits.chars().try_fold(0u64, |acc, c| {
        let d = u64::from(c.to_digit(radix).unwrap_or(0));
        acc.checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(d))
            .ok_or(Reason::Overflow)
    })
}

/// Exactly four `.`-separated groups of 1 to 4 hex digits, either case.
pub(super) fn parse_dothex(s: &str) -> Result<u64, Reason> {
    let mut value = 0u64;
    let mut groups = 0;
    for group in s.split('.') {
        groups += 1;
        if groups > 4
            || group.is_empty()
            || group.len() > 4
            || !group.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(Reason::Dothex);
        }
        let g = u64::from_str_radix(group, 16).map_err(|_| Reason::Dothex)?;
        value = (value << 16) | g;
    }
    if groups == 4 {
        Ok(value)
    } else {
        Err(Reason::Dothex)
    }
}

/// Mnemonicode words (any non-letters separate them, any case) spelling 8 bytes.
///
/// flux-core's decoder stops quietly at an unknown word and keeps what it decoded
/// so far, so six good words followed by junk pass there; any unknown word is
/// refused here.
pub(super) fn parse_words(s: &str) -> Result<u64, Reason> {
    let lower = s.to_ascii_lowercase();
    let mut bytes = Vec::with_capacity(8);
    if let Err(e) = mnemonic::decode(&lower, &mut bytes) {
        return Err(match e {
            mnemonic::Error::UnrecognizedWord => words(&lower)
                .find(|w| !mnemonic::MN_WORDS.contains(&w.as_bytes()))
                .map(|w| Reason::UnknownWord(w.to_owned()))
                .unwrap_or_else(|| Reason::Words(e.to_string())),
            other => Reason::Words(other.to_string().to_lowercase()),
        });
    }
    match <[u8; 8]>::try_from(bytes.as_slice()) {
        Ok(b) => Ok(u64::from_le_bytes(b)),
        Err(_) => Err(Reason::Words(format!(
            "found {} words",
            words(&lower).count()
        ))),
    }
}

fn words(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
}

/// `ƒ` or `f`, then 1 to 12 base 58 digits.
pub(super) fn parse_f58(s: &str) -> Result<u64, Reason> {
    let body = s
        .strip_prefix('ƒ')
        .or_else(|| s.strip_prefix('f'))
        .ok_or(Reason::F58Prefix)?;
    if body.is_empty() {
        return Err(Reason::F58Empty);
    }
    let n = body.chars().count();
    if n > MAX_F58_DIGITS {
        return Err(Reason::F58TooLong(n));
    }
    // flux-core lets a 12-digit body wrap around 2^64; an overflow is an error here.
    body.chars().try_fold(0u64, |acc, c| {
        let d = u8::try_from(c)
            .ok()
            .and_then(|b| B58_VALUES.get(usize::from(b)))
            .and_then(|&v| u64::try_from(v).ok())
            .ok_or(Reason::F58Digit(c))?;
        acc.checked_mul(58)
            .and_then(|v| v.checked_add(d))
            .ok_or(Reason::Overflow)
    })
}

/// 1 to 7 digits of the RFC 19 emoji table, most significant first.
pub(super) fn parse_emoji(s: &str) -> Result<u64, Reason> {
    if s.is_empty() {
        return Err(Reason::Empty);
    }
    let n = s.chars().count();
    if n > MAX_EMOJI_DIGITS {
        return Err(Reason::EmojiTooLong(n));
    }
    // flux-core lets 7 digits wrap around 2^64; an overflow is an error here.
    s.chars().try_fold(0u64, |acc, c| {
        let d = emoji_value(c).ok_or_else(|| Reason::EmojiDigit(c.to_string()))?;
        acc.checked_mul(emoji::BASE)
            .and_then(|v| v.checked_add(d))
            .ok_or(Reason::Overflow)
    })
}

fn emoji_value(c: char) -> Option<u64> {
    if c.len_utf8() != 4 {
        return None;
    }
    // Every table entry is 4 bytes, so a match can only start on a multiple of 4.
    emoji::DIGITS.find(c).map(|at| (at / 4) as u64)
}

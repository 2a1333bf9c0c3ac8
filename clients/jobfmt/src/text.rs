//! User text made safe for a terminal: names, notes, reasons and memos
//! that other users choose reach the terminal of whoever lists them, so no
//! escape sequence or bidi override in them may act on it.

use std::borrow::Cow;
use std::fmt::Write as _;

/// A user-supplied string made safe to show on a terminal: control characters
/// (C0 including ESC, TAB, CR and LF, then DEL and C1) and the Unicode
/// characters that reorder or break the text around them (bidi embeddings,
/// overrides, isolates and marks, line and paragraph separators) are written
/// as visible escapes (`\x1b`, `\n`, `\u{202e}`); everything else, non-ASCII
/// letters included, is left as it is.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !needs_escape(c) {
            out.push(c);
            continue;
        }
        // Writing to a String cannot fail.
        let _ = match c {
            '\t' => write!(out, "\\t"),
            '\n' => write!(out, "\\n"),
            '\r' => write!(out, "\\r"),
            c if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32),
            c => write!(out, "\\u{{{:x}}}", c as u32),
        };
    }
    Cow::Owned(out)
}

/// Whether `c` must not reach a terminal as it is.
fn needs_escape(c: char) -> bool {
    c.is_control() // C0, DEL, C1
        || matches!(
            c,
            '\u{061c}'                 // Arabic letter mark
            | '\u{200e}' | '\u{200f}' // left-to-right and right-to-left marks
            | '\u{2028}' | '\u{2029}' // line and paragraph separators
            | '\u{202a}'..='\u{202e}' // bidi embeddings and overrides
            | '\u{2066}'..='\u{2069}' // bidi isolates
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_controls_and_bidi() {
        assert_eq!(printable("\x1b[2Jgone"), "\\x1b[2Jgone");
        assert_eq!(printable("a\tb\r\nc"), "a\\tb\\r\\nc");
        assert_eq!(printable("\0\x07\x7f"), "\\x00\\x07\\x7f");
        // C1: CSI (U+009B) starts a sequence on its own on some terminals.
        assert_eq!(printable("\u{9b}2J\u{85}"), "\\u{9b}2J\\u{85}");
        assert_eq!(
            printable("evil\u{202e}txt.exe\u{2066}x\u{2069}"),
            "evil\\u{202e}txt.exe\\u{2066}x\\u{2069}"
        );
        assert_eq!(
            printable("\u{202a}\u{202d}\u{2067}\u{2068}"),
            "\\u{202a}\\u{202d}\\u{2067}\\u{2068}"
        );
        assert_eq!(printable("\u{200f}\u{2028}"), "\\u{200f}\\u{2028}");
    }

    #[test]
    fn printable_leaves_text_alone() {
        for s in [
            "",
            "hello world",
            "ƒ2bX9",
            "naïve Ωmega 日本語 ✔",
            "a\\x1b literal",
        ] {
            assert!(matches!(printable(s), Cow::Borrowed(_)), "{s:?}");
            assert_eq!(printable(s), s);
        }
    }

    #[test]
    fn printable_output_has_no_control_bytes() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let out = printable(&all);
        assert!(!out.chars().any(needs_escape));
        assert!(!out.bytes().any(|b| b < 0x20 || b == 0x7f));
    }
}

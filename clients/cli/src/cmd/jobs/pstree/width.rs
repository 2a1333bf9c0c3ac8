//! How wide `pstree` lines may be: flux-pstree cuts each tree line to the
//! terminal's width (ending it in `+`) unless `-l` is given, finding the
//! width as Python's `shutil.get_terminal_size((132, 25))` does.

/// The width used when neither $COLUMNS nor stdout tells one (flux's
/// fallback, so piped output is cut as flux cuts it).
pub const FALLBACK: usize = 132;

/// $COLUMNS when it is a positive number, else the width of the terminal
/// on stdout, else [`FALLBACK`].
pub fn terminal_width() -> usize {
    let columns = std::env::var("COLUMNS").ok();
    let tty = || {
        rustix::termios::tcgetwinsize(std::io::stdout())
            .ok()
            .map(|w| usize::from(w.ws_col))
    };
    choose(columns.as_deref(), tty)
}

/// The width from $COLUMNS (`columns`) or the terminal (`tty`), as Python
/// picks it: a terminal that reports 0 columns gets the fallback too.
fn choose(columns: Option<&str>, tty: impl FnOnce() -> Option<usize>) -> usize {
    if let Some(n) = columns
        .and_then(|c| c.trim().parse::<i64>().ok())
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    tty().filter(|n| *n > 0).unwrap_or(FALLBACK)
}

/// `line` cut to `width` characters, its last one replaced by `+`, when it
/// is longer; `None` leaves it whole (`-l`).
pub fn truncate(line: &str, width: Option<usize>) -> String {
    match width {
        Some(w) if w > 0 && line.chars().count() > w => {
            let mut s: String = line.chars().take(w - 1).collect();
            s.push('+');
            s
        }
        _ => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_then_terminal_then_fallback() {
        assert_eq!(choose(Some("80"), || Some(40)), 80);
        assert_eq!(choose(Some(" 72 "), || None), 72);
        // Python ignores a COLUMNS that is not a positive integer.
        assert_eq!(choose(Some("0"), || Some(40)), 40);
        assert_eq!(choose(Some("-5"), || Some(40)), 40);
        assert_eq!(choose(Some("wide"), || Some(40)), 40);
        assert_eq!(choose(None, || Some(40)), 40);
        assert_eq!(choose(None, || Some(0)), FALLBACK);
        assert_eq!(choose(None, || None), FALLBACK);
    }

    #[test]
    fn long_lines_end_in_a_plus() {
        assert_eq!(truncate("├── sleep", Some(9)), "├── sleep");
        assert_eq!(truncate("├── sleeper", Some(9)), "├── slee+");
        // Characters, not bytes: the box characters are three bytes each.
        assert_eq!(truncate("│   └── x", Some(5)), "│   +");
        assert_eq!(truncate("abc", Some(1)), "+");
        assert_eq!(truncate("a long line", None), "a long line");
    }
}

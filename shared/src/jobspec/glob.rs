//! Name patterns as flux matches `--env`, `--env-remove` and `--rlimit`
//! rules (its `filter_dict`): a shell glob(7) on the whole name (Python's
//! `fnmatch`), or `/REGEX/`, a regular expression matched at the start of
//! the name (Python's `re.match`).

/// A name pattern of an environment or rlimit rule.
#[derive(Debug, Clone)]
pub enum NamePattern {
    /// A shell glob on the whole name.
    Glob(String),
    /// `/REGEX/`: anchored at the start of the name only, as `re.match`.
    Regex(regex::Regex),
}

/// A `/REGEX/` pattern that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid regular expression /{pattern}/: {reason}")]
pub struct PatternError {
    /// The expression between the slashes.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: String,
}

impl NamePattern {
    /// `pat` as flux reads it: a leading `/` makes the rest, trailing
    /// slashes stripped, a regular expression.
    pub fn parse(pat: &str) -> Result<NamePattern, PatternError> {
        let Some(re) = pat.strip_prefix('/') else {
            return Ok(NamePattern::Glob(pat.to_string()));
        };
        let re = re.trim_end_matches('/');
        regex::Regex::new(&format!("^(?:{re})"))
            .map(NamePattern::Regex)
            .map_err(|e| PatternError {
                pattern: re.to_string(),
                reason: e
                    .to_string()
                    .lines()
                    .last()
                    .unwrap_or("")
                    .trim()
                    .to_string(),
            })
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            NamePattern::Glob(g) => glob_match(g, name),
            NamePattern::Regex(re) => re.is_match(name),
        }
    }
}

/// Shell glob(7) on a whole string: `*`, `?`, `[...]`.
pub fn glob_match(pat: &str, s: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some(('?', rest)) => !s.is_empty() && go(rest, &s[1..]),
            Some(('[', rest)) => {
                let Some(end) = rest.iter().position(|&c| c == ']') else {
                    return s.first() == Some(&'[') && go(rest, &s[1..]);
                };
                let (class, after) = (&rest[..end], &rest[end + 1..]);
                let Some(&c) = s.first() else { return false };
                let (neg, class) = match class.first() {
                    Some('!') | Some('^') => (true, &class[1..]),
                    _ => (false, class),
                };
                let mut hit = false;
                let mut i = 0;
                while i < class.len() {
                    if i + 2 < class.len() && class[i + 1] == '-' {
                        hit |= class[i] <= c && c <= class[i + 2];
                        i += 3;
                    } else {
                        hit |= class[i] == c;
                        i += 1;
                    }
                }
                hit != neg && go(after, &s[1..])
            }
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    let p: Vec<char> = pat.chars().collect();
    let s: Vec<char> = s.chars().collect();
    go(&p, &s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_patterns_match_at_the_start() {
        let p = NamePattern::parse("/^SLURM_/").unwrap();
        assert!(p.matches("SLURM_JOBID"));
        assert!(!p.matches("XSLURM_JOBID"));
        // re.match: anchored at the start, not the end.
        let p = NamePattern::parse("/FOO").unwrap();
        assert!(p.matches("FOOBAR"));
        assert!(!p.matches("BARFOO"));
        let p = NamePattern::parse("/(A|B)_.*_X$//").unwrap();
        assert!(p.matches("A_1_X") && p.matches("B__X") && !p.matches("A_1_XY"));
        // Without a slash: a glob on the whole name.
        let p = NamePattern::parse("FOO*").unwrap();
        assert!(p.matches("FOOBAR") && !p.matches("XFOO"));
        let e = NamePattern::parse("/a(/").unwrap_err();
        assert_eq!(e.pattern, "a(");
    }
}

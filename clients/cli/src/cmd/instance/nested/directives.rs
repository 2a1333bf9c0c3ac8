//! Directives in batch scripts (RFC 36, as `flux batch` reads them): lines
//! `# flux: OPTIONS` (or `# fluxgate: OPTIONS`) in the script's first block
//! of comments become command-line options of `batch`, placed before the
//! ones actually given so that those win.

/// The option words of the directives at the top of `script`. Scanning
/// stops at the first line that is neither blank nor a comment, as flux
/// stops at the first command, so a `# flux:` deep in the body is ignored.
pub fn directive_args(script: &str) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    for (n, line) in script.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() {
            continue;
        }
        let Some(comment) = line.strip_prefix('#') else {
            break;
        };
        if let Some(rest) = sentinel(comment) {
            let words = split_words(rest).map_err(|e| format!("line {}: {e}", n + 1))?;
            args.extend(words);
        }
    }
    Ok(args)
}

/// The text after `flux:` or `fluxgate:` (any case, spaces before it).
fn sentinel(comment: &str) -> Option<&str> {
    let c = comment.trim_start();
    for s in ["fluxgate:", "flux:"] {
        if c.len() >= s.len() && c.is_char_boundary(s.len()) && c[..s.len()].eq_ignore_ascii_case(s)
        {
            return Some(&c[s.len()..]);
        }
    }
    None
}

/// Split a directive as the shell would split words: single and double
/// quotes, backslash escapes, `#` after a blank starts a comment.
fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            '#' if cur.is_none() => break,
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err("unterminated double quote".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => cur.get_or_insert_with(String::new).push(c),
                None => return Err("trailing backslash".into()),
            },
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(w) = cur {
        words.push(w);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_at_the_top_only() {
        let script = "#!/bin/sh\n# flux: -N2 --job-name='my job'\n\n#FLUX: -t 5m\n\
                      # fluxgate: --setattr=a=\"b c\"  # why\n# plain comment\n\
                      hostname\n# flux: -n 9\n";
        assert_eq!(
            directive_args(script).unwrap(),
            ["-N2", "--job-name=my job", "-t", "5m", "--setattr=a=b c"]
        );
    }

    #[test]
    fn no_directives() {
        assert!(directive_args("#!/bin/sh\necho hi\n").unwrap().is_empty());
        assert!(directive_args("").unwrap().is_empty());
    }

    #[test]
    fn bad_quotes_name_the_line() {
        let e = directive_args("#!/bin/sh\n# flux: -N 'oops\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }

    #[test]
    fn words() {
        assert_eq!(
            split_words(r#" a\ b "c\"d" '' e"#).unwrap(),
            ["a b", "c\"d", "", "e"]
        );
    }
}

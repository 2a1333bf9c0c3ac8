//! The command template of `bulksubmit`: Python `str.format` replacement
//! fields as flux-bulksubmit(1) uses them (`{}`, `{0}`, `{seq}`, `{seq1}`,
//! `{cc}`, and the attributes `{.%}`, `{./}`, `{./%}`, `{.//}`, also with
//! an index: `{1.%}`, and those of `--define`: `{.NAME}`), and the
//! combinations of the input lists.

use thiserror::Error;

/// A template that cannot be filled.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TemplateError {
    /// A field names an input that does not exist.
    #[error("{{{0}}}: there are only {1} input(s)")]
    NoSuchInput(usize, usize),
    /// A field name bulksubmit does not know.
    #[error("unknown replacement field {{{0}}}")]
    Unknown(String),
    /// A `{` or `}` without its partner.
    #[error("unmatched brace in {0:?}")]
    Unmatched(String),
}

/// Does any argument hold a replacement field for the inputs?
pub fn has_input_fields(args: &[String]) -> bool {
    args.iter().any(|a| {
        fields(a)
            .iter()
            .any(|f| !matches!(f.as_str(), "cc" | "seq" | "seq1"))
    })
}

/// The field names of `s`, ignoring `{{` and `}}` escapes.
fn fields(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '{' {
            if chars.peek() == Some(&'{') {
                chars.next();
                continue;
            }
            out.push(chars.by_ref().take_while(|c| *c != '}').collect());
        }
    }
    out
}

/// The attributes `--define` adds: `defined(NAME, input)` is NAME's value
/// for that input, or `None` when no NAME is defined.
pub type Defined<'a> = dyn FnMut(&str, &str) -> Option<String> + 'a;

/// Fill `s` from `inputs` (the `seq`-th combination), with `defined` for
/// attributes other than the built-in ones. `{cc}` is left for the submit
/// step, which knows the copy. Auto-numbered `{}` count across the whole
/// command, as Python's format does across one call; `next` is that
/// counter.
pub fn fill(
    s: &str,
    inputs: &[String],
    seq: usize,
    next: &mut usize,
    defined: &mut Defined,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // A mustache tag ({{id}}, for the job shell's output paths) is
            // kept as written, as flux-bulksubmit keeps it.
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push_str("{{");
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push_str("}}");
            }
            '}' => return Err(TemplateError::Unmatched(s.to_string())),
            '{' => {
                let mut name = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    name.push(c);
                }
                if !closed {
                    return Err(TemplateError::Unmatched(s.to_string()));
                }
                out.push_str(&field(&name, inputs, seq, next, defined)?);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

fn field(
    name: &str,
    inputs: &[String],
    seq: usize,
    next: &mut usize,
    defined: &mut Defined,
) -> Result<String, TemplateError> {
    match name {
        "seq" => return Ok(seq.to_string()),
        "seq1" => return Ok((seq + 1).to_string()),
        "cc" => return Ok("{cc}".to_string()),
        _ => {}
    }
    // `INDEX.ATTR`, either part may be empty (Python's auto-numbering).
    let (index, attr) = match name.find('.') {
        Some(dot) => (&name[..dot], Some(&name[dot + 1..])),
        None => (name, None),
    };
    let i = if index.is_empty() {
        let i = *next;
        *next += 1;
        i
    } else {
        index
            .parse::<usize>()
            .map_err(|_| TemplateError::Unknown(name.to_string()))?
    };
    let input = inputs
        .get(i)
        .ok_or(TemplateError::NoSuchInput(i, inputs.len()))?;
    match attr {
        None => Ok(input.clone()),
        Some("%") => Ok(strip_extension(input).to_string()),
        Some("/") => Ok(basename(input).to_string()),
        Some("/%") => Ok(strip_extension(basename(input)).to_string()),
        Some("//") => Ok(dirname(input).to_string()),
        Some(attr) => defined(attr, input).ok_or_else(|| TemplateError::Unknown(name.to_string())),
    }
}

/// The last path component, as Python's `os.path.basename`.
fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// All but the last path component, as Python's `os.path.dirname`.
fn dirname(s: &str) -> &str {
    match s.rfind('/') {
        Some(i) => {
            let head = &s[..i + 1];
            match head.trim_end_matches('/') {
                "" => head,
                trimmed => trimmed,
            }
        }
        None => "",
    }
}

/// `s` without its extension, as Python's `os.path.splitext`: the last
/// dot of the last component, unless the name only starts with dots.
fn strip_extension(s: &str) -> &str {
    let base_at = s.rfind('/').map_or(0, |i| i + 1);
    let base = &s[base_at..];
    match base.rfind('.') {
        Some(dot) if base[..dot].chars().any(|c| c != '.') => &s[..base_at + dot],
        _ => s,
    }
}

/// An input list and the lists linked to it (`:::+`, `::::+`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Group {
    /// Its own items.
    pub items: Vec<String>,
    /// Linked lists, each used one item per item of `items`, cycled.
    pub linked: Vec<Vec<String>>,
}

/// Every combination of the groups: one item of each group's own list,
/// the first group varying slowest, with each linked list's item of the
/// same position (cycled when shorter). Inputs are numbered in the order
/// the lists were given.
pub fn combinations(groups: &[Group]) -> Vec<Vec<String>> {
    let lists: Vec<Vec<Vec<String>>> = groups
        .iter()
        .map(|g| {
            (0..g.items.len())
                .map(|i| {
                    let mut one = vec![g.items[i].clone()];
                    one.extend(
                        g.linked
                            .iter()
                            .filter(|l| !l.is_empty())
                            .map(|l| l[i % l.len()].clone()),
                    );
                    one
                })
                .collect()
        })
        .collect();
    cross_product(&lists)
        .into_iter()
        .map(|parts| parts.concat())
        .collect()
}

/// Every combination of one item from each list, the first list varying
/// slowest (as flux and GNU parallel order them). No lists: no combination.
pub fn cross_product<T: Clone>(lists: &[Vec<T>]) -> Vec<Vec<T>> {
    if lists.is_empty() {
        return Vec::new();
    }
    let mut combos: Vec<Vec<T>> = vec![Vec::new()];
    for list in lists {
        combos = combos
            .iter()
            .flat_map(|prefix| {
                list.iter().map(move |item| {
                    let mut c = prefix.clone();
                    c.push(item.clone());
                    c
                })
            })
            .collect();
    }
    combos
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn fill_all(args: &[&str], inputs: &[&str], seq: usize) -> Result<Vec<String>, TemplateError> {
        let inputs = v(inputs);
        let mut next = 0;
        args.iter()
            .map(|a| fill(a, &inputs, seq, &mut next, &mut |_, _| None))
            .collect()
    }

    /// One row: template arguments, inputs, sequence number, expected command.
    type Row<'a> = (&'a [&'a str], &'a [&'a str], usize, &'a [&'a str]);

    #[test]
    fn fields_as_flux_bulksubmit() {
        let table: &[Row] = &[
            (&["echo", "{}"], &["1"], 0, &["echo", "1"]),
            (&["echo", "{1}", "{0}"], &["1", "3"], 0, &["echo", "3", "1"]),
            (&["echo", "{}", "{}"], &["a", "b"], 0, &["echo", "a", "b"]),
            (&["x{seq}-{seq1}"], &[], 4, &["x4-5"]),
            (&["{cc}:{}"], &["a"], 0, &["{cc}:a"]),
            (&["{{}}", "{0}.out"], &["f"], 0, &["{{}}", "f.out"]),
            (
                &["{.%}", "{./}", "{./%}", "{.//}"],
                &["d/e/x.tar.gz", "a/b.c", "p/q.r", "/s/t"],
                0,
                &["d/e/x.tar", "b.c", "q", "/s"],
            ),
            (&["{1.%}", "{0./}"], &["a/b", "c.d"], 0, &["c", "b"]),
            (
                &["{.%}", "{./%}", "{.//}"],
                &[".bashrc", "x/.y", "f"],
                0,
                &[".bashrc", ".y", ""],
            ),
        ];
        for (args, inputs, seq, want) in table {
            assert_eq!(fill_all(args, inputs, *seq).unwrap(), v(want), "{args:?}");
        }
    }

    #[test]
    fn bad_fields_are_errors() {
        assert_eq!(
            fill_all(&["{2}"], &["a"], 0),
            Err(TemplateError::NoSuchInput(2, 1))
        );
        assert_eq!(
            fill_all(&["{}", "{}"], &["a"], 0),
            Err(TemplateError::NoSuchInput(1, 1))
        );
        assert!(matches!(
            fill_all(&["{x}"], &[], 0),
            Err(TemplateError::Unknown(_))
        ));
        assert!(matches!(
            fill_all(&["{"], &[], 0),
            Err(TemplateError::Unmatched(_))
        ));
        assert!(matches!(
            fill_all(&["}"], &[], 0),
            Err(TemplateError::Unmatched(_))
        ));
    }

    #[test]
    fn defined_attributes_apply_to_their_input() {
        let inputs = v(&["a.txt", "b"]);
        let mut defined = |name: &str, input: &str| match name {
            "up" => Some(input.to_uppercase()),
            "len" => Some(input.len().to_string()),
            _ => None,
        };
        let mut next = 0;
        let mut fill1 = |s: &str| fill(s, &inputs, 0, &mut next, &mut defined);
        // `{.NAME}` takes the next auto-numbered input, as `{}` does.
        assert_eq!(fill1("{.up}-{.len}").unwrap(), "A.TXT-1");
        assert_eq!(fill1("{1.up}{0.len}{0.%}").unwrap(), "B5a");
        assert_eq!(
            fill1("{0.nope}"),
            Err(TemplateError::Unknown("0.nope".into()))
        );
        assert_eq!(fill1("{0.}"), Err(TemplateError::Unknown("0.".into())));
        assert!(has_input_fields(&v(&["{.up}"])));
    }

    #[test]
    fn input_fields_are_detected() {
        assert!(has_input_fields(&v(&["echo", "{}"])));
        assert!(has_input_fields(&v(&["{0}"])));
        assert!(!has_input_fields(&v(&["echo", "{cc}", "{seq}", "{{}}"])));
    }

    #[test]
    fn linked_lists_pair_up_and_cycle() {
        let g = |items: &[&str], linked: &[&[&str]]| Group {
            items: v(items),
            linked: linked.iter().map(|l| v(l)).collect(),
        };
        // flux: echo {0} {1} ::: 1 2 :::+ 3 4  ->  1 3, 2 4
        assert_eq!(
            combinations(&[g(&["1", "2"], &[&["3", "4"]])]),
            vec![v(&["1", "3"]), v(&["2", "4"])]
        );
        // A shorter linked list is cycled; other lists still combine.
        assert_eq!(
            combinations(&[g(&["1", "2", "3"], &[&["a"]]), g(&["x", "y"], &[])]),
            vec![
                v(&["1", "a", "x"]),
                v(&["1", "a", "y"]),
                v(&["2", "a", "x"]),
                v(&["2", "a", "y"]),
                v(&["3", "a", "x"]),
                v(&["3", "a", "y"]),
            ]
        );
    }

    #[test]
    fn cross_product_first_list_slowest() {
        let got = cross_product(&[v(&["1", "2"]), v(&["3", "4"])]);
        assert_eq!(
            got,
            vec![
                v(&["1", "3"]),
                v(&["1", "4"]),
                v(&["2", "3"]),
                v(&["2", "4"])
            ]
        );
        assert!(cross_product::<String>(&[]).is_empty());
        assert!(cross_product(&[v(&["a"]), vec![]]).is_empty());
    }
}

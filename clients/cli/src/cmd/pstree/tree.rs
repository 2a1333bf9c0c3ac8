//! The tree drawing of `pstree`: a `.` root (left out when details are
//! shown), box-drawing branches, identical leaves combined as `n*[label]`,
//! as flux-pstree(1) prints them.

/// One job in the tree, with the jobs of the instance it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// What is printed for the job.
    pub label: String,
    /// The details columns printed before the tree (with -x).
    pub details: Option<String>,
    /// Jobs of the instance inside this job, if it is one.
    pub children: Vec<Node>,
}

/// Siblings with leaves of the same label merged, in order of first
/// appearance, labelled `n*[label]` when there is more than one.
pub fn combine(nodes: Vec<Node>) -> Vec<Node> {
    let mut out: Vec<(Node, usize)> = Vec::new();
    for n in nodes {
        let n = Node {
            children: combine(n.children),
            ..n
        };
        if n.children.is_empty()
            && let Some(slot) = out
                .iter_mut()
                .find(|(o, _)| o.children.is_empty() && o.label == n.label)
        {
            slot.1 += 1;
            continue;
        }
        out.push((n, 1));
    }
    out.into_iter()
        .map(|(n, count)| match count {
            1 => n,
            c => Node {
                label: format!("{c}*[{}]", n.label),
                ..n
            },
        })
        .collect()
}

/// The tree, one line each: the header (when details are shown; a blank
/// one, as `-n` gives, only sets the width of the root's columns), then
/// the `root` line when there is one, the jobs below it on branches;
/// without a root the top-level jobs have no branches.
pub fn render(roots: &[Node], header: Option<&str>, root: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(h) = header.filter(|h| !h.trim().is_empty()) {
        out.push(h.to_string());
    }
    if let Some(r) = root {
        // Details columns are blank for the enclosing instance.
        out.push(match header {
            Some(h) => format!("{:w$} {r}", "", w = h.chars().count()),
            None => r.to_string(),
        });
    }
    draw(roots, "", root.is_none(), &mut out);
    out
}

fn draw(nodes: &[Node], prefix: &str, top: bool, out: &mut Vec<String>) {
    for (i, n) in nodes.iter().enumerate() {
        let last = i + 1 == nodes.len();
        // With details there is no root: the top level has no branches.
        let (branch, below) = match (top, last) {
            (true, _) => ("", ""),
            (false, true) => ("└── ", "    "),
            (false, false) => ("├── ", "│   "),
        };
        let tree = format!("{prefix}{branch}{}", n.label);
        out.push(match &n.details {
            Some(d) => format!("{d} {tree}"),
            None => tree,
        });
        draw(&n.children, &format!("{prefix}{below}"), false, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(l: &str, children: Vec<Node>) -> Node {
        Node {
            label: l.into(),
            details: None,
            children,
        }
    }

    fn leaf(l: &str) -> Node {
        node(l, vec![])
    }

    #[test]
    fn draws_as_flux_pstree() {
        let roots = vec![
            node(
                "flux",
                vec![
                    node("flux", vec![leaf("sleep"), leaf("sleep")]),
                    node("flux", vec![leaf("sleep")]),
                ],
            ),
            leaf("hostname:CD"),
        ];
        assert_eq!(
            render(&combine(roots), None, Some(".")),
            [
                ".",
                "├── flux",
                "│   ├── flux",
                "│   │   └── 2*[sleep]",
                "│   └── flux",
                "│       └── sleep",
                "└── hostname:CD",
            ]
        );
        assert_eq!(render(&[], None, Some(".")), ["."]);
        assert_eq!(render(&[leaf("a"), leaf("b")], None, None), ["a", "b"]);
    }

    #[test]
    fn leaves_combine_by_label_not_by_place() {
        let got = combine(vec![
            leaf("a:R"),
            leaf("b:CD"),
            leaf("a:R"),
            node("a:R", vec![leaf("x")]),
        ]);
        let labels: Vec<&str> = got.iter().map(|n| n.label.as_str()).collect();
        assert_eq!(labels, ["2*[a:R]", "b:CD", "a:R"]);
    }

    #[test]
    fn details_come_before_the_branches_without_a_root() {
        let d = |s: &str| Some(s.to_string());
        let roots = vec![Node {
            label: "flux".into(),
            details: d("  A"),
            children: vec![
                Node {
                    label: "sleep".into(),
                    details: d("  B"),
                    children: vec![],
                },
                Node {
                    label: "sleep".into(),
                    details: d("  C"),
                    children: vec![],
                },
            ],
        }];
        assert_eq!(
            render(&roots, Some("HDR"), None),
            ["HDR", "  A flux", "  B ├── sleep", "  C └── sleep"]
        );
    }
}

//! The tree drawing of `pstree`: top-level nodes flush left, their
//! descendants on branches (in one of the connector styles), identical
//! leaves combined as `n*[label]`, each line cut to the terminal's width,
//! as flux-pstree(1) prints them (flux-core `flux.util.Tree`).

use super::connectors::Style;
use super::width::truncate;

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

/// Siblings with leaves of the same details and label merged, in order of
/// first appearance, labelled `n*[label]` when there is more than one.
pub fn combine(nodes: Vec<Node>) -> Vec<Node> {
    let mut out: Vec<(Node, usize)> = Vec::new();
    for n in nodes {
        let n = Node {
            children: combine(n.children),
            ..n
        };
        if n.children.is_empty()
            && let Some(slot) = out.iter_mut().find(|(o, _)| {
                o.children.is_empty() && o.label == n.label && o.details == n.details
            })
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

/// How the tree is drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drawing {
    /// The connectors.
    pub style: Style,
    /// Cut lines longer than this; `None` with `-l`.
    pub width: Option<usize>,
}

/// The tree, one line each: every node of `top` flush left (the `.` of
/// the enclosing instance, or the jobs when it is skipped), and below each
/// its descendants on branches.
pub fn render(top: &[Node], how: Drawing) -> Vec<String> {
    let mut out = Vec::new();
    for n in top {
        line(n, "", "", how, &mut out);
        branches(&n.children, "", how, &mut out);
    }
    out
}

/// The line of `n`: its details, the branches of the levels above
/// (`prefix`), its own connector and its label.
fn line(n: &Node, prefix: &str, connector: &str, how: Drawing, out: &mut Vec<String>) {
    let tree = format!("{prefix}{connector}{}", n.label);
    // flux puts no separating space after details that came out empty.
    let full = match &n.details {
        Some(d) if !d.is_empty() => format!("{d} {tree}"),
        _ => tree,
    };
    out.push(truncate(&full, how.width));
}

fn branches(nodes: &[Node], prefix: &str, how: Drawing, out: &mut Vec<String>) {
    let c = how.style.connectors();
    for (i, n) in nodes.iter().enumerate() {
        let (connector, below) = if i + 1 == nodes.len() {
            (c.elbow, c.blank)
        } else {
            (c.tee, c.pipe)
        };
        line(n, prefix, connector, how, out);
        branches(&n.children, &format!("{prefix}{below}"), how, out);
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

    fn with(l: &str, d: &str, children: Vec<Node>) -> Node {
        Node {
            label: l.into(),
            details: Some(d.into()),
            children,
        }
    }

    /// flux-pstree(1)'s example hierarchy under a `.` root.
    fn example() -> Vec<Node> {
        let jobs = vec![
            node(
                "flux",
                vec![
                    node("flux", vec![leaf("sleep"), leaf("sleep")]),
                    node("flux", vec![leaf("sleep")]),
                ],
            ),
            leaf("hostname:CD"),
        ];
        vec![node(".", combine(jobs))]
    }

    fn drawn(style: Style) -> Vec<String> {
        render(&example(), Drawing { style, width: None })
    }

    #[test]
    fn box_connectors_by_default() {
        assert_eq!(
            drawn(Style::default()),
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
        assert_eq!(render(&[leaf(".")], Drawing::default()), ["."]);
    }

    #[test]
    fn ascii_connectors() {
        assert_eq!(
            drawn(Style::Ascii),
            [
                ".",
                "|-- flux",
                "|   |-- flux",
                "|   |   `-- 2*[sleep]",
                "|   `-- flux",
                "|       `-- sleep",
                "`-- hostname:CD",
            ]
        );
    }

    #[test]
    fn compact_connectors() {
        assert_eq!(
            drawn(Style::Compact),
            [
                ".",
                "├─flux",
                "│ ├─flux",
                "│ │ └─2*[sleep]",
                "│ └─flux",
                "│   └─sleep",
                "└─hostname:CD",
            ]
        );
    }

    #[test]
    fn skipped_root_puts_every_job_flush_left() {
        let top = vec![node("a", vec![leaf("x"), leaf("y")]), leaf("b")];
        assert_eq!(
            render(&top, Drawing::default()),
            ["a", "├── x", "└── y", "b"]
        );
    }

    #[test]
    fn lines_are_cut_to_the_width_with_their_details() {
        let top = vec![with(
            "flux",
            "  A",
            vec![
                with("sleep-a-long-while", "  B", vec![]),
                with("x", "  C", vec![]),
            ],
        )];
        let how = |width| Drawing {
            style: Style::Box,
            width,
        };
        assert_eq!(
            render(&top, how(Some(12))),
            ["  A flux", "  B ├── sle+", "  C └── x"]
        );
        assert_eq!(
            render(&top, how(None)),
            ["  A flux", "  B ├── sleep-a-long-while", "  C └── x"]
        );
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
    fn leaves_combine_only_with_the_same_details() {
        let got = combine(vec![
            with("sleep", "  1", vec![]),
            with("sleep", "  2", vec![]),
            with("sleep", "  1", vec![]),
        ]);
        let lines = render(&got, Drawing::default());
        assert_eq!(lines, ["  1 2*[sleep]", "  2 sleep"]);
    }

    #[test]
    fn empty_details_add_no_space() {
        let top = vec![with("flux", "", vec![with("sleep", "", vec![])])];
        assert_eq!(render(&top, Drawing::default()), ["flux", "└── sleep"]);
    }
}

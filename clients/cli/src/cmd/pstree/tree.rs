//! The tree drawing of `pstree`: a `.` root and box-drawing branches, as
//! flux-pstree(1) prints them.

/// One job in the tree, with the jobs of the instance it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// What is printed for the job.
    pub label: String,
    /// Jobs of the instance inside this job, if it is one.
    pub children: Vec<Node>,
}

/// flux's single-letter state abbreviation of an RFC 21 state name.
pub fn state_single(state: &str) -> &'static str {
    match state {
        "NEW" => "N",
        "DEPEND" => "D",
        "PRIORITY" => "P",
        "SCHED" => "S",
        "RUN" => "R",
        "CLEANUP" => "C",
        "INACTIVE" => "I",
        _ => "?",
    }
}

/// The tree under a `.` root, one line each.
pub fn render(roots: &[Node]) -> Vec<String> {
    let mut out = vec![".".to_string()];
    draw(roots, "", &mut out);
    out
}

fn draw(nodes: &[Node], prefix: &str, out: &mut Vec<String>) {
    for (i, n) in nodes.iter().enumerate() {
        let last = i + 1 == nodes.len();
        let branch = if last { "└── " } else { "├── " };
        out.push(format!("{prefix}{branch}{}", n.label));
        let next = format!("{prefix}{}", if last { "    " } else { "│   " });
        draw(&n.children, &next, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(l: &str) -> Node {
        Node {
            label: l.into(),
            children: vec![],
        }
    }

    #[test]
    fn draws_as_flux_pstree() {
        let roots = vec![
            Node {
                label: "batch.sh:R".into(),
                children: vec![
                    leaf("sleep:R"),
                    Node {
                        label: "inner:R".into(),
                        children: vec![leaf("a:R")],
                    },
                ],
            },
            leaf("sleep:R"),
        ];
        assert_eq!(
            render(&roots),
            [
                ".",
                "├── batch.sh:R",
                "│   ├── sleep:R",
                "│   └── inner:R",
                "│       └── a:R",
                "└── sleep:R",
            ]
        );
        assert_eq!(render(&[]), ["."]);
    }
}

//! The strings that draw the tree's branches, in flux-pstree's three
//! styles (flux-core `flux.util.Tree.connector_styles`).

/// How branches are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Unicode box-drawing characters, four columns a level (the default).
    #[default]
    Box,
    /// Plain ASCII, four columns a level (`--ascii`).
    Ascii,
    /// Box-drawing characters, two columns a level (`--compact`), for
    /// deep hierarchies.
    Compact,
}

/// The four pieces a branch is drawn with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connectors {
    /// Below a job that has later siblings: the line goes on down.
    pub pipe: &'static str,
    /// Before a job that has later siblings.
    pub tee: &'static str,
    /// Before the last of its siblings.
    pub elbow: &'static str,
    /// Below the last of its siblings: nothing more on this level.
    pub blank: &'static str,
}

impl Style {
    /// The connectors of this style.
    pub fn connectors(self) -> Connectors {
        match self {
            Style::Box => Connectors {
                pipe: "│   ",
                tee: "├── ",
                elbow: "└── ",
                blank: "    ",
            },
            Style::Ascii => Connectors {
                pipe: "|   ",
                tee: "|-- ",
                elbow: "`-- ",
                blank: "    ",
            },
            Style::Compact => Connectors {
                pipe: "│ ",
                tee: "├─",
                elbow: "└─",
                blank: "  ",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_piece_of_a_style_is_as_wide() {
        for s in [Style::Box, Style::Ascii, Style::Compact] {
            let c = s.connectors();
            let w = c.blank.chars().count();
            for piece in [c.pipe, c.tee, c.elbow] {
                assert_eq!(piece.chars().count(), w, "{s:?} {piece:?}");
            }
        }
        assert!(Style::Ascii.connectors().tee.is_ascii());
        assert!(Style::Ascii.connectors().elbow.is_ascii());
    }
}

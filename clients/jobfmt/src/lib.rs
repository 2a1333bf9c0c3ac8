//! flux-jobs(1) output formats for `fluxgate jobs -o`: the format language
//! ([`template`], over Python's format specs in [`pyfmt`]), the job fields
//! ([`record`]) with those of a job's own instance ([`instance`]), named
//! formats and their config files ([`named`]), job counts by state for
//! the `--stats` line and `instance.stats` ([`stats`]), the fields read from a job's own documents ([`details`]),
//! and user text made safe for a terminal ([`printable`]). Nothing here
//! does I/O except reading config files, so the whole language is tested
//! with tables, in the crate's `tests/formats.rs`.

pub mod details;
pub mod instance;
pub mod named;
pub mod pyfmt;
pub mod record;
pub mod stats;
pub mod template;
mod text;

pub use record::JobRecord;
pub use template::{Ctx, Record, Template};
pub use text::printable;

/// How to lay out the listing.
#[derive(Debug, Clone, Default)]
pub struct Layout<'a> {
    /// `--sort KEYS`, replacing any `sort:` prefix of the format.
    pub sort: Option<&'a str>,
    /// `-n`: no header line (and `+:` does not count header widths).
    pub no_header: bool,
    /// `-w N`: cut lines longer than N, ending them in `+`.
    pub width: Option<usize>,
}

/// The lines `flux jobs -o FMT` prints for `items` (sorted in place).
/// Errors read as flux's ("Error in user format: Unknown format field: x").
pub fn render<R: Record>(
    fmt: &str,
    items: &mut [R],
    layout: &Layout,
    ctx: &Ctx,
) -> Result<Vec<String>, String> {
    let mut t =
        Template::parse(fmt, record::heading).map_err(|e| format!("Error in user format: {e}"))?;
    if let Some(keys) = layout.sort.filter(|k| !k.is_empty()) {
        t.set_sort_keys(keys)?;
    }
    let t = t.resolve(items, ctx, layout.no_header)?;
    let cut = |line: String| match layout.width {
        Some(w) if w > 0 && line.chars().count() > w => {
            let mut s: String = line.chars().take(w - 1).collect();
            s.push('+');
            s
        }
        _ => line,
    };
    let mut lines = Vec::with_capacity(items.len() + 1);
    if !layout.no_header {
        lines.push(cut(t.header()));
    }
    t.sort(items);
    for item in items.iter() {
        let line = t.render(item, ctx)?;
        // flux skips rows that come out blank.
        if line.trim().is_empty() {
            continue;
        }
        lines.push(cut(line));
    }
    Ok(lines)
}

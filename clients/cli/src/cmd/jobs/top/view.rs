//! Drawing `fluxgate top`: a model in, widgets out, nothing read from the
//! terminal or the clock (the time and user names are passed in), so each
//! screen is tested on ratatui's test backend.
//!
//! Layout as flux-top(1): a header with the instance's size and uptime, bars of nodes
//! and cores used, and jobs pending / running / inactive; then the job list
//! with flux top's columns JOBID USER ST NTASKS NNODES RUNTIME NAME; a key
//! line at the bottom.

use fluxgate_shared::JobId;
use fluxgate_shared::policy::format_fsd_py;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table, TableState};

use super::model::{Model, Usage};
use crate::client::f58;
use crate::output::printable;

/// Width of a usage bar between its brackets.
const BAR_WIDTH: usize = 30;

/// What the instance screen shows besides the model.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The instance: its URI, and the jobs that lead to it when nested.
    pub title: &'a str,
    /// Seconds since the epoch, for run times.
    pub now: f64,
    /// A message for the bottom line (an error, a hint), if any.
    pub status: Option<&'a str>,
}

/// A bar as flux top draws one: `[|||||        3/8]`, the count inside on
/// the right; `|` for each used share of `width`.
pub fn bar(u: Usage, width: usize) -> String {
    let count = format!("{}/{}", u.used, u.total);
    let filled = if u.total == 0 {
        0
    } else {
        let share = u.used.min(u.total) as f64 / u.total as f64;
        (share * width as f64).round() as usize
    };
    let room = width.saturating_sub(count.len());
    let bars = "|".repeat(filled.min(room));
    format!("[{bars:<room$}{count}]")
}

/// The header's lines.
fn header(model: &Model, ctx: &Context<'_>) -> Vec<Line<'static>> {
    let counts = model.counts();
    let (nodes, cores) = match model.resources {
        Some(r) => (r.nodes, r.cores),
        None => (Usage::default(), Usage::default()),
    };
    let state = if model.live { "" } else { "  (syncing)" };
    let uptime = model
        .started
        .map(|t| format!("  uptime: {}", format_fsd_py((ctx.now - t).max(0.0))))
        .unwrap_or_default();
    vec![
        Line::from(format!(
            "ƒ {}  size: {} nodes, {} cores{uptime}{state}",
            printable(ctx.title),
            nodes.total,
            cores.total
        )),
        Line::from(format!(
            "  nodes {}  {:>6} pending",
            bar(nodes, BAR_WIDTH),
            counts.pending
        )),
        Line::from(format!(
            "  cores {}  {:>6} running",
            bar(cores, BAR_WIDTH),
            counts.running
        )),
        Line::from(format!(
            "        {:w$}  {:>6} inactive",
            "",
            counts.inactive,
            w = BAR_WIDTH + 2
        )),
    ]
}

/// The job list's table, and which row is selected.
fn table<'a>(model: &'a Model, ctx: &Context<'_>, user: &dyn Fn(u32) -> String) -> Table<'a> {
    let rows = model.rows().into_iter().map(|j| {
        Row::new(vec![
            f58(JobId::from(j.id)),
            user(j.userid),
            j.state.letter().to_string(),
            j.ntasks.to_string(),
            j.nnodes.to_string(),
            j.runtime(ctx.now).map(format_fsd_py).unwrap_or_default(),
            printable(&j.name).into_owned(),
        ])
    });
    let widths = [
        Constraint::Length(14),
        Constraint::Length(8),
        Constraint::Length(2),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Min(8),
    ];
    Table::new(rows, widths)
        .header(
            Row::new(["JOBID", "USER", "ST", "NTASKS", "NNODES", "RUNTIME", "NAME"])
                .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        // Also seen without colours or attributes (a plain capture).
        .highlight_symbol("> ")
}

/// The instance screen: header, job list, key line.
pub fn draw_instance(
    frame: &mut Frame<'_>,
    model: &Model,
    ctx: &Context<'_>,
    user: &dyn Fn(u32) -> String,
) {
    let [head, list, keys] = Layout::vertical([
        Constraint::Length(5),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(header(model, ctx)), head);
    let mut state = TableState::default().with_selected(model.selected_index());
    frame.render_stateful_widget(table(model, ctx, user), list, &mut state);
    let hint = "q: quit  ↑/↓ j/k: select  Enter: open the job (its instance or eventlog)";
    key_line(frame, keys, ctx.status.unwrap_or(hint));
}

/// The eventlog screen: a title, the lines (the newest at the bottom when
/// they do not fit), a key line.
pub fn draw_eventlog(frame: &mut Frame<'_>, title: &str, lines: &[String], status: Option<&str>) {
    let [head, body, keys] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(
        Paragraph::new(Line::from(printable(title).into_owned())),
        head,
    );
    let fit = usize::from(body.height);
    let shown = &lines[lines.len().saturating_sub(fit)..];
    let text: Vec<Line<'_>> = shown.iter().map(|l| Line::from(l.as_str())).collect();
    frame.render_widget(Paragraph::new(text), body);
    key_line(frame, keys, status.unwrap_or("Esc/q: back"));
}

fn key_line(frame: &mut Frame<'_>, area: Rect, text: &str) {
    frame.render_widget(
        Paragraph::new(printable(text).into_owned())
            .style(Style::new().add_modifier(Modifier::DIM)),
        area,
    );
}

#[cfg(test)]
mod tests {
    use fluxgate_proto::v1 as pb;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::super::model::Resources;
    use super::*;

    fn screen(draw: impl FnOnce(&mut Frame<'_>)) -> Vec<String> {
        let mut terminal = Terminal::new(TestBackend::new(100, 12)).expect("test terminal");
        terminal.draw(draw).expect("draw");
        let buffer = terminal.backend().buffer();
        (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn bars_show_the_used_share_and_the_counts() {
        let u = |used, total| Usage { used, total };
        assert_eq!(bar(u(0, 4), 10), "[       0/4]");
        assert_eq!(bar(u(2, 4), 10), "[|||||  2/4]");
        assert_eq!(bar(u(4, 4), 10), "[|||||||4/4]");
        assert_eq!(bar(u(0, 0), 6), "[   0/0]");
    }

    #[test]
    fn the_instance_screen_has_the_header_and_the_job_rows() {
        let mut model = Model::default();
        let row = |id, state: &str, name: &str, t_run| pb::JobSummary {
            id,
            userid: 1000,
            name: name.into(),
            state: state.into(),
            ntasks: 2,
            nnodes: 1,
            t_run,
            ..Default::default()
        };
        model.relist(&[
            row(1 << 30, "INACTIVE", "old", 0.0),
            row(2 << 30, "SCHED", "waits", 0.0),
            row(3 << 30, "RUN", "sleeper", 90.0),
        ]);
        model.started = Some(10.0);
        model.resources = Some(Resources {
            nodes: Usage { used: 1, total: 2 },
            cores: Usage { used: 2, total: 8 },
        });
        let ctx = Context {
            title: "http://127.0.0.1:1",
            now: 100.0,
            status: None,
        };
        let lines = screen(|f| draw_instance(f, &model, &ctx, &|uid| format!("u{uid}")));
        assert!(
            lines[0].starts_with("ƒ http://127.0.0.1:1  size: 2 nodes, 8 cores  uptime: 1.5m"),
            "{:?}",
            lines[0]
        );
        assert!(lines[1].contains("nodes [") && lines[1].contains("1/2]"));
        assert!(lines[1].ends_with("1 pending"), "{:?}", lines[1]);
        assert!(lines[2].contains("2/8]") && lines[2].ends_with("1 running"));
        assert!(lines[3].ends_with("1 inactive"));
        let head = &lines[5];
        for col in ["JOBID", "USER", "ST", "NTASKS", "NNODES", "RUNTIME", "NAME"] {
            assert!(head.contains(col), "{head:?}");
        }
        // Running first, with its run time; then pending; then inactive.
        let running = f58(JobId::from(3u64 << 30));
        assert!(lines[6].contains(&running), "{:?}", lines[6]);
        assert!(lines[6].starts_with("> "), "the selection is marked");
        assert!(
            lines[6].contains("u1000") && lines[6].contains(" 10s "),
            "{:?}",
            lines[6]
        );
        assert!(lines[6].ends_with("sleeper"));
        assert!(lines[7].contains(" S ") && lines[7].ends_with("waits"));
        assert!(lines[8].contains(" I ") && lines[8].ends_with("old"));
        assert!(lines[11].starts_with("q: quit"));
    }

    #[test]
    fn the_eventlog_screen_keeps_the_newest_lines_in_view() {
        let lines: Vec<String> = (0..20).map(|i| format!("{i}.000000 event{i}")).collect();
        let shown = screen(|f| draw_eventlog(f, "job ƒx eventlog", &lines, None));
        assert_eq!(shown[0], "job ƒx eventlog");
        assert_eq!(shown[10], "19.000000 event19");
        assert_eq!(shown[11], "Esc/q: back");
    }
}

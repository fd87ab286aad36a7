//! Drawing the terminal dashboard from an [`App`]: only the rows in the list's window are
//! turned into widgets, so a frame costs the same at 100 and at 100,000 deployments.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};

use super::app::{App, Confirm, Tab};
use crate::dashboard::{Connection, DeploymentRow};

const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
const HEADER: Style = Style::new().add_modifier(Modifier::BOLD);

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, app: &mut App) {
    let areas = app.areas;
    frame.render_widget(tabs(app.tab), areas.tabs);
    frame.render_widget(status(app), areas.status);
    match app.detail.is_some() {
        true => detail(frame, app, areas.body),
        false if app.tab == Tab::Deployments => deployments(frame, app, areas.body),
        false => catalog(frame, app, areas.body),
    }
    frame.render_widget(help(app), areas.help);
}

fn tabs(current: Tab) -> Paragraph<'static> {
    let mut spans = Vec::new();
    for tab in Tab::ALL {
        let style = if tab == current {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            Style::new()
        };
        spans.push(Span::styled(tab.label(), style));
        spans.push(Span::raw("│"));
    }
    Paragraph::new(Line::from(spans))
}

fn status(app: &App) -> Paragraph<'static> {
    let board = &app.board;
    let counts = format!(
        "{} deployments, {} prepared, {} shown",
        board.deployment_count(),
        board.prepared_count(),
        board.visible().len()
    );
    let filter = board.filter().to_string();
    let filter = if filter.is_empty() {
        String::new()
    } else {
        format!(" · filter: {filter}")
    };
    let line = match board.connection() {
        Connection::Live => Line::from(format!("● live · {counts}{filter}")),
        Connection::Connecting => Line::from(Span::styled(
            format!("… connecting · {counts}{filter}"),
            Style::new().fg(Color::Black).bg(Color::Yellow),
        )),
        Connection::Lost { reason } => Line::from(Span::styled(
            format!("✖ daemon unreachable, reconnecting ({reason}) · {counts}"),
            Style::new()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD),
        )),
    };
    Paragraph::new(line)
}

fn help(app: &App) -> Paragraph<'static> {
    let text = if let Some(input) = &app.filter_input {
        format!(
            "filter> {input}▏ (template= site= parent= prepared= approved= KEY=; Enter applies, Esc cancels)"
        )
    } else if let Some(confirm) = &app.confirm {
        match confirm {
            Confirm::Approve(id) => format!("Approve {id}? y / n"),
            Confirm::Delete(id) => format!("Delete {id} and its descendants? y / n"),
        }
    } else if let Some(err) = &app.filter_error {
        format!("filter refused: {err}")
    } else if let Some(message) = &app.message {
        format!("{message} · q quit")
    } else if app.detail.is_some() {
        "↑↓ PgUp PgDn scroll · p parent · c children · a approve · x delete · Esc back · q quit"
            .to_owned()
    } else {
        "1-4/Tab views · ↑↓ PgUp PgDn · Enter open · / filter · c children · a approve · x delete · q quit"
            .to_owned()
    };
    let style = if app.confirm.is_some() || app.filter_error.is_some() {
        Style::new().fg(Color::Black).bg(Color::Yellow)
    } else {
        Style::new().add_modifier(Modifier::DIM)
    };
    Paragraph::new(Line::from(Span::styled(text, style)))
}

fn state(row: &DeploymentRow) -> Span<'static> {
    if !row.error.is_empty() {
        Span::styled(
            "error",
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        )
    } else if row.prepared {
        Span::styled("prepared", Style::new().fg(Color::Green))
    } else {
        Span::styled("pending", Style::new().fg(Color::Yellow))
    }
}

fn deployments(frame: &mut Frame, app: &mut App, area: Rect) {
    let height = app.areas.list_rows();
    let len = app.board.visible().len();
    let window = app.window().fit(len, height);
    let selected = app.window().selected();
    let board = &app.board;
    let rows = board.visible()[window.clone()]
        .iter()
        .zip(window)
        .filter_map(|(id, index)| {
            let row = board.deployment(id)?;
            let children = board.child_count(id);
            let style = if index == selected {
                SELECTED
            } else {
                Style::new()
            };
            Some(
                Row::new(vec![
                    Cell::from(row.id.clone()),
                    Cell::from(row.template_id.clone()),
                    Cell::from(row.site_id.clone()),
                    Cell::from(state(row)),
                    Cell::from(if row.approved { "yes" } else { "no" }),
                    Cell::from(if children == 0 {
                        String::new()
                    } else {
                        children.to_string()
                    }),
                    Cell::from(short(&row.parent_id)),
                ])
                .style(style),
            )
        });
    let table = Table::new(
        rows,
        [
            Constraint::Length(36),
            Constraint::Fill(2),
            Constraint::Fill(2),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(8),
        ],
    )
    .header(
        Row::new([
            "ID", "TEMPLATE", "SITE", "STATE", "APPROVED", "CHILDREN", "PARENT",
        ])
        .style(HEADER),
    );
    frame.render_widget(table, area);
}

/// The last 8 characters of an id (a uuid's most distinctive part).
fn short(id: &str) -> String {
    let start = id.char_indices().rev().nth(7).map_or(0, |(at, _)| at);
    id[start..].to_owned()
}

fn catalog(frame: &mut Frame, app: &mut App, area: Rect) {
    let kind = match app.tab {
        Tab::Templates => crate::dashboard::CatalogKind::Templates,
        Tab::Sites => crate::dashboard::CatalogKind::Sites,
        _ => crate::dashboard::CatalogKind::Plugins,
    };
    let height = app.areas.list_rows();
    let len = app.board.catalog(kind).len();
    let window = app.window().fit(len, height);
    let selected = app.window().selected();
    let entries = app.board.catalog(kind);
    let rows = entries[window.clone()]
        .iter()
        .zip(window)
        .map(|(entry, index)| {
            Row::new(vec![entry.id.clone(), entry.summary.clone()]).style(if index == selected {
                SELECTED
            } else {
                Style::new()
            })
        });
    let title = if kind == crate::dashboard::CatalogKind::Plugins {
        ["NAME", "TRIGGERS AND ENDPOINT"]
    } else {
        ["ID", "METADATA"]
    };
    let table = Table::new(rows, [Constraint::Fill(1), Constraint::Fill(2)])
        .header(Row::new(title).style(HEADER));
    frame.render_widget(table, area);
}

fn detail(frame: &mut Frame, app: &mut App, area: Rect) {
    let Some(detail) = &app.detail else { return };
    let Some(row) = app.board.deployment(&detail.id) else {
        return;
    };
    let children: Vec<&DeploymentRow> = app.board.children(&row.id).collect();
    let mut info = vec![
        Line::from(vec![
            Span::styled("Deployment ", HEADER),
            Span::raw(row.id.clone()),
        ]),
        Line::from(format!(
            "template {} · site {} · parent {}",
            row.template_id,
            or_none(&row.site_id),
            or_none(&row.parent_id)
        )),
        Line::from(vec![
            Span::raw("state "),
            state(row),
            Span::raw(format!(
                " · approved {} · created {} · updated {}",
                if row.approved { "yes" } else { "no" },
                row.created,
                row.updated
            )),
        ]),
        Line::from(format!(
            "metadata {}",
            row.metadata
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        )),
    ];
    if !row.error.is_empty() {
        info.push(Line::from(Span::styled(
            format!("error: {}", row.error),
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        )));
    }
    let shown: Vec<String> = children
        .iter()
        .take(4)
        .map(|c| {
            format!(
                "{} ({}, {})",
                short(&c.id),
                c.site_id,
                if c.prepared { "prepared" } else { "pending" }
            )
        })
        .collect();
    info.push(Line::from(format!(
        "children {}{}{}",
        children.len(),
        if shown.is_empty() { "" } else { ": " },
        shown.join(", ")
    )));
    let [top, bottom] = Layout::vertical([
        Constraint::Length(info.len() as u16 + 2),
        Constraint::Fill(1),
    ])
    .areas(area);
    frame.render_widget(
        Paragraph::new(info)
            .wrap(Wrap { trim: false })
            .block(Block::new().borders(Borders::BOTTOM)),
        top,
    );
    let package: Vec<Line> = match &detail.package {
        None => vec![Line::from("fetching the package…")],
        Some(Err(err)) => vec![Line::from(format!("cannot fetch the package: {err}"))],
        Some(Ok(yaml)) => yaml
            .lines()
            .skip(detail.scroll)
            .take(usize::from(bottom.height))
            .map(|l| Line::from(l.to_owned()))
            .collect(),
    };
    frame.render_widget(Paragraph::new(package), bottom);
}

fn or_none(text: &str) -> &str {
    if text.is_empty() { "-" } else { text }
}

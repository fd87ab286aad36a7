use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use super::*;
use crate::dashboard::{DeploymentRow, Update};

fn key(app: &mut App, code: KeyCode) -> Option<Request> {
    app.key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn click(app: &mut App, column: u16, row: u16) -> Option<Request> {
    app.click(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    })
}

fn app_with(count: usize) -> App {
    let mut app = App::new(Rect::new(0, 0, 120, 20));
    let rows = (0..count)
        .map(|i| DeploymentRow {
            id: format!("d{i:06}"),
            parent_id: if i == 0 {
                String::new()
            } else {
                "d000000".to_owned()
            },
            template_id: if i % 2 == 0 { "even" } else { "odd" }.to_owned(),
            site_id: format!("site-{i}"),
            updated: "t0".to_owned(),
            ..DeploymentRow::default()
        })
        .collect();
    app.board.apply(Update::Deployments(rows));
    app
}

#[test]
fn number_keys_tab_and_d_switch_views() {
    let mut app = app_with(3);
    key(&mut app, KeyCode::Char('1'));
    assert_eq!(app.tab, Tab::Templates);
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.tab, Tab::Sites);
    key(&mut app, KeyCode::Char('3'));
    assert_eq!(app.tab, Tab::Plugins);
    key(&mut app, KeyCode::BackTab);
    assert_eq!(app.tab, Tab::Sites);
    key(&mut app, KeyCode::Char('d'));
    assert_eq!(app.tab, Tab::Deployments);
}

#[test]
fn a_click_on_a_tab_label_switches_to_it() {
    let mut app = app_with(3);
    // " 1 Templates │ 2 Sites │": "Sites" starts at column 15.
    click(&mut app, 16, 0);
    assert_eq!(app.tab, Tab::Sites);
    click(&mut app, 2, 0);
    assert_eq!(app.tab, Tab::Templates);
}

#[test]
fn the_filter_typed_after_slash_narrows_the_list_and_esc_clears_it() {
    let mut app = app_with(10);
    key(&mut app, KeyCode::Char('/'));
    typed(&mut app, "template=odd");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.list_len(), 5);
    assert_eq!(app.selected_deployment(), Some("d000001"));
    key(&mut app, KeyCode::Char('/'));
    typed(&mut app, " prepared=perhaps");
    key(&mut app, KeyCode::Enter);
    assert!(
        app.filter_error
            .as_deref()
            .is_some_and(|e| e.contains("perhaps"))
    );
    assert_eq!(app.list_len(), 5, "a refused filter keeps the last one");
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.list_len(), 10);
}

#[test]
fn enter_opens_the_selected_deployment_and_asks_for_its_package() {
    let mut app = app_with(10);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    let request = key(&mut app, KeyCode::Enter);
    assert_eq!(request, Some(Request::Package("d000002".to_owned())));
    app.outcome(Outcome::Package(
        "d000002".to_owned(),
        Ok("a: 1\nb: 2\nc: 3\n".to_owned()),
    ));
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    assert_eq!(
        app.detail.as_ref().map(|d| d.scroll),
        Some(2),
        "scrolls within the package"
    );
    // p opens the parent; c lists the children.
    assert_eq!(
        key(&mut app, KeyCode::Char('p')),
        Some(Request::Package("d000000".to_owned()))
    );
    key(&mut app, KeyCode::Char('c'));
    assert!(app.detail.is_none());
    assert_eq!(app.list_len(), 9);
}

#[test]
fn a_change_to_the_open_deployment_refetches_its_package_and_a_delete_closes_it() {
    let mut app = app_with(3);
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.refresh(), None);
    let mut row = app.board.deployment("d000000").cloned().expect("row");
    row.updated = "t1".to_owned();
    row.prepared = true;
    app.board.apply(Update::Deployments(vec![row]));
    assert_eq!(app.refresh(), Some(Request::Package("d000000".to_owned())));
    app.board
        .apply(Update::DeploymentDeleted("d000000".to_owned()));
    assert_eq!(app.refresh(), None);
    assert!(app.detail.is_none());
}

#[test]
fn approve_and_delete_ask_first_and_anything_but_y_cancels() {
    let mut app = app_with(3);
    assert_eq!(key(&mut app, KeyCode::Char('a')), None);
    assert_eq!(app.confirm, Some(Confirm::Approve("d000000".to_owned())));
    assert_eq!(
        key(&mut app, KeyCode::Char('y')),
        Some(Request::Approve("d000000".to_owned()))
    );
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char('x'));
    assert_eq!(key(&mut app, KeyCode::Char('n')), None);
    assert_eq!(app.message.as_deref(), Some("cancelled"));
    key(&mut app, KeyCode::Delete);
    assert_eq!(
        key(&mut app, KeyCode::Char('y')),
        Some(Request::Delete("d000001".to_owned()))
    );
    app.outcome(Outcome::Done(
        Request::Delete("d000001".to_owned()),
        Err("busy".to_owned()),
    ));
    assert_eq!(app.message.as_deref(), Some("error: busy"));
}

#[test]
fn a_click_selects_a_row_and_a_second_click_opens_it() {
    let mut app = app_with(50);
    // Row 2 is the list's header; row 3 its first entry.
    assert_eq!(click(&mut app, 5, 5), None);
    assert_eq!(app.selected_deployment(), Some("d000002"));
    assert_eq!(
        click(&mut app, 5, 5),
        Some(Request::Package("d000002".to_owned()))
    );
}

#[test]
fn paging_through_100000_rows_keeps_the_window_on_the_selection() {
    let mut app = app_with(100_000);
    key(&mut app, KeyCode::End);
    let len = app.list_len();
    let rows = app.areas.list_rows();
    let window = app.window().fit(len, rows);
    assert_eq!(window.end, 100_000);
    assert_eq!(app.selected_deployment(), Some("d099999"));
    key(&mut app, KeyCode::PageUp);
    assert_eq!(app.window().selected(), 99_999 - rows);
}

/// The text of the screen `draw` makes of `app`, one line per terminal row.
fn screen(app: &mut App) -> String {
    let backend = ratatui::backend::TestBackend::new(120, 20);
    let mut terminal = ratatui::Terminal::new(backend).expect("terminal");
    terminal
        .draw(|frame| crate::tui::draw::draw(frame, app))
        .expect("draw");
    let buffer = terminal.backend().buffer();
    (0..buffer.area.height)
        .map(|y| {
            (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_validators_reasons_show_in_the_list_and_the_opened_deployment() {
    let mut app = app_with(3);
    let reasons = "validation failed: plugin replicas refused Scaler web: spec.replicas is 7";
    let refused = DeploymentRow {
        id: "d000001".to_owned(),
        parent_id: "d000000".to_owned(),
        template_id: "odd".to_owned(),
        site_id: "site-1".to_owned(),
        updated: "t1".to_owned(),
        error: reasons.to_owned(),
        ..DeploymentRow::default()
    };
    app.board.apply(Update::Deployments(vec![refused]));
    let list = screen(&mut app);
    let row = list
        .lines()
        .find(|line| line.contains("site-1"))
        .unwrap_or_else(|| panic!("its row in:\n{list}"));
    assert!(row.contains("error"), "the list marks it: {row}");
    key(&mut app, KeyCode::Down);
    assert_eq!(
        key(&mut app, KeyCode::Enter),
        Some(Request::Package("d000001".to_owned()))
    );
    let detail = screen(&mut app);
    assert!(
        detail.contains(&format!("error: {reasons}")),
        "the opened deployment shows the reasons:\n{detail}"
    );
}

//! The terminal dashboard's state and what keys and clicks do to it, without a terminal:
//! [`App::key`] and [`App::click`] change the state and return the [`Request`] (fetch a
//! package, approve, delete) the caller runs against the Data API; [`App::outcome`] takes its
//! answer. Drawing reads the state (`draw.rs`); both use [`Areas`] so a click lands where
//! the thing was drawn.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use crate::dashboard::{Board, CatalogKind, DeploymentFilter, ListWindow};
pub use crate::dashboard::{Outcome, Request};

/// The four views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    /// Templates.
    Templates,
    /// Sites.
    Sites,
    /// Plugins.
    Plugins,
    /// Deployments (the default).
    Deployments,
}

impl Tab {
    /// In order, as keys 1–4 pick them.
    pub const ALL: [Tab; 4] = [Tab::Templates, Tab::Sites, Tab::Plugins, Tab::Deployments];

    /// The tab's title.
    pub fn title(self) -> &'static str {
        match self {
            Tab::Templates => "Templates",
            Tab::Sites => "Sites",
            Tab::Plugins => "Plugins",
            Tab::Deployments => "Deployments",
        }
    }

    fn index(self) -> usize {
        Tab::ALL.iter().position(|t| *t == self).unwrap_or(3)
    }

    fn catalog(self) -> Option<CatalogKind> {
        match self {
            Tab::Templates => Some(CatalogKind::Templates),
            Tab::Sites => Some(CatalogKind::Sites),
            Tab::Plugins => Some(CatalogKind::Plugins),
            Tab::Deployments => None,
        }
    }

    /// The tab bar's label of this tab, e.g. ` 4 Deployments `.
    pub fn label(self) -> String {
        format!(" {} {} ", self.index() + 1, self.title())
    }
}

/// Where the screen's parts are: the tab bar (row 0), the status line (row 1), the list or
/// detail, and the help line (last row). The list's first row is its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    /// The tab bar.
    pub tabs: Rect,
    /// Connection banner and counts.
    pub status: Rect,
    /// The list (with its header row) or the detail.
    pub body: Rect,
    /// Keys, the filter being typed, or the question being asked.
    pub help: Rect,
}

impl Areas {
    /// The parts of a screen of `area`.
    pub fn of(area: Rect) -> Areas {
        let row = |y: u16, height: u16| Rect::new(area.x, y, area.width, height);
        let body_height = area.height.saturating_sub(3);
        Areas {
            tabs: row(area.y, 1.min(area.height)),
            status: row(area.y + 1, 1.min(area.height.saturating_sub(1))),
            body: row(area.y + 2, body_height),
            help: row(
                area.y + 2 + body_height,
                1.min(area.height.saturating_sub(2)),
            ),
        }
    }

    /// Rows of list entries the body has room for (below its header row).
    pub fn list_rows(&self) -> usize {
        usize::from(self.body.height.saturating_sub(1))
    }

    /// The tab whose label is at column `x` of the tab bar.
    pub fn tab_at(&self, x: u16) -> Option<Tab> {
        let mut start = self.tabs.x;
        for tab in Tab::ALL {
            let width = tab.label().chars().count() as u16;
            if (start..start + width).contains(&x) {
                return Some(tab);
            }
            start += width + 1;
        }
        None
    }
}

/// A question awaiting y / n.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// Approve this deployment?
    Approve(String),
    /// Delete this deployment and its descendants?
    Delete(String),
}

/// The open deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detail {
    /// Its id.
    pub id: String,
    /// Its package once fetched (or why not).
    pub package: Option<Result<String, String>>,
    /// The row's `updated` the package was fetched for.
    pub fetched_for: String,
    /// Lines scrolled off the top of the package.
    pub scroll: usize,
}

/// The whole state of the terminal dashboard.
pub struct App {
    /// What is known.
    pub board: Board,
    /// The view shown.
    pub tab: Tab,
    /// Each tab's selection and scroll.
    pub windows: [ListWindow; 4],
    /// The filter being typed (after `/`), if any.
    pub filter_input: Option<String>,
    /// Why the last filter typed was refused.
    pub filter_error: Option<String>,
    /// The open deployment, if any.
    pub detail: Option<Detail>,
    /// The question asked, if any.
    pub confirm: Option<Confirm>,
    /// The last action's result.
    pub message: Option<String>,
    /// The screen's parts (set by the caller on every resize).
    pub areas: Areas,
    /// Set by `q`: the caller ends.
    pub quit: bool,
}

impl App {
    /// A dashboard on the deployments tab for a screen of `area`.
    pub fn new(area: Rect) -> App {
        App {
            board: Board::default(),
            tab: Tab::Deployments,
            windows: [ListWindow::default(); 4],
            filter_input: None,
            filter_error: None,
            detail: None,
            confirm: None,
            message: None,
            areas: Areas::of(area),
            quit: false,
        }
    }

    /// How many rows the current tab's list has.
    pub fn list_len(&self) -> usize {
        match self.tab.catalog() {
            Some(kind) => self.board.catalog(kind).len(),
            None => self.board.visible().len(),
        }
    }

    /// The current tab's window.
    pub fn window(&mut self) -> &mut ListWindow {
        &mut self.windows[self.tab.index()]
    }

    /// The selected deployment's id (deployments tab only).
    pub fn selected_deployment(&self) -> Option<&str> {
        if self.tab != Tab::Deployments {
            return None;
        }
        let at = self.windows[Tab::Deployments.index()].selected();
        self.board.visible().get(at).map(String::as_str)
    }

    /// The deployment approve / delete would act on: the open one, else the selected one.
    fn target(&self) -> Option<String> {
        match &self.detail {
            Some(detail) => Some(detail.id.clone()),
            None => self.selected_deployment().map(str::to_owned),
        }
    }

    /// Switches to `tab`, closing the detail.
    pub fn show(&mut self, tab: Tab) {
        self.tab = tab;
        self.detail = None;
    }

    /// Opens a deployment: its detail, and the request for its package.
    pub fn open(&mut self, id: &str) -> Option<Request> {
        let updated = self.board.deployment(id)?.updated.clone();
        self.tab = Tab::Deployments;
        self.detail = Some(Detail {
            id: id.to_owned(),
            package: None,
            fetched_for: updated,
            scroll: 0,
        });
        Some(Request::Package(id.to_owned()))
    }

    /// Applies a filter line (as typed after `/`).
    pub fn apply_filter(&mut self, line: &str) {
        match DeploymentFilter::parse(line) {
            Ok(filter) => {
                self.board.set_filter(filter);
                self.filter_error = None;
                self.windows[Tab::Deployments.index()] = ListWindow::default();
            }
            Err(err) => self.filter_error = Some(err.to_string()),
        }
    }

    /// After board updates: the open deployment's package again when the row changed, and
    /// the detail closed when it was deleted.
    pub fn refresh(&mut self) -> Option<Request> {
        let detail = self.detail.as_mut()?;
        match self.board.deployment(&detail.id) {
            None => {
                self.message = Some(format!("{} was deleted", detail.id));
                self.detail = None;
                None
            }
            Some(row) if row.updated != detail.fetched_for => {
                detail.fetched_for = row.updated.clone();
                Some(Request::Package(detail.id.clone()))
            }
            Some(_) => None,
        }
    }

    /// A key press.
    pub fn key(&mut self, key: KeyEvent) -> Option<Request> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return None;
        }
        if let Some(input) = &mut self.filter_input {
            match key.code {
                KeyCode::Enter => {
                    let line = std::mem::take(input);
                    self.filter_input = None;
                    self.apply_filter(&line);
                }
                KeyCode::Esc => self.filter_input = None,
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char(c) => input.push(c),
                _ => {}
            }
            return None;
        }
        if let Some(confirm) = self.confirm.take() {
            return match key.code {
                KeyCode::Char('y' | 'Y') => Some(match confirm {
                    Confirm::Approve(id) => Request::Approve(id),
                    Confirm::Delete(id) => Request::Delete(id),
                }),
                _ => {
                    self.message = Some("cancelled".to_owned());
                    None
                }
            };
        }
        let page = self.areas.list_rows().max(1) as isize;
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char(c @ '1'..='4') => self.show(Tab::ALL[usize::from(c as u8 - b'1')]),
            KeyCode::Char('d') => self.show(Tab::Deployments),
            KeyCode::Tab => self.show(Tab::ALL[(self.tab.index() + 1) % 4]),
            KeyCode::BackTab => self.show(Tab::ALL[(self.tab.index() + 3) % 4]),
            KeyCode::Char('/') => {
                self.show(Tab::Deployments);
                self.filter_input = Some(self.board.filter().to_string());
            }
            KeyCode::Char('a') => {
                if let Some(id) = self.target() {
                    self.confirm = Some(Confirm::Approve(id));
                }
            }
            KeyCode::Char('x') | KeyCode::Delete => {
                if let Some(id) = self.target() {
                    self.confirm = Some(Confirm::Delete(id));
                }
            }
            KeyCode::Char('p') => {
                let parent = self
                    .detail
                    .as_ref()
                    .and_then(|d| self.board.deployment(&d.id))
                    .map(|row| row.parent_id.clone())
                    .filter(|p| !p.is_empty());
                if let Some(parent) = parent {
                    return self.open(&parent);
                }
            }
            KeyCode::Char('c') => {
                if let Some(id) = self.target() {
                    self.detail = None;
                    self.apply_filter(&format!("parent={id}"));
                }
            }
            // Esc closes the open deployment, or else clears the filter.
            KeyCode::Esc if self.detail.is_some() => self.detail = None,
            KeyCode::Esc => self.apply_filter(""),
            KeyCode::Enter => {
                if let Some(id) = self.selected_deployment().map(str::to_owned) {
                    return self.open(&id);
                }
            }
            KeyCode::Up | KeyCode::Char('k') => self.scroll(-1),
            KeyCode::Down | KeyCode::Char('j') => self.scroll(1),
            KeyCode::PageUp => self.scroll(-page),
            KeyCode::PageDown => self.scroll(page),
            KeyCode::Home | KeyCode::Char('g') => self.scroll(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.scroll(isize::MAX / 2),
            _ => {}
        }
        None
    }

    /// Moves the selection, or scrolls the open package.
    fn scroll(&mut self, delta: isize) {
        if let Some(detail) = &mut self.detail {
            let lines = match &detail.package {
                Some(Ok(yaml)) => yaml.lines().count(),
                _ => 0,
            };
            detail.scroll = detail
                .scroll
                .saturating_add_signed(delta)
                .min(lines.saturating_sub(1));
            return;
        }
        let len = self.list_len();
        self.window().step(delta, len);
    }

    /// A mouse event: a click on a tab switches to it; a click on a row selects it, a second
    /// click on the selected row opens it; the wheel scrolls.
    pub fn click(&mut self, mouse: MouseEvent) -> Option<Request> {
        match mouse.kind {
            MouseEventKind::ScrollDown => self.scroll(3),
            MouseEventKind::ScrollUp => self.scroll(-3),
            MouseEventKind::Down(MouseButton::Left) => {
                let (x, y) = (mouse.column, mouse.row);
                if y == self.areas.tabs.y {
                    if let Some(tab) = self.areas.tab_at(x) {
                        self.show(tab);
                    }
                    return None;
                }
                let first = self.areas.body.y + 1;
                if self.detail.is_some() || y < first || y >= self.areas.help.y {
                    return None;
                }
                let len = self.list_len();
                let index = self.window().offset() + usize::from(y - first);
                if index >= len {
                    return None;
                }
                if self.window().selected() == index && self.tab == Tab::Deployments {
                    let id = self.board.visible()[index].clone();
                    return self.open(&id);
                }
                self.window().select(index, len);
            }
            _ => {}
        }
        None
    }

    /// The answer to a request.
    pub fn outcome(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Package(id, package) => {
                if let Some(detail) = &mut self.detail
                    && detail.id == id
                {
                    detail.package = Some(package);
                }
            }
            Outcome::Done(request, result) => {
                let (verb, id) = match &request {
                    Request::Approve(id) => ("approved", id),
                    Request::Delete(id) => ("deleted", id),
                    Request::Package(id) => ("fetched", id),
                };
                self.message = Some(match result {
                    Ok(()) => format!("{verb} {id}"),
                    Err(err) => format!("error: {err}"),
                });
            }
        }
    }
}

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;

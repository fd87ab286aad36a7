//! `preparer dashboard`: the terminal dashboard. It follows the daemon through the
//! [`Feed`] (list, then `Watch`), draws at most once per batch of
//! updates, and runs approve / delete / package fetches on their own tasks so the screen never
//! waits on the network.

use std::sync::Arc;

use anyhow::Context as _;
use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event, EventStream};
use crossterm::execute;
use futures::StreamExt as _;
use nephrite_preparer_client::{DataApi, PreparerClient};
use nephrite_runtime::{ClientArgs, Endpoint};
use ratatui::layout::Rect;
use tokio::sync::mpsc;

use crate::dashboard::{Connector, Feed, FeedConfig, Update, perform};

pub mod app;
pub mod draw;

use app::App;

/// Most updates applied between two frames.
const BATCH: usize = 20_000;

/// A connector dialling `server` (`http://HOST:PORT`, `unix:///PATH`, …) with
/// `credentials` (CA, client certificate, bearer token) on every call.
pub fn connector(server: &str, credentials: &ClientArgs) -> anyhow::Result<Connector> {
    let endpoint: Endpoint = server
        .parse()
        .with_context(|| format!("--server {server}"))?;
    let credentials = credentials.clone();
    Ok(Arc::new(move || {
        let endpoint = endpoint.clone();
        let credentials = credentials.clone();
        Box::pin(async move {
            credentials
                .dial(&endpoint)
                .await
                .map(|channel| Arc::new(PreparerClient::new(channel)) as Arc<dyn DataApi>)
                .map_err(|e| e.to_string())
        })
    }))
}

/// Runs the dashboard in the terminal until `q`.
pub async fn run(server: &str, credentials: &ClientArgs) -> anyhow::Result<()> {
    let connect = connector(server, credentials)?;
    let (updates_tx, mut updates) = mpsc::channel(4096);
    let feed = tokio::spawn(Feed::new(Arc::clone(&connect), FeedConfig::default()).run(updates_tx));
    let mut terminal = ratatui::init();
    execute!(std::io::stdout(), EnableMouseCapture)?;
    let result = event_loop(&mut terminal, connect, &mut updates).await;
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::restore();
    feed.abort();
    result
}

async fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    connect: Connector,
    updates: &mut mpsc::Receiver<Update>,
) -> anyhow::Result<()> {
    let size = terminal.size()?;
    let mut app = App::new(Rect::new(0, 0, size.width, size.height));
    let mut events = EventStream::new();
    let (outcomes_tx, mut outcomes) = mpsc::channel(64);
    loop {
        terminal.draw(|frame| draw::draw(frame, &mut app))?;
        let request = tokio::select! {
            Some(update) = updates.recv() => {
                app.board.apply(update);
                let mut applied = 1;
                while applied < BATCH {
                    match updates.try_recv() {
                        Ok(update) => app.board.apply(update),
                        Err(_) => break,
                    }
                    applied += 1;
                }
                app.refresh()
            }
            event = events.next() => match event {
                Some(Ok(Event::Key(key))) if key.kind == crossterm::event::KeyEventKind::Press => app.key(key),
                Some(Ok(Event::Mouse(mouse))) => app.click(mouse),
                Some(Ok(Event::Resize(width, height))) => {
                    app.areas = app::Areas::of(Rect::new(0, 0, width, height));
                    None
                }
                Some(Ok(_)) => None,
                Some(Err(err)) => return Err(err).context("reading the terminal"),
                None => return Ok(()),
            },
            Some(outcome) = outcomes.recv() => {
                app.outcome(outcome);
                None
            }
        };
        if app.quit {
            return Ok(());
        }
        if let Some(request) = request {
            let connect = Arc::clone(&connect);
            let outcomes = outcomes_tx.clone();
            tokio::spawn(async move {
                let outcome = perform(&connect, request).await;
                let _ = outcomes.send(outcome).await;
            });
        }
    }
}

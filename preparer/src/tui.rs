//! `preparer dashboard`: the terminal dashboard. It follows the daemon through the
//! [`Feed`] (list, then `Watch`), draws at most once per batch of
//! updates, and runs approve / delete / package fetches on their own tasks so the screen never
//! waits on the network.

use std::sync::Arc;

use anyhow::Context as _;
use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event, EventStream};
use crossterm::execute;
use futures::StreamExt as _;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_runtime::{ClientArgs, Endpoint};
use ratatui::layout::Rect;
use tokio::sync::mpsc;

use crate::dashboard::feed::{Client, Connector, channel_client};
use crate::dashboard::{Feed, FeedConfig, Update};

pub mod app;
pub mod draw;

use app::{App, Outcome, Request};

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
                .map(channel_client)
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
                let outcome = match connect().await {
                    Ok(mut client) => perform(&mut client, request).await,
                    Err(err) => failed(request, err),
                };
                let _ = outcomes.send(outcome).await;
            });
        }
    }
}

fn failed(request: Request, err: String) -> Outcome {
    match request {
        Request::Package(id) => Outcome::Package(id, Err(err)),
        other => Outcome::Done(other, Err(err)),
    }
}

/// Runs one request against the Data API.
async fn perform(client: &mut Client, request: Request) -> Outcome {
    let message = |s: tonic::Status| s.message().to_owned();
    match request {
        Request::Package(id) => {
            let package = client
                .get_deployment(pb::GetRequest { id: id.clone() })
                .await
                .map(|r| r.into_inner().package_yaml)
                .map_err(message);
            Outcome::Package(id, package)
        }
        Request::Approve(ref id) => {
            let result = client
                .approve_deployment(pb::ApproveDeploymentRequest {
                    deployment_id: id.clone(),
                })
                .await
                .map(|_| ())
                .map_err(message);
            Outcome::Done(request, result)
        }
        Request::Delete(ref id) => {
            let result = client
                .delete_deployment(pb::DeleteRequest { id: id.clone() })
                .await
                .map(|_| ())
                .map_err(message);
            Outcome::Done(request, result)
        }
    }
}

//! The web dashboard's routes: the pages (`/`, `/templates`, `/sites`, `/plugins`,
//! `/deployments/<id>`, a deployment's `…/history` and `…/diff`), their event streams
//! (`/events/…`), approve, delete and roll back (POST, then back to a page), the login form,
//! and the embedded script and style sheet; every route behind [`super::auth::guard`].

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use futures::Stream;

use super::Shared;
use super::auth::Author;
use super::pages::{self, View};
use crate::dashboard::{CatalogKind, DeploymentFilter, FilterError, Outcome, Request};

/// How long a page waits after a change for more before it is sent again: a burst of
/// thousands of changes becomes a few renders.
const SETTLE: Duration = Duration::from_millis(100);

pub(super) type Params = Query<HashMap<String, String>>;

pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(deployments_page))
        .route(
            "/templates",
            get(|s: State<Arc<Shared>>| catalog_page(s, CatalogKind::Templates)),
        )
        .route(
            "/sites",
            get(|s: State<Arc<Shared>>| catalog_page(s, CatalogKind::Sites)),
        )
        .route(
            "/plugins",
            get(|s: State<Arc<Shared>>| catalog_page(s, CatalogKind::Plugins)),
        )
        .route("/deployments/{id}", get(deployment_page))
        .route("/deployments/{id}/approve", post(approve))
        .route("/deployments/{id}/delete", post(delete))
        .route(
            "/deployments/{id}/history",
            get(super::history::history_page),
        )
        .route("/deployments/{id}/diff", get(super::history::diff_page))
        .route("/deployments/{id}/rollback", post(super::history::rollback))
        .route("/events/history/{id}", get(super::history::history_events))
        .route("/events/deployments", get(deployments_events))
        .route("/events/catalog/{kind}", get(catalog_events))
        .route("/events/deployment/{id}", get(deployment_events))
        .route("/assets/dashboard.js", get(script))
        .route("/assets/dashboard.css", get(style))
        .route(
            "/login",
            get(super::auth::login_form).post(super::auth::login),
        )
        .route("/logout", post(super::auth::logout))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&shared),
            super::auth::guard,
        ))
        .with_state(shared)
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/dashboard.js"),
    )
}

async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/dashboard.css"),
    )
}

/// The filter and page offset of a deployments query string.
fn filter_of(params: &HashMap<String, String>) -> (Result<DeploymentFilter, FilterError>, usize) {
    let offset = params
        .get("offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    let mut filter = DeploymentFilter::default();
    let mut set = || -> Result<(), FilterError> {
        for key in ["template", "site", "parent", "prepared", "approved"] {
            if let Some(value) = params.get(key) {
                filter.set(key, value)?;
            }
        }
        for term in params
            .get("metadata")
            .map(String::as_str)
            .unwrap_or_default()
            .split_whitespace()
        {
            let (key, pattern) = term.split_once('=').unwrap_or((term, ""));
            filter.set(key, pattern)?;
        }
        filter.set_text(params.get("q").map(String::as_str).unwrap_or_default());
        Ok(())
    };
    let result = set();
    (result.map(|()| filter), offset)
}

async fn deployments_page(State(shared): State<Arc<Shared>>, Query(params): Params) -> Response {
    let (filter, offset) = filter_of(&params);
    let (filter, refused) = match filter {
        Ok(filter) => (filter, String::new()),
        Err(err) => (
            DeploymentFilter::default(),
            format!(
                "<p role=\"alert\" class=\"error\">Filter refused: {}</p>",
                pages::escape(&err.to_string())
            ),
        ),
    };
    let live = shared.read(|board| pages::deployments(board, &filter, offset));
    let query = pages::filter_query(&filter);
    let sep = if query.is_empty() { "" } else { "&" };
    let events = format!(
        "/events/deployments?{query}{sep}offset={offset}&have={}",
        fingerprint(&live)
    );
    let above = format!("{}{refused}", pages::filter_form(&filter));
    Html(pages::page(
        "Deployments",
        View::Deployments,
        &events,
        &above,
        &live,
    ))
    .into_response()
}

async fn catalog_page(State(shared): State<Arc<Shared>>, kind: CatalogKind) -> Response {
    let live = shared.read(|board| pages::catalog(board, kind));
    let (title, name) = catalog_names(kind);
    let events = format!("/events/catalog/{name}?have={}", fingerprint(&live));
    Html(pages::page(title, View::Catalog(kind), &events, "", &live)).into_response()
}

fn catalog_names(kind: CatalogKind) -> (&'static str, &'static str) {
    match kind {
        CatalogKind::Templates => ("Templates", "templates"),
        CatalogKind::Sites => ("Sites", "sites"),
        CatalogKind::Plugins => ("Plugins", "plugins"),
    }
}

/// An open deployment's fragment, fetching its package again when its row changed.
struct DeploymentView {
    id: String,
    fetched_for: Option<String>,
    package: Result<String, String>,
}

impl DeploymentView {
    fn new(id: String) -> DeploymentView {
        DeploymentView {
            id,
            fetched_for: None,
            package: Err("not read yet".to_owned()),
        }
    }

    async fn render(&mut self, shared: &Shared) -> String {
        let updated = shared.read(|board| board.deployment(&self.id).map(|r| r.updated.clone()));
        if updated.is_some() && updated != self.fetched_for {
            if let Outcome::Package(_, package) =
                shared.perform(Request::Package(self.id.clone())).await
            {
                self.package = package;
            }
            self.fetched_for = updated;
        }
        shared.read(|board| pages::deployment(board, &self.id, &self.package))
    }
}

async fn deployment_page(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let mut view = DeploymentView::new(id.clone());
    let live = view.render(&shared).await;
    let events = format!(
        "/events/deployment/{}?have={}",
        pages::encode(&id),
        fingerprint(&live)
    );
    Html(pages::page(
        &format!("Deployment {id}"),
        View::Deployments,
        &events,
        "",
        &live,
    ))
    .into_response()
}

/// Approves as the signed-in caller (see [`super::writes`]).
async fn approve(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    author: Option<Extension<Author>>,
) -> Response {
    let author = Author::name_of(author.as_ref().map(|Extension(a)| a));
    let result = super::writes::approve(&shared.api, &id, author).await;
    answer(
        Outcome::Done(Request::Approve(id.clone()), result),
        &format!("/deployments/{}", pages::encode(&id)),
        "approve",
        &id,
    )
}

async fn delete(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    answer(
        shared.perform(Request::Delete(id.clone())).await,
        "/",
        "delete",
        &id,
    )
}

fn answer(outcome: Outcome, then: &str, verb: &str, id: &str) -> Response {
    let result = match outcome {
        Outcome::Done(_, result) => result,
        Outcome::Package(..) => Ok(()),
    };
    match result {
        Ok(()) => Redirect::to(then).into_response(),
        Err(err) => {
            let live = format!(
                "<p role=\"alert\" class=\"error\">Cannot {verb} {}: {}</p><p><a href=\"/deployments/{}\">Back to the deployment</a></p>",
                pages::escape(id),
                pages::escape(&err),
                pages::encode(id)
            );
            let page = pages::page("Refused", View::Deployments, "", "", &live);
            (StatusCode::CONFLICT, Html(page)).into_response()
        }
    }
}

/// A fingerprint of a page's fragment: the page passes it to its event stream (`have=`),
/// which then sends the fragment only once it differs from what the page already shows (a
/// needless swap would move the reader's focus and selection).
pub(super) fn fingerprint(html: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    html.hash(&mut hasher);
    hasher.finish()
}

pub(super) fn have(params: &HashMap<String, String>) -> Option<u64> {
    params.get("have").and_then(|h| h.parse().ok())
}

/// The `live` events of one page: its fragment when it differs from what the page shows
/// (`have`), then again after every change to the board that alters it, until the client
/// leaves or the daemon stops.
pub(super) fn live<R, F>(
    shared: Arc<Shared>,
    have: Option<u64>,
    render: R,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>>
where
    R: FnMut(Arc<Shared>) -> F + Send + 'static,
    F: Future<Output = String> + Send,
{
    let changed = shared.changed.subscribe();
    let state = (shared, render, changed, String::new(), true);
    let stream = futures::stream::unfold(
        state,
        move |(shared, mut render, mut changed, last, first)| async move {
            let mut last = last;
            let mut first = first;
            loop {
                if !first {
                    tokio::select! {
                        _ = shared.shutdown.triggered() => return None,
                        result = changed.changed() => result.ok()?,
                    }
                    tokio::time::sleep(SETTLE).await;
                    changed.borrow_and_update();
                }
                first = false;
                let html = render(Arc::clone(&shared)).await;
                let shown = if last.is_empty() {
                    have == Some(fingerprint(&html))
                } else {
                    html == last
                };
                if shown {
                    last = html;
                } else {
                    let event = Event::default()
                        .event("live")
                        .data(html.replace('\n', "&#10;"));
                    last = html;
                    return Some((Ok(event), (shared, render, changed, last, false)));
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

async fn deployments_events(State(shared): State<Arc<Shared>>, Query(params): Params) -> Response {
    let (filter, offset) = filter_of(&params);
    let filter = Arc::new(filter.unwrap_or_default());
    live(shared, have(&params), move |shared| {
        let filter = Arc::clone(&filter);
        async move { shared.read(|board| pages::deployments(board, &filter, offset)) }
    })
    .into_response()
}

async fn catalog_events(
    State(shared): State<Arc<Shared>>,
    Path(kind): Path<String>,
    Query(params): Params,
) -> Response {
    let kind = match kind.as_str() {
        "templates" => CatalogKind::Templates,
        "sites" => CatalogKind::Sites,
        "plugins" => CatalogKind::Plugins,
        _ => return (StatusCode::NOT_FOUND, "no such catalog").into_response(),
    };
    live(shared, have(&params), move |shared| async move {
        shared.read(|board| pages::catalog(board, kind))
    })
    .into_response()
}

async fn deployment_events(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(params): Params,
) -> Response {
    let view = Arc::new(tokio::sync::Mutex::new(DeploymentView::new(id)));
    live(shared, have(&params), move |shared| {
        let view = Arc::clone(&view);
        async move { view.lock().await.render(&shared).await }
    })
    .into_response()
}

//! A deployment's history on the web dashboard: its kept revisions (`/deployments/<id>/history`:
//! number, when, who, one-line summary, newest first, live as the deployment changes), the
//! YAML difference between two of them (`/deployments/<id>/diff?from=R1&to=R2`, the CLI's
//! `deployment diff`), and a rollback (`POST /deployments/<id>/rollback`, form field `to`),
//! which writes the kept revision's package as a new revision that then prepares and approves
//! as any change. Reads go through the in-process Data API; the rollback is the Data API's
//! `RollbackDeployment` with the signed-in caller as the revision's author (see
//! [`super::writes`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use nephrite_preparer_client::DeploymentRevision;

use super::Shared;
use super::auth::Author;
use super::pages::{self, View, encode, escape};
use super::routes::{Params, fingerprint, have, live};
use crate::dashboard::Board;

/// A deployment's history page, fetching the revisions again when its row changed.
pub(super) struct HistoryView {
    id: String,
    fetched_for: Option<String>,
    revisions: Result<Vec<DeploymentRevision>, String>,
}

impl HistoryView {
    pub(super) fn new(id: String) -> HistoryView {
        HistoryView {
            id,
            fetched_for: None,
            revisions: Err("not read yet".to_owned()),
        }
    }

    pub(super) async fn render(&mut self, shared: &Shared) -> String {
        let updated = shared.read(|board| board.deployment(&self.id).map(|r| r.updated.clone()));
        if self.fetched_for.is_none() || updated != self.fetched_for {
            self.revisions = match (shared.connect)().await {
                Ok(api) => api
                    .deployment_revisions(&self.id)
                    .await
                    .map_err(|e| e.to_string()),
                Err(err) => Err(err),
            };
            self.fetched_for = Some(updated.unwrap_or_default());
        }
        shared.read(|board| history(board, &self.id, &self.revisions))
    }
}

/// The history fragment: the kept revisions newest first, what retention dropped, a diff
/// link per revision and a rollback button for every revision but the current one.
pub fn history(
    board: &Board,
    id: &str,
    revisions: &Result<Vec<DeploymentRevision>, String>,
) -> String {
    let id_attr = encode(id);
    let mut html = format!(
        "<h2>History of deployment <span class=\"id\">{}</span></h2><p><a href=\"/deployments/{id_attr}\">Back to the deployment</a></p>",
        escape(id)
    );
    if board.deployment(id).is_none() {
        html.push_str("<p role=\"status\">This deployment is not (or no longer) listed.</p>");
    }
    let revisions = match revisions {
        Ok(revisions) => revisions,
        Err(err) => {
            let _ = write!(
                html,
                "<p role=\"alert\" class=\"error\">Cannot read the history: {}</p>",
                escape(err)
            );
            return html;
        }
    };
    let (Some(oldest), Some(newest)) = (revisions.first(), revisions.last()) else {
        html.push_str("<p>No revision is kept.</p>");
        return html;
    };
    let _ = write!(
        html,
        "<p id=\"kept\">{} revisions kept ({}–{}).",
        revisions.len(),
        oldest.number,
        newest.number
    );
    if oldest.number > 1 {
        let dropped = if oldest.number == 2 {
            "Revision 1 is".to_owned()
        } else {
            format!("Revisions 1–{} are", oldest.number - 1)
        };
        let _ = write!(
            html,
            " {dropped} no longer kept: the daemon keeps each deployment's newest revisions \
(<code>--revisions-kept</code>)."
        );
    }
    html.push_str("</p>");
    html.push_str(
        "<table><caption>Revisions, newest first</caption><thead><tr><th scope=\"col\">Revision</th><th scope=\"col\">Written</th><th scope=\"col\">By</th><th scope=\"col\">Summary</th><th scope=\"col\">Changes</th><th scope=\"col\">Roll back</th></tr></thead><tbody>",
    );
    for revision in revisions.iter().rev() {
        let number = revision.number;
        let changes = if number > oldest.number {
            format!(
                "<a href=\"/deployments/{id_attr}/diff?from={}&amp;to={number}\">from {}</a>",
                number - 1,
                number - 1
            )
        } else {
            String::new()
        };
        let rollback = if number == newest.number {
            "current".to_owned()
        } else {
            format!(
                "<form method=\"post\" action=\"/deployments/{id_attr}/rollback\" data-confirm=\"Roll {} back to revision {number}?\"><input type=\"hidden\" name=\"to\" value=\"{number}\"><button type=\"submit\">Roll back to {number}</button></form>",
                escape(id)
            )
        };
        let _ = write!(
            html,
            "<tr data-revision=\"{number}\"><td>{number}</td><td>{}</td><td>{}</td><td>{}</td><td>{changes}</td><td>{rollback}</td></tr>",
            escape(&revision.created),
            escape(&revision.author),
            escape(&revision.summary),
        );
    }
    html.push_str("</tbody></table>");
    html
}

/// The form that asks for the difference between any two revisions (outside the live
/// fragment, so an update does not reset what is being typed).
fn diff_form(id: &str, from: &str, to: &str) -> String {
    format!(
        "<form class=\"filter\" method=\"get\" action=\"/deployments/{}/diff\" aria-label=\"Compare revisions\">\
<label for=\"d-from\">From revision<input id=\"d-from\" name=\"from\" inputmode=\"numeric\" value=\"{}\" required></label>\
<label for=\"d-to\">To revision<input id=\"d-to\" name=\"to\" inputmode=\"numeric\" value=\"{}\" required></label>\
<button type=\"submit\">Show the difference</button></form>",
        encode(id),
        escape(from),
        escape(to)
    )
}

/// `GET /deployments/<id>/history`.
pub(super) async fn history_page(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Response {
    let mut view = HistoryView::new(id.clone());
    let live = view.render(&shared).await;
    let events = format!(
        "/events/history/{}?have={}",
        encode(&id),
        fingerprint(&live)
    );
    Html(pages::page(
        &format!("History of {id}"),
        View::Deployments,
        &events,
        &diff_form(&id, "", ""),
        &live,
    ))
    .into_response()
}

/// `GET /events/history/<id>`: the history fragment again whenever it changes.
pub(super) async fn history_events(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(params): Params,
) -> Response {
    let view = Arc::new(tokio::sync::Mutex::new(HistoryView::new(id)));
    live(shared, have(&params), move |shared| {
        let view = Arc::clone(&view);
        async move { view.lock().await.render(&shared).await }
    })
    .into_response()
}

/// A revision number from a form or query field: `Err` names the field and what it held.
fn revision_number(params: &HashMap<String, String>, field: &str) -> Result<i64, String> {
    let value = params
        .get(field)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("the field `{field}` (a revision number) is missing"))?;
    value
        .parse::<i64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            format!("the field `{field}` is {value:?}: a revision is a whole number from 1")
        })
}

/// A page saying what was refused, with the given status.
fn refused(status: StatusCode, id: &str, what: &str, message: &str) -> Response {
    let live = format!(
        "<p role=\"alert\" class=\"error\">{what}: {}</p><p><a href=\"/deployments/{}/history\">Back to the history</a></p>",
        escape(message),
        encode(id)
    );
    let page = pages::page("Refused", View::Deployments, "", "", &live);
    (status, Html(page)).into_response()
}

/// `GET /deployments/<id>/diff?from=R1&to=R2`: the unified difference of the two revisions'
/// package YAML, removed and added lines marked.
pub(super) async fn diff_page(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(params): Params,
) -> Response {
    let what = "Cannot compare the revisions";
    let numbers = revision_number(&params, "from")
        .and_then(|from| revision_number(&params, "to").map(|to| (from, to)));
    let (from, to) = match numbers {
        Ok(numbers) => numbers,
        Err(err) => return refused(StatusCode::BAD_REQUEST, &id, what, &err),
    };
    let api = match (shared.connect)().await {
        Ok(api) => api,
        Err(err) => return refused(StatusCode::SERVICE_UNAVAILABLE, &id, what, &err),
    };
    let mut packages = Vec::with_capacity(2);
    for number in [from, to] {
        match api.deployment_revision(&id, number).await {
            Ok(revision) => packages.push(revision),
            Err(err) => return refused(StatusCode::NOT_FOUND, &id, what, &err.to_string()),
        }
    }
    let label = |r: &DeploymentRevision| {
        format!(
            "deployment {id} revision {} ({}, {})",
            r.number, r.author, r.summary
        )
    };
    let diff = crate::cli::diff::unified(
        &label(&packages[0]),
        &packages[0].package_yaml,
        &label(&packages[1]),
        &packages[1].package_yaml,
    );
    let id_attr = encode(&id);
    let mut live = format!(
        "<h2>Deployment <span class=\"id\">{}</span>: revision {from} → {to}</h2><p><a href=\"/deployments/{id_attr}/history\">Back to the history</a></p>",
        escape(&id)
    );
    if diff.is_empty() {
        live.push_str("<p id=\"no-difference\">The two revisions have the same package.</p>");
    } else {
        live.push_str("<pre class=\"diff\" aria-label=\"Difference\" tabindex=\"0\">");
        for line in diff.lines() {
            let class = if line.starts_with("---") || line.starts_with("+++") {
                "file"
            } else if line.starts_with("@@") {
                "hunk"
            } else if line.starts_with('-') {
                "removed"
            } else if line.starts_with('+') {
                "added"
            } else {
                "kept"
            };
            let _ = writeln!(live, "<span class=\"{class}\">{}</span>", escape(line));
        }
        live.push_str("</pre>");
    }
    Html(pages::page(
        &format!("{id}: revision {from} → {to}"),
        View::Deployments,
        "",
        &diff_form(&id, &from.to_string(), &to.to_string()),
        &live,
    ))
    .into_response()
}

/// `POST /deployments/<id>/rollback` (`to=N`): the Data API's `RollbackDeployment` as the
/// signed-in caller, then back to the history.
pub(super) async fn rollback(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    author: Option<Extension<Author>>,
    body: axum::body::Bytes,
) -> Response {
    let what = format!("Cannot roll {id} back");
    let params: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
    let number = match revision_number(&params, "to") {
        Ok(number) => number,
        Err(err) => return refused(StatusCode::BAD_REQUEST, &id, &what, &err),
    };
    let author = Author::name_of(author.as_ref().map(|Extension(a)| a));
    match super::writes::rollback(&shared.api, &id, number, author).await {
        Ok(()) => Redirect::to(&format!("/deployments/{}/history", encode(&id))).into_response(),
        Err(err) => refused(StatusCode::CONFLICT, &id, &what, &err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(number: i64, author: &str, summary: &str) -> DeploymentRevision {
        DeploymentRevision {
            number,
            created: format!("2026-12-07T19:00:0{number}Z"),
            author: author.to_owned(),
            summary: summary.to_owned(),
            package_yaml: String::new(),
        }
    }

    #[test]
    fn the_history_lists_newest_first_and_says_what_retention_dropped() {
        let board = Board::default();
        let kept = Ok(vec![
            revision(3, "alice", "package updated"),
            revision(4, "<script>", "rolled back to revision 3"),
            revision(5, "preparer", "prepared and approved"),
        ]);
        let html = history(&board, "d&1", &kept);
        assert!(html.contains("3 revisions kept (3–5). Revisions 1–2 are no longer kept"));
        let rows: Vec<&str> = html.split("<tr data-revision=\"").skip(1).collect();
        assert_eq!(
            rows.iter()
                .map(|r| r.split('"').next().unwrap())
                .collect::<Vec<_>>(),
            ["5", "4", "3"]
        );
        assert!(rows[0].contains("<td>current</td>"), "{}", rows[0]);
        assert!(rows[1].contains("&lt;script&gt;"), "{}", rows[1]);
        assert!(
            rows[1].contains("action=\"/deployments/d%261/rollback\"")
                && rows[1].contains("name=\"to\" value=\"4\""),
            "{}",
            rows[1]
        );
        assert!(
            rows[1].contains("/deployments/d%261/diff?from=3&amp;to=4"),
            "{}",
            rows[1]
        );
        // The oldest kept revision has nothing before it to compare with.
        assert!(!rows[2].contains("diff?"), "{}", rows[2]);
    }

    #[test]
    fn revision_numbers_are_whole_numbers_from_one() {
        let params = |v: &str| HashMap::from([("to".to_owned(), v.to_owned())]);
        assert_eq!(revision_number(&params(" 7 "), "to"), Ok(7));
        for bad in ["0", "-1", "x", "1.5"] {
            let err = revision_number(&params(bad), "to").unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        let err = revision_number(&HashMap::new(), "from").unwrap_err();
        assert!(err.contains("`from`") && err.contains("missing"), "{err}");
    }
}

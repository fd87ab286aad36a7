//! The web dashboard's HTML, rendered on the server from the [`Board`]: the page around each
//! view and the `<main id="live">` fragment the event stream sends again when the board
//! changes. Everything shown is escaped; a page of deployments shows at most [`PAGE`] rows, so
//! a page costs the same at 100 and at 100,000 deployments.

use std::fmt::Write as _;

use crate::dashboard::{Board, CatalogKind, Connection, DeploymentFilter, DeploymentRow, Tristate};

/// Rows of deployments a page shows.
pub const PAGE: usize = 100;

/// The views, as the navigation names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// A catalog.
    Catalog(CatalogKind),
    /// The deployments (the home page).
    Deployments,
}

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a query-string value.
pub fn encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(byte as char);
            }
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// A whole page: header, navigation, `above` (the filter form), the live fragment and the
/// script, which follows `events`.
pub fn page(title: &str, current: View, events: &str, above: &str, live: &str) -> String {
    let mut nav = String::new();
    for (view, href, label) in [
        (
            View::Catalog(CatalogKind::Templates),
            "/templates",
            "1 Templates",
        ),
        (View::Catalog(CatalogKind::Sites), "/sites", "2 Sites"),
        (View::Catalog(CatalogKind::Plugins), "/plugins", "3 Plugins"),
        (View::Deployments, "/", "4 Deployments"),
    ] {
        let current = if view == current {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(nav, "<li><a href=\"{href}\"{current}>{label}</a></li>");
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · preparer</title><link rel=\"stylesheet\" href=\"/assets/dashboard.css\"></head>\
<body data-events=\"{events}\"><a class=\"skip\" href=\"#live\">Skip to content</a>\
<header><h1>preparer</h1><p id=\"connection\" role=\"status\">{status}</p></header>\
<nav aria-label=\"Views\"><ul>{nav}</ul></nav>{above}\
<main id=\"live\" tabindex=\"-1\">{live}</main>\
<script src=\"/assets/dashboard.js\"></script></body></html>\n",
        title = escape(title),
        events = escape(events),
        // A page without an event stream (a diff, a refusal) is not live and never will be.
        status = if events.is_empty() {
            ""
        } else {
            "connecting…"
        },
    )
}

/// The deployments filter form, filled with `filter`.
pub fn filter_form(filter: &DeploymentFilter) -> String {
    let text = |id: &str, label: &str, value: Option<&str>, hint: &str| {
        format!(
            "<label for=\"f-{id}\">{label}<input id=\"f-{id}\" name=\"{id}\" value=\"{}\" placeholder=\"{hint}\"></label>",
            escape(value.unwrap_or_default())
        )
    };
    let select = |id: &str, label: &str, value: Tristate| {
        let mut options = String::new();
        for (option, text) in [("any", "any"), ("yes", "yes"), ("no", "no")] {
            let selected = if value.as_str() == option {
                " selected"
            } else {
                ""
            };
            let _ = write!(
                options,
                "<option value=\"{option}\"{selected}>{text}</option>"
            );
        }
        format!(
            "<label for=\"f-{id}\">{label}<select id=\"f-{id}\" name=\"{id}\">{options}</select></label>"
        )
    };
    let metadata = filter.metadata_terms();
    let words = filter.text();
    format!(
        "<form class=\"filter\" role=\"search\" method=\"get\" action=\"/\" aria-label=\"Filter deployments\">{}{}{}{}{}{}{}<button type=\"submit\">Filter</button> <a href=\"/\">Clear</a></form>",
        text("template", "Template", filter.template(), "oran/cu-*"),
        text("site", "Site", filter.site(), "paris/**"),
        text("parent", "Parent", filter.parent(), "deployment id"),
        select("prepared", "Prepared", filter.prepared()),
        select("approved", "Approved", filter.approved()),
        text("metadata", "Metadata", Some(&metadata), "KEY=PATTERN …"),
        text("q", "Text", Some(&words), "id, template or site"),
    )
}

/// The query string that gives `filter` (without `offset`).
pub fn filter_query(filter: &DeploymentFilter) -> String {
    let mut pairs: Vec<String> = Vec::new();
    let mut add = |key: &str, value: &str| {
        if !value.is_empty() && value != "any" {
            pairs.push(format!("{key}={}", encode(value)));
        }
    };
    add("template", filter.template().unwrap_or_default());
    add("site", filter.site().unwrap_or_default());
    add("parent", filter.parent().unwrap_or_default());
    add("prepared", filter.prepared().as_str());
    add("approved", filter.approved().as_str());
    add("metadata", &filter.metadata_terms());
    add("q", &filter.text());
    pairs.join("&")
}

fn connection(board: &Board) -> String {
    match board.connection() {
        Connection::Live => String::new(),
        Connection::Connecting => "<p role=\"alert\">Listing the store…</p>".to_owned(),
        Connection::Lost { reason } => format!(
            "<p role=\"alert\" class=\"error\">The Data API is unreachable, reconnecting: {}</p>",
            escape(reason)
        ),
    }
}

fn state(row: &DeploymentRow) -> &'static str {
    if !row.error.is_empty() {
        "<span class=\"error\">error</span>"
    } else if row.prepared {
        "<span class=\"prepared\">prepared</span>"
    } else {
        "<span class=\"pending\">pending</span>"
    }
}

fn deployment_link(id: &str) -> String {
    if id.is_empty() {
        String::new()
    } else {
        format!("<a href=\"/deployments/{}\">{}</a>", encode(id), escape(id))
    }
}

fn rows_table(
    board: &Board,
    caption: &str,
    rows: &mut dyn Iterator<Item = &DeploymentRow>,
) -> String {
    let mut html = format!(
        "<table><caption>{caption}</caption><thead><tr><th scope=\"col\">Deployment</th><th scope=\"col\">Template</th><th scope=\"col\">Site</th><th scope=\"col\">State</th><th scope=\"col\">Approved</th><th scope=\"col\">Children</th><th scope=\"col\">Parent</th></tr></thead><tbody>"
    );
    for row in rows {
        let children = board.child_count(&row.id);
        let _ = write!(
            html,
            "<tr data-id=\"{id}\"><td class=\"id\">{link}</td><td>{template}</td><td>{site}</td><td>{state}</td><td>{approved}</td><td>{children}</td><td class=\"id\">{parent}</td></tr>",
            id = escape(&row.id),
            link = deployment_link(&row.id),
            template = escape(&row.template_id),
            site = escape(&row.site_id),
            state = state(row),
            approved = if row.approved { "yes" } else { "no" },
            children = if children == 0 {
                String::new()
            } else {
                children.to_string()
            },
            parent = deployment_link(&row.parent_id),
        );
    }
    html.push_str("</tbody></table>");
    html
}

/// The deployments fragment: counts, the page of rows from `offset` that `filter` lets
/// through (in id order), and the pager.
pub fn deployments(board: &Board, filter: &DeploymentFilter, offset: usize) -> String {
    let mut shown = 0;
    let mut page: Vec<&DeploymentRow> = Vec::with_capacity(PAGE);
    for row in board.visible().iter().filter_map(|id| board.deployment(id)) {
        if filter.matches(row) {
            if shown >= offset && page.len() < PAGE {
                page.push(row);
            }
            shown += 1;
        }
    }
    let mut html = connection(board);
    let _ = write!(
        html,
        "<p id=\"summary\" aria-live=\"polite\">{} deployments, {} prepared, <strong>{shown} shown</strong></p>",
        board.deployment_count(),
        board.prepared_count(),
    );
    let end = offset + page.len();
    let caption = if page.is_empty() {
        "No deployment matches".to_owned()
    } else {
        format!("Deployments {}–{end} of {shown}", offset + 1)
    };
    html.push_str(&rows_table(board, &caption, &mut page.into_iter()));
    let query = filter_query(filter);
    let link = |offset: usize, text: &str| {
        let sep = if query.is_empty() { "" } else { "&amp;" };
        format!(
            "<a href=\"/?{}{sep}offset={offset}\">{text}</a>",
            escape(&query)
        )
    };
    html.push_str("<p class=\"pager\">");
    if offset > 0 {
        html.push_str(&link(offset.saturating_sub(PAGE), "Previous page"));
    }
    if end < shown {
        html.push_str(&link(end, "Next page"));
    }
    html.push_str("</p>");
    html
}

/// A catalog's fragment.
pub fn catalog(board: &Board, kind: CatalogKind) -> String {
    let (caption, first, second) = match kind {
        CatalogKind::Templates => ("Templates", "Template", "Metadata"),
        CatalogKind::Sites => ("Sites", "Site", "Metadata"),
        CatalogKind::Plugins => ("Plugins", "Plugin", "Triggers and endpoint"),
    };
    let entries = board.catalog(kind);
    let mut html = connection(board);
    let _ = write!(
        html,
        "<table><caption>{caption}: {}</caption><thead><tr><th scope=\"col\">{first}</th><th scope=\"col\">{second}</th></tr></thead><tbody>",
        entries.len()
    );
    for entry in entries {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(&entry.id),
            escape(&entry.summary)
        );
    }
    html.push_str("</tbody></table>");
    html
}

/// A deployment's fragment: its row, error, parent, children (the first page), actions and
/// `package` (or why it could not be read).
pub fn deployment(board: &Board, id: &str, package: &Result<String, String>) -> String {
    let Some(row) = board.deployment(id) else {
        return format!(
            "{}<h2>Deployment {}</h2><p role=\"alert\">There is no such deployment (deleted, or not yet listed).</p><p><a href=\"/\">All deployments</a></p>",
            connection(board),
            escape(id)
        );
    };
    let mut html = connection(board);
    let metadata: Vec<String> = row
        .metadata
        .iter()
        .map(|(k, v)| escape(&format!("{k}={v}")))
        .collect();
    let _ = write!(
        html,
        "<h2>Deployment <span class=\"id\">{id}</span></h2><dl>\
<dt>Template</dt><dd>{template}</dd><dt>Site</dt><dd>{site}</dd><dt>Parent</dt><dd>{parent}</dd>\
<dt>State</dt><dd id=\"state\">{state}</dd><dt>Approved</dt><dd>{approved}</dd>\
<dt>Created</dt><dd>{created}</dd><dt>Updated</dt><dd>{updated}</dd><dt>Metadata</dt><dd>{metadata}</dd></dl>",
        id = escape(&row.id),
        template = escape(&row.template_id),
        site = escape(if row.site_id.is_empty() {
            "–"
        } else {
            &row.site_id
        }),
        parent = if row.parent_id.is_empty() {
            "–".to_owned()
        } else {
            deployment_link(&row.parent_id)
        },
        state = state(row),
        approved = if row.approved { "yes" } else { "no" },
        created = escape(&row.created),
        updated = escape(&row.updated),
        metadata = metadata.join("<br>"),
    );
    if !row.error.is_empty() {
        let _ = write!(
            html,
            "<p role=\"alert\" class=\"error\">Preparation error: {}</p>",
            escape(&row.error)
        );
    }
    let id_attr = encode(&row.id);
    let _ = write!(
        html,
        "<div class=\"actions\"><form method=\"post\" action=\"/deployments/{id_attr}/approve\" data-confirm=\"Approve this deployment?\"><button type=\"submit\">Approve</button></form>\
<form method=\"post\" action=\"/deployments/{id_attr}/delete\" data-confirm=\"Delete this deployment and its descendants?\"><button type=\"submit\" class=\"danger\">Delete</button></form>\
<a class=\"history\" href=\"/deployments/{id_attr}/history\">History, diff and rollback</a></div>"
    );
    let count = board.child_count(&row.id);
    if count > 0 {
        let caption = format!(
            "Children: {count} (<a href=\"/?parent={id_attr}\">all of them in the list</a>)"
        );
        let mut children = board.children(&row.id).take(PAGE);
        html.push_str(&rows_table(board, &caption, &mut children));
    } else {
        html.push_str("<p>No children.</p>");
    }
    html.push_str("<h3 id=\"package-title\">Package</h3>");
    match package {
        Ok(yaml) => {
            let _ = write!(
                html,
                "<pre aria-labelledby=\"package-title\" tabindex=\"0\">{}</pre>",
                escape(yaml)
            );
        }
        Err(err) => {
            let _ = write!(
                html,
                "<p role=\"alert\">Cannot read the package: {}</p>",
                escape(err)
            );
        }
    }
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_queries_are_encoded() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(encode("cu-* a=b&c"), "cu-%2A%20a%3Db%26c");
    }

    #[test]
    fn the_filter_form_and_query_read_back_to_the_same_filter() {
        let filter = DeploymentFilter::parse("template=oran/* prepared=no region=eu-* edge")
            .expect("filter");
        let query = filter_query(&filter);
        assert_eq!(
            query,
            "template=oran/%2A&prepared=no&metadata=region%3Deu-%2A&q=edge"
        );
        let form = filter_form(&filter);
        assert!(form.contains("<label for=\"f-template\">Template<input id=\"f-template\" name=\"template\" value=\"oran/*\""), "{form}");
        assert!(form.contains("<option value=\"no\" selected>"), "{form}");
    }
}

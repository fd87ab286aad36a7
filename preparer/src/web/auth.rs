//! The web dashboard's authentication: the same credentials and roles as the Data API, so
//! the page is no anonymous back door to it. When the daemon authenticates (`--auth-tokens`,
//! or client certificates with `--tls-client-ca`), every page and event stream needs a caller:
//!
//! - a bearer token from the token file (`Authorization: Bearer TOKEN`, for scripts), or
//! - the same token typed once into the login form (`/login`), kept in an HTTP-only,
//!   `SameSite=Strict` cookie (`Secure` over TLS), checked against the file on every request
//!   (a token removed from the file stops working at once), or
//! - the connection's verified client certificate (its subject CN, else first SAN).
//!
//! Roles come from `--auth-policy` over the preparer's table ([`crate::auth`]): pages and
//! event streams need what `Watch` needs (`read`), a deployment's history and diff what
//! `ListDeploymentRevisions` / `GetDeploymentRevision` need (`read`), Approve, Delete and Roll
//! back what `ApproveDeployment` / `DeleteDeployment` / `RollbackDeployment` need (`write`).
//! Without a policy file every authenticated caller has the table's default role (`write`), as
//! on the gRPC API. The login page, the style sheet and the script are open. The caller's
//! identity goes with the request ([`Author`]) so the page's writes are recorded under it.
//!
//! Cross-site requests: the session cookie is `SameSite=Strict`, so a browser does not send it
//! with another site's form; and a form post whose `Origin` names another site than the one
//! asked (`Host`) is refused before anything else (`403`), signed in or not — a page
//! elsewhere cannot make a browser on the operator's machine approve, delete or roll back
//! through a dashboard that serves loopback without credentials. Scripts (no `Origin`) are
//! not affected.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use nephrite_runtime::ServeArgs;
use nephrite_runtime::auth::{AuthPolicy, TokenFile};

use super::Shared;
use super::pages::{self, View};
use super::tls::WebTlsError;
use crate::auth::method_path;

/// The cookie that carries a logged-in browser's token.
pub const COOKIE: &str = "preparer_session";

/// The identity a connection's verified client certificate names (set per connection).
#[derive(Debug, Clone, Default)]
pub(super) struct PeerIdentity(pub Option<String>);

/// What the dashboard checks callers with.
pub(super) struct WebAuth {
    tokens: Option<TokenFile>,
    policy: AuthPolicy,
    certificates: bool,
    tls: bool,
}

/// Who makes a request: the authenticated caller's identity, set by [`guard`] (absent when
/// the dashboard needs no credentials).
#[derive(Debug, Clone)]
pub(super) struct Author(pub String);

impl Author {
    /// The name a write is recorded under: the caller's, else `anonymous` (as the gRPC API
    /// records a caller without credentials).
    pub(super) fn name_of(author: Option<&Author>) -> &str {
        author.map_or("anonymous", |Author(name)| name.as_str())
    }
}

/// An authenticated caller.
#[derive(Debug, Clone)]
struct Caller {
    name: String,
    roles: Vec<String>,
}

impl WebAuth {
    /// The daemon's token file, policy (over the preparer's roles) and client certificates.
    pub(super) fn of(serve: &ServeArgs) -> Result<WebAuth, WebTlsError> {
        let tokens = serve
            .token_file()
            .map_err(|e| WebTlsError::Config(e.to_string()))?;
        let policy = serve
            .auth_policy(crate::auth::roles())
            .map_err(|e| WebTlsError::Config(e.to_string()))?;
        let tls = serve.tls_cert.is_some();
        Ok(WebAuth {
            tokens,
            policy,
            certificates: tls && serve.tls_client_ca.is_some(),
            tls,
        })
    }

    /// Whether callers must prove an identity.
    pub(super) fn required(&self) -> bool {
        self.tokens.is_some() || self.certificates
    }

    fn caller(&self, name: String) -> Caller {
        let roles = self.policy.roles_of(&name);
        Caller { name, roles }
    }

    fn token_identity(&self, token: &str) -> Option<String> {
        self.tokens.as_ref()?.identity_of(token.as_bytes())
    }

    /// The caller of a request: `Err` with the reason when a credential was presented and
    /// is wrong, `Ok(None)` when none was.
    fn authenticate(&self, request: &Request) -> Result<Option<Caller>, &'static str> {
        let headers = request.headers();
        if let Some(value) = headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .ok_or("the authorization header is not \"Bearer TOKEN\"")?;
            return self
                .token_identity(token)
                .map(|name| Some(self.caller(name)))
                .ok_or("the bearer token is not valid");
        }
        if let Some(token) = cookie(headers) {
            return self
                .token_identity(&token)
                .map(|name| Some(self.caller(name)))
                .ok_or("the session's token is no longer valid: log in again");
        }
        if self.certificates
            && let Some(PeerIdentity(Some(name))) = request.extensions().get::<PeerIdentity>()
        {
            return Ok(Some(self.caller(name.clone())));
        }
        Ok(None)
    }

    fn allows(&self, caller: &Caller, method: &str) -> bool {
        self.policy.allows(&caller.roles, &method_path(method))
    }
}

/// The Data API method whose permission a dashboard request needs.
fn method_of(request: &Request) -> &'static str {
    let path = request.uri().path();
    if request.method() == Method::POST {
        if path.ends_with("/approve") {
            return "ApproveDeployment";
        }
        if path.ends_with("/delete") {
            return "DeleteDeployment";
        }
        if path.ends_with("/rollback") {
            return "RollbackDeployment";
        }
    }
    if path.starts_with("/deployments/") {
        if path.ends_with("/history") {
            return "ListDeploymentRevisions";
        }
        if path.ends_with("/diff") {
            return "GetDeploymentRevision";
        }
    }
    if path.starts_with("/events/history/") {
        return "ListDeploymentRevisions";
    }
    "Watch"
}

/// Whether a form post comes from another site: its `Origin` (scheme, host and port) names
/// another authority than the `Host` it was sent to, or is `null` (an opaque origin).
fn cross_site(request: &Request) -> bool {
    if request.method() != Method::POST {
        return false;
    }
    let Some(origin) = request.headers().get(header::ORIGIN) else {
        return false;
    };
    let origin = origin.to_str().unwrap_or("null");
    let authority = origin
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/'));
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    match (authority, host) {
        (Some(authority), Some(host)) => !authority.eq_ignore_ascii_case(host),
        _ => true,
    }
}

/// Checks every request but the login page and the static assets.
pub(super) async fn guard(
    State(shared): State<Arc<Shared>>,
    mut request: Request,
    next: Next,
) -> Response {
    if cross_site(&request) {
        let live = "<p role=\"alert\" class=\"error\">A form sent from another site is refused: \
open the dashboard and use its own buttons.</p>";
        let page = pages::page("Forbidden", View::Deployments, "", "", live);
        return (StatusCode::FORBIDDEN, Html(page)).into_response();
    }
    let path = request.uri().path();
    let auth = &shared.auth;
    if !auth.required() || path == "/login" || path.starts_with("/assets/") {
        return next.run(request).await;
    }
    let caller = match auth.authenticate(&request) {
        Ok(Some(caller)) => caller,
        Ok(None) => return refused(&request, "credentials are required", auth.tls),
        Err(reason) => return refused(&request, reason, auth.tls),
    };
    let method = method_of(&request);
    if !auth.allows(&caller, method) {
        let roles = if caller.roles.is_empty() {
            "none".to_owned()
        } else {
            caller.roles.join(", ")
        };
        let message = format!(
            "{} (roles: {roles}) may not {}",
            caller.name,
            match method {
                "ApproveDeployment" => "approve deployments",
                "DeleteDeployment" => "delete deployments",
                "RollbackDeployment" => "roll deployments back",
                "ListDeploymentRevisions" | "GetDeploymentRevision" => {
                    "read deployments' histories"
                }
                _ => "read the dashboard",
            }
        );
        let live = format!(
            "<p role=\"alert\" class=\"error\">{}</p>",
            pages::escape(&message)
        );
        let page = pages::page("Forbidden", View::Deployments, "", "", &live);
        return (StatusCode::FORBIDDEN, Html(page)).into_response();
    }
    request.extensions_mut().insert(Author(caller.name));
    next.run(request).await
}

/// 401: the login form for a page, plain text for an event stream or a form post.
fn refused(request: &Request, reason: &str, tls: bool) -> Response {
    let path = request.uri().path();
    let mut response = if request.method() == Method::GET && !path.starts_with("/events/") {
        let next = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        (
            StatusCode::UNAUTHORIZED,
            Html(login_page(next, Some(reason))),
        )
            .into_response()
    } else {
        (StatusCode::UNAUTHORIZED, reason.to_owned()).into_response()
    };
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"preparer\""),
    );
    if cookie(request.headers()).is_some() {
        response
            .headers_mut()
            .append(header::SET_COOKIE, clear_cookie(tls));
    }
    response
}

fn login_page(next: &str, problem: Option<&str>) -> String {
    let problem = problem
        .map(|p| format!("<p role=\"alert\" class=\"error\">{}</p>", pages::escape(p)))
        .unwrap_or_default();
    let live = format!(
        "<h2>Log in</h2>{problem}<form class=\"login\" method=\"post\" action=\"/login\">\
<input type=\"hidden\" name=\"next\" value=\"{}\">\
<label for=\"token\">Token (a line of the daemon's token file)\
<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required></label> \
<button type=\"submit\">Log in</button></form>",
        pages::escape(next)
    );
    pages::page("Log in", View::Deployments, "", "", &live)
}

/// `GET /login`: the form.
pub(super) async fn login_form(axum::extract::Query(params): super::routes::Params) -> Response {
    let next = params.get("next").map(String::as_str).unwrap_or("/");
    Html(login_page(safe_next(next), None)).into_response()
}

/// `POST /login` (`token`, `next`): checks the token and sets the session cookie.
pub(super) async fn login(State(shared): State<Arc<Shared>>, body: axum::body::Bytes) -> Response {
    let mut token = String::new();
    let mut next = "/".to_owned();
    for (key, value) in form_urlencoded::parse(&body) {
        match key.as_ref() {
            "token" => token = value.trim().to_owned(),
            "next" => next = value.into_owned(),
            _ => {}
        }
    }
    let next = safe_next(&next);
    let auth = &shared.auth;
    let Some(name) = auth.token_identity(&token) else {
        let page = login_page(next, Some("the token is not valid"));
        return (StatusCode::UNAUTHORIZED, Html(page)).into_response();
    };
    let caller = auth.caller(name);
    if !auth.allows(&caller, "Watch") {
        let page = login_page(
            next,
            Some(&format!(
                "{} may not read the dashboard (it needs the read role)",
                caller.name
            )),
        );
        return (StatusCode::FORBIDDEN, Html(page)).into_response();
    }
    let mut cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
        form_urlencoded::byte_serialize(token.as_bytes()).collect::<String>()
    );
    if auth.tls {
        cookie.push_str("; Secure");
    }
    let mut response = Redirect::to(next).into_response();
    if let Ok(value) = header::HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /logout`: forgets the session cookie.
pub(super) async fn logout(State(shared): State<Arc<Shared>>) -> Response {
    let mut response = Redirect::to("/login").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, clear_cookie(shared.auth.tls));
    response
}

fn clear_cookie(tls: bool) -> header::HeaderValue {
    header::HeaderValue::from_static(if tls {
        "preparer_session=; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age=0"
    } else {
        "preparer_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
    })
}

/// Only a path on this site (`/…`, not `//host`) is followed after logging in.
fn safe_next(next: &str) -> &str {
    if next.starts_with('/') && !next.starts_with("//") && !next.contains('\\') {
        next
    } else {
        "/"
    }
}

/// The session cookie's token, decoded.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE && !value.is_empty()).then(|| {
                form_urlencoded::parse(format!("t={value}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_login() {
        assert_eq!(safe_next("/deployments/a?x=1"), "/deployments/a?x=1");
        for outside in ["//evil.example/", "https://evil.example/", "/\\evil", ""] {
            assert_eq!(safe_next(outside), "/", "{outside}");
        }
    }

    #[test]
    fn the_cookie_round_trips_any_token() {
        let token = "a b;c=d+é";
        let encoded: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            format!("other=1; {COOKIE}={encoded}").parse().unwrap(),
        );
        assert_eq!(cookie(&headers).as_deref(), Some(token));
    }
}

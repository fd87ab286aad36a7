//! One connection and one request: find the outcome in the table, then answer it or forward
//! it to a member.
//!
//! Answers the router makes itself: 400 for a request it cannot route safely (no `Host` on
//! HTTP/1.1, several `Host` headers, an invalid host), 403 for REJECT, the redirect code for
//! redirects, 404 when nothing matches and there is no default backend, 503 when a pool has no
//! live member, 502 when the member fails. Everything a member answers is passed through
//! unchanged except hop-by-hop headers.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::rt::{Read, Write};
use hyper::service::service_fn;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use nephrite_l7::{Filters, Headers, Outcome, normalize_host, normalize_path};

use super::balance::{Balancer, Pick};
use super::filters::{change_map, mirror};
use super::metrics::PoolCounters;
use super::upgrade;
use super::upstream::body::ProxyBody;
use super::upstream::head::{Forwarding, RequestFraming, strip_hop_by_hop, write_request_head};
use super::upstream::{UpstreamError, request_framing};
use super::{HttpsClient, PoolState, RequestBody, Router, RouterState};

struct HeaderView<'a>(&'a HeaderMap, &'a Method);

impl Headers for HeaderView<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.to_str().ok())
    }

    fn method(&self) -> Option<&str> {
        Some(self.1.as_str())
    }
}

pub(crate) fn answer(status: StatusCode, text: &'static str) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::fixed(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

/// Serves one connection through hyper (h2c, terminated TLS); a drain shuts it down
/// gracefully.
pub(crate) async fn serve_connection<I>(router: Arc<Router>, io: I, client: SocketAddr, https: bool)
where
    I: Read + Write + Unpin + Send + 'static,
{
    let drain_router = router.clone();
    let _busy = drain_router.drain.busy();
    let service = service_fn(move |request| {
        let router = router.clone();
        async move { Ok::<_, Infallible>(handle(router, request, client, https).await) }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .keep_alive(true)
        // Answers are small: one flattened buffer and one send() beat writev of head and body.
        .writev(false)
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_secs(30));
    let connection = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        () = drain_router.drain.started() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(err) = served {
        tracing::debug!(%client, "connection: {err}");
    }
}

/// The host the request is for, as sent (with port), or why it is refused: `hosts` are the
/// values of its `Host` headers, `authority` the one of an absolute-form target.
pub(crate) fn request_host<'a>(
    mut hosts: impl Iterator<Item = &'a [u8]>,
    authority: Option<&'a str>,
    http11: bool,
) -> Result<Option<&'a str>, &'static str> {
    let header = hosts.next();
    if hosts.next().is_some() {
        return Err("several Host headers\n");
    }
    if let Some(authority) = authority {
        return Ok(Some(authority));
    }
    match header {
        Some(value) => {
            // As `HeaderValue::to_str`: visible ASCII (and tabs) only.
            let text = value
                .iter()
                .all(|b| *b == b'\t' || (0x20..0x7f).contains(b))
                .then(|| std::str::from_utf8(value).ok())
                .flatten()
                .ok_or("Host is not text\n")?;
            if text.is_empty()
                || text
                    .bytes()
                    .any(|b| !(b.is_ascii_alphanumeric() || b"-._:[]~%!$&'()*+,;=".contains(&b)))
            {
                return Err("invalid Host\n");
            }
            Ok(Some(text))
        }
        None if http11 => Err("HTTP/1.1 request without Host\n"),
        None => Ok(None),
    }
}

/// Whether every `%` of `target` starts a two-hex-digit escape.
fn valid_escapes(target: &str) -> bool {
    let bytes = target.as_bytes();
    bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

/// The member a request goes to.
pub(crate) struct Target<'s> {
    /// The pool's id.
    pub pool_id: &'s str,
    /// The pool's balancer (for success and failure).
    pub balancer: &'s Balancer,
    /// The pool's counters.
    pub counters: &'s PoolCounters,
    /// The member picked.
    pub member: SocketAddr,
    /// Hyper's TLS client for a reencrypt pool; `None` for plain HTTP.
    pub https_client: Option<&'s HttpsClient>,
    /// The deciding policy's filters.
    pub filters: &'s Filters,
    /// The request target with the policy's path rewrite, when it has one.
    pub rewritten: Option<String>,
}

impl Target<'_> {
    /// Counts a failed exchange against the member, and its ejection.
    pub fn failure(&self) {
        if self.balancer.failure(self.member) {
            self.counters.ejected();
        }
    }
}

/// Where a request goes: an answer the router makes itself, or a member.
pub(crate) enum Routed<'s> {
    /// Answer this, counted for the pool when one was chosen.
    Answer(Response<ProxyBody>, Option<&'s PoolCounters>),
    /// Forward to this member.
    Member(Target<'s>),
}

/// Checks the target and looks the request up in `state`'s table: `raw_host` is the host as
/// sent (see [`request_host`]), `target` the path and query.
pub(crate) fn route<'s>(
    state: &'s RouterState,
    https: bool,
    raw_host: Option<&str>,
    target: &str,
    headers: &dyn Headers,
) -> Routed<'s> {
    let host = raw_host.and_then(normalize_host).unwrap_or_default();
    if !valid_escapes(target) {
        return Routed::Answer(
            answer(
                StatusCode::BAD_REQUEST,
                "bad percent-encoding in the request target\n",
            ),
            None,
        );
    }
    let path = normalize_path(target);
    let listener = if https {
        &state.table.https
    } else {
        &state.table.http
    };
    let l7_request = nephrite_l7::Request {
        host: &host,
        path: &path,
        target,
        headers,
        client_cert: None,
    };
    let (outcome, filters) = listener.lookup_with_filters(&l7_request);
    let pool_id = match outcome {
        Outcome::Pool(pool) => pool,
        Outcome::Reject => {
            return Routed::Answer(answer(StatusCode::FORBIDDEN, "rejected\n"), None);
        }
        Outcome::Redirect { code, location } => {
            let mut response = answer(StatusCode::from_u16(code).unwrap_or(StatusCode::FOUND), "");
            let response = match HeaderValue::from_str(&location) {
                Ok(value) => {
                    response.headers_mut().insert(header::LOCATION, value);
                    change_map(response.headers_mut(), &filters.response_headers);
                    response
                }
                Err(_) => answer(StatusCode::BAD_REQUEST, "cannot redirect this target\n"),
            };
            return Routed::Answer(response, None);
        }
        Outcome::Status(404) => {
            return Routed::Answer(answer(StatusCode::NOT_FOUND, "no route\n"), None);
        }
        Outcome::Status(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            return Routed::Answer(answer(status, "no route\n"), None);
        }
    };
    let Some((pool_id, PoolState { balancer, counters })) = state.pools.get_key_value(pool_id)
    else {
        return Routed::Answer(
            answer(StatusCode::SERVICE_UNAVAILABLE, "no such pool\n"),
            None,
        );
    };
    let member = match balancer.pick_share() {
        Pick::Member(member) => member,
        Pick::Unavailable => {
            return Routed::Answer(
                answer(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the backend for this share does not resolve\n",
                ),
                Some(counters),
            );
        }
        Pick::None => {
            return Routed::Answer(
                answer(StatusCode::SERVICE_UNAVAILABLE, "no live member\n"),
                Some(counters),
            );
        }
    };
    Routed::Member(Target {
        pool_id,
        balancer,
        counters,
        member,
        https_client: state.https_clients.get(pool_id),
        filters,
        rewritten: filters
            .rewrite_path
            .as_ref()
            .map(|change| change.apply_to_target(&path, target)),
    })
}

/// The answer for a failed member exchange (502, or 400 when the client's body failed),
/// counting the failure against the member when it is the member's.
pub(crate) fn failed(target: &Target<'_>, err: &UpstreamError) -> Response<ProxyBody> {
    if err.is_client_side() {
        tracing::debug!(member = %target.member, pool = %target.pool_id, "{err}");
        return answer(StatusCode::BAD_REQUEST, "request body failed\n");
    }
    target.failure();
    tracing::debug!(member = %target.member, pool = %target.pool_id, "upstream: {err}");
    answer(StatusCode::BAD_GATEWAY, "member failed\n")
}

/// The answer from a reencrypt member (or 502), counted for or against it.
pub(crate) fn tls_answered(
    target: &Target<'_>,
    result: Result<Response<ProxyBody>, String>,
) -> Response<ProxyBody> {
    match result {
        Ok(response) => {
            target.balancer.success(target.member);
            response
        }
        Err(err) => {
            target.failure();
            tracing::debug!(member = %target.member, pool = %target.pool_id, "upstream: {err}");
            answer(StatusCode::BAD_GATEWAY, "member failed\n")
        }
    }
}

/// Answers one request hyper read (h2c, TLS), counted for its pool.
pub(crate) async fn handle(
    router: Arc<Router>,
    request: Request<Incoming>,
    client: SocketAddr,
    https: bool,
) -> Response<ProxyBody> {
    let state = router.state();
    let (response, counters) = respond(&router, &state, request, client, https).await;
    counters
        .unwrap_or(&state.unrouted)
        .answered(response.status());
    response
}

async fn respond<'s>(
    router: &Arc<Router>,
    state: &'s RouterState,
    request: Request<Incoming>,
    client: SocketAddr,
    https: bool,
) -> (Response<ProxyBody>, Option<&'s PoolCounters>) {
    let (mut parts, body) = request.into_parts();
    let protocol = upgrade::asked(&parts, &body);
    let on_upgrade = protocol
        .as_ref()
        .and_then(|_| parts.extensions.remove::<OnUpgrade>());
    let raw_host = match request_host(
        parts
            .headers
            .get_all(header::HOST)
            .iter()
            .map(|v| v.as_bytes()),
        parts.uri.authority().map(|a| a.as_str()),
        parts.version == Version::HTTP_11,
    ) {
        Ok(host) => host,
        Err(why) => return (answer(StatusCode::BAD_REQUEST, why), None),
    };
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let routed = route(
        state,
        https,
        raw_host,
        target,
        &HeaderView(&parts.headers, &parts.method),
    );
    let target_member = match routed {
        Routed::Answer(response, counters) => return (response, counters),
        Routed::Member(target) => target,
    };
    let counters = Some(target_member.counters);
    let filters = target_member.filters;
    let target = target_member.rewritten.as_deref().unwrap_or(target);
    // `raw_host` borrows the request's headers: changes go to a copy.
    let changed_headers = (!filters.request_headers.is_empty()).then(|| {
        let mut headers = parts.headers.clone();
        change_map(&mut headers, &filters.request_headers);
        headers
    });
    let forwarding = Forwarding {
        rewrite_host: filters.rewrite_host.as_deref(),
        client: client.ip(),
        https,
        host: raw_host,
        upgrade: on_upgrade
            .is_some()
            .then(|| protocol.as_ref().map(HeaderValue::as_bytes))
            .flatten(),
    };
    if let Some(https_client) = target_member.https_client {
        let (target, host) = (target.to_owned(), raw_host.map(str::to_owned));
        // Upgrades are not forwarded to reencrypt members.
        let forwarding = Forwarding {
            client: client.ip(),
            https,
            host: host.as_deref(),
            upgrade: None,
            rewrite_host: filters.rewrite_host.as_deref(),
        };
        if let Some(headers) = changed_headers {
            parts.headers = headers;
        }
        let body = body.map_err(Into::into).boxed();
        let result = forward_tls(
            https_client,
            parts,
            body,
            &forwarding,
            &target,
            target_member.member,
        )
        .await
        .map(|mut response| {
            change_map(response.headers_mut(), &filters.response_headers);
            response
        });
        return (tls_answered(&target_member, result), counters);
    }
    let Some(connections) = state.connections.get(&target_member.member) else {
        return (
            answer(StatusCode::SERVICE_UNAVAILABLE, "no live member\n"),
            counters,
        );
    };
    let headers = changed_headers.as_ref().unwrap_or(&parts.headers);
    let framing = request_framing(headers, &body);
    if !filters.mirrors.is_empty() && framing == RequestFraming::Empty {
        let pairs: Vec<(&[u8], &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
            .collect();
        mirror(
            state,
            filters,
            parts.method.as_str(),
            target,
            pairs.iter().copied(),
            &forwarding,
        );
    }
    let mut head = Vec::with_capacity(512);
    write_request_head(
        &mut head,
        &parts.method,
        target,
        headers,
        &forwarding,
        framing,
    );
    let response = match connections
        .exchange(parts.method == Method::HEAD, &head, body, framing)
        .await
    {
        Ok(response) if response.status() == StatusCode::SWITCHING_PROTOCOLS => match on_upgrade {
            Some(on_upgrade) => {
                target_member.balancer.success(target_member.member);
                upgrade::switch(router, response, on_upgrade, client)
            }
            None => answer(
                StatusCode::BAD_GATEWAY,
                "member switched protocols unasked\n",
            ),
        },
        Ok(response) => {
            target_member.balancer.success(target_member.member);
            let (mut response_parts, body) = response.into_parts();
            strip_hop_by_hop(&mut response_parts.headers);
            change_map(&mut response_parts.headers, &filters.response_headers);
            // The client's connection keeps its own version and keep-alive, whatever the
            // member spoke (an HTTP/1.0 member closes after every answer).
            response_parts.version = parts.version;
            Response::from_parts(response_parts, ProxyBody::Upstream(body))
        }
        Err(err) => failed(&target_member, &err),
    };
    (response, counters)
}

/// Forwards a request to a reencrypt (HTTPS) member through hyper's pooled TLS client.
pub(crate) async fn forward_tls(
    client: &HttpsClient,
    mut parts: http::request::Parts,
    body: RequestBody,
    forwarding: &Forwarding<'_>,
    target: &str,
    member: std::net::SocketAddr,
) -> Result<Response<ProxyBody>, String> {
    let client_version = parts.version;
    strip_hop_by_hop(&mut parts.headers);
    if let Some(value) = forwarding
        .rewrite_host
        .and_then(|h| HeaderValue::from_str(h).ok())
    {
        parts.headers.insert(header::HOST, value);
    } else if !parts.headers.contains_key(header::HOST)
        && let Some(value) = forwarding.host.and_then(|h| HeaderValue::from_str(h).ok())
    {
        parts.headers.insert(header::HOST, value);
    }
    let forwarded_for = match parts
        .headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
    {
        Some(previous) => format!("{previous}, {}", forwarding.client),
        None => forwarding.client.to_string(),
    };
    if let Ok(value) = HeaderValue::from_str(&forwarded_for) {
        parts.headers.insert("x-forwarded-for", value);
    }
    parts.headers.insert(
        "x-forwarded-proto",
        HeaderValue::from_static(if forwarding.https { "https" } else { "http" }),
    );
    if let Some(value) = forwarding.host.and_then(|h| HeaderValue::from_str(h).ok()) {
        parts.headers.insert("x-forwarded-host", value);
    }
    parts.uri = Uri::try_from(format!("https://{member}{target}"))
        .map_err(|e| format!("bad request target: {e}"))?;
    parts.version = Version::HTTP_11;
    let response = client
        .request(Request::from_parts(parts, body))
        .await
        .map_err(|e| e.to_string())?;
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    parts.version = client_version;
    Ok(Response::from_parts(
        parts,
        ProxyBody::Boxed(body.map_err(Into::into).boxed_unsync()),
    ))
}

//! Plain-HTTP client connections without hyper: a hand-written HTTP/1.x server codec.
//!
//! One task per connection reads a request head into its buffer and parses it in place
//! ([`request`]), routes it, forwards it to the member in the same task (the request body read
//! off the client's socket as the member takes it, see [`forward`]), and writes the answer's
//! head and the body pieces already there with one `send` ([`response`]). Requests on a
//! connection are served one after the other, so pipelined requests are answered in order.
//! A connection that opens with the HTTP/2 preface (h2c with prior knowledge) is handed to
//! hyper with the bytes already read.
//!
//! Keep-alive follows HTTP/1.1 (and `Connection: keep-alive` on HTTP/1.0); the connection
//! closes after a refused head, after an answer whose request body was not read whole, and
//! after an answer that can only end with the connection. A connection is closed when a request
//! head is not complete within the router's head timeout of its first byte (however slowly the
//! bytes keep coming), or when no request starts within that time of the last answer.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

pub(crate) mod forward;
pub(crate) mod request;
pub(crate) mod response;
#[cfg(test)]
mod tests;

use super::Router;
use super::filters::{changed, mirror};
use super::proxy::{self, Routed, answer, request_host, route};
use super::upgrade;
use super::upstream::Connection;
use super::upstream::body::{Decoder, ProxyBody, UpstreamBody};
use super::upstream::head::Forwarding;
use forward::{ClientBody, Forward};
use request::{BodyFraming, HeaderSpan, Refusal, RequestHead};
use response::{HeadContext, write_head};

/// The HTTP/2 connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves one plain-HTTP client connection to its end.
pub(crate) async fn serve(router: Arc<Router>, stream: TcpStream, client: SocketAddr) {
    let mut connection = Connection::new(stream);
    let mut timer = HeadTimer::new(router.head_timeout);
    let mut deadline = None;
    loop {
        let buffered = &connection.buffer[..];
        if buffered.len() >= PREFACE.len() || !PREFACE.starts_with(buffered) {
            break;
        }
        timer.start_head(&connection, &mut deadline);
        if !fill_within_timeout(&mut connection, &mut timer, deadline).await {
            return;
        }
    }
    if connection.buffer.starts_with(PREFACE) {
        let read = connection.buffer.split().freeze();
        let io = Prefixed {
            read,
            stream: connection.stream,
        };
        proxy::serve_connection(router, TokioIo::new(io), client, false).await;
        return;
    }
    let mut spans: Vec<HeaderSpan> = Vec::with_capacity(16);
    let mut out = Vec::with_capacity(4096);
    let mut member_head = Vec::with_capacity(1024);
    loop {
        let head = match read_head(&mut connection, &mut spans, &mut timer, deadline.take()).await {
            Ok(Some(head)) => head,
            Ok(None) => return,
            Err(refusal) => {
                refuse(&mut connection, &mut out, refusal).await;
                return;
            }
        };
        let busy = router.drain.busy();
        let keep_alive = serve_request(
            &router,
            &mut connection,
            &head,
            client,
            &mut out,
            &mut member_head,
        )
        .await;
        drop(busy);
        if !keep_alive {
            return;
        }
        spans = head.into_spans();
    }
}

/// The time-out of a connection waiting for a request head: one timer for the connection's
/// life, moved only when it fires before the current deadline (not once per request).
struct HeadTimer {
    sleep: Pin<Box<Sleep>>,
    timeout: Duration,
}

impl HeadTimer {
    fn new(timeout: Duration) -> Self {
        HeadTimer {
            sleep: Box::pin(tokio::time::sleep(timeout)),
            timeout,
        }
    }

    /// Once a head's first bytes are in, its deadline is fixed: that many bytes later or not,
    /// the head must be complete by then.
    fn start_head(&self, connection: &Connection, deadline: &mut Option<Instant>) {
        if deadline.is_none() && !connection.buffer.is_empty() {
            *deadline = Some(Instant::now() + self.timeout);
        }
    }
}

/// Reads more into the connection's buffer, waiting at most until `head_deadline` (a head
/// under way) or the timer's timeout from now (waiting for a request): false at end of stream,
/// on error or on time-out.
async fn fill_within_timeout(
    connection: &mut Connection,
    timer: &mut HeadTimer,
    head_deadline: Option<Instant>,
) -> bool {
    let mut deadline = head_deadline;
    let timeout = timer.timeout;
    let filled = std::future::poll_fn(|cx| {
        if let Poll::Ready(result) = connection.poll_fill(cx) {
            return Poll::Ready(Some(result));
        }
        // Idle waiting starts now (no clock read when the bytes are already there).
        let deadline = *deadline.get_or_insert_with(|| Instant::now() + timeout);
        loop {
            match timer.sleep.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if Instant::now() >= deadline => return Poll::Ready(None),
                Poll::Ready(()) => timer.sleep.as_mut().reset(deadline),
            }
        }
    })
    .await;
    matches!(filled, Some(Ok(n)) if n > 0)
}

/// Reads the next request head (`deadline`: of a head whose first bytes came earlier):
/// `Ok(None)` when the client closes (or times out).
async fn read_head(
    connection: &mut Connection,
    spans: &mut Vec<HeaderSpan>,
    timer: &mut HeadTimer,
    mut deadline: Option<Instant>,
) -> Result<Option<RequestHead>, Refusal> {
    loop {
        if !connection.buffer.is_empty()
            && let Some(head) = request::parse(&mut connection.buffer, spans)?
        {
            return Ok(Some(head));
        }
        timer.start_head(connection, &mut deadline);
        if !fill_within_timeout(connection, timer, deadline).await {
            return Ok(None);
        }
    }
}

/// Answers a refused head (empty body) before the connection closes.
async fn refuse(connection: &mut Connection, out: &mut Vec<u8>, refusal: Refusal) {
    out.clear();
    let context = HeadContext {
        http11: true,
        head_request: false,
        exact_length: Some(0),
        length_stands: true,
    };
    write_head(
        out,
        refusal.status(),
        std::iter::empty(),
        &context,
        &mut false,
    );
    let _ = response::send(
        &mut connection.stream,
        out,
        http_body_util::Empty::<Bytes>::new(),
        response::Encoding::None,
    )
    .await;
}

/// Serves one request: whether the connection may carry another.
async fn serve_request(
    router: &Router,
    connection: &mut Connection,
    head: &RequestHead,
    client: SocketAddr,
    out: &mut Vec<u8>,
    member_head: &mut Vec<u8>,
) -> bool {
    let mut decoder = match head.body {
        BodyFraming::Length(n) => Decoder::length(n),
        BodyFraming::Chunked => Decoder::chunked(),
    };
    let mut keep_alive = head.keep_alive;
    let hosts = head
        .headers()
        .filter(|(name, _)| name.eq_ignore_ascii_case(b"host"))
        .map(|(_, value)| value);
    let authority = head.uri.authority().map(|a| a.as_str());
    let state = router.state();
    let mut counters = None;
    let reply = match request_host(hosts, authority, head.http11) {
        Err(why) => Reply::Answer(answer(http::StatusCode::BAD_REQUEST, why)),
        Ok(raw_host) => {
            let target = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
            match route(&state, false, raw_host, target, head) {
                Routed::Answer(response, pool) => {
                    counters = pool;
                    Reply::Answer(response)
                }
                Routed::Member(member) => {
                    counters = Some(member.counters);
                    let filters = member.filters;
                    let headers = (!filters.request_headers.is_empty())
                        .then(|| changed(head.headers(), &filters.request_headers));
                    let request = Forward {
                        head,
                        target: member.rewritten.as_deref().unwrap_or(target),
                        drain: &router.drain,
                        forwarding: Forwarding {
                            client: client.ip(),
                            https: false,
                            host: raw_host,
                            upgrade: head.upgrade.then(|| head.header("upgrade")).flatten(),
                            rewrite_host: filters.rewrite_host.as_deref(),
                        },
                        headers: headers.as_deref(),
                        response_headers: &filters.response_headers,
                    };
                    if !filters.mirrors.is_empty() && head.has_no_body() {
                        match request.headers {
                            Some(owned) => mirror(
                                &state,
                                filters,
                                head.method(),
                                request.target,
                                owned.iter().map(|(n, v)| (n.as_slice(), v.as_slice())),
                                &request.forwarding,
                            ),
                            None => mirror(
                                &state,
                                filters,
                                head.method(),
                                request.target,
                                head.headers(),
                                &request.forwarding,
                            ),
                        }
                    }
                    let body = ClientBody {
                        connection: &mut *connection,
                        decoder: &mut decoder,
                        continue_written: (head.expect_continue && !head.has_no_body())
                            .then_some(0),
                    };
                    match (member.https_client, state.connections.get(&member.member)) {
                        (Some(client), _) => Reply::Answer(
                            forward::to_tls_member(client, &member, &request, body).await,
                        ),
                        (None, Some(connections)) => {
                            let forwarded = forward::to_member(
                                connections,
                                &member,
                                &request,
                                body,
                                member_head,
                                out,
                                &mut keep_alive,
                            )
                            .await;
                            match forwarded {
                                Ok((body, encoding, status)) => {
                                    Reply::Written(body, encoding, status)
                                }
                                Err(response) => Reply::Answer(response),
                            }
                        }
                        (None, None) => Reply::Answer(answer(
                            http::StatusCode::SERVICE_UNAVAILABLE,
                            "no live member\n",
                        )),
                    }
                }
            }
        }
    };
    // A body left unread cannot be skipped safely, and a draining router takes no more
    // requests: the connection ends with this answer.
    keep_alive &= decoder.is_done() && !router.drain.is_draining();
    let status = match &reply {
        Reply::Written(_, _, status) => *status,
        Reply::Answer(response) => response.status(),
    };
    counters.unwrap_or(&state.unrouted).answered(status);
    let sent = match reply {
        Reply::Written(body, _, http::StatusCode::SWITCHING_PROTOCOLS) => {
            upgrade::tunnel(connection, out, body, client).await;
            return false;
        }
        Reply::Written(body, encoding, _) => {
            response::send(&mut connection.stream, out, body, encoding).await
        }
        Reply::Answer(response) => {
            let (parts, body) = response.into_parts();
            let context = HeadContext {
                http11: head.http11,
                head_request: head.method() == "HEAD",
                exact_length: hyper::body::Body::size_hint(&body).exact(),
                length_stands: true,
            };
            out.clear();
            let pairs = response::pairs(&parts.headers);
            let encoding = write_head(
                out,
                parts.status,
                pairs.iter().copied(),
                &context,
                &mut keep_alive,
            );
            response::send(&mut connection.stream, out, body, encoding).await
        }
    };
    match sent {
        Ok(()) => keep_alive,
        Err(err) => {
            tracing::debug!(%client, "answer: {err}");
            false
        }
    }
}

/// What a request is answered with.
enum Reply {
    /// A member's answer whose head is already in the output buffer: its body, how it is
    /// sent, and the member's status.
    Written(UpstreamBody, response::Encoding, http::StatusCode),
    /// An answer still to write.
    Answer(http::Response<ProxyBody>),
}

/// A connection whose first bytes were already read (handed to hyper for h2c).
struct Prefixed {
    read: Bytes,
    stream: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if !this.read.is_empty() {
            let n = this.read.len().min(buf.remaining());
            buf.put_slice(&this.read.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

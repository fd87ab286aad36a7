//! Forwarding a request read by the codec: the client's body is read off the client's
//! connection as the member takes it (sending `100 Continue` first when the client asked),
//! plain-HTTP members through the router's own client, reencrypt members through hyper's TLS
//! client (the body handed over through a small channel).

use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;

use super::super::drain::Drain;
use super::super::filters::{change_map, changed};
use super::super::proxy::{Target, answer, failed, forward_tls, tls_answered};
use super::super::upstream::body::{BoxError, Decoder, ProxyBody, UpstreamBody};
use super::super::upstream::head::{Forwarding, RequestFraming, write_request_head_from};
use super::super::upstream::{Connection, MemberConnections};
use super::super::{HttpsClient, RequestBody};
use super::request::{BodyFraming, RequestHead};
use super::response::{Encoding, HeadContext, write_head};
use nephrite_l7::HeaderChanges;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The body of the request being served, read off the client's connection.
pub(crate) struct ClientBody<'a> {
    pub(crate) connection: &'a mut Connection,
    pub(crate) decoder: &'a mut Decoder,
    /// `100 Continue` still to send (bytes of it already written).
    pub(crate) continue_written: Option<usize>,
}

impl Body for ClientBody<'_> {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if this.decoder.is_done() {
            return Poll::Ready(None);
        }
        while let Some(written) = this.continue_written {
            if written == CONTINUE.len() {
                this.continue_written = None;
                break;
            }
            let stream = Pin::new(&mut this.connection.stream);
            match ready!(stream.poll_write(cx, &CONTINUE[written..])) {
                Ok(0) => {
                    return Poll::Ready(Some(Err(std::io::ErrorKind::WriteZero.into())));
                }
                Ok(n) => this.continue_written = Some(written + n),
                Err(err) => return Poll::Ready(Some(Err(err))),
            }
        }
        this.decoder
            .poll_next(this.connection, cx)
            .map(|next| next.map(|piece| piece.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        self.decoder.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        self.decoder.size_hint()
    }
}

/// A body fed through a channel (to hyper's client, which needs a `'static` body).
struct ChannelBody {
    pieces: mpsc::Receiver<Result<Bytes, BoxError>>,
    hint: SizeHint,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        this.pieces
            .poll_recv(cx)
            .map(|next| next.map(|piece| piece.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        self.hint
    }
}

/// What a request needs to be forwarded.
pub(crate) struct Forward<'a> {
    /// The request head.
    pub head: &'a RequestHead,
    /// Its target (path and query).
    pub target: &'a str,
    /// What to add to it.
    pub forwarding: Forwarding<'a>,
    /// The router's drain: an answer written while draining says `Connection: close`.
    pub drain: &'a Drain,
    /// The request headers as changed by the policy's filters (`None`: as sent).
    pub headers: Option<&'a [(Vec<u8>, Vec<u8>)]>,
    /// The policy's changes to the member's answer headers.
    pub response_headers: &'a HeaderChanges,
}

/// Forwards to a plain-HTTP member through its pool. The member's answer head is written for
/// the client into `out` straight from the member's read buffer (no header map); what is left
/// to send is its body, encoded as returned, and the member's status. `Err` is an answer the
/// router makes itself.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn to_member(
    connections: &Arc<MemberConnections>,
    target: &Target<'_>,
    request: &Forward<'_>,
    body: ClientBody<'_>,
    member_head: &mut Vec<u8>,
    out: &mut Vec<u8>,
    keep_alive: &mut bool,
) -> Result<(UpstreamBody, Encoding, StatusCode), http::Response<ProxyBody>> {
    let framing = match request.head.body {
        BodyFraming::Length(0) => RequestFraming::Empty,
        BodyFraming::Length(_) => RequestFraming::Length,
        BodyFraming::Chunked => RequestFraming::Chunked,
    };
    member_head.clear();
    match request.headers {
        Some(headers) => write_request_head_from(
            member_head,
            request.head.method(),
            request.target,
            headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())),
            &request.forwarding,
            framing,
        ),
        None => write_request_head_from(
            member_head,
            request.head.method(),
            request.target,
            request.head.headers(),
            &request.forwarding,
            framing,
        ),
    }
    let head_request = request.head.method() == "HEAD";
    let mut encoding = Encoding::None;
    let mut status = StatusCode::BAD_GATEWAY;
    let exchanged = connections
        .exchange_with(
            head_request,
            member_head,
            body,
            framing,
            |meta, headers, _| {
                status = meta.status;
                if status == StatusCode::SWITCHING_PROTOCOLS && request.forwarding.upgrade.is_none()
                {
                    return Ok(()); // answered with a 502 below
                }
                out.clear();
                let context = HeadContext {
                    http11: request.head.http11,
                    head_request,
                    exact_length: None,
                    length_stands: meta.length_stands,
                };
                let pairs = headers.iter().map(|h| (h.name.as_bytes(), h.value));
                if request.drain.is_draining() {
                    *keep_alive = false;
                }
                encoding = if request.response_headers.is_empty() {
                    write_head(out, meta.status, pairs, &context, keep_alive)
                } else {
                    let owned = changed(pairs, request.response_headers);
                    let pairs = owned.iter().map(|(n, v)| (n.as_slice(), v.as_slice()));
                    write_head(out, meta.status, pairs, &context, keep_alive)
                };
                Ok(())
            },
        )
        .await;
    match exchanged {
        Ok(_)
            if status == StatusCode::SWITCHING_PROTOCOLS
                && request.forwarding.upgrade.is_none() =>
        {
            Err(answer(
                StatusCode::BAD_GATEWAY,
                "member switched protocols unasked\n",
            ))
        }
        Ok((_, body)) => {
            target.balancer.success(target.member);
            Ok((body, encoding, status))
        }
        Err(err) => Err(failed(target, &err)),
    }
}

/// Forwards to a reencrypt member through hyper's TLS client, pumping the client's body into
/// it while the exchange runs.
pub(crate) async fn to_tls_member(
    client: &HttpsClient,
    target: &Target<'_>,
    request: &Forward<'_>,
    mut body: ClientBody<'_>,
) -> http::Response<ProxyBody> {
    let Ok(mut parts) = request.head.to_parts() else {
        return answer(StatusCode::BAD_REQUEST, "request head not forwardable\n");
    };
    if let Some(headers) = request.headers {
        parts.headers.clear();
        for (name, value) in headers {
            if let (Ok(name), Ok(value)) = (
                http::header::HeaderName::from_bytes(name),
                http::header::HeaderValue::from_bytes(value),
            ) {
                parts.headers.append(name, value);
            }
        }
    }
    let (sender, pieces) = mpsc::channel(4);
    let request_body: RequestBody = if body.is_end_stream() {
        Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed()
    } else {
        ChannelBody {
            pieces,
            hint: body.size_hint(),
        }
        .boxed()
    };
    let exchange = forward_tls(
        client,
        parts,
        request_body,
        &request.forwarding,
        request.target,
        target.member,
    );
    let pump = async move {
        while let Some(frame) = body.frame().await {
            let piece = match frame {
                Ok(frame) => match frame.into_data() {
                    Ok(data) => Ok(data),
                    Err(_) => continue,
                },
                Err(err) => Err(BoxError::from(err)),
            };
            let failed = piece.is_err();
            if sender.send(piece).await.is_err() || failed {
                break;
            }
        }
    };
    let (mut exchange, mut pump) = (pin!(exchange), pin!(pump));
    let mut pumped = false;
    let result = std::future::poll_fn(|cx| {
        if !pumped {
            pumped = pump.as_mut().poll(cx).is_ready();
        }
        exchange.as_mut().poll(cx)
    })
    .await;
    let result = result.map(|mut response| {
        change_map(response.headers_mut(), request.response_headers);
        response
    });
    tls_answered(target, result)
}

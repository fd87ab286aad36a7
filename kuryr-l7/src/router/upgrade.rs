//! Protocol upgrades (the WebSocket handshake): which requests ask for one, and the tunnel a
//! member's `101 Switching Protocols` opens between the client's connection and the member's.
//!
//! An upgrade request is an HTTP/1.1 request without a body whose `Connection` lists
//! `upgrade` and which has an `Upgrade` other than `h2c` (that one is the client's business
//! with the router). It is forwarded with both headers; a 101 the client did not ask for is a
//! 502. Once switched, the bytes each side sent behind its head go first, then everything is
//! relayed both ways until either side closes; the tunnel counts as busy for a drain.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode, Version};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::Router;
use super::proxy::answer;
use super::server::request::lists;
use super::upstream::Connection;
use super::upstream::body::{ProxyBody, UpstreamBody};
use super::upstream::head::strip_hop_by_hop;

/// Whether an `Upgrade` value asks for a protocol the router forwards (anything but `h2c`).
pub(crate) fn forwarded(protocol: &[u8]) -> bool {
    !protocol.trim_ascii().eq_ignore_ascii_case(b"h2c")
}

/// The `Upgrade` value of an upgrade request that hyper read.
pub(crate) fn asked(parts: &http::request::Parts, body: &Incoming) -> Option<HeaderValue> {
    if parts.version != Version::HTTP_11 || !hyper::body::Body::is_end_stream(body) {
        return None;
    }
    let protocol = parts.headers.get(header::UPGRADE)?;
    let asked = parts
        .headers
        .get_all(header::CONNECTION)
        .iter()
        .any(|value| lists(value.as_bytes(), b"upgrade"));
    (asked && forwarded(protocol.as_bytes())).then(|| protocol.clone())
}

/// Relays bytes between `client` and the switched `member` until either side closes, the
/// member's bytes already read first.
async fn relay(
    client: &mut (impl AsyncRead + AsyncWrite + Unpin),
    mut member: Connection,
    peer: SocketAddr,
) {
    if !member.buffer.is_empty() {
        if client.write_all(&member.buffer).await.is_err() {
            return;
        }
        member.buffer.clear();
    }
    if let Err(err) = tokio::io::copy_bidirectional(client, &mut member.stream).await {
        tracing::debug!(client = %peer, "tunnel: {err}");
    }
}

/// The router's own codec: sends the 101 `head` to the client and the bytes the client sent
/// behind its request to the member, then relays.
pub(crate) async fn tunnel(
    client: &mut Connection,
    head: &[u8],
    body: UpstreamBody,
    peer: SocketAddr,
) {
    let Some(mut member) = body.into_switched() else {
        return;
    };
    if client.stream.write_all(head).await.is_err() {
        return;
    }
    if !client.buffer.is_empty() {
        if member.stream.write_all(&client.buffer).await.is_err() {
            return;
        }
        client.buffer.clear();
    }
    relay(&mut client.stream, member, peer).await;
}

/// Hyper: the member's 101 for the client, and the tunnel behind it once hyper hands over
/// the client's connection (`on_upgrade`).
pub(crate) fn switch(
    router: &Arc<Router>,
    response: Response<UpstreamBody>,
    on_upgrade: OnUpgrade,
    peer: SocketAddr,
) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    let protocol = parts.headers.get(header::UPGRADE).cloned();
    strip_hop_by_hop(&mut parts.headers);
    if let Some(protocol) = protocol {
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        parts.headers.insert(header::UPGRADE, protocol);
    }
    let Some(member) = body.into_switched() else {
        return answer(StatusCode::BAD_GATEWAY, "member connection lost\n");
    };
    let router = router.clone();
    tokio::spawn(async move {
        let _busy = router.drain.busy();
        match on_upgrade.await {
            Ok(upgraded) => relay(&mut TokioIo::new(upgraded), member, peer).await,
            Err(err) => tracing::debug!(client = %peer, "upgrade: {err}"),
        }
    });
    Response::from_parts(parts, ProxyBody::fixed(Bytes::new()))
}

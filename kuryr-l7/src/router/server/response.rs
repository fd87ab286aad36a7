//! Answers on a client's HTTP/1.x connection: the head (status line, headers, framing,
//! `Date`, keep-alive) written into one buffer, and the body sent with it when it is already
//! there (one `send` for a small answer), re-chunked when its length is unknown.

use std::cell::RefCell;
use std::pin::Pin;
use std::task::Poll;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use hyper::body::{Body, Frame};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::super::upstream::head::HOP_BY_HOP;
use super::request::lists;

/// How the body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// No body (HEAD, 1xx, 204, 304).
    None,
    /// As is: its length is in the head, or the connection closes after it (HTTP/1.0).
    Raw,
    /// Chunked transfer coding (HTTP/1.1, length unknown).
    Chunked,
}

/// Pieces of at least this size are written on their own rather than copied into the buffer.
const LARGE_PIECE: usize = 16 * 1024;
/// The buffer is flushed once it holds this much.
const FLUSH_AT: usize = 64 * 1024;

thread_local! {
    /// The `Date` value for the current second (IMF-fixdate, 29 bytes).
    static DATE: RefCell<(u64, Vec<u8>)> = const { RefCell::new((u64::MAX, Vec::new())) };
}

/// Appends the current `Date` value (formatted once a second per thread).
fn push_date(out: &mut Vec<u8>) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != now {
            let text = i64::try_from(now)
                .ok()
                .and_then(|s| jiff::Timestamp::from_second(s).ok())
                .and_then(|t| {
                    jiff::fmt::rfc2822::DateTimePrinter::new()
                        .timestamp_to_rfc9110_string(&t)
                        .ok()
                })
                .unwrap_or_default();
            *cached = (now, text.into_bytes());
        }
        out.extend_from_slice(&cached.1);
    });
}

fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// What the head of an answer needs to know about its request and body.
pub(crate) struct HeadContext {
    /// The client spoke HTTP/1.1 (else HTTP/1.0).
    pub http11: bool,
    /// The request was `HEAD`.
    pub head_request: bool,
    /// The body's exact length, when known.
    pub exact_length: Option<u64>,
    /// Whether `Content-Length` headers stand (false: `Transfer-Encoding` overrode them and
    /// they are left out).
    pub length_stands: bool,
}

/// The headers of `map` as (name, value) pairs, for [`write_head`].
pub(crate) fn pairs(map: &HeaderMap) -> Vec<(&[u8], &[u8])> {
    map.iter()
        .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()))
        .collect()
}

/// Whether header `name` is hop-by-hop: one of [`HOP_BY_HOP`], or listed in the message's
/// first `Connection` header `first` (or any of them, when there are `several`).
fn hop_by_hop<'h>(
    name: &[u8],
    first: Option<&[u8]>,
    several: bool,
    headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
) -> bool {
    HOP_BY_HOP
        .iter()
        .any(|hop| name.eq_ignore_ascii_case(hop.as_bytes()))
        || first.is_some_and(|value| lists(value, name))
        || (several
            && headers
                .filter(|(n, _)| n.eq_ignore_ascii_case(b"connection"))
                .any(|(_, value)| lists(value, name)))
}

/// Writes the head of an answer with `status` and `headers` (any case; hop-by-hop ones are
/// left out) into `out`, as hyper's server would: `Content-Length` from the body when known
/// and not given, chunked coding for HTTP/1.1 when unknown (close-delimited for HTTP/1.0),
/// `Date` when absent, and `Connection` when keep-alive differs from the version's default.
/// `keep_alive` is cleared when the body can only end with the connection.
pub(crate) fn write_head<'h>(
    out: &mut Vec<u8>,
    status: StatusCode,
    headers: impl Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
    context: &HeadContext,
    keep_alive: &mut bool,
) -> Encoding {
    out.extend_from_slice(if context.http11 {
        b"HTTP/1.1 "
    } else {
        b"HTTP/1.0 "
    });
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    let (mut first, mut several) = (None, false);
    for (name, value) in headers.clone() {
        if name.eq_ignore_ascii_case(b"connection") {
            several |= first.is_some();
            first.get_or_insert(value);
        }
    }
    let mut has_length = false;
    let mut has_date = false;
    for (name, value) in headers.clone() {
        let length = name.eq_ignore_ascii_case(b"content-length");
        if (length && !context.length_stands) || hop_by_hop(name, first, several, headers.clone()) {
            continue;
        }
        has_length |= length;
        has_date |= name.eq_ignore_ascii_case(b"date");
        push_header(out, name, value);
    }
    let bodiless_status = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let bodiless = context.head_request || bodiless_status;
    let encoding = if has_length {
        if bodiless {
            Encoding::None
        } else {
            Encoding::Raw
        }
    } else if let Some(length) = context.exact_length {
        if !bodiless_status {
            push_header(out, b"content-length", length.to_string().as_bytes());
        }
        if bodiless {
            Encoding::None
        } else {
            Encoding::Raw
        }
    } else if bodiless {
        Encoding::None
    } else if context.http11 {
        push_header(out, b"transfer-encoding", b"chunked");
        Encoding::Chunked
    } else {
        *keep_alive = false;
        Encoding::Raw
    };
    if !has_date {
        out.extend_from_slice(b"date: ");
        push_date(out);
        out.extend_from_slice(b"\r\n");
    }
    if status == StatusCode::SWITCHING_PROTOCOLS {
        // The connection becomes the member's tunnel: the protocol it switched to goes out
        // with `Connection: upgrade` (both hop-by-hop, so not copied above).
        *keep_alive = false;
        if let Some((_, protocol)) = headers
            .clone()
            .find(|(name, _)| name.eq_ignore_ascii_case(b"upgrade"))
        {
            push_header(out, b"connection", b"upgrade");
            push_header(out, b"upgrade", protocol);
        }
    } else {
        match (context.http11, *keep_alive) {
            (true, false) => push_header(out, b"connection", b"close"),
            (false, true) => push_header(out, b"connection", b"keep-alive"),
            _ => {}
        }
    }
    out.extend_from_slice(b"\r\n");
    encoding
}

/// Why an answer could not be sent whole (the connection must close).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// Writing to the client failed.
    #[error("writing to the client: {0}")]
    Client(std::io::Error),
    /// The body failed (a member closed or broke its framing) after the head went out.
    #[error("answer body: {0}")]
    Body(super::super::upstream::body::BoxError),
}

/// Sends `out` (the head, already written) and `body` encoded as `encoding` on `stream`:
/// body pieces that are ready go out with the head; the buffer is flushed before waiting for
/// more.
pub(crate) async fn send<B>(
    stream: &mut TcpStream,
    out: &mut Vec<u8>,
    body: B,
    encoding: Encoding,
) -> Result<(), SendError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<super::super::upstream::body::BoxError>,
{
    let mut body = body;
    if encoding != Encoding::None {
        loop {
            let ready = std::future::poll_fn(|cx| {
                Poll::Ready(match Pin::new(&mut body).poll_frame(cx) {
                    Poll::Ready(frame) => Some(frame),
                    Poll::Pending => None,
                })
            })
            .await;
            let next = match ready {
                Some(next) => next,
                None => {
                    flush(stream, out).await?;
                    std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
                }
            };
            let Some(frame) = next else { break };
            let data = match frame.map(Frame::into_data) {
                Ok(Ok(data)) => data,
                Ok(Err(_)) => continue, // trailers are not forwarded
                Err(err) => {
                    flush(stream, out).await?;
                    return Err(SendError::Body(err.into()));
                }
            };
            if data.is_empty() {
                continue;
            }
            if encoding == Encoding::Chunked {
                out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            }
            if data.len() >= LARGE_PIECE {
                flush(stream, out).await?;
                stream.write_all(&data).await.map_err(SendError::Client)?;
            } else {
                out.extend_from_slice(&data);
            }
            if encoding == Encoding::Chunked {
                out.extend_from_slice(b"\r\n");
            }
            if out.len() >= FLUSH_AT {
                flush(stream, out).await?;
            }
        }
        if encoding == Encoding::Chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    flush(stream, out).await
}

async fn flush(stream: &mut TcpStream, out: &mut Vec<u8>) -> Result<(), SendError> {
    if !out.is_empty() {
        stream.write_all(out).await.map_err(SendError::Client)?;
        out.clear();
    }
    Ok(())
}

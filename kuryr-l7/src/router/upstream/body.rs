//! Response bodies: a member's body read straight off its connection (by `Content-Length`,
//! chunked coding or until close), and [`ProxyBody`], the body of every answer the router gives.
//!
//! A member's body is decoded in the task serving the client, with no task or channel between
//! the two sockets; when the body is complete its connection goes back to the member's idle
//! pool, ready for the next request.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::{Body, Frame, SizeHint};

use super::{Connection, MemberConnections};

/// The error type of every answer body.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every answer: fixed text, a member's body, or any other body (reencrypt pools).
pub(crate) enum ProxyBody {
    /// Bytes the router answers itself (empty once sent).
    Fixed(Option<Bytes>),
    /// A member's body, read off its connection.
    Upstream(UpstreamBody),
    /// Any other body.
    Boxed(UnsyncBoxBody<Bytes, BoxError>),
}

impl ProxyBody {
    /// A body of `bytes`.
    pub(crate) fn fixed(bytes: Bytes) -> Self {
        ProxyBody::Fixed((!bytes.is_empty()).then_some(bytes))
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ProxyBody::Fixed(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Upstream(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(BoxError::from))),
            ProxyBody::Boxed(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Fixed(bytes) => bytes.is_none(),
            ProxyBody::Upstream(body) => body.is_end_stream(),
            ProxyBody::Boxed(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Fixed(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            ProxyBody::Upstream(body) => body.size_hint(),
            ProxyBody::Boxed(body) => body.size_hint(),
        }
    }
}

/// Where a chunked body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk, this many bytes left.
    Data(u64),
    /// After a chunk's data, before its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines up to an empty line (trailers are dropped).
    Trailers,
}

/// The framing state of a body being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
    Done,
}

/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 8 * 1024;

fn invalid(why: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("member body: {why}"),
    )
}

/// Parses a chunk-size line (`1a;ext=1`), without its CRLF.
fn chunk_size(line: &[u8]) -> Result<u64, std::io::Error> {
    let digits = line
        .split(|b| *b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    if digits.is_empty() || digits.len() > 15 {
        return Err(invalid("bad chunk size"));
    }
    digits.iter().try_fold(0u64, |size, digit| {
        let value = (*digit as char)
            .to_digit(16)
            .ok_or_else(|| invalid("bad chunk size"))?;
        Ok(size * 16 + u64::from(value))
    })
}

/// Up to `left` buffered bytes of `connection`, and how many are left after them.
fn take_up_to(connection: &mut Connection, left: u64) -> (Bytes, u64) {
    let take = usize::try_from(left)
        .unwrap_or(usize::MAX)
        .min(connection.buffer.len());
    (connection.take(take), left - take as u64)
}

/// Decodes one message body (by length or chunked coding, or until the peer closes) off a
/// connection's read buffer, reading more as needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decoder {
    state: State,
}

impl Decoder {
    /// A body of exactly `length` bytes.
    pub(crate) fn length(length: u64) -> Self {
        Decoder {
            state: if length == 0 {
                State::Done
            } else {
                State::Length(length)
            },
        }
    }

    /// A chunked body.
    pub(crate) fn chunked() -> Self {
        Decoder {
            state: State::Chunked(Chunk::Size),
        }
    }

    /// Whether the whole body has been read.
    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// What is known of the bytes left (exact when the length is known).
    pub(crate) fn size_hint(&self) -> SizeHint {
        match self.state {
            State::Length(n) => SizeHint::with_exact(n),
            State::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }

    /// The next piece of the body: `None` once it is complete. After an error the connection
    /// cannot carry another message.
    pub(crate) fn poll_next(
        &mut self,
        connection: &mut Connection,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, std::io::Error>>> {
        loop {
            match self.state {
                State::Done => return Poll::Ready(None),
                State::Length(left) => {
                    if connection.buffer.is_empty() && ready!(connection.poll_fill(cx))? == 0 {
                        return Poll::Ready(Some(Err(invalid("closed before Content-Length"))));
                    }
                    let (data, left) = take_up_to(connection, left);
                    self.state = if left == 0 {
                        State::Done
                    } else {
                        State::Length(left)
                    };
                    return Poll::Ready(Some(Ok(data)));
                }
                State::UntilClose => {
                    if connection.buffer.is_empty() && ready!(connection.poll_fill(cx))? == 0 {
                        self.state = State::Done;
                        return Poll::Ready(None);
                    }
                    let data = connection.buffer.split().freeze();
                    return Poll::Ready(Some(Ok(data)));
                }
                State::Chunked(Chunk::Data(left)) => {
                    if connection.buffer.is_empty() && ready!(connection.poll_fill(cx))? == 0 {
                        return Poll::Ready(Some(Err(invalid("closed inside a chunk"))));
                    }
                    let (data, left) = take_up_to(connection, left);
                    self.state = State::Chunked(if left == 0 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left)
                    });
                    return Poll::Ready(Some(Ok(data)));
                }
                State::Chunked(Chunk::DataEnd) => {
                    if connection.buffer.len() < 2 {
                        if ready!(connection.poll_fill(cx))? == 0 {
                            return Poll::Ready(Some(Err(invalid("closed after a chunk"))));
                        }
                        continue;
                    }
                    if &connection.buffer[..2] != b"\r\n" {
                        return Poll::Ready(Some(Err(invalid("chunk not followed by CRLF"))));
                    }
                    connection.buffer.advance(2);
                    self.state = State::Chunked(Chunk::Size);
                }
                State::Chunked(chunk @ (Chunk::Size | Chunk::Trailers)) => {
                    let Some(end) = connection.buffer.windows(2).position(|w| w == b"\r\n") else {
                        if connection.buffer.len() > MAX_LINE {
                            return Poll::Ready(Some(Err(invalid("chunk line too long"))));
                        }
                        if ready!(connection.poll_fill(cx))? == 0 {
                            return Poll::Ready(Some(Err(invalid("closed inside chunk framing"))));
                        }
                        continue;
                    };
                    let line = connection.buffer.split_to(end + 2);
                    match chunk {
                        Chunk::Size => {
                            let size = chunk_size(&line[..end])?;
                            self.state = State::Chunked(if size == 0 {
                                Chunk::Trailers
                            } else {
                                Chunk::Data(size)
                            });
                        }
                        _ if end == 0 => {
                            self.state = State::Done;
                            return Poll::Ready(None);
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// A member's response body, read from its connection.
pub(crate) struct UpstreamBody {
    connection: Option<Connection>,
    decoder: Decoder,
    /// Whether the connection may serve another request once the body is read.
    keep_alive: bool,
    home: Arc<MemberConnections>,
}

impl UpstreamBody {
    pub(super) fn new(
        connection: Connection,
        framing: super::head::ResponseFraming,
        keep_alive: bool,
        home: Arc<MemberConnections>,
    ) -> Self {
        use super::head::ResponseFraming;
        let decoder = match framing {
            ResponseFraming::Empty => Decoder::length(0),
            ResponseFraming::Length(n) => Decoder::length(n),
            ResponseFraming::Chunked => Decoder::chunked(),
            ResponseFraming::UntilClose => Decoder {
                state: State::UntilClose,
            },
        };
        let mut body = UpstreamBody {
            connection: Some(connection),
            decoder,
            keep_alive,
            home,
        };
        if body.decoder.is_done() {
            body.finish();
        }
        body
    }

    /// The (empty) body of a `101 Switching Protocols` answer: the connection is kept for
    /// [`into_switched`](Self::into_switched), never pooled.
    pub(super) fn switched(connection: Connection, home: Arc<MemberConnections>) -> Self {
        UpstreamBody {
            connection: Some(connection),
            decoder: Decoder::length(0),
            keep_alive: false,
            home,
        }
    }

    /// The member's connection after a `101 Switching Protocols`, with what it sent past the
    /// head still in its buffer (`None` for any other answer).
    pub(crate) fn into_switched(mut self) -> Option<Connection> {
        self.connection.take()
    }

    /// The body is complete: the connection goes back to its member's idle pool when it can
    /// carry another request (nothing unread after the body), else it is closed.
    fn finish(&mut self) {
        if let Some(connection) = self.connection.take()
            && self.keep_alive
            && connection.buffer.is_empty()
        {
            self.home.put_back(connection);
        }
    }

    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, std::io::Error>>> {
        let Some(connection) = self.connection.as_mut() else {
            return Poll::Ready(None);
        };
        let next = ready!(self.decoder.poll_next(connection, cx));
        match &next {
            Some(Err(_)) => self.connection = None,
            _ if self.decoder.is_done() => self.finish(),
            _ => {}
        }
        Poll::Ready(next)
    }
}

impl std::fmt::Debug for UpstreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamBody")
            .field("decoder", &self.decoder)
            .field("keep_alive", &self.keep_alive)
            .finish_non_exhaustive()
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        match ready!(this.poll_body(cx)) {
            Some(Ok(data)) => Poll::Ready(Some(Ok(Frame::data(data)))),
            Some(Err(err)) => {
                this.connection = None;
                Poll::Ready(Some(Err(err)))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.decoder.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        self.decoder.size_hint()
    }
}

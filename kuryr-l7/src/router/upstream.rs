//! Plain-HTTP members: a hand-written HTTP/1.1 client with a keep-alive connection pool per
//! member.
//!
//! A request is written and its answer read in the task serving the client (no connection task,
//! no channel, no generic client per request): the idle connection used last is taken first
//! (LIFO, so the warmest sockets stay in use and the rest age out), the request head is written
//! with hop-by-hop headers removed and `X-Forwarded-*` set, the body is streamed (by
//! `Content-Length` or chunked), and the response body is read off the socket as the client
//! takes it; when it is complete the connection goes back to the pool.
//!
//! Members may be HTTP/1.0 servers that close every connection (such connections are never
//! pooled), may close idle connections at any time (an idle connection that turns out closed is
//! dropped, and a request without a body that finds its reused connection dead is sent again on
//! a fresh one), and may answer `Connection: close`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::Response;
use http_body_util::BodyExt;
use hyper::body::Body;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

pub(crate) mod body;
pub(crate) mod head;
#[cfg(test)]
mod tests;

use body::{BoxError, UpstreamBody};
use head::RequestFraming;

/// Connecting to a member gives up after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Idle connections older than this are closed instead of reused.
const IDLE_FOR: Duration = Duration::from_secs(30);
/// Idle connections kept per member.
const MAX_IDLE: usize = 256;
/// Body pieces up to this size are copied out of the read buffer.
const SMALL_PIECE: usize = 2 * 1024;
/// Read buffer reserved before each read.
const READ_AHEAD: usize = 8 * 1024;

/// Why a member exchange failed (every one is a 502 and counts towards ejection).
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    /// The TCP connection could not be made.
    #[error("connecting to {member}: {source}")]
    Connect {
        /// The member.
        member: SocketAddr,
        /// What went wrong.
        source: std::io::Error,
    },
    /// Writing the request or reading the response failed.
    #[error("talking to {member}: {source}")]
    Io {
        /// The member.
        member: SocketAddr,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The client's request body failed while being forwarded.
    #[error("reading the client's request body: {0}")]
    ClientBody(BoxError),
    /// The member's response head is not HTTP/1.x.
    #[error("bad response head: {0}")]
    BadResponse(String),
    /// The member closed the connection before answering.
    #[error("{0} closed the connection without answering")]
    NoAnswer(SocketAddr),
}

impl UpstreamError {
    /// Whether the failure is the client's rather than the member's.
    pub(crate) fn is_client_side(&self) -> bool {
        matches!(self, UpstreamError::ClientBody(_))
    }
}

/// One connection to a member and its read buffer.
pub(crate) struct Connection {
    pub(crate) stream: TcpStream,
    pub(crate) buffer: BytesMut,
}

impl Connection {
    /// A connection over `stream` with an empty read buffer.
    pub(crate) fn new(stream: TcpStream) -> Self {
        Connection {
            stream,
            buffer: BytesMut::with_capacity(READ_AHEAD),
        }
    }

    /// Reads what the socket has into the buffer: `Ready(Ok(0))` at end of stream.
    pub(crate) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        self.buffer.reserve(READ_AHEAD);
        loop {
            std::task::ready!(self.stream.poll_read_ready(cx))?;
            let room = self.buffer.capacity() - self.buffer.len();
            // A short read drained the socket: its readiness is forgotten with the read, so
            // that the next read waits for new data instead of spending a system call to learn
            // there is none. The readiness is taken before the read, so an event that arrives
            // after it is kept (tokio's `try_io` guarantee).
            let mut read = None;
            let (stream, buffer) = (&self.stream, &mut self.buffer);
            let result = stream.try_io(tokio::io::Interest::READABLE, || {
                let n = stream.try_read_buf(buffer)?;
                read = Some(n);
                if n > 0 && n < room {
                    Err(std::io::ErrorKind::WouldBlock.into())
                } else {
                    Ok(n)
                }
            });
            match (read, result) {
                (Some(n), _) => return Poll::Ready(Ok(n)),
                (None, Err(err)) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                (None, result) => return Poll::Ready(result),
            }
        }
    }

    /// The next `n` buffered bytes. Small pieces are copied so that the read buffer stays
    /// this connection's alone (and is reused); large ones are handed over without a copy.
    fn take(&mut self, n: usize) -> Bytes {
        if n <= SMALL_PIECE {
            let data = Bytes::copy_from_slice(&self.buffer[..n]);
            bytes::Buf::advance(&mut self.buffer, n);
            data
        } else {
            self.buffer.split_to(n).freeze()
        }
    }

    pub(crate) async fn fill(&mut self) -> std::io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// Whether an idle connection is still open: nothing to read and no end of stream.
    fn is_idle_open(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.stream.try_read(&mut probe), Err(err) if err.kind() == std::io::ErrorKind::WouldBlock)
    }
}

struct Idle {
    connection: Connection,
    since: Instant,
}

/// The idle connections to one member.
pub(crate) struct MemberConnections {
    address: SocketAddr,
    idle: Mutex<Vec<Idle>>,
}

impl MemberConnections {
    fn new(address: SocketAddr) -> Self {
        MemberConnections {
            address,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The most recently used idle connection that is young enough.
    fn take_idle(&self) -> Option<Connection> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(entry) = idle.pop() {
            if entry.since.elapsed() < IDLE_FOR {
                return Some(entry.connection);
            }
        }
        None
    }

    /// Returns a connection whose exchange is complete to the pool.
    fn put_back(&self, connection: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(Idle {
                connection,
                since: Instant::now(),
            });
        }
    }

    /// Idle connections held now.
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    async fn connect(&self) -> Result<Connection, UpstreamError> {
        let connect = || async {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(self.address)).await {
                Ok(result) => result,
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connect timed out",
                )),
            }
        };
        let stream = connect().await.map_err(|source| UpstreamError::Connect {
            member: self.address,
            source,
        })?;
        let _ = stream.set_nodelay(true);
        Ok(Connection::new(stream))
    }

    /// Sends a request (its head already written in `head`, its body `body` framed by
    /// `framing`) and reads the response head; the body follows as the client reads it.
    /// `head_request` is whether the method is `HEAD` (its answer never has a body).
    pub(crate) async fn exchange<B>(
        self: &Arc<Self>,
        head_request: bool,
        head: &[u8],
        body: B,
        framing: RequestFraming,
    ) -> Result<Response<UpstreamBody>, UpstreamError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        let mut headers = http::HeaderMap::new();
        let (meta, body) = self
            .exchange_with(head_request, head, body, framing, |meta, raw, bytes| {
                headers = head::header_map(raw, bytes, meta)?;
                Ok(())
            })
            .await?;
        let mut response = Response::new(body);
        *response.status_mut() = meta.status;
        *response.version_mut() = meta.version;
        *response.headers_mut() = headers;
        Ok(response)
    }

    /// [`exchange`](Self::exchange) handing the final response head to `on_head` as it lies
    /// in the read buffer (headers as parsed, and the buffer they point into), with no header
    /// map built.
    pub(crate) async fn exchange_with<B, F>(
        self: &Arc<Self>,
        head_request: bool,
        head: &[u8],
        body: B,
        framing: RequestFraming,
        mut on_head: F,
    ) -> Result<(head::ResponseMeta, UpstreamBody), UpstreamError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
        F: FnMut(&head::ResponseMeta, &[httparse::Header<'_>], &[u8]) -> Result<(), UpstreamError>,
    {
        let mut body = Some(body);
        loop {
            // A request with a body checks that the reused connection is still open before
            // spending its body on it; one without is simply sent again if it turns out dead.
            let reused = loop {
                match self.take_idle() {
                    Some(connection)
                        if framing == RequestFraming::Empty || connection.is_idle_open() =>
                    {
                        break Some(connection);
                    }
                    Some(_) => continue,
                    None => break None,
                }
            };
            let was_reused = reused.is_some();
            let mut connection = match reused {
                Some(connection) => connection,
                None => self.connect().await?,
            };
            let sent = send(&mut connection, self.address, head, &mut body, framing).await;
            let answered = match sent {
                Ok(()) => {
                    read_head(&mut connection, head_request, self.address, &mut on_head).await
                }
                Err(err) => Err(err),
            };
            match answered {
                Ok(meta) if meta.status == http::StatusCode::SWITCHING_PROTOCOLS => {
                    return Ok((meta, UpstreamBody::switched(connection, self.clone())));
                }
                Ok(meta) => {
                    let body =
                        UpstreamBody::new(connection, meta.framing, meta.keep_alive, self.clone());
                    return Ok((meta, body));
                }
                // A stale pooled connection: try again while the request is still whole.
                Err(UpstreamError::Io { .. } | UpstreamError::NoAnswer(_))
                    if was_reused && framing == RequestFraming::Empty => {}
                Err(err) => return Err(err),
            }
        }
    }
}

/// Writes the head and streams the body.
async fn send<B>(
    connection: &mut Connection,
    member: SocketAddr,
    head: &[u8],
    body: &mut Option<B>,
    framing: RequestFraming,
) -> Result<(), UpstreamError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let io = |source: std::io::Error| UpstreamError::Io { member, source };
    if framing == RequestFraming::Empty {
        return connection.stream.write_all(head).await.map_err(io);
    }
    let Some(mut body) = body.take() else {
        return Err(UpstreamError::BadResponse(
            "request body already consumed".into(),
        ));
    };
    // The head goes out with the first piece of the body.
    let mut pending: Vec<u8> = head.to_vec();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| UpstreamError::ClientBody(e.into()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers are not forwarded
        };
        if data.is_empty() {
            continue;
        }
        if framing == RequestFraming::Chunked {
            pending.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            pending.extend_from_slice(&data);
            pending.extend_from_slice(b"\r\n");
        } else {
            pending.extend_from_slice(&data);
        }
        connection.stream.write_all(&pending).await.map_err(io)?;
        pending.clear();
    }
    if framing == RequestFraming::Chunked {
        pending.extend_from_slice(b"0\r\n\r\n");
    }
    if !pending.is_empty() {
        connection.stream.write_all(&pending).await.map_err(io)?;
    }
    Ok(())
}

/// Reads the final response head (skipping `100 Continue` and other interim answers), handing
/// it to `on_head` in place, and takes it out of the buffer.
async fn read_head<F>(
    connection: &mut Connection,
    head_request: bool,
    member: SocketAddr,
    on_head: &mut F,
) -> Result<head::ResponseMeta, UpstreamError>
where
    F: FnMut(&head::ResponseMeta, &[httparse::Header<'_>], &[u8]) -> Result<(), UpstreamError>,
{
    let mut received = false;
    loop {
        if !connection.buffer.is_empty() {
            received = true;
            let bytes = &connection.buffer[..];
            let parsed = head::parse_response(bytes, head_request, |meta, headers| {
                on_head(meta, headers, bytes)
            })?;
            if let Some(meta) = parsed {
                bytes::Buf::advance(&mut connection.buffer, meta.length);
                if !meta.is_final() {
                    continue;
                }
                return Ok(meta);
            }
        }
        match connection.fill().await {
            Ok(0) if received => {
                return Err(UpstreamError::BadResponse(
                    "connection closed inside the response head".into(),
                ));
            }
            Ok(0) => return Err(UpstreamError::NoAnswer(member)),
            Ok(_) => {}
            Err(source) if received => {
                return Err(UpstreamError::BadResponse(format!(
                    "reading the response head: {source}"
                )));
            }
            Err(source) => return Err(UpstreamError::Io { member, source }),
        }
    }
}

/// How to frame the body of a request with these headers and this body.
pub(crate) fn request_framing(headers: &http::HeaderMap, body: &impl Body) -> RequestFraming {
    if body.is_end_stream() {
        RequestFraming::Empty
    } else if headers.contains_key(http::header::CONTENT_LENGTH)
        && !headers.contains_key(http::header::TRANSFER_ENCODING)
    {
        RequestFraming::Length
    } else {
        RequestFraming::Chunked
    }
}

/// The connection pools of every member, kept across table updates.
#[derive(Default)]
pub(crate) struct Upstreams {
    members: Mutex<HashMap<SocketAddr, Arc<MemberConnections>>>,
}

impl Upstreams {
    /// The pools for `addresses` (created as needed); pools of members no longer listed are
    /// forgotten (their idle connections close; exchanges in flight keep theirs).
    pub(crate) fn retain(
        &self,
        addresses: impl IntoIterator<Item = SocketAddr>,
    ) -> HashMap<SocketAddr, Arc<MemberConnections>> {
        let mut members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        let wanted: HashMap<SocketAddr, Arc<MemberConnections>> = addresses
            .into_iter()
            .map(|address| {
                let pool = members
                    .entry(address)
                    .or_insert_with(|| Arc::new(MemberConnections::new(address)))
                    .clone();
                (address, pool)
            })
            .collect();
        members.retain(|address, _| wanted.contains_key(address));
        wanted
    }
}

/// A stand-alone pool for one member (tests).
#[cfg(test)]
pub(crate) fn member(address: SocketAddr) -> Arc<MemberConnections> {
    Arc::new(MemberConnections::new(address))
}

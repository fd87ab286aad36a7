//! A client's HTTP/1.x request head, parsed in place: the head stays one block of bytes and
//! the headers are (name, value) offsets into it, so a request needs no header map and no
//! allocation per header.
//!
//! What is refused, and how, follows hyper's HTTP/1 server (which served these connections
//! before): a head httparse rejects, a target that is not a URI, conflicting or invalid
//! `Content-Length`, a `Transfer-Encoding` on HTTP/1.0 or whose last coding is not chunked are
//! 400; more than [`MAX_HEADERS`] headers or a head longer than [`MAX_HEAD`] is 431.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::Uri;

/// Most headers in a request head.
pub(crate) const MAX_HEADERS: usize = 100;
/// Longest request head (hyper's default read buffer limit).
pub(crate) const MAX_HEAD: usize = 8192 + 4096 * 100;
/// Longest request target.
const MAX_TARGET: usize = u16::MAX as usize - 1;

/// Why a request head is refused (the connection closes after the answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 400.
    BadRequest,
    /// 414.
    UriTooLong,
    /// 431.
    TooLarge,
}

impl Refusal {
    /// The status line of the answer.
    pub(crate) fn status(self) -> http::StatusCode {
        match self {
            Refusal::BadRequest => http::StatusCode::BAD_REQUEST,
            Refusal::UriTooLong => http::StatusCode::URI_TOO_LONG,
            Refusal::TooLarge => http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        }
    }
}

/// Where one header's name and value are in the head.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeaderSpan {
    name: (u32, u32),
    value: (u32, u32),
}

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    /// `Content-Length` bytes (0: no body).
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub(crate) struct RequestHead {
    block: Bytes,
    method: (u32, u32),
    headers: Vec<HeaderSpan>,
    /// The request target.
    pub uri: Uri,
    /// HTTP/1.1 (else HTTP/1.0).
    pub http11: bool,
    /// How the body is delimited.
    pub body: BodyFraming,
    /// Whether the connection may carry another request after this one's answer.
    pub keep_alive: bool,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
    /// An HTTP/1.1 request without a body asking to switch protocols (`Connection: upgrade`
    /// and `Upgrade` other than `h2c`, as a WebSocket handshake does): forwarded with both,
    /// and tunnelled when the member answers `101 Switching Protocols`.
    pub upgrade: bool,
}

fn span(base: usize, part: &[u8]) -> (u32, u32) {
    let start = (part.as_ptr() as usize).wrapping_sub(base);
    (start as u32, (start + part.len()) as u32)
}

/// Whether `value` is a comma-separated list holding `token` (any case).
pub(crate) fn lists(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|b| *b == b',')
        .any(|item| item.trim_ascii().eq_ignore_ascii_case(token))
}

/// Digits only (no sign, no spaces), as hyper reads `Content-Length`.
fn digits(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() {
        return None;
    }
    bytes.iter().try_fold(0u64, |n, b| {
        b.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))
            .flatten()
    })
}

/// Parses the request head at the start of `buffer` and takes it out of the buffer:
/// `Ok(None)` when more bytes are needed. `spans` is reused for the header offsets (the head
/// takes it; [`RequestHead::into_spans`] gives it back).
pub(crate) fn parse(
    buffer: &mut BytesMut,
    spans: &mut Vec<HeaderSpan>,
) -> Result<Option<RequestHead>, Refusal> {
    let mut raw = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    let length = match request.parse_with_uninit_headers(buffer, &mut raw) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) if buffer.len() >= MAX_HEAD => return Err(Refusal::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Refusal::TooLarge),
        Err(_) => return Err(Refusal::BadRequest),
    };
    let base = buffer.as_ptr() as usize;
    let (Some(method), Some(target), Some(version)) =
        (request.method, request.path, request.version)
    else {
        return Err(Refusal::BadRequest);
    };
    if target.len() > MAX_TARGET {
        return Err(Refusal::UriTooLong);
    }
    let method = span(base, method.as_bytes());
    let target = span(base, target.as_bytes());
    spans.clear();
    spans.extend(request.headers.iter().map(|h| HeaderSpan {
        name: span(base, h.name.as_bytes()),
        value: span(base, h.value),
    }));
    let spans = std::mem::take(spans);
    let block = buffer.split_to(length).freeze();
    let uri = Uri::from_maybe_shared(block.slice(target.0 as usize..target.1 as usize))
        .map_err(|_| Refusal::BadRequest)?;
    let http11 = version == 1;
    let mut head = RequestHead {
        block,
        method,
        headers: spans,
        uri,
        http11,
        body: BodyFraming::Length(0),
        keep_alive: http11,
        expect_continue: false,
        upgrade: false,
    };
    head.read_framing()?;
    Ok(Some(head))
}

impl RequestHead {
    /// Reads framing, keep-alive and `Expect` off the headers, as hyper does.
    fn read_framing(&mut self) -> Result<(), Refusal> {
        let mut content_length: Option<u64> = None;
        let (mut te, mut chunked, mut cl, mut close) = (false, false, false, false);
        let (mut keep_alive, mut expect_continue) = (self.keep_alive, false);
        let (mut connection_upgrade, mut upgrade) = (false, false);
        for (name, value) in self.headers() {
            if name.eq_ignore_ascii_case(b"transfer-encoding") {
                if !self.http11 {
                    return Err(Refusal::BadRequest);
                }
                te = true;
                content_length = None;
                chunked = value
                    .rsplit(|b| *b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if name.eq_ignore_ascii_case(b"content-length") {
                cl = true;
                if te {
                    continue;
                }
                let n = digits(value).ok_or(Refusal::BadRequest)?;
                if content_length.is_some_and(|previous| previous != n) || n > u64::MAX - 2 {
                    return Err(Refusal::BadRequest);
                }
                content_length = Some(n);
            } else if name.eq_ignore_ascii_case(b"connection") {
                connection_upgrade |= lists(value, b"upgrade");
                if close || lists(value, b"close") {
                    close = true;
                    keep_alive = false;
                } else if !keep_alive {
                    keep_alive = lists(value, b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case(b"upgrade") {
                upgrade = super::super::upgrade::forwarded(value);
            } else if name.eq_ignore_ascii_case(b"expect") {
                expect_continue = value.eq_ignore_ascii_case(b"100-continue");
            }
        }
        self.expect_continue = expect_continue;
        if te && !chunked {
            return Err(Refusal::BadRequest);
        }
        self.keep_alive = keep_alive && !(te && cl);
        self.upgrade =
            self.http11 && connection_upgrade && upgrade && !te && content_length.unwrap_or(0) == 0;
        self.body = if te {
            BodyFraming::Chunked
        } else {
            BodyFraming::Length(content_length.unwrap_or(0))
        };
        Ok(())
    }

    fn bytes(&self, (start, end): (u32, u32)) -> &[u8] {
        &self.block[start as usize..end as usize]
    }

    /// The method, as sent (a token, checked by the parser).
    pub(crate) fn method(&self) -> &str {
        std::str::from_utf8(self.bytes(self.method)).unwrap_or("GET")
    }

    /// Every header as (name, value), in order, names as sent.
    pub(crate) fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
        self.headers
            .iter()
            .map(|h| (self.bytes(h.name), self.bytes(h.value)))
    }

    /// The first value of header `name` (any case).
    pub(crate) fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, value)| value)
    }

    /// Whether the request has no body.
    pub(crate) fn has_no_body(&self) -> bool {
        self.body == BodyFraming::Length(0)
    }

    /// Gives back the header offsets for the next request.
    pub(crate) fn into_spans(self) -> Vec<HeaderSpan> {
        self.headers
    }

    /// The request as an `http` request head (headers copied; for hyper's TLS client).
    pub(crate) fn to_parts(&self) -> Result<http::request::Parts, http::Error> {
        let mut builder = http::Request::builder()
            .method(http::Method::from_bytes(self.bytes(self.method))?)
            .uri(self.uri.clone())
            .version(if self.http11 {
                http::Version::HTTP_11
            } else {
                http::Version::HTTP_10
            });
        for (name, value) in self.headers() {
            builder = builder.header(name, value);
        }
        Ok(builder.body(())?.into_parts().0)
    }
}

impl nephrite_l7::Headers for RequestHead {
    fn header(&self, name: &str) -> Option<&str> {
        // As `HeaderValue::to_str`: visible ASCII and tabs only.
        RequestHead::header(self, name)
            .filter(|v| v.iter().all(|b| *b == b'\t' || (0x20..0x7f).contains(b)))
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    fn method(&self) -> Option<&str> {
        Some(RequestHead::method(self))
    }
}

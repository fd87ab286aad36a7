//! HTTP/1.1 message heads towards members: the request head the router writes (hop-by-hop
//! headers removed, `X-Forwarded-*` set) and the response head it reads back.

use std::net::IpAddr;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};

use super::UpstreamError;

/// Hop-by-hop headers: they describe one connection and never cross the proxy.
pub(crate) const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Removes the hop-by-hop headers of `headers` (the fixed ones and those its `Connection`
/// headers list).
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the (few) headers first: most messages carry nothing to remove.
    if !headers
        .keys()
        .any(|name| HOP_BY_HOP.contains(&name.as_str()))
    {
        return;
    }
    let connection: Vec<HeaderValue> = headers
        .get_all(header::CONNECTION)
        .iter()
        .cloned()
        .collect();
    for value in &connection {
        for listed in value.as_bytes().split(|b| *b == b',') {
            if let Ok(name) = HeaderName::from_bytes(listed.trim_ascii()) {
                headers.remove(name);
            }
        }
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

/// How the request body travels to the member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestFraming {
    /// No body.
    Empty,
    /// Exactly the client's `Content-Length` bytes.
    Length,
    /// Chunked transfer coding (the length is not known up front).
    Chunked,
}

/// What the router adds to a forwarded request.
pub(crate) struct Forwarding<'a> {
    /// The client's address, appended to `X-Forwarded-For`.
    pub client: IpAddr,
    /// `X-Forwarded-Proto` is `https` (else `http`).
    pub https: bool,
    /// The host the client asked for, as sent: `Host` when the request has none (HTTP/2) and
    /// `X-Forwarded-Host`.
    pub host: Option<&'a str>,
    /// The `Upgrade` value of a request asking to switch protocols: it goes out with
    /// `Connection: upgrade` (both are hop-by-hop, so the client's are not copied).
    pub upgrade: Option<&'a [u8]>,
    /// The `Host` the member sees instead of [`host`](Self::host) (a Gateway API URLRewrite;
    /// `X-Forwarded-Host` keeps the client's).
    pub rewrite_host: Option<&'a str>,
}

fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Writes the HTTP/1.1 request head for `method target` with the client's `headers` into
/// `out`: hop-by-hop headers dropped, `Host` set to [`Forwarding::host`] (added when absent),
/// `X-Forwarded-For` appended, `X-Forwarded-Proto`/`-Host` replaced, and the framing header
/// for `framing`. The member keeps the connection open (HTTP/1.1 default).
pub(crate) fn write_request_head(
    out: &mut Vec<u8>,
    method: &Method,
    target: &str,
    headers: &HeaderMap,
    forwarding: &Forwarding<'_>,
    framing: RequestFraming,
) {
    let pairs: Vec<(&[u8], &[u8])> = headers
        .iter()
        .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()))
        .collect();
    write_request_head_from(
        out,
        method.as_str(),
        target,
        pairs.iter().copied(),
        forwarding,
        framing,
    );
}

/// Whether `name` (any case) is listed in one of the `Connection` headers of `headers`.
fn listed_in_connection<'h>(
    name: &[u8],
    headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
) -> bool {
    headers
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"connection"))
        .any(|(_, value)| {
            value
                .split(|b| *b == b',')
                .any(|listed| listed.trim_ascii().eq_ignore_ascii_case(name))
        })
}

/// [`write_request_head`] for headers given as (name, value) pairs in any case, as a client
/// sent them; names are written as received.
pub(crate) fn write_request_head_from<'h, I>(
    out: &mut Vec<u8>,
    method: &str,
    target: &str,
    headers: I,
    forwarding: &Forwarding<'_>,
    framing: RequestFraming,
) where
    I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
{
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let has_connection = headers
        .clone()
        .any(|(name, _)| name.eq_ignore_ascii_case(b"connection"));
    let mut has_host = false;
    let mut previous_for: Option<&[u8]> = None;
    for (name, value) in headers.clone() {
        if name.eq_ignore_ascii_case(b"x-forwarded-for") {
            previous_for.get_or_insert(value);
            continue;
        }
        let lower = |known: &str| name.eq_ignore_ascii_case(known.as_bytes());
        if lower("x-forwarded-proto")
            || (forwarding.host.is_some() && lower("x-forwarded-host"))
            || lower("expect")
            || (framing != RequestFraming::Length && lower("content-length"))
            || HOP_BY_HOP.iter().any(|hop| lower(hop))
            || (has_connection && listed_in_connection(name, headers.clone()))
        {
            continue;
        }
        if lower("host") {
            // An absolute-form target's authority is the host (RFC 9112 3.2.2): it replaces
            // the client's Host, so the member sees the host the request was routed by.
            has_host = true;
            let host = forwarding.rewrite_host.or(forwarding.host);
            push_header(out, name, host.map_or(value, str::as_bytes));
            continue;
        }
        push_header(out, name, value);
    }
    if !has_host && let Some(host) = forwarding.rewrite_host.or(forwarding.host) {
        push_header(out, b"host", host.as_bytes());
    }
    if let Some(host) = forwarding.host {
        push_header(out, b"x-forwarded-host", host.as_bytes());
    }
    out.extend_from_slice(b"x-forwarded-for: ");
    if let Some(previous) = previous_for {
        out.extend_from_slice(previous);
        out.extend_from_slice(b", ");
    }
    // An IP address formats without allocating through `Display` into the buffer.
    {
        use std::io::Write as _;
        let _ = write!(out, "{}", forwarding.client);
    }
    out.extend_from_slice(b"\r\n");
    push_header(
        out,
        b"x-forwarded-proto",
        if forwarding.https { b"https" } else { b"http" },
    );
    if framing == RequestFraming::Chunked {
        push_header(out, b"transfer-encoding", b"chunked");
    }
    if let Some(protocol) = forwarding.upgrade {
        push_header(out, b"connection", b"upgrade");
        push_header(out, b"upgrade", protocol);
    }
    out.extend_from_slice(b"\r\n");
}

/// How the member delimits its response body (RFC 9112 section 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResponseFraming {
    /// No body (HEAD, 1xx, 204, 304, or `Content-Length: 0`).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Everything until the member closes the connection.
    UntilClose,
}

/// What a response head says about its message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResponseMeta {
    /// Status code.
    pub status: StatusCode,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// How the body is delimited.
    pub framing: ResponseFraming,
    /// Whether the connection may carry another request after this response.
    pub keep_alive: bool,
    /// Whether its `Content-Length` headers stand (not overridden by `Transfer-Encoding`).
    pub length_stands: bool,
    /// Length of the head in bytes (where the body starts).
    pub length: usize,
}

impl ResponseMeta {
    /// Whether this is the final answer (not an interim 1xx one).
    pub(crate) fn is_final(&self) -> bool {
        !self.status.is_informational() || self.status == StatusCode::SWITCHING_PROTOCOLS
    }
}

/// A parsed response head with its header map (tests).
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct ResponseHead {
    /// Every header as received.
    pub headers: HeaderMap,
    /// How the body is delimited.
    pub framing: ResponseFraming,
    /// Whether the connection may carry another request after this response.
    pub keep_alive: bool,
}

/// Longest response head the router accepts from a member.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// Parses a response head at the start of `bytes`: `Ok(None)` when more bytes are needed.
/// `head_request` is whether the request was `HEAD` (whose response never has a body).
#[cfg(test)]
pub(crate) fn parse_response_head(
    bytes: &[u8],
    head_request: bool,
) -> Result<Option<ResponseHead>, UpstreamError> {
    let mut headers = HeaderMap::new();
    let meta = parse_response(bytes, head_request, |meta, raw| {
        headers = header_map(raw, bytes, meta)?;
        Ok(())
    })?;
    Ok(meta.map(|meta| ResponseHead {
        headers,
        framing: meta.framing,
        keep_alive: meta.keep_alive,
    }))
}

/// Parses a response head at the start of `bytes` in place: `Ok(None)` when more bytes are
/// needed. `on_final` sees the headers of a final (not 1xx) answer as they are in `bytes`.
pub(crate) fn parse_response(
    bytes: &[u8],
    head_request: bool,
    mut on_final: impl FnMut(&ResponseMeta, &[httparse::Header<'_>]) -> Result<(), UpstreamError>,
) -> Result<Option<ResponseMeta>, UpstreamError> {
    let mut complete = |response: &httparse::Response<'_, '_>, length| {
        let meta = meta_of(response, length, head_request)?;
        if meta.is_final() {
            on_final(&meta, response.headers)?;
        }
        Ok(Some(meta))
    };
    let mut small = [httparse::EMPTY_HEADER; 48];
    let mut response = httparse::Response::new(&mut small);
    let parsed = match response.parse(bytes) {
        Err(httparse::Error::TooManyHeaders) => {
            let mut large = vec![httparse::EMPTY_HEADER; 512];
            let mut response = httparse::Response::new(&mut large);
            match response.parse(bytes) {
                Ok(httparse::Status::Complete(length)) => return complete(&response, length),
                Ok(httparse::Status::Partial) => None,
                Err(err) => return Err(UpstreamError::BadResponse(err.to_string())),
            }
        }
        Err(err) => return Err(UpstreamError::BadResponse(err.to_string())),
        Ok(httparse::Status::Partial) => None,
        Ok(httparse::Status::Complete(length)) => Some(length),
    };
    match parsed {
        Some(length) => complete(&response, length),
        None if bytes.len() > MAX_HEAD => Err(UpstreamError::BadResponse(format!(
            "response head longer than {MAX_HEAD} bytes"
        ))),
        None => Ok(None),
    }
}

fn bad(why: String) -> UpstreamError {
    UpstreamError::BadResponse(why)
}

/// Status, framing and keep-alive of a parsed response (RFC 9112 section 6.3).
fn meta_of(
    response: &httparse::Response<'_, '_>,
    length: usize,
    head_request: bool,
) -> Result<ResponseMeta, UpstreamError> {
    let status = response
        .code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| bad("invalid status code".into()))?;
    let version = if response.version == Some(0) {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut close = version == Version::HTTP_10;
    for h in response.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let text = std::str::from_utf8(h.value).unwrap_or("");
            let n: u64 = text
                .trim()
                .parse()
                .map_err(|_| bad(format!("invalid Content-Length {text:?}")))?;
            if content_length.is_some_and(|previous| previous != n) {
                return Err(bad("conflicting Content-Length headers".into()));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
            // Only the last coding decides whether the body is chunked.
            chunked = h
                .value
                .rsplit(|b| *b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in h.value.split(|b| *b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && version == Version::HTTP_10 {
                    close = false;
                }
            }
        }
    }
    let no_body = head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let framing = if no_body {
        ResponseFraming::Empty
    } else if transfer_encoding {
        if chunked {
            ResponseFraming::Chunked
        } else {
            ResponseFraming::UntilClose
        }
    } else {
        match content_length {
            Some(0) => ResponseFraming::Empty,
            Some(n) => ResponseFraming::Length(n),
            None => ResponseFraming::UntilClose,
        }
    };
    let keep_alive = !close
        && framing != ResponseFraming::UntilClose
        && status != StatusCode::SWITCHING_PROTOCOLS;
    Ok(ResponseMeta {
        status,
        version,
        framing,
        keep_alive,
        length_stands: !transfer_encoding,
        length,
    })
}

/// The headers of a parsed response as a map (without `Content-Length` when
/// `Transfer-Encoding` overrides it).
pub(crate) fn header_map(
    headers: &[httparse::Header<'_>],
    bytes: &[u8],
    meta: &ResponseMeta,
) -> Result<HeaderMap, UpstreamError> {
    // One copy of the head; header values are slices of it (no allocation per header).
    let block = Bytes::copy_from_slice(&bytes[..meta.length]);
    let base = bytes.as_ptr() as usize;
    let mut map = HeaderMap::with_capacity(headers.len());
    for h in headers {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| bad(format!("invalid header name {:?}", h.name)))?;
        if !meta.length_stands && name == header::CONTENT_LENGTH {
            continue;
        }
        let start = (h.value.as_ptr() as usize).wrapping_sub(base);
        let value = match block.get(start..start + h.value.len()) {
            Some(_) => HeaderValue::from_maybe_shared(block.slice(start..start + h.value.len())),
            None => HeaderValue::from_bytes(h.value),
        }
        .map_err(|_| bad(format!("invalid value of header {name}")))?;
        map.append(name, value);
    }
    Ok(map)
}

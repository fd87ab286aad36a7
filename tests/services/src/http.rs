//! A plain HTTP/1.1 GET over a TCP stream, for readiness checks.
//!
//! Readiness is polled every few milliseconds while a server starts; a whole HTTP client would
//! be a heavy dependency for one `GET` whose status and body are all a check needs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A plain HTTP/1.1 GET with `Connection: close`: (status, body).
pub(crate) fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    parse_response(&String::from_utf8_lossy(&response))
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP response"))
}

/// (status, body) of a whole HTTP/1.1 response (body not chunk-decoded: callers search it).
pub(crate) fn parse_response(response: &str) -> Option<(u16, String)> {
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head
        .lines()
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((status, body.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::parse_response;

    #[test]
    fn a_response_splits_into_status_and_body() {
        let response = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\n{\"health\":\"false\"}";
        assert_eq!(
            parse_response(response),
            Some((503, "{\"health\":\"false\"}".to_owned()))
        );
        assert_eq!(parse_response("HTTP/1.1 200 OK\r\n"), None);
        assert_eq!(parse_response("garbage\r\n\r\n"), None);
    }
}

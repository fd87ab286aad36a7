//! The NF management endpoints the demo puts behind the router, and the client that calls them
//! through it: plain HTTP/1.1 on blocking sockets, enough for a demo and nothing more.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use anyhow::{Context, bail};

/// Serves `GET <anything>` on a free loopback port with `200` and `"<name> management: <path>"`,
/// on a thread that lives as long as the demo. Returns the address.
pub fn serve_endpoint(name: &str) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let name = name.to_owned();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let name = name.clone();
            std::thread::spawn(move || {
                let _ = answer(stream, &name);
            });
        }
    });
    Ok(addr)
}

fn answer(stream: TcpStream, name: &str) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .to_owned();
        let mut close = false;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 || header == "\r\n" || header == "\n" {
                break;
            }
            if header.to_ascii_lowercase().starts_with("connection: close") {
                close = true;
            }
        }
        let body = format!("{name} management: {path}\n");
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )?;
        if close {
            return Ok(());
        }
    }
}

/// `GET http://<router><path>` with `Host: host`: the status code and the body.
pub fn get(router: SocketAddr, host: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&router, Duration::from_secs(2))
        .with_context(|| format!("connecting to the router at {router}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        bail!("the router's answer has no end of head: {response:?}");
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("no status code in {head:?}"))?;
    Ok((status, body.to_owned()))
}

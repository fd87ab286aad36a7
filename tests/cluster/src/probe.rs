//! A connection from inside a pod, without exec and without a shell in the image: a thread of
//! the test joins the pod's network namespace (`setns(CLONE_NEWNET)`, which moves that thread
//! only), connects, sends one HTTP request and reads the echo server's answer. The packets leave
//! through the pod's own interface with the pod's address, so every policy and Service rule of
//! the node applies to them as to the pod's own traffic.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::time::Duration;

use nix::sched::{CloneFlags, setns};

/// How long a connection attempt may take before it counts as blocked (a policy drops the
/// SYN; nothing answers).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the answer may take once connected.
pub const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// What a probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The echo server answered; the first word of its answer (the pod it reached).
    Answered(String),
    /// The connection was refused (RST or ICMP unreachable): refused at once.
    Refused,
    /// Nothing answered in time, or the connection broke before an answer.
    Blocked(String),
}

impl Outcome {
    /// The pod that answered, if one did.
    pub fn answered_by(&self) -> Option<&str> {
        match self {
            Outcome::Answered(pod) => Some(pod),
            _ => None,
        }
    }
}

/// Connect to `to` from the network namespace `netns` (the host's when `None`) and ask for
/// `path`.
pub fn probe(netns: Option<&File>, to: SocketAddr, path: &str) -> Outcome {
    probe_host(netns, to, &to.to_string(), path)
}

/// [`probe`] with `host` as the request's `Host` (for an L7 router choosing by host name).
pub fn probe_host(netns: Option<&File>, to: SocketAddr, host: &str, path: &str) -> Outcome {
    let netns = netns.and_then(|f| f.try_clone().ok());
    let path = path.to_owned();
    let host = host.to_owned();
    std::thread::spawn(move || {
        if let Some(netns) = netns
            && let Err(e) = setns(netns.as_fd(), CloneFlags::CLONE_NEWNET)
        {
            return Outcome::Blocked(format!("setns: {e}"));
        }
        connect(to, &host, &path)
    })
    .join()
    .unwrap_or_else(|_| Outcome::Blocked("the probe thread panicked".to_owned()))
}

fn connect(to: SocketAddr, host: &str, path: &str) -> Outcome {
    let mut stream = match TcpStream::connect_timeout(&to, CONNECT_TIMEOUT) {
        Ok(stream) => stream,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Outcome::Refused,
        Err(e) => return Outcome::Blocked(format!("connect: {e}")),
    };
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(READ_TIMEOUT));
    let request = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    if let Err(e) = stream.write_all(request.as_bytes()) {
        return Outcome::Blocked(format!("write: {e}"));
    }
    let mut answer = Vec::new();
    if let Err(e) = stream.read_to_end(&mut answer) {
        return Outcome::Blocked(format!("read: {e}"));
    }
    match answered_by(&String::from_utf8_lossy(&answer)) {
        Some(pod) => Outcome::Answered(pod),
        None => Outcome::Blocked(format!(
            "no echo answer: {:?}",
            String::from_utf8_lossy(&answer)
        )),
    }
}

/// The pod named by an echo server's HTTP answer (`200`, body `<pod> <path>`).
pub fn answered_by(answer: &str) -> Option<String> {
    let (head, body) = answer.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return None;
    }
    body.split_whitespace().next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::answered_by;

    #[test]
    fn the_answering_pod_is_the_first_word_of_a_200_body() {
        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nx/a /p\n";
        assert_eq!(answered_by(answer).as_deref(), Some("x/a"));
        assert_eq!(answered_by("HTTP/1.1 400 Bad Request\r\n\r\nbad\n"), None);
        assert_eq!(answered_by("HTTP/1.1 200 OK\r\n"), None);
    }
}

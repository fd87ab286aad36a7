//! TCP traffic between network namespaces, shared by the Services tests and
//! the Services benchmark: a thread entered into a namespace, a server that
//! answers every connection with its name, and clients counting answers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{
    Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, TcpListener, TcpStream,
};
use std::time::{Duration, Instant};

/// Run `f` on a thread inside the network namespace at `path` (processes it
/// spawns and sockets it opens live there too).
pub fn in_netns<T: Send + 'static>(path: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = path.to_string();
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open netns");
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("netns thread")
}

/// A TCP server in the namespace at `netns` on `port` answering every
/// connection with `name`, then closing it (runs until the process ends).
pub fn serve_on(netns: &str, name: &str, port: u16) {
    let name = name.to_string();
    let listener = in_netns(netns, move || {
        TcpListener::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).expect("bind")
    });
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.write_all(name.as_bytes());
        }
    });
}

/// [`serve_on`] on IPv6 and IPv4 alike (a listener on `[::]`, which takes
/// IPv4 connections as mapped addresses).
pub fn serve_on6(netns: &str, name: &str, port: u16) {
    let name = name.to_string();
    let listener = in_netns(netns, move || {
        TcpListener::bind(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0)).expect("bind")
    });
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.write_all(name.as_bytes());
        }
    });
}

/// One connection to `dst` (from the caller's namespace): the server's
/// answer, "refused" or "timeout".
pub fn answer(dst: impl Into<SocketAddr>) -> String {
    answer_within(dst, Duration::from_secs(1))
}

/// [`answer`], waiting up to `patience` for the connection and as long
/// (at least 2 s) for the answer.
pub fn answer_within(dst: impl Into<SocketAddr>, patience: Duration) -> String {
    match TcpStream::connect_timeout(&dst.into(), patience) {
        Ok(mut s) => {
            s.set_read_timeout(Some(patience.max(Duration::from_secs(2))))
                .expect("timeout");
            let mut buf = String::new();
            match s.read_to_string(&mut buf) {
                Ok(_) => buf,
                Err(_) => "timeout".to_string(),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => "refused".into(),
        Err(_) => "timeout".into(),
    }
}

/// Open `n` connections from the namespace at `netns` to `dst`; count the
/// answers by server name ("refused" and "timeout" for failures).
pub fn connect_many(netns: &str, dst: impl Into<SocketAddr>, n: usize) -> BTreeMap<String, usize> {
    let dst: SocketAddr = dst.into();
    in_netns(netns, move || {
        let mut counts = BTreeMap::new();
        for _ in 0..n {
            *counts.entry(answer(dst)).or_insert(0) += 1;
        }
        counts
    })
}

/// How long each of `n` connections from the namespace at `netns` to
/// `dst` took from `connect` to the server's first byte.
pub fn setup_times(netns: &str, dst: SocketAddrV4, n: usize) -> Vec<Duration> {
    in_netns(netns, move || {
        (0..n)
            .map(|_| {
                let started = Instant::now();
                let mut s = TcpStream::connect(dst).expect("connect");
                let mut b = [0u8; 1];
                s.read_exact(&mut b).expect("answer");
                started.elapsed()
            })
            .collect()
    })
}

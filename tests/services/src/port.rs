//! Picking a TCP port nothing listens on, for a server a test is about to start.
//!
//! The kernel hands out the port and it is released at once, so another process could take it
//! before the server binds it. The servers here therefore retry with a fresh port when their
//! log says the address was in use; a test that starts its own server should do the same.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_loopback_port() -> io::Result<u16> {
    free_port_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// A TCP port on `ip` (an address of this host, in the current network namespace) that was
/// free a moment ago.
pub fn free_port_on(ip: IpAddr) -> io::Result<u16> {
    let listener = TcpListener::bind(SocketAddr::new(ip, 0))?;
    Ok(listener.local_addr()?.port())
}

/// Whether a server log line says its listening address was taken.
pub(crate) fn says_address_in_use(log: &str) -> bool {
    let log = log.to_ascii_lowercase();
    log.contains("address already in use")
        || log.contains("could not bind")
        || log.contains("eaddrinuse")
}

#[cfg(test)]
mod tests;

use std::net::Ipv6Addr;

use super::*;

#[test]
fn postgres_and_etcd_bind_failures_are_recognised() {
    let postgres = "2026-11-22 11:40:00.000 UTC [4242] LOG:  could not bind IPv4 address \
                    \"127.0.0.1\": Address already in use";
    let etcd = "{\"level\":\"fatal\",\"msg\":\"discovery failed\",\
                \"error\":\"listen tcp 127.0.0.1:2380: bind: address already in use\"}";
    assert!(says_address_in_use(postgres));
    assert!(says_address_in_use(etcd));
    let rabbitmq = "BOOT FAILED ... {error,{listen_error,\"127.0.0.1\",5672,eaddrinuse}}";
    assert!(says_address_in_use(rabbitmq));
    assert!(!says_address_in_use(
        "FATAL:  data directory has wrong ownership"
    ));
}

#[test]
fn a_free_port_can_be_bound_right_away() {
    let port = free_loopback_port().expect("a loopback port");
    assert_ne!(port, 0);
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("the port is free");
}

#[test]
fn an_address_this_host_does_not_have_has_no_free_port() {
    // 2001:db8::/32 is reserved for documentation and never assigned here.
    let err = free_port_on(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)))
        .expect_err("not an address of this host");
    assert_eq!(err.kind(), io::ErrorKind::AddrNotAvailable, "{err}");
}

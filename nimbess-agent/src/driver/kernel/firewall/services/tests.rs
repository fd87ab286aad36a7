use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use nephrite_pipeline::{Affinity, Backend, LoadBalancer, LoadBalancerKey, Protocol};

use super::{diff_script, full_script};

fn key(name: &str) -> LoadBalancerKey {
    LoadBalancerKey {
        namespace: "default".into(),
        service: name.into(),
        protocol: Protocol::Tcp,
        port: 80,
    }
}

fn lb(vip: u8, backends: &[u8], affinity: Affinity) -> LoadBalancer {
    LoadBalancer {
        vip: Ipv4Addr::new(10, 96, 0, vip),
        node_port: None,
        affinity,
        backends: backends
            .iter()
            .map(|b| Backend {
                address: Ipv4Addr::new(10, 1, 0, *b),
                port: 8080,
                weight: 1,
            })
            .collect(),
    }
}

#[test]
fn a_full_render_replaces_the_table_and_dispatches_every_service() {
    let services = BTreeMap::from([
        (key("web"), lb(10, &[2, 3], Affinity::None)),
        (key("sticky"), lb(11, &[4], Affinity::ClientIp)),
        (key("empty"), lb(12, &[], Affinity::None)),
    ]);
    let s = full_script(&services);
    assert!(s.starts_with("add table ip nimbess-svc\ndelete table ip nimbess-svc\n"));
    assert!(s.contains("add element ip nimbess-svc be.default.web.tcp.80 { 0 : 10.1.0.2 . 8080, 1 : 10.1.0.3 . 8080 }"), "{s}");
    assert!(
        s.contains("dnat ip to numgen random mod 2 map @be.default.web.tcp.80"),
        "{s}"
    );
    assert!(s.contains("dnat ip to jhash ip saddr mod 1"), "{s}");
    assert!(s.contains("services { 10.96.0.10 . tcp . 80 : goto svc.default.web.tcp.80 }"));
    assert!(s.contains("noendpoints { 10.96.0.12 . tcp . 80 }"), "{s}");
    assert!(
        !s.contains("10.96.0.12 . tcp . 80 : goto"),
        "no backend, no dispatch"
    );
    assert_eq!(
        full_script(&BTreeMap::new()),
        "add table ip nimbess-svc\ndelete table ip nimbess-svc\n"
    );
}

#[test]
fn an_endpoint_change_rewrites_only_that_services_map() {
    let old = BTreeMap::from([
        (key("web"), lb(10, &[2, 3], Affinity::None)),
        (key("other"), lb(11, &[4], Affinity::None)),
    ]);
    let mut new = old.clone();
    new.insert(key("web"), lb(10, &[2, 5], Affinity::None));
    let s = diff_script(&old, &new);
    assert_eq!(
        s,
        "flush map ip nimbess-svc be.default.web.tcp.80\n\
         add element ip nimbess-svc be.default.web.tcp.80 { 0 : 10.1.0.2 . 8080, 1 : 10.1.0.5 . 8080 }\n"
    );
    // one backend fewer: the rule's modulus changes too
    new.insert(key("web"), lb(10, &[2], Affinity::None));
    let s = diff_script(&old, &new);
    assert!(
        s.contains("flush chain ip nimbess-svc svc.default.web.tcp.80\n"),
        "{s}"
    );
    assert!(s.contains("numgen random mod 1 map"), "{s}");
    assert!(!s.contains("other"), "{s}");
    // the last backend gone: dispatch removed, rejected instead
    new.insert(key("web"), lb(10, &[], Affinity::None));
    let s = diff_script(&old, &new);
    assert!(
        s.contains("delete element ip nimbess-svc services { 10.96.0.10 . tcp . 80 }"),
        "{s}"
    );
    assert!(
        s.contains("add element ip nimbess-svc noendpoints { 10.96.0.10 . tcp . 80 }"),
        "{s}"
    );
    assert_eq!(diff_script(&old, &old), "");
}

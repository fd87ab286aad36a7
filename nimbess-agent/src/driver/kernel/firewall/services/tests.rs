use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use nephrite_pipeline::{Affinity, Backend, LoadBalancer, LoadBalancerKey, Protocol};

use super::super::netlink::Batch;
use super::{diff_batch, full_batch};

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

/// The batch's bytes as text, to find the names it carries.
fn text(batch: Batch) -> String {
    let (bytes, _) = batch.finish();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn a_full_render_replaces_the_table_and_creates_every_service_port() {
    let services = BTreeMap::from([
        (key("web"), lb(10, &[2, 3], Affinity::None)),
        (key("sticky"), lb(11, &[4], Affinity::ClientIp)),
        (key("empty"), lb(12, &[], Affinity::None)),
    ]);
    let batch = full_batch(&services);
    // table add, delete, add; 3 sets, 4 base chains, 6 rules; per port a
    // map and a chain; web: elements, rule, dispatch; sticky: the same;
    // empty: the noendpoints element only
    assert_eq!(batch.len(), 3 + 3 + 4 + 6 + 3 * 2 + 3 + 3 + 1);
    let s = text(batch);
    for name in [
        "be.default.web.tcp.80",
        "svc.default.sticky.tcp.80",
        "be.default.empty.tcp.80",
        "noendpoints",
        "nodeports",
        "numgen",
        "hash",
        "reject",
        "fib",
    ] {
        assert!(s.contains(name), "{name} is in the batch");
    }
    // an empty model: only the table's add and delete
    assert_eq!(full_batch(&BTreeMap::new()).len(), 2);
}

#[test]
fn an_endpoint_change_rewrites_only_that_services_map() {
    let old = BTreeMap::from([
        (key("web"), lb(10, &[2, 3], Affinity::None)),
        (key("other"), lb(11, &[4], Affinity::None)),
    ]);
    let mut new = old.clone();
    new.insert(key("web"), lb(10, &[2, 5], Affinity::None));
    // same slot count: the map flushed and filled
    let batch = diff_batch(&old, &new);
    assert_eq!(batch.len(), 2);
    let s = text(batch);
    assert!(
        s.contains("be.default.web.tcp.80") && !s.contains("other"),
        "{s}"
    );
    // one backend fewer: the rule's modulus changes, so the chain is
    // flushed and its rule added again
    new.insert(key("web"), lb(10, &[2], Affinity::None));
    let batch = diff_batch(&old, &new);
    assert_eq!(batch.len(), 4);
    assert!(text(batch).contains("numgen"));
    // the last backend gone: the port is removed (dispatch, rule, chain,
    // map) and added again as refused (map, chain, noendpoints)
    new.insert(key("web"), lb(10, &[], Affinity::None));
    let batch = diff_batch(&old, &new);
    assert_eq!(batch.len(), 4 + 3);
    assert!(text(batch).contains("noendpoints"));
    assert_eq!(diff_batch(&old, &old).len(), 0);
}

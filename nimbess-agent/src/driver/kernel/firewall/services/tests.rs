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
    // table add, delete, add; 3 sets, 4 base chains, 8 rules (the refusing
    // chains: a TCP reset, then ICMP); per port a map and a chain; web:
    // elements, rule, dispatch; sticky: the same; empty: the noendpoints
    // element only
    assert_eq!(batch.len(), 3 + 3 + 4 + 8 + 3 * 2 + 3 + 3 + 1);
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
    assert_eq!(full_batch::<std::net::Ipv4Addr>(&BTreeMap::new()).len(), 2);
}

/// The IPv6 twin of a Service port: the same objects in the `ip6` table,
/// the VIP and backends as 16-byte addresses.
#[test]
fn an_ipv6_render_is_the_ipv4_one_with_ipv6_addresses() {
    let v6 = |last: u16| std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last);
    let lb6 = LoadBalancer {
        vip: v6(10),
        node_port: None,
        affinity: Affinity::ClientIp,
        backends: vec![nephrite_pipeline::Backend {
            address: v6(2),
            port: 8080,
            weight: 1,
        }],
    };
    let services = BTreeMap::from([(key("web"), lb6.clone())]);
    let v4 = BTreeMap::from([(key("web"), lb(10, &[2], Affinity::ClientIp))]);
    assert_eq!(full_batch(&services).len(), full_batch(&v4).len());
    let s = text(full_batch(&services));
    assert!(s.contains("be.default.web.tcp.80") && s.contains("hash"));
    assert_eq!(
        super::service_key(&key("web"), &lb6).len(),
        24,
        "address . protocol . port"
    );
    let slot = super::backends::backend_of::<std::net::Ipv6Addr>(
        &[v6(2).octets().as_slice(), &[0x1f, 0x90, 0, 0]].concat(),
    );
    assert_eq!(slot, Some((v6(2), 8080)));
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

/// What was seen once on a real node adding a Service (`nf_tables: 3
/// messages for 2 service ports: No such file or directory`): the diff
/// assumes the table the agent's last render left, and another agent in the
/// same network namespace rendering no Service deletes that table. The
/// next diff (a Service without endpoints yet: its map, its chain, its
/// `noendpoints` element, 3 messages) adds to a table that is gone. The
/// firewall then renders the table whole, and the Services answer.
#[test]
fn a_diff_into_a_table_deleted_behind_the_agents_back_renders_the_table_whole() {
    use crate::driver::firewall::Firewall;
    use crate::driver::kernel::firewall::NftFirewall;

    let test = "a_diff_into_a_table_deleted_behind_the_agents_back_renders_the_table_whole";
    if let Err(e) =
        nephrite_test_services::require_root("creates a network namespace and nftables tables")
    {
        e.skip(test);
        return;
    }
    // a thread in a network namespace of its own: its netlink sockets are there
    std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
        let mut firewall = NftFirewall::new();
        let one = BTreeMap::from([(key("web"), lb(10, &[2, 3], Affinity::None))]);
        firewall.apply_services(&one).expect("the first render");
        assert!(super::verify(&one).is_empty(), "{:?}", super::verify(&one));

        // another agent of the namespace, with no Service, renders its table
        super::render::<std::net::Ipv4Addr>(&BTreeMap::new()).expect("the other agent's render");
        let mut two = one.clone();
        two.insert(key("new"), lb(11, &[], Affinity::None));
        let refused = super::apply_diff(&one, &two).expect_err("a diff into no table");
        assert!(
            refused
                .to_string()
                .contains("3 messages for 2 service ports")
                && refused.to_string().contains("No such file or directory"),
            "{refused}"
        );

        firewall
            .apply_services(&two)
            .expect("the agent renders the table whole");
        assert!(super::verify(&two).is_empty(), "{:?}", super::verify(&two));
        // and the diffs go on from there
        let mut three = two.clone();
        three.insert(key("new"), lb(11, &[4], Affinity::None));
        firewall.apply_services(&three).expect("a diff");
        assert!(
            super::verify(&three).is_empty(),
            "{:?}",
            super::verify(&three)
        );
    })
    .join()
    .expect("the test's thread");
}

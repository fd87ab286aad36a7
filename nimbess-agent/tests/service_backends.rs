//! A diff leaves the kernel exactly where a full render would: for a
//! sequence of Service changes (a backend replaced, slots added and
//! removed, weights, ClientIP affinity, a new Service beside a backend
//! change, a Service losing its last endpoint, one removed), the table the
//! agent's diff leaves in one namespace lists the same (handles aside,
//! elements in any order) as the full render of the same Services in
//! another, and the agent's own drift check finds both clean. `nft -j
//! list`, run by the test, is the independent observer of both tables.
//! Needs root.

mod support;
mod traffic;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::Command;

use nephrite_pipeline::{Affinity, Backend, LoadBalancer, LoadBalancerKey, Protocol};
use nimbess_agent::driver::kernel::firewall::services::{apply_diff, render, verify};
use serde_json::Value;
use support::Netns;
use traffic::in_netns;

type Services = BTreeMap<LoadBalancerKey, LoadBalancer>;

fn key(name: &str, protocol: Protocol) -> LoadBalancerKey {
    LoadBalancerKey {
        namespace: "default".into(),
        service: name.into(),
        protocol,
        port: 80,
    }
}

/// A Service on VIP 10.96.0.`vip` with backends (last octet, weight).
fn lb(vip: u8, affinity: Affinity, backends: &[(u8, u32)]) -> LoadBalancer {
    LoadBalancer {
        vip: Ipv4Addr::new(10, 96, 0, vip),
        node_port: None,
        affinity,
        backends: backends
            .iter()
            .map(|&(b, weight)| Backend {
                address: Ipv4Addr::new(10, 1, 0, b),
                port: 8080 + u16::from(b),
                weight,
            })
            .collect(),
    }
}

/// Handles dropped, set elements sorted: what two equal tables share.
fn normalise(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("handle");
            for (k, inner) in map.iter_mut() {
                normalise(inner);
                if k == "elem"
                    && let Value::Array(items) = inner
                {
                    items.sort_by_key(ToString::to_string);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// The Services' table in the namespace at `netns`, normalised, one item
/// (map, chain, rule) per line.
fn listing(netns: &str) -> Vec<String> {
    in_netns(netns, || {
        let out = Command::new("nft")
            .args(["-j", "list", "table", "ip", "nimbess-svc"])
            .output()
            .expect("nft");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut v: Value = serde_json::from_slice(&out.stdout).expect("json");
        normalise(&mut v);
        let mut items: Vec<String> = v["nftables"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|i| i.get("metainfo").is_none())
            .map(ToString::to_string)
            .collect();
        items.sort();
        items
    })
}

#[test]
fn a_diff_leaves_the_table_a_full_render_would() {
    if !support::root(
        "a_diff_leaves_the_table_a_full_render_would",
        "creates network namespaces and nftables tables",
    ) {
        return;
    }
    let (ours, reference) = (Netns::new("sb"), Netns::new("sr"));
    let web = key("web", Protocol::Tcp);
    let sticky = key("sticky", Protocol::Tcp);
    let dns = key("dns", Protocol::Udp);
    let start: Services = BTreeMap::from([
        (
            web.clone(),
            lb(10, Affinity::None, &[(2, 1), (3, 1), (4, 1)]),
        ),
        (
            sticky.clone(),
            lb(11, Affinity::ClientIp, &[(5, 1), (6, 1)]),
        ),
        (dns.clone(), lb(12, Affinity::None, &[(7, 1)])),
    ]);
    let mut steps: Vec<(&str, Services)> = Vec::new();
    let mut s = start.clone();
    s.insert(
        web.clone(),
        lb(10, Affinity::None, &[(2, 1), (3, 1), (9, 1)]),
    );
    steps.push(("a backend replaced, same slot count", s.clone()));
    s.insert(web.clone(), lb(10, Affinity::None, &[(2, 1), (3, 1)]));
    steps.push(("a backend gone: fewer slots, the rule rewritten", s.clone()));
    s.insert(
        sticky.clone(),
        lb(11, Affinity::ClientIp, &[(5, 1), (6, 2), (8, 1)]),
    );
    steps.push(("ClientIP: a backend more, a weight of 2", s.clone()));
    s.insert(dns.clone(), lb(12, Affinity::None, &[(7, 1), (13, 1)]));
    s.insert(
        key("new", Protocol::Tcp),
        lb(14, Affinity::None, &[(15, 1)]),
    );
    steps.push(("a new Service beside a backend change", s.clone()));
    s.insert(web.clone(), lb(10, Affinity::None, &[]));
    s.insert(dns.clone(), lb(12, Affinity::None, &[(16, 1), (17, 1)]));
    steps.push((
        "a Service without endpoints beside a backend change",
        s.clone(),
    ));
    s.remove(&sticky);
    let mut np = lb(18, Affinity::None, &[(19, 1)]);
    np.node_port = Some(30080);
    s.insert(key("np", Protocol::Tcp), np);
    steps.push(("a Service removed, a NodePort Service added", s.clone()));
    s.insert(web.clone(), lb(10, Affinity::None, &[(2, 1)]));
    steps.push(("endpoints again for a Service that had none", s.clone()));

    let first = start.clone();
    in_netns(&ours.path(), move || render(&first).expect("start"));
    let mut was = start;
    for (what, now) in steps {
        let (old, new) = (was.clone(), now.clone());
        let drift = in_netns(&ours.path(), move || {
            apply_diff(&old, &new).expect("diff over netlink");
            verify(&new)
        });
        assert!(drift.is_empty(), "{what}: drift after the diff {drift:#?}");
        let full = now.clone();
        let drift = in_netns(&reference.path(), move || {
            render(&full).expect("full render");
            verify(&full)
        });
        assert!(
            drift.is_empty(),
            "{what}: drift after the full render {drift:#?}"
        );
        let (have, want) = (listing(&ours.path()), listing(&reference.path()));
        let only = |a: &[String], b: &[String]| -> Vec<String> {
            a.iter().filter(|i| !b.contains(i)).cloned().collect()
        };
        assert!(
            have == want,
            "{what}: only after the diff {:#?}\nonly after nft -f {:#?}",
            only(&have, &want),
            only(&want, &have)
        );
        was = now;
    }
}

//! Dual-stack and IPv6 Services through the kernel driver, with real TCP
//! traffic between network namespaces: the agent (in a namespace playing
//! the host) reads a dual-stack Service (`clusterIPs` of both families,
//! `ipFamilyPolicy: RequireDualStack`) and its IPv4 and IPv6 EndpointSlices
//! from `--resources dir:PATH` and renders the `ip` and `ip6` tables
//! `nimbess-svc`; a client pod of a dual-stack network opens connections to
//! the IPv6 ClusterIP and counts which backend pod answered. Needs root.

mod support;
mod traffic;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{AgentProcess, Netns, unique};
use traffic::{connect_many, serve_on6};

const VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
const VIP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x96, 0, 0, 0, 0, 0, 0x10);
const SINGLE6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x96, 0, 0, 0, 0, 0, 0x11);

/// A dual-stack Service `web` over `v4` and `v6` (address, ready), and an
/// IPv6 single-stack Service `six` with no endpoint.
fn services_yaml(v4: &[(Ipv4Addr, bool)], v6: &[(Ipv6Addr, bool)]) -> String {
    let eps = |list: Vec<(String, bool)>| {
        list.iter()
            .map(|(a, ready)| {
                format!("  - addresses: [\"{a}\"]\n    conditions: {{ready: {ready}}}\n")
            })
            .collect::<String>()
    };
    let slice = |name: &str, family: &str, endpoints: String| {
        format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{kubernetes.io/service-name: web}}\naddressType: {family}\nports:\n- {{name: http, port: 8080, protocol: TCP}}\nendpoints:\n{endpoints}"
        )
    };
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: default}}\nspec:\n  clusterIP: {VIP}\n  clusterIPs: [{VIP}, \"{VIP6}\"]\n  ipFamilies: [IPv4, IPv6]\n  ipFamilyPolicy: RequireDualStack\n  ports:\n  - {{name: http, port: 80, targetPort: http}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: six, namespace: default}}\nspec:\n  clusterIP: \"{SINGLE6}\"\n  ipFamilies: [IPv6]\n  ports:\n  - {{port: 80, targetPort: 8080}}\n---\n{}---\n{}",
        slice(
            "web-v4",
            "IPv4",
            eps(v4.iter().map(|(a, r)| (a.to_string(), *r)).collect())
        ),
        slice(
            "web-v6",
            "IPv6",
            eps(v6.iter().map(|(a, r)| (a.to_string(), *r)).collect())
        ),
    )
}

/// The elements of the backend map of `web` in the `family` table, as
/// `nft` lists them.
fn rendered_backends(host: &str, family: &str) -> usize {
    let out = Command::new("ip")
        .args(["netns", "exec", host, "nft", "-j", "list", "map", family])
        .args(["nimbess-svc", "be.default.web.tcp.80"])
        .output()
        .expect("nft");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["map"]["elem"].as_array())
        .map(Vec::len)
        .sum()
}

/// Write the resources and wait until the agent has rendered `want`
/// backends in the `ip` and `ip6` tables each.
fn publish(dir: &Path, host: &str, yaml: &str, want: usize, agent: &AgentProcess) {
    std::fs::write(dir.join("web.yaml"), yaml).expect("write resources");
    let deadline = Instant::now() + Duration::from_secs(20);
    while rendered_backends(host, "ip") != want || rendered_backends(host, "ip6") != want {
        assert!(
            Instant::now() < deadline,
            "the agent never rendered {want} backends in both families\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The IPv4 and IPv6 addresses of a dual-stack CNI result.
fn both_addresses(result: &Value) -> (Ipv4Addr, Ipv6Addr) {
    let host = |i: usize| {
        let cidr = result["ips"][i]["address"].as_str().expect("address");
        cidr.split('/').next().expect("host").to_string()
    };
    (
        host(0).parse().expect("an IPv4 address first"),
        host(1).parse().expect("an IPv6 address second"),
    )
}

#[test]
fn a_dual_stack_service_spreads_connections_on_its_ipv6_cluster_ip() {
    if !support::root(
        "a_dual_stack_service_spreads_connections_on_its_ipv6_cluster_ip",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("s6h");
    let resources = tempfile::tempdir().expect("tempdir");
    let net = unique("s6");
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {net}\n    subnets: [10.232.0.0/24, 'fd00:232::/64']\n"
    );
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let flag = format!("dir:{}", resources.path().display());
    let agent =
        AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &["--resources", &flag]);
    let pods: Vec<Netns> = (0..4).map(|_| Netns::new("s6p")).collect();
    let mut ips = Vec::new();
    for pod in &pods {
        let (code, result) = agent.cni("ADD", &net, &pod.name, &pod.path());
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        ips.push(both_addresses(&result));
    }
    let client = pods[0].path();
    let names = ["b1", "b2", "b3"];
    for (pod, name) in pods[1..].iter().zip(names) {
        serve_on6(&pod.path(), name, 8080);
    }
    let v4: Vec<(Ipv4Addr, bool)> = ips[1..].iter().map(|(a, _)| (*a, true)).collect();
    let v6: Vec<(Ipv6Addr, bool)> = ips[1..].iter().map(|(_, a)| (*a, true)).collect();
    publish(
        resources.path(),
        &host.name,
        &services_yaml(&v4, &v6),
        3,
        &agent,
    );

    // 300 connections to the IPv6 ClusterIP land on all three, 20-50 % each
    let vip6 = SocketAddr::new(VIP6.into(), 80);
    let counts = connect_many(&client, vip6, 300);
    for name in names {
        let n = counts.get(name).copied().unwrap_or(0);
        assert!(
            (60..=150).contains(&n),
            "{name} took {n} of 300 on [{VIP6}]:80: {counts:?}\n{}",
            agent.log()
        );
    }
    assert_eq!(counts.values().sum::<usize>(), 300, "{counts:?}");
    // the IPv4 ClusterIP of the same Service still answers
    let counts = connect_many(&client, SocketAddr::new(VIP.into(), 80), 30);
    assert_eq!(
        names.iter().filter_map(|n| counts.get(*n)).sum::<usize>(),
        30,
        "{counts:?}"
    );
    // the IPv6 single-stack Service without endpoints refuses at once
    let counts = connect_many(&client, SocketAddr::new(SINGLE6.into(), 80), 3);
    assert_eq!(counts.get("refused"), Some(&3), "{counts:?}");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // b3 not ready in the IPv6 slice only: no new IPv6 connection for it
    let mut some6 = v6.clone();
    some6[2].1 = false;
    std::fs::write(
        resources.path().join("web.yaml"),
        services_yaml(&v4, &some6),
    )
    .expect("write resources");
    let deadline = Instant::now() + Duration::from_secs(20);
    while rendered_backends(&host.name, "ip6") != 2 {
        assert!(
            Instant::now() < deadline,
            "never 2 IPv6 backends\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(rendered_backends(&host.name, "ip"), 3, "IPv4 untouched");
    let counts = connect_many(&client, vip6, 100);
    assert_eq!(counts.get("b3"), None, "{counts:?}");
    assert_eq!(
        counts.get("b1").unwrap_or(&0) + counts.get("b2").unwrap_or(&0),
        100,
        "{counts:?}"
    );

    // drift in the ip6 table: named, then repaired
    let ok = Command::new("ip")
        .args(["netns", "exec", &host.name, "nft", "flush", "map", "ip6"])
        .args(["nimbess-svc", "be.default.web.tcp.80"])
        .status()
        .expect("nft");
    assert!(ok.success());
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("service be.default.web.tcp.80: backends are [], the model has [")
            && out.contains(&format!("{} . 8080", ips[1].1)),
        "{out}"
    );
    assert_eq!(
        agent.cli(&["verify"]),
        (0, "no drift\n".to_string()),
        "repaired"
    );
    assert_eq!(rendered_backends(&host.name, "ip6"), 2);

    // the Services gone: both tables go
    std::fs::remove_file(resources.path().join("web.yaml")).expect("remove resources");
    let deadline = Instant::now() + Duration::from_secs(20);
    let table = |family: &str| {
        Command::new("ip")
            .args(["netns", "exec", &host.name, "nft", "list", "table", family])
            .arg("nimbess-svc")
            .output()
            .expect("nft")
            .status
            .success()
    };
    while table("ip") || table("ip6") {
        assert!(
            Instant::now() < deadline,
            "the tables stay\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

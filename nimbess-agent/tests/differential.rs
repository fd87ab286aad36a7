//! For random ADD/DEL/ACL sequences, the kernel driver's ping matrix equals
//! what the model's pipelines (the sim data plane) say; for random Services,
//! NetworkPolicies, AdminNetworkPolicies and BaselineAdminNetworkPolicies,
//! every TCP connection between pods (straight and through a ClusterIP)
//! ends in the kernel as the sim driver says it may.
//! Needs root.

mod support;
mod traffic;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nephrite_pipeline::{
    AclProtocol, Frame, Mac, Outcome, Payload, Protocol, Rendered, forward, port_id,
};
use nimbess_agent::driver::Driver;
use nimbess_agent::driver::kernel::firewall::{policy, services};
use nimbess_agent::driver::sim::SimDriver;
use nimbess_agent::northbound::resources::parse_into;
use nimbess_agent::northbound::{Objects, derive};
use nimbess_agent::state::{PersistedState, StateStore};
use support::{AgentProcess, Netns, first_ip, ping, unique};

struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn delivered(r: &Rendered, from: &str, frame: Frame, to: &str) -> bool {
    forward(r, from, &frame).delivered.iter().any(|p| p == to)
}

/// What the pipelines say about `x` pinging `y`: ARP both ways, echo and reply.
fn sim_ping(r: &Rendered, x: &nephrite_pipeline::Port, y: &nephrite_pipeline::Port) -> bool {
    let (Some(mx), Some(my)) = (x.mac(), y.mac()) else {
        return false;
    };
    let icmp = |src: &nephrite_pipeline::Port, dst: &nephrite_pipeline::Port| Payload::Ipv4 {
        src: src.address.addr,
        dst: dst.address.addr,
        protocol: AclProtocol::Icmp,
        port: None,
    };
    let frame = |src_mac: Mac, dst_mac: Mac, payload| Frame {
        src_mac,
        dst_mac,
        payload,
    };
    delivered(r, &x.id, frame(mx, Mac::BROADCAST, Payload::Arp), &y.id)
        && delivered(r, &y.id, frame(my, mx, Payload::Arp), &x.id)
        && delivered(r, &x.id, frame(mx, my, icmp(x, y)), &y.id)
        && delivered(r, &y.id, frame(my, mx, icmp(y, x)), &x.id)
}

fn config(nets: &[String], acls: &BTreeMap<usize, String>) -> String {
    let mut s = String::from("driver: kernel\nnetworks:\n");
    for (i, name) in nets.iter().enumerate() {
        s.push_str(&format!(
            "  - name: {name}\n    subnet: 10.{}.0.0/24\n",
            211 + i
        ));
        if let Some(dst) = acls.get(&i) {
            s.push_str(&format!(
                "    acl:\n      - action: deny\n        dst: {dst}/32\n        protocol: icmp\n"
            ));
        }
    }
    s
}

fn run(seed: u64) {
    let nets = vec![unique("dfa"), unique("dfb")];
    let names: Vec<&str> = nets.iter().map(String::as_str).collect();
    let agent = AgentProcess::start(&config(&nets, &BTreeMap::new()), "kernel", &names);
    let pods: Vec<Netns> = (0..4).map(|_| Netns::new("df")).collect();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut attached: BTreeMap<usize, (usize, std::net::Ipv4Addr)> = BTreeMap::new();
    let mut acls: BTreeMap<usize, String> = BTreeMap::new();
    let mut log = Vec::new();
    for _ in 0..12 {
        match rng.next(4) {
            0 | 1 => {
                let pod = rng.next(4) as usize;
                let net = rng.next(2) as usize;
                if attached.contains_key(&pod) {
                    continue;
                }
                let (code, r) = agent.cni("ADD", &nets[net], &pods[pod].name, &pods[pod].path());
                assert_eq!(code, 0, "{r}\n{}", agent.log());
                attached.insert(pod, (net, first_ip(&r)));
                log.push(format!("ADD pod{pod} net{net}"));
            }
            2 => {
                let pod = rng.next(4) as usize;
                let net = attached.remove(&pod).map_or(0, |(n, _)| n);
                assert_eq!(
                    agent
                        .cni("DEL", &nets[net], &pods[pod].name, &pods[pod].path())
                        .0,
                    0
                );
                log.push(format!("DEL pod{pod}"));
            }
            _ => {
                let net = rng.next(2) as usize;
                let target = attached
                    .values()
                    .find(|(n, _)| *n == net)
                    .map(|(_, ip)| *ip);
                match (target, acls.contains_key(&net)) {
                    (Some(ip), false) => {
                        acls.insert(net, ip.to_string());
                    }
                    _ => {
                        acls.remove(&net);
                    }
                }
                std::fs::write(&agent.config, config(&nets, &acls)).expect("config");
                agent.hup();
                let want = acls.contains_key(&net) as usize;
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    let (_, json) = agent.cli(&["networks", "-o", "json"]);
                    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
                    let n = v[net]["spec"]["acl"].as_array().map_or(0, Vec::len);
                    if n == want {
                        break;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "reload never applied\n{}",
                        agent.log()
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
                log.push(format!("ACL net{net} deny-to {:?}", acls.get(&net)));
            }
        }
    }
    let (code, drift) = agent.cli(&["verify"]);
    assert_eq!(code, 0, "{drift}");

    // what the agent persisted: its snapshot plus its journal
    let state: PersistedState = StateStore::open(&agent.dir.join("state"))
        .expect("state dir")
        .load()
        .expect("state");
    let rendered = state.model.rendered();
    let mut kernel = BTreeMap::new();
    let mut sim = BTreeMap::new();
    for (&x, &(_, _)) in &attached {
        for (&y, &(_, ip_y)) in &attached {
            if x == y {
                continue;
            }
            let px = state
                .model
                .port(&port_id(&pods[x].name, "eth0"))
                .expect("port x");
            let py = state
                .model
                .port(&port_id(&pods[y].name, "eth0"))
                .expect("port y");
            sim.insert((x, y), sim_ping(&rendered, px, py));
            kernel.insert((x, y), ping(&pods[x].path(), ip_y, 1) == 1);
        }
    }
    eprintln!("seed {seed}: steps {log:?}\n  kernel ping matrix {kernel:?}");
    assert_eq!(kernel, sim, "seed {seed}, steps {log:?}");
}

#[test]
fn kernel_ping_matrix_equals_the_sim() {
    if let Err(e) = nephrite_test_services::require_root("creates network namespaces and veths") {
        e.skip("kernel_ping_matrix_equals_the_sim");
        return;
    }
    for seed in [7, 11, 23, 42] {
        run(seed);
    }
}

/// Answer of a server that says where it listens: `ip:port`.
fn outcome(answer: &str) -> Outcome {
    match answer {
        "refused" => Outcome::Refused,
        "timeout" => Outcome::Dropped,
        other => {
            let at: std::net::SocketAddrV4 = other.parse().expect("ip:port");
            Outcome::Reaches(*at.ip(), at.port())
        }
    }
}

const VIP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 96, 0, 60);

/// One admin rule's ports: TCP 8080, TCP 9090 or every port.
fn admin_ports(rng: &mut Rng) -> String {
    match rng.next(3) {
        0 => "\n    ports: [{portNumber: {protocol: TCP, port: 8080}}]".to_string(),
        1 => "\n    ports: [{portNumber: {protocol: TCP, port: 9090}}]".to_string(),
        _ => String::new(),
    }
}

/// Pods of role `rN`, in every namespace, as an ANP/BANP subject or peer.
fn role(n: u64) -> String {
    format!("{{pods: {{namespaceSelector: {{}}, podSelector: {{matchLabels: {{role: r{n}}}}}}}}}")
}

/// Up to two AdminNetworkPolicies (priorities 10 and 20), each selecting
/// one pod with one rule (ingress or egress; Allow, Deny or Pass; from or
/// to one pod; one port or all), and maybe the BaselineAdminNetworkPolicy
/// for every pod with two ingress rules (Allow or Deny from one pod).
fn admin_yaml(rng: &mut Rng, pods: u64) -> String {
    let mut y = String::new();
    for priority in [10, 20] {
        if rng.next(3) == 0 {
            continue;
        }
        let action = ["Allow", "Deny", "Pass"][rng.next(3) as usize];
        let (direction, peers) = if rng.next(2) == 0 {
            ("ingress", "from")
        } else {
            ("egress", "to")
        };
        let (subject, peer) = (role(rng.next(pods)), role(rng.next(pods)));
        let ports = admin_ports(rng);
        y.push_str(&format!(
            "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {{name: a{priority}}}\nspec:\n  priority: {priority}\n  subject: {subject}\n  {direction}:\n  - action: {action}\n    {peers}: [{peer}]{ports}\n---\n"
        ));
    }
    if rng.next(2) == 0 {
        let mut rules = String::new();
        for _ in 0..2 {
            let action = ["Allow", "Deny"][rng.next(2) as usize];
            let peer = role(rng.next(pods));
            let ports = admin_ports(rng);
            rules.push_str(&format!(
                "  - action: {action}\n    from: [{peer}]{ports}\n"
            ));
        }
        y.push_str(&format!(
            "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata: {{name: default}}\nspec:\n  subject: {{namespaces: {{}}}}\n  ingress:\n{rules}---\n"
        ));
    }
    y
}

/// Pods `role=rN` with their addresses, a ClusterIP over pods 1 and 2
/// (each ready or not; none with `drained`), and per pod one of: no
/// policy, ingress only from one role on one port, ingress from no one,
/// egress on one port only; then the admin policies of [`admin_yaml`].
fn cluster_yaml(rng: &mut Rng, ips: &[std::net::Ipv4Addr], drained: bool) -> String {
    let mut y = String::new();
    for (i, ip) in ips.iter().enumerate() {
        y.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: default, labels: {{role: r{i}}}}}\nstatus: {{podIP: \"{ip}\"}}\n---\n"
        ));
        let port = [8080, 9090][rng.next(2) as usize];
        let spec = match rng.next(4) {
            0 => continue,
            1 => format!(
                "ingress: [{{from: [{{podSelector: {{matchLabels: {{role: r{}}}}}}}], ports: [{{protocol: TCP, port: {port}}}]}}]",
                rng.next(ips.len() as u64)
            ),
            2 => "policyTypes: [Ingress]".to_string(),
            _ => format!(
                "policyTypes: [Egress]\n  egress: [{{ports: [{{protocol: TCP, port: {port}}}]}}]"
            ),
        };
        y.push_str(&format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: p{i}, namespace: default}}\nspec:\n  podSelector: {{matchLabels: {{role: r{i}}}}}\n  {spec}\n---\n"
        ));
    }
    let eps: String = ips[1..]
        .iter()
        .map(|ip| {
            format!(
                "- {{addresses: [\"{ip}\"], conditions: {{ready: {}}}}}\n",
                !drained && rng.next(3) != 0
            )
        })
        .collect();
    y.push_str(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: default}}\nspec: {{clusterIP: {VIP}, ports: [{{port: 80, targetPort: 8080}}]}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: web-1, namespace: default, labels: {{kubernetes.io/service-name: web}}}}\naddressType: IPv4\nports: [{{port: 8080}}]\nendpoints:\n{eps}---\n"
    ));
    y.push_str(&admin_yaml(rng, ips.len() as u64));
    y
}

#[test]
fn kernel_connections_follow_the_sim_for_services_and_policies() {
    if !support::root(
        "kernel_connections_follow_the_sim_for_services_and_policies",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("dh");
    let net = unique("dsv");
    let yaml = format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.234.0.0/24\n");
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let agent = AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &[]);
    let pods: Vec<Netns> = (0..3).map(|_| Netns::new("dp")).collect();
    let mut ips = Vec::new();
    for pod in &pods {
        let (code, r) = agent.cni("ADD", &net, &pod.name, &pod.path());
        assert_eq!(code, 0, "{r}\n{}", agent.log());
        ips.push(first_ip(&r));
    }
    for (pod, ip) in pods.iter().zip(&ips) {
        for port in [8080, 9090] {
            traffic::serve_on(&pod.path(), &format!("{ip}:{port}"), port);
        }
    }
    let state: PersistedState = StateStore::open(&agent.dir.join("state"))
        .expect("state dir")
        .load()
        .expect("state");
    let model = state.model;
    // (client, destination): every other pod on both ports, the ClusterIP
    // from pod 0 (its backends are pods 1 and 2)
    let mut pairs = vec![(0, std::net::SocketAddrV4::new(VIP, 80))];
    for c in 0..ips.len() {
        for ip in ips
            .iter()
            .enumerate()
            .filter(|(s, _)| *s != c)
            .map(|(_, ip)| ip)
        {
            for port in [8080, 9090] {
                pairs.push((c, std::net::SocketAddrV4::new(*ip, port)));
            }
        }
    }
    // how often each kind of outcome was seen: the cases must all occur
    let mut seen = BTreeMap::new();
    // how many clusters had admin and baseline entries: both must occur
    let mut tiers_seen = BTreeMap::new();
    for seed in [5u64, 17] {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        for step in 0..3 {
            let resources = cluster_yaml(&mut rng, &ips, step == 2);
            let mut objects = Objects::default();
            let mut unread = Vec::new();
            parse_into(&resources, "generated", &mut objects, &mut unread);
            let derived = derive(&objects);
            assert!(
                unread.is_empty() && derived.warnings.is_empty(),
                "{unread:?} {:?}\n{resources}",
                derived.warnings
            );
            for (tier, present) in [
                (
                    "admin",
                    derived
                        .tiers
                        .values()
                        .any(|t| !t.ingress.admin.is_empty() || !t.egress.admin.is_empty()),
                ),
                (
                    "baseline",
                    derived
                        .tiers
                        .values()
                        .any(|t| !t.ingress.baseline.is_empty()),
                ),
            ] {
                if present {
                    *tiers_seen.entry(tier).or_insert(0usize) += 1;
                }
            }
            // the kernel driver's rendering of the modules, in the host
            let (lbs, tiers) = (derived.load_balancers.clone(), derived.tiers.clone());
            traffic::in_netns(&host.path(), move || {
                services::render(&lbs).expect("services");
                policy::render_tiers(&tiers).expect("policies");
            });
            let mut sim = Driver::Sim(SimDriver::new());
            sim.firewall_mut()
                .apply_services(&derived.load_balancers)
                .expect("sim");
            sim.firewall_mut()
                .apply_policies(&derived.tiers)
                .expect("sim");
            let Driver::Sim(sim) = sim else {
                unreachable!("built as the simulation")
            };
            // every connection at once: a dropped one costs its patience once
            let handles: Vec<_> = pairs
                .iter()
                .map(|&(c, dst)| {
                    let netns = pods[c].path();
                    std::thread::spawn(move || {
                        traffic::in_netns(&netns, move || {
                            traffic::answer_within(dst, Duration::from_secs(4))
                        })
                    })
                })
                .collect();
            for (&(c, dst), handle) in pairs.iter().zip(handles) {
                let kernel = outcome(&handle.join().expect("connection"));
                let kind = match kernel {
                    Outcome::Reaches(..) => "reached",
                    Outcome::Refused => "refused",
                    Outcome::Dropped => "dropped",
                };
                *seen.entry(kind).or_insert(0usize) += 1;
                let from = port_id(&pods[c].name, "eth0");
                let allowed = sim.connect(&model, &from, *dst.ip(), Protocol::Tcp, dst.port());
                assert!(
                    allowed.contains(&kernel),
                    "seed {seed} step {step}: pod {c} -> {dst}: the kernel {kernel:?}, the sim {allowed:?}\n{resources}"
                );
            }
        }
    }
    eprintln!("outcomes by kind: {seen:?}");
    assert_eq!(
        seen.len(),
        3,
        "reached, refused and dropped connections all occur: {seen:?}"
    );
    eprintln!("clusters with admin and baseline entries: {tiers_seen:?}");
    assert_eq!(
        tiers_seen.len(),
        2,
        "some clusters have admin entries, some baseline ones: {tiers_seen:?}"
    );
}

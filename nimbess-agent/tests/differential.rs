//! For random ADD/DEL/ACL sequences, the kernel driver's ping matrix equals
//! what the model's pipelines (the sim data plane) say. Needs root.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nephrite_pipeline::{AclProtocol, Frame, Mac, Payload, Rendered, forward, port_id};
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
    assert_eq!(agent.cli(&["verify"]).0, 0, "{}", agent.cli(&["verify"]).1);

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

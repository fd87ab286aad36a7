//! Services in the kernel: the agent's rendering against `nft -f` loading
//! the same rules from a file (the kernel's own floor), and connection setup
//! through a Service VIP against straight to the pod.
//!
//! - full render: 1,000 Services × 10 endpoints, generated and sent by the
//!   agent's code (one netlink batch), beside `nft -f FILE` of the same
//!   table written as `nft` text (below, [`nft_text`]);
//! - one endpoint change (an endpoint replaced; an endpoint removed, which
//!   also rewrites the Service's DNAT rule): the agent's diff (over netlink)
//!   beside `nft -f FILE` of the same change;
//! - connection setup: TCP connect + one answer from a client pod, through the
//!   VIP and straight to the backend, alternating one by one, over an agent
//!   started with `--resources dir:PATH`.
//!
//! Figures are medians of interleaved runs. `cargo bench -p
//! nephrite-nimbess-agent --bench services` as root; `NIMBESS_BENCH_RUNS`
//! (default 7), `NIMBESS_BENCH_CONNECTIONS` (default 200 per run).

#[path = "../tests/support/mod.rs"]
mod support;
#[path = "../tests/traffic/mod.rs"]
mod traffic;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use nephrite_pipeline::{Affinity, Backend, LoadBalancer, LoadBalancerKey, Protocol};
use nimbess_agent::driver::kernel::firewall::services::{apply_diff, chain_name, map_name, render};
use support::{AgentProcess, Netns, first_ip, unique};
use traffic::{in_netns, serve_on, setup_times};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(samples: &[Duration]) -> Duration {
    let mut s = samples.to_vec();
    s.sort();
    s[s.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `services` Services of `endpoints` endpoints each; the first Service's
/// first endpoint moves with `shift`, and with `drop` it loses its last.
fn cluster(
    services: u32,
    endpoints: u32,
    shift: u32,
    drop: bool,
) -> BTreeMap<LoadBalancerKey, LoadBalancer> {
    (0..services)
        .map(|i| {
            let key = LoadBalancerKey {
                namespace: "bench".into(),
                service: format!("svc-{i}"),
                protocol: Protocol::Tcp,
                port: 80,
            };
            let count = if i == 0 && drop {
                endpoints - 1
            } else {
                endpoints
            };
            let backends = (0..count)
                .map(|e| {
                    // the first Service's first backend moves with `shift`
                    let host = if i == 0 && e == 0 { 200 + shift } else { e + 1 };
                    Backend {
                        address: Ipv4Addr::new(
                            10,
                            128 + (i / 256) as u8,
                            (i % 256) as u8,
                            host as u8,
                        ),
                        port: 8080,
                        weight: 1,
                    }
                })
                .collect();
            let lb = LoadBalancer {
                vip: Ipv4Addr::new(10, 96, (i / 256) as u8, (i % 256) as u8),
                node_port: None,
                affinity: Affinity::None,
                backends,
            };
            (key, lb)
        })
        .collect()
}

type Services = BTreeMap<LoadBalancerKey, LoadBalancer>;

/// The backend map's elements of `lb` as `nft` writes them.
fn slots_text(lb: &LoadBalancer) -> String {
    let slots: Vec<String> = lb
        .backends
        .iter()
        .flat_map(|b| std::iter::repeat_n(b, b.weight as usize))
        .enumerate()
        .map(|(i, b)| format!("{i} : {} . {}", b.address, b.port))
        .collect();
    slots.join(", ")
}

/// The DNAT rule of a Service port (TCP, no affinity: what [`cluster`] makes).
fn rule_text(key: &LoadBalancerKey, lb: &LoadBalancer) -> String {
    let n: u32 = lb.backends.iter().map(|b| b.weight).sum();
    format!(
        "add rule ip nimbess-svc {} meta l4proto tcp dnat ip to numgen random mod {n} map @{}\n",
        chain_name(key),
        map_name(key)
    )
}

/// The table the agent renders for `services` (every Service with
/// backends, TCP, no affinity, no NodePort), written as `nft` text: the
/// yardstick `nft -f` loads.
fn nft_text(services: &Services) -> String {
    let mut out = String::from(
        "add table ip nimbess-svc\ndelete table ip nimbess-svc\ntable ip nimbess-svc {\n\
         map services { type ipv4_addr . inet_proto . inet_service : verdict; }\n\
         map nodeports { type inet_proto . inet_service : verdict; }\n\
         set noendpoints { type ipv4_addr . inet_proto . inet_service; }\n",
    );
    for (chain, hook) in [("prerouting", "prerouting"), ("output", "output")] {
        let _ = writeln!(
            out,
            "chain {chain} {{ type nat hook {hook} priority -100; policy accept;\n\
             ip daddr . meta l4proto . th dport vmap @services\n\
             fib daddr type local meta l4proto . th dport vmap @nodeports\n}}"
        );
    }
    for (chain, hook) in [("refuse", "prerouting"), ("local", "output")] {
        let _ = writeln!(
            out,
            "chain {chain} {{ type filter hook {hook} priority -10; policy accept;\n\
             ip daddr . meta l4proto . th dport @noendpoints reject\n}}"
        );
    }
    out.push_str("}\n");
    for (key, lb) in services {
        let (chain, map) = (chain_name(key), map_name(key));
        let _ = writeln!(
            out,
            "add map ip nimbess-svc {map} {{ typeof numgen random mod 1 : ip daddr . tcp dport ; }}\n\
             add chain ip nimbess-svc {chain}\n\
             add element ip nimbess-svc {map} {{ {} }}",
            slots_text(lb)
        );
        out.push_str(&rule_text(key, lb));
        let _ = writeln!(
            out,
            "add element ip nimbess-svc services {{ {} . tcp . {} : goto {chain} }}",
            lb.vip, key.port
        );
    }
    out
}

/// The same change as `nft` text: the changed Service ports' maps (and
/// rules, when the slot count moved) rewritten.
fn nft_change_text(old: &Services, new: &Services) -> String {
    let mut out = String::new();
    for (key, lb) in new {
        let Some(was) = old.get(key).filter(|was| *was != lb) else {
            continue;
        };
        let map = map_name(key);
        let _ = writeln!(out, "flush map ip nimbess-svc {map}");
        if was.backends.len() != lb.backends.len() {
            let _ = writeln!(out, "flush chain ip nimbess-svc {}", chain_name(key));
            out.push_str(&rule_text(key, lb));
        }
        let _ = writeln!(
            out,
            "add element ip nimbess-svc {map} {{ {} }}",
            slots_text(lb)
        );
    }
    out
}

fn nft_file(path: &std::path::Path) {
    let ok = Command::new("nft")
        .arg("-f")
        .arg(path)
        .status()
        .expect("nft");
    assert!(ok.success(), "nft -f {}", path.display());
}

/// `nft -f FILE` of `text` (written beforehand, not timed).
fn timed_nft(text: &str, file: &std::path::Path) -> Duration {
    std::fs::write(file, text).expect("write rules");
    let started = Instant::now();
    nft_file(file);
    started.elapsed()
}

fn render_figures(runs: usize) {
    let full = cluster(1000, 10, 0, false);
    let text = nft_text(&full);
    let file = std::env::temp_dir().join(format!("nimbess-bench-{}.nft", std::process::id()));
    let mut ours = Vec::new();
    let mut floor = Vec::new();
    // (agent, nft -f) for an endpoint replaced and an endpoint removed
    let mut changes = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    for run in 0..runs {
        let started = Instant::now();
        render(&full).expect("full render");
        ours.push(started.elapsed());
        floor.push(timed_nft(&text, &file));
        for (i, drop) in [false, true].into_iter().enumerate() {
            // from the table as the agent leaves it, one endpoint changes
            let changed = cluster(1000, 10, 1 + run as u32, drop);
            render(&full).expect("full render");
            let started = Instant::now();
            apply_diff(&full, &changed).expect("one change");
            changes[i].0.push(started.elapsed());
            render(&full).expect("full render");
            changes[i]
                .1
                .push(timed_nft(&nft_change_text(&full, &changed), &file));
        }
    }
    let _ = std::fs::remove_file(&file);
    render(&BTreeMap::<LoadBalancerKey, LoadBalancer>::new()).expect("clean up");
    let (o, f) = (median(&ours), median(&floor));
    println!(
        "full render, 1000 services x 10 endpoints ({} lines): agent {:.1} ms, nft -f file {:.1} ms, ratio {:.2} (goal <= 1.5)",
        text.lines().count(),
        ms(o),
        ms(f),
        o.as_secs_f64() / f.as_secs_f64()
    );
    for ((agent, nft), what) in changes.iter().zip(["replaced", "removed"]) {
        println!(
            "one endpoint {what}: agent {:.2} ms (goal < 20 ms), nft -f of the same change {:.2} ms",
            ms(median(agent)),
            ms(median(nft))
        );
    }
}

fn connection_figures(runs: usize, connections: usize) {
    let host = Netns::new("bh");
    let resources = tempfile::tempdir().expect("tempdir");
    let net = unique("bs");
    let yaml = format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.233.0.0/24\n");
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let flag = format!("dir:{}", resources.path().display());
    let agent =
        AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &["--resources", &flag]);
    let (client, server) = (Netns::new("bc"), Netns::new("bv"));
    let (_, rc) = agent.cni("ADD", &net, &client.name, &client.path());
    let (_, rs) = agent.cni("ADD", &net, &server.name, &server.path());
    let server_ip = first_ip(&rs);
    let _ = first_ip(&rc);
    serve_on(&server.path(), "x", 8080);
    std::fs::write(
        resources.path().join("svc.yaml"),
        format!(
            "kind: Service\napiVersion: v1\nmetadata: {{name: web, namespace: default}}\nspec: {{clusterIP: 10.96.0.10, ports: [{{port: 80, targetPort: 8080}}]}}\n---\n\
             kind: EndpointSlice\napiVersion: discovery.k8s.io/v1\nmetadata: {{name: web-1, namespace: default, labels: {{kubernetes.io/service-name: web}}}}\naddressType: IPv4\nports: [{{port: 8080}}]\nendpoints: [{{addresses: [\"{server_ip}\"]}}]\n"
        ),
    )
    .expect("resources");
    let vip = SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, 10), 80);
    let direct = SocketAddrV4::new(server_ip, 8080);
    let deadline = Instant::now() + Duration::from_secs(20);
    while in_netns(&client.path(), move || {
        TcpStream::connect_timeout(&vip.into(), Duration::from_millis(200)).is_err()
    }) {
        assert!(
            Instant::now() < deadline,
            "the VIP never answered\n{}",
            agent.log()
        );
    }
    // one connection through the VIP, one straight, in turn: both see the
    // same moment of the machine
    let (mut via, mut straight, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let (mut v, mut d) = (Vec::new(), Vec::new());
        for _ in 0..connections {
            v.extend(setup_times(&client.path(), vip, 1));
            d.extend(setup_times(&client.path(), direct, 1));
        }
        let (mv, md) = (median(&v), median(&d));
        ratios.push(mv.as_secs_f64() / md.as_secs_f64());
        via.push(mv);
        straight.push(md);
    }
    ratios.sort_by(f64::total_cmp);
    let (v, d) = (median(&via), median(&straight));
    println!(
        "connection setup (connect + first byte, {connections} alternating pairs x {runs} runs): via VIP {:.1} us, direct {:.1} us, ratio {:.2} (goal <= 1.2), per-run ratios {:.2}..{:.2}",
        v.as_secs_f64() * 1e6,
        d.as_secs_f64() * 1e6,
        v.as_secs_f64() / d.as_secs_f64(),
        ratios[0],
        ratios[ratios.len() - 1]
    );
}

fn main() {
    if !support::root(
        "services bench",
        "creates network namespaces and nftables rules",
    ) {
        return;
    }
    let runs = env_usize("NIMBESS_BENCH_RUNS", 7);
    let connections = env_usize("NIMBESS_BENCH_CONNECTIONS", 200);
    // the render figures in a namespace of their own (nft follows the process)
    let scratch = Netns::new("br");
    let file = std::fs::File::open(scratch.path()).expect("open netns");
    let own = std::fs::File::open("/proc/self/ns/net").expect("own netns");
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
    render_figures(runs);
    nix::sched::setns(&own, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns back");
    connection_figures(runs, connections);
}

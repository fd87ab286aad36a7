//! Services in the kernel: the agent's rendering against `nft -f` loading
//! the same rules from a file (the kernel's own floor), and connection setup
//! through a Service VIP against straight to the pod.
//!
//! - full render: 1,000 Services × 10 endpoints, generated and loaded by the
//!   agent's code (`nft -f -`), beside `nft -f FILE` of the same text;
//! - one endpoint change: the diff the agent loads for it;
//! - connection setup: TCP connect + one answer from a client pod, through the
//!   VIP and straight to the backend, over an agent started with
//!   `--resources dir:PATH`.
//!
//! Figures are medians of interleaved runs. `cargo bench -p
//! nephrite-nimbess-agent --bench services` as root; `NIMBESS_BENCH_RUNS`
//! (default 7), `NIMBESS_BENCH_CONNECTIONS` (default 200 per run).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use nephrite_pipeline::{Affinity, Backend, LoadBalancer, LoadBalancerKey, Protocol};
use nimbess_agent::driver::kernel::services::{diff_script, full_script, load};
use support::{AgentProcess, Netns, first_ip, unique};

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

fn cluster(services: u32, endpoints: u32, shift: u32) -> BTreeMap<LoadBalancerKey, LoadBalancer> {
    (0..services)
        .map(|i| {
            let key = LoadBalancerKey {
                namespace: "bench".into(),
                service: format!("svc-{i}"),
                protocol: Protocol::Tcp,
                port: 80,
            };
            let backends = (0..endpoints)
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

fn nft_file(path: &std::path::Path) {
    let ok = Command::new("nft")
        .arg("-f")
        .arg(path)
        .status()
        .expect("nft");
    assert!(ok.success(), "nft -f {}", path.display());
}

fn render_figures(runs: usize) {
    let full = cluster(1000, 10, 0);
    let text = full_script(&full);
    let file = std::env::temp_dir().join(format!("nimbess-bench-{}.nft", std::process::id()));
    std::fs::write(&file, &text).expect("write rules");
    let (mut ours, mut floor, mut change) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let started = Instant::now();
        load(&full_script(&full), "bench").expect("full render");
        ours.push(started.elapsed());
        let started = Instant::now();
        nft_file(&file);
        floor.push(started.elapsed());
        // the table as the agent left it; then one endpoint moves
        load(&full_script(&full), "bench").expect("full render");
        let moved = cluster(1000, 10, 1);
        let started = Instant::now();
        load(&diff_script(&full, &moved), "bench").expect("one change");
        change.push(started.elapsed());
    }
    let _ = std::fs::remove_file(&file);
    load(&full_script(&BTreeMap::new()), "bench").expect("clean up");
    let (o, f) = (median(&ours), median(&floor));
    println!(
        "full render, 1000 services x 10 endpoints ({} lines): agent {:.1} ms, nft -f file {:.1} ms, ratio {:.2} (goal <= 1.5)",
        text.lines().count(),
        ms(o),
        ms(f),
        o.as_secs_f64() / f.as_secs_f64()
    );
    println!(
        "one endpoint change: {:.2} ms (goal < 20 ms)",
        ms(median(&change))
    );
}

fn in_netns<T: Send + 'static>(path: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = path.to_string();
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open netns");
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("netns thread")
}

/// Median connect + first byte from the client pod to `dst`.
fn connect_setup(client: &str, dst: SocketAddrV4, n: usize) -> Duration {
    in_netns(client, move || {
        let samples: Vec<Duration> = (0..n)
            .map(|_| {
                let started = Instant::now();
                let mut s = TcpStream::connect(dst).expect("connect");
                let mut b = [0u8; 1];
                s.read_exact(&mut b).expect("answer");
                started.elapsed()
            })
            .collect();
        median(&samples)
    })
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
    let listener = in_netns(&server.path(), || {
        TcpListener::bind("0.0.0.0:8080").expect("bind")
    });
    std::thread::spawn(move || {
        for mut c in listener.incoming().flatten() {
            let _ = c.write_all(b"x");
        }
    });
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
    let (mut via, mut straight) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        via.push(connect_setup(&client.path(), vip, connections));
        straight.push(connect_setup(&client.path(), direct, connections));
    }
    let (v, d) = (median(&via), median(&straight));
    println!(
        "connection setup (connect + first byte): via VIP {:.1} us, direct {:.1} us, ratio {:.2} (goal <= 1.2)",
        v.as_secs_f64() * 1e6,
        d.as_secs_f64() * 1e6,
        v.as_secs_f64() / d.as_secs_f64()
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

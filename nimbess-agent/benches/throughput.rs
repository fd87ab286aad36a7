//! Pod-to-pod TCP throughput (iperf3): two pods attached by nimbess-cni
//! against two pods attached by Debian's `bridge` + `host-local`, in the
//! same run, alternating, median of the runs; floor 0.95× the bridge's.
//! Two cases, interleaved run by run: IPv4 on IPv4-only networks, and IPv6
//! on dual-stack networks (nimbess `subnets: [v4, v6]`, host-local given
//! both ranges).
//!
//! Both data paths are CPU-bound (veth → bridge → veth), so on a shared
//! machine a single run measures the neighbours as much as the path. The
//! bench therefore alternates in ABBA order (a drift in load hits both
//! sides alike), prints the load average and steal with every run, and reports three
//! ratios: of the medians (the figure), the median of the per-pair
//! ratios, and the median ratio of CPU efficiency (bits per CPU-second of
//! the iperf3 client and server, from iperf3's own accounting), the one
//! least moved by other processes.
//!
//! `cargo bench -p nephrite-nimbess-agent --bench throughput` as root;
//! `NIMBESS_BENCH_RUNS` (default 5) and `NIMBESS_BENCH_SECONDS` (default 10).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nephrite_test_services::machine::{CpuTimes, load_average};
use nephrite_test_services::stats::median;
use serde_json::Value;
use support::{AgentProcess, BRIDGE_PLUGIN_DIR, Netns, run_bridge_plugin, unique};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// An iperf3 server in `server` on `dst`, for the whole benchmark (killed on drop).
struct Server(std::process::Child);

impl Server {
    fn start(iperf3: &Path, server: &Netns, dst: IpAddr) -> Server {
        let child = Command::new("ip")
            .args(["netns", "exec", &server.name])
            .arg(iperf3)
            .args(["-s", "-B", &dst.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 server");
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One iperf3 result: the receiver's bits per second and the CPU seconds
/// per second the client and server used (iperf3's accounting).
#[derive(Clone, Copy)]
struct Sample {
    bps: f64,
    cpu: f64,
}

impl Sample {
    /// Bits per CPU-second.
    fn efficiency(self) -> f64 {
        self.bps / self.cpu.max(1e-9)
    }
}

/// One iperf3 run from `client` to the server on `dst`. Retries while the
/// server is not listening yet (a loaded machine can take seconds to start
/// it; the bridge plugin's IPv6 address may still be tentative).
fn iperf(iperf3: &Path, client: &Netns, dst: IpAddr, seconds: usize) -> Sample {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new("ip")
            .args(["netns", "exec", &client.name])
            .arg(iperf3)
            .args(["-c", &dst.to_string(), "-t", &seconds.to_string(), "-J"])
            .output()
            .expect("iperf3 client");
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if let Some(bps) = json["end"]["sum_received"]["bits_per_second"].as_f64() {
            let cpu = &json["end"]["cpu_utilization_percent"];
            let percent = cpu["host_total"].as_f64().unwrap_or(0.0)
                + cpu["remote_total"].as_f64().unwrap_or(0.0);
            return Sample {
                bps,
                cpu: percent / 100.0,
            };
        }
        assert!(
            Instant::now() < deadline,
            "iperf3 gave no result for 30 s: {json}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The address of `family` (4 or 6) in a CNI result.
fn address(result: &Value, family: u8) -> IpAddr {
    result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["address"].as_str()?.split('/').next()?.parse().ok())
        .find(|ip: &IpAddr| (family == 6) == ip.is_ipv6())
        .unwrap_or_else(|| panic!("no IPv{family} address in {result}"))
}

/// Two pods of one plugin and the server's address the client measures to.
struct Pair {
    client: Netns,
    server: Netns,
    dst: IpAddr,
}

/// A case: IPv4 or IPv6, nimbess's pods against the bridge plugin's, and
/// every run's samples.
struct Case {
    family: u8,
    ours: Pair,
    theirs: Pair,
    samples: Vec<(Sample, Sample)>,
}

/// Two pods on the agent's network `net`, measured on `family`.
fn nimbess_pair(agent: &AgentProcess, net: &str, family: u8) -> Pair {
    let (client, server) = (Netns::new("ta"), Netns::new("tb"));
    let mut results = Vec::new();
    for ns in [&client, &server] {
        let (code, out) = agent.cni("ADD", net, &ns.name, &ns.path());
        assert_eq!(code, 0, "nimbess ADD: {out}\n{}", agent.log());
        results.push(out);
    }
    Pair {
        client,
        server,
        dst: address(&results[1], family),
    }
}

/// Two pods on the bridge plugin's bridge `bridge` with host-local over
/// `ranges` (one per family), measured on `family`.
fn bridge_pair(bridge: &str, ranges: &[&str], data_dir: &Path, family: u8) -> Pair {
    let ranges: Vec<Value> = ranges
        .iter()
        .map(|subnet| serde_json::json!([{ "subnet": subnet }]))
        .collect();
    let conf = serde_json::json!({
        "cniVersion": "1.0.0", "name": format!("tput{family}"), "type": "bridge",
        "bridge": bridge, "isGateway": false,
        "ipam": {"type": "host-local", "ranges": ranges, "dataDir": data_dir},
    })
    .to_string();
    let (client, server) = (Netns::new("ba"), Netns::new("bb"));
    let mut results = Vec::new();
    for ns in [&client, &server] {
        let env = BTreeMap::from([
            ("CNI_COMMAND", "ADD".to_string()),
            ("CNI_CONTAINERID", ns.name.clone()),
            ("CNI_NETNS", ns.path()),
            ("CNI_IFNAME", "eth0".to_string()),
            ("CNI_PATH", BRIDGE_PLUGIN_DIR.to_string()),
        ]);
        let (code, out) = run_bridge_plugin(&env, &conf);
        assert_eq!(code, 0, "bridge ADD: {out}");
        results.push(out);
    }
    Pair {
        client,
        server,
        dst: address(&results[1], family),
    }
}

fn main() {
    if let Err(e) = nephrite_test_services::require_root("the benchmark creates namespaces") {
        e.skip("bench throughput");
        return;
    }
    let iperf3: PathBuf = match nephrite_test_services::tool(nephrite_test_services::Tool::Iperf3) {
        Ok(p) => p,
        Err(e) => {
            e.skip("bench throughput");
            return;
        }
    };
    if !Path::new(BRIDGE_PLUGIN_DIR).join("bridge").exists() {
        eprintln!(
            "SKIPPED bench throughput: {BRIDGE_PLUGIN_DIR}/bridge missing (apt-get install containernetworking-plugins)"
        );
        return;
    }
    let runs = env_usize("NIMBESS_BENCH_RUNS", 5);
    let seconds = env_usize("NIMBESS_BENCH_SECONDS", 10);

    // nimbess: an IPv4-only and a dual-stack network
    let (net4, net6) = (unique("tput"), unique("tpu6"));
    let agent = AgentProcess::start(
        &format!(
            "driver: kernel\nnetworks:\n  - name: {net4}\n    subnet: 10.233.0.0/24\n\
             \x20 - name: {net6}\n    subnets: [10.235.0.0/24, 'fd00:235::/64']\n"
        ),
        "kernel",
        &[&net4, &net6],
    );
    // the bridge plugin: the same two, host-local given both ranges on the second
    let tmp = tempfile::tempdir().expect("tmp");
    let (bridge4, bridge6) = (format!("cb{}", unique("")), format!("cb{}", unique("")));
    let mut cases = vec![
        Case {
            family: 4,
            ours: nimbess_pair(&agent, &net4, 4),
            theirs: bridge_pair(&bridge4, &["10.234.0.0/24"], &tmp.path().join("4"), 4),
            samples: Vec::new(),
        },
        Case {
            family: 6,
            ours: nimbess_pair(&agent, &net6, 6),
            theirs: bridge_pair(
                &bridge6,
                &["10.236.0.0/24", "fd00:236::/64"],
                &tmp.path().join("6"),
                6,
            ),
            samples: Vec::new(),
        },
    ];
    let servers: Vec<Server> = cases
        .iter()
        .flat_map(|c| [&c.ours, &c.theirs])
        .map(|p| Server::start(&iperf3, &p.server, p.dst))
        .collect();
    println!("load average before: {}", load_average());
    for run in 0..runs {
        for case in &mut cases {
            let times = CpuTimes::now();
            let measure = |p: &Pair| iperf(&iperf3, &p.client, p.dst, seconds);
            // ABBA: even runs measure nimbess first, odd runs the bridge first
            let (o, b) = if run % 2 == 0 {
                let o = measure(&case.ours);
                (o, measure(&case.theirs))
            } else {
                let b = measure(&case.theirs);
                (measure(&case.ours), b)
            };
            println!(
                "run {run} IPv{}: nimbess {:.2} Gbit/s ({:.2} Gbit/CPU-s) | bridge {:.2} Gbit/s ({:.2} Gbit/CPU-s) | ratio {:.3} | load {} | steal {:.1}%",
                case.family,
                o.bps / 1e9,
                o.efficiency() / 1e9,
                b.bps / 1e9,
                b.efficiency() / 1e9,
                o.bps / b.bps,
                load_average(),
                CpuTimes::now().since(&times).steal_pct
            );
            case.samples.push((o, b));
        }
    }
    println!(
        "pod-to-pod TCP throughput, median of {runs} alternating (ABBA) {seconds}-second runs:"
    );
    for case in &cases {
        let of = |f: fn(&(Sample, Sample)) -> f64| case.samples.iter().map(f).collect::<Vec<_>>();
        let o = median(&mut of(|(o, _)| o.bps));
        let b = median(&mut of(|(_, b)| b.bps));
        println!("IPv{}:", case.family);
        println!("  nimbess-cni  {:.2} Gbit/s", o / 1e9);
        println!("  bridge       {:.2} Gbit/s", b / 1e9);
        println!("  ratio ours/bridge {:.3} (floor 0.95)", o / b);
        println!(
            "  median of per-pair ratios {:.3}",
            median(&mut of(|(o, b)| o.bps / b.bps))
        );
        println!(
            "  median ratio of CPU efficiency (bits per CPU-second) {:.3}",
            median(&mut of(|(o, b)| o.efficiency() / b.efficiency()))
        );
    }
    println!("load average after: {}", load_average());
    drop(servers);
    drop(cases);
    for bridge in [bridge4, bridge6] {
        let _ = Command::new("ip").args(["link", "del", &bridge]).status();
    }
}

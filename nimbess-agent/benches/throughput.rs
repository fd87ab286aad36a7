//! Pod-to-pod TCP throughput (iperf3): two pods attached by nimbess-cni
//! against two pods attached by Debian's `bridge` + `host-local`, in the
//! same run, alternating, median of the runs; floor 0.95× the bridge's.
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
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nephrite_test_services::machine::{CpuTimes, load_average};
use nephrite_test_services::stats::median;
use support::{AgentProcess, BRIDGE_PLUGIN_DIR, Netns, first_ip, run_bridge_plugin, unique};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// An iperf3 server in `server` on `dst`, for the whole benchmark (killed on drop).
struct Server(std::process::Child);

impl Server {
    fn start(iperf3: &Path, server: &Netns, dst: Ipv4Addr) -> Server {
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
/// server is not listening yet (a loaded machine can take seconds to start it).
fn iperf(iperf3: &Path, client: &Netns, dst: Ipv4Addr, seconds: usize) -> Sample {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new("ip")
            .args(["netns", "exec", &client.name])
            .arg(iperf3)
            .args(["-c", &dst.to_string(), "-t", &seconds.to_string(), "-J"])
            .output()
            .expect("iperf3 client");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
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

    // two pods on a nimbess network
    let net = unique("tput");
    let agent = AgentProcess::start(
        &format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.233.0.0/24\n"),
        "kernel",
        &[&net],
    );
    let (oa, ob) = (Netns::new("ta"), Netns::new("tb"));
    let (code, ra) = agent.cni("ADD", &net, &oa.name, &oa.path());
    assert_eq!(code, 0, "{ra}");
    let (code, rb) = agent.cni("ADD", &net, &ob.name, &ob.path());
    assert_eq!(code, 0, "{rb}");
    let ours_dst = first_ip(&rb);

    // two pods on the bridge plugin
    let tmp = tempfile::tempdir().expect("tmp");
    let bridge = format!("cb{}", unique(""));
    let conf = serde_json::json!({
        "cniVersion": "1.0.0", "name": "tput", "type": "bridge",
        "bridge": bridge, "isGateway": false,
        "ipam": {"type": "host-local", "subnet": "10.234.0.0/24", "dataDir": tmp.path()},
    })
    .to_string();
    let (ba, bb) = (Netns::new("ba"), Netns::new("bb"));
    let mut theirs = Vec::new();
    for ns in [&ba, &bb] {
        let env = BTreeMap::from([
            ("CNI_COMMAND", "ADD".to_string()),
            ("CNI_CONTAINERID", ns.name.clone()),
            ("CNI_NETNS", ns.path()),
            ("CNI_IFNAME", "eth0".to_string()),
            ("CNI_PATH", BRIDGE_PLUGIN_DIR.to_string()),
        ]);
        let (code, out) = run_bridge_plugin(&env, &conf);
        assert_eq!(code, 0, "bridge ADD: {out}");
        theirs.push(out);
    }
    let bridge_dst = first_ip(&theirs[1]);

    let servers = [
        Server::start(&iperf3, &ob, ours_dst),
        Server::start(&iperf3, &bb, bridge_dst),
    ];
    println!("load average before: {}", load_average());
    let (mut ours, mut bridged) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let times = CpuTimes::now();
        // ABBA: even runs measure nimbess first, odd runs the bridge first
        let (o, b) = if run % 2 == 0 {
            let o = iperf(&iperf3, &oa, ours_dst, seconds);
            (o, iperf(&iperf3, &ba, bridge_dst, seconds))
        } else {
            let b = iperf(&iperf3, &ba, bridge_dst, seconds);
            (iperf(&iperf3, &oa, ours_dst, seconds), b)
        };
        println!(
            "run {run}: nimbess {:.2} Gbit/s ({:.2} Gbit/CPU-s) | bridge {:.2} Gbit/s ({:.2} Gbit/CPU-s) | ratio {:.3} | load {} | steal {:.1}%",
            o.bps / 1e9,
            o.efficiency() / 1e9,
            b.bps / 1e9,
            b.efficiency() / 1e9,
            o.bps / b.bps,
            load_average(),
            CpuTimes::now().since(&times).steal_pct
        );
        ours.push(o);
        bridged.push(b);
    }
    let of = |v: &[Sample], f: fn(Sample) -> f64| v.iter().map(|s| f(*s)).collect::<Vec<_>>();
    let (o, b) = (
        median(&mut of(&ours, |s| s.bps)),
        median(&mut of(&bridged, |s| s.bps)),
    );
    let mut pairs: Vec<f64> = ours
        .iter()
        .zip(&bridged)
        .map(|(o, b)| o.bps / b.bps)
        .collect();
    let mut efficiency: Vec<f64> = ours
        .iter()
        .zip(&bridged)
        .map(|(o, b)| o.efficiency() / b.efficiency())
        .collect();
    println!(
        "pod-to-pod TCP throughput, median of {runs} alternating (ABBA) {seconds}-second runs:"
    );
    println!("  nimbess-cni  {:.2} Gbit/s", o / 1e9);
    println!("  bridge       {:.2} Gbit/s", b / 1e9);
    println!("  ratio ours/bridge {:.3} (floor 0.95)", o / b);
    println!("  median of per-pair ratios {:.3}", median(&mut pairs));
    println!(
        "  median ratio of CPU efficiency (bits per CPU-second) {:.3}",
        median(&mut efficiency)
    );
    println!("load average after: {}", load_average());
    drop(servers);
    drop((oa, ob, ba, bb));
    let _ = Command::new("ip").args(["link", "del", &bridge]).status();
}

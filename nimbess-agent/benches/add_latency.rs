//! CNI ADD latency, plugin exec to exit (netns creation untimed): nimbess-cni
//! against Debian's `bridge` + `host-local` in the same run, pods added one
//! after another, median of the runs. Also: the median of ADDs 241–250 over
//! the median of ADDs 11–20, and the agent's RSS.
//!
//! `cargo bench -p nephrite-nimbess-agent --bench add_latency` as root;
//! `NIMBESS_BENCH_PODS` (default 300) and `NIMBESS_BENCH_RUNS` (default 3).
//! Pod-to-pod throughput is `benches/throughput.rs`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use support::{AgentProcess, BRIDGE_PLUGIN_DIR, Netns, run_bridge_plugin, run_plugin, unique};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut s = samples.to_vec();
    s.sort();
    let rank = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 0.5)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Time `pods` ADDs of one plugin configuration; returns per-ADD latencies.
fn time_adds(pods: usize, conf: &str, cni_path: &str) -> (Vec<Duration>, Vec<Netns>) {
    let namespaces: Vec<Netns> = (0..pods).map(|_| Netns::new("bn")).collect();
    let mut samples = Vec::with_capacity(pods);
    for ns in &namespaces {
        let env = BTreeMap::from([
            ("CNI_COMMAND", "ADD".to_string()),
            ("CNI_CONTAINERID", ns.name.clone()),
            ("CNI_NETNS", ns.path()),
            ("CNI_IFNAME", "eth0".to_string()),
            ("CNI_PATH", cni_path.to_string()),
        ]);
        let plugin_conf = conf.to_string();
        let started = Instant::now();
        let (code, out) = if cni_path.is_empty() {
            run_plugin(&env, &plugin_conf)
        } else {
            run_bridge_plugin(&env, &plugin_conf)
        };
        samples.push(started.elapsed());
        assert_eq!(code, 0, "ADD failed: {out}");
    }
    (samples, namespaces)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    if let Err(e) =
        nephrite_test_services::require_root("the benchmark creates namespaces and veths")
    {
        e.skip("bench add_latency");
        return;
    }
    if !Path::new(BRIDGE_PLUGIN_DIR).join("bridge").exists() {
        eprintln!(
            "SKIPPED bench add_latency: {BRIDGE_PLUGIN_DIR}/bridge missing (apt-get install containernetworking-plugins)"
        );
        return;
    }
    let pods = env_usize("NIMBESS_BENCH_PODS", 300);
    let runs = env_usize("NIMBESS_BENCH_RUNS", 3);
    let mut ours_p50 = Vec::new();
    let mut ours_p99 = Vec::new();
    let mut bridge_p50 = Vec::new();
    let mut bridge_p99 = Vec::new();
    let mut growth = Vec::new();
    let mut rss = 0;
    for run in 0..runs {
        // nimbess-cni against a warm agent
        let net = unique("bench");
        let agent = AgentProcess::start(
            &format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.231.0.0/16\n"),
            "kernel",
            &[&net],
        );
        let conf = agent.netconf(&net);
        let (ours, ours_ns) = time_adds(pods, &conf, "");
        if let Some(child) = &agent.child {
            rss = rss.max(rss_kib(child.id()));
        }
        if pods >= 250 {
            growth.push(ms(median(&ours[240..250])) / ms(median(&ours[10..20])));
        }
        drop(ours_ns);
        drop(agent);

        // bridge + host-local doing the same
        let tmp = tempfile::tempdir().expect("tmp");
        let bridge = format!("cb{}", unique(""));
        let conf = serde_json::json!({
            "cniVersion": "1.0.0", "name": format!("bench{run}"), "type": "bridge",
            "bridge": bridge, "isGateway": false,
            "ipam": {"type": "host-local", "subnet": "10.232.0.0/16", "dataDir": tmp.path()},
        })
        .to_string();
        let (theirs, theirs_ns) = time_adds(pods, &conf, BRIDGE_PLUGIN_DIR);
        drop(theirs_ns);
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &bridge])
            .status();

        ours_p50.push(median(&ours));
        ours_p99.push(percentile(&ours, 0.99));
        bridge_p50.push(median(&theirs));
        bridge_p99.push(percentile(&theirs, 0.99));
        println!(
            "run {run}: nimbess p50 {:.2} ms p99 {:.2} ms | bridge p50 {:.2} ms p99 {:.2} ms",
            ms(median(&ours)),
            ms(percentile(&ours, 0.99)),
            ms(median(&theirs)),
            ms(percentile(&theirs, 0.99)),
        );
    }
    let (o50, o99) = (ms(median(&ours_p50)), ms(median(&ours_p99)));
    let (b50, b99) = (ms(median(&bridge_p50)), ms(median(&bridge_p99)));
    println!("ADD latency over {pods} pods, median of {runs} runs:");
    println!("  nimbess-cni  p50 {o50:.2} ms  p99 {o99:.2} ms");
    println!("  bridge       p50 {b50:.2} ms  p99 {b99:.2} ms");
    println!(
        "  ratio ours/bridge  p50 {:.2}  p99 {:.2}  (target ≤ 1.00, goal 0.50)",
        o50 / b50,
        o99 / b99
    );
    if !growth.is_empty() {
        growth.sort_by(f64::total_cmp);
        println!(
            "  median(ADD 241–250) / median(ADD 11–20): {:.2} (target ≤ 2.00)",
            growth[growth.len() / 2]
        );
    }
    println!(
        "  agent RSS after {pods} pods: {:.1} MiB (target < 100)",
        rss as f64 / 1024.0
    );
}

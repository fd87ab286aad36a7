//! CNI ADD latency, plugin exec to exit (netns creation untimed): nimbess-cni
//! against Debian's `bridge` + `host-local` in the same run, pods added one
//! after another, median of the runs. Two cases, interleaved run by run (in
//! ABBA order within each): an IPv4 network, and a dual-stack one (nimbess
//! `subnets: [v4, v6]`, host-local given both ranges). Also: the median of
//! ADDs 241–250 over the median of ADDs 11–20, and the agent's RSS.
//!
//! `cargo bench -p nephrite-nimbess-agent --bench add_latency` as root;
//! `NIMBESS_BENCH_PODS` (default 300) and `NIMBESS_BENCH_RUNS` (default 3).
//! Pod-to-pod throughput is `benches/throughput.rs`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use nephrite_test_services::machine::load_average;
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

/// One case: the agent's subnets (a line of its network's YAML) and host-local's
/// ranges for the bridge plugin.
struct Case {
    name: &'static str,
    subnets: &'static str,
    ranges: &'static [&'static str],
}

const CASES: [Case; 2] = [
    Case {
        name: "IPv4",
        subnets: "subnet: 10.231.0.0/16",
        ranges: &["10.232.0.0/16"],
    },
    Case {
        name: "dual-stack",
        subnets: "subnets: [10.231.0.0/16, 'fd00:231::/64']",
        ranges: &["10.232.0.0/16", "fd00:232::/64"],
    },
];

/// What one case measured over the runs.
#[derive(Default)]
struct Figures {
    ours_p50: Vec<Duration>,
    ours_p99: Vec<Duration>,
    bridge_p50: Vec<Duration>,
    bridge_p99: Vec<Duration>,
    growth: Vec<f64>,
    rss_kib: u64,
}

/// `pods` ADDs through nimbess-cni against a warm agent serving `case`'s network.
fn ours(case: &Case, pods: usize, figures: &mut Figures) -> Vec<Duration> {
    let net = unique("bench");
    let agent = AgentProcess::start(
        &format!(
            "driver: kernel\nnetworks:\n  - name: {net}\n    {}\n",
            case.subnets
        ),
        "kernel",
        &[&net],
    );
    let conf = agent.netconf(&net);
    let (samples, namespaces) = time_adds(pods, &conf, "");
    if let Some(child) = &agent.child {
        figures.rss_kib = figures.rss_kib.max(rss_kib(child.id()));
    }
    if pods >= 250 {
        figures
            .growth
            .push(ms(median(&samples[240..250])) / ms(median(&samples[10..20])));
    }
    drop(namespaces);
    drop(agent);
    samples
}

/// `pods` ADDs through the bridge plugin with host-local over `case`'s ranges.
fn bridge(case: &Case, pods: usize, run: usize) -> Vec<Duration> {
    let tmp = tempfile::tempdir().expect("tmp");
    let bridge = format!("cb{}", unique(""));
    let ranges: Vec<serde_json::Value> = case
        .ranges
        .iter()
        .map(|subnet| serde_json::json!([{ "subnet": subnet }]))
        .collect();
    let conf = serde_json::json!({
        "cniVersion": "1.0.0", "name": format!("bench{run}"), "type": "bridge",
        "bridge": bridge, "isGateway": false,
        "ipam": {"type": "host-local", "ranges": ranges, "dataDir": tmp.path()},
    })
    .to_string();
    let (samples, namespaces) = time_adds(pods, &conf, BRIDGE_PLUGIN_DIR);
    drop(namespaces);
    let _ = std::process::Command::new("ip")
        .args(["link", "del", &bridge])
        .status();
    samples
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
    let mut figures: Vec<Figures> = CASES.iter().map(|_| Figures::default()).collect();
    println!("load average before: {}", load_average());
    for run in 0..runs {
        for (case, fig) in CASES.iter().zip(&mut figures) {
            // ABBA: even runs add nimbess's pods first, odd runs the bridge's
            let (o, b) = if run % 2 == 0 {
                let o = ours(case, pods, fig);
                (o, bridge(case, pods, run))
            } else {
                let b = bridge(case, pods, run);
                (ours(case, pods, fig), b)
            };
            fig.ours_p50.push(median(&o));
            fig.ours_p99.push(percentile(&o, 0.99));
            fig.bridge_p50.push(median(&b));
            fig.bridge_p99.push(percentile(&b, 0.99));
            println!(
                "run {run} {}: nimbess p50 {:.2} ms p99 {:.2} ms | bridge p50 {:.2} ms p99 {:.2} ms | ratio p50 {:.2} | load {}",
                case.name,
                ms(median(&o)),
                ms(percentile(&o, 0.99)),
                ms(median(&b)),
                ms(percentile(&b, 0.99)),
                ms(median(&o)) / ms(median(&b)),
                load_average(),
            );
        }
    }
    for (case, fig) in CASES.iter().zip(&mut figures) {
        let (o50, o99) = (ms(median(&fig.ours_p50)), ms(median(&fig.ours_p99)));
        let (b50, b99) = (ms(median(&fig.bridge_p50)), ms(median(&fig.bridge_p99)));
        println!(
            "{} ADD latency over {pods} pods, median of {runs} runs:",
            case.name
        );
        println!("  nimbess-cni  p50 {o50:.2} ms  p99 {o99:.2} ms");
        println!("  bridge       p50 {b50:.2} ms  p99 {b99:.2} ms");
        println!(
            "  ratio ours/bridge  p50 {:.2}  p99 {:.2}  (target ≤ 0.50)",
            o50 / b50,
            o99 / b99
        );
        if !fig.growth.is_empty() {
            fig.growth.sort_by(f64::total_cmp);
            println!(
                "  median(ADD 241–250) / median(ADD 11–20): {:.2} (target ≤ 2.00)",
                fig.growth[fig.growth.len() / 2]
            );
        }
        println!(
            "  agent RSS after {pods} pods: {:.1} MiB (target < 100)",
            fig.rss_kib as f64 / 1024.0
        );
    }
    println!("load average after: {}", load_average());
}

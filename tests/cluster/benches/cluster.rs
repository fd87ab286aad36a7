//! `cargo xtask bench cluster` (as root): the one-node cluster's start time and pod start
//! latency on Nimbess against the same pods on Debian's `bridge` CNI plugin in the same cluster.
//!
//! - **start**: `cargo xtask cluster up` until the node is Ready (the control plane,
//!   containerd, the images, the agent and the kubelet), warm: after a first start and stop that
//!   built what was missing; cargo's and xtask's checks are in the figure.
//! - **pod start**: [`PODS`] echo pods created in one `kubectl apply`, each one's latency from
//!   that call to its first Running sight (a `kubectl get` every [`POLL`]); p50 and p99 per
//!   round. Rounds alternate Nimbess and `bridge` ([`ROUNDS`] each); the figures are the medians
//!   over the rounds and their ratio. For the `bridge` rounds a conflist that sorts before
//!   Nimbess's is added (containerd reloads its CNI configuration) and removed afterwards, with
//!   the bridge it made.
//!
//! Not part of `cargo xtask test`: the figures go to `tests/cluster/benches/RESULTS.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use nephrite_cluster_tests::cluster::Cluster;
use nephrite_cluster_tests::pods::{echo_pod, wait_for};
use nephrite_test_services::{machine, stats::median};
use serde_json::{Value, json};

/// Pods per round.
const PODS: usize = 50;
/// Rounds per CNI.
const ROUNDS: usize = 3;
/// How often the pods' phases are read.
const POLL: Duration = Duration::from_millis(100);
/// How long a round's pods may take to run, and to go.
const ROUND_TIMEOUT: Duration = Duration::from_secs(240);
/// The `bridge` rounds' conflist (sorting before `10-nimbess.conflist`).
const BRIDGE_CONFLIST: &str = "05-bench-bridge.conflist";
/// The bridge the `bridge` plugin makes (deleted after each of its rounds).
const BRIDGE: &str = "cnibench0";
/// Debian's CNI plugins (`containernetworking-plugins`).
const DEBIAN_PLUGINS: &str = "/usr/lib/cni";

/// The CNI a round's pods get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cni {
    Nimbess,
    Bridge,
}

fn main() -> anyhow::Result<()> {
    if !nephrite_cluster_tests::is_root() {
        eprintln!(
            "\nSKIPPED: the cluster bench starts a one-node cluster and needs root; run \
             `cargo xtask bench cluster` as root\n"
        );
        return Ok(());
    }
    println!("cluster bench: load average {}", machine::load_average());
    // A first start builds what is missing (xtask, the daemons, the images); the timed one
    // starts warm.
    drop(Cluster::up()?);
    let began = Instant::now();
    let cluster = Cluster::up()?;
    let start = began.elapsed();
    println!(
        "start: `cargo xtask cluster up` to node Ready {:.1} s, warm (cargo's checks included)",
        start.as_secs_f64()
    );
    let plugins = cluster.dir().join("cni").join("bin");
    for plugin in ["bridge", "host-local"] {
        let link = plugins.join(plugin);
        if !link.exists() {
            std::os::unix::fs::symlink(Path::new(DEBIAN_PLUGINS).join(plugin), &link)
                .with_context(|| format!("linking Debian's {plugin} plugin"))?;
        }
    }
    let mut figures: BTreeMap<Cni, Vec<(f64, f64)>> = BTreeMap::new();
    for round in 0..ROUNDS {
        // Alternate which CNI goes first, so a drift in the machine's load hits both alike.
        let order = if round % 2 == 0 {
            [Cni::Nimbess, Cni::Bridge]
        } else {
            [Cni::Bridge, Cni::Nimbess]
        };
        for cni in order {
            let (p50, p99) = run_round(&cluster, cni, round)?;
            println!(
                "round {}: {cni:?}: pod create → Running p50 {p50:.0} ms, p99 {p99:.0} ms \
                 ({PODS} pods; load average {})",
                round + 1,
                machine::load_average()
            );
            figures.entry(cni).or_default().push((p50, p99));
        }
    }
    let summary = |cni: Cni| {
        let runs = figures.get(&cni).cloned().unwrap_or_default();
        let mut p50s: Vec<f64> = runs.iter().map(|r| r.0).collect();
        let mut p99s: Vec<f64> = runs.iter().map(|r| r.1).collect();
        (median(&mut p50s), median(&mut p99s))
    };
    let (nimbess_p50, nimbess_p99) = summary(Cni::Nimbess);
    let (bridge_p50, bridge_p99) = summary(Cni::Bridge);
    println!(
        "\nsummary (median of {ROUNDS} interleaved rounds of {PODS} pods):\n  start to node Ready \
         {:.1} s\n  Nimbess: p50 {nimbess_p50:.0} ms, p99 {nimbess_p99:.0} ms\n  bridge:  p50 \
         {bridge_p50:.0} ms, p99 {bridge_p99:.0} ms\n  Nimbess / bridge: p50 {:.2}x, p99 {:.2}x\n  \
         load average {}",
        start.as_secs_f64(),
        nimbess_p50 / bridge_p50,
        nimbess_p99 / bridge_p99,
        machine::load_average()
    );
    Ok(())
}

/// One round: the `bridge` conflist in place (for [`Cni::Bridge`]), [`PODS`] pods created at once
/// and timed to Running, then the pods (and the bridge conflist and bridge) removed. The
/// latencies' p50 and p99 in milliseconds.
fn run_round(cluster: &Cluster, cni: Cni, round: usize) -> anyhow::Result<(f64, f64)> {
    let namespace = format!("bench-{}-{round}", format!("{cni:?}").to_lowercase());
    cluster.apply(&json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace},
    }))?;
    let conflist = cluster
        .dir()
        .join("cni")
        .join("net.d")
        .join(BRIDGE_CONFLIST);
    // The namespace's ServiceAccount comes from the controller-manager; a pod created before
    // it exists is refused.
    wait_for(
        ROUND_TIMEOUT,
        &format!("namespace {namespace}'s default ServiceAccount"),
        || {
            Ok(cluster
                .kubectl(&["get", "serviceaccount", "default", "-n", &namespace])
                .is_ok())
        },
    )?;
    if cni == Cni::Bridge {
        std::fs::write(&conflist, bridge_conflist())
            .with_context(|| format!("writing {}", conflist.display()))?;
        // containerd reloads its CNI configuration when the directory changes.
        std::thread::sleep(Duration::from_secs(2));
    }
    let result = time_pods(cluster, &namespace, cni);
    let removed = remove_pods(cluster, &namespace);
    if cni == Cni::Bridge {
        remove_bridge(&conflist)?;
    }
    removed?;
    result
}

/// The `bridge` plugin's conflist: its own bridge and subnet, no masquerade (so no iptables).
fn bridge_conflist() -> String {
    let list = json!({
        "cniVersion": "1.0.0",
        "name": "bench-bridge",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "ipMasq": false,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": "10.245.0.0/24"}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": "/run/nephrite-bench-cni",
            },
        }],
    });
    format!("{list:#}\n")
}

/// Creates the pods in one `kubectl apply` and polls until each is Running; p50 and p99 of the
/// latencies in milliseconds. A pod Running on the wrong CNI fails the round.
fn time_pods(cluster: &Cluster, namespace: &str, cni: Cni) -> anyhow::Result<(f64, f64)> {
    let items: Vec<Value> = (0..PODS)
        .map(|i| {
            echo_pod(
                namespace,
                &format!("p{i:02}"),
                &json!({"bench": "start"}),
                80,
            )
        })
        .collect();
    let created = Instant::now();
    cluster.apply(&json!({"apiVersion": "v1", "kind": "List", "items": items}))?;
    let mut running: BTreeMap<String, (Duration, String)> = BTreeMap::new();
    let deadline = created + ROUND_TIMEOUT;
    while running.len() < PODS {
        anyhow::ensure!(
            Instant::now() < deadline,
            "{cni:?}: {} of {PODS} pods Running after {ROUND_TIMEOUT:?}",
            running.len()
        );
        let pods = cluster.get_json(&["pods", "-n", namespace])?;
        let seen = created.elapsed();
        for pod in pods["items"].as_array().into_iter().flatten() {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            if pod["status"]["phase"] == "Running" && !running.contains_key(name) {
                let ip = pod["status"]["podIP"].as_str().unwrap_or_default();
                running.insert(name.to_owned(), (seen, ip.to_owned()));
            }
        }
        std::thread::sleep(POLL);
    }
    let subnet = match cni {
        Cni::Nimbess => "10.244.0.",
        Cni::Bridge => "10.245.0.",
    };
    if let Some((name, (_, ip))) = running.iter().find(|(_, (_, ip))| !ip.starts_with(subnet)) {
        anyhow::bail!("{cni:?} round: pod {name} got {ip}, not an address of {subnet}0/24");
    }
    let mut millis: Vec<f64> = running
        .values()
        .map(|(d, _)| d.as_secs_f64() * 1000.0)
        .collect();
    millis.sort_by(f64::total_cmp);
    Ok((percentile(&millis, 50), percentile(&millis, 99)))
}

/// The `p`th percentile of sorted `values` (nearest rank).
fn percentile(values: &[f64], p: usize) -> f64 {
    let rank = (p * values.len()).div_ceil(100).max(1);
    values[rank.min(values.len()) - 1]
}

/// Deletes the round's namespace and waits until its pods are gone (their CNI DEL done).
fn remove_pods(cluster: &Cluster, namespace: &str) -> anyhow::Result<()> {
    cluster.kubectl(&["delete", "namespace", namespace, "--wait=false"])?;
    wait_for(
        ROUND_TIMEOUT,
        &format!("namespace {namespace} gone"),
        || {
            let out = cluster.kubectl(&["get", "namespaces", "-o", "name"])?;
            Ok(!out.lines().any(|l| l == format!("namespace/{namespace}")))
        },
    )
}

/// Removes the `bridge` conflist, the bridge and host-local's leases.
fn remove_bridge(conflist: &PathBuf) -> anyhow::Result<()> {
    std::fs::remove_file(conflist).with_context(|| format!("removing {}", conflist.display()))?;
    std::thread::sleep(Duration::from_secs(2));
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        let status = Command::new("ip")
            .args(["link", "del", BRIDGE])
            .status()
            .context("running ip link del")?;
        anyhow::ensure!(status.success(), "ip link del {BRIDGE}: {status}");
    }
    let _ = std::fs::remove_dir_all("/run/nephrite-bench-cni");
    Ok(())
}

//! `cargo xtask demo --kubernetes`: the plain demo's path (`nephrite_e2e::demo`) ending on the
//! one-node cluster instead of hand-plugged network namespaces, everything after the topology
//! done through the Kubernetes API as a user would.
//!
//! 1. The plain demo's first steps, unchanged: BMM provisions three clusters, the preparer keeps
//!    them as Sites, ntc deploys the free5GC-like topology (the SMF approved after its UPFs).
//! 2. `cluster up` in the demo's directory, nimbess-agent serving the topology's networks
//!    beside the pods' own.
//! 3. A NetworkAttachmentDefinition per network, kuryr-l7's VIF handler (`--backend nimbess`),
//!    and a Deployment plus Service per NF instance whose pod asks for its interfaces
//!    ([`nf`]); each pod's VIF record says which addresses it got.
//! 4. From the SMF pod's network namespace a ping to a UPF pod's N4 address.
//! 5. An Ingress over the NFs' Services, served by kuryr-l7's controller (`--source kube`) and
//!    router: every NF reached by host and by path, answered by its own pod.
//!
//! The VIF handler, the controller and the router run as host processes with the admin
//! kubeconfig, as the cluster tests run them (README: their manifests would need the images
//! imported and ServiceAccount tokens; the host processes need neither). Ctrl-C and failure
//! clean up as the plain demo does, the cluster included (`cluster down`); after a failure the
//! demo's directory is kept with every log, the cluster's under `logs/cluster/`.

mod nf;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use nephrite_e2e::lab::{Lab, free_addr};
use nephrite_e2e::progress::Progress;
use nephrite_e2e::{bmm, demo, interrupt, router, tko};
use nephrite_test_services::kube_apiserver::{KUBERNETES_VERSION, bin_dir, kube_root};
use serde_json::Value;

use super::config::{NODE_NAME, POD_NETWORK, admin_kubeconfig, agent_socket};
use super::control_plane::kubectl_run;
use crate::kube::NodeBinaries;
use nf::{Nf, NfPod};

/// How long the NF pods may take to be ready with every interface.
const PODS_TIMEOUT: Duration = Duration::from_secs(180);

/// The cluster the demo started, torn down by [`ClusterGuard::down`] (or on drop). It goes
/// before the lab's daemons stop: the VIF handler, still running, releases each pod's VIFs and
/// its finalizer while `down` deletes the pods.
struct ClusterGuard {
    dir: PathBuf,
    node: NodeBinaries,
    down: bool,
}

impl ClusterGuard {
    /// `cluster down`: what it could not remove.
    fn down(&mut self) -> Vec<String> {
        if std::mem::replace(&mut self.down, true) || !self.dir.exists() {
            return Vec::new();
        }
        super::teardown::down(&self.dir, &self.node).warnings
    }

    /// Copy the cluster's logs into `logs` (kept after a failure; `down` removes the cluster's
    /// directory).
    fn keep_logs(&self, logs: &Path) {
        let from = super::process::log_dir(&self.dir);
        let to = logs.join("cluster");
        if std::fs::create_dir_all(&to).is_err() {
            return;
        }
        for entry in std::fs::read_dir(&from).into_iter().flatten().flatten() {
            let _ = std::fs::copy(entry.path(), to.join(entry.file_name()));
        }
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        for warning in self.down() {
            eprintln!("demo: left behind: {warning}");
        }
    }
}

/// What the Kubernetes steps gave, for the summary.
struct OnCluster {
    node_ready_in: Duration,
    networks: usize,
    pods: Vec<NfPod>,
    ping: String,
    routed: (usize, usize),
    router: SocketAddr,
}

/// Runs the demo on the cluster to its summary (and, with `keep`, on until Ctrl-C), then
/// removes everything, the cluster included.
pub fn run(options: demo::Options) -> anyhow::Result<()> {
    anyhow::ensure!(
        nephrite_test_services::running_as_root(),
        "`cargo xtask demo --kubernetes` runs as root: it starts a kubelet, containerd and \
         nimbess-agent as the node's CNI (`cargo xtask demo` runs without root)"
    );
    interrupt::install()?;
    let root = crate::workspace_root();
    let progress = Progress::new();
    let mut lab = Lab::new(nephrite_e2e::bin_dir())?;
    progress.println(&format!(
        "Nephrite demo on Kubernetes {KUBERNETES_VERSION}: state and logs in {}",
        lab.dir().display()
    ));
    let mut cluster = ClusterGuard {
        dir: lab.dir().join("cluster"),
        node: NodeBinaries::under(&bin_dir(&kube_root())),
        down: false,
    };
    let demo::Options { keep, build } = options;
    let result = (|| -> anyhow::Result<_> {
        if let Some(command) = build {
            demo::run_build(&lab, &progress, command)?;
        }
        let preparer = tko::store(&mut lab, &progress)?;
        let provisioned = bmm::provision(&mut lab, &progress, preparer)?;
        let deployed = tko::deploy(&mut lab, &progress, &root, preparer)?;
        let on_cluster = on_cluster(&mut lab, &progress, &cluster.dir, &deployed)?;
        Ok((provisioned, deployed, on_cluster))
    })();
    let result = match result {
        Err(err) if interrupt::interrupted() && !err.is::<interrupt::Interrupted>() => {
            // A Ctrl-C reaches the builds `cluster up` runs too; theirs is not the failure.
            Err(anyhow::Error::new(interrupt::Interrupted))
        }
        other => other,
    };
    match result {
        Ok((provisioned, deployed, on_cluster)) => {
            print_summary(&provisioned, &deployed, &on_cluster);
            if keep {
                println!();
                println!(
                    "Everything keeps running until Ctrl-C. Try:\n  export KUBECONFIG={}\n  \
                     {} get deployments,pods,services,ingresses -n {}\n  \
                     curl -H 'Host: mgmt.free5gc.demo' http://{}/{}/\n  logs: {}/logs",
                    admin_kubeconfig(&cluster.dir).display(),
                    cluster.node.kubectl.display(),
                    nf::NAMESPACE,
                    on_cluster.router,
                    on_cluster
                        .pods
                        .first()
                        .map_or("smf-regional", |p| p.nf.as_str()),
                    lab.dir().display(),
                );
                while !interrupt::interrupted() {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            let mut left = cluster.down();
            left.extend(lab.cleanup());
            lab.finish(false);
            demo::report_leftovers(left)
        }
        Err(err) if err.is::<interrupt::Interrupted>() => {
            let mut left = cluster.down();
            left.extend(lab.cleanup());
            lab.finish(false);
            println!("demo: interrupted; everything it started is stopped and removed");
            demo::report_leftovers(left)?;
            bail!("interrupted")
        }
        Err(err) => {
            cluster.keep_logs(&lab.dir().join("logs"));
            let mut left = cluster.down();
            left.extend(lab.cleanup());
            let kept = lab.finish(true);
            demo::report_leftovers(left)?;
            match kept {
                Some(dir) => bail!("{err:#}\nthe demo's logs are in {}/logs", dir.display()),
                None => Err(err),
            }
        }
    }
}

/// Steps 2–5 on the cluster in `dir`.
fn on_cluster(
    lab: &mut Lab,
    progress: &Progress,
    dir: &Path,
    deployed: &tko::Deployed,
) -> anyhow::Result<OnCluster> {
    let nfs: Vec<Nf> = deployed.children.iter().map(Nf::of).collect();
    let networks = nf::networks(&nfs);

    let step = progress.step("Kubernetes: one-node cluster");
    step.message("cargo xtask cluster up (its output below)");
    let up = super::up::up(dir, &networks).context("cluster up")?;
    interrupt::check()?;
    let node = NodeBinaries::under(&bin_dir(&kube_root()));
    let admin = admin_kubeconfig(dir);
    let kubectl = |args: &[&str], input: Option<&str>| kubectl_run(&node, &admin, args, input);
    step.done(&format!(
        "node {NODE_NAME} Ready in {:.1}s; nimbess-agent serves {POD_NETWORK} and {} NF networks",
        up.started_in.as_secs_f64(),
        networks.len()
    ));

    let step = progress.step("Kubernetes: NF networks");
    kubectl(
        &["apply", "-f", "-"],
        Some(&nf::attachment_crd().to_string()),
    )?;
    kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "crd/network-attachment-definitions.k8s.cni.cncf.io",
            "--timeout=60s",
        ],
        None,
    )?;
    kubectl(
        &["apply", "-f", "-"],
        Some(&nf::attachments(&networks).to_string()),
    )?;
    let conf = lab.write(
        "kuryr/kuryr.conf",
        "[kubernetes]\nenabled_vif_drivers = npwg_multiple_interfaces\n",
    )?;
    let admin_text = admin.display().to_string();
    lab.spawn_with_env(
        "kuryr-l7-vif-handler",
        "kuryr-l7",
        &[
            "vif-handler",
            "--source",
            "kube",
            "--backend",
            "nimbess",
            "--config-file",
            &conf.display().to_string(),
            "--agent-socket",
            &agent_socket(dir).display().to_string(),
            "--pod-network",
            POD_NETWORK,
            "--node-name",
            NODE_NAME,
        ],
        &[("KUBECONFIG", &admin_text)],
    )?;
    step.done(&format!(
        "{} NetworkAttachmentDefinitions in {}: {}; kuryr-l7 vif-handler on the node",
        networks.len(),
        nf::NAMESPACE,
        networks
            .iter()
            .map(|n| format!("{} {}", n.name, n.subnet))
            .collect::<Vec<_>>()
            .join(", ")
    ));

    let step = progress.step("Kubernetes: a Deployment per NF");
    for nf in &nfs {
        kubectl(&["apply", "-f", "-"], Some(&nf::workload(nf).to_string()))?;
    }
    let pods = interrupt::wait_for(
        "every NF pod ready with its interfaces",
        PODS_TIMEOUT,
        || {
            lab.check_daemons()?;
            let list: Value = serde_json::from_str(&kubectl(
                &["get", "pods", "-n", nf::NAMESPACE, "-o", "json"],
                None,
            )?)?;
            let pods = nf::ready_pods(&list, &nfs)?;
            let ready = pods.as_ref().map_or(0, Vec::len);
            step.message(&format!("{ready}/{} ready", nfs.len()));
            Ok(pods)
        },
    )?;
    let interfaces: usize = pods.iter().map(|p| p.interfaces.len()).sum();
    step.done(&format!(
        "{} pods Ready, {interfaces} interfaces: {}",
        pods.len(),
        pods.iter()
            .map(|p| format!(
                "{} ({})",
                p.pod,
                p.interfaces
                    .iter()
                    .map(|i| format!("{} {}", i.ifname, i.address))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    ));

    let step = progress.step("Kubernetes: SMF pings a UPF over N4");
    let ping = ping_smf_to_upf(lab, dir, &pods)?;
    step.done(&ping);

    let step = progress.step("kuryr-l7: Ingress on the cluster");
    let names: Vec<&str> = nfs.iter().map(|nf| nf.name.as_str()).collect();
    kubectl(
        &["apply", "-f", "-"],
        Some(&router::ingress(names.iter().copied())),
    )?;
    let rules = free_addr()?;
    lab.spawn_with_env(
        "kuryr-l7-controller",
        "kuryr-l7",
        &[
            "controller",
            "--source",
            "kube",
            "--driver",
            "embedded",
            "--lease-namespace",
            "default",
            "--listen",
            &rules.to_string(),
        ],
        &[("KUBECONFIG", &admin_text)],
    )?;
    lab.wait_listening("kuryr-l7 controller", rules)?;
    let router_addr = free_addr()?;
    lab.spawn(
        "kuryr-l7-router",
        "kuryr-l7",
        &[
            "router",
            "--listen",
            &router_addr.to_string(),
            "--rules",
            &lab.url(rules),
        ],
    )?;
    router::wait_serving_host(
        lab,
        router_addr,
        names.first().copied(),
        Duration::from_secs(60),
    )?;
    step.done(&format!(
        "Ingress nf-management over {} Services; rules on {rules}, HTTP on {router_addr}",
        names.len()
    ));

    let step = progress.step("kuryr-l7: HTTP through the router");
    let routed = router::call_each(
        router_addr,
        names.iter().copied(),
        |name, body| body.starts_with(&format!("{name}-")),
        |news| step.message(news),
    )?;
    step.done(&format!(
        "{}/{} answered 200 by the NF's own pod",
        routed.0, routed.1
    ));
    Ok(OnCluster {
        node_ready_in: up.started_in,
        networks: networks.len(),
        pods,
        ping,
        routed,
        router: router_addr,
    })
}

/// Pings the first UPF's N4 address from the SMF pod's network namespace; the statistics.
fn ping_smf_to_upf(lab: &Lab, dir: &Path, pods: &[NfPod]) -> anyhow::Result<String> {
    let ping = nephrite_test_services::program("ping", "iputils-ping")
        .map_err(|missing| anyhow::anyhow!("{missing}"))?;
    let smf = pods
        .iter()
        .find(|p| p.nf.starts_with("smf-"))
        .context("no SMF pod")?;
    let upf = pods
        .iter()
        .find(|p| p.nf.starts_with("upf-"))
        .context("no UPF pod")?;
    let n4 = upf
        .interfaces
        .iter()
        .find(|i| i.ifname == "n4")
        .context("the UPF pod has no n4 interface")?;
    let address = n4.address.split('/').next().unwrap_or(&n4.address);
    let netns = nf::netns_of(dir, &smf.container)?;
    let enter = format!("--net={}", netns.display());
    let stats = nephrite_e2e::pods::ping_stats(lab, &["nsenter", &enter], &ping, address)?;
    Ok(format!("{} → {} ({address}): {stats}", smf.pod, upf.pod))
}

fn print_summary(provisioned: &bmm::Provisioned, deployed: &tko::Deployed, on_cluster: &OnCluster) {
    println!();
    println!("Summary");
    demo::print_topology_summary(provisioned, deployed);
    println!(
        "  Kubernetes                node {NODE_NAME} Ready in {:.1}s ({KUBERNETES_VERSION}, Nimbess CNI)",
        on_cluster.node_ready_in.as_secs_f64()
    );
    let interfaces: usize = on_cluster.pods.iter().map(|p| p.interfaces.len()).sum();
    println!(
        "  NF Deployments            {}/{} ready, {interfaces} interfaces on {} Nimbess networks",
        on_cluster.pods.len(),
        deployed.children.len(),
        on_cluster.networks + 1
    );
    println!("  ping                      {}", on_cluster.ping);
    println!(
        "  HTTP through the router   {}/{} 200",
        on_cluster.routed.0, on_cluster.routed.1
    );
}

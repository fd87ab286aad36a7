//! Steps 2–3: `bmm-sim` plays NVIDIA Bare Metal Manager, and `bmm-provider apply -f
//! --register-sites` provisions the demo's three workload clusters on it (VPC, subnet, one
//! bare-metal instance each), in parallel, their instances' states shown live, and registers
//! each Ready cluster as a preparer Site with its labels.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::interrupt;
use crate::lab::{Lab, free_addr};
use crate::progress::Progress;

/// A workload cluster of the demo: its name becomes a preparer Site, its labels the Site's
/// metadata that the NFTopology's cluster selectors match.
pub struct Cluster {
    /// The cluster's (and site's) name.
    pub name: &'static str,
    /// `nephio.org/site-type`.
    pub site_type: &'static str,
    /// `nephio.org/region`.
    pub region: &'static str,
    /// The second octet of its node subnet, `10.<octet>.0.0/24`.
    octet: u8,
}

/// Two edge clusters in two regions and one regional cluster: the free5GC example's UPFs land
/// one per edge, its SMF and AMF on the regional one.
pub const CLUSTERS: &[Cluster] = &[
    Cluster {
        name: "regional",
        site_type: "regional",
        region: "us-west",
        octet: 201,
    },
    Cluster {
        name: "edge01",
        site_type: "edge",
        region: "us-west",
        octet: 202,
    },
    Cluster {
        name: "edge02",
        site_type: "edge",
        region: "us-east",
        octet: 203,
    },
];

/// bmm-sim's instance type (see `bmm-sim --help`).
const INSTANCE_TYPE: &str = "7e1e0000-0000-4000-8000-000000000002";

/// What provisioning gave.
pub struct Provisioned {
    /// Clusters whose status says ready.
    pub clusters_ready: usize,
    /// Machines whose status says ready.
    pub machines_ready: usize,
    /// The simulator's address.
    pub sim: SocketAddr,
}

fn cluster_yaml(cluster: &Cluster) -> String {
    let Cluster {
        name,
        site_type,
        region,
        octet,
    } = cluster;
    format!(
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: NvidiaBMMCluster
metadata:
  name: {name}
  namespace: default
  labels: {{nephio.org/site-type: {site_type}, nephio.org/region: {region}}}
spec:
  siteRef: {{name: sim-site}}
  vpc: {{name: {name}-vpc, networkVirtualizationType: ETHERNET_VIRTUALIZER}}
  subnets:
    - {{name: nodes, cidr: 10.{octet}.0.0/24, role: control-plane}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: NvidiaBMMMachine
metadata:
  name: {name}-node-0
  namespace: default
  labels: {{cluster.x-k8s.io/cluster-name: {name}, cluster.x-k8s.io/control-plane: \"\"}}
spec:
  instanceType: {{id: {INSTANCE_TYPE}}}
  network: {{subnetName: nodes}}
"
    )
}

/// Starts the simulator and provisions [`CLUSTERS`].
pub fn provision(
    lab: &mut Lab,
    progress: &Progress,
    preparer: SocketAddr,
) -> anyhow::Result<Provisioned> {
    let step = progress.step("BMM: simulator");
    let sim = free_addr()?;
    let secret = sim_secret();
    let listen = sim.to_string();
    lab.spawn(
        "bmm-sim",
        "bmm-sim",
        &[
            "--listen",
            &listen,
            "--jwt-secret",
            &secret,
            "--provision-delay",
            "3s",
            "--network-delay",
            "500ms",
        ],
    )?;
    lab.wait_listening("bmm-sim", sim)?;
    // Not through `Lab::run`, which logs the command and what it printed: the secret goes in
    // the environment (not the command line) and the token straight into its file.
    let minted = Command::new(lab.binary("bmm-sim"))
        .args(["token", "--org", "demo", "--ttl", "2h"])
        .env("BMM_SIM_JWT_SECRET", &secret)
        .stdin(Stdio::null())
        .output()
        .context("running bmm-sim token")?;
    if !minted.status.success() {
        bail!(
            "bmm-sim token exited with {}: {}",
            minted.status,
            String::from_utf8_lossy(&minted.stderr).trim()
        );
    }
    let token_file = lab.write("bmm/token", String::from_utf8_lossy(&minted.stdout).trim())?;
    step.done(&format!("http://{sim}, org demo"));

    let step = progress.step("BMM: provision 3 clusters, register them as sites");
    let (news, updates) = mpsc::channel::<String>();
    let mut children = Vec::new();
    for cluster in CLUSTERS {
        let file = lab.write(
            &format!("bmm/{}.yaml", cluster.name),
            &cluster_yaml(cluster),
        )?;
        let state = lab.dir().join(format!("bmm/{}-state.json", cluster.name));
        let mut child = Command::new(lab.binary("bmm-provider"))
            .arg("apply")
            .arg("-f")
            .arg(&file)
            .args(["--endpoint", &format!("http://{sim}"), "--org", "demo"])
            .arg("--token-file")
            .arg(&token_file)
            .arg("--state")
            .arg(&state)
            .args(["--poll-interval", "300ms"])
            .env("RUST_LOG", lab.log_level())
            // Each Ready cluster becomes a preparer Site with its labels (region, site type).
            .args(["--register-sites", &lab.url(preparer)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .context("starting bmm-provider apply")?;
        let stderr = child.stderr.take().context("bmm-provider's stderr")?;
        let news = news.clone();
        let name = cluster.name;
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = news.send(format!("{name}: {line}"));
            }
        });
        children.push((cluster.name, child, state));
    }
    drop(news);
    let mut log = String::new();
    loop {
        if let Err(err) = interrupt::check() {
            for (_, child, _) in &mut children {
                let _ = child.kill();
                let _ = child.wait();
            }
            return Err(err);
        }
        while let Ok(line) = updates.try_recv() {
            step.message(&line);
            log.push_str(&line);
            log.push('\n');
        }
        if children
            .iter_mut()
            .all(|(_, child, _)| child.try_wait().ok().flatten().is_some())
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::write(lab.log("bmm-provider-apply"), &log)?;
    let mut clusters_ready = 0;
    let mut machines_ready = 0;
    for (name, child, state) in &mut children {
        let status = child.wait()?;
        if !status.success() {
            bail!(
                "bmm-provider apply for cluster {name} exited with {status}; its output: {}",
                lab.log("bmm-provider-apply").display()
            );
        }
        let state = state.display().to_string();
        let json = lab.run(
            "bmm-provider",
            "bmm-provider",
            &["status", "--state", &state, "-o", "json"],
            None,
            &[],
        )?;
        let (c, m) = ready_counts(&json)?;
        clusters_ready += c;
        machines_ready += m;
    }
    step.done(&format!(
        "clusters Ready {clusters_ready}/{}, instances Ready {machines_ready}, each a preparer \
         Site with its labels (site-type, region)",
        CLUSTERS.len()
    ));
    Ok(Provisioned {
        clusters_ready,
        machines_ready,
        sim,
    })
}

/// The signing secret the demo's bmm-sim gets (`--jwt-secret`).
pub fn sim_secret() -> String {
    format!("demo-secret-{}-nephrite", std::process::id())
}

/// Ready clusters and ready machines in `bmm-provider status -o json`.
fn ready_counts(json: &str) -> anyhow::Result<(usize, usize)> {
    let state: serde_json::Value =
        serde_json::from_str(json).context("reading bmm-provider status -o json")?;
    let ready = |key: &str| {
        state[key].as_array().map_or(0, |items| {
            items
                .iter()
                .filter(|item| item["status"]["ready"] == serde_json::Value::Bool(true))
                .count()
        })
    };
    Ok((ready("clusters"), ready("machines")))
}

//! Step 6: `nimbess-agent` gives every NF instance a pod with one interface per network it is
//! attached to, plugged by `nimbess-cni` as a container runtime would; as root the kernel data
//! plane carries a real ping from the SMF to a UPF, otherwise the sim driver takes the ports.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::bmm::CLUSTERS;
use crate::lab::{Lab, Plugged};
use crate::progress::Progress;
use crate::tko::Child;

/// A pod of an NF instance.
pub struct Pod {
    /// The deployed instance, `<instance>-<site>`.
    pub deployed: String,
    /// Its interfaces: (name, network, address with prefix length).
    pub interfaces: Vec<(String, String, String)>,
    /// Its network namespace's name (as root).
    pub netns: Option<String>,
}

/// What the pods step gave.
pub struct Pods {
    /// `kernel` or `sim`.
    pub driver: &'static str,
    /// Every pod.
    pub pods: Vec<Pod>,
    /// The SMF → UPF ping's statistics line, or why there was none.
    pub ping: Result<String, String>,
}

/// The NF instance of a child: UPFs by their site's region (`upf-west`, `upf-east`).
pub fn instance(child: &Child) -> String {
    if child.nf_type != "upf" {
        return child.nf_type.clone();
    }
    let region = CLUSTERS
        .iter()
        .find(|c| c.name == child.site)
        .map_or("west", |c| c.region.trim_start_matches("us-"));
    format!("upf-{region}")
}

/// Starts the agent and plugs a pod per child.
pub fn plug(
    lab: &mut Lab,
    progress: &Progress,
    children: &[Child],
    root: bool,
) -> anyhow::Result<Pods> {
    let driver = if root { "kernel" } else { "sim" };
    let step = progress.step("nimbess: CNI agent");
    let networks: BTreeSet<&str> = children
        .iter()
        .flat_map(|child| child.interfaces.iter().map(|(_, network)| network.as_str()))
        .collect();
    let mut config = format!("driver: {driver}\nnetworks:\n");
    for (i, network) in networks.iter().enumerate() {
        config.push_str(&format!(
            "  - {{name: {network}, subnet: 10.{}.0.0/24}}\n",
            60 + i
        ));
    }
    let config = lab.write("nimbess/agent.yaml", &config)?;
    let socket = lab.dir().join("nimbess/agent.sock");
    lab.snapshot_links();
    lab.spawn(
        "nimbess-agent",
        "nimbess-agent",
        &[
            "serve",
            "--config",
            &config.display().to_string(),
            "--socket",
            &socket.display().to_string(),
            "--state-dir",
            &lab.dir().join("nimbess/state").display().to_string(),
            // Stopped, the agent removes its bridges, veths and tables from the host (the
            // kernel driver; the sim driver has none).
            "--teardown-on-exit",
        ],
    )?;
    crate::interrupt::wait_for("the agent's socket", Duration::from_secs(30), || {
        lab.check_daemons()?;
        Ok(socket.exists().then_some(()))
    })?;
    step.done(&format!(
        "{driver} driver{}, {} networks",
        if root {
            ""
        } else {
            " (not root: no kernel data plane, so no ping)"
        },
        networks.len()
    ));

    let step = progress.step("nimbess: a pod per NF instance");
    let mut pods = Vec::new();
    for (index, child) in children.iter().enumerate() {
        let instance = instance(child);
        let deployed = format!("{instance}-{}", child.site);
        if child.interfaces.is_empty() {
            bail!("child {} ({instance}) asks for no interfaces", child.id);
        }
        let (netns_name, netns) = if root {
            let name = format!("nephrite-demo-{}-{index}", std::process::id());
            let path = lab.add_netns(&name)?;
            (Some(name), path)
        } else {
            // The sim driver plugs nothing into a namespace; the path only names the pod.
            (
                None,
                PathBuf::from(format!("/var/run/netns/demo-{deployed}")),
            )
        };
        let mut plugged = Vec::new();
        for (ifname, network) in &child.interfaces {
            step.message(&format!("{deployed}: {ifname} on {network}"));
            let conf = format!(
                "{{\"cniVersion\":\"1.0.0\",\"name\":\"{network}\",\"type\":\"nimbess-cni\",\
                 \"agentSocket\":\"{}\"}}",
                socket.display()
            );
            let container = format!("demo-{deployed}");
            let netns_arg = netns.display().to_string();
            let result = lab.run(
                "nimbess-cni",
                "nimbess-cni",
                &[],
                Some(&conf),
                &[
                    ("CNI_COMMAND", "ADD"),
                    ("CNI_CONTAINERID", &container),
                    ("CNI_NETNS", &netns_arg),
                    ("CNI_IFNAME", ifname),
                    ("CNI_PATH", "/nonexistent"),
                ],
            )?;
            lab.plugged(Plugged {
                config: conf,
                container,
                netns: netns.clone(),
                ifname: ifname.clone(),
            });
            plugged.push((ifname.clone(), network.clone(), first_address(&result)?));
        }
        pods.push(Pod {
            deployed,
            interfaces: plugged,
            netns: netns_name,
        });
    }
    let interfaces: usize = pods.iter().map(|p| p.interfaces.len()).sum();
    step.done(&format!("{} pods, {interfaces} interfaces", pods.len()));

    let ping = match (
        root,
        nephrite_test_services::program("ping", "iputils-ping"),
    ) {
        (true, Ok(ping)) => {
            let step = progress.step("nimbess: SMF pings a UPF over N4");
            let stats = ping_smf_to_upf(lab, &pods, &ping)?;
            step.done(&stats);
            Ok(stats)
        }
        (true, Err(missing)) => Err(format!("skipped: {missing}")),
        (false, _) => Err("skipped: not root, no kernel data plane".to_owned()),
    };
    Ok(Pods { driver, pods, ping })
}

/// The first address of a CNI result, e.g. `10.63.0.2/24`.
fn first_address(result: &str) -> anyhow::Result<String> {
    let result: Value = serde_json::from_str(result).context("reading the CNI result")?;
    result["ips"][0]["address"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no address in the CNI result {result}"))
}

/// Pings the first UPF's N4 address from the SMF's namespace; the statistics line.
fn ping_smf_to_upf(lab: &Lab, pods: &[Pod], ping: &std::path::Path) -> anyhow::Result<String> {
    let smf = pods
        .iter()
        .find(|p| p.deployed.starts_with("smf-"))
        .context("no SMF pod")?;
    let upf = pods
        .iter()
        .find(|p| p.deployed.starts_with("upf-"))
        .context("no UPF pod")?;
    let address = upf
        .interfaces
        .iter()
        .find(|(ifname, _, _)| ifname == "n4")
        .map(|(_, _, address)| address.split('/').next().unwrap_or(address))
        .context("the UPF has no n4 interface")?;
    let netns = smf.netns.as_deref().context("the SMF has no namespace")?;
    let stats = ping_stats(lab, &["ip", "netns", "exec", netns], ping, address)?;
    Ok(format!(
        "{} → {} ({address}): {stats}",
        smf.deployed, upf.deployed
    ))
}

/// Runs `ping` three times at `address` inside a network namespace (`enter`: the command that
/// enters it, e.g. `ip netns exec NAME` or `nsenter --net=PATH`); ping's statistics line.
pub fn ping_stats(
    lab: &Lab,
    enter: &[&str],
    ping: &std::path::Path,
    address: &str,
) -> anyhow::Result<String> {
    let (program, prefix) = enter
        .split_first()
        .context("no command to enter the namespace")?;
    let ping = ping.display().to_string();
    let mut args: Vec<&str> = prefix.to_vec();
    args.extend([ping.as_str(), "-c", "3", "-i", "0.2", "-W", "2", address]);
    let out = lab.run_path("ping", std::path::Path::new(program), &args, None, &[])?;
    out.lines()
        .find(|line| line.contains("packets transmitted"))
        .map(str::to_owned)
        .context("ping printed no statistics")
}

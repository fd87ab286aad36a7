//! `kuryr-l7 vif-handler --backend nimbess` end to end, as a node runs it (`--node-name`: a
//! pod of another node is left alone): a Nimbess agent on
//! the kernel data plane (in this process, on a Unix socket), the built handler against
//! `test-apiserver`, and `nimbess-cni`'s ADD and DEL (its library entry point, what the binary
//! runs) plugging a pod's network namespace.
//!
//! A pod asking for two NPWG networks gets `eth0`, `eth1` and `eth2`, each with an address on
//! its network and exactly the MAC its record names (the agent's reservation), and pings a peer
//! on each; the handler killed (SIGKILL) as soon as the agent
//! holds one of the pod's VIFs and restarted leaves exactly the recorded VIFs; DEL unplugs
//! every interface, deleting the pod releases every VIF and address. Needs root (namespaces,
//! links): skipped loudly otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use events::event_note;
use k8s_openapi::api::core::v1::Pod as KubePod;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use nephrite_kuryr_l7::vif::kube::attachment_resource;
use nephrite_runtime::{DaemonIdentity, Endpoint, GrpcServer};
use nephrite_test_apiserver::TestApiServer;
use nephrite_vif::{FailureKind, VIF_ANNOTATION, VifRecord};
use nimbess_agent::agent::Agent;
use nimbess_agent::config::AgentConfig;
use nimbess_agent::driver::Driver;
use nimbess_agent::driver::kernel::{KernelDriver, firewall::NftFirewall};
use nimbess_agent::state::StateStore;
use nimbess_client::VifClient;
use serde_json::{Value, json};

const TEST: &str = "a_pod_with_two_nimbess_networks_gets_three_interfaces_and_releases_them";
const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");

#[test]
fn a_pod_with_two_nimbess_networks_gets_three_interfaces_and_releases_them() -> anyhow::Result<()> {
    if let Err(e) = nephrite_test_services::require_root(
        "the pod's network namespace, veths and bridges of the Nimbess kernel data plane",
    ) {
        e.skip(TEST);
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let names = Names::new();
    let result = runtime.block_on(scenario(&names));
    names.clean_up();
    result
}

/// Unique network and namespace names for this process, removed at the end.
struct Names {
    pods: String,
    net_a: String,
    net_b: String,
    pod_ns: String,
    peer_ns: String,
    bad_ns: String,
}

impl Names {
    fn new() -> Self {
        let n = std::process::id() % 100_000;
        Names {
            pods: format!("vp{n}"),
            net_a: format!("va{n}"),
            net_b: format!("vb{n}"),
            pod_ns: format!("vifpod{n}"),
            peer_ns: format!("vifpeer{n}"),
            bad_ns: format!("vifbad{n}"),
        }
    }

    fn networks(&self) -> [&str; 3] {
        [&self.pods, &self.net_a, &self.net_b].map(String::as_str)
    }

    fn clean_up(&self) {
        for ns in [&self.pod_ns, &self.peer_ns, &self.bad_ns] {
            quiet(Command::new("ip").args(["netns", "del", ns]));
        }
        for net in self.networks() {
            quiet(Command::new("ip").args([
                "link",
                "del",
                &nimbess_agent::naming::bridge_name(net),
            ]));
            quiet(Command::new("ip").args([
                "link",
                "del",
                &nimbess_agent::naming::miss_sink_name(net),
            ]));
        }
    }
}

fn quiet(command: &mut Command) {
    let _ = command.stdout(Stdio::null()).stderr(Stdio::null()).status();
}

fn netns_add(name: &str) -> anyhow::Result<String> {
    quiet(Command::new("ip").args(["netns", "del", name]));
    let ok = Command::new("ip").args(["netns", "add", name]).status()?;
    ensure!(ok.success(), "ip netns add {name}");
    Ok(format!("/run/netns/{name}"))
}

struct Handler(Child);

impl Drop for Handler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn handler(
    kubeconfig: &Path,
    conf: &Path,
    socket: &Path,
    pod_network: &str,
) -> anyhow::Result<Handler> {
    Ok(Handler(
        Command::new(BIN)
            .args(["vif-handler", "--source", "kube", "--backend", "nimbess"])
            .arg("--config-file")
            .arg(conf)
            .arg("--agent-socket")
            .arg(socket)
            .args(["--pod-network", pod_network])
            .args(["--node-name", "node-1"])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn")
            .spawn()?,
    ))
}

async fn wait_for<T, F>(what: &str, mut check: impl FnMut() -> F) -> anyhow::Result<T>
where
    F: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("{what}: not within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One nimbess-cni invocation through the plugin's library entry point.
async fn cni(
    command: &str,
    container: &str,
    netns: &str,
    ifname: &str,
    args: &str,
    conf: &Value,
) -> (i32, Value) {
    let env: BTreeMap<String, String> = [
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", container),
        ("CNI_NETNS", netns),
        ("CNI_IFNAME", ifname),
        ("CNI_ARGS", args),
        ("CNI_PATH", "/opt/cni/bin"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let outcome = nimbess_cni::run(&env, conf.to_string().as_bytes()).await;
    (outcome.exit_code, outcome.stdout.unwrap_or(Value::Null))
}

fn ip_of(cidr: &str) -> anyhow::Result<Ipv4Addr> {
    Ok(cidr.split('/').next().context("address")?.parse()?)
}

/// The IPv4 addresses of `ifname` inside `netns`.
fn addresses_in(netns: &str, ifname: &str) -> anyhow::Result<Vec<String>> {
    let out = Command::new("ip")
        .args(["-n", netns, "-4", "-o", "addr", "show", "dev", ifname])
        .output()?;
    ensure!(
        out.status.success(),
        "{ifname} in {netns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words
                .iter()
                .position(|w| *w == "inet")
                .and_then(|i| words.get(i + 1))
                .map(|s| (*s).to_owned())
        })
        .collect())
}

/// The MAC of `ifname` inside `netns`, as the kernel reports it (`ip -j link show`).
fn mac_in(netns: &str, ifname: &str) -> anyhow::Result<String> {
    let out = Command::new("ip")
        .args(["-n", netns, "-j", "link", "show", "dev", ifname])
        .output()?;
    ensure!(
        out.status.success(),
        "{ifname} in {netns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let links: Value = serde_json::from_slice(&out.stdout)?;
    Ok(links[0]["address"]
        .as_str()
        .context("the link's address")?
        .to_ascii_lowercase())
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Echo requests from inside `netns` to `dst` until one is answered (at most `tries`):
/// whether one was.
fn ping(netns: &str, dst: Ipv4Addr, tries: u16) -> bool {
    let path = netns.to_owned();
    std::thread::spawn(move || {
        let Ok(file) = std::fs::File::open(&path) else {
            return false;
        };
        if nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).is_err() {
            return false;
        }
        let Ok(sock) = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::RAW,
            Some(socket2::Protocol::ICMPV4),
        ) else {
            return false;
        };
        if sock
            .set_read_timeout(Some(Duration::from_millis(200)))
            .is_err()
            || sock.connect(&SocketAddrV4::new(dst, 0).into()).is_err()
        {
            return false;
        }
        let id = (std::process::id() & 0xffff) as u16;
        for seq in 0..tries {
            let mut packet = vec![8u8, 0, 0, 0];
            packet.extend_from_slice(&id.to_be_bytes());
            packet.extend_from_slice(&seq.to_be_bytes());
            packet.extend_from_slice(b"kuryr-vif-nimbess");
            let sum = checksum(&packet);
            packet[2..4].copy_from_slice(&sum.to_be_bytes());
            if sock.send(&packet).is_err() {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            let deadline = Instant::now() + Duration::from_millis(500);
            while Instant::now() < deadline {
                let mut got = [0u8; 1500];
                let Ok(n) = std::io::Read::read(&mut &sock, &mut got) else {
                    break;
                };
                let ihl = usize::from(got[0] & 0x0f) * 4;
                if n >= ihl + 8
                    && got[ihl] == 0
                    && got[ihl + 4..ihl + 6] == id.to_be_bytes()
                    && got[ihl + 6..ihl + 8] == seq.to_be_bytes()
                {
                    return true;
                }
            }
        }
        false
    })
    .join()
    .unwrap_or(false)
}

fn nad_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "network-attachment-definitions.k8s.cni.cncf.io"},
        "spec": {
            "group": "k8s.cni.cncf.io", "scope": "Namespaced",
            "names": {"plural": "network-attachment-definitions",
                      "singular": "network-attachment-definition",
                      "kind": "NetworkAttachmentDefinition"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"config": {"type": "string"}}}}}}}],
        },
    })
}

fn record_of(pod: &KubePod) -> anyhow::Result<Option<VifRecord>> {
    Ok(pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VIF_ANNOTATION))
        .map(|v| VifRecord::parse(v))
        .transpose()?)
}

async fn scenario(names: &Names) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // The agent, on the kernel data plane, serving its socket.
    let config_path = dir.path().join("agent.yaml");
    std::fs::write(
        &config_path,
        format!(
            "networks:\n  - name: {}\n    subnet: 10.243.1.0/24\n  - name: {}\n    subnet: 10.243.2.0/24\n  - name: {}\n    subnet: 10.243.3.0/24\n",
            names.pods, names.net_a, names.net_b
        ),
    )?;
    let config = AgentConfig::load(&config_path)?;
    let agent = Arc::new(
        Agent::start(
            StateStore::open(&dir.path().join("state"))?,
            &config.networks,
            Driver::Kernel(KernelDriver::new(NftFirewall::new())?),
        )
        .await?,
    );
    let socket = dir.path().join("agent.sock");
    let server = nimbess_agent::grpc::add_services(
        GrpcServer::new(DaemonIdentity::new("nimbess-agent", "test")).handle_signals(false),
        Arc::clone(&agent),
    )
    .bind(&Endpoint::unix(&socket))
    .await?;
    let stop = server.shutdown_handle();
    let serving = tokio::spawn(server.run());
    let vifs = VifClient::new(&socket);

    // The cluster: the NAD CRD, two NADs whose config names a Nimbess network, the pod.
    let api = TestApiServer::start().await?;
    let client = api.client()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig())?;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    crds.create(&PostParams::default(), &serde_json::from_value(nad_crd())?)
        .await?;
    let nads: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &attachment_resource());
    for (nad, network) in [("net-a", &names.net_a), ("net-b", &names.net_b)] {
        let config = json!({"cniVersion": "1.1.0", "name": network, "type": "nimbess-cni"});
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": nad}, "spec": {"config": config.to_string()},
        }))?;
        nads.create(&PostParams::default(), &object).await?;
    }
    let pods: Api<KubePod> = Api::namespaced(client, "default");
    let pod: KubePod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "multi", "annotations": {"k8s.v1.cni.cncf.io/networks": "net-a, net-b"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app"}]},
    }))?;
    let uid = pods
        .create(&PostParams::default(), &pod)
        .await?
        .metadata
        .uid
        .context("uid")?;
    // The same request on another node: that node's handler and agent serve it, not these.
    let elsewhere: KubePod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "elsewhere", "annotations": {"k8s.v1.cni.cncf.io/networks": "net-a"}},
        "spec": {"nodeName": "node-2", "containers": [{"name": "app", "image": "app"}]},
    }))?;
    let elsewhere_uid = pods
        .create(&PostParams::default(), &elsewhere)
        .await?
        .metadata
        .uid
        .context("uid")?;

    // The runtime's ADD comes first and waits for the handler's record.
    let pod_netns = netns_add(&names.pod_ns)?;
    let main_conf = json!({
        "cniVersion": "1.1.0", "name": names.pods, "type": "nimbess-cni",
        "agentSocket": socket, "kubeconfig": kubeconfig, "vifTimeout": 90,
    });
    let pod_args = format!("K8S_POD_NAMESPACE=default;K8S_POD_NAME=multi;K8S_POD_UID={uid}");
    let add = {
        let (netns, args, conf) = (pod_netns.clone(), pod_args.clone(), main_conf.clone());
        tokio::spawn(async move { cni("ADD", "c-multi", &netns, "eth0", &args, &conf).await })
    };

    // The handler, killed as soon as the agent holds one of the pod's VIFs, then restarted.
    let conf = dir.path().join("kuryr.conf");
    std::fs::write(
        &conf,
        "[kubernetes]\nenabled_vif_drivers = npwg_multiple_interfaces\n",
    )?;
    let first = handler(&kubeconfig, &conf, &socket, &names.pods)?;
    wait_for("a first VIF in the agent", || async {
        Ok((!vifs.list(Some(&uid)).await?.is_empty()).then_some(()))
    })
    .await?;
    drop(first);
    let second = handler(&kubeconfig, &conf, &socket, &names.pods)?;
    let record = wait_for("the pod's record with three VIFs", || async {
        Ok(record_of(&pods.get("multi").await?)?.filter(|r| r.vifs.len() == 3 && r.all_active()))
    })
    .await?;
    let other = pods.get("elsewhere").await?;
    ensure!(
        record_of(&other)?.is_none()
            && other.metadata.finalizers.unwrap_or_default().is_empty()
            && vifs.list(Some(&elsewhere_uid)).await?.is_empty(),
        "the pod on node-2 is left to node-2's handler: no record, no finalizer, nothing held"
    );
    let held = vifs.list(Some(&uid)).await?;
    let held_keys: BTreeSet<&str> = held.iter().map(|v| v.entry.vif.key.as_str()).collect();
    let recorded_keys: BTreeSet<&str> = record.vifs.iter().map(|v| v.key.as_str()).collect();
    ensure!(
        held_keys == recorded_keys,
        "the agent holds exactly the recorded VIFs: {held_keys:?} vs {recorded_keys:?}"
    );
    for vif in &record.vifs {
        let agent_view = held
            .iter()
            .find(|v| v.entry.vif.key == vif.key)
            .context("held")?;
        ensure!(
            !vif.mac.is_empty()
                && Some(vif.mac.clone()) == agent_view.entry.mac.map(|m| m.to_string()),
            "{}: the record carries the MAC the agent reserved: {} vs {:?}",
            vif.ifname,
            vif.mac,
            agent_view.entry.mac
        );
        ensure!(
            vif.addresses == [agent_view.entry.address.to_string()]
                && vif.network == agent_view.entry.network,
            "{}: recorded {:?} on {}, the agent holds {} on {}",
            vif.ifname,
            vif.addresses,
            vif.network,
            agent_view.entry.address,
            agent_view.entry.network
        );
    }

    // The ADD's result: every interface in the pod's sandbox with an address on its network.
    let (code, result) = add.await?;
    ensure!(code == 0, "ADD: {result}");
    let interfaces: Vec<(&str, &str)> = result["interfaces"]
        .as_array()
        .context("interfaces")?
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap_or(""),
                i["sandbox"].as_str().unwrap_or(""),
            )
        })
        .collect();
    ensure!(
        interfaces
            == [
                ("eth0", pod_netns.as_str()),
                ("eth1", pod_netns.as_str()),
                ("eth2", pod_netns.as_str())
            ],
        "{result}"
    );
    let expected = [
        ("eth0", &names.pods, "10.243.1."),
        ("eth1", &names.net_a, "10.243.2."),
        ("eth2", &names.net_b, "10.243.3."),
    ];
    let mut pod_addresses = Vec::new();
    for (i, (ifname, network, prefix)) in expected.iter().enumerate() {
        let ip = result["ips"]
            .as_array()
            .context("ips")?
            .iter()
            .find(|ip| ip["interface"] == json!(i))
            .and_then(|ip| ip["address"].as_str())
            .context("an address per interface")?;
        ensure!(ip.starts_with(prefix), "{ifname}: {ip}");
        ensure!(
            record
                .vif(ifname)
                .is_some_and(|v| v.network == **network && v.addresses == [ip]),
            "{ifname} as recorded: {ip}"
        );
        ensure!(
            addresses_in(&names.pod_ns, ifname)? == [ip],
            "{ifname} carries {ip} in the pod"
        );
        // The interface carries exactly the MAC the record names (the one the agent reserved
        // before the pod was plugged), and the ADD's result says so too.
        let recorded_mac = record
            .vif(ifname)
            .map(|v| v.mac.to_ascii_lowercase())
            .context("recorded")?;
        let real_mac = mac_in(&names.pod_ns, ifname)?;
        ensure!(
            real_mac == recorded_mac,
            "{ifname} in the pod has MAC {real_mac}, the record names {recorded_mac}"
        );
        let result_mac = result["interfaces"][i]["mac"].as_str().unwrap_or("");
        ensure!(
            result_mac.eq_ignore_ascii_case(&recorded_mac),
            "{ifname}: the ADD's result names MAC {result_mac:?}, the record {recorded_mac}"
        );
        pod_addresses.push(ip.to_owned());
    }

    // A peer on each network answers the pod on that network.
    let peer_netns = netns_add(&names.peer_ns)?;
    for (ifname, network) in [
        ("eth0", &names.pods),
        ("eth1", &names.net_a),
        ("eth2", &names.net_b),
    ] {
        let conf = json!({"cniVersion": "1.1.0", "name": network, "type": "nimbess-cni", "agentSocket": socket});
        let (code, peer) = cni("ADD", "c-peer", &peer_netns, ifname, "", &conf).await;
        ensure!(code == 0, "peer ADD on {network}: {peer}");
        let peer_ip = ip_of(peer["ips"][0]["address"].as_str().context("peer address")?)?;
        let netns = pod_netns.clone();
        ensure!(
            tokio::task::spawn_blocking(move || ping(&netns, peer_ip, 20)).await?,
            "the pod pings its peer {peer_ip} on {network}"
        );
    }

    // A VIF the pod no longer asks for, left by a handler that died before recording (made
    // here through the agent): the next pass over the pod releases it, the others stay.
    let leftover = nimbess_client::vif::VifRef {
        pod_uid: uid.clone(),
        key: "network/default/gone/0".into(),
    };
    vifs.allocate(&nimbess_client::vif::VifClaim {
        vif: leftover.clone(),
        network: names.net_b.clone(),
        pod_namespace: "default".into(),
        pod_name: "multi".into(),
    })
    .await?;
    let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
    pods.patch(
        "multi",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&touch),
    )
    .await?;
    wait_for("the leftover VIF released", || async {
        Ok(vifs.get(&leftover).await?.is_none().then_some(()))
    })
    .await?;
    let kept: BTreeSet<String> = vifs
        .list(Some(&uid))
        .await?
        .into_iter()
        .map(|v| v.entry.vif.key)
        .collect();
    ensure!(
        kept.iter().map(String::as_str).collect::<BTreeSet<_>>() == recorded_keys,
        "the recorded VIFs stay: {kept:?}"
    );

    // A pod whose networks annotation is not valid: 7 naming it, nothing plugged.
    let broken: KubePod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "broken", "annotations": {"k8s.v1.cni.cncf.io/networks": "[{\"name\": "}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app"}]},
    }))?;
    pods.create(&PostParams::default(), &broken).await?;
    let bad_netns = netns_add(&names.bad_ns)?;
    let (code, error) = cni(
        "ADD",
        "c-broken",
        &bad_netns,
        "eth0",
        "K8S_POD_NAMESPACE=default;K8S_POD_NAME=broken",
        &main_conf,
    )
    .await;
    ensure!(
        code == 1
            && error["code"] == 7
            && error["msg"]
                .as_str()
                .is_some_and(|m| m.contains("k8s.v1.cni.cncf.io/networks")),
        "{error}"
    );
    ensure!(
        agent
            .ports()
            .await
            .iter()
            .all(|p| p.container_id != "c-broken"),
        "nothing plugged for the broken pod"
    );
    pods.delete("broken", &DeleteParams::default()).await?;
    an_unknown_network_is_named_by_the_handler_and_the_add(
        &api.client()?,
        &vifs,
        &agent,
        &bad_netns,
        &main_conf,
    )
    .await
    .context("a NetworkAttachmentDefinition naming a network the agent does not serve")?;

    // DEL unplugs every interface; the reservations stay until the pod goes.
    let (code, out) = cni("DEL", "c-multi", &pod_netns, "eth0", &pod_args, &main_conf).await;
    ensure!(code == 0, "DEL: {out}");
    ensure!(
        agent
            .ports()
            .await
            .iter()
            .all(|p| p.container_id != "c-multi"),
        "no port of the pod after DEL"
    );
    ensure!(
        vifs.list(Some(&uid)).await?.len() == 3,
        "the VIFs stay reserved until the pod goes"
    );

    // Deleting the pod: the handler releases every VIF and its address.
    pods.delete("multi", &DeleteParams::default()).await?;
    wait_for("the pod gone", || async {
        Ok(pods.get_opt("multi").await?.is_none().then_some(()))
    })
    .await?;
    ensure!(
        vifs.list(Some(&uid)).await?.is_empty(),
        "no VIF left for the pod"
    );
    for network in agent.networks().await {
        ensure!(
            network.addresses_held == 1,
            "{}: only the peer's address is held, {} are",
            network.spec.name,
            network.addresses_held
        );
    }
    // Each address the pod had is the lowest free one again: a new VIF gets it.
    for ((_, network, _), ip) in expected.iter().zip(&pod_addresses) {
        let claim = nimbess_client::vif::VifClaim {
            vif: nimbess_client::vif::VifRef {
                pod_uid: "next".into(),
                key: (*network).clone(),
            },
            network: (*network).clone(),
            pod_namespace: "default".into(),
            pod_name: "next".into(),
        };
        let next = vifs.allocate(&claim).await?;
        ensure!(
            next.entry.address.to_string() == *ip,
            "{network}: {} after {ip}",
            next.entry.address
        );
        ensure!(vifs.release(&claim.vif).await?, "released");
    }
    drop(second);
    a_failing_interface_unplugs_the_others(
        &pods,
        &vifs,
        &agent,
        &bad_netns,
        &main_conf,
        &names.net_a,
    )
    .await
    .context("an additional VIF on an unknown network")?;

    stop.trigger();
    let _ = serving.await;
    api.shutdown().await?;
    Ok(())
}

#[path = "support/events.rs"]
mod events;
#[path = "vif_nimbess/refusals.rs"]
mod refusals;
use refusals::{
    a_failing_interface_unplugs_the_others, an_unknown_network_is_named_by_the_handler_and_the_add,
};

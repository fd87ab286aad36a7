//! The NF instances as a user puts them on the cluster: one Deployment per child deployment
//! ntc made (one `nephrite/echo` pod each, standing in for the NF), its interfaces asked for on
//! Nimbess networks with `k8s.v1.cni.cncf.io/networks` (a NetworkAttachmentDefinition per
//! network, naming it in a nimbess-cni configuration), a ClusterIP Service in front of it; and
//! what came of it, read back from the API: each pod's VIF record (`openstack.org/kuryr-vif`,
//! written by kuryr-l7's VIF handler) with its interfaces and addresses.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nephrite_e2e::tko::Child;
use serde_json::{Value, json};

use crate::cluster::config::echo_image;
use crate::cluster::network::Network;

/// The namespace of the NFs' Deployments, Services, attachments and Ingress (the plain demo's).
pub const NAMESPACE: &str = nephrite_e2e::router::NAMESPACE;

/// The annotation asking for a pod's additional networks (Multus' convention).
const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";

/// The annotation in which the VIF handler records a pod's VIFs.
const VIF_ANNOTATION: &str = "openstack.org/kuryr-vif";

/// The port the echo server listens on in the pods (its default).
const ECHO_PORT: u16 = 8080;

/// An NF instance on the cluster: the Deployment's name (`<instance>-<site>`, e.g.
/// `upf-west-edge01`) and the interfaces its child deployment asked for (name, network).
#[derive(Debug, Clone)]
pub struct Nf {
    /// The Deployment's (and Service's) name.
    pub name: String,
    /// `upf`, `smf` or `amf`.
    pub nf_type: String,
    /// Its interfaces beside `eth0`: (interface name, Nimbess network).
    pub interfaces: Vec<(String, String)>,
}

impl Nf {
    /// The NF of a child deployment.
    pub fn of(child: &Child) -> Nf {
        Nf {
            name: format!("{}-{}", nephrite_e2e::pods::instance(child), child.site),
            nf_type: child.nf_type.clone(),
            interfaces: child.interfaces.clone(),
        }
    }
}

/// The Nimbess networks the NFs are attached to, each with a subnet of its own
/// (`10.60.0.0/24`, `10.61.0.0/24`, … in name order, as the plain demo numbers them).
pub fn networks(nfs: &[Nf]) -> Vec<Network> {
    let names: BTreeSet<&str> = nfs
        .iter()
        .flat_map(|nf| nf.interfaces.iter().map(|(_, network)| network.as_str()))
        .collect();
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| Network {
            name: name.to_owned(),
            subnet: format!("10.{}.0.0/24", 60 + i),
        })
        .collect()
}

/// The NetworkAttachmentDefinition CRD (the Network Plumbing Working Group's, with the one
/// field the VIF handler reads).
pub fn attachment_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "network-attachment-definitions.k8s.cni.cncf.io"},
        "spec": {
            "group": "k8s.cni.cncf.io",
            "scope": "Namespaced",
            "names": {
                "plural": "network-attachment-definitions",
                "singular": "network-attachment-definition",
                "kind": "NetworkAttachmentDefinition",
                "shortNames": ["net-attach-def"],
            },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"config": {"type": "string"}}},
                }}},
            }],
        },
    })
}

/// The namespace and one NetworkAttachmentDefinition per network, named after it.
pub fn attachments(networks: &[Network]) -> Value {
    let mut items = vec![json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE},
    })];
    for network in networks {
        let config = json!({"cniVersion": "1.0.0", "name": network.name, "type": "nimbess-cni"});
        items.push(json!({
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": network.name, "namespace": NAMESPACE},
            "spec": {"config": config.to_string()},
        }));
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// `nf`'s Deployment (one echo pod asking for its interfaces by network and name) and the
/// ClusterIP Service in front of it (port 80, named `http`, as the Ingress names it).
pub fn workload(nf: &Nf) -> Value {
    let labels = json!({"app": nf.name, "nf": nf.nf_type});
    let networks = nf
        .interfaces
        .iter()
        .map(|(ifname, network)| format!("{network}@{ifname}"))
        .collect::<Vec<_>>()
        .join(", ");
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": nf.name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": nf.name}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {NETWORKS_ANNOTATION: networks},
                },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": nf.nf_type,
                        "image": echo_image(),
                        "imagePullPolicy": "Never",
                        "ports": [{"name": "http", "containerPort": ECHO_PORT, "protocol": "TCP"}],
                        "env": [{
                            "name": "POD_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                        }],
                        "readinessProbe": {
                            "httpGet": {"path": "/ready", "port": "http"},
                            "periodSeconds": 1,
                        },
                    }],
                },
            },
        },
    });
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": nf.name, "namespace": NAMESPACE},
        "spec": {
            "selector": {"app": nf.name},
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http"}],
        },
    });
    json!({"apiVersion": "v1", "kind": "List", "items": [deployment, service]})
}

/// One interface of a running pod, from its VIF record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// `eth0`, `n4`, …
    pub ifname: String,
    /// The Nimbess network.
    pub network: String,
    /// Its address with prefix length.
    pub address: String,
}

/// A running, ready NF pod.
#[derive(Debug, Clone)]
pub struct NfPod {
    /// The NF (Deployment) it belongs to.
    pub nf: String,
    /// The pod's name.
    pub pod: String,
    /// Every interface, `eth0` first.
    pub interfaces: Vec<Interface>,
    /// Its container's id in containerd (`containerd://` stripped).
    pub container: String,
}

/// The ready pods of `nfs` in `kubectl get pods -o json`'s answer, once each NF has exactly one
/// ready pod whose VIF record holds every interface it asked for with an address; `None` while
/// one is missing. A recorded interface on another network than asked is an error.
pub fn ready_pods(list: &Value, nfs: &[Nf]) -> anyhow::Result<Option<Vec<NfPod>>> {
    let mut found = Vec::new();
    for nf in nfs {
        let ready: Vec<&Value> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|pod| pod["metadata"]["labels"]["app"] == nf.name.as_str())
            .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
            .filter(|pod| {
                pod["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
            .collect();
        let [pod] = ready.as_slice() else {
            return Ok(None);
        };
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let Some(record) = pod["metadata"]["annotations"][VIF_ANNOTATION].as_str() else {
            return Ok(None);
        };
        let interfaces = recorded_interfaces(record)
            .with_context(|| format!("pod {NAMESPACE}/{name}'s {VIF_ANNOTATION}"))?;
        for (ifname, network) in &nf.interfaces {
            match interfaces.iter().find(|i| &i.ifname == ifname) {
                None => return Ok(None),
                Some(i) if &i.network != network => bail!(
                    "pod {NAMESPACE}/{name}: {ifname} is on network {}, {} asked for {network}",
                    i.network,
                    nf.name
                ),
                Some(_) => {}
            }
        }
        let Some(container) = pod["status"]["containerStatuses"][0]["containerID"]
            .as_str()
            .and_then(|id| id.strip_prefix("containerd://"))
        else {
            return Ok(None);
        };
        found.push(NfPod {
            nf: nf.name.clone(),
            pod: name.to_owned(),
            interfaces,
            container: container.to_owned(),
        });
    }
    Ok(Some(found))
}

/// The interfaces of a VIF record (`{"vifs": [{"ifname", "network", "addresses"}, …]}`), `eth0`
/// first; a VIF without an address is not there yet.
pub fn recorded_interfaces(record: &str) -> anyhow::Result<Vec<Interface>> {
    let record: Value = serde_json::from_str(record).context("not JSON")?;
    let vifs = record["vifs"].as_array().context("no `vifs` list")?;
    let mut interfaces: Vec<Interface> = vifs
        .iter()
        .filter_map(|vif| {
            Some(Interface {
                ifname: vif["ifname"].as_str()?.to_owned(),
                network: vif["network"].as_str()?.to_owned(),
                address: vif["addresses"][0].as_str()?.to_owned(),
            })
        })
        .collect();
    interfaces.sort_by_key(|i| (i.ifname != "eth0", i.ifname.clone()));
    Ok(interfaces)
}

/// The pid of task `id` in `ctr tasks ls`'s table (`TASK PID STATUS`).
pub fn task_pid(table: &str, id: &str) -> Option<u32> {
    table.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some(id))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

/// The network namespace of the container `id` of the cluster in `dir`: its task's
/// `/proc/<pid>/ns/net`.
pub fn netns_of(dir: &Path, id: &str) -> anyhow::Result<PathBuf> {
    let output = crate::cluster::runtime::ctr(dir)
        .args(["tasks", "ls"])
        .output()
        .context("running ctr tasks ls")?;
    let table = String::from_utf8_lossy(&output.stdout);
    let pid = task_pid(&table, id)
        .with_context(|| format!("ctr tasks ls lists no task {id}: {table}"))?;
    Ok(PathBuf::from(format!("/proc/{pid}/ns/net")))
}

#[cfg(test)]
mod tests {
    use nephrite_e2e::tko::Child;
    use serde_json::json;

    use super::{Nf, networks, ready_pods, recorded_interfaces, task_pid, workload};

    fn upf() -> Nf {
        Nf::of(&Child {
            id: "d1".to_owned(),
            nf_type: "upf".to_owned(),
            site: "edge01".to_owned(),
            prepared: true,
            approved: true,
            interfaces: vec![
                ("n3".to_owned(), "n3-west".to_owned()),
                ("n4".to_owned(), "n4".to_owned()),
            ],
        })
    }

    #[test]
    fn an_nf_asks_for_its_interfaces_by_network_and_name() {
        let nf = upf();
        assert_eq!(nf.name, "upf-west-edge01");
        let list = workload(&nf);
        let deployment = &list["items"][0];
        assert_eq!(
            deployment["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"],
            "n3-west@n3, n4@n4"
        );
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["imagePullPolicy"], "Never");
        assert_eq!(list["items"][1]["spec"]["ports"][0]["name"], "http");
        assert_eq!(
            list["items"][1]["spec"]["selector"]["app"],
            "upf-west-edge01"
        );
    }

    #[test]
    fn each_network_gets_its_own_subnet_in_name_order() {
        let nets = networks(&[upf()]);
        let pairs: Vec<(&str, &str)> = nets
            .iter()
            .map(|n| (n.name.as_str(), n.subnet.as_str()))
            .collect();
        assert_eq!(pairs, [("n3-west", "10.60.0.0/24"), ("n4", "10.61.0.0/24")]);
    }

    fn pod(record: &str, ready: bool) -> serde_json::Value {
        json!({"items": [{
            "metadata": {"name": "upf-west-edge01-7d-x", "labels": {"app": "upf-west-edge01"},
                         "annotations": {"openstack.org/kuryr-vif": record}},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                       "containerStatuses": [{"containerID": "containerd://abc"}]},
        }]})
    }

    #[test]
    fn a_pod_counts_once_ready_with_every_interface_recorded() {
        let full = r#"{"version":1,"vifs":[
            {"ifname":"n4","network":"n4","addresses":["10.61.0.2/24"]},
            {"ifname":"eth0","network":"cluster-pods","addresses":["10.244.0.5/24"]},
            {"ifname":"n3","network":"n3-west","addresses":["10.60.0.2/24"]}]}"#;
        let pods = ready_pods(&pod(full, true), &[upf()]).unwrap().unwrap();
        assert_eq!(pods[0].container, "abc");
        let names: Vec<&str> = pods[0]
            .interfaces
            .iter()
            .map(|i| i.ifname.as_str())
            .collect();
        assert_eq!(names, ["eth0", "n3", "n4"]);
        assert!(ready_pods(&pod(full, false), &[upf()]).unwrap().is_none());
        let partial =
            r#"{"vifs":[{"ifname":"n3","network":"n3-west","addresses":["10.60.0.2/24"]}]}"#;
        assert!(ready_pods(&pod(partial, true), &[upf()]).unwrap().is_none());
        let wrong = r#"{"vifs":[{"ifname":"n3","network":"n4","addresses":["10.61.0.2/24"]},
            {"ifname":"n4","network":"n4","addresses":["10.61.0.3/24"]}]}"#;
        let err = ready_pods(&pod(wrong, true), &[upf()]).unwrap_err();
        assert!(
            format!("{err:#}").contains("n3 is on network n4"),
            "{err:#}"
        );
        assert!(recorded_interfaces("nope").is_err());
    }

    #[test]
    fn a_task_pid_is_read_from_ctrs_table() {
        let table = "TASK    PID     STATUS\nabc     1234    RUNNING\n";
        assert_eq!(task_pid(table, "abc"), Some(1234));
        assert_eq!(task_pid(table, "ab"), None);
    }
}

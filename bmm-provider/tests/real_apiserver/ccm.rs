//! `bmm-provider ccm` as `deploy/ccm/cloud-controller-manager.yaml` deploys it, with only the
//! `kube-system/bmm-cloud-controller-manager` token and its credentials Secret: a Node
//! registered by a kubelet with `--cloud-provider=external` is initialized from its instance.

use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, PostParams};
use nephrite_bmm::decide::ZONE_LABEL;
use nephrite_bmm::decide::cloud_node::UNINITIALIZED_TAINT;
use serde_json::json;

use super::daemon::Daemon;
use super::setup::{DeployedAs, NODES, apply_secrets, server, substituted};
use crate::support::{Harness, ORG, fast_config, ready_instance, token};

/// The manifest, as checked in.
const MANIFEST: &str = include_str!("../../deploy/ccm/cloud-controller-manager.yaml");
/// The Node (and instance) name; Nodes are cluster-scoped, so it names the scenario.
const NODE: &str = "bmm-ccm-w-0";
/// The longest wait for the controller.
const LIMIT: Duration = Duration::from_secs(60);

/// The taint keys of `node`.
fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| t.key.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ccm_with_its_token_initializes_a_node_from_its_instance() -> anyhow::Result<()> {
    let Some(kube) = server("ccm_with_its_token_initializes_a_node_from_its_instance") else {
        return Ok(());
    };
    let _nodes_are_ours = NODES.lock().await;
    let endpoint = kube.endpoint();
    let admin = endpoint.client()?;
    let sim = Harness::start(fast_config()).await;
    let instance = ready_instance(&sim.client(), NODE, "10.40.0.0").await;

    let source = "deploy/ccm/cloud-controller-manager.yaml";
    let ccm = endpoint
        .apply_access(source, MANIFEST, "kube-system/bmm-cloud-controller-manager")
        .await?;
    let token = token();
    let manifest = substituted(
        source,
        MANIFEST,
        &[
            ("BMM_ENDPOINT", sim.url.as_str()),
            ("BMM_ORG", ORG),
            ("BMM_TOKEN", token.expose()),
            ("BMM_ZONES", "sim-site=sim-zone-a"),
        ],
    )?;
    apply_secrets(&admin, source, &manifest).await?;

    // What the kubelet registers: the taint, its host name, no provider ID.
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
        "spec": {"taints": [{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "Hostname", "address": NODE}]},
    }))?;
    let nodes: Api<Node> = Api::all(admin.clone());
    nodes
        .create(&PostParams::default(), &node)
        .await
        .context("registering the Node")?;

    let deployed = DeployedAs::from_manifest(source, &manifest)?
        .flag("--listen", "127.0.0.1:0")
        .flag("--metrics-listen", "127.0.0.1:0")
        .env("BMM_NODE_PENDING_POLL", "200ms");
    let mut daemon = Daemon::start("ccm", &deployed, &ccm.kubeconfig)?;
    let initialized = daemon
        .until("the Node initialized (taint gone)", LIMIT, || async {
            Ok(Some(nodes.get(NODE).await?)
                .filter(|n| !taint_keys(n).iter().any(|k| k == UNINITIALIZED_TAINT)))
        })
        .await?;
    drop(daemon);

    let provider_id = initialized
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.clone());
    ensure!(
        provider_id
            == Some(format!(
                "nvidia-bmm://{}/{}",
                sim.sim.site_id(),
                instance.id
            )),
        "providerID {provider_id:?}"
    );
    let zone = initialized
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ZONE_LABEL).cloned());
    ensure!(zone.as_deref() == Some("sim-zone-a"), "zone {zone:?}");
    let addresses: Vec<(String, String)> = initialized
        .status
        .and_then(|s| s.addresses)
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    let internal = instance.interfaces[0].ip_addresses[0].clone();
    ensure!(
        addresses
            == [
                ("InternalIP".into(), internal),
                ("Hostname".into(), NODE.into())
            ],
        "addresses {addresses:?}"
    );
    nodes.delete(NODE, &DeleteParams::default()).await?;
    sim.assert_contract_held();
    Ok(())
}

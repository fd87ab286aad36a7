//! `bmm-provider machine-api` as `deploy/openshift/machine-api-provider.yaml` deploys it,
//! with only the `openshift-machine-api/bmm-machine-api` token: a MachineSet scaled 3 → 1.
//! The test plays the Machine API's MachineSet controller (one Machine per replica, owned by
//! the set, the newest deleted first) and each host's kubelet and CCM (a Node with the
//! instance's provider ID), as `tests/machine_api_controller.rs` does on the in-memory server.

use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ObjectMeta, PostParams,
};
use nephrite_bmm::machine_api::{MACHINE_FINALIZER, NODE_MACHINE_ANNOTATION};
use nephrite_bmm_provider::client::BmmClient;
use nephrite_bmm_provider::client::types::{
    IpBlockCreateRequest, SubnetCreateRequest, VpcCreateRequest,
};
use nephrite_bmm_provider::controller::machine_resource;
use nephrite_bmm_sim::Kind;
use serde_json::{Value, json};

use super::daemon::Daemon;
use super::setup::{
    DeployedAs, NODES, apply_crds, apply_secrets, machine_api_crds, namespace, server, substituted,
};
use crate::support::{Harness, ORG, fast_config, token};

/// The manifest, as checked in.
const MANIFEST: &str = include_str!("../../deploy/openshift/machine-api-provider.yaml");
/// The namespace the manifest's Role grants.
const NS: &str = "openshift-machine-api";
/// The MachineSet's name (and its Machines' prefix).
const SET: &str = "workers";
/// The label that ties a Machine to its set.
const SET_LABEL: &str = "machine.openshift.io/cluster-api-machineset";
/// The longest wait for the controller.
const LIMIT: Duration = Duration::from_secs(60);

/// A VPC with one subnet in the simulator; the providerSpec of Machines in it.
async fn provider_spec(client: &BmmClient) -> anyhow::Result<Value> {
    let tenant = client.current_tenant().await?.id;
    let site = client
        .site_named("sim-site")
        .await?
        .context("the simulator has sim-site")?
        .id;
    let block = client
        .create_ip_block(&IpBlockCreateRequest {
            name: "ocp-block".into(),
            site_id: site.clone(),
            routing_type: "Datacenter Only".into(),
            prefix: "10.50.0.0".into(),
            prefix_length: 23,
            protocol_version: "IPv4".into(),
        })
        .await?;
    let vpc = client
        .create_vpc(&VpcCreateRequest {
            id: None,
            name: "ocp-vpc".into(),
            site_id: site.clone(),
            network_virtualization_type: None,
            labels: None,
        })
        .await?;
    let subnet = client
        .create_subnet(&SubnetCreateRequest {
            name: "ocp-workers".into(),
            vpc_id: vpc.id.clone(),
            ipv4_block_id: block.id,
            prefix_length: 24,
        })
        .await?;
    let instance_type = client
        .instance_types(&site)
        .await?
        .first()
        .context("the simulator has an instance type")?
        .id
        .clone();
    Ok(json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "NvidiaBMMMachineProviderSpec",
        "siteId": site, "tenantId": tenant, "vpcId": vpc.id, "subnetId": subnet.id,
        "instanceTypeId": instance_type,
        "userDataSecret": {"name": "worker-user-data"},
        "credentialsSecret": {"name": "bmm-credentials", "namespace": NS},
    }))
}

fn machine_sets(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet");
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(&gvk, "machinesets"),
    )
}

/// What the MachineSet controller does for `replicas`: Machines `workers-0..replicas`, owned
/// by the set; those above deleted, the newest first.
async fn scale(
    machines: &Api<DynamicObject>,
    set: &DynamicObject,
    replicas: usize,
) -> anyhow::Result<()> {
    let spec = &set.data["spec"]["template"]["spec"];
    for i in 0..replicas {
        let name = format!("{SET}-{i}");
        if machines.get_opt(&name).await?.is_none() {
            let machine: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                "metadata": {"name": name, "namespace": NS, "labels": {SET_LABEL: SET},
                    "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1",
                        "kind": "MachineSet", "name": SET, "uid": set.metadata.uid,
                        "controller": true}]},
                "spec": spec,
            }))?;
            machines
                .create(&PostParams::default(), &machine)
                .await
                .with_context(|| format!("creating Machine {name}"))?;
        }
    }
    for i in (replicas..3).rev() {
        let name = format!("{SET}-{i}");
        if machines.get_opt(&name).await?.is_some() {
            machines.delete(&name, &DeleteParams::default()).await?;
        }
    }
    Ok(())
}

/// Waits until Machine `name`'s instance is Ready (`Provisioned`), registers its Node as the
/// host's kubelet and CCM would, and waits until the Machine is `Running`, linked to it.
async fn running(
    daemon: &mut Daemon,
    machines: &Api<DynamicObject>,
    nodes: &Api<Node>,
    name: &str,
) -> anyhow::Result<DynamicObject> {
    let provisioned = daemon
        .until(&format!("Machine {name} Provisioned"), LIMIT, || async {
            Ok(Some(machines.get(name).await?).filter(|m| {
                m.data.pointer("/status/providerStatus/instanceState") == Some(&json!("Ready"))
            }))
        })
        .await?;
    ensure!(
        provisioned.data["status"]["phase"] == "Provisioned",
        "{name}: {}",
        provisioned.data["status"]
    );
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("bmm-ocp-{name}")},
        "spec": {"providerID": provisioned.data["spec"]["providerID"]},
    }))?;
    let node = nodes
        .create(&PostParams::default(), &node)
        .await
        .context("registering the Node")?;
    let machine = daemon
        .until(&format!("Machine {name} Running"), LIMIT, || async {
            Ok(Some(machines.get(name).await?)
                .filter(|m| m.data.pointer("/status/phase") == Some(&json!("Running"))))
        })
        .await?;
    ensure!(
        machine.data["status"]["nodeRef"]
            == json!({"kind": "Node", "name": node.name_any(), "uid": node.metadata.uid}),
        "{name}: nodeRef {}",
        machine.data["status"]["nodeRef"]
    );
    let node = nodes.get(&node.name_any()).await?;
    let owner = node.annotations().get(NODE_MACHINE_ANNOTATION).cloned();
    ensure!(
        owner == Some(format!("{NS}/{name}")),
        "the Node's {NODE_MACHINE_ANNOTATION}: {owner:?}"
    );
    Ok(machine)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_api_with_its_token_scales_a_machine_set_from_three_to_one() -> anyhow::Result<()> {
    let Some(kube) = server("machine_api_with_its_token_scales_a_machine_set_from_three_to_one")
    else {
        return Ok(());
    };
    let _nodes_are_ours = NODES.lock().await;
    let endpoint = kube.endpoint();
    let admin = endpoint.client()?;
    let sim = Harness::start(fast_config()).await;
    apply_crds(&admin, &machine_api_crds()?).await?;
    // OpenShift has the namespace; the manifest installs into it.
    namespace(&admin, NS).await?;

    let source = "deploy/openshift/machine-api-provider.yaml";
    let provider = endpoint
        .apply_access(source, MANIFEST, "openshift-machine-api/bmm-machine-api")
        .await?;
    let token = token();
    let manifest = substituted(
        source,
        MANIFEST,
        &[
            ("BMM_ENDPOINT", sim.url.as_str()),
            ("BMM_ORG", ORG),
            ("BMM_TOKEN", token.expose()),
        ],
    )?;
    apply_secrets(&admin, source, &manifest).await?;
    let user_data = Secret {
        metadata: ObjectMeta {
            name: Some("worker-user-data".into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some([("userData".to_string(), ByteString(b"#ignition\n".to_vec()))].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &user_data)
        .await
        .context("creating the user data Secret")?;

    let spec = provider_spec(&sim.client()).await?;
    let set: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": SET, "namespace": NS},
        "spec": {"replicas": 3, "selector": {"matchLabels": {SET_LABEL: SET}},
                 "template": {"metadata": {"labels": {SET_LABEL: SET}},
                              "spec": {"providerSpec": {"value": spec}}}},
    }))?;
    let set = machine_sets(&admin)
        .create(&PostParams::default(), &set)
        .await
        .context("creating the MachineSet")?;

    let deployed = DeployedAs::from_manifest(source, &manifest)?
        .flag("--listen", "127.0.0.1:0")
        .flag("--poll-interval", "100ms");
    let mut daemon = Daemon::start("machine-api", &deployed, &provider.kubeconfig)?;
    let machines: Api<DynamicObject> = Api::namespaced_with(admin.clone(), NS, &machine_resource());
    let nodes: Api<Node> = Api::all(admin.clone());
    scale(&machines, &set, 3).await?;
    let site = spec["siteId"].as_str().context("siteId")?;
    for i in 0..3 {
        let name = format!("{SET}-{i}");
        let machine = running(&mut daemon, &machines, &nodes, &name).await?;
        let instance = machine.data["status"]["providerStatus"]["instanceId"]
            .as_str()
            .context("status.providerStatus.instanceId")?;
        ensure!(
            machine.data["spec"]["providerID"] == json!(format!("nvidia-bmm://{site}/{instance}")),
            "{name}: providerID {}",
            machine.data["spec"]["providerID"]
        );
        ensure!(
            machine.finalizers().iter().any(|f| f == MACHINE_FINALIZER),
            "{name}: finalizers {:?}",
            machine.finalizers()
        );
    }
    ensure!(sim.sim.created(Kind::Instance) == 3);

    scale(&machines, &set, 1).await?;
    for name in [format!("{SET}-2"), format!("{SET}-1")] {
        daemon
            .until(&format!("Machine {name} gone"), LIMIT, || async {
                Ok(machines.get_opt(&name).await?.is_none().then_some(()))
            })
            .await?;
    }
    ensure!(
        sim.sim.live(Kind::Instance) == 1,
        "instances left: {}",
        sim.sim.live(Kind::Instance)
    );
    ensure!(machines.get_opt(&format!("{SET}-0")).await?.is_some());

    // Scaled to nothing: the last instance goes too, then the set and the Nodes.
    scale(&machines, &set, 0).await?;
    daemon
        .until(&format!("Machine {SET}-0 gone"), LIMIT, || async {
            Ok(machines
                .get_opt(&format!("{SET}-0"))
                .await?
                .is_none()
                .then_some(()))
        })
        .await?;
    drop(daemon);
    ensure!(sim.sim.live(Kind::Instance) == 0, "an instance leaked");
    machine_sets(&admin)
        .delete(SET, &DeleteParams::default())
        .await?;
    for i in 0..3 {
        nodes
            .delete(&format!("bmm-ocp-{SET}-{i}"), &DeleteParams::default())
            .await?;
    }
    sim.assert_contract_held();
    Ok(())
}

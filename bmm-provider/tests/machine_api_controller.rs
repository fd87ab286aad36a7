//! `bmm-provider machine-api` against the in-memory API server (with the Machine API's
//! Machine and MachineSet CRDs from `tests/fixtures/machine-api-crds.yaml`) and bmm-sim. The
//! test plays the MachineSet controller's part (one Machine per replica, owned by the
//! MachineSet); the provider runs the Machine controller.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use nephrite_bmm::machine_api::{
    INSTANCE_STATE_ANNOTATION, MACHINE_FINALIZER, NODE_MACHINE_ANNOTATION,
};
use nephrite_bmm_provider::client::BmmClient;
use nephrite_bmm_provider::client::types::*;
use nephrite_bmm_provider::controller::{machine_resource, run_machine_api_controller};
use nephrite_bmm_sim::Kind;
use serde::Deserialize;
use serde_json::{Value, json};
use support::capi::{Env, NS, gone, secret};
use support::{eventually, fast_config};

async fn install_machine_api_crds(client: &kube::Client) {
    let text = include_str!("fixtures/machine-api-crds.yaml");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for doc in serde_norway::Deserializer::from_str(text) {
        let crd: CustomResourceDefinition =
            CustomResourceDefinition::deserialize(doc).expect("CRD fixture");
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create CRD");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// A VPC with one subnet; the providerSpec for Machines in it.
async fn provider_spec(client: &BmmClient) -> Value {
    let tenant = client.current_tenant().await.expect("tenant").id;
    let site = client
        .site_named("sim-site")
        .await
        .expect("sites")
        .expect("site")
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
        .await
        .expect("ip block");
    let vpc = client
        .create_vpc(&VpcCreateRequest {
            id: None,
            name: "ocp-vpc".into(),
            site_id: site.clone(),
            network_virtualization_type: None,
            labels: None,
        })
        .await
        .expect("vpc");
    let subnet = client
        .create_subnet(&SubnetCreateRequest {
            name: "ocp-workers".into(),
            vpc_id: vpc.id.clone(),
            ipv4_block_id: block.id,
            prefix_length: 24,
        })
        .await
        .expect("subnet");
    let instance_type = client.instance_types(&site).await.expect("types")[0]
        .id
        .clone();
    json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "NvidiaBMMMachineProviderSpec",
        "siteId": site, "tenantId": tenant, "vpcId": vpc.id, "subnetId": subnet.id,
        "instanceTypeId": instance_type,
        "userDataSecret": {"name": "worker-user-data"},
        "credentialsSecret": {"name": "bmm-credentials", "namespace": NS},
    })
}

fn machines(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &machine_resource())
}

fn machine_sets(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet"),
        "machinesets",
    );
    Api::namespaced_with(client.clone(), NS, &resource)
}

fn machine(name: &str, spec: &Value, owner: Option<&DynamicObject>) -> DynamicObject {
    let mut metadata = json!({"name": name, "namespace": NS,
        "labels": {"machine.openshift.io/cluster-api-machineset": "workers"}});
    if let Some(o) = owner {
        metadata["ownerReferences"] = json!([{
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
            "name": o.metadata.name, "uid": o.metadata.uid, "controller": true,
        }]);
    }
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": metadata, "spec": {"providerSpec": {"value": spec}},
    }))
    .expect("machine")
}

/// What the Machine API's MachineSet controller does: one Machine per replica, the newest
/// deleted first when scaling down.
async fn scale(client: &kube::Client, set: &DynamicObject, replicas: usize) {
    let spec = &set.data["spec"]["template"]["spec"]["providerSpec"]["value"];
    let api = machines(client);
    for i in 0..replicas {
        let name = format!("workers-{i}");
        if api.get_opt(&name).await.expect("get").is_none() {
            api.create(&PostParams::default(), &machine(&name, spec, Some(set)))
                .await
                .expect("create Machine");
        }
    }
    for i in (replicas..8).rev() {
        let name = format!("workers-{i}");
        if api.get_opt(&name).await.expect("get").is_some() {
            api.delete(&name, &DeleteParams::default())
                .await
                .expect("delete Machine");
        }
    }
}

/// Waits until the Machine's instance is Ready (`Provisioned`: no Node yet), then plays the
/// host joining the cluster (its kubelet registers a Node, the CCM sets the provider ID) and
/// waits until the Machine is linked to that Node and `Running`.
async fn running(client: &kube::Client, api: &Api<DynamicObject>, name: &str) -> DynamicObject {
    let provisioned = eventually(Duration::from_secs(15), || async {
        api.get(name).await.ok().filter(|m| {
            m.data.pointer("/status/providerStatus/instanceState") == Some(&json!("Ready"))
        })
    })
    .await;
    assert_eq!(provisioned.data["status"]["phase"], "Provisioned");
    assert!(provisioned.data.pointer("/status/nodeRef").is_none());
    let provider_id = provisioned.data["spec"]["providerID"].clone();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{name}")},
        "spec": {"providerID": provider_id},
    }))
    .expect("node");
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create Node");
    let m = eventually(Duration::from_secs(15), || async {
        api.get(name)
            .await
            .ok()
            .filter(|m| m.data.pointer("/status/phase") == Some(&json!("Running")))
    })
    .await;
    assert_eq!(
        m.data["status"]["nodeRef"],
        json!({"kind": "Node", "name": node.name_any(), "uid": node.metadata.uid})
    );
    let node = nodes.get(&node.name_any()).await.expect("Node");
    assert_eq!(
        node.annotations()
            .get(NODE_MACHINE_ANNOTATION)
            .map(String::as_str),
        Some(format!("{NS}/{name}").as_str())
    );
    m
}

async fn start() -> (Env, Value) {
    let env = Env::start(fast_config()).await;
    install_machine_api_crds(&env.client).await;
    let user_data = secret("worker-user-data", &[("userData", "#ignition\n")]);
    Api::<Secret>::namespaced(env.client.clone(), NS)
        .create(&PostParams::default(), &user_data)
        .await
        .expect("user data Secret");
    let spec = provider_spec(&env.h.client()).await;
    (env, spec)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_set_of_three_creates_three_instances_and_scaled_to_one_deletes_two() {
    let (env, spec) = start().await;
    let set: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": "workers", "namespace": NS},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"machine.openshift.io/cluster-api-machineset": "workers"}},
                 "template": {"metadata": {"labels": {"machine.openshift.io/cluster-api-machineset": "workers"}},
                              "spec": {"providerSpec": {"value": spec}}}},
    }))
    .expect("machine set");
    let set = machine_sets(&env.client)
        .create(&PostParams::default(), &set)
        .await
        .expect("MachineSet");
    let controller = tokio::spawn(run_machine_api_controller(
        env.client.clone(),
        env.config.clone(),
    ));
    scale(&env.client, &set, 3).await;
    let api = machines(&env.client);
    let site = spec["siteId"].as_str().expect("site");
    for i in 0..3 {
        let m = running(&env.client, &api, &format!("workers-{i}")).await;
        let instance = m.data["status"]["providerStatus"]["instanceId"]
            .as_str()
            .expect("instance id")
            .to_string();
        assert_eq!(
            m.data["spec"]["providerID"],
            json!(format!("nvidia-bmm://{site}/{instance}"))
        );
        assert_eq!(m.data["status"]["providerStatus"]["instanceState"], "Ready");
        assert!(m.finalizers().iter().any(|f| f == MACHINE_FINALIZER));
        assert_eq!(
            m.annotations()
                .get(INSTANCE_STATE_ANNOTATION)
                .map(String::as_str),
            Some("Ready")
        );
        let addresses = m.data["status"]["addresses"].as_array().expect("addresses");
        assert!(
            addresses.iter().any(|a| a["type"] == "InternalIP"
                && a["address"]
                    .as_str()
                    .is_some_and(|x| x.starts_with("10.50.0."))),
            "{addresses:?}"
        );
    }
    assert_eq!(env.h.sim.created(Kind::Instance), 3);

    scale(&env.client, &set, 1).await;
    gone(&api, "workers-2").await;
    gone(&api, "workers-1").await;
    assert_eq!(env.h.sim.live(Kind::Instance), 1);
    assert!(api.get_opt("workers-0").await.expect("get").is_some());
    controller.abort();
    env.h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_create_and_the_status_write_adopts() {
    let (env, spec) = start().await;
    let crashed = env.h.crash_after("POST instance");
    let controller = tokio::spawn(run_machine_api_controller(
        env.client.clone(),
        env.config.clone(),
    ));
    let api = machines(&env.client);
    api.create(&PostParams::default(), &machine("solo", &spec, None))
        .await
        .expect("Machine");
    tokio::time::timeout(Duration::from_secs(10), crashed)
        .await
        .expect("the create happened")
        .expect("signal");
    controller.abort();
    assert_eq!(env.h.sim.created(Kind::Instance), 1);
    let m = api.get("solo").await.expect("Machine");
    assert!(
        m.data
            .pointer("/status/providerStatus/instanceId")
            .is_none()
    );

    let restarted = tokio::spawn(run_machine_api_controller(
        env.client.clone(),
        env.config.clone(),
    ));
    let m = running(&env.client, &api, "solo").await;
    assert_eq!(
        env.h.sim.created(Kind::Instance),
        1,
        "adopted, not created twice"
    );
    assert_eq!(
        m.data["status"]["providerStatus"]["instanceId"].as_str(),
        env.h.sim.instance_named("solo").as_deref()
    );
    restarted.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_provider_spec_is_an_invalid_configuration_and_creates_nothing() {
    let (env, mut spec) = start().await;
    spec["vpcId"] = json!("not-a-uuid");
    spec.as_object_mut()
        .expect("object")
        .remove("credentialsSecret");
    let controller = tokio::spawn(run_machine_api_controller(
        env.client.clone(),
        env.config.clone(),
    ));
    let api = machines(&env.client);
    api.create(&PostParams::default(), &machine("broken", &spec, None))
        .await
        .expect("Machine");
    let m = eventually(Duration::from_secs(10), || async {
        api.get("broken")
            .await
            .ok()
            .filter(|m| m.data.pointer("/status/errorReason").is_some())
    })
    .await;
    assert_eq!(m.data["status"]["errorReason"], "InvalidConfiguration");
    assert_eq!(m.data["status"]["phase"], "Failed");
    let message = m.data["status"]["errorMessage"].as_str().expect("message");
    assert!(
        message.contains("vpcId \"not-a-uuid\" is not a UUID"),
        "{message}"
    );
    assert!(
        message.contains("credentialsSecret.name is required"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(env.h.sim.created(Kind::Instance), 0);
    assert!(
        !env.h
            .operations_seen()
            .iter()
            .any(|o| o.starts_with("POST instance"))
    );
    // Deleting it needs nothing from BMM.
    api.delete("broken", &DeleteParams::default())
        .await
        .expect("delete");
    gone(&api, "broken").await;
    controller.abort();
}

#[test]
fn the_example_machine_set_matches_the_provider_spec_schema_and_the_controller_reads_it() {
    let schema: Value =
        serde_json::from_str(include_str!("../deploy/openshift/providerspec.schema.json"))
            .expect("schema");
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&schema)
        .expect("compiles");
    let set: Value = serde_norway::from_str(include_str!("../deploy/openshift/machineset.yaml"))
        .expect("machineset.yaml");
    let value = &set["spec"]["template"]["spec"]["providerSpec"]["value"];
    assert!(validator.is_valid(value), "{value}");
    nephrite_bmm::machine_api::read_provider_spec(Some(value)).expect("the controller reads it");
    // What the controller refuses, the schema refuses too.
    let mut bad = value.clone();
    bad["vpcId"] = json!("not-a-uuid");
    assert!(!validator.is_valid(&bad));
    assert!(nephrite_bmm::machine_api::read_provider_spec(Some(&bad)).is_err());
    let mut bad = value.clone();
    bad.as_object_mut()
        .expect("object")
        .remove("credentialsSecret");
    assert!(!validator.is_valid(&bad));
    assert!(nephrite_bmm::machine_api::read_provider_spec(Some(&bad)).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openshift_manifests_are_accepted() {
    let env = Env::start(fast_config()).await;
    install_machine_api_crds(&env.client).await;
    let text = include_str!("../deploy/openshift/machine-api-provider.yaml")
        .replace("${BMM_ENDPOINT}", "https://bmm.example.test")
        .replace("${BMM_ORG}", "acme")
        .replace("${BMM_TOKEN}", "token")
        .replace("${BMM_PROVIDER_IMAGE:=nephrite/bmm-provider:0.1.0}", "img")
        .replace("${BMM_LOG_LEVEL:=info}", "info");
    assert!(!text.contains("${"), "every variable substituted");
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "openshift-machine-api"}}))
            .expect("namespace");
    Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace");
    let set: Value = serde_norway::from_str(include_str!("../deploy/openshift/machineset.yaml"))
        .expect("machineset.yaml");
    let docs = serde_norway::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("document"))
        .chain([set]);
    for doc in docs {
        let kind = doc["kind"].as_str().expect("kind").to_string();
        let api_version = doc["apiVersion"].as_str().expect("apiVersion").to_string();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, &kind),
            &format!("{}s", kind.to_lowercase()),
        );
        let object: DynamicObject = serde_json::from_value(doc.clone()).expect("object");
        // ClusterRole(Binding)s are cluster-scoped; the rest live in a namespace.
        let api = match doc["metadata"]["namespace"].as_str() {
            Some(ns) => Api::<DynamicObject>::namespaced_with(env.client.clone(), ns, &resource),
            None => Api::<DynamicObject>::all_with(env.client.clone(), &resource),
        };
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{kind} refused: {e}"));
    }
}

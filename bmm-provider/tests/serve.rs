//! The NvidiaBMMCluster controller against the in-memory Kubernetes API server and bmm-sim.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use nephrite_bmm::crd::NvidiaBMMMachine;
use nephrite_bmm::crd::{NvidiaBMMCluster, all_crds};
use nephrite_bmm_provider::controller::{
    ControllerConfig, run_cluster_controller, run_machine_controller,
};
use nephrite_bmm_provider::sim::Kind;
use nephrite_test_apiserver::TestApiServer;
use serde_json::json;
use support::{Harness, ORG, eventually, fast_config};

async fn install_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in all_crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("provider CRD");
    }
    let capi: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusters.cluster.x-k8s.io"},
        "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
                 "names": {"plural": "clusters", "singular": "cluster", "kind": "Cluster", "listKind": "ClusterList"},
                 "versions": [{"name": "v1beta2", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("CAPI Cluster CRD");
    crds.create(&PostParams::default(), &capi)
        .await
        .expect("CAPI CRD");
    let machine_crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "machines.cluster.x-k8s.io"},
        "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
                 "names": {"plural": "machines", "singular": "machine", "kind": "Machine", "listKind": "MachineList"},
                 "versions": [{"name": "v1beta2", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("Machine CRD");
    crds.create(&PostParams::default(), &machine_crd)
        .await
        .expect("Machine CRD");
    tokio::time::sleep(Duration::from_millis(200)).await;
}

fn b64(s: &str) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = s.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Creates the Cluster API `Cluster` that owns the infrastructure cluster; returns its uid.
async fn owner_cluster(client: &kube::Client, name: &str) -> String {
    let capi = Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Cluster"),
            "clusters",
        ),
    );
    let owner: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": name, "namespace": "default"}, "spec": {"paused": false}
    }))
    .expect("cluster");
    let owner = capi
        .create(&PostParams::default(), &owner)
        .await
        .expect("owner");
    owner.metadata.uid.clone().expect("uid")
}

fn cluster_object(name: &str, cluster_uid: &str) -> NvidiaBMMCluster {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "NvidiaBMMCluster",
        "metadata": {"name": name, "namespace": "default",
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": name, "uid": cluster_uid}]},
        "spec": {
            "siteRef": {"name": "sim-site"},
            "vpc": {"name": format!("{name}-vpc"), "networkSecurityGroup": {"name": format!("{name}-nsg"), "rules": [
                {"name": "api", "direction": "INGRESS", "protocol": "TCP", "action": "PERMIT", "portRange": "6443"}]}},
            "subnets": [{"name": "cp", "cidr": "10.7.0.0/24", "role": "control-plane"}],
            "controlPlaneEndpoint": {"host": "api.example.test", "port": 6443},
            "authentication": {"secretRef": {"name": "bmm-credentials"}}
        }
    }))
    .expect("cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_controller_provisions_and_deletes_without_leaks() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("nephrite_bmm_provider=info")
        .with_test_writer()
        .try_init();
    let h = Harness::start(fast_config()).await;
    let server = TestApiServer::start().await.expect("apiserver");
    let client = server.client().expect("client");
    install_crds(&client).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmm-credentials"},
        "data": {"endpoint": b64(&h.url), "orgName": b64(ORG), "token": b64(support::token().expose())}
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    let uid = owner_cluster(&client, "c1").await;

    let config = ControllerConfig {
        namespace: Some("default".into()),
        poll: Duration::from_millis(100),
        dependency_poll: Duration::from_millis(200),
        ..ControllerConfig::default()
    };
    let controller = tokio::spawn(run_cluster_controller(client.clone(), config));
    let clusters: Api<NvidiaBMMCluster> = Api::namespaced(client.clone(), "default");
    clusters
        .create(&PostParams::default(), &cluster_object("c1", &uid))
        .await
        .expect("create");

    let ready = eventually(Duration::from_secs(20), || async {
        clusters
            .get("c1")
            .await
            .ok()
            .filter(|c| c.status.as_ref().is_some_and(|s| s.ready))
    })
    .await;
    let status = ready.status.expect("status");
    assert_eq!(
        status.initialization.and_then(|i| i.provisioned),
        Some(true)
    );
    assert_eq!(status.failure_domains.len(), 1);
    assert!(status.vpc_id.is_some());
    assert!(
        ready
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == nephrite_bmm::CLUSTER_FINALIZER)
    );
    let created: Vec<u64> = Kind::ALL.iter().map(|k| h.sim.created(*k)).collect();
    assert_eq!(created, vec![1, 1, 1, 1, 0]);

    clusters
        .delete("c1", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(Duration::from_secs(20), || async {
        clusters
            .get_opt("c1")
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(())
    })
    .await;
    for kind in Kind::ALL {
        assert_eq!(h.sim.live(kind), 0, "{kind:?} leaked");
    }
    let again: Vec<u64> = Kind::ALL.iter().map(|k| h.sim.created(*k)).collect();
    assert_eq!(again, created, "nothing created twice");
    controller.abort();
    h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_credentials_give_a_condition_and_no_api_call() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("nephrite_bmm_provider=info")
        .with_test_writer()
        .try_init();
    let h = Harness::start(fast_config()).await;
    let server = TestApiServer::start().await.expect("apiserver");
    let client = server.client().expect("client");
    install_crds(&client).await;
    let config = ControllerConfig {
        namespace: Some("default".into()),
        poll: Duration::from_millis(100),
        ..ControllerConfig::default()
    };
    let controller = tokio::spawn(run_cluster_controller(client.clone(), config));
    let clusters: Api<NvidiaBMMCluster> = Api::namespaced(client.clone(), "default");
    let uid = owner_cluster(&client, "c2").await;
    clusters
        .create(&PostParams::default(), &cluster_object("c2", &uid))
        .await
        .expect("create");
    let c = eventually(Duration::from_secs(20), || async {
        clusters.get("c2").await.ok().filter(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|k| k.reason.as_deref() == Some("CredentialsInvalid"))
            })
        })
    })
    .await;
    let ready = c
        .status
        .expect("status")
        .conditions
        .into_iter()
        .find(|k| k.type_ == "Ready")
        .expect("Ready");
    assert!(
        ready
            .message
            .as_deref()
            .is_some_and(|m| m.contains("bmm-credentials")),
        "{ready:?}"
    );
    assert!(
        h.operations_seen().is_empty(),
        "no API call without credentials"
    );
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_machine_controller_waits_for_bootstrap_data_then_provisions_and_deletes() {
    let h = Harness::start(fast_config()).await;
    let server = TestApiServer::start().await.expect("apiserver");
    let client = server.client().expect("client");
    install_crds(&client).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmm-credentials"},
        "data": {"endpoint": b64(&h.url), "orgName": b64(ORG), "token": b64(support::token().expose())}
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    let uid = owner_cluster(&client, "c3").await;
    let config = ControllerConfig {
        namespace: Some("default".into()),
        poll: Duration::from_millis(100),
        dependency_poll: Duration::from_millis(100),
        ..ControllerConfig::default()
    };
    let cluster_controller = tokio::spawn(run_cluster_controller(client.clone(), config.clone()));
    let machine_controller = tokio::spawn(run_machine_controller(client.clone(), config));
    let clusters: Api<NvidiaBMMCluster> = Api::namespaced(client.clone(), "default");
    clusters
        .create(&PostParams::default(), &cluster_object("c3", &uid))
        .await
        .expect("create");

    let capi_machines = Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Machine"),
            "machines",
        ),
    );
    let machine: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "c3-cp-0", "namespace": "default"},
        "spec": {"clusterName": "c3", "bootstrap": {"dataSecretName": "c3-cp-0-bootstrap"}}
    }))
    .expect("machine");
    let machine = capi_machines
        .create(&PostParams::default(), &machine)
        .await
        .expect("machine");
    let bmm_machines: Api<NvidiaBMMMachine> = Api::namespaced(client.clone(), "default");
    let infra: NvidiaBMMMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "NvidiaBMMMachine",
        "metadata": {"name": "c3-cp-0", "namespace": "default",
                     "labels": {"cluster.x-k8s.io/cluster-name": "c3", "cluster.x-k8s.io/control-plane": ""},
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "c3-cp-0", "uid": machine.metadata.uid.clone().expect("uid")}]},
        "spec": {"instanceType": {"id": nephrite_bmm_provider::sim::INSTANCE_TYPE_ID}, "network": {"subnetName": "cp"}}
    }))
    .expect("infra machine");
    bmm_machines
        .create(&PostParams::default(), &infra)
        .await
        .expect("create machine");

    // No bootstrap data yet: it waits and creates nothing.
    eventually(Duration::from_secs(20), || async {
        bmm_machines.get("c3-cp-0").await.ok().filter(|m| {
            m.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.reason.as_deref() == Some("WaitingForBootstrapData"))
            })
        })
    })
    .await;
    assert_eq!(h.sim.created(Kind::Instance), 0);
    let bootstrap: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c3-cp-0-bootstrap"},
        "data": {"value": b64("#cloud-config\n"), "format": b64("cloud-config")}
    }))
    .expect("bootstrap");
    secrets
        .create(&PostParams::default(), &bootstrap)
        .await
        .expect("bootstrap secret");

    let ready = eventually(Duration::from_secs(20), || async {
        bmm_machines
            .get("c3-cp-0")
            .await
            .ok()
            .filter(|m| m.status.as_ref().is_some_and(|s| s.ready))
    })
    .await;
    let provider_id = ready.spec.provider_id.clone().expect("providerID");
    assert!(
        provider_id.starts_with(&format!("nvidia-bmm://{}/", h.sim.site_id())),
        "{provider_id}"
    );
    let status = ready.status.expect("status");
    assert_eq!(
        status.failure_domain.as_deref(),
        Some(h.sim.site_id().as_str())
    );
    assert!(
        status
            .addresses
            .iter()
            .any(|a| a.address.starts_with("10.7.0.")),
        "{:?}",
        status.addresses
    );
    assert_eq!(h.sim.created(Kind::Instance), 1);

    bmm_machines
        .delete("c3-cp-0", &DeleteParams::default())
        .await
        .expect("delete machine");
    eventually(Duration::from_secs(20), || async {
        bmm_machines
            .get_opt("c3-cp-0")
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(
        h.sim.live(Kind::Instance),
        0,
        "the finalizer went only after the instance was gone"
    );
    clusters
        .delete("c3", &DeleteParams::default())
        .await
        .expect("delete cluster");
    eventually(Duration::from_secs(20), || async {
        clusters
            .get_opt("c3")
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(())
    })
    .await;
    for kind in Kind::ALL {
        assert_eq!(h.sim.live(kind), 0, "{kind:?} leaked");
    }
    assert_eq!(h.sim.created(Kind::Instance), 1, "never created twice");
    cluster_controller.abort();
    machine_controller.abort();
    h.assert_contract_held();
}

//! A Cluster API management cluster in miniature: the in-memory API server with the provider's
//! and Cluster API's CRDs, a credentials Secret pointing at a simulator, and builders for the
//! objects Cluster API would create.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use nephrite_bmm::crd::{NvidiaBMMCluster, NvidiaBMMMachine, all_crds};
use nephrite_bmm_provider::controller::{
    ControllerConfig, run_cluster_controller, run_machine_controller,
};
use nephrite_bmm_sim::{Kind, SimConfig};
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};

use super::{Harness, ORG, eventually};

/// The namespace everything lives in.
pub const NS: &str = "default";

/// A Secret `name` with `data` (base64 is done by the type).
pub fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

/// Waits until `api` has no object `name`.
pub async fn gone<K>(api: &Api<K>, name: &str)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(Duration::from_secs(20), || async {
        api.get_opt(name)
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(())
    })
    .await;
}

fn capi_crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.cluster.x-k8s.io")},
        "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                 "versions": [{"name": "v1beta2", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("CAPI CRD")
}

/// Installs the provider's CRDs and stand-ins for Cluster API's `Cluster` and `Machine`.
pub async fn install_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in all_crds().into_iter().chain([
        capi_crd("Cluster", "clusters"),
        capi_crd("Machine", "machines"),
    ]) {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create CRD");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// The Cluster API resource of `kind`.
pub fn capi(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", kind),
            plural,
        ),
    )
}

/// The NvidiaBMMCluster `name` owned by the Cluster with `uid`.
pub fn cluster_object(name: &str, cluster_uid: &str) -> NvidiaBMMCluster {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "NvidiaBMMCluster",
        "metadata": {"name": name, "namespace": NS,
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

/// Whether `conditions` hold one of `type_` with `reason`.
pub fn has_condition(conditions: &[nephrite_krm::Condition], type_: &str, reason: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.reason.as_deref() == Some(reason))
}

/// A simulator, an API server with the CRDs and a credentials Secret, and fast controllers.
pub struct Env {
    pub h: Harness,
    pub server: TestApiServer,
    pub client: kube::Client,
    pub config: ControllerConfig,
}

impl Env {
    pub async fn start(sim: SimConfig) -> Env {
        let h = Harness::start(sim).await;
        let server = TestApiServer::start().await.expect("apiserver");
        let client = server.client().expect("client");
        install_crds(&client).await;
        let env = Env {
            h,
            server,
            client,
            config: ControllerConfig {
                namespace: Some(NS.into()),
                poll: Duration::from_millis(100),
                dependency_poll: Duration::from_millis(200),
                ..ControllerConfig::default()
            },
        };
        env.put_credentials(super::token().expose()).await;
        env
    }

    /// Creates or replaces the credentials Secret with `token`.
    pub async fn put_credentials(&self, token: &str) {
        self.put_secret("bmm-credentials", &self.h.url, token).await;
    }

    /// Creates or replaces a credentials Secret `name` for `endpoint` with `token`.
    pub async fn put_secret(&self, name: &str, endpoint: &str, token: &str) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NS);
        let secret = secret(
            name,
            &[("endpoint", endpoint), ("orgName", ORG), ("token", token)],
        );
        if secrets.get_opt(name).await.expect("get Secret").is_some() {
            secrets
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": secret.data})),
                )
                .await
                .expect("rotate credentials");
        } else {
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .expect("credentials Secret");
        }
    }

    /// Starts both controllers; abort the handles to "crash" them.
    pub fn controllers(&self) -> [tokio::task::JoinHandle<()>; 2] {
        [
            tokio::spawn(run_cluster_controller(
                self.client.clone(),
                self.config.clone(),
            )),
            tokio::spawn(run_machine_controller(
                self.client.clone(),
                self.config.clone(),
            )),
        ]
    }

    pub fn clusters(&self) -> Api<NvidiaBMMCluster> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn machines(&self) -> Api<NvidiaBMMMachine> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Creates the Cluster API `Cluster` (with `spec`) and its NvidiaBMMCluster.
    pub async fn cluster(&self, name: &str, spec: Value) -> NvidiaBMMCluster {
        self.cluster_with(name, spec, |_| {}).await
    }

    /// Like [`Env::cluster`], with the NvidiaBMMCluster changed by `edit` first.
    pub async fn cluster_with(
        &self,
        name: &str,
        spec: Value,
        edit: impl FnOnce(&mut NvidiaBMMCluster),
    ) -> NvidiaBMMCluster {
        let owner: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": name, "namespace": NS}, "spec": spec
        }))
        .expect("cluster");
        let owner = capi(&self.client, "Cluster", "clusters")
            .create(&PostParams::default(), &owner)
            .await
            .expect("owner Cluster");
        let mut infra = cluster_object(name, &owner.metadata.uid.expect("uid"));
        edit(&mut infra);
        self.clusters()
            .create(&PostParams::default(), &infra)
            .await
            .expect("NvidiaBMMCluster")
    }

    /// Creates a Machine with its bootstrap Secret and its control-plane NvidiaBMMMachine.
    pub async fn machine(&self, cluster: &str, name: &str) -> NvidiaBMMMachine {
        self.bootstrap_secret(name).await;
        self.machine_without_bootstrap(cluster, name).await
    }

    /// Creates the bootstrap data Secret of machine `name`.
    pub async fn bootstrap_secret(&self, name: &str) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NS);
        let bootstrap = secret(
            &format!("{name}-bootstrap"),
            &[
                (
                    "value",
                    "#cloud-config
",
                ),
                ("format", "cloud-config"),
            ],
        );
        secrets
            .create(&PostParams::default(), &bootstrap)
            .await
            .expect("bootstrap Secret");
    }

    /// Creates a Machine (naming a bootstrap Secret that may not exist yet) and its
    /// control-plane NvidiaBMMMachine.
    pub async fn machine_without_bootstrap(&self, cluster: &str, name: &str) -> NvidiaBMMMachine {
        let machine: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": name, "namespace": NS},
            "spec": {"clusterName": cluster, "bootstrap": {"dataSecretName": format!("{name}-bootstrap")}}
        }))
        .expect("machine");
        let machine = capi(&self.client, "Machine", "machines")
            .create(&PostParams::default(), &machine)
            .await
            .expect("Machine");
        let infra: NvidiaBMMMachine = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "NvidiaBMMMachine",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"cluster.x-k8s.io/cluster-name": cluster, "cluster.x-k8s.io/control-plane": ""},
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": name, "uid": machine.metadata.uid.clone().expect("uid")}]},
            "spec": {"instanceType": {"id": nephrite_bmm_sim::INSTANCE_TYPE_ID}, "network": {"subnetName": "cp"}}
        }))
        .expect("infra machine");
        self.machines()
            .create(&PostParams::default(), &infra)
            .await
            .expect("NvidiaBMMMachine")
    }

    pub async fn cluster_ready(&self, name: &str) -> NvidiaBMMCluster {
        let clusters = self.clusters();
        eventually(Duration::from_secs(20), || async {
            clusters
                .get(name)
                .await
                .ok()
                .filter(|c| c.status.as_ref().is_some_and(|s| s.ready))
        })
        .await
    }

    pub async fn machine_ready(&self, name: &str) -> NvidiaBMMMachine {
        let machines = self.machines();
        eventually(Duration::from_secs(20), || async {
            machines
                .get(name)
                .await
                .ok()
                .filter(|m| m.status.as_ref().is_some_and(|s| s.ready))
        })
        .await
    }

    /// Waits until the machine's Ready condition has `reason`.
    pub async fn machine_reason(&self, name: &str, reason: &str) -> NvidiaBMMMachine {
        let machines = self.machines();
        eventually(Duration::from_secs(20), || async {
            machines.get(name).await.ok().filter(|m| {
                m.status
                    .as_ref()
                    .is_some_and(|s| has_condition(&s.conditions, "Ready", reason))
            })
        })
        .await
    }

    /// Waits until the cluster has a condition `type_` with `reason`.
    pub async fn cluster_condition(
        &self,
        name: &str,
        type_: &str,
        reason: &str,
    ) -> NvidiaBMMCluster {
        let clusters = self.clusters();
        eventually(Duration::from_secs(20), || async {
            clusters.get(name).await.ok().filter(|c| {
                c.status
                    .as_ref()
                    .is_some_and(|s| has_condition(&s.conditions, type_, reason))
            })
        })
        .await
    }

    pub async fn delete_machine(&self, name: &str) {
        self.machines()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete NvidiaBMMMachine");
    }

    pub async fn delete_cluster(&self, name: &str) {
        self.clusters()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete NvidiaBMMCluster");
    }

    /// Waits until neither a NvidiaBMMCluster nor a NvidiaBMMMachine is left.
    pub async fn all_gone(&self, limit: Duration) {
        let (clusters, machines) = (self.clusters(), self.machines());
        eventually(limit, || async {
            let c = clusters.list(&Default::default()).await.ok()?;
            let m = machines.list(&Default::default()).await.ok()?;
            (c.items.is_empty() && m.items.is_empty()).then_some(())
        })
        .await;
    }

    /// Asserts the simulator holds no object of any kind.
    pub fn assert_nothing_leaked(&self) {
        for kind in Kind::ALL {
            assert_eq!(self.h.sim.live(kind), 0, "{kind:?} leaked");
        }
    }
}

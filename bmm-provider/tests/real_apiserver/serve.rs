//! `bmm-provider serve` as `infrastructure-components.yaml` (what `clusterctl init` installs)
//! deploys it, with only the `capbmm-system/capbmm-controller-manager` token: a Cluster of
//! three Machines Ready against bmm-sim, then deleted with nothing left in the simulator or
//! the API.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use nephrite_bmm::crd::{NvidiaBMMCluster, NvidiaBMMMachine};
use nephrite_bmm_sim::Kind;
use serde_json::json;

use super::daemon::Daemon;
use super::setup::{
    DeployedAs, apply_crds, apply_secrets, capi_crds, namespace, server, substituted,
};
use crate::support::{Harness, ORG, fast_config, token};

/// The scenario's namespace.
const NS: &str = "bmm-serve";
/// The Cluster's name.
const CLUSTER: &str = "c1";
/// Its Machines' names.
const MACHINES: [&str; 3] = ["c1-m-0", "c1-m-1", "c1-m-2"];
/// The longest wait for the controllers to reach a state.
const LIMIT: Duration = Duration::from_secs(60);

/// A Cluster API resource in the scenario's namespace.
fn capi(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", kind);
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// Creates the Cluster API `Cluster` and its NvidiaBMMCluster, which names no credentials
/// Secret (the manager's `--default-credentials` serves it).
async fn create_cluster(client: &kube::Client) -> anyhow::Result<()> {
    let owner: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": NS}, "spec": {"paused": false}
    }))?;
    let owner = capi(client, "Cluster", "clusters")
        .create(&PostParams::default(), &owner)
        .await
        .context("creating the Cluster")?;
    let infra: NvidiaBMMCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "NvidiaBMMCluster",
        "metadata": {"name": CLUSTER, "namespace": NS, "ownerReferences": [{
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "name": CLUSTER, "uid": owner.metadata.uid}]},
        "spec": {
            "siteRef": {"name": "sim-site"},
            "vpc": {"name": "c1-vpc", "networkSecurityGroup": {"name": "c1-nsg", "rules": [
                {"name": "api", "direction": "INGRESS", "protocol": "TCP", "action": "PERMIT",
                 "portRange": "6443"}]}},
            "subnets": [{"name": "cp", "cidr": "10.7.0.0/24", "role": "control-plane"}],
            "controlPlaneEndpoint": {"host": "api.example.test", "port": 6443}
        }
    }))?;
    Api::<NvidiaBMMCluster>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &infra)
        .await
        .context("creating the NvidiaBMMCluster")?;
    Ok(())
}

/// Creates Machine `name` with its bootstrap Secret and its NvidiaBMMMachine.
async fn create_machine(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let bootstrap = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{name}-bootstrap")),
            namespace: Some(NS.to_string()),
            ..Default::default()
        },
        data: Some(
            [("value", "#cloud-config\n"), ("format", "cloud-config")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &bootstrap)
        .await
        .context("creating a bootstrap Secret")?;
    let machine: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterName": CLUSTER, "bootstrap": {"dataSecretName": format!("{name}-bootstrap")}}
    }))?;
    let machine = capi(client, "Machine", "machines")
        .create(&PostParams::default(), &machine)
        .await
        .with_context(|| format!("creating Machine {name}"))?;
    let infra: NvidiaBMMMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "NvidiaBMMMachine",
        "metadata": {"name": name, "namespace": NS,
            "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/control-plane": ""},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                 "name": name, "uid": machine.metadata.uid}]},
        "spec": {"instanceType": {"id": nephrite_bmm_sim::INSTANCE_TYPE_ID},
                 "network": {"subnetName": "cp"}}
    }))?;
    Api::<NvidiaBMMMachine>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &infra)
        .await
        .with_context(|| format!("creating NvidiaBMMMachine {name}"))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_the_managers_token_makes_three_machines_ready_and_deletes_all()
-> anyhow::Result<()> {
    let Some(kube) = server("serve_with_the_managers_token_makes_three_machines_ready") else {
        return Ok(());
    };
    let endpoint = kube.endpoint();
    let admin = endpoint.client()?;
    let sim = Harness::start(fast_config()).await;
    let mut crds = nephrite_bmm::crd::all_crds();
    crds.extend(capi_crds()?);
    apply_crds(&admin, &crds).await?;

    let source = "infrastructure-components.yaml";
    let components = nephrite_bmm_provider::clusterctl::components()?;
    let manager = endpoint
        .apply_access(
            source,
            &components,
            "capbmm-system/capbmm-controller-manager",
        )
        .await?;
    let token = token();
    let components = substituted(
        source,
        &components,
        &[
            ("BMM_ENDPOINT", sim.url.as_str()),
            ("BMM_ORG", ORG),
            ("BMM_TOKEN", token.expose()),
        ],
    )?;
    apply_secrets(&admin, source, &components).await?;
    namespace(&admin, NS).await?;
    let deployed = DeployedAs::from_manifest(source, &components)?
        .flag("--listen", "127.0.0.1:0")
        .flag("--dependency-poll-interval", "200ms")
        .env("BMM_POLL_INTERVAL", "100ms");
    let mut daemon = Daemon::start("serve", &deployed, &manager.kubeconfig)?;

    create_cluster(&admin).await?;
    for name in MACHINES {
        create_machine(&admin, name).await?;
    }
    let clusters: Api<NvidiaBMMCluster> = Api::namespaced(admin.clone(), NS);
    let machines: Api<NvidiaBMMMachine> = Api::namespaced(admin.clone(), NS);
    daemon
        .until("the NvidiaBMMCluster Ready", LIMIT, || async {
            Ok(clusters
                .get(CLUSTER)
                .await?
                .status
                .filter(|s| s.ready)
                .map(|_| ()))
        })
        .await?;
    let mut provider_ids = BTreeSet::new();
    for name in MACHINES {
        let machine = daemon
            .until(&format!("NvidiaBMMMachine {name} Ready"), LIMIT, || async {
                Ok(Some(machines.get(name).await?)
                    .filter(|m| m.status.as_ref().is_some_and(|s| s.ready)))
            })
            .await?;
        let id = machine
            .spec
            .provider_id
            .context("a Ready machine has a providerID")?;
        ensure!(
            id.starts_with(&format!("nvidia-bmm://{}/", sim.sim.site_id())),
            "{name}: providerID {id}"
        );
        provider_ids.insert(id);
    }
    ensure!(provider_ids.len() == 3, "three instances: {provider_ids:?}");
    ensure!(sim.sim.live(Kind::Instance) == 3);

    // Cluster API deletes the Machines first, then the Cluster; no garbage collector runs
    // here, so the owners go by hand too.
    let deleting = DeleteParams::default();
    for name in MACHINES {
        machines.delete(name, &deleting).await?;
        capi(&admin, "Machine", "machines")
            .delete(name, &deleting)
            .await?;
    }
    for name in MACHINES {
        daemon
            .until(&format!("NvidiaBMMMachine {name} gone"), LIMIT, || async {
                Ok(machines.get_opt(name).await?.is_none().then_some(()))
            })
            .await?;
    }
    clusters.delete(CLUSTER, &deleting).await?;
    capi(&admin, "Cluster", "clusters")
        .delete(CLUSTER, &deleting)
        .await?;
    daemon
        .until("the NvidiaBMMCluster gone", LIMIT, || async {
            Ok(clusters.get_opt(CLUSTER).await?.is_none().then_some(()))
        })
        .await?;

    let all = ListParams::default();
    let left = [
        clusters.list(&all).await?.items.len(),
        machines.list(&all).await?.items.len(),
        capi(&admin, "Cluster", "clusters")
            .list(&all)
            .await?
            .items
            .len(),
        capi(&admin, "Machine", "machines")
            .list(&all)
            .await?
            .items
            .len(),
    ];
    ensure!(
        left == [0; 4],
        "left in {NS} (NvidiaBMMClusters, NvidiaBMMMachines, Clusters, Machines): {left:?}"
    );
    for kind in Kind::ALL {
        ensure!(sim.sim.live(kind) == 0, "{kind:?} left in the simulator");
    }
    ensure!(
        sim.sim.created(Kind::Instance) == 3,
        "no instance created twice"
    );
    drop(daemon);
    sim.assert_contract_held();
    Ok(())
}

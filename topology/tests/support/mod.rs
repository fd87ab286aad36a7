//! Shared set-up of the Porch-backend tests: an in-memory API server with the CRDs, the
//! free5GC example loaded, and the controller running in the background.

#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use nephrite_krm::{Object, Package};
use nephrite_ntc::porch::{self, PorchConfig, resources};
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub const NS: &str = "default";

pub fn example(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/free5gc")
        .join(file);
    std::fs::read_to_string(path).expect("example file")
}

pub fn api(client: &kube::Client, resource: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, resource)
}

fn resource_of(object: &Object) -> anyhow::Result<ApiResource> {
    Ok(match object.kind.as_str() {
        "CustomResourceDefinition" => ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
            ),
            "customresourcedefinitions",
        ),
        "NFTopology" => resources::nf_topology(),
        "NFClass" => resources::nf_class(),
        "WorkloadCluster" => resources::workload_cluster(),
        other => bail!("no resource for {other}"),
    })
}

/// Creates every object of a YAML stream.
pub async fn create_all(client: &kube::Client, yaml: &str) -> anyhow::Result<()> {
    for object in Package::from_yaml(yaml)?.into_objects() {
        let resource = resource_of(&object)?;
        let dynamic: DynamicObject = serde_json::from_value(object.to_json())?;
        let api: Api<DynamicObject> = match object.namespace() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.create(&PostParams::default(), &dynamic)
            .await
            .with_context(|| format!("creating {} {:?}", object.kind, object.name()))?;
    }
    Ok(())
}

/// A running controller; dropping `stop` stops it.
pub struct Running {
    pub stop: Option<oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<()>,
}

impl Running {
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.task.await;
    }
}

pub fn start_controller(client: &kube::Client, config: PorchConfig) -> Running {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(porch::run(client.clone(), config, async move {
        let _ = stopped.await;
    }));
    Running {
        stop: Some(stop),
        task,
    }
}

/// The server with every CRD installed and the example's classes and clusters created.
pub async fn server_with_example() -> anyhow::Result<(TestApiServer, kube::Client)> {
    let server = TestApiServer::builder()
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await?;
    let client = server.client()?;
    create_all(&client, &nephrite_ntc::crds::crds_yaml()).await?;
    create_all(&client, include_str!("../porch-crds.yaml")).await?;
    create_all(&client, &example("classes.yaml")).await?;
    create_all(&client, &example("clusters.yaml")).await?;
    Ok((server, client))
}

/// Polls `check` until it gives `Some`, for up to 15 s.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let mut last_error = None;
    for _ in 0..300 {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("timed out waiting for {what} (last error: {last_error:?})")
}

pub async fn list(api: &Api<DynamicObject>) -> anyhow::Result<Vec<DynamicObject>> {
    Ok(api.list(&ListParams::default()).await?.items)
}

/// Acts as Porch: a PackageRevision of `package` in `repo`, labelled for the topology.
pub async fn create_revision(
    client: &kube::Client,
    name: &str,
    repo: &str,
    package: &str,
    revision: &str,
    lifecycle: &str,
) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "porch.kpt.dev/v1alpha1",
        "kind": "PackageRevision",
        "metadata": {"name": name, "namespace": NS, "labels": {"nf-deployment-name": "free5gc"}},
        "spec": {"packageName": package, "repository": repo, "workspaceName": format!("ws-{revision}"),
                 "revision": revision, "lifecycle": lifecycle},
    }))?;
    api(client, &resources::package_revision())
        .create(&PostParams::default(), &object)
        .await?;
    Ok(())
}

pub async fn set_lifecycle(
    client: &kube::Client,
    name: &str,
    lifecycle: &str,
) -> anyhow::Result<()> {
    api(client, &resources::package_revision())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"lifecycle": lifecycle}})),
        )
        .await?;
    Ok(())
}

/// The conditions of a revision: type → status.
pub async fn revision_conditions(
    client: &kube::Client,
    name: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let revision = api(client, &resources::package_revision())
        .get(name)
        .await?;
    let conditions = revision.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(conditions
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or("").to_owned(),
                c["status"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect())
}

/// The deployed topology: id → sorted neighbour ids.
pub async fn deployed(client: &kube::Client) -> anyhow::Result<Option<Vec<(String, Vec<String>)>>> {
    let Some(object) = api(client, &resources::nf_deployed_topology())
        .get_opt("free5gc")
        .await?
    else {
        return Ok(None);
    };
    let instances = object.data["spec"]["nfInstances"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(Some(
        instances
            .iter()
            .map(|i| {
                let neighbours = i["connectivities"]
                    .as_array()
                    .map(|cs| {
                        cs.iter()
                            .map(|c| c["neighborName"].as_str().unwrap_or("").to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                (i["id"].as_str().unwrap_or("").to_owned(), neighbours)
            })
            .collect(),
    ))
}

pub async fn topology_status(client: &kube::Client) -> anyhow::Result<Value> {
    let topology = api(client, &resources::nf_topology())
        .get("free5gc")
        .await?;
    Ok(topology.data.get("status").cloned().unwrap_or(Value::Null))
}

//! What each scenario prepares as the cluster's admin: the CRDs (applied and Established),
//! namespaces, a manifest's Secrets with its `${VARIABLES}` substituted, and the Deployment
//! whose arguments and environment the daemon is run with.

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use nephrite_test_services::{KubeApiServer, kube_apiserver};
use serde::Deserialize;
use serde_json::{Value, json};

/// The field manager of the test's server-side applies.
const MANAGER: &str = "bmm-provider-real-apiserver-test";

/// How long CRDs may take to be Established.
const ESTABLISHED_WITHIN: Duration = Duration::from_secs(60);

/// Taken by the scenarios that create Nodes, for their whole run: the CCM acts on every Node
/// of the cluster, the Machine API scenario's included.
pub static NODES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The binary's shared server, or None after saying loudly why `test` is skipped (under
/// `CI=true` a missing server fails instead).
pub fn server(test: &str) -> Option<&'static KubeApiServer> {
    match KubeApiServer::shared() {
        Ok(kube) => Some(kube),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

/// Stand-ins for Cluster API's `Cluster` and `Machine` (`cluster.x-k8s.io/v1beta2`): the
/// provider only reads them, so their schema keeps every field.
pub fn capi_crds() -> anyhow::Result<Vec<CustomResourceDefinition>> {
    [("Cluster", "clusters"), ("Machine", "machines")]
        .into_iter()
        .map(|(kind, plural)| {
            serde_json::from_value(json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.cluster.x-k8s.io")},
                "spec": {
                    "group": "cluster.x-k8s.io", "scope": "Namespaced",
                    "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                              "listKind": format!("{kind}List")},
                    "versions": [{"name": "v1beta2", "served": true, "storage": true,
                                  "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                      "x-kubernetes-preserve-unknown-fields": true}}}]
                }
            }))
            .with_context(|| format!("the stand-in CRD of {kind}"))
        })
        .collect()
}

/// The Machine API's Machine and MachineSet CRDs of `tests/fixtures/machine-api-crds.yaml`.
pub fn machine_api_crds() -> anyhow::Result<Vec<CustomResourceDefinition>> {
    documents(
        "tests/fixtures/machine-api-crds.yaml",
        include_str!("../fixtures/machine-api-crds.yaml"),
    )?
    .into_iter()
    .map(|doc| serde_json::from_value(doc).context("a CRD of machine-api-crds.yaml"))
    .collect()
}

/// Server-side applies `crds` and waits until each is Established.
pub async fn apply_crds(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> anyhow::Result<()> {
    kube_apiserver::apply_crds(client, crds, MANAGER, ESTABLISHED_WITHIN).await?;
    Ok(())
}

/// Creates (or keeps) namespace `name`.
pub async fn namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let namespace: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
    }))?;
    Api::<Namespace>::all(client.clone())
        .patch(name, &apply(), &Patch::Apply(&namespace))
        .await
        .with_context(|| format!("applying namespace {name}"))?;
    Ok(())
}

/// `text` with its `${NAME}` / `${NAME:=default}` variables replaced by `values` (the
/// defaults otherwise), as clusterctl or envsubst would; refused when a variable has neither.
pub fn substituted(source: &str, text: &str, values: &[(&str, &str)]) -> anyhow::Result<String> {
    nephrite_bmm_provider::clusterctl::substitute(text, |name| {
        values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| (*v).to_string())
    })
    .map_err(|e| anyhow::anyhow!("substituting {source}: {e}"))
}

/// Server-side applies every Secret of the manifest `text` (variables already substituted).
pub async fn apply_secrets(client: &kube::Client, source: &str, text: &str) -> anyhow::Result<()> {
    let mut applied = 0;
    for doc in documents(source, text)? {
        if doc["kind"] != "Secret" {
            continue;
        }
        let secret: Secret =
            serde_json::from_value(doc).with_context(|| format!("a Secret of {source}"))?;
        let (Some(name), Some(ns)) = (&secret.metadata.name, &secret.metadata.namespace) else {
            bail!("a Secret of {source} has no name or namespace");
        };
        Api::<Secret>::namespaced(client.clone(), ns)
            .patch(name, &apply(), &Patch::Apply(&secret))
            .await
            .with_context(|| format!("applying Secret {ns}/{name} of {source}"))?;
        applied += 1;
    }
    ensure!(applied > 0, "{source} holds no Secret");
    Ok(())
}

/// How a manifest's Deployment runs the daemon: its container's arguments and environment,
/// each `valueFrom.fieldRef` resolved as the kubelet would for a pod of it.
pub struct DeployedAs {
    /// The container's `args`.
    pub args: Vec<String>,
    /// The container's `env`, in order.
    pub env: Vec<(String, String)>,
}

impl DeployedAs {
    /// The Deployment of `text` (the only one) and its first container.
    pub fn from_manifest(source: &str, text: &str) -> anyhow::Result<DeployedAs> {
        let mut deployments = documents(source, text)?
            .into_iter()
            .filter(|doc| doc["kind"] == "Deployment");
        let Some(doc) = deployments.next() else {
            bail!("{source} holds no Deployment");
        };
        ensure!(
            deployments.next().is_none(),
            "{source} holds more than one Deployment"
        );
        let deployment: Deployment =
            serde_json::from_value(doc).with_context(|| format!("the Deployment of {source}"))?;
        let pod_namespace = deployment.metadata.namespace.clone().unwrap_or_default();
        let pod_name = format!("{}-0", deployment.metadata.name.clone().unwrap_or_default());
        let container = deployment
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|s| s.containers.into_iter().next())
            .with_context(|| format!("the Deployment of {source} has no container"))?;
        let mut env = Vec::new();
        for var in container.env.unwrap_or_default() {
            let field = var
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str());
            let value = match (var.value, field) {
                (Some(value), _) => value,
                (None, Some("metadata.namespace")) => pod_namespace.clone(),
                (None, Some("metadata.name")) => pod_name.clone(),
                (None, other) => bail!(
                    "{source}: env {} comes from {other:?}, which this test cannot resolve",
                    var.name
                ),
            };
            env.push((var.name, value));
        }
        Ok(DeployedAs {
            args: container.args.unwrap_or_default(),
            env,
        })
    }

    /// Sets `flag` to `value`: replaces the value after it when the manifest passes it,
    /// appends both otherwise (clap refuses a flag given twice).
    pub fn flag(mut self, flag: &str, value: &str) -> DeployedAs {
        match self.args.iter().position(|a| a == flag) {
            Some(at) if at + 1 < self.args.len() => self.args[at + 1] = value.to_string(),
            _ => self.args.extend([flag.to_string(), value.to_string()]),
        }
        self
    }

    /// Sets environment variable `name` to `value`.
    pub fn env(mut self, name: &str, value: &str) -> DeployedAs {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.to_string(), value.to_string()));
        self
    }
}

/// The non-empty YAML documents of `text`, as JSON values.
fn documents(source: &str, text: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for (index, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc)
            .with_context(|| format!("{source}, document {index} is not YAML"))?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// A forced server-side apply by this test.
fn apply() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

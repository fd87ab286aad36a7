//! Fixtures shared by the integration tests: the `Gizmo` custom resource and a typed-less API
//! for it, ConfigMaps, and reading a failed call's Status.

// Each test crate uses its own part of the fixtures.
#![allow(dead_code)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::collections::BTreeMap;

use anyhow::bail;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::ObjectMeta;
use serde_json::{Value, json};

/// The `gizmos.test.nephrite.dev` CRD (namespaced, version v1, short name `gz`), with the status
/// subresource when `with_status`, and `schema` as its `openAPIV3Schema` if given.
pub fn gizmo_crd(
    with_status: bool,
    schema: Option<Value>,
) -> anyhow::Result<CustomResourceDefinition> {
    let mut version = json!({"name": "v1", "served": true, "storage": true});
    if let Some(v) = version.as_object_mut() {
        if let Some(schema) = schema {
            v.insert("schema".into(), json!({ "openAPIV3Schema": schema }));
        }
        if with_status {
            v.insert("subresources".into(), json!({"status": {}}));
        }
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.test.nephrite.dev"},
        "spec": {
            "group": "test.nephrite.dev",
            "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "shortNames": ["gz"]},
            "versions": [version],
        },
    }))?)
}

/// Gizmos in namespace `default`.
pub fn gizmo_api(client: Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("test.nephrite.dev", "v1", "Gizmo"),
        "gizmos",
    );
    Api::namespaced_with(client, "default", &ar)
}

/// The Status of a failed call: (code, reason, message).
pub fn status_of(err: kube::Error) -> anyhow::Result<(u16, String, String)> {
    match err {
        kube::Error::Api(s) => Ok((s.code, s.reason.clone(), s.message.clone())),
        other => bail!("expected an API error with a Status body, got {other:?}"),
    }
}

/// A ConfigMap `name` with `labels` and one data entry.
pub fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
        ..Default::default()
    }
}

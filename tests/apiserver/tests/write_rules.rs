//! Write rules kube-apiserver v1.37 was seen to enforce: a custom resource cannot be replaced
//! without the resourceVersion it was read at, an object being deleted can lose finalizers but
//! gain none, and a CRD of a Kubernetes group needs the API-approval annotation. Each is 422
//! Invalid, worded as the real server words it.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use nephrite_test_apiserver::TestApiServer;
use serde_json::json;
use support::{gizmo_api, gizmo_crd, status_of};

#[tokio::test]
async fn a_custom_resource_put_needs_its_resource_version() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &gizmo_crd(false, None)?)
        .await?;
    let gizmos = gizmo_api(client.clone());
    let gizmo = |a: i64| -> anyhow::Result<DynamicObject> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "test.nephrite.dev/v1", "kind": "Gizmo",
            "metadata": {"name": "g2"}, "spec": {"a": a},
        }))?)
    };
    let created = gizmos.create(&PostParams::default(), &gizmo(1)?).await?;
    let err = gizmos
        .replace("g2", &PostParams::default(), &gizmo(2)?)
        .await
        .err()
        .ok_or_else(|| anyhow::anyhow!("a PUT without resourceVersion was accepted"))?;
    let (code, reason, message) = status_of(err)?;
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        message,
        "gizmos.test.nephrite.dev \"g2\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );
    // With the version read, it goes through; a built-in kind needs none.
    let mut read = gizmo(3)?;
    read.metadata.resource_version = created.metadata.resource_version.clone();
    let replaced = gizmos.replace("g2", &PostParams::default(), &read).await?;
    assert_eq!(replaced.data["spec"]["a"], 3);
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &support::cm("c", &[]))
        .await?;
    cms.replace(
        "c",
        &PostParams::default(),
        &support::cm("c", &[("x", "y")]),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_terminating_object_gains_no_finalizer() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    let mut cm = support::cm("fz", &[]);
    cm.metadata.finalizers = Some(vec!["a.example.com/f".into()]);
    cms.create(&PostParams::default(), &cm).await?;
    cms.delete("fz", &DeleteParams::default()).await?;
    let add = json!({"metadata": {"finalizers": ["a.example.com/f", "b.example.com/g"]}});
    let err = cms
        .patch("fz", &PatchParams::default(), &Patch::Merge(&add))
        .await
        .err()
        .ok_or_else(|| anyhow::anyhow!("a new finalizer on a terminating object was accepted"))?;
    let (code, reason, message) = status_of(err)?;
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        message,
        "ConfigMap \"fz\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b.example.com/g\"}"
    );
    // Removing the last one finishes the deletion.
    cms.patch(
        "fz",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    assert!(cms.get_opt("fz").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn a_crd_of_a_kubernetes_group_needs_the_approval_annotation() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client()?);
    let crd = |annotations: serde_json::Value| -> anyhow::Result<CustomResourceDefinition> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.test.k8s.io", "annotations": annotations},
            "spec": {
                "group": "test.k8s.io", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object"}}}],
            },
        }))?)
    };
    let err = crds
        .create(&PostParams::default(), &crd(json!({}))?)
        .await
        .err()
        .ok_or_else(|| anyhow::anyhow!("a CRD of test.k8s.io without approval was accepted"))?;
    let (code, reason, message) = status_of(err)?;
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        message,
        "CustomResourceDefinition.apiextensions.k8s.io \"widgets.test.k8s.io\" is invalid: metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
    );
    let approved = json!({"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/1111"});
    crds.create(&PostParams::default(), &crd(approved)?).await?;
    Ok(())
}

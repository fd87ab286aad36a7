//! Server-side apply's field management, as kube-apiserver v1.37 was seen to do it: an apply
//! removes the fields its manager set before and no longer sets, keeps fields other managers
//! own, and refuses (409 Conflict, `FieldManagerConflict` causes) to change another manager's
//! field unless forced. Each expectation here was first observed on the real server.

mod support;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};
use support::{gizmo_api, gizmo_crd, status_of};

fn config_map(data: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c1", "labels": labels},
        "data": data,
    })
}

fn data_of(cm: &ConfigMap) -> Vec<(String, String)> {
    cm.data.clone().unwrap_or_default().into_iter().collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn an_apply_removes_what_its_manager_dropped_and_keeps_the_fields_of_others()
-> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    let apply = |m: &str| PatchParams::apply(m);
    api.patch(
        "c1",
        &apply("mgr-a"),
        &Patch::Apply(config_map(json!({"a": "1", "b": "2"}), json!({"l1": "a"}))),
    )
    .await?;
    api.patch(
        "c1",
        &apply("mgr-b"),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"c": "3"}})),
    )
    .await?;
    // A controller's merge patch owns what it set; one that changes nothing owns nothing.
    let ctl = PatchParams {
        field_manager: Some("ctl".into()),
        ..Default::default()
    };
    api.patch("c1", &ctl, &Patch::Merge(json!({"data": {"d": "4"}})))
        .await?;
    api.patch("c1", &ctl, &Patch::Merge(json!({"data": {"b": "2"}})))
        .await?;

    let after = api
        .patch(
            "c1",
            &apply("mgr-a"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}})),
        )
        .await?;
    // b and the label were mgr-a's alone: gone. c (mgr-b's) and d (ctl's) stay.
    assert_eq!(
        data_of(&after),
        pairs(&[("a", "1"), ("c", "3"), ("d", "4")])
    );
    assert_eq!(after.metadata.labels, None);

    // A field another manager changed after the apply changed hands: dropping it keeps it.
    api.patch(
        "c1",
        &apply("mgr-a"),
        &Patch::Apply(config_map(json!({"a": "1", "e": "5"}), json!({}))),
    )
    .await?;
    api.patch("c1", &ctl, &Patch::Merge(json!({"data": {"e": "6"}})))
        .await?;
    let kept = api
        .patch(
            "c1",
            &apply("mgr-a"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}})),
        )
        .await?;
    assert_eq!(
        data_of(&kept),
        pairs(&[("a", "1"), ("c", "3"), ("d", "4"), ("e", "6")])
    );
    Ok(())
}

#[tokio::test]
async fn an_apply_changing_others_fields_conflicts_unless_forced() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.patch(
        "c1",
        &PatchParams::apply("mgr-a"),
        &Patch::Apply(config_map(json!({"a": "1"}), json!({}))),
    )
    .await?;
    let ctl = PatchParams {
        field_manager: Some("ctl".into()),
        ..Default::default()
    };
    api.patch("c1", &ctl, &Patch::Merge(json!({"data": {"d": "4"}})))
        .await?;

    let one = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"d": "9"}});
    let err = api
        .patch("c1", &PatchParams::apply("mgr-c"), &Patch::Apply(&one))
        .await
        .err()
        .context("an apply changing ctl's field")?;
    let kube::Error::Api(status) = err else {
        anyhow::bail!("expected a Status, got {err:?}");
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"ctl\" using v1: .data.d"
    );
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].message, "conflict with \"ctl\" using v1");
    assert_eq!(causes[0].field, ".data.d");

    let two = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "8", "d": "9"}});
    let err = api
        .patch("c1", &PatchParams::apply("mgr-c"), &Patch::Apply(&two))
        .await
        .err()
        .context("an apply changing two managers' fields")?;
    let (code, reason, message) = status_of(err)?;
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(
        message,
        "Apply failed with 2 conflicts: conflicts with \"ctl\" using v1:\n- .data.d\nconflicts with \"mgr-a\":\n- .data.a"
    );
    // Nothing was written.
    let unchanged = api.get("c1").await?;
    assert_eq!(data_of(&unchanged), pairs(&[("a", "1"), ("d", "4")]));

    // Forced, the fields change hands: ctl no longer owns d, so mgr-c dropping it removes it.
    let forced = api
        .patch(
            "c1",
            &PatchParams::apply("mgr-c").force(),
            &Patch::Apply(&two),
        )
        .await?;
    assert_eq!(data_of(&forced), pairs(&[("a", "8"), ("d", "9")]));
    let dropped = api
        .patch(
            "c1",
            &PatchParams::apply("mgr-c"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "8"}})),
        )
        .await?;
    assert_eq!(data_of(&dropped), pairs(&[("a", "8")]));

    // The same value is no conflict: both managers own it.
    let same = api
        .patch(
            "c1",
            &PatchParams::apply("mgr-d"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "8"}})),
        )
        .await?;
    assert_eq!(data_of(&same), pairs(&[("a", "8")]));
    Ok(())
}

#[tokio::test]
async fn a_custom_resource_loses_emptied_objects_but_keeps_applied_empty_ones() -> anyhow::Result<()>
{
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    }});
    crds.create(&Default::default(), &gizmo_crd(true, Some(schema))?)
        .await?;
    let gizmos = gizmo_api(client);
    let pp = PatchParams::apply("m");
    let gizmo = |spec: Value| json!({"apiVersion": "test.nephrite.dev/v1", "kind": "Gizmo", "metadata": {"name": "g1"}, "spec": spec, "status": {"s": 1}});
    let first = gizmos
        .patch(
            "g1",
            &pp,
            &Patch::Apply(gizmo(json!({"a": {"b": 1}, "c": 2, "l": [1, 2]}))),
        )
        .await?;
    // The status subresource: a main-resource apply does not write status.
    assert_eq!(first.data.get("status"), None);
    let second = gizmos
        .patch("g1", &pp, &Patch::Apply(gizmo(json!({"c": 2}))))
        .await?;
    assert_eq!(second.data["spec"], json!({"c": 2}));
    let bare =
        json!({"apiVersion": "test.nephrite.dev/v1", "kind": "Gizmo", "metadata": {"name": "g1"}});
    let third = gizmos.patch("g1", &pp, &Patch::Apply(&bare)).await?;
    assert_eq!(third.data.get("spec"), None, "{:?}", third.data);
    let fourth = gizmos
        .patch("g1", &pp, &Patch::Apply(gizmo(json!({"a": {}}))))
        .await?;
    assert_eq!(fourth.data["spec"], json!({"a": {}}));
    Ok(())
}

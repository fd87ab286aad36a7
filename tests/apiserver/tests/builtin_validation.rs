//! The spec rules kube-apiserver v1.37 applies to NetworkPolicies and Ingresses, over HTTP:
//! a CIDR out of range, an unknown selector operator and a relative Ingress path are 422
//! Invalid, worded and detailed as the real server answered them, on create and on patch, and
//! nothing is written.

use anyhow::Context as _;
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Status;
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};

fn refused<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> anyhow::Result<Status> {
    match result {
        Err(kube::Error::Api(status)) => Ok(*status),
        other => anyhow::bail!("expected a refusal with a Status, got {other:?}"),
    }
}

fn causes(status: &Status) -> Vec<(String, String, String)> {
    status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect()
}

fn policy(name: &str, spec: Value) -> anyhow::Result<NetworkPolicy> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name}, "spec": spec,
    }))?)
}

#[tokio::test]
async fn a_network_policy_cidr_out_of_range_is_invalid() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let api: Api<NetworkPolicy> = Api::default_namespaced(server.client()?);
    let bad = policy(
        "np1",
        json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}),
    )?;
    let status = refused(api.create(&PostParams::default(), &bad).await)?;
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "NetworkPolicy.networking.k8s.io \"np1\" is invalid: spec.ingress[0].from[0].ipBlock.cidr: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
    );
    let details = status.details.clone().context("details")?;
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("np1", "networking.k8s.io", "NetworkPolicy")
    );
    assert_eq!(
        causes(&status),
        vec![(
            "FieldValueInvalid".to_string(),
            "spec.ingress[0].from[0].ipBlock.cidr".to_string(),
            "Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)".to_string(),
        )]
    );
    assert!(api.get_opt("np1").await?.is_none());

    // A valid one is stored; a patch making it invalid is refused and changes nothing.
    let good = policy(
        "np1",
        json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}]}),
    )?;
    api.create(&PostParams::default(), &good).await?;
    let patch = json!({"spec": {"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/16"]}}]}]}});
    let status = refused(
        api.patch("np1", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    )?;
    assert_eq!(status.code, 422);
    assert_eq!(
        causes(&status),
        vec![(
            "FieldValueInvalid".to_string(),
            "spec.ingress[0].from[0].ipBlock.except[0]".to_string(),
            "Invalid value: \"11.0.0.0/16\": must be a strict subset of `cidr`".to_string(),
        )]
    );
    let stored = serde_json::to_value(api.get("np1").await?.spec)?;
    assert_eq!(
        stored["ingress"][0]["from"][0]["ipBlock"]["except"],
        json!(["10.1.0.0/16"])
    );
    Ok(())
}

#[tokio::test]
async fn an_unknown_selector_operator_is_invalid() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let api: Api<NetworkPolicy> = Api::default_namespaced(server.client()?);
    let bad = policy(
        "np2",
        json!({
            "podSelector": {"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["a"]}]},
            "egress": [{"to": [{"namespaceSelector": {"matchExpressions": [{"key": "x", "operator": "Exists", "values": ["a"]}]}}]}],
        }),
    )?;
    let status = refused(api.create(&PostParams::default(), &bad).await)?;
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "NetworkPolicy.networking.k8s.io \"np2\" is invalid: [spec.podSelector.matchExpressions[0].operator: Invalid value: \"Equals\": not a valid selector operator, spec.egress[0].to[0].namespaceSelector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist']"
    );
    let reasons: Vec<String> = causes(&status).into_iter().map(|c| c.0).collect();
    assert_eq!(reasons, ["FieldValueInvalid", "FieldValueForbidden"]);
    assert!(api.get_opt("np2").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn an_ingress_path_must_be_absolute() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let api: Api<Ingress> = Api::default_namespaced(server.client()?);
    let path = |p: &str, t: &str| json!({"path": p, "pathType": t, "backend": {"service": {"name": "s", "port": {"number": 80}}}});
    let ingress = |paths: Value| -> anyhow::Result<Ingress> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "ing1"},
            "spec": {"rules": [{"host": "a.example.com", "http": {"paths": paths}}]},
        }))?)
    };
    let bad = ingress(json!([
        path("foo", "Prefix"),
        path("/ok", "Prefix"),
        path("baz", "Exact")
    ]))?;
    let status = refused(api.create(&PostParams::default(), &bad).await)?;
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "Ingress.networking.k8s.io \"ing1\" is invalid: [spec.rules[0].http.paths[0].path: Invalid value: \"foo\": must be an absolute path, spec.rules[0].http.paths[2].path: Invalid value: \"baz\": must be an absolute path]"
    );
    assert!(api.get_opt("ing1").await?.is_none());
    let good = ingress(json!([path("/foo", "Prefix"), path("/baz", "Exact")]))?;
    api.create(&PostParams::default(), &good).await?;
    Ok(())
}

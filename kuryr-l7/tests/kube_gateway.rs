//! The Gateway API from `kubectl apply` to traffic: GatewayClass, Gateway and HTTPRoute on the
//! in-memory API server (the CRDs of `deploy/kubernetes/gateway-api-crds.yaml`), the
//! controller writing their status as the spec says, and a router serving the route: host,
//! path and header matches, weights, a redirect, and a header change it cannot serve reported
//! in the route's status instead of silently dropped.

#![allow(missing_docs)]
mod support;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use nephrite_kuryr_l7::kubernetes::watch::kinds;
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};
use support::daemon::Daemon;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");
const CRDS: &str = include_str!("../deploy/kubernetes/gateway-api-crds.yaml");

const GATEWAY: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: kuryr}
spec: {controllerName: kuryr.nephrite.io/l7}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: someone-else}
spec: {controllerName: example.com/other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: default}
spec:
  gatewayClassName: kuryr
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: default}
spec:
  parentRefs: [{name: web}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /cart}, headers: [{name: x-canary, value: 'yes'}]}]
    backendRefs: [{name: green, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /cart}}]
    backendRefs: [{name: blue, port: 80, weight: 1}, {name: green, port: 80, weight: 1}]
  - matches: [{path: {type: Exact, value: /old}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301}}]
  - matches: [{path: {type: PathPrefix, value: /static}}]
    filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x-cache, value: hit}]}}]
    backendRefs: [{name: blue, port: 80}]
";

async fn apply(client: &kube::Client, yaml: &str) {
    for document in yaml.split("\n---\n").filter(|d| !d.trim().is_empty()) {
        let value: Value = serde_norway::from_str(document).unwrap();
        let object: DynamicObject = serde_json::from_value(value.clone()).unwrap();
        let types = object.types.clone().unwrap();
        let resource = if types.kind == "CustomResourceDefinition" {
            kube::api::ApiResource {
                group: "apiextensions.k8s.io".into(),
                version: "v1".into(),
                api_version: types.api_version.clone(),
                kind: types.kind.clone(),
                plural: "customresourcedefinitions".into(),
            }
        } else {
            kinds()
                .into_iter()
                .map(|k| k.resource)
                .find(|r| r.api_version == types.api_version && r.kind == types.kind)
                .unwrap_or_else(|| panic!("no resource for {types:?}"))
        };
        let name = object.metadata.name.clone().unwrap();
        let api: Api<DynamicObject> = match &object.metadata.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply("kube-test").force(),
            &Patch::Apply(&value),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {name}: {e}"));
    }
}

async fn status(client: &kube::Client, kind: &str, namespace: Option<&str>, name: &str) -> Value {
    let resource = kinds()
        .into_iter()
        .map(|k| k.resource)
        .find(|r| r.kind == kind)
        .unwrap();
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.get(name).await.unwrap().data["status"].clone()
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn condition<'a>(conditions: &'a Value, type_: &str) -> &'a Value {
    conditions
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

async fn canary(router: SocketAddr, path: &str) -> Reply {
    send(
        router,
        Request::get(path)
            .header("host", "shop.example.com")
            .header("x-canary", "yes")
            .body(Empty::<Bytes>::new())
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn gateway_and_httproute_get_the_specs_status_and_their_traffic_through_the_router() {
    let server = TestApiServer::start().await.unwrap();
    let client = server.client().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig()).unwrap();
    apply(&client, CRDS).await;
    let blue = echo("blue").await;
    let green = echo("green").await;
    apply(&client, &service_yaml("default", "blue", &[blue])).await;
    apply(&client, &service_yaml("default", "green", &[green])).await;
    apply(&client, GATEWAY).await;

    let listen = dead_address();
    let controller = Daemon(
        Command::new(BIN)
            .args([
                "controller",
                "--source",
                "kube",
                "--status-address",
                "127.0.0.1",
            ])
            .args(["--identity", "c1", "--listen"])
            .arg(listen.to_string())
            .env("KUBECONFIG", &kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let http = dead_address();
    let _router = Daemon(
        Command::new(BIN)
            .args([
                "router",
                "--threads",
                "1",
                "--rules-wait",
                "30s",
                "--listen",
            ])
            .arg(http.to_string())
            .arg("--rules")
            .arg(listen.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Status, as the spec defines it.
    let class = eventually("GatewayClass Accepted", async || {
        let status = status(&client, "GatewayClass", None, "kuryr").await;
        (condition(&status["conditions"], "Accepted")["status"] == "True").then_some(status)
    })
    .await;
    assert_eq!(
        condition(&class["conditions"], "Accepted")["reason"],
        "Accepted"
    );
    let gateway = eventually("Gateway Programmed", async || {
        let status = status(&client, "Gateway", Some("default"), "web").await;
        (condition(&status["conditions"], "Programmed")["status"] == "True").then_some(status)
    })
    .await;
    assert_eq!(
        condition(&gateway["conditions"], "Accepted")["status"],
        "True"
    );
    assert_eq!(
        gateway["addresses"],
        json!([{"type": "IPAddress", "value": "127.0.0.1"}])
    );
    assert_eq!(gateway["listeners"][0]["name"], "http");
    assert_eq!(gateway["listeners"][0]["attachedRoutes"], 1);
    assert_eq!(
        condition(&gateway["listeners"][0]["conditions"], "Programmed")["status"],
        "True"
    );
    let route = eventually("HTTPRoute parent status", async || {
        let status = status(&client, "HTTPRoute", Some("default"), "shop").await;
        (status["parents"].as_array().is_some_and(|p| !p.is_empty())).then_some(status)
    })
    .await;
    let parent = &route["parents"][0];
    assert_eq!(parent["controllerName"], "kuryr.nephrite.io/l7");
    assert_eq!(parent["parentRef"]["name"], "web");
    assert_eq!(
        condition(&parent["conditions"], "Accepted")["status"],
        "True"
    );
    assert_eq!(
        condition(&parent["conditions"], "ResolvedRefs")["status"],
        "True"
    );
    // The rules service carries the header change and the router serves it: nothing of the
    // route goes unserved, so there is no Served condition.
    assert_eq!(
        condition(&parent["conditions"], "l7.kuryr.nephrite.io/Served"),
        &Value::Null,
        "{parent}"
    );
    // Another controller's class is left alone.
    assert_eq!(
        status(&client, "GatewayClass", None, "someone-else").await,
        Value::Null
    );

    // Traffic as the route says.
    eventually("the route is served", async || {
        // The router listens once it has its first rules.
        tokio::net::TcpStream::connect(http).await.ok()?;
        (get(http, "shop.example.com", "/cart/1").await.status == 200).then_some(())
    })
    .await;
    let reply = canary(http, "/cart/1").await;
    assert!(reply.body.starts_with("green"), "{}", reply.body);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let reply = get(http, "shop.example.com", "/cart/1").await;
        assert_eq!(reply.status, 200);
        seen.insert(reply.body.split(' ').next().unwrap_or_default().to_owned());
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["blue", "green"],
        "both weighted backends serve"
    );
    let redirect = get(http, "shop.example.com", "/old").await;
    assert_eq!(redirect.status, 301);
    assert_eq!(
        redirect.headers["location"].to_str().unwrap(),
        "https://shop.example.com/old"
    );
    assert_eq!(get(http, "shop.example.com", "/cartoon").await.status, 404);
    assert_eq!(get(http, "other.example.com", "/cart/1").await.status, 404);
    let statics = get(http, "shop.example.com", "/static/a.css").await;
    assert!(statics.body.starts_with("blue"), "{}", statics.body);
    assert_eq!(
        statics.headers["x-cache"], "hit",
        "the ResponseHeaderModifier"
    );
    controller.terminate();
}

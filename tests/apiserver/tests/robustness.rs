//! Bad input and the less travelled Kubernetes rules: every refusal is a `Status` with the code
//! a real apiserver gives, and nothing is written by a refused request.

mod support;

use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Client, ResourceExt};
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};
use support::gizmo_api;

/// Sends a raw request; returns the HTTP status and the body parsed as JSON (`null` if empty).
async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> anyhow::Result<(u16, Value)> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(kube::client::Body::from(body.to_vec()))?;
    let resp = client.send(req).await?;
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await?;
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{method} {path}: body is not JSON"))?
    };
    Ok((code, value))
}

/// Asserts a Status failure with `code`, `reason` and a message containing `needle`.
fn assert_status(got: &(u16, Value), code: u16, reason: &str, needle: &str) {
    let (http_code, body) = got;
    assert_eq!(*http_code, code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
}

const CM: &str = "/api/v1/namespaces/default/configmaps";
const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";

async fn make_cm(client: &Client, name: &str) -> anyhow::Result<Value> {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}});
    let (code, obj) = raw(client, "POST", CM, JSON, &serde_json::to_vec(&body)?).await?;
    assert_eq!(code, 201, "{obj}");
    Ok(obj)
}

fn gizmo_crd(with_status: bool) -> anyhow::Result<CustomResourceDefinition> {
    support::gizmo_crd(with_status, None)
}

const GIZMOS: &str = "/apis/test.nephrite.dev/v1/namespaces/default/gizmos";

#[tokio::test]
async fn malformed_and_mismatched_bodies_are_400() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let before = make_cm(&client, "a").await?;
    let a = format!("{CM}/a");

    let cases: [(&str, &str, &str, &[u8], &str); 9] = [
        ("POST", CM, JSON, b"{\"metadata\": ", "invalid JSON body"),
        ("POST", CM, "application/yaml", b"a: [", "invalid YAML body"),
        ("POST", CM, JSON, b"[1]", "must be a JSON object"),
        (
            "POST",
            CM,
            JSON,
            br#"{"kind":"Secret","metadata":{"name":"s"}}"#,
            "kind \"Secret\"",
        ),
        (
            "POST",
            CM,
            JSON,
            br#"{"apiVersion":"apps/v1","metadata":{"name":"s"}}"#,
            "apiVersion \"apps/v1\"",
        ),
        (
            "POST",
            CM,
            JSON,
            br#"{"metadata":{"name":"s","namespace":"kube-system"}}"#,
            "namespace of the provided object (kube-system)",
        ),
        (
            "PUT",
            &a,
            JSON,
            br#"{"metadata":{"name":"b"}}"#,
            "the name of the object (b) does not match the name on the URL (a)",
        ),
        ("PATCH", &a, MERGE, b"{", "invalid merge patch"),
        ("PATCH", &a, JSON_PATCH, br#"[{"op":"nope"}]"#, "index 0"),
    ];
    for (method, path, ct, body, needle) in cases {
        let got = raw(&client, method, path, ct, body).await?;
        assert_status(&got, 400, "BadRequest", needle);
    }
    // Unsupported media types are 415; unknown query parameters are ignored.
    let got = raw(&client, "PATCH", &a, JSON, b"{}").await?;
    assert_status(&got, 415, "UnsupportedMediaType", "application/json");
    let (code, _) = raw(
        &client,
        "GET",
        &format!("{a}?bogus=1&pretty=true"),
        JSON,
        b"",
    )
    .await?;
    assert_eq!(code, 200);
    // A resourceVersion beyond u64, a garbage continue token: 400.
    let got = raw(
        &client,
        "GET",
        &format!("{CM}?watch=true&resourceVersion=99999999999999999999999"),
        JSON,
        b"",
    )
    .await?;
    assert_status(&got, 400, "BadRequest", "invalid resourceVersion");
    let got = raw(
        &client,
        "GET",
        &format!("{CM}?limit=1&continue=%ff"),
        JSON,
        b"",
    )
    .await?;
    assert_status(&got, 400, "BadRequest", "invalid continue token");

    // DELETE preconditions that do not hold: 409, and the object stays.
    let wrong_uid = json!({"preconditions": {"uid": "not-the-uid"}});
    let got = raw(
        &client,
        "DELETE",
        &a,
        JSON,
        &serde_json::to_vec(&wrong_uid)?,
    )
    .await?;
    assert_status(&got, 409, "Conflict", "UID in precondition: not-the-uid");
    let wrong_rv = json!({"preconditions": {"resourceVersion": "1"}});
    let got = raw(&client, "DELETE", &a, JSON, &serde_json::to_vec(&wrong_rv)?).await?;
    assert_status(&got, 409, "Conflict", "ResourceVersion in precondition: 1");

    // Nothing above wrote anything.
    let (_, after) = raw(&client, "GET", &a, JSON, b"").await?;
    assert_eq!(after, before);
    Ok(())
}

#[tokio::test]
async fn patches_cannot_rename_move_or_change_uid() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let before = make_cm(&client, "a").await?;
    let a = format!("{CM}/a");
    let got = raw(&client, "PATCH", &a, MERGE, br#"{"metadata":{"name":"b"}}"#).await?;
    assert_status(
        &got,
        400,
        "BadRequest",
        "the name of the object (b) does not match the name on the URL (a)",
    );
    let rename = br#"[{"op":"replace","path":"/metadata/name","value":"b"}]"#;
    let got = raw(&client, "PATCH", &a, JSON_PATCH, rename).await?;
    assert_status(
        &got,
        400,
        "BadRequest",
        "does not match the name on the URL",
    );
    let unname = br#"[{"op":"remove","path":"/metadata/name"}]"#;
    let got = raw(&client, "PATCH", &a, JSON_PATCH, unname).await?;
    assert_status(&got, 400, "BadRequest", "the name of the object ()");
    let moved = br#"{"metadata":{"namespace":"kube-system"}}"#;
    let got = raw(&client, "PATCH", &a, MERGE, moved).await?;
    assert_status(&got, 400, "BadRequest", "namespace of the provided object");
    let uid = br#"{"metadata":{"uid":"another"},"data":{"k":"w"}}"#;
    let got = raw(&client, "PATCH", &a, MERGE, uid).await?;
    assert_status(&got, 422, "Invalid", "metadata.uid");
    let (_, after) = raw(&client, "GET", &a, JSON, b"").await?;
    assert_eq!(after, before, "nothing written");
    // Removing apiVersion from a built-in kind is harmless: it is the URL's.
    let strip =
        br#"[{"op":"remove","path":"/apiVersion"},{"op":"add","path":"/data/x","value":"1"}]"#;
    let (code, patched) = raw(&client, "PATCH", &a, JSON_PATCH, strip).await?;
    assert_eq!((code, &patched["apiVersion"]), (200, &json!("v1")));
    Ok(())
}

#[tokio::test]
async fn custom_resources_keep_type_and_count_status_as_spec() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &gizmo_crd(false)?)
        .await?;
    let api = gizmo_api(client.clone());
    let g: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.nephrite.dev/v1", "kind": "Gizmo",
        "metadata": {"name": "g"}, "spec": {"size": 1},
    }))?;
    let created = api.create(&PostParams::default(), &g).await?;
    let path = format!("{GIZMOS}/g");
    for (op, needle) in [
        (r#"[{"op":"remove","path":"/apiVersion"}]"#, "'apiVersion'"),
        (r#"[{"op":"remove","path":"/kind"}]"#, "'kind'"),
    ] {
        let got = raw(&client, "PATCH", &path, JSON_PATCH, op.as_bytes()).await?;
        assert_status(&got, 422, "Invalid", needle);
    }
    let got = raw(&client, "PATCH", &path, MERGE, br#"{"kind":"Widget"}"#).await?;
    assert_status(&got, 400, "BadRequest", "kind \"Widget\"");
    // Without the status subresource, Kubernetes bumps generation on status changes too.
    let s = api
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await?;
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(s.metadata.generation, Some(2));
    Ok(())
}

#[tokio::test]
async fn put_checks_name_and_uid_and_creates_only_where_kubernetes_does() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let before = make_cm(&client, "a").await?;
    let a = format!("{CM}/a");
    let got = raw(&client, "PUT", &a, JSON, br#"{"data":{"k":"w"}}"#).await?;
    assert_status(&got, 400, "BadRequest", "the name of the object ()");
    // A uid in the body is a precondition, even without a resourceVersion.
    let stale = br#"{"metadata":{"name":"a","uid":"old-uid"},"data":{"k":"w"}}"#;
    let got = raw(&client, "PUT", &a, JSON, stale).await?;
    assert_status(&got, 409, "Conflict", "UID in precondition: old-uid");
    let (_, after) = raw(&client, "GET", &a, JSON, b"").await?;
    assert_eq!(after, before, "nothing written");

    // PUT creates a missing Lease (201), but not a missing ConfigMap (404).
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader", "resourceVersion": "7"}, "spec": {"holderIdentity": "me"}});
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases/leader";
    let (code, created) = raw(&client, "PUT", leases, JSON, &serde_json::to_vec(&lease)?).await?;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["holderIdentity"], "me");
    assert!(created["metadata"]["uid"].is_string());
    let missing = br#"{"metadata":{"name":"nope"}}"#;
    let got = raw(&client, "PUT", &format!("{CM}/nope"), JSON, missing).await?;
    assert_status(&got, 404, "NotFound", "configmaps \"nope\" not found");
    Ok(())
}

#[tokio::test]
async fn create_refuses_a_resource_version() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let first = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "a"}}))?,
        )
        .await?;
    api.delete("a", &DeleteParams::default()).await?;
    // Re-creating the object as it was read (resourceVersion and all) fails on a real cluster.
    let err = api
        .create(&PostParams::default(), &first)
        .await
        .err()
        .context("create with a resourceVersion must fail")?;
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 500);
            assert!(s.message.contains("resourceVersion should not be set"));
        }
        other => bail!("expected a Status, got {other:?}"),
    }
    assert!(api.get_opt("a").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn apply_must_name_api_version_and_kind() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let path = format!("{CM}/ap?fieldManager=test");
    let apply = "application/apply-patch+yaml";
    // The classic mistake: an apply body without apiVersion/kind. Refused, absent or present.
    let bare = br#"{"metadata":{"name":"ap"},"data":{"a":"1"}}"#;
    let got = raw(&client, "PATCH", &path, apply, bare).await?;
    assert_status(
        &got,
        400,
        "BadRequest",
        "Incorrect version specified in apply patch",
    );
    let wrong_kind = br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"ap"}}"#;
    let got = raw(&client, "PATCH", &path, apply, wrong_kind).await?;
    assert_status(&got, 400, "BadRequest", "invalid object type");
    let full =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ap"},"data":{"a":"1"}}"#;
    let (code, _) = raw(&client, "PATCH", &path, apply, full).await?;
    assert_eq!(code, 201);
    let got = raw(&client, "PATCH", &path, apply, bare).await?;
    assert_status(
        &got,
        400,
        "BadRequest",
        "Incorrect version specified in apply patch",
    );
    Ok(())
}

#[tokio::test]
async fn terminating_namespace_refuses_new_content() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "team", "finalizers": ["test/hold"]}}),
        )?,
    )
    .await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let cm = |name: &str| serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}}));
    cms.create(&PostParams::default(), &cm("old")?).await?;
    nss.delete("team", &DeleteParams::default()).await?;
    let ns = nss.get("team").await?;
    assert!(ns.metadata.deletion_timestamp.is_some());
    assert_eq!(
        ns.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    assert!(
        cms.get_opt("old").await?.is_none(),
        "contents go while the namespace terminates"
    );
    let err = cms
        .create(&PostParams::default(), &cm("new")?)
        .await
        .err()
        .context("create in a terminating namespace")?;
    match err {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
            assert!(s.message.contains("because it is being terminated"));
        }
        other => bail!("expected a Status, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn watch_from_a_future_resource_version_waits_for_it() -> anyhow::Result<()> {
    let server = TestApiServer::builder()
        .bookmark_interval(Duration::from_millis(20))
        .start()
        .await?;
    let client = server.client()?;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let future = server.resource_version() + 3;
    let wp = WatchParams::default(); // allowWatchBookmarks=true
    let mut stream = api.watch(&wp, &future.to_string()).await?.boxed();
    for i in 0..3 {
        make_cm(&client, &format!("early-{i}")).await?;
    }
    // Bookmarks below the resourceVersion asked for would move the client backwards.
    tokio::time::sleep(Duration::from_millis(100)).await;
    make_cm(&client, "late").await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let event = tokio::time::timeout_at(deadline, stream.try_next())
            .await
            .context("timed out")??
            .context("watch ended")?;
        match event {
            WatchEvent::Bookmark(b) => {
                let rv: u64 = b.metadata.resource_version.parse()?;
                assert!(rv >= future, "bookmark at {rv}, below {future}");
            }
            WatchEvent::Added(o) => {
                assert_eq!(o.name_any(), "late", "events up to {future} are not sent");
                return Ok(());
            }
            other => bail!("expected ADDED late, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn crd_deleted_while_a_request_is_in_flight() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &gizmo_crd(true)?)
        .await?;
    let slow = Duration::from_millis(300);
    server.faults().add_latency("create", "gizmos", slow);
    server.faults().add_latency("watch", "gizmos", slow);
    let body = br#"{"apiVersion":"test.nephrite.dev/v1","kind":"Gizmo","metadata":{"name":"g"}}"#;
    let (c1, c2) = (client.clone(), client.clone());
    let create = tokio::spawn(async move { raw(&c1, "POST", GIZMOS, JSON, body).await });
    let watch =
        tokio::spawn(
            async move { raw(&c2, "GET", &format!("{GIZMOS}?watch=true"), JSON, b"").await },
        );
    tokio::time::sleep(Duration::from_millis(100)).await;
    crds.delete("gizmos.test.nephrite.dev", &DeleteParams::default())
        .await?;
    let created = create.await??;
    assert_status(&created, 404, "NotFound", "gizmos");
    // The watch gets a 404 instead of hanging on a resource nobody serves.
    let watched = tokio::time::timeout(Duration::from_secs(10), watch)
        .await
        .context("the watch must not hang")???;
    assert_status(&watched, 404, "NotFound", "gizmos");
    server.faults().clear();
    crds.create(&PostParams::default(), &gizmo_crd(true)?)
        .await?;
    let list = gizmo_api(client).list(&Default::default()).await?;
    assert!(list.items.is_empty(), "no object outlived its CRD");
    Ok(())
}

#[tokio::test]
async fn update_removing_the_last_finalizer_deletes_and_reports_it() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let held: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": ["test/x"]}}))?;
    api.create(&PostParams::default(), &held).await?;
    api.delete("held", &DeleteParams::default()).await?;
    let mut stream = api
        .watch(
            &WatchParams::default(),
            &server.resource_version().to_string(),
        )
        .await?
        .boxed();
    let mut last = api.get("held").await?;
    last.metadata.finalizers = None;
    let returned = api.replace("held", &PostParams::default(), &last).await?;
    assert!(returned.metadata.deletion_timestamp.is_some());
    assert!(returned.finalizers().is_empty());
    assert!(api.get_opt("held").await?.is_none());
    let event = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .context("timed out")??
        .context("watch ended")?;
    match event {
        WatchEvent::Deleted(o) => {
            assert_eq!(o.resource_version(), returned.resource_version());
        }
        other => bail!("expected DELETED, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn selected_pages_have_no_duplicates_or_gaps() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..12 {
        let parity = if i % 2 == 0 { "even" } else { "odd" };
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("c{i:02}"), "labels": {"p": parity}}}),
        )?;
        api.create(&PostParams::default(), &cm).await?;
    }
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = kube::api::ListParams::default().labels("p=even").limit(2);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await?;
        assert!(page.metadata.remaining_item_count.is_none());
        seen.extend(page.items.iter().map(|o| o.name_any()));
        if seen.len() == 2 {
            // Objects already returned go away between pages: the rest still comes in order.
            api.delete("c00", &DeleteParams::default()).await?;
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(seen, ["c00", "c02", "c04", "c06", "c08", "c10"]);
    Ok(())
}

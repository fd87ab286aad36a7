//! The status subresource and the CRD lifecycle, watches and bookmarks, streaming lists, faults
//! and request counts, and discovery.

mod support;

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};
use support::{cm, gizmo_api, status_of};

/// The Gizmo CRD with a schema whose `required` fields the server enforces.
fn gizmo_crd(with_status: bool) -> anyhow::Result<CustomResourceDefinition> {
    support::gizmo_crd(
        with_status,
        Some(json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "required": ["size"], "properties": {
                    "size": {"type": "integer"},
                    "parts": {"type": "array", "items": {"type": "object", "required": ["id"]}},
                }},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            },
        })),
    )
}

fn gizmo(name: &str, body: Value) -> anyhow::Result<DynamicObject> {
    let mut v =
        json!({"apiVersion": "test.nephrite.dev/v1", "kind": "Gizmo", "metadata": {"name": name}});
    if let (Some(m), Some(b)) = (v.as_object_mut(), body.as_object()) {
        m.extend(b.clone());
    }
    Ok(serde_json::from_value(v)?)
}

fn rv(o: &DynamicObject) -> anyhow::Result<u64> {
    Ok(o.resource_version().context("rv")?.parse()?)
}

#[tokio::test]
async fn status_subresource_rules_and_crd_lifecycle() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .create(&PostParams::default(), &gizmo_crd(true)?)
        .await?;
    let accepted = crd.status.as_ref().and_then(|s| s.accepted_names.as_ref());
    assert_eq!(accepted.map(|n| n.plural.as_str()), Some("gizmos"));
    let api = gizmo_api(client.clone());
    let pp = PatchParams::default();

    // Status is dropped on create when the subresource is on.
    let g = api
        .create(
            &PostParams::default(),
            &gizmo("g", json!({"spec": {"size": 1}, "status": {"phase": "x"}}))?,
        )
        .await?;
    assert!(g.data.get("status").is_none(), "status ignored on create");
    assert_eq!(g.metadata.generation, Some(1));

    // Main-resource writes ignore .status; spec changes bump generation.
    let p = api
        .patch(
            "g",
            &pp,
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"phase": "ignored"}})),
        )
        .await?;
    assert!(
        p.data.get("status").is_none(),
        "status ignored on main patch"
    );
    assert_eq!(p.metadata.generation, Some(2));
    assert!(rv(&p)? > rv(&g)?);

    // Status writes change only status; generation stays.
    let s = api
        .patch_status(
            "g",
            &pp,
            &Patch::Merge(json!({"spec": {"size": 99}, "status": {"phase": "Ready"}})),
        )
        .await?;
    assert_eq!(
        s.data.pointer("/spec/size"),
        Some(&json!(2)),
        "spec ignored on status write"
    );
    assert_eq!(s.data.pointer("/status/phase"), Some(&json!("Ready")));
    assert_eq!(s.metadata.generation, Some(2));
    assert!(rv(&s)? > rv(&p)?);

    // PUT on /status with a changed spec: only status lands.
    let mut put = s.clone();
    put.data["spec"] = json!({"size": 50});
    put.data["status"] = json!({"phase": "Done"});
    let s2 = api
        .replace_status("g", &PostParams::default(), &put)
        .await?;
    assert_eq!(s2.data.pointer("/spec/size"), Some(&json!(2)));
    assert_eq!(s2.data.pointer("/status/phase"), Some(&json!("Done")));

    // A PUT of the main resource keeps status; metadata-only changes keep generation.
    let mut main = s2.clone();
    main.data["status"] = json!({"phase": "Clobbered"});
    main.labels_mut().insert("l".into(), "1".into());
    let m = api.replace("g", &PostParams::default(), &main).await?;
    assert_eq!(m.data.pointer("/status/phase"), Some(&json!("Done")));
    assert_eq!(m.metadata.generation, Some(2), "labels are not spec");
    assert!(rv(&m)? > rv(&s2)?);

    // Required fields of the schema.
    let (code, reason, message) = status_of(
        api.create(&PostParams::default(), &gizmo("bad", json!({"spec": {}}))?)
            .await
            .err()
            .context("missing spec.size")?,
    )?;
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(message.contains("spec.size"), "{message}");
    let (code, _, message) = status_of(
        api.patch(
            "g",
            &pp,
            &Patch::Merge(json!({"spec": {"parts": [{"id": 1}, {}]}})),
        )
        .await
        .err()
        .context("missing spec.parts[1].id")?,
    )?;
    assert_eq!(code, 422);
    assert!(message.contains("spec.parts[1].id"), "{message}");

    // Discovery lists the resource and its status subresource.
    let list: Value = client
        .request(http::Request::get("/apis/test.nephrite.dev/v1").body(Vec::new())?)
        .await?;
    let served: Vec<&str> = list["resources"]
        .as_array()
        .context("resources")?
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(served, ["gizmos", "gizmos/status"]);

    // Deleting the CRD stops serving it and drops its objects.
    crds.delete("gizmos.test.nephrite.dev", &DeleteParams::default())
        .await?;
    let (code, _, _) = status_of(api.get("g").await.err().context("unserved")?)?;
    assert_eq!(code, 404);
    crds.create(&PostParams::default(), &gizmo_crd(false)?)
        .await?;
    assert!(
        api.get_opt("g").await?.is_none(),
        "objects went with the CRD"
    );
    // Without the subresource, status is written through the main resource.
    let plain = api
        .create(
            &PostParams::default(),
            &gizmo(
                "h",
                json!({"spec": {"size": 1}, "status": {"phase": "kept"}}),
            )?,
        )
        .await?;
    assert_eq!(plain.data.pointer("/status/phase"), Some(&json!("kept")));
    let (code, _, _) = status_of(
        api.get_status("h")
            .await
            .err()
            .context("no status subresource")?,
    )?;
    assert_eq!(code, 404);
    Ok(())
}

/// Reads watch events until `done` says stop, failing after a generous deadline.
async fn collect_until<K, S>(
    stream: &mut S,
    mut done: impl FnMut(&[WatchEvent<K>]) -> bool,
) -> anyhow::Result<Vec<WatchEvent<K>>>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<K>>> + Unpin,
{
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done(&events) {
        let next = tokio::time::timeout_at(deadline, stream.try_next())
            .await
            .context("timed out waiting for watch events")??;
        match next {
            Some(ev) => events.push(ev),
            None => bail!("watch ended early"),
        }
    }
    Ok(events)
}

#[tokio::test]
async fn watches_bookmarks_and_expiry() -> anyhow::Result<()> {
    let server = TestApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .event_history(8)
        .start()
        .await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    let pp = PostParams::default();
    api.create(&pp, &cm("pre", &[("w", "1")])).await?;
    let start = api.list(&ListParams::default()).await?;
    let start_rv = start.metadata.resource_version.context("list rv")?;

    let wp = WatchParams::default().labels("w=1");
    let mut stream = api.watch(&wp, &start_rv).await?.boxed();
    let created = api.create(&pp, &cm("live", &[("w", "1")])).await?;
    let created_rv: u64 = created.resource_version().context("rv")?.parse()?;
    // Leaving the selector is seen as DELETED.
    api.patch(
        "live",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"w": "2"}}})),
    )
    .await?;
    let events = collect_until(&mut stream, |evs| {
        evs.iter().any(|e| matches!(e, WatchEvent::Bookmark(b) if b.metadata.resource_version.parse::<u64>().unwrap_or(0) > created_rv))
    })
    .await?;
    let kinds: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Added(o) => Some(format!("ADDED {}", o.name_any())),
            WatchEvent::Modified(o) => Some(format!("MODIFIED {}", o.name_any())),
            WatchEvent::Deleted(o) => Some(format!("DELETED {}", o.name_any())),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["ADDED live", "DELETED live"]);

    // resourceVersion "0": synthetic ADDED for what exists, then live events.
    let mut from_zero = api
        .watch(&WatchParams::default().labels("w=1"), "0")
        .await?
        .boxed();
    let first = collect_until(&mut from_zero, |evs| !evs.is_empty()).await?;
    assert!(matches!(&first[0], WatchEvent::Added(o) if o.name_any() == "pre"));

    // Push the start rv out of the 8-event history: the watch gets a 410 Expired ERROR.
    for i in 0..12 {
        api.create(&pp, &cm(&format!("fill-{i}"), &[])).await?;
    }
    let mut expired = api.watch(&WatchParams::default(), &start_rv).await?.boxed();
    let evs = collect_until(&mut expired, |evs| !evs.is_empty()).await?;
    match &evs[0] {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => bail!("expected a 410 ERROR event, got {other:?}"),
    }

    // timeoutSeconds ends the stream.
    let began = Instant::now();
    let mut short = api
        .watch(
            &WatchParams::default().timeout(1),
            &server.resource_version().to_string(),
        )
        .await?
        .boxed();
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        while short.try_next().await?.is_some() {}
        anyhow::Ok(())
    })
    .await;
    assert!(ended.is_ok(), "stream ended by timeoutSeconds");
    assert!(began.elapsed() >= Duration::from_millis(900));
    Ok(())
}

#[tokio::test]
async fn faults_and_request_counts() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    api.create(&PostParams::default(), &cm("f", &[])).await?;
    server.requests().reset();

    server.faults().fail_next("get", "configmaps", 2, 500);
    for _ in 0..2 {
        let (code, reason, message) = status_of(api.get("f").await.err().context("injected")?)?;
        assert_eq!((code, reason.as_str()), (500, "InternalError"));
        assert!(message.contains("injected"), "{message}");
    }
    api.get("f").await?;
    assert_eq!(server.requests().count("get", "configmaps"), 3);
    assert_eq!(server.requests().writes("configmaps"), 0);

    // kube 5 clients retry 429/503/504 by themselves: two 503s cost one call three requests.
    server.requests().reset();
    server.faults().fail_next("get", "configmaps", 2, 503);
    api.get("f").await?;
    assert_eq!(server.requests().count("get", "configmaps"), 3);

    server
        .faults()
        .add_latency("list", "*", Duration::from_millis(300));
    let began = Instant::now();
    api.list(&ListParams::default()).await?;
    assert!(
        began.elapsed() >= Duration::from_millis(300),
        "latency applied"
    );
    server.faults().clear();

    api.patch_status("f", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .err()
        .context("configmaps have no status subresource")?;
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "b"}})),
    )
    .await?;
    assert_eq!(server.requests().count("patch", "configmaps"), 1);
    assert_eq!(server.requests().count("list", "*"), 1);
    Ok(())
}

#[tokio::test]
async fn discovery_and_version() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let info = client.apiserver_version().await?;
    assert_eq!(info.major, "1");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &gizmo_crd(true)?)
        .await?;
    let discovery = kube::Discovery::new(client.clone()).run().await?;
    let mut found = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            found.push((ar.group.clone(), ar.plural.clone(), caps.scope.clone()));
        }
    }
    let has = |g: &str, p: &str| found.iter().any(|(fg, fp, _)| fg == g && fp == p);
    for (g, p) in [
        ("", "pods"),
        ("", "namespaces"),
        ("", "nodes"),
        ("discovery.k8s.io", "endpointslices"),
        ("coordination.k8s.io", "leases"),
        ("networking.k8s.io", "ingresses"),
        ("networking.k8s.io", "ingressclasses"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("test.nephrite.dev", "gizmos"),
    ] {
        assert!(has(g, p), "discovery serves {g}/{p}: {found:?}");
    }
    // Unknown paths get a Status 404.
    let (code, reason, _) = status_of(
        client
            .request_text(http::Request::get("/openapi/v2").body(Vec::new())?)
            .await
            .err()
            .context("openapi is not served")?,
    )?;
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    Ok(())
}

#[tokio::test]
async fn streaming_list_watcher_and_crd_deletion_ends_watches() -> anyhow::Result<()> {
    use kube::runtime::watcher::{self, Event};
    let server = TestApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await?;
    let client = server.client()?;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for n in ["s1", "s2"] {
        api.create(&PostParams::default(), &cm(n, &[("s", "1")]))
            .await?;
    }
    // sendInitialEvents=true: ADDED for what exists, then a BOOKMARK marking the end.
    let cfg = watcher::Config::default().labels("s=1").streaming_lists();
    let mut stream = watcher::watcher(api.clone(), cfg).boxed();
    let mut initial = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.try_next())
            .await
            .context("timed out waiting for the initial events")??
            .context("watcher ended")?;
        match ev {
            Event::Init => {}
            Event::InitApply(o) => initial.push(o.name_any()),
            Event::InitDone => break,
            other => bail!("unexpected event before InitDone: {other:?}"),
        }
    }
    assert_eq!(initial, ["s1", "s2"]);
    api.create(&PostParams::default(), &cm("s3", &[("s", "1")]))
        .await?;
    let ev = tokio::time::timeout_at(deadline, stream.try_next())
        .await
        .context("timed out waiting for a live event")??;
    assert!(matches!(ev, Some(Event::Apply(o)) if o.name_any() == "s3"));

    // Deleting a CRD ends the watches of its resource.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &gizmo_crd(true)?)
        .await?;
    let gizmos = gizmo_api(client.clone());
    let mut gw = gizmos.watch(&WatchParams::default(), "0").await?.boxed();
    crds.delete("gizmos.test.nephrite.dev", &DeleteParams::default())
        .await?;
    let end = tokio::time::timeout(Duration::from_secs(30), async {
        while gw.try_next().await?.is_some() {}
        anyhow::Ok(())
    })
    .await;
    assert!(end.is_ok(), "the gizmos watch ended with its CRD");
    Ok(())
}

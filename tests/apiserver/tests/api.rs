//! The REST semantics clients rely on: conflicts, patches, apply, selectors, paging, garbage
//! collection, the status subresource, watches and bookmarks, faults, discovery.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::ObjectMeta;
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};
use support::gizmo_api;

/// The Status of a failed call: (code, reason, message).
fn status_of(err: kube::Error) -> anyhow::Result<(u16, String, String)> {
    match err {
        kube::Error::Api(s) => Ok((s.code, s.reason.clone(), s.message.clone())),
        other => bail!("expected an API error with a Status body, got {other:?}"),
    }
}

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
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

fn names<K: ResourceExt>(items: &[K]) -> Vec<String> {
    items.iter().map(|o| o.name_any()).collect()
}

#[tokio::test]
async fn conflicts_and_create_errors() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    let created = api.create(&PostParams::default(), &cm("a", &[])).await?;
    let rv1 = created.resource_version().context("rv on create")?;
    assert!(created.uid().is_some() && created.metadata.creation_timestamp.is_some());

    let mut fresh = created.clone();
    fresh.data = Some(BTreeMap::from([("k".into(), "w".into())]));
    let updated = api.replace("a", &PostParams::default(), &fresh).await?;
    let rv2 = updated.resource_version().context("rv on update")?;
    assert!(rv2.parse::<u64>()? > rv1.parse::<u64>()?);

    // The same body again still carries rv1: stale → 409 Conflict.
    let (code, reason, message) = status_of(
        api.replace("a", &PostParams::default(), &fresh)
            .await
            .err()
            .context("a stale update must fail")?,
    )?;
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(
        message.contains("the object has been modified"),
        "{message}"
    );

    // Without a resourceVersion the update is unconditional.
    let mut unconditional = fresh.clone();
    unconditional.metadata.resource_version = None;
    unconditional.data = Some(BTreeMap::from([("k".into(), "x".into())]));
    api.replace("a", &PostParams::default(), &unconditional)
        .await?;

    let (code, reason, _) = status_of(
        api.create(&PostParams::default(), &cm("a", &[]))
            .await
            .err()
            .context("duplicate create")?,
    )?;
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));

    let missing: Api<ConfigMap> = Api::namespaced(server.client()?, "nope");
    let (code, reason, message) = status_of(
        missing
            .create(&PostParams::default(), &cm("a", &[]))
            .await
            .err()
            .context("create in a missing namespace")?,
    )?;
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    assert!(
        message.contains("namespaces \"nope\" not found"),
        "{message}"
    );

    let mut generated = cm("", &[]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let g = api.create(&PostParams::default(), &generated).await?;
    assert!(g.name_any().starts_with("gen-") && g.name_any().len() > 4);

    let (code, _, _) = status_of(api.get("absent").await.err().context("get absent")?)?;
    assert_eq!(code, 404);
    Ok(())
}

#[tokio::test]
async fn merge_and_json_patches() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    api.create(&PostParams::default(), &cm("p", &[])).await?;

    let merged = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"a": "1"}}, "data": {"k": null, "n": "2"}}),
            ),
        )
        .await?;
    assert_eq!(merged.labels().get("a").map(String::as_str), Some("1"));
    assert_eq!(
        merged.data,
        Some(BTreeMap::from([("n".to_string(), "2".to_string())]))
    );

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/n", "value": "2"},
        {"op": "replace", "path": "/data/n", "value": "3"},
        {"op": "add", "path": "/metadata/labels/b", "value": "x"},
    ]))?;
    let patched = api
        .patch("p", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await?;
    assert_eq!(
        patched
            .data
            .as_ref()
            .and_then(|d| d.get("n"))
            .map(String::as_str),
        Some("3")
    );

    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/n", "value": "wrong"},
        {"op": "replace", "path": "/data/n", "value": "4"},
    ]))?;
    let (code, reason, message) = status_of(
        api.patch("p", &PatchParams::default(), &Patch::Json::<()>(failing))
            .await
            .err()
            .context("a failing test op must fail the patch")?,
    )?;
    assert_eq!((code, reason.as_str()), (422, "Invalid"), "{message}");
    let after = api.get("p").await?;
    assert_eq!(
        after.resource_version(),
        patched.resource_version(),
        "nothing written"
    );

    // A test for null passes on a missing path (kube-runtime's finalizer helper relies on it).
    let add_fin: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]},
    ]))?;
    let with_fin = api
        .patch("p", &PatchParams::default(), &Patch::Json::<()>(add_fin))
        .await?;
    assert_eq!(with_fin.finalizers(), ["x/y".to_string()]);

    // Strategic merge is handled as a merge patch.
    let strategic = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"s": "1"}})),
        )
        .await?;
    assert_eq!(
        strategic
            .data
            .as_ref()
            .and_then(|d| d.get("s"))
            .map(String::as_str),
        Some("1")
    );

    // A patch carrying a stale resourceVersion conflicts.
    let (code, _, _) = status_of(
        api.patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "data": {"z": "1"}})),
        )
        .await
        .err()
        .context("stale rv in a patch")?,
    )?;
    assert_eq!(code, 409);

    // A no-op patch writes nothing: same resourceVersion.
    let noop = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"s": "1"}})),
        )
        .await?;
    assert_eq!(noop.resource_version(), strategic.resource_version());
    Ok(())
}

#[tokio::test]
async fn apply_creates_and_requires_field_manager() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let pp = PatchParams::apply("nephrite-test").force();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ap"}, "data": {"a": "1"}});
    let created = api.patch("ap", &pp, &Patch::Apply(&body)).await?;
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.uid().is_some());
    let body2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ap"}, "data": {"a": "2"}});
    let applied = api.patch("ap", &pp, &Patch::Apply(&body2)).await?;
    assert_eq!(applied.uid(), created.uid());
    assert_eq!(
        applied
            .data
            .as_ref()
            .and_then(|d| d.get("a"))
            .map(String::as_str),
        Some("2")
    );

    // YAML is accepted too.
    let req = http::Request::patch("/api/v1/namespaces/default/configmaps/yml?fieldManager=m")
        .header("content-type", "application/apply-patch+yaml")
        .body(
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\ndata:\n  y: z\n".to_vec(),
        )?;
    let yml: ConfigMap = client.request(req).await?;
    assert_eq!(yml.name_any(), "yml");

    let req = http::Request::patch("/api/v1/namespaces/default/configmaps/nofm")
        .header("content-type", "application/apply-patch+yaml")
        .body(serde_json::to_vec(&body)?)?;
    let (code, reason, message) = status_of(
        client
            .request_text(req)
            .await
            .err()
            .context("apply without fieldManager")?,
    )?;
    assert_eq!((code, reason.as_str()), (400, "BadRequest"));
    assert!(message.contains("fieldManager"), "{message}");
    Ok(())
}

#[tokio::test]
async fn selectors_and_all_namespace_lists() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let system: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    api.create(
        &PostParams::default(),
        &cm("web", &[("app", "web"), ("tier", "front")]),
    )
    .await?;
    api.create(
        &PostParams::default(),
        &cm("db", &[("app", "db"), ("tier", "back")]),
    )
    .await?;
    api.create(&PostParams::default(), &cm("bare", &[])).await?;
    system
        .create(&PostParams::default(), &cm("sys", &[("app", "web")]))
        .await?;

    let select = |sel: &'static str| {
        let api = api.clone();
        async move {
            let list = api.list(&ListParams::default().labels(sel)).await?;
            anyhow::Ok(names(&list.items))
        }
    };
    assert_eq!(select("app=web").await?, ["web"]);
    assert_eq!(select("app==web").await?, ["web"]);
    assert_eq!(select("app!=web").await?, ["bare", "db"]);
    assert_eq!(select("app in (web,db)").await?, ["db", "web"]);
    assert_eq!(select("app notin (web)").await?, ["bare", "db"]);
    assert_eq!(select("tier").await?, ["db", "web"]);
    assert_eq!(select("!tier").await?, ["bare"]);
    assert_eq!(select("app,tier=back").await?, ["db"]);

    let by_name = api
        .list(&ListParams::default().fields("metadata.name=db"))
        .await?;
    assert_eq!(names(&by_name.items), ["db"]);
    let not_name = api
        .list(&ListParams::default().fields("metadata.name!=db"))
        .await?;
    assert_eq!(names(&not_name.items), ["bare", "web"]);

    let all: Api<ConfigMap> = Api::all(client.clone());
    let everywhere = all.list(&ListParams::default().labels("app=web")).await?;
    let mut found: Vec<(String, String)> = everywhere
        .items
        .iter()
        .map(|o| (o.namespace().unwrap_or_default(), o.name_any()))
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("default".to_string(), "web".to_string()),
            ("kube-system".to_string(), "sys".to_string())
        ]
    );
    let in_system = all
        .list(&ListParams::default().fields("metadata.namespace=kube-system"))
        .await?;
    assert_eq!(names(&in_system.items), ["sys"]);
    assert!(everywhere.metadata.resource_version.is_some());

    let (code, _, _) = status_of(
        api.list(&ListParams::default().labels("app in (x"))
            .await
            .err()
            .context("bad selector")?,
    )?;
    assert_eq!(code, 400);
    Ok(())
}

#[tokio::test]
async fn paging_with_continue() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    for i in 0..25 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), &[]))
            .await?;
    }
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    let mut list_rv = None;
    loop {
        let mut lp = ListParams::default().limit(10);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await?;
        pages += 1;
        assert!(page.items.len() <= 10);
        if pages == 1 {
            assert_eq!(page.metadata.remaining_item_count, Some(15));
            list_rv = page.metadata.resource_version.clone();
        } else {
            assert_eq!(
                page.metadata.resource_version, list_rv,
                "pages share the list rv"
            );
        }
        seen.extend(names(&page.items));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    let want: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(seen, want);

    let (code, _, _) = status_of(
        api.list(&ListParams::default().continue_token("zz"))
            .await
            .err()
            .context("bad continue token")?,
    )?;
    assert_eq!(code, 400);
    Ok(())
}

fn owned_by(name: &str, owner: &ConfigMap, finalizers: &[&str]) -> anyhow::Result<ConfigMap> {
    let mut dep = cm(name, &[]);
    dep.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.name_any(),
        uid: owner.uid().context("owner uid")?,
        block_owner_deletion: Some(true),
        ..Default::default()
    }]);
    if !finalizers.is_empty() {
        dep.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    }
    Ok(dep)
}

#[tokio::test]
async fn garbage_collection_background_foreground_orphan() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    let pp = PostParams::default();

    // Background (the default): the owner goes at once, then its dependents.
    let o1 = api.create(&pp, &cm("o1", &[])).await?;
    api.create(&pp, &owned_by("d1", &o1, &[])?).await?;
    api.create(&pp, &owned_by("d2", &o1, &[])?).await?;
    api.delete("o1", &DeleteParams::background()).await?;
    for n in ["o1", "d1", "d2"] {
        assert!(api.get_opt(n).await?.is_none(), "{n} is gone");
    }

    // Foreground: the owner waits (foregroundDeletion) until its dependents are gone.
    let o2 = api.create(&pp, &cm("o2", &[])).await?;
    api.create(&pp, &owned_by("d3", &o2, &["test/hold"])?)
        .await?;
    api.create(&pp, &owned_by("d4", &o2, &[])?).await?;
    let pending = api
        .delete("o2", &DeleteParams::foreground())
        .await?
        .left()
        .context("foreground delete returns the owner")?;
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(
        pending
            .finalizers()
            .iter()
            .any(|f| f == "foregroundDeletion")
    );
    let owner = api.get("o2").await?;
    assert!(
        owner.finalizers().iter().any(|f| f == "foregroundDeletion"),
        "owner still held"
    );
    assert!(
        api.get_opt("d4").await?.is_none(),
        "d4 (no finalizer) deleted"
    );
    let d3 = api.get("d3").await?;
    assert!(
        d3.metadata.deletion_timestamp.is_some(),
        "d3 is terminating"
    );
    api.patch(
        "d3",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    assert!(
        api.get_opt("d3").await?.is_none(),
        "d3 gone once its finalizer is removed"
    );
    assert!(
        api.get_opt("o2").await?.is_none(),
        "o2 released after its dependents"
    );

    // Orphan: the owner goes, dependents stay without the owner reference.
    let o3 = api.create(&pp, &cm("o3", &[])).await?;
    api.create(&pp, &owned_by("d5", &o3, &[])?).await?;
    api.delete("o3", &DeleteParams::orphan()).await?;
    assert!(api.get_opt("o3").await?.is_none());
    let d5 = api.get("d5").await?;
    assert!(d5.owner_references().is_empty(), "owner reference removed");

    // Deletion with a finalizer: kept with deletionTimestamp until the finalizer goes.
    api.create(&pp, &owned_by("f1", &api.get("d5").await?, &["test/x"])?)
        .await?;
    api.delete("d5", &DeleteParams::default()).await?;
    let f1 = api.get("f1").await?;
    assert!(
        f1.metadata.deletion_timestamp.is_some(),
        "dependent of d5 terminating"
    );
    let json_remove: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "test/x"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]))?;
    api.patch(
        "f1",
        &PatchParams::default(),
        &Patch::Json::<()>(json_remove),
    )
    .await?;
    assert!(api.get_opt("f1").await?.is_none());
    Ok(())
}

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

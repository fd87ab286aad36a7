//! The REST semantics clients rely on: conflicts, patches, apply, selectors, paging and garbage
//! collection. (The status subresource, CRDs, watches, faults and discovery are in
//! `crds_and_watches.rs`.)

mod support;

use std::collections::BTreeMap;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nephrite_test_apiserver::TestApiServer;
use serde_json::json;
use support::{cm, status_of};

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

#[tokio::test]
async fn workloads_and_rbac_are_served() -> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};

    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "controller"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "controller"}},
            "template": {
                "metadata": {"labels": {"app": "controller"}},
                "spec": {"containers": [{"name": "manager", "image": "example/manager:v1"}]},
            },
        },
    }))?;
    deployments
        .create(&PostParams::default(), &deployment)
        .await?;
    let patched = deployments
        .patch_status(
            "controller",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 1}})),
        )
        .await?;
    assert_eq!(patched.status.and_then(|s| s.ready_replicas), Some(1));

    // RBAC names are path segments: `system:` names are fine, a `/` is not.
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "system:nephrite:manager"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
    }))?;
    roles.create(&PostParams::default(), &role).await?;
    let mut bad = role.clone();
    bad.metadata.name = Some("a/b".into());
    let err = roles
        .create(&PostParams::default(), &bad)
        .await
        .err()
        .context("a ClusterRole named a/b was accepted")?;
    let (code, reason, message) = status_of(err)?;
    assert_eq!((code, reason.as_str()), (422, "Invalid"), "{message}");
    assert!(message.contains("may not contain '/'"), "{message}");
    let bindings: Api<ClusterRoleBinding> = Api::all(client);
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "nephrite-manager"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:nephrite:manager"},
        "subjects": [{"kind": "ServiceAccount", "name": "manager", "namespace": "capi-system"}],
    }))?;
    bindings.create(&PostParams::default(), &binding).await?;
    assert_eq!(
        names(&roles.list(&ListParams::default()).await?.items),
        ["system:nephrite:manager"]
    );
    Ok(())
}

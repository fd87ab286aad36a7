//! The Data API and the preparation loop, driven over gRPC against a daemon on loopback.

mod support;

use nephrite_krm::{Package, keys};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use support::*;
use tonic::Code;

#[tokio::test]
async fn create_merges_into_the_template_and_prepares_at_once() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    register_template(&mut client, "nf/gateway:v1", GATEWAY).await;
    register_site(&mut client, "dc/a", "metro").await;
    let merge = "apiVersion: v1
kind: ConfigMap
metadata:
  name: tuning
  annotations: {nephio.org/rename: gateway, nephio.org/merge: Override}
data: {workers: '8'}
---
apiVersion: v1
kind: Secret
metadata: {name: extra}
";
    let created = client
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "nf/gateway:v1".into(),
            site_id: "dc/a".into(),
            merge_package_yaml: merge.into(),
            merge_metadata: [("owner".to_owned(), "team-a".to_owned())].into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(created.created);
    let deployment = get(&mut client, &created.deployment_id).await;
    let info = deployment.info.unwrap();
    assert!(
        info.prepared && info.approved,
        "nothing preparable: prepared and auto-approved"
    );
    assert_eq!(info.template_id, "nf/gateway:v1");
    assert_eq!(
        info.metadata
            .get("NetworkFunction.type")
            .map(String::as_str),
        Some("gateway")
    );
    assert_eq!(
        info.metadata.get("owner").map(String::as_str),
        Some("team-a")
    );

    let package = Package::from_yaml(&deployment.package_yaml).unwrap();
    let kinds: Vec<_> = package.iter().map(|o| o.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["ConfigMap", "NetworkFunction", "Secret", "Deployment"]
    );
    let gateway = &package.objects()[0];
    assert_eq!(gateway.body["data"]["workers"], "8");
    assert_eq!(
        gateway.body["data"]["mode"], "fast",
        "Override keeps other keys"
    );
    let resource = &package.objects()[3];
    assert_eq!(resource.annotation(keys::PREPARED), Some("true"));
    assert_eq!(resource.spec().unwrap()["siteId"], "dc/a");

    // Listing by metadata pattern, template pattern and state.
    let rows = list(
        &mut client,
        pb::ListDeploymentsRequest {
            metadata_patterns: [("NetworkFunction.type".to_owned(), "gate*".to_owned())].into(),
            template_id_patterns: vec!["nf/**".into()],
            prepared: Some(true),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(rows.len(), 1);
    let none = list(
        &mut client,
        pb::ListDeploymentsRequest {
            metadata_patterns: [("NetworkFunction.type".to_owned(), "smf".to_owned())].into(),
            ..Default::default()
        },
    )
    .await;
    assert!(none.is_empty());
    daemon.stop().await;
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_and_nothing_is_stored() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    register_template(&mut client, "nf/gateway:v1", GATEWAY).await;

    let err = client
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "nf/missing".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains("nf/missing"), "{}", err.message());

    let err = client
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "nf/gateway:v1".into(),
            site_id: "dc/nowhere".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains("dc/nowhere"));

    let err = client
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "nf/gateway:v1".into(),
            merge_package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [\n".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("line"), "{}", err.message());

    let err = client
        .register_template(pb::RegisterTemplateRequest {
            id: "bad id".into(),
            package_yaml: GATEWAY.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("bad id"));

    let err = client
        .list_deployments(pb::ListDeploymentsRequest {
            template_id_patterns: vec!["a***".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    assert!(
        list(&mut client, Default::default()).await.is_empty(),
        "nothing stored"
    );
    daemon.stop().await;
}

#[tokio::test]
async fn placement_creates_one_child_per_site_and_reprepare_adds_none() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    register_template(&mut client, "nf/gateway:v1", GATEWAY).await;
    register_template(
        &mut client,
        "topo/metro",
        &topology("nf/gateway:v1", "metro"),
    )
    .await;
    for site in ["dc/a", "dc/b"] {
        register_site(&mut client, site, "metro").await;
    }
    register_site(&mut client, "dc/far", "rural").await;

    let parent = create(&mut client, "topo/metro", "").await;
    let prepared = wait_prepared(&mut client, &parent).await;
    let kids = children(&mut client, &parent).await;
    let mut sites: Vec<_> = kids.iter().map(|k| k.site_id.clone()).collect();
    sites.sort();
    assert_eq!(sites, ["dc/a", "dc/b"]);
    for kid in &kids {
        assert!(kid.prepared);
        let package =
            Package::from_yaml(&get(&mut client, &kid.deployment_id).await.package_yaml).unwrap();
        let gateway = &package.objects()[0];
        assert_eq!(
            gateway.body["data"]["workers"], "8",
            "placement merge applied"
        );
        assert_eq!(gateway.body["data"]["mode"], "fast");
    }

    // Re-prepare (annotation removed on the Placement and the package): no second child; a new
    // metro site registered meanwhile is picked up.
    register_site(&mut client, "dc/c", "metro").await;
    let mut package = Package::from_yaml(&prepared.package_yaml).unwrap();
    for object in package.iter_mut() {
        object.remove_annotation(keys::PREPARED);
    }
    client
        .update_deployment(pb::UpdateDeploymentRequest {
            deployment_id: parent.clone(),
            package_yaml: package.to_yaml(),
            modification_token: String::new(),
        })
        .await
        .unwrap();
    wait_prepared(&mut client, &parent).await;
    let kids = children(&mut client, &parent).await;
    assert_eq!(kids.len(), 3, "dc/a and dc/b kept, dc/c added: {kids:?}");

    // Deleting the parent deletes its children.
    let deleted = client
        .delete_deployment(pb::DeleteRequest { id: parent.clone() })
        .await
        .unwrap()
        .into_inner();
    assert!(deleted.deleted);
    assert!(list(&mut client, Default::default()).await.is_empty());
    daemon.stop().await;
}

#[tokio::test]
async fn placements_nest_three_levels_deep() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    register_site(&mut client, "dc/a", "metro").await;
    register_template(&mut client, "leaf", GATEWAY).await;
    register_template(&mut client, "level-3", &topology("leaf", "metro")).await;
    register_template(&mut client, "level-2", &topology("level-3", "metro")).await;
    register_template(&mut client, "level-1", &topology("level-2", "metro")).await;
    let root = create(&mut client, "level-1", "").await;

    let mut parent = root.clone();
    for template in ["level-2", "level-3", "leaf"] {
        wait_prepared(&mut client, &parent).await;
        let kids = wait_for(&format!("child of {parent}"), || {
            let mut client = client.clone();
            let parent = parent.clone();
            async move {
                let kids = children(&mut client, &parent).await;
                (!kids.is_empty()).then_some(kids)
            }
        })
        .await;
        assert_eq!(kids.len(), 1);
        assert_eq!(kids[0].template_id, template);
        parent = kids[0].deployment_id.clone();
    }
    let leaf = wait_prepared(&mut client, &parent).await;
    assert!(leaf.info.unwrap().approved);
    assert_eq!(list(&mut client, Default::default()).await.len(), 4);
    daemon.stop().await;
}

#[tokio::test]
async fn placement_errors_are_recorded_and_retried() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    register_template(&mut client, "topo", &topology("nf/later", "metro")).await;
    register_site(&mut client, "dc/a", "metro").await;
    let id = create(&mut client, "topo", "").await;
    let info = wait_for("error recorded", || {
        let mut client = client.clone();
        let id = id.clone();
        async move {
            let info = get(&mut client, &id).await.info.unwrap();
            (!info.error.is_empty()).then_some(info)
        }
    })
    .await;
    assert!(!info.prepared);
    assert!(
        info.error.contains("template not found: nf/later"),
        "{}",
        info.error
    );
    let package = Package::from_yaml(&get(&mut client, &id).await.package_yaml).unwrap();
    let resource = package.iter().find(|o| o.kind == "Deployment").unwrap();
    let condition = resource.condition("Prepared").unwrap().unwrap();
    assert_eq!(condition.status.as_str(), "False");

    // The missing template appears: the retry (with backoff) succeeds.
    register_template(&mut client, "nf/later", GATEWAY).await;
    let prepared = wait_prepared(&mut client, &id).await;
    assert!(prepared.info.unwrap().error.is_empty());
    assert_eq!(children(&mut client, &id).await.len(), 1);
    daemon.stop().await;
}

#[tokio::test]
async fn manual_approval_waits_for_approve() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    register_template(&mut client, "t", GATEWAY).await;
    let merge = "apiVersion: deployment.nephio.org/v1alpha1\nkind: Deployment\nmetadata:\n  name: deployment\n  annotations: {nephio.org/approve: Manual}\n";
    let id = create(&mut client, "t", merge).await;
    let info = wait_prepared(&mut client, &id).await.info.unwrap();
    assert!(!info.approved);
    let approved = client
        .approve_deployment(pb::ApproveDeploymentRequest {
            deployment_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    assert!(approved.approved);
    let rows = list(
        &mut client,
        pb::ListDeploymentsRequest {
            approved: Some(true),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(rows.len(), 1);
    daemon.stop().await;
}

#[tokio::test]
async fn modifications_hold_a_lease_with_a_token() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    register_template(&mut client, "t", GATEWAY).await;
    let id = create(&mut client, "t", "").await;
    let first = client
        .start_modification(pb::StartModificationRequest {
            deployment_id: id.clone(),
            lease_ms: 60_000,
        })
        .await
        .unwrap()
        .into_inner();
    let busy = client
        .start_modification(pb::StartModificationRequest {
            deployment_id: id.clone(),
            lease_ms: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(busy.code(), Code::Aborted);
    assert!(busy.message().contains(&id));
    let busy = client
        .update_deployment(pb::UpdateDeploymentRequest {
            deployment_id: id.clone(),
            package_yaml: GATEWAY.into(),
            modification_token: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(busy.code(), Code::Aborted);
    let lost = client
        .end_modification(pb::EndModificationRequest {
            deployment_id: id.clone(),
            token: "not-the-token".into(),
            package_yaml: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(lost.code(), Code::FailedPrecondition);
    client
        .renew_modification(pb::RenewModificationRequest {
            deployment_id: id.clone(),
            token: first.token.clone(),
            lease_ms: 60_000,
        })
        .await
        .unwrap();
    let mut package = Package::from_yaml(&first.package_yaml).unwrap();
    package.objects_mut()[0].set_label("edited", "yes");
    client
        .end_modification(pb::EndModificationRequest {
            deployment_id: id.clone(),
            token: first.token.clone(),
            package_yaml: package.to_yaml(),
        })
        .await
        .unwrap();
    let stored = Package::from_yaml(&get(&mut client, &id).await.package_yaml).unwrap();
    assert_eq!(stored.objects()[0].label("edited"), Some("yes"));
    // The lease is released: the token no longer holds it, a new modification can start.
    let lost = client
        .cancel_modification(pb::CancelModificationRequest {
            deployment_id: id.clone(),
            token: first.token,
        })
        .await
        .unwrap_err();
    assert_eq!(lost.code(), Code::FailedPrecondition);
    let second = client
        .start_modification(pb::StartModificationRequest {
            deployment_id: id.clone(),
            lease_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    client
        .cancel_modification(pb::CancelModificationRequest {
            deployment_id: id.clone(),
            token: second.token,
        })
        .await
        .unwrap();
    let missing = client
        .start_modification(pb::StartModificationRequest {
            deployment_id: "nope".into(),
            lease_ms: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    daemon.stop().await;
}

#[tokio::test]
async fn watch_replays_then_streams() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    register_template(&mut client, "t", GATEWAY).await;
    let first = create(&mut client, "t", "").await;
    let mut stream = client
        .watch(pb::WatchRequest {
            from_revision: 0,
            kinds: vec![pb::EntityKind::Deployment as i32],
        })
        .await
        .unwrap()
        .into_inner();
    let replayed = stream.message().await.unwrap().unwrap();
    assert_eq!(replayed.id, first);
    assert!(replayed.deployment.unwrap().prepared);
    let second = create(&mut client, "t", "").await;
    let live = stream.message().await.unwrap().unwrap();
    assert_eq!(live.id, second);
    assert!(live.revision > replayed.revision);
    client
        .delete_deployment(pb::DeleteRequest { id: first.clone() })
        .await
        .unwrap();
    let deleted = stream.message().await.unwrap().unwrap();
    assert_eq!(
        (deleted.id.as_str(), deleted.r#type),
        (first.as_str(), pb::ChangeType::Delete as i32)
    );
    daemon.stop().await;
}

#[tokio::test]
async fn instance_key_makes_create_idempotent_and_restart_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let mut daemon = TestDaemon::with_store(tempfile::tempdir().unwrap(), store.clone()).await;
    let mut client = daemon.client().await;
    register_template(&mut client, "t", GATEWAY).await;
    let request = pb::CreateDeploymentRequest {
        template_id: "t".into(),
        instance_key: "one".into(),
        ..Default::default()
    };
    let a = client
        .create_deployment(request.clone())
        .await
        .unwrap()
        .into_inner();
    let b = client
        .create_deployment(request)
        .await
        .unwrap()
        .into_inner();
    assert!(a.created && !b.created);
    assert_eq!(a.deployment_id, b.deployment_id);
    daemon.stop().await;

    let mut again = TestDaemon::with_store(tempfile::tempdir().unwrap(), store).await;
    let mut client = again.client().await;
    let rows = list(&mut client, Default::default()).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].deployment_id, a.deployment_id);
    again.stop().await;
}

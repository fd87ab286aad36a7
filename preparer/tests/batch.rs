//! The batch write (`ApplyDeployments`) on every backend (SQLite always; PostgreSQL when the
//! test services can start one), through the Data API in process: the writes land in one
//! transaction in their order and a watcher sees one change per deployment, once, in that
//! order; one bad write (unknown id, bad YAML, a deployment under modification, a stale
//! `if_updated`) leaves nothing written and no change logged, and the error names the write's
//! index and id; the size limit; a fenced batch refused once its lease has moved on. Then the
//! same call over gRPC through the client crate, with its roles.

mod support;

use std::sync::Arc;

use futures::StreamExt as _;
use nephrite_preparer::api::{Changes, DataService};
use nephrite_preparer::store::{self, DeploymentFilter, Store};
use nephrite_preparer_client::{
    DataApi, DeploymentRequest, DeploymentWrite, EntityKind, ErrorKind, LeaseFence, MAX_BATCH,
    PreparerClient, Site, SiteInfo, Template, TemplateInfo, WriteResult,
};
use nephrite_runtime::ClientArgs;

const TEMPLATE: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: upf\ndata:\n  size: small\n";

fn child(parent: &str, site: &str, key: &str) -> DeploymentWrite {
    DeploymentWrite::Create(DeploymentRequest {
        parent_id: parent.to_owned(),
        template_id: "upf".to_owned(),
        site_id: site.to_owned(),
        merge_package_yaml: format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: upf\ndata:\n  key: {key}\n"
        ),
        instance_key: key.to_owned(),
        ..DeploymentRequest::default()
    })
}

/// A template, two sites and a parent deployment; the parent's id.
async fn scene(api: &dyn DataApi) -> String {
    api.register_template(Template {
        info: TemplateInfo {
            id: "upf".into(),
            metadata: Default::default(),
        },
        package_yaml: TEMPLATE.into(),
    })
    .await
    .unwrap();
    for site in ["edge01", "edge02"] {
        api.register_site(Site {
            info: SiteInfo {
                id: site.into(),
                ..SiteInfo::default()
            },
            package_yaml: String::new(),
        })
        .await
        .unwrap();
    }
    api.create_deployment(DeploymentRequest {
        template_id: "upf".into(),
        ..DeploymentRequest::default()
    })
    .await
    .unwrap()
    .deployment_id
}

async fn children(store: &dyn Store, parent: &str) -> Vec<String> {
    let filter = DeploymentFilter {
        parent_id: Some(parent.to_owned()),
        ..DeploymentFilter::default()
    };
    let (rows, _) = store
        .list_deployments(&filter, &store::Window::largest_after(""))
        .await
        .unwrap();
    rows.into_iter().map(|r| r.instance_key).collect()
}

fn created_id(result: &WriteResult) -> String {
    match result {
        WriteResult::Created(created) => {
            assert!(created.created, "{result:?}");
            created.deployment_id.clone()
        }
        other => panic!("not a create: {other:?}"),
    }
}

async fn suite(store: Arc<dyn Store>) {
    let backend = store.backend();
    let service = DataService::new(Arc::clone(&store), Changes::default(), false);
    let api: &dyn DataApi = &service;
    let parent = scene(api).await;

    // Three creates, an update of the parent and a delete, in one batch.
    let doomed = api
        .create_deployment(match child(&parent, "edge02", "doomed") {
            DeploymentWrite::Create(request) => request,
            _ => unreachable!(),
        })
        .await
        .unwrap()
        .deployment_id;
    let before = api.get_deployment(&parent).await.unwrap();
    let start = store.current_revision().await.unwrap();
    let mut watch = api
        .watch(start as u64, &[EntityKind::Deployment])
        .await
        .unwrap();
    let updated_package = before.package_yaml.replace("small", "large");
    let results = api
        .apply_deployments(
            vec![
                child(&parent, "edge01", "a"),
                child(&parent, "edge02", "b"),
                DeploymentWrite::Update {
                    id: parent.clone(),
                    package_yaml: updated_package.clone(),
                    if_updated: Some(before.info.updated.clone()),
                },
                child(&parent, "edge01", "c"),
                DeploymentWrite::Delete { id: doomed.clone() },
                DeploymentWrite::Delete {
                    id: "never-there".into(),
                },
            ],
            None,
        )
        .await
        .unwrap();
    assert_eq!(results.len(), 6, "{backend}: {results:?}");
    let (a, b, c) = (
        created_id(&results[0]),
        created_id(&results[1]),
        created_id(&results[3]),
    );
    match &results[2] {
        WriteResult::Updated(info) => assert_eq!(info.id, parent, "{backend}"),
        other => panic!("{backend}: {other:?}"),
    }
    assert_eq!(
        results[4..],
        [WriteResult::Deleted(true), WriteResult::Deleted(false)],
        "{backend}"
    );
    let after = api.get_deployment(&parent).await.unwrap();
    assert!(after.package_yaml.contains("large"), "{backend}");
    let mut kids = children(store.as_ref(), &parent).await;
    kids.sort();
    assert_eq!(kids, ["a", "b", "c"], "{backend}");

    // One change per deployment written, in the writes' order, each seen once.
    let expected = [
        (a.clone(), false),
        (b.clone(), false),
        (parent.clone(), false),
        (c.clone(), false),
        (doomed.clone(), true),
    ];
    let logged: Vec<(String, bool)> = store
        .changes_since(start, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|change| (change.id, change.deleted))
        .collect();
    assert_eq!(logged, expected, "{backend}: the change log");
    let mut seen = Vec::new();
    for _ in 0..expected.len() {
        let change = watch.next().await.expect("a change").expect("ok");
        seen.push((change.id, change.deleted));
    }
    assert_eq!(seen, expected, "{backend}: the watcher");

    // Repeating the creates finds the children (created = false), as the single call does.
    let again = api
        .apply_deployments(vec![child(&parent, "edge01", "a")], None)
        .await
        .unwrap();
    assert_eq!(
        again,
        [WriteResult::Created(nephrite_preparer_client::Created {
            created: false,
            deployment_id: a.clone(),
        })],
        "{backend}"
    );

    // One bad write: nothing of the batch is written, no change is logged.
    let quiet = store.current_revision().await.unwrap();
    let refusals: Vec<(Vec<DeploymentWrite>, ErrorKind, &str)> = vec![
        (
            vec![
                child(&parent, "edge01", "d"),
                DeploymentWrite::Delete { id: b.clone() },
                DeploymentWrite::Update {
                    id: "missing".into(),
                    package_yaml: TEMPLATE.into(),
                    if_updated: None,
                },
            ],
            ErrorKind::NotFound,
            "write 2 (update of deployment missing)",
        ),
        (
            vec![
                DeploymentWrite::Delete { id: c.clone() },
                child(&parent, "edge01", "d"),
                DeploymentWrite::Create(DeploymentRequest {
                    merge_package_yaml: "kind: [unclosed".into(),
                    instance_key: "broken".into(),
                    ..DeploymentRequest::default()
                }),
            ],
            ErrorKind::InvalidArgument,
            "write 2 (create of instance broken)",
        ),
        (
            vec![
                DeploymentWrite::Delete { id: c.clone() },
                child(&parent, "nowhere", "d"),
            ],
            ErrorKind::NotFound,
            "write 1 (create of instance d)",
        ),
        (
            vec![
                DeploymentWrite::Delete { id: c.clone() },
                DeploymentWrite::Update {
                    id: parent.clone(),
                    package_yaml: updated_package.clone(),
                    if_updated: Some(before.info.updated.clone()),
                },
            ],
            ErrorKind::Aborted,
            "write 1 (update of deployment",
        ),
        (
            vec![DeploymentWrite::Delete {
                id: "bad id!".into(),
            }],
            ErrorKind::InvalidArgument,
            "write 0 (delete of deployment bad id!)",
        ),
    ];
    for (writes, kind, names) in refusals {
        let error = api.apply_deployments(writes, None).await.unwrap_err();
        assert_eq!(error.kind(), kind, "{backend}: {error}");
        assert!(error.to_string().contains(names), "{backend}: {error}");
        assert_eq!(store.current_revision().await.unwrap(), quiet, "{backend}");
        let mut kids = children(store.as_ref(), &parent).await;
        kids.sort();
        assert_eq!(kids, ["a", "b", "c"], "{backend}: {error}");
    }

    // A deployment under someone's modification: the batch's update is refused as busy.
    let held = api.start_modification(&a, None).await.unwrap();
    let busy = api
        .apply_deployments(
            vec![
                DeploymentWrite::Delete { id: c.clone() },
                DeploymentWrite::Update {
                    id: a.clone(),
                    package_yaml: held.package_yaml.clone(),
                    if_updated: None,
                },
            ],
            None,
        )
        .await
        .unwrap_err();
    assert!(busy.is_busy(), "{backend}: {busy}");
    assert!(busy.to_string().contains("write 1"), "{backend}: {busy}");
    assert_eq!(store.current_revision().await.unwrap(), quiet, "{backend}");
    api.cancel_modification(&a, &held.token).await.unwrap();

    // The size limit.
    let many = (0..=MAX_BATCH)
        .map(|i| DeploymentWrite::Delete {
            id: format!("d{i}"),
        })
        .collect();
    let too_many = api.apply_deployments(many, None).await.unwrap_err();
    assert_eq!(too_many.kind(), ErrorKind::InvalidArgument, "{backend}");
    assert!(
        too_many.to_string().contains("limit of 1000"),
        "{backend}: {too_many}"
    );

    // Fencing: written while the lease has the holding; refused, nothing written, once it
    // moved to another holder (or was never taken).
    let leader = api
        .acquire_lease("ntc-batch", "replica-a", None)
        .await
        .unwrap();
    let fence = LeaseFence {
        name: "ntc-batch".into(),
        transitions: leader.transitions,
    };
    let fenced = api
        .apply_deployments(vec![child(&parent, "edge02", "e")], Some(fence.clone()))
        .await
        .unwrap();
    created_id(&fenced[0]);
    api.release_lease("ntc-batch", &leader.token).await.unwrap();
    let successor = api
        .acquire_lease("ntc-batch", "replica-b", None)
        .await
        .unwrap();
    assert_eq!(successor.transitions, leader.transitions + 1, "{backend}");
    let quiet = store.current_revision().await.unwrap();
    let deposed = api
        .apply_deployments(
            vec![
                DeploymentWrite::Delete { id: a.clone() },
                child(&parent, "edge02", "f"),
            ],
            Some(fence),
        )
        .await
        .unwrap_err();
    assert_eq!(deposed.kind(), ErrorKind::FailedPrecondition, "{backend}");
    assert!(
        deposed.to_string().contains("replica-b"),
        "{backend}: {deposed}"
    );
    assert_eq!(store.current_revision().await.unwrap(), quiet, "{backend}");
    let unknown = api
        .apply_deployments(
            vec![DeploymentWrite::Delete { id: a.clone() }],
            Some(LeaseFence {
                name: "never-taken".into(),
                transitions: 1,
            }),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::FailedPrecondition, "{backend}");
    let mut kids = children(store.as_ref(), &parent).await;
    kids.sort();
    assert_eq!(kids, ["a", "b", "c", "e"], "{backend}");
}

#[tokio::test]
async fn sqlite_batches_are_all_or_nothing_in_order_and_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db").display().to_string();
    suite(store::open(&format!("sqlite:{path}")).await.unwrap()).await;
}

#[tokio::test]
async fn postgres_batches_are_all_or_nothing_in_order_and_fenced() {
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => pg,
        Err(e) => return e.skip("postgres_batches_are_all_or_nothing_in_order_and_fenced"),
    };
    suite(store::open(&pg.url()).await.unwrap()).await;
}

#[tokio::test]
async fn a_batch_over_grpc_through_the_client_crate() {
    let mut daemon = support::TestDaemon::sqlite().await;
    let channel = ClientArgs::default()
        .dial(&daemon.daemon.as_ref().expect("running").endpoint)
        .await
        .expect("dial");
    let api = PreparerClient::new(channel);
    let parent = scene(&api).await;
    let results = api
        .apply_deployments(
            vec![child(&parent, "edge01", "a"), child(&parent, "edge02", "b")],
            None,
        )
        .await
        .unwrap();
    let a = created_id(&results[0]);
    created_id(&results[1]);
    let history = api.deployment_revisions(&a).await.unwrap();
    assert_eq!(history[0].author, "anonymous", "{history:?}");

    let error = api
        .apply_deployments(
            vec![
                DeploymentWrite::Delete { id: a.clone() },
                DeploymentWrite::Update {
                    id: "missing".into(),
                    package_yaml: TEMPLATE.into(),
                    if_updated: None,
                },
            ],
            None,
        )
        .await
        .unwrap_err();
    assert!(error.is_not_found(), "{error}");
    assert!(
        error
            .to_string()
            .contains("write 1 (update of deployment missing)"),
        "{error}"
    );
    assert!(api.get_deployment(&a).await.is_ok(), "nothing was deleted");
    daemon.stop().await;
}

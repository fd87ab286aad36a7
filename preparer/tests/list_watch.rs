//! List, then watch from the listing's revision (as Kubernetes' list + watch from
//! `resourceVersion`): the listing holds every change up to the revision it answers, and a
//! `Watch` from that revision sends exactly the changes after it — none before (no replay of
//! the kept log), none missed — while writers keep writing through the listing.
//!
//! The store starts with 2,500 deployments (their creations are in the change log), so a
//! listing takes three pages; 4 writers create, update and delete deployments and register
//! sites throughout, on one daemon (SQLite) or two daemons sharing a database (PostgreSQL).
//! The listing is read while they write; afterwards the whole log is read with `Watch(0)` and
//! the watcher's changes must be exactly the log's changes after the listing's revision, in
//! order; every deployment whose last change is at or before that revision must be in the
//! listing exactly when that change was not a delete; and the listing with the watched changes
//! applied must hold exactly the deployments the store holds at the end.
//!
//! Run through the gRPC client (both backends) and through the daemon's in-process API (the
//! web dashboard's path).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use nephrite_preparer::api::DataService;
use nephrite_preparer::store::{self, DeploymentInfo as StoredInfo, NewDeployment};
use nephrite_preparer::tui::connector;
use nephrite_preparer_client::{
    Change, ChangeStream, DataApi, DeploymentQuery, DeploymentRequest, Site, SiteInfo, Template,
    TemplateInfo,
};

use support::TestDaemon;

/// Deployments in the store before the writers start.
const FILLED: usize = 2_500;
/// Concurrent writers.
const WRITERS: usize = 4;
/// Operations each writer makes.
const OPERATIONS: usize = 40;
/// The listing starts once the writers have made this many operations in all.
const LIST_AFTER: usize = WRITERS * 10;

const TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nf}\ndata: {a: '1'}\n";

async fn fill(spec: &str) {
    let store = store::open(spec).await.expect("store opens");
    let rows: Vec<_> = (0..FILLED)
        .map(|n| NewDeployment {
            info: StoredInfo {
                id: format!("d{n:07}"),
                template_id: "nf".into(),
                site_id: format!("site/{n:05}"),
                created: "2026-01-01T00:00:00Z".into(),
                updated: "2026-01-01T00:00:00Z".into(),
                prepared: true,
                approved: true,
                ..StoredInfo::default()
            },
            package_yaml: String::new(),
            author: "test".into(),
        })
        .collect();
    for chunk in rows.chunks(1000) {
        store
            .create_deployments(chunk.to_vec())
            .await
            .expect("fill");
    }
}

/// One writer: creates deployments, replaces the package of one it made, deletes one it
/// made, registers a site, in turn.
async fn write(api: Arc<dyn DataApi>, writer: usize, done: Arc<AtomicUsize>) {
    let mut mine: Vec<String> = Vec::new();
    for n in 0..OPERATIONS {
        match n % 4 {
            0 | 1 => {
                let created = api
                    .create_deployment(DeploymentRequest {
                        template_id: "nf".into(),
                        merge_metadata: [("writer".to_owned(), writer.to_string())].into(),
                        ..DeploymentRequest::default()
                    })
                    .await
                    .expect("create");
                mine.push(created.deployment_id);
            }
            2 => {
                let id = &mine[mine.len() - 1];
                let package = TEMPLATE.replace("'1'", &format!("'{n}'"));
                api.update_deployment(id, package, None)
                    .await
                    .expect("update");
            }
            _ => {
                let id = mine.remove(0);
                assert!(api.delete_deployment(&id).await.expect("delete"));
                api.register_site(Site {
                    info: SiteInfo {
                        id: format!("edge/{writer}-{n}"),
                        ..SiteInfo::default()
                    },
                    package_yaml: String::new(),
                })
                .await
                .expect("site");
            }
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
}

/// Changes from `stream` until one at or past `revision`.
async fn read_until(stream: &mut ChangeStream, revision: u64) -> Vec<Change> {
    let mut changes = Vec::new();
    let give_up = std::time::Duration::from_secs(120);
    while changes
        .last()
        .is_none_or(|c: &Change| c.revision < revision)
    {
        let next = tokio::time::timeout(give_up, stream.next())
            .await
            .expect("a hang: the watch sent nothing for 120 s")
            .expect("the watch stream ended")
            .expect("the watch failed");
        changes.push(next);
    }
    changes
}

/// The scenario: `writers` write, `lister` lists during the writes and watches from the
/// listing's revision.
async fn list_then_watch(lister: Arc<dyn DataApi>, writers: Vec<Arc<dyn DataApi>>) {
    lister
        .register_template(Template {
            info: TemplateInfo {
                id: "nf".into(),
                ..TemplateInfo::default()
            },
            package_yaml: TEMPLATE.into(),
        })
        .await
        .expect("template");
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let api = Arc::clone(&writers[w % writers.len()]);
            tokio::spawn(write(api, w, Arc::clone(&done)))
        })
        .collect();
    support::wait_for("the writers to be under way", || {
        let made = done.load(Ordering::SeqCst);
        async move { (made >= LIST_AFTER).then_some(()) }
    })
    .await;
    let listing = lister
        .all_deployments_listing(DeploymentQuery::default())
        .await
        .expect("listing");
    let during = done.load(Ordering::SeqCst);
    let mut watch = lister.watch(listing.revision, &[]).await.expect("watch");
    for task in tasks {
        task.await.expect("writer");
    }
    assert!(
        during < WRITERS * OPERATIONS,
        "the listing was read while the writers wrote ({during} operations made by then)"
    );
    let end = lister
        .all_deployments_listing(DeploymentQuery::default())
        .await
        .expect("final listing");
    assert!(
        listing.revision > FILLED as u64,
        "the listing's revision {} is after the filled deployments' creations",
        listing.revision
    );
    assert!(
        end.revision > listing.revision,
        "the writers wrote after it"
    );

    // The whole log, and what the watcher got.
    let mut everything = lister.watch(0, &[]).await.expect("watch from 0");
    let log = read_until(&mut everything, end.revision).await;
    let watched = read_until(&mut watch, end.revision).await;
    let key = |c: &Change| (c.revision, c.kind, c.id.clone(), c.deleted);
    let expected: Vec<_> = log
        .iter()
        .filter(|c| c.revision > listing.revision)
        .map(key)
        .collect();
    let got: Vec<_> = watched
        .iter()
        .filter(|c| c.revision <= end.revision)
        .map(key)
        .collect();
    assert!(
        watched[0].revision > listing.revision,
        "the watch replayed revision {} from before the listing's {}",
        watched[0].revision,
        listing.revision
    );
    assert_eq!(
        got, expected,
        "the watch from revision {} sends exactly the log's later changes, in order",
        listing.revision
    );
    assert!(
        expected.len() < log.len() / 10,
        "most of the log ({} changes) is before the listing; {} after",
        log.len(),
        expected.len()
    );

    // Every change up to the listing's revision is in the listing.
    let listed: BTreeSet<&str> = listing.items.iter().map(|d| d.id.as_str()).collect();
    let mut last: BTreeMap<&str, &Change> = BTreeMap::new();
    for change in log.iter().filter(|c| c.kind == store_kind()) {
        last.insert(&change.id, change);
    }
    for (id, change) in &last {
        if change.revision <= listing.revision {
            assert_eq!(
                listed.contains(id),
                !change.deleted,
                "deployment {id}: its last change (revision {}, deleted: {}) is at or before \
                 the listing's revision {} and so must show in it",
                change.revision,
                change.deleted,
                listing.revision
            );
        }
    }

    // The listing with the watched changes applied is the store at the end.
    let mut view: BTreeMap<String, bool> =
        listing.items.iter().map(|d| (d.id.clone(), true)).collect();
    for change in watched.iter().filter(|c| c.kind == store_kind()) {
        view.insert(change.id.clone(), !change.deleted);
    }
    let view: BTreeSet<&str> = view
        .iter()
        .filter(|(_, present)| **present)
        .map(|(id, _)| id.as_str())
        .collect();
    let at_end: BTreeSet<&str> = end.items.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(view, at_end, "listing + watched changes = the store");
}

fn store_kind() -> nephrite_preparer_client::EntityKind {
    nephrite_preparer_client::EntityKind::Deployment
}

async fn grpc(daemon: &TestDaemon) -> Arc<dyn DataApi> {
    let server = format!("http://{}", daemon.endpoint().trim_start_matches("tcp://"));
    let connect = connector(&server, &Default::default()).expect("server");
    connect().await.expect("dial")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_watch_from_a_listing_sends_exactly_the_changes_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = format!("sqlite:{}", dir.path().join("preparer.db").display());
    fill(&spec).await;
    let mut daemon = TestDaemon::with_store(dir, spec).await;
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        writers.push(grpc(&daemon).await);
    }
    list_then_watch(grpc(&daemon).await, writers).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_watch_from_a_listing_sends_exactly_the_changes_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = format!("sqlite:{}", dir.path().join("preparer.db").display());
    fill(&spec).await;
    let mut daemon = TestDaemon::with_store(dir, spec).await;
    let running = daemon.daemon.as_ref().expect("running");
    // The web dashboard's path: the daemon's own service, no gRPC.
    let service: Arc<dyn DataApi> = Arc::new(DataService::new(
        Arc::clone(&running.store),
        running.changes.clone(),
        true,
    ));
    let writers = vec![Arc::clone(&service), grpc(&daemon).await];
    list_then_watch(service, writers).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_watch_from_a_listing_sends_exactly_the_changes_after_it() {
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => pg,
        Err(e) => {
            return e.skip("postgres_watch_from_a_listing_sends_exactly_the_changes_after_it");
        }
    };
    let url = pg.url();
    fill(&url).await;
    // Two daemons on the database (replicas): the writers use both, the lister one.
    let mut first =
        TestDaemon::with_store(tempfile::tempdir().expect("tempdir"), url.clone()).await;
    let mut second = TestDaemon::with_store(tempfile::tempdir().expect("tempdir"), url).await;
    let mut writers = Vec::new();
    for n in 0..WRITERS {
        let daemon = if n % 2 == 0 { &first } else { &second };
        writers.push(grpc(daemon).await);
    }
    list_then_watch(grpc(&first).await, writers).await;
    second.stop().await;
    first.stop().await;
}

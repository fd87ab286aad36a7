//! One store suite, run against every backend (SQLite always; PostgreSQL when the test
//! services can start one), so the backends behave the same — including what deleting a
//! parent does (its descendants go with it). Also: two daemons on one PostgreSQL database.

mod support;

use std::sync::Arc;

use nephrite_merge::id::IdPattern;
use nephrite_merge::metadata::{Metadata, MetadataSelector};
use nephrite_preparer::store::{
    self, CatalogFilter, DeploymentFilter, DeploymentInfo, DeploymentUpdate, NewDeployment, Store,
    StoreError, TemplateRecord, Window,
};
use support::*;

fn row(id: &str, parent: &str, key: &str, metadata: &[(&str, &str)]) -> NewDeployment {
    NewDeployment {
        info: DeploymentInfo {
            id: id.into(),
            parent_id: parent.into(),
            template_id: "t".into(),
            site_id: String::new(),
            instance_key: key.into(),
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            created: "2026-01-01T00:00:00Z".into(),
            updated: "2026-01-01T00:00:00Z".into(),
            prepared: false,
            approved: false,
            error: String::new(),
        },
        package_yaml: String::new(),
        author: "test".into(),
    }
}

async fn suite(store: Arc<dyn Store>) {
    let backend = store.backend();

    // Templates: put / get / list by pattern and metadata / delete.
    let metadata: Metadata = [("NF.type".to_owned(), "smf".to_owned())].into();
    assert!(
        store
            .put_template(TemplateRecord {
                id: "nf/smf:v1".into(),
                metadata: metadata.clone(),
                package_yaml: "a".into()
            })
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_template(TemplateRecord {
                id: "nf/smf:v1".into(),
                metadata,
                package_yaml: "b".into()
            })
            .await
            .unwrap()
    );
    store
        .put_template(TemplateRecord {
            id: "nf/upf:v1".into(),
            metadata: Metadata::new(),
            package_yaml: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(
        store.get_template("nf/smf:v1").await.unwrap().package_yaml,
        "b"
    );
    let filter = CatalogFilter {
        id_patterns: vec![IdPattern::parse("nf/**").unwrap()],
        metadata: MetadataSelector::new([("NF.type", "s*")]).unwrap(),
    };
    let found = store
        .list_templates(&filter, &Window::default())
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["nf/smf:v1"],
        "{backend}"
    );
    assert!(store.delete_template("nf/upf:v1").await.unwrap());
    assert!(!store.delete_template("nf/upf:v1").await.unwrap());
    assert!(matches!(
        store.get_template("nf/upf:v1").await,
        Err(StoreError::NotFound { .. })
    ));

    // Idempotent creation by instance key, also for racing creators.
    let created = store
        .create_deployments(vec![row("a", "", "", &[]), row("a1", "a", "k", &[])])
        .await
        .unwrap();
    assert_eq!(
        created,
        vec![(true, "a".to_owned()), (true, "a1".to_owned())]
    );
    let again = store
        .create_deployments(vec![row("a1-bis", "a", "k", &[])])
        .await
        .unwrap();
    assert_eq!(again, vec![(false, "a1".to_owned())], "{backend}");
    let racers: Vec<_> = (0..8)
        .map(|n| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .create_deployments(vec![row(&format!("race-{n}"), "a", "race", &[])])
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut winners = std::collections::BTreeSet::new();
    for racer in racers {
        winners.insert(racer.await.unwrap()[0].1.clone());
    }
    assert_eq!(
        winners.len(),
        1,
        "{backend}: one child for one instance key: {winners:?}"
    );
    store
        .delete_deployment(winners.first().unwrap())
        .await
        .unwrap();

    // A tree three levels deep; deleting the root deletes every descendant.
    store
        .create_deployments(vec![
            row("a11", "a1", "", &[]),
            row("a111", "a11", "", &[]),
            row("b", "", "", &[]),
        ])
        .await
        .unwrap();
    let mut deleted = store.delete_deployment("a").await.unwrap();
    deleted.sort();
    assert_eq!(deleted, ["a", "a1", "a11", "a111"], "{backend}");
    assert!(matches!(
        store.get_deployment("a111").await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(store.get_deployment("b").await.is_ok());
    assert!(store.delete_deployment("a").await.unwrap().is_empty());

    // Listing: filters, metadata exact and prefix, keyset paging, offset, page caps.
    let rows: Vec<_> = (0..1100)
        .map(|n| {
            let region = if n % 10 == 0 { "eu/west" } else { "us/east" };
            row(&format!("m{n:05}"), "b", "", &[("Site.region", region)])
        })
        .collect();
    store.create_deployments(rows).await.unwrap();
    let by_parent = DeploymentFilter {
        parent_id: Some("b".into()),
        ..Default::default()
    };
    let (page, more) = store
        .list_deployments(&by_parent, &Window::default())
        .await
        .unwrap();
    assert_eq!(
        (page.len(), more),
        (100, true),
        "{backend}: default page 100"
    );
    let (page, _) = store
        .list_deployments(
            &by_parent,
            &Window {
                limit: 5000,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.len(), 1000, "{backend}: page capped at 1000");
    let (rest, more) = store
        .list_deployments(
            &by_parent,
            &Window {
                limit: 1000,
                after_id: page.last().unwrap().id.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!((rest.len(), more), (100, false));
    let eu = DeploymentFilter {
        metadata: MetadataSelector::new([("Site.region", "eu/west")]).unwrap(),
        ..Default::default()
    };
    let (page, _) = store
        .list_deployments(
            &eu,
            &Window {
                limit: 1000,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.len(), 110, "{backend}");
    let prefix = DeploymentFilter {
        metadata: MetadataSelector::new([("Site.region", "eu/*")]).unwrap(),
        ..Default::default()
    };
    let (page, _) = store
        .list_deployments(
            &prefix,
            &Window {
                limit: 10,
                offset: 5,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.len(), 10);
    assert_eq!(page[0].id, "m00050", "{backend}: offset skips 5 matches");
    let star = DeploymentFilter {
        metadata: MetadataSelector::new([("Site.region", "*")]).unwrap(),
        ..Default::default()
    };
    assert!(
        store
            .list_deployments(&star, &Window::default())
            .await
            .unwrap()
            .0
            .is_empty(),
        "`*` stays in one segment"
    );

    // Modifications: one holder, renewal, loss, expiry.
    let now = 1_000_000;
    store
        .start_modification("b", "t1", now, now + 1000)
        .await
        .unwrap();
    assert!(matches!(
        store
            .start_modification("b", "t2", now + 10, now + 1000)
            .await,
        Err(StoreError::Busy { .. })
    ));
    store
        .renew_modification("b", "t1", now + 500, now + 2000)
        .await
        .unwrap();
    assert!(matches!(
        store
            .renew_modification("b", "t2", now + 500, now + 2000)
            .await,
        Err(StoreError::LeaseLost { .. })
    ));
    assert!(
        matches!(
            store
                .start_modification("b", "t2", now + 1500, now + 3000)
                .await,
            Err(StoreError::Busy { .. })
        ),
        "renewed lease holds"
    );
    store
        .start_modification("b", "t2", now + 2001, now + 5000)
        .await
        .unwrap();
    assert!(
        matches!(
            store
                .write_modification("b", "t1", now + 2002, None, true)
                .await,
            Err(StoreError::LeaseLost { .. })
        ),
        "{backend}: expired lease is lost"
    );
    store
        .write_modification("b", "t2", now + 2003, None, true)
        .await
        .unwrap();
    let racers: Vec<_> = (0..8)
        .map(|n| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .start_modification("b", &format!("r{n}"), now + 3000, now + 9000)
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut holders = 0;
    for racer in racers {
        holders += usize::from(racer.await.unwrap());
    }
    assert_eq!(holders, 1, "{backend}: exactly one racer holds the lease");
    assert!(matches!(
        store.start_modification("nope", "t", now, now + 1).await,
        Err(StoreError::NotFound { .. })
    ));

    // Due for preparation: unprepared, not leased, retry time passed.
    let due = store.due_for_preparation(now + 3500, 5000).await.unwrap();
    assert!(!due.contains(&"b".to_owned()), "leased");
    assert!(due.contains(&"m00001".to_owned()));
    store
        .start_modification("m00001", "f", now, now + 10)
        .await
        .unwrap();
    store
        .record_failure("m00001", "f", "boom", now + 100_000)
        .await
        .unwrap();
    store
        .write_modification("m00001", "f", now, None, true)
        .await
        .unwrap();
    assert!(
        !store
            .due_for_preparation(now + 50, 5000)
            .await
            .unwrap()
            .contains(&"m00001".to_owned())
    );
    assert!(
        store
            .due_for_preparation(now + 100_001, 5000)
            .await
            .unwrap()
            .contains(&"m00001".to_owned())
    );
    assert_eq!(
        store.get_deployment("m00001").await.unwrap().info.error,
        "boom"
    );

    // Change log: replay, compaction, out of range.
    let latest = store.current_revision().await.unwrap();
    assert!(latest > 1000);
    let replay = store.changes_since(0, 3).await.unwrap();
    assert_eq!(replay.len(), 3);
    assert!(replay[0].revision < replay[1].revision);
    store.compact_changes(10).await.unwrap();
    assert!(
        matches!(
            store.changes_since(0, 3).await,
            Err(StoreError::Compacted { .. })
        ),
        "{backend}"
    );
    assert_eq!(store.changes_since(latest - 5, 100).await.unwrap().len(), 5);

    // Prefix patterns, each paging exactly like a brute-force filter: few distinct values
    // over a wide range and over a narrow one (read value by value), many distinct values in
    // a narrow range (read whole from the metadata index) and in a wide one (more than
    // 20,000 entries: walked by id).
    let zones: Vec<_> = (0..20_100)
        .map(|n| {
            let (zone, rack, spot) = (
                format!("z/{}", n % 3),
                format!("r/{}", n % 50),
                format!("s/{}", n % 1000),
            );
            row(
                &format!("w{n:05}"),
                "",
                "",
                &[
                    ("Zone", zone.as_str()),
                    ("Rack", rack.as_str()),
                    ("Spot", spot.as_str()),
                ],
            )
        })
        .collect();
    store.create_deployments(zones).await.unwrap();
    for (key, pattern, expected) in [
        ("Zone", "z/*", (0..20_100).collect::<Vec<u32>>()),
        ("Zone", "z/1*", (0..20_100).filter(|n| n % 3 == 1).collect()),
        ("Rack", "r/*", (0..20_100).collect()),
        (
            "Spot",
            "s/1*",
            (0..20_100)
                .filter(|n| (n % 1000).to_string().starts_with('1'))
                .collect(),
        ),
    ] {
        let filter = DeploymentFilter {
            metadata: MetadataSelector::new([(key, pattern)]).unwrap(),
            ..Default::default()
        };
        let (first, more) = store
            .list_deployments(&filter, &Window::default())
            .await
            .unwrap();
        let ids = |page: &[DeploymentInfo]| page.iter().map(|d| d.id.clone()).collect::<Vec<_>>();
        let want = |range: std::ops::Range<usize>| {
            expected[range]
                .iter()
                .map(|n| format!("w{n:05}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&first), want(0..100), "{backend}: {pattern} first page");
        assert!(more);
        let (second, _) = store
            .list_deployments(
                &filter,
                &Window {
                    after_id: first[99].id.clone(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(
            ids(&second),
            want(100..200),
            "{backend}: {pattern} second page"
        );
    }
    // A prefix driving the walk while another pattern rejects most of its rows: chunk after
    // chunk until the page is full.
    let sparse = DeploymentFilter {
        metadata: MetadataSelector::new([("Zone", "z/*"), ("Spot", "s/7")]).unwrap(),
        ..Default::default()
    };
    let (page, more) = store
        .list_deployments(&sparse, &Window::default())
        .await
        .unwrap();
    let want: Vec<String> = (0..20_100)
        .filter(|n| n % 1000 == 7)
        .map(|n| format!("w{n:05}"))
        .collect();
    assert_eq!(
        (page.iter().map(|d| d.id.clone()).collect::<Vec<_>>(), more),
        (want, false),
        "{backend}: sparse matches across many chunks"
    );
    // Counting walks every page: 21 of them here, and a filter that keeps a third.
    for (pattern, want) in [("z/*", 20_100), ("z/1", 6_700)] {
        let filter = DeploymentFilter {
            metadata: MetadataSelector::new([("Zone", pattern)]).unwrap(),
            ..Default::default()
        };
        assert_eq!(
            store::count_deployments(store.as_ref(), &filter)
                .await
                .unwrap(),
            want,
            "{backend}: count of Zone={pattern}"
        );
    }
}

#[tokio::test]
async fn sqlite_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let store = store::open(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .unwrap();
    suite(store).await;
}

#[tokio::test]
async fn postgres_store_suite() {
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => pg,
        Err(e) => return e.skip("postgres_store_suite"),
    };
    let store = store::open(&pg.url()).await.unwrap();
    suite(store).await;
}

#[tokio::test]
async fn two_daemons_on_one_postgres_database_share_the_work() {
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => pg,
        Err(e) => return e.skip("two_daemons_on_one_postgres_database_share_the_work"),
    };
    let mut one = TestDaemon::with_store(tempfile::tempdir().unwrap(), pg.url()).await;
    let mut two = TestDaemon::with_store(tempfile::tempdir().unwrap(), pg.url()).await;
    let mut a = one.client().await;
    let mut b = two.client().await;
    register_template(&mut a, "leaf", GATEWAY).await;
    register_template(&mut a, "mid", &topology("leaf", "metro")).await;
    register_template(&mut a, "top", &topology("mid", "metro")).await;
    for n in 0..15 {
        register_site(&mut b, &format!("dc/{n:02}"), "metro").await;
    }
    // Several roots, created through both daemons: each is expanded exactly once.
    let mut roots = Vec::new();
    for n in 0..3 {
        let client = if n % 2 == 0 { &mut a } else { &mut b };
        roots.push(create(client, "top", "").await);
    }
    // 3 roots × 15 mid children × 15 leaves each.
    let expected = 3 + 3 * 15 + 3 * 15 * 15;
    let all = wait_for("every deployment prepared", || {
        let mut a = a.clone();
        async move {
            let all = list(&mut a, Default::default()).await;
            (all.len() >= expected && all.iter().all(|d| d.prepared)).then_some(all)
        }
    })
    .await;
    assert_eq!(all.len(), expected, "exact child counts");
    for root in &roots {
        assert_eq!(children(&mut b, root).await.len(), 15);
    }
    let mut seen = std::collections::HashSet::new();
    for d in &all {
        assert!(
            seen.insert((
                d.parent_deployment_id.clone(),
                d.template_id.clone(),
                d.site_id.clone()
            )) || d.parent_deployment_id.is_empty(),
            "no (parent, template, site) twice"
        );
    }
    one.stop().await;
    two.stop().await;
}

fn update(package: &str, author: &str, summary: &str) -> DeploymentUpdate {
    DeploymentUpdate {
        package_yaml: package.into(),
        prepared: false,
        approved: false,
        error: String::new(),
        metadata: Metadata::new(),
        updated: "2026-01-02T00:00:00Z".into(),
        author: author.into(),
        summary: summary.into(),
    }
}

/// (number, author, summary) of each kept revision.
async fn history(store: &dyn Store, id: &str) -> Vec<(i64, String, String)> {
    store
        .deployment_revisions(id)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.number, r.author, r.summary))
        .collect()
}

/// Every write that changes a deployment's package is a revision (who, when, what), a write
/// that changes nothing is none, a write refused (lost lease) leaves none; the newest
/// `keep_revisions` are kept; deleting the deployment deletes its history.
async fn history_suite(store: Arc<dyn Store>) {
    let backend = store.backend();
    store.keep_revisions(3);
    let mut created = row("h1", "", "", &[]);
    created.package_yaml = "p1".into();
    created.author = "alice".into();
    store.create_deployments(vec![created]).await.unwrap();
    let first = || (1, "alice".to_owned(), "created from template t".to_owned());
    assert_eq!(history(store.as_ref(), "h1").await, [first()], "{backend}");

    let write = |package: &'static str, author: &'static str, summary: &'static str| {
        let store = Arc::clone(&store);
        async move {
            store
                .start_modification("h1", "tok", 0, i64::MAX)
                .await
                .unwrap();
            store
                .write_modification("h1", "tok", 0, Some(update(package, author, summary)), true)
                .await
                .unwrap();
        }
    };
    write("p2", "bob", "package updated").await;
    write("p2", "preparer", "prepared").await; // the same package: no revision
    assert_eq!(
        history(store.as_ref(), "h1").await,
        [first(), (2, "bob".into(), "package updated".into())],
        "{backend}"
    );
    let two = store.deployment_revision("h1", 2).await.unwrap();
    assert_eq!(
        (two.package_yaml.as_str(), two.created.as_str()),
        ("p2", "2026-01-02T00:00:00Z"),
        "{backend}"
    );

    // A write whose lease was lost is refused and leaves no revision.
    store
        .start_modification("h1", "held", 0, i64::MAX)
        .await
        .unwrap();
    let refused = store
        .write_modification("h1", "stale", 0, Some(update("px", "eve", "x")), true)
        .await;
    assert!(
        matches!(refused, Err(StoreError::LeaseLost { .. })),
        "{backend}: {refused:?}"
    );
    store
        .write_modification("h1", "held", 0, None, true)
        .await
        .unwrap();
    assert_eq!(history(store.as_ref(), "h1").await.len(), 2, "{backend}");

    // Retention: the newest 3 kept.
    write("p3", "preparer", "prepared").await;
    write("p4", "carol", "approved").await;
    assert_eq!(
        history(store.as_ref(), "h1").await,
        [
            (2, "bob".into(), "package updated".into()),
            (3, "preparer".into(), "prepared".into()),
            (4, "carol".into(), "approved".into()),
        ],
        "{backend}"
    );
    let pruned = store.deployment_revision("h1", 1).await.unwrap_err();
    assert_eq!(
        pruned.to_string(),
        "revision not found: 1 of deployment h1",
        "{backend}"
    );
    assert_eq!(
        store
            .deployment_revision("h1", 4)
            .await
            .unwrap()
            .package_yaml,
        "p4"
    );

    // Deleting the deployment deletes its history; an unknown deployment has none.
    store.delete_deployment("h1").await.unwrap();
    for id in ["h1", "nope"] {
        let gone = store.deployment_revisions(id).await.unwrap_err();
        assert!(
            matches!(
                gone,
                StoreError::NotFound {
                    kind: "deployment",
                    ..
                }
            ),
            "{backend}: {gone:?}"
        );
    }
    let mut again = row("h1", "", "", &[]);
    again.package_yaml = "q1".into();
    store.create_deployments(vec![again]).await.unwrap();
    assert_eq!(
        history(store.as_ref(), "h1").await,
        [(1, "test".into(), "created from template t".into())],
        "{backend}: a new deployment of the same id starts a new history"
    );
}

#[tokio::test]
async fn sqlite_history() {
    let dir = tempfile::tempdir().unwrap();
    let store = store::open(&format!("sqlite:{}", dir.path().join("h.db").display()))
        .await
        .unwrap();
    history_suite(store).await;
}

#[tokio::test]
async fn postgres_history() {
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => pg,
        Err(e) => return e.skip("postgres_history"),
    };
    let store = store::open(&pg.url()).await.unwrap();
    history_suite(store).await;
}

//! Named leases (the leader election of a controller's replicas): the store's behaviour on
//! every backend (SQLite always; PostgreSQL when the test services can start one) — two
//! candidates never both win, a lease expires on the store's clock, a holder that lost it
//! cannot renew or release it, `transitions` grows with every new holding, a new holding
//! and a release are logged — and the Data API over gRPC through the client crate, where a
//! release wakes a watcher of leases.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use nephrite_preparer::store::{self, EntityKind, Store, StoreError};
use nephrite_preparer_client::{CatalogQuery, DataApi, ErrorKind, PreparerClient};
use nephrite_runtime::ClientArgs;
use support::*;

/// Every candidate of `candidates` (stores: several daemons on one database) campaigns for
/// `name` at once, several times each: exactly one wins.
async fn race(candidates: &[Arc<dyn Store>], name: &str) -> String {
    let attempts = candidates.iter().enumerate().flat_map(|(i, store)| {
        (0..8).map(move |j| {
            let store = Arc::clone(store);
            let name = name.to_owned();
            async move {
                let holder = format!("candidate-{i}-{j}");
                let token = format!("token-{i}-{j}");
                (
                    holder.clone(),
                    store.acquire_lease(&name, &holder, &token, 60_000).await,
                )
            }
        })
    });
    let answers = futures::future::join_all(attempts).await;
    let winners: Vec<&String> = answers
        .iter()
        .filter_map(|(holder, answer)| answer.as_ref().ok().map(|_| holder))
        .collect();
    assert_eq!(winners.len(), 1, "{answers:?}");
    for (holder, answer) in &answers {
        match answer {
            Ok(lease) => assert_eq!((&lease.holder, lease.transitions), (holder, 1)),
            Err(StoreError::LeaseHeld {
                holder: held_by, ..
            }) => assert_eq!(held_by, winners[0]),
            Err(other) => panic!("{holder}: {other}"),
        }
    }
    winners[0].clone()
}

async fn suite(stores: Vec<Arc<dyn Store>>) {
    let store = Arc::clone(&stores[0]);
    let backend = store.backend();
    let start = store.current_revision().await.unwrap();

    // Never acquired: not found, naming it.
    let err = store.get_lease("ntc").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::NotFound { kind: "lease", id } if id == "ntc"),
        "{backend}: {err}"
    );

    // Racing candidates (on every daemon): one wins.
    let winner = race(&stores, "raced").await;
    assert_eq!(store.get_lease("raced").await.unwrap().holder, winner);

    // A holds; B is refused with A's name and expiry; A acquiring again keeps its holding.
    let a = store.acquire_lease("ntc", "a", "ta", 60_000).await.unwrap();
    assert_eq!(
        (a.holder.as_str(), a.token.as_str(), a.transitions),
        ("a", "ta", 1)
    );
    assert!(a.expires_ms - a.now_ms == 60_000, "{backend}: {a:?}");
    let refused = store
        .acquire_lease("ntc", "b", "tb", 60_000)
        .await
        .unwrap_err();
    match &refused {
        StoreError::LeaseHeld {
            name,
            holder,
            until_ms,
        } => assert_eq!(
            (name.as_str(), holder.as_str(), *until_ms),
            ("ntc", "a", a.expires_ms)
        ),
        other => panic!("{backend}: {other}"),
    }
    assert!(refused.to_string().contains("held by a"), "{refused}");
    let again = store
        .acquire_lease("ntc", "a", "ta2", 60_000)
        .await
        .unwrap();
    assert_eq!(
        (again.token.as_str(), again.transitions),
        ("ta", 1),
        "{backend}"
    );

    // Renewing with the token extends it; a wrong token is refused.
    let renewed = store.renew_lease("ntc", "ta", 120_000).await.unwrap();
    assert_eq!(renewed.expires_ms - renewed.now_ms, 120_000, "{backend}");
    assert!(matches!(
        store.renew_lease("ntc", "tb", 1_000).await,
        Err(StoreError::LeaseNotHeld { .. })
    ));

    // A short holding expires on the store's clock; B takes it, a new holding.
    store.renew_lease("ntc", "ta", 200).await.unwrap();
    let b = wait_for("a's lease to expire", || {
        let store = Arc::clone(&stores[stores.len() - 1]);
        async move { store.acquire_lease("ntc", "b", "tb", 60_000).await.ok() }
    })
    .await;
    assert_eq!(
        (b.holder.as_str(), b.token.as_str(), b.transitions),
        ("b", "tb", 2)
    );

    // A, past its lease, can neither renew nor release it: lost.
    let lost = store.renew_lease("ntc", "ta", 60_000).await.unwrap_err();
    assert!(matches!(lost, StoreError::LeaseNotHeld { .. }), "{lost}");
    assert!(lost.to_string().contains("lease ntc"), "{lost}");
    assert!(matches!(
        store.release_lease("ntc", "ta").await,
        Err(StoreError::LeaseNotHeld { .. })
    ));
    assert_eq!(store.get_lease("ntc").await.unwrap().holder, "b");

    // B releases: free at once, and A takes it back as a new holding (transitions 3).
    store.release_lease("ntc", "tb").await.unwrap();
    let free = store.get_lease("ntc").await.unwrap();
    assert_eq!((free.holder.as_str(), free.token.as_str()), ("", ""));
    assert!(matches!(
        store.release_lease("ntc", "tb").await,
        Err(StoreError::LeaseNotHeld { .. })
    ));
    let back = store
        .acquire_lease("ntc", "a", "ta3", 60_000)
        .await
        .unwrap();
    assert_eq!((back.token.as_str(), back.transitions), ("ta3", 3));

    // The log: a put per new holding, a delete per release; renewals and A's repeated
    // acquire none.
    let changes: Vec<(String, bool)> = store
        .changes_since(start, 1_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.kind == EntityKind::Lease && c.id == "ntc")
        .map(|c| (c.id, c.deleted))
        .collect();
    let put = ("ntc".to_owned(), false);
    let released = ("ntc".to_owned(), true);
    assert_eq!(
        changes,
        [put.clone(), put.clone(), released, put],
        "{backend}"
    );
}

#[tokio::test]
async fn sqlite_named_leases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db").display().to_string();
    // Two stores on one file: two daemons' writers, in turn on the file's lock.
    let one = store::open(&format!("sqlite:{path}")).await.unwrap();
    let two = store::open(&format!("sqlite:{path}")).await.unwrap();
    suite(vec![one, two]).await;
}

#[tokio::test]
async fn postgres_named_leases() {
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => pg,
        Err(e) => return e.skip("postgres_named_leases"),
    };
    // Two daemons' stores on one database, four connections each.
    let one = store::open(&pg.url()).await.unwrap();
    let two = store::open(&pg.url()).await.unwrap();
    suite(vec![one, two]).await;
}

#[tokio::test]
async fn leases_through_the_client_crate_over_grpc_and_a_release_wakes_a_watcher() {
    let mut daemon = TestDaemon::sqlite().await;
    let channel = ClientArgs::default()
        .dial(&daemon.daemon.as_ref().expect("running").endpoint)
        .await
        .expect("dial");
    let api = PreparerClient::new(channel);

    let err = api.get_lease("ntc").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    // Watch from now: a listing's revision.
    let listed = api
        .list_sites(CatalogQuery::default())
        .await
        .unwrap()
        .revision;
    let mut leases = api.watch(listed, &[EntityKind::Lease]).await.unwrap();

    let a = api
        .acquire_lease("ntc", "replica-a", Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(
        !a.token.is_empty() && a.transitions == 1 && a.is_held(),
        "{a:?}"
    );
    assert!(a.remaining <= Duration::from_secs(30), "{a:?}");
    let taken = leases.next().await.expect("a change").expect("ok");
    assert_eq!(
        (taken.kind, taken.id.as_str(), taken.deleted),
        (EntityKind::Lease, "ntc", false)
    );

    let busy = api
        .acquire_lease("ntc", "replica-b", None)
        .await
        .unwrap_err();
    assert!(busy.is_busy(), "{busy}");
    assert!(busy.to_string().contains("replica-a"), "{busy}");

    // GetLease shows the holder, never the token.
    let seen = api.get_lease("ntc").await.unwrap();
    assert_eq!(
        (seen.holder.as_str(), seen.token.as_str()),
        ("replica-a", "")
    );

    let renewed = api.renew_lease("ntc", &a.token, None).await.unwrap();
    assert_eq!((renewed.token, renewed.transitions), (a.token.clone(), 1));
    let wrong = api
        .renew_lease("ntc", "not-the-token", None)
        .await
        .unwrap_err();
    assert_eq!(wrong.kind(), ErrorKind::FailedPrecondition, "{wrong}");

    // The release wakes the watcher; the standby takes it at once.
    api.release_lease("ntc", &a.token).await.unwrap();
    let released = leases.next().await.expect("a change").expect("ok");
    assert_eq!(
        (released.kind, released.id.as_str(), released.deleted),
        (EntityKind::Lease, "ntc", true)
    );
    let b = api.acquire_lease("ntc", "replica-b", None).await.unwrap();
    assert_eq!((b.holder.as_str(), b.transitions), ("replica-b", 2));
    let lost = api.release_lease("ntc", &a.token).await.unwrap_err();
    assert_eq!(lost.kind(), ErrorKind::FailedPrecondition, "{lost}");

    // Bad arguments name what is wrong.
    let empty = api.acquire_lease("ntc", "", None).await.unwrap_err();
    assert_eq!(empty.kind(), ErrorKind::InvalidArgument);
    assert!(empty.to_string().contains("holder"), "{empty}");
    let bad = api.acquire_lease("bad name!", "x", None).await.unwrap_err();
    assert!(bad.to_string().contains("lease name"), "{bad}");
    drop(leases);
    daemon.stop().await;
}

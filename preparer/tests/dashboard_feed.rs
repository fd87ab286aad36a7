//! The dashboards' feed against a real daemon over the network, on a store whose change log
//! has been compacted.
//!
//! The feed lists every deployment, then watches from the listing's revision and applies the
//! watched changes. The daemon keeps the last 100,000 changes; once a store's history passed
//! that (~25,000 deployments prepared through placements, a few changes each), the feed of
//! the time, which watched from revision 0, got OUT_OF_RANGE and retried forever behind a
//! "daemon away" banner: the terminal dashboard froze. A store of a few thousand deployments
//! compacted to its last 1,000 changes shows the same in a second.

mod support;

use std::time::Duration;

use nephrite_preparer::dashboard::{Board, Connection, Feed, FeedConfig, Update};
use nephrite_preparer::store::{self, DeploymentInfo, NewDeployment};
use nephrite_preparer::tui::connector;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use tokio::sync::mpsc;

use support::TestDaemon;

/// Deployments in the store, each with a 1 KiB metadata value (~4 MiB of listing and as much
/// replayed log on the wire, so that the listing and the unread stream also contend for the
/// connections' flow-control windows).
const DEPLOYMENTS: usize = 4_000;

/// Changes the log keeps after the compaction.
const KEPT: i64 = 1_000;

/// A hang detector, not a timing assertion: a healthy feed lists this in a second or two.
const GIVE_UP: Duration = Duration::from_secs(120);

async fn fill(spec: &str, total: usize) {
    let store = store::open(spec).await.expect("store opens");
    let padding = "x".repeat(1024);
    let mut made = 0;
    while made < total {
        let rows: Vec<_> = (made..(made + 1000).min(total))
            .map(|n| NewDeployment {
                info: DeploymentInfo {
                    id: format!("d{n:07}"),
                    site_id: format!("site/{n:05}"),
                    metadata: [("padding".to_owned(), padding.clone())].into(),
                    created: "2026-01-01T00:00:00Z".into(),
                    updated: "2026-01-01T00:00:00Z".into(),
                    prepared: !n.is_multiple_of(3),
                    ..DeploymentInfo::default()
                },
                package_yaml: String::new(),
                author: "test".into(),
            })
            .collect();
        made += rows.len();
        store.create_deployments(rows).await.expect("fill");
    }
    store.compact_changes(KEPT).await.expect("compaction");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_lists_and_follows_a_store_whose_change_log_was_compacted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = format!("sqlite:{}", dir.path().join("preparer.db").display());
    let total = DEPLOYMENTS;
    fill(&spec, total).await;
    let daemon = TestDaemon::with_store(dir, spec).await;
    let server = format!("http://{}", daemon.endpoint().trim_start_matches("tcp://"));

    let (tx, mut updates) = mpsc::channel(4096);
    let feed = tokio::spawn(
        Feed::new(
            connector(&server, &Default::default()).expect("server"),
            FeedConfig::default(),
        )
        .run(tx),
    );
    let mut board = Board::default();
    let mut listed = false;
    let started = std::time::Instant::now();
    let mut apply = |board: &mut Board, update: Update| {
        if let Update::Connection(Connection::Lost { reason }) = &update {
            panic!("the feed lost the daemon: {reason}");
        }
        listed |= matches!(update, Update::Listed);
        board.apply(update);
        listed
    };
    let outcome = tokio::time::timeout(GIVE_UP, async {
        loop {
            let update = updates.recv().await.expect("the feed runs");
            if apply(&mut board, update) && board.deployment_count() == total {
                return;
            }
        }
    })
    .await;
    assert!(
        outcome.is_ok(),
        "the feed stalled: after {GIVE_UP:?}, {} of {total} deployments on the board",
        board.deployment_count(),
    );
    eprintln!(
        "{total} deployments listed by the feed in {:.2} s",
        started.elapsed().as_secs_f64()
    );

    // Live after the listing: a deployment created now reaches the board through Watch.
    let mut client = daemon.client().await;
    let id = client
        .create_deployment(pb::CreateDeploymentRequest {
            merge_package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n".into(),
            ..Default::default()
        })
        .await
        .expect("create")
        .into_inner()
        .deployment_id;
    let outcome = tokio::time::timeout(GIVE_UP, async {
        while board.deployment(&id).is_none() {
            let update = updates.recv().await.expect("the feed runs");
            apply(&mut board, update);
        }
    })
    .await;
    assert!(
        outcome.is_ok(),
        "the new deployment {id} never reached the board"
    );
    feed.abort();
}

use nephrite_l7::{Member, Pool, Translation};
use nephrite_proto::kuryr::l7::v1::rules_server::Rules as _;
use tokio_stream::StreamExt as _;

use super::*;

fn translation(port: u16) -> Translation {
    let mut translation = Translation::default();
    let pool = Pool {
        id: "shop/web:80".into(),
        members: vec![Member {
            address: format!("127.0.0.1:{port}").parse().unwrap(),
            weight: 1,
        }],
        ..Pool::default()
    };
    translation.config.pools.insert(pool.id.clone(), pool);
    translation.config.http.default_pool = Some("shop/web:80".into());
    translation
}

fn snapshot(port: u16) -> Arc<Snapshot> {
    Arc::new(Snapshot::compile(translation(port), Vec::new()))
}

/// The version the rules service names `translation(port)` by.
fn version(port: u16) -> String {
    kuryr_l7_client::wire::to_wire(&translation(port), &[]).version
}

fn version_of_event(event: &pb::WatchEvent) -> (&'static str, String) {
    match &event.event {
        Some(pb::watch_event::Event::Snapshot(s)) => ("snapshot", s.version.clone()),
        Some(pb::watch_event::Event::Unchanged(u)) => ("unchanged", u.version.clone()),
        Some(pb::watch_event::Event::Delta(d)) => ("delta", d.version.clone()),
        None => ("none", String::new()),
    }
}

#[tokio::test]
async fn watch_sends_the_snapshot_then_every_new_version_and_unchanged_for_a_known_one() {
    let publisher = Publisher::new(snapshot(1));
    let service = RulesService::new(publisher.clone(), ShutdownHandle::new());
    let first = version(1);

    let mut stream = service
        .watch(Request::new(pb::WatchRequest {
            router: "r1".into(),
            known_version: String::new(),
            accept_deltas: false,
        }))
        .await
        .unwrap()
        .into_inner();
    let event = stream.next().await.unwrap().unwrap();
    assert_eq!(version_of_event(&event), ("snapshot", first.clone()));

    // Publishing the same content again is no new version.
    assert!(!publisher.publish(snapshot(1)));
    assert!(publisher.publish(snapshot(2)));
    let second = version(2);
    let event = stream.next().await.unwrap().unwrap();
    assert_eq!(version_of_event(&event), ("snapshot", second.clone()));

    // A router that already serves the current version downloads nothing.
    let mut stream = service
        .watch(Request::new(pb::WatchRequest {
            router: "r2".into(),
            known_version: second.clone(),
            accept_deltas: false,
        }))
        .await
        .unwrap()
        .into_inner();
    let event = stream.next().await.unwrap().unwrap();
    assert_eq!(version_of_event(&event), ("unchanged", second));
}

#[tokio::test]
async fn watch_streams_end_when_the_server_shuts_down() {
    let shutdown = ShutdownHandle::new();
    let service = RulesService::new(Publisher::new(snapshot(1)), shutdown.clone());
    let mut stream = service
        .watch(Request::new(pb::WatchRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert!(stream.next().await.is_some());
    shutdown.trigger();
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn acknowledgements_are_listed_by_router() {
    let publisher = Publisher::new(snapshot(1));
    let service = RulesService::new(publisher.clone(), ShutdownHandle::new());
    for (router, version) in [("a", "old"), ("b", "v"), ("a", "v2")] {
        service
            .acknowledge(Request::new(pb::AcknowledgeRequest {
                router: router.into(),
                version: version.into(),
                address: format!("{router}:80"),
            }))
            .await
            .unwrap();
    }
    let err = service
        .acknowledge(Request::new(pb::AcknowledgeRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let reply = service
        .list_routers(Request::new(pb::ListRoutersRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.current_version, version(1));
    let seen: Vec<(&str, &str)> = reply
        .routers
        .iter()
        .map(|r| (r.router.as_str(), r.version.as_str()))
        .collect();
    assert_eq!(seen, [("a", "v2"), ("b", "v")]);
}

#[tokio::test]
async fn with_deltas_new_versions_come_as_changes_from_the_one_sent_before() {
    let publisher = Publisher::new(snapshot(1));
    let service = RulesService::new(publisher.clone(), ShutdownHandle::new());
    let mut stream = service
        .watch(Request::new(pb::WatchRequest {
            router: "r1".into(),
            known_version: String::new(),
            accept_deltas: true,
        }))
        .await
        .unwrap()
        .into_inner();
    let Some(pb::watch_event::Event::Snapshot(mut served)) =
        stream.next().await.unwrap().unwrap().event
    else {
        panic!("a whole snapshot first");
    };
    for port in 2..5 {
        publisher.publish(snapshot(port));
        let Some(pb::watch_event::Event::Delta(delta)) =
            stream.next().await.unwrap().unwrap().event
        else {
            panic!("a delta for version {port}");
        };
        // Only the pool changed: the listeners are not sent again.
        assert!(delta.http.is_none() && delta.https.is_none(), "{delta:?}");
        served = kuryr_l7_client::wire::delta::apply(&served, &delta).unwrap();
        let current = publisher.current();
        assert_eq!(
            served,
            kuryr_l7_client::wire::to_wire(&current.translation, &current.read_errors)
        );
    }

    // A router that knows the current version gets `unchanged`, then a whole snapshot (this
    // stream never sent it a base for a delta).
    let mut stream = service
        .watch(Request::new(pb::WatchRequest {
            router: "r2".into(),
            known_version: served.version.clone(),
            accept_deltas: true,
        }))
        .await
        .unwrap()
        .into_inner();
    let event = stream.next().await.unwrap().unwrap();
    assert_eq!(version_of_event(&event).0, "unchanged");
    publisher.publish(snapshot(9));
    let event = stream.next().await.unwrap().unwrap();
    assert_eq!(version_of_event(&event), ("snapshot", version(9)));
}

#[tokio::test]
async fn the_router_table_is_bounded_and_long_names_are_refused() {
    let service = RulesService::new(Publisher::new(snapshot(1)), ShutdownHandle::new());
    let ack = |router: String| pb::AcknowledgeRequest {
        router,
        version: "v".into(),
        address: "127.0.0.1:1".into(),
    };
    for i in 0..MAX_ROUTERS {
        service
            .acknowledge(Request::new(ack(format!("r{i}"))))
            .await
            .unwrap();
    }
    // One more: the router heard from longest ago (r0) makes room.
    service
        .acknowledge(Request::new(ack("newcomer".into())))
        .await
        .unwrap();
    let routers = service
        .list_routers(Request::new(pb::ListRoutersRequest {}))
        .await
        .unwrap()
        .into_inner()
        .routers;
    assert_eq!(routers.len(), MAX_ROUTERS);
    assert!(routers.iter().any(|r| r.router == "newcomer"));
    assert!(!routers.iter().any(|r| r.router == "r0"));
    // A router already known acknowledges again without evicting anyone.
    service
        .acknowledge(Request::new(ack("r5".into())))
        .await
        .unwrap();
    let count = service
        .list_routers(Request::new(pb::ListRoutersRequest {}))
        .await
        .unwrap()
        .into_inner()
        .routers
        .len();
    assert_eq!(count, MAX_ROUTERS);

    let long = "x".repeat(MAX_NAME + 1);
    let refused = service
        .acknowledge(Request::new(ack(long.clone())))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(refused.message().contains("router is"), "{refused}");
    let watch = service
        .watch(Request::new(pb::WatchRequest {
            router: long,
            ..pb::WatchRequest::default()
        }))
        .await;
    assert_eq!(watch.err().unwrap().code(), tonic::Code::InvalidArgument);
}

//! `KubeWatch` against the in-memory API server: the counted first listing, changes, a restart
//! that keeps the store, selectors, and failures told apart.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ObjectMeta, PostParams};
use kube::core::Status;
use kube::runtime::reflector::ObjectRef;
use nephrite_test_apiserver::TestApiServer;

use super::*;

type Events = Pin<Box<dyn Stream<Item = WatchEvent> + Send>>;

async fn next(events: &mut Events) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event within 10 s")
        .expect("the stream never ends")
}

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn counts_the_first_listing_follows_changes_and_keeps_the_store_over_a_restart() {
    let server = TestApiServer::start().await.expect("api server");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    for name in ["a", "b", "other"] {
        let team = if name == "other" { "blue" } else { "red" };
        api.create(&PostParams::default(), &config_map(name, &[("team", team)]))
            .await
            .expect("created");
    }

    let watch = KubeWatch::new(api.clone(), watcher::Config::default().labels("team=red"));
    let store = watch.store();
    let mut events: Events = Box::pin(watch.events());

    // The ready signal counts what the label selector picked.
    match next(&mut events).await {
        WatchEvent::Listed { objects, first } => {
            assert_eq!((objects, first), (2, true));
        }
        other => panic!("expected the first listing, got {other:?}"),
    }
    assert!(store.get(&ObjectRef::new("a").within("default")).is_some());
    assert!(
        store
            .get(&ObjectRef::new("other").within("default"))
            .is_none()
    );

    api.create(&PostParams::default(), &config_map("c", &[("team", "red")]))
        .await
        .expect("created");
    assert!(matches!(next(&mut events).await, WatchEvent::Changed));
    assert_eq!(store.len(), 3);
    api.delete("a", &DeleteParams::default())
        .await
        .expect("deleted");
    assert!(matches!(next(&mut events).await, WatchEvent::Changed));
    assert_eq!(store.len(), 2);

    // An expired watch is a failure, then a new complete listing; the store never empties.
    assert_eq!(server.expire_watches("configmaps"), 1);
    match next(&mut events).await {
        WatchEvent::Failed(error) => assert_eq!(Unavailable::of(&error), None, "{error}"),
        other => panic!("expected the expired watch, got {other:?}"),
    }
    assert_eq!(store.len(), 2);
    match next(&mut events).await {
        WatchEvent::Listed { objects, first } => assert_eq!((objects, first), (2, false)),
        other => panic!("expected the listing after the restart, got {other:?}"),
    }
}

#[tokio::test]
async fn a_forbidden_list_is_told_apart_and_asked_again_after_a_short_pause() {
    let server = TestApiServer::start().await.expect("api server");
    let api: Api<ConfigMap> = Api::namespaced(server.client().expect("client"), "default");
    api.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .expect("created");
    server.faults().fail_next("list", "configmaps", 1, 403);

    let watch = KubeWatch::new(api, watcher::Config::default());
    let mut events: Events = Box::pin(watch.events());
    match next(&mut events).await {
        WatchEvent::Failed(error) => {
            assert!(
                matches!(Unavailable::of(&error), Some(Unavailable::Forbidden(_))),
                "{error}"
            );
        }
        other => panic!("expected the forbidden list, got {other:?}"),
    }
    let started = tokio::time::Instant::now();
    match next(&mut events).await {
        WatchEvent::Listed { objects, first } => assert_eq!((objects, first), (1, true)),
        other => panic!("expected the listing, got {other:?}"),
    }
    // watch_backoff's first pause, not client-go's 0.8 s.
    assert!(started.elapsed() < Duration::from_millis(700));
}

#[tokio::test]
async fn a_kind_the_cluster_does_not_serve_is_not_served_and_the_modifier_sees_every_object() {
    let server = TestApiServer::start().await.expect("api server");
    let client = server.client().expect("client");
    let missing = ApiResource {
        group: "route.openshift.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "route.openshift.io/v1".to_owned(),
        kind: "Route".to_owned(),
        plural: "routes".to_owned(),
    };
    let watch = KubeWatch::new_with(
        Api::<DynamicObject>::all_with(client.clone(), &missing),
        watcher::Config::default(),
        missing,
    );
    let mut events: Events = Box::pin(watch.events());
    match next(&mut events).await {
        WatchEvent::Failed(error) => {
            assert_eq!(
                Unavailable::of(&error),
                Some(Unavailable::NotServed),
                "{error}"
            );
        }
        other => panic!("expected a kind not served, got {other:?}"),
    }

    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .expect("created");
    let watch = KubeWatch::new(api, watcher::Config::default()).modify(|object: &mut ConfigMap| {
        object
            .metadata
            .labels
            .get_or_insert_default()
            .insert("seen".to_owned(), "yes".to_owned());
    });
    let store = watch.store();
    let mut events: Events = Box::pin(watch.events());
    assert!(matches!(
        next(&mut events).await,
        WatchEvent::Listed { objects: 1, .. }
    ));
    let kept = store
        .get(&ObjectRef::new("a").within("default"))
        .expect("listed");
    assert_eq!(kept.metadata.labels.as_ref().unwrap()["seen"], "yes");
}

fn status(code: u16) -> Box<Status> {
    Box::new(Status::failure(&format!("code {code}"), "Reason").with_code(code))
}

#[test]
fn only_404_and_403_make_a_kind_unavailable() {
    let api = |code: u16| kube::Error::Api(status(code));
    assert_eq!(
        Unavailable::of(&watcher::Error::InitialListFailed(api(404))),
        Some(Unavailable::NotServed)
    );
    assert_eq!(
        Unavailable::of(&watcher::Error::WatchStartFailed(api(403))),
        Some(Unavailable::Forbidden("code 403".to_owned()))
    );
    assert_eq!(
        Unavailable::of(&watcher::Error::WatchError(status(403))),
        Some(Unavailable::Forbidden("code 403".to_owned()))
    );
    assert_eq!(
        Unavailable::of(&watcher::Error::WatchError(status(410))),
        None
    );
    assert_eq!(
        Unavailable::of(&watcher::Error::InitialListFailed(api(500))),
        None
    );
    assert_eq!(Unavailable::of(&watcher::Error::NoResourceVersion), None);
    assert_eq!(
        Unavailable::Forbidden("no".to_owned()).to_string(),
        "not allowed to read it: no"
    );
}

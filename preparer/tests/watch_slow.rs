//! A watcher that stops reading while changes flow (issue 30: "a slow stream is dropped with
//! a clear status, memory is returned"). The Data API is served as `preparer serve` serves it,
//! with a patience of 5 s instead of 60 s. One client connection (a 4 KiB HTTP/2 window per
//! stream) holds two `Watch` streams: one never reads, the other reads everything. While 300
//! changes flow, the silent stream fills its buffer and is dropped (`/metrics` counts the drop,
//! and its feed and buffer are gone: one stream left open); the other stream sees every change
//! and keeps going. When the silent watcher finally reads, it gets what the transport had
//! already taken, then RESOURCE_EXHAUSTED naming the revision of the last change it got; a new
//! watch from there delivers the rest with nothing missing.

mod support;

use std::sync::Arc;
use std::time::Duration;

use nephrite_preparer::api::{Changes, DataService, Watchers};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::{DaemonIdentity, GrpcServer};
use support::wait_for;
use tonic::transport::Channel;

const CHANGES: usize = 300;
const PACKAGE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";

/// The n-th template's id: long (~400 bytes), so the changes fill windows and buffers quickly.
fn template(n: usize) -> String {
    format!("t{n:04}-{}", "x".repeat(400))
}

/// `name value` of one sample on a `/metrics` page.
fn sample(page: &str, name: &str) -> Option<u64> {
    page.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

async fn watch(channel: &Channel, from: u64) -> tonic::Streaming<pb::Change> {
    DataClient::new(channel.clone())
        .watch(pb::WatchRequest {
            from_revision: from,
            ..Default::default()
        })
        .await
        .expect("watch")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_stops_reading_is_dropped_and_the_others_keep_going() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = format!("sqlite:{}", dir.path().join("p.db").display());
    let store = nephrite_preparer::store::open(&spec).await.expect("store");
    let watchers = Watchers::new(Duration::from_secs(5));
    let mut server = GrpcServer::new(DaemonIdentity::new("preparer", "test"))
        .handle_signals(false)
        .metrics_listen(Some("127.0.0.1:0".parse().expect("endpoint")));
    watchers.register(&mut server).expect("metrics");
    let api = DataService::new(Arc::clone(&store), Changes::default(), true)
        .with_shutdown(server.shutdown_handle())
        .with_watchers(watchers);
    let bound = server
        .add_service(nephrite_preparer::api::server(api))
        .bind(&"127.0.0.1:0".parse().expect("endpoint"))
        .await
        .expect("bind");
    let authority = bound.local_endpoint().authority().expect("tcp");
    let metrics_url = format!(
        "http://{}/metrics",
        bound
            .metrics_endpoint()
            .and_then(|e| e.authority())
            .expect("metrics endpoint")
    );
    let shutdown = bound.shutdown_handle();
    let serving = tokio::spawn(bound.run());

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{authority}"))
        .expect("uri")
        .initial_stream_window_size(Some(4096))
        .connect()
        .await
        .expect("connect");
    let mut writer = DataClient::new(channel.clone());

    // The silent watcher: opened, then not read.
    let mut silent = watch(&channel, 0).await;
    // The reading watcher, on the same connection: every change goes to `seen`.
    let mut reader = watch(&channel, 0).await;
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<pb::Change>();
    let reading = tokio::spawn(async move {
        while let Some(change) = reader.message().await.expect("the reader's stream") {
            if seen_tx.send(change).is_err() {
                break;
            }
        }
    });

    let ids: Vec<String> = (0..CHANGES).map(template).collect();
    for id in &ids {
        writer
            .register_template(pb::RegisterTemplateRequest {
                id: id.clone(),
                package_yaml: PACKAGE.into(),
                ..Default::default()
            })
            .await
            .expect("register");
    }
    for expected in &ids {
        let change = tokio::time::timeout(Duration::from_secs(60), seen.recv())
            .await
            .expect("the reader keeps getting changes")
            .expect("the reader's stream is open");
        assert_eq!(&change.id, expected);
    }

    // The silent stream is dropped, its feed (and the buffer with it) gone: one stream open.
    let http = reqwest::Client::new();
    let page = wait_for("the silent watcher dropped", || {
        let request = http.get(&metrics_url);
        async move {
            let page = request.send().await.ok()?.text().await.ok()?;
            (sample(&page, "preparer_watch_dropped_total") == Some(1)
                && sample(&page, "preparer_watch_streams") == Some(1))
            .then_some(page)
        }
    })
    .await;
    assert_eq!(sample(&page, "preparer_watch_streams"), Some(1), "{page}");

    // The silent watcher reads at last: what the transport had taken, then the reason.
    let mut got = Vec::new();
    let status = loop {
        match silent.message().await {
            Ok(Some(change)) => got.push(change),
            Ok(None) => panic!("the silent stream ended without a status"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(
        got.len() < CHANGES,
        "the silent watcher got all {} changes",
        got.len()
    );
    let resume = got.last().map_or(0, |c| c.revision);
    assert!(
        status
            .message()
            .ends_with(&format!("watch again from revision {resume}")),
        "{} (last change received: {resume})",
        status.message()
    );
    // Watching again from there delivers the rest: nothing is missing.
    let mut again = watch(&channel, resume).await;
    while got.len() < CHANGES {
        let change = tokio::time::timeout(Duration::from_secs(60), again.message())
            .await
            .expect("the new watch delivers")
            .expect("the new watch")
            .expect("open");
        got.push(change);
    }
    let got_ids: Vec<&str> = got.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(got_ids, ids.iter().map(String::as_str).collect::<Vec<_>>());
    drop(again);

    // The reader goes on.
    writer
        .register_template(pb::RegisterTemplateRequest {
            id: "after".into(),
            package_yaml: PACKAGE.into(),
            ..Default::default()
        })
        .await
        .expect("register");
    let change = tokio::time::timeout(Duration::from_secs(60), seen.recv())
        .await
        .expect("the reader still gets changes")
        .expect("open");
    assert_eq!(change.id, "after");

    shutdown.trigger();
    serving
        .await
        .expect("server task")
        .expect("the server drains");
    reading
        .await
        .expect("the reader's stream ends with the server");
}

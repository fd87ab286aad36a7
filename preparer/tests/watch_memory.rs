//! 500 `Watch` streams against the real `preparer` binary after a few deployments with
//! megabyte packages (issue 30: they once took it from 45 MB to ~2 GB, never given back).
//! Each stream reads the whole change log from revision 0 and stays open; the daemon's
//! resident memory (its process tree's RSS) stays under 200 MB while they are open and
//! after they end. Streams send deployments' rows, never their packages, buffer a bounded
//! number of changes each, and take turns to read the store.

mod support;

use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_test_services::process::tree_rss_bytes;
use support::wait_for;

const STREAMS: usize = 500;
/// Streams per connection: under the runtime's 128 concurrent streams per connection.
const PER_CONNECTION: usize = 50;
const LIMIT: u64 = 200 * 1024 * 1024;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

// Under load this once measured 355–369 MiB: each stream's store reads went to the blocking
// pool, which grew to its 512 threads waiting for the one SQLite connection (515 threads seen,
// each with a stack and an allocator heap). Store calls now wait for a connection as tasks:
// 76 → 75 MiB with 16 threads beside three CPU hogs, 77 → 78 MiB beside five.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_watch_streams_keep_the_preparer_under_200_mb() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let serve = support::binary::serve(&store, &[]).await;
    let pid = serve.child.id();
    let endpoint: nephrite_runtime::Endpoint = serve
        .server
        .trim_start_matches("http://")
        .parse()
        .expect("endpoint");
    let channel = nephrite_runtime::dial(&endpoint).await.expect("dial");
    let mut client = DataClient::new(channel);

    // Five deployments of a 1 MiB package each.
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata: {{blob: {}}}\n",
        "x".repeat(1 << 20)
    );
    client
        .register_template(pb::RegisterTemplateRequest {
            id: "big".into(),
            metadata: Default::default(),
            package_yaml: big,
        })
        .await
        .expect("template");
    let mut ids = Vec::new();
    for n in 0..5 {
        let id = client
            .create_deployment(pb::CreateDeploymentRequest {
                template_id: "big".into(),
                instance_key: format!("big-{n}"),
                ..Default::default()
            })
            .await
            .expect("create")
            .into_inner()
            .deployment_id;
        ids.push(id);
    }
    for id in &ids {
        wait_for(&format!("{id} prepared"), || {
            let mut client = client.clone();
            let id = id.clone();
            async move {
                let info = client
                    .get_deployment(pb::GetRequest { id })
                    .await
                    .ok()?
                    .into_inner()
                    .info?;
                info.prepared.then_some(())
            }
        })
        .await;
    }
    // The last change every stream must see.
    client
        .register_template(pb::RegisterTemplateRequest {
            id: "marker".into(),
            metadata: Default::default(),
            package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\n".into(),
        })
        .await
        .expect("marker");
    let before = tree_rss_bytes(pid);
    assert!(before > 0, "no RSS for pid {pid}");

    // 500 streams from revision 0, each read up to the marker, then held open.
    let (caught_up, mut ready) = tokio::sync::mpsc::channel::<()>(STREAMS);
    let (release, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut tasks = Vec::new();
    for connection in 0..STREAMS / PER_CONNECTION {
        let channel = nephrite_runtime::dial(&endpoint).await.expect("dial");
        for _ in 0..PER_CONNECTION {
            let mut client = DataClient::new(channel.clone());
            let caught_up = caught_up.clone();
            let mut released = release.subscribe();
            tasks.push(tokio::spawn(async move {
                let mut stream = client
                    .watch(pb::WatchRequest::default())
                    .await
                    .unwrap_or_else(|e| panic!("watch on connection {connection}: {e:?}"))
                    .into_inner();
                let mut changes = 0usize;
                loop {
                    let change = stream
                        .message()
                        .await
                        .expect("a change")
                        .expect("the stream stays open");
                    changes += 1;
                    if change.kind == pb::EntityKind::Template as i32 && change.id == "marker" {
                        break;
                    }
                }
                caught_up.send(()).await.expect("test alive");
                let _ = released.recv().await;
                drop(stream);
                changes
            }));
        }
    }
    drop(caught_up);
    for _ in 0..STREAMS {
        ready.recv().await.expect("every stream catches up");
    }
    let open = tree_rss_bytes(pid);
    eprintln!(
        "preparer RSS: {:.1} MiB before, {:.1} MiB with {STREAMS} streams open",
        mib(before),
        mib(open)
    );
    assert!(
        open < LIMIT,
        "{:.1} MiB with {STREAMS} streams open",
        mib(open)
    );

    release.send(()).expect("streams listening");
    for task in tasks {
        assert!(task.await.expect("stream task") >= 7, "every change read");
    }
    // The server has let go of the streams when it takes new calls again at its full
    // capacity; memory stays under the limit after they end.
    client
        .list_plugins(pb::ListPluginsRequest::default())
        .await
        .expect("the daemon answers");
    let after = tree_rss_bytes(pid);
    eprintln!(
        "preparer RSS: {:.1} MiB after the streams ended",
        mib(after)
    );
    assert!(
        after < LIMIT,
        "{:.1} MiB after the streams ended",
        mib(after)
    );
    drop(serve);
}

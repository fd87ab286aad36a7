//! 1,000 objects, 10 concurrent writers and 5 watchers: no event is lost, every watcher sees
//! every change in resourceVersion order, and the final list equals the writers' state.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::ObjectMeta;
use nephrite_test_apiserver::TestApiServer;
use serde_json::json;

const WRITERS: usize = 10;
const PER_WRITER: usize = 100;
const WATCHERS: usize = 5;

/// What one writer did: the resourceVersion of every write, and its objects' final data
/// (`None` when deleted).
struct WriterLog {
    rvs: Vec<u64>,
    finals: BTreeMap<String, Option<String>>,
}

fn value_of(cm: &ConfigMap) -> Option<String> {
    cm.data.as_ref().and_then(|d| d.get("v")).cloned()
}

fn rv_of(cm: &ConfigMap) -> anyhow::Result<u64> {
    Ok(cm.resource_version().context("resourceVersion")?.parse()?)
}

async fn writer(api: Api<ConfigMap>, w: usize) -> anyhow::Result<WriterLog> {
    let mut log = WriterLog {
        rvs: Vec::new(),
        finals: BTreeMap::new(),
    };
    for i in 0..PER_WRITER {
        let name = format!("w{w:02}-{i:03}");
        let obj = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([("writer".to_string(), w.to_string())])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([("v".to_string(), "0".to_string())])),
            ..Default::default()
        };
        let created = api.create(&PostParams::default(), &obj).await?;
        log.rvs.push(rv_of(&created)?);
        // An update through PUT (with the resourceVersion just read) ...
        let mut next = created.clone();
        next.data = Some(BTreeMap::from([("v".to_string(), "1".to_string())]));
        let replaced = api.replace(&name, &PostParams::default(), &next).await?;
        log.rvs.push(rv_of(&replaced)?);
        // ... and one through a merge patch.
        let patched = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"v": format!("2-{i}")}})),
            )
            .await?;
        log.rvs.push(rv_of(&patched)?);
        log.finals.insert(name.clone(), value_of(&patched));
        if i % 5 == 0 {
            let gone = api
                .delete(&name, &DeleteParams::default())
                .await?
                .left()
                .context("delete returns the object")?;
            log.rvs.push(rv_of(&gone)?);
            log.finals.insert(name, None);
        }
    }
    Ok(log)
}

/// One watcher's view: (type, name, rv, value) in arrival order.
type Seen = Vec<(&'static str, String, u64, Option<String>)>;

async fn watch_until(
    api: Api<ConfigMap>,
    from: String,
    until: tokio::sync::watch::Receiver<u64>,
) -> anyhow::Result<Seen> {
    let mut stream = api
        .watch(&WatchParams::default().labels("writer"), &from)
        .await?
        .boxed();
    let mut seen = Seen::new();
    let mut last_rv = 0u64;
    loop {
        let target = *until.borrow();
        if target > 0 && last_rv >= target {
            return Ok(seen);
        }
        let next = tokio::time::timeout(Duration::from_secs(60), stream.try_next())
            .await
            .context("watcher stalled")??;
        let (ty, obj) = match next {
            Some(WatchEvent::Added(o)) => ("ADDED", o),
            Some(WatchEvent::Modified(o)) => ("MODIFIED", o),
            Some(WatchEvent::Deleted(o)) => ("DELETED", o),
            Some(WatchEvent::Bookmark(b)) => {
                last_rv = last_rv.max(b.metadata.resource_version.parse()?);
                continue;
            }
            Some(WatchEvent::Error(e)) => bail!("watch error: {e:?}"),
            None => bail!("watch ended early"),
        };
        let rv = rv_of(&obj)?;
        if rv <= last_rv {
            bail!("event at rv {rv} after rv {last_rv}: out of order");
        }
        last_rv = rv;
        seen.push((ty, obj.name_any(), rv, value_of(&obj)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_and_watchers_lose_nothing() -> anyhow::Result<()> {
    let server = TestApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await?;
    let client = server.client()?;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let start_rv = api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .context("list rv")?;

    let (done_tx, done_rx) = tokio::sync::watch::channel(0u64);
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|_| tokio::spawn(watch_until(api.clone(), start_rv.clone(), done_rx.clone())))
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(writer(api.clone(), w)))
        .collect();

    let mut all_rvs = Vec::new();
    let mut finals = BTreeMap::new();
    for w in writers {
        let log = w.await??;
        all_rvs.extend(log.rvs);
        finals.extend(log.finals);
    }
    all_rvs.sort_unstable();
    let final_rv = server.resource_version();
    done_tx.send(final_rv)?;

    let mut views = Vec::new();
    for w in watchers {
        views.push(w.await??);
    }
    for (i, seen) in views.iter().enumerate() {
        let rvs: Vec<u64> = seen.iter().map(|e| e.2).collect();
        assert_eq!(rvs.len(), all_rvs.len(), "watcher {i} saw every write");
        assert_eq!(
            rvs, all_rvs,
            "watcher {i} saw the writes in resourceVersion order"
        );
        assert_eq!(seen, &views[0], "watcher {i} saw what watcher 0 saw");
        // Replaying the events gives the writers' final state.
        let mut replay: BTreeMap<String, Option<String>> = BTreeMap::new();
        for (ty, name, _, value) in seen {
            replay.insert(
                name.clone(),
                if *ty == "DELETED" {
                    None
                } else {
                    value.clone()
                },
            );
        }
        assert_eq!(
            replay, finals,
            "watcher {i}'s replay equals the final state"
        );
    }

    let listed: BTreeMap<String, Option<String>> = api
        .list(&ListParams::default().labels("writer"))
        .await?
        .items
        .iter()
        .map(|o| (o.name_any(), value_of(o)))
        .collect();
    let expected: BTreeMap<String, Option<String>> = finals
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| (n, Some(v))))
        .collect();
    assert_eq!(listed.len(), WRITERS * PER_WRITER * 4 / 5);
    assert_eq!(listed, expected, "the list equals the writers' final state");
    Ok(())
}

//! `Watch` of the Data API: the change feed from a revision, woken by [`super::Changes`].
//!
//! Each stream is bounded in memory: it sends deployments' rows without their packages, and
//! buffers at most [`WATCH_BUFFER`] changes; a watcher that leaves that buffer full for its
//! patience ([`SLOW_WATCHER`] unless [`Watchers::new`] says otherwise) is dropped at once,
//! its buffer freed, with RESOURCE_EXHAUSTED saying where to resume. Their store reads wait
//! for a connection as tasks, as every store call does.

use std::sync::Arc;
use std::time::Duration;

use nephrite_proto::nephrite::preparer::data::v1 as pb;
use tonic::{Request, Response, Status};

mod feed;

pub use feed::{SLOW_WATCHER, WATCH_BUFFER, Watchers};

use super::{DataApi, Result, Stream_, convert};

/// Changes a feed reads from the store at a time (what it holds besides its buffer while its
/// watcher is slow).
const READ_BATCH: usize = 128;
use crate::errors::ApiError;
use crate::store::{EntityKind, StoreError};

pub(super) async fn watch(
    api: &DataApi,
    request: Request<pb::WatchRequest>,
) -> Result<Response<Stream_<pb::Change>>> {
    let r = request.into_inner();
    let requested = r.from_revision;
    let from = i64::try_from(r.from_revision)
        .map_err(|_| Status::invalid_argument("from_revision is too large"))?;
    // 0 asks for every change still kept, so the log's compaction moves its start. (It used to
    // answer OUT_OF_RANGE once the log had been compacted, and a dashboard, which watches from
    // 0, then retried forever: it froze once a store's history passed the 100,000 kept
    // changes.)
    let from_oldest = from == 0;
    let watchers = api.watchers.clone();
    let first = api.store.changes_since(from, 1).await;
    let from = oldest_kept(first, from, from_oldest)?;
    let kinds: Vec<i32> = r.kinds;
    let store = Arc::clone(&api.store);
    let mut wake = api.changes.subscribe();
    let shutdown = api.shutdown.clone().unwrap_or_default();
    let (mut feed, stream) = watchers.feed(requested);
    tokio::spawn(async move {
        let mut revision = from;
        let mut sent = false;
        loop {
            let read = store.changes_since(revision, READ_BATCH).await;
            let changes = match read {
                Ok(changes) => changes,
                // Compacted between the check above and this first read: start at the oldest.
                Err(StoreError::Compacted { oldest, .. })
                    if from_oldest && !sent && oldest - 1 > revision =>
                {
                    revision = oldest - 1;
                    continue;
                }
                Err(err) => {
                    feed.fail(Status::from(ApiError::from(err)));
                    return;
                }
            };
            let caught_up = changes.len() < READ_BATCH;
            for change in changes {
                revision = change.revision;
                let kind = match change.kind {
                    EntityKind::Template => pb::EntityKind::Template,
                    EntityKind::Site => pb::EntityKind::Site,
                    EntityKind::Plugin => pb::EntityKind::Plugin,
                    EntityKind::Deployment => pb::EntityKind::Deployment,
                } as i32;
                if !kinds.is_empty() && !kinds.contains(&kind) {
                    continue;
                }
                let deployment = if change.kind == EntityKind::Deployment && !change.deleted {
                    store
                        .get_deployment_info(&change.id)
                        .await
                        .ok()
                        .map(convert::info)
                } else {
                    None
                };
                let message = pb::Change {
                    revision: change.revision as u64,
                    kind,
                    id: change.id,
                    r#type: if change.deleted {
                        pb::ChangeType::Delete
                    } else {
                        pb::ChangeType::Put
                    } as i32,
                    deployment,
                };
                if !feed.send(message).await {
                    return;
                }
                sent = true;
            }
            if caught_up {
                tokio::select! {
                    _ = feed.closed() => return,
                    _ = shutdown.triggered() => return,
                    _ = wake.changed() => {}
                    // Other daemons on the same database write without waking us.
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    });
    Ok(Response::new(Box::pin(stream)))
}

/// Where a watch starts: `from`, or, for a watch of everything kept (`from_oldest`) whose
/// `from` was compacted away, just before the oldest change kept. Any other error is the
/// caller's answer.
fn oldest_kept<T>(
    read: std::result::Result<T, StoreError>,
    from: i64,
    from_oldest: bool,
) -> std::result::Result<i64, Status> {
    match read {
        Ok(_) => Ok(from),
        Err(StoreError::Compacted { oldest, .. }) if from_oldest => Ok(oldest - 1),
        Err(err) => Err(Status::from(ApiError::from(err))),
    }
}

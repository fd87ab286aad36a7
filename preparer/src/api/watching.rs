//! `Watch` of the Data API: the change feed from a revision, woken by [`super::Changes`].
//!
//! Each stream is bounded in memory: it sends deployments' rows without their packages, and
//! buffers at most [`WATCH_BUFFER`] changes; a watcher that leaves that buffer full for its
//! patience ([`SLOW_WATCHER`] unless [`Watchers::new`] says otherwise) is dropped at once,
//! its buffer freed, with RESOURCE_EXHAUSTED saying where to resume. Their store reads wait
//! for a connection as tasks, as every store call does.

use std::sync::Arc;
use std::time::Duration;

use nephrite_preparer_client::{Change, EntityKind};
use tonic::Status;

mod feed;

pub use feed::{FeedStream, SLOW_WATCHER, WATCH_BUFFER, Watchers};

use super::DataService;

/// Changes a feed reads from the store at a time (what it holds besides its buffer while its
/// watcher is slow).
const READ_BATCH: usize = 128;
use crate::errors::ApiError;
use crate::store::StoreError;

impl DataService {
    /// Every change after `from_revision` (0: from the oldest kept) of the `kinds` given
    /// (empty: all), then changes as they happen, until the client leaves, the daemon stops or
    /// the watcher leaves its buffer full too long.
    pub async fn watch(
        &self,
        from_revision: u64,
        kinds: Vec<EntityKind>,
    ) -> Result<FeedStream, ApiError> {
        let from = i64::try_from(from_revision)
            .map_err(|_| ApiError::Invalid("from_revision is too large".to_owned()))?;
        // 0 asks for every change still kept, so the log's compaction moves its start. (It used
        // to answer OUT_OF_RANGE once the log had been compacted, and a dashboard, which watches
        // from 0, then retried forever: it froze once a store's history passed the 100,000 kept
        // changes.)
        let from_oldest = from == 0;
        let first = self.store.changes_since(from, 1).await;
        let from = oldest_kept(first, from, from_oldest)?;
        let store = Arc::clone(&self.store);
        let mut wake = self.changes.subscribe();
        let shutdown = self.shutdown.clone().unwrap_or_default();
        let (mut feed, stream) = self.watchers.feed(from_revision);
        tokio::spawn(async move {
            let mut revision = from;
            let mut sent = false;
            loop {
                let read = store.changes_since(revision, READ_BATCH).await;
                let changes = match read {
                    Ok(changes) => changes,
                    // Compacted between the check above and this first read: start at the
                    // oldest.
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
                    if !kinds.is_empty() && !kinds.contains(&change.kind) {
                        continue;
                    }
                    let deployment = if change.kind == EntityKind::Deployment && !change.deleted {
                        store.get_deployment_info(&change.id).await.ok()
                    } else {
                        None
                    };
                    let message = Change {
                        revision: change.revision as u64,
                        kind: change.kind,
                        id: change.id,
                        deleted: change.deleted,
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
        Ok(stream)
    }
}

/// Where a watch starts: `from`, or, for a watch of everything kept (`from_oldest`) whose
/// `from` was compacted away, just before the oldest change kept. Any other error is the
/// caller's answer.
fn oldest_kept<T>(
    read: Result<T, StoreError>,
    from: i64,
    from_oldest: bool,
) -> Result<i64, ApiError> {
    match read {
        Ok(_) => Ok(from),
        Err(StoreError::Compacted { oldest, .. }) if from_oldest => Ok(oldest - 1),
        Err(err) => Err(ApiError::from(err)),
    }
}

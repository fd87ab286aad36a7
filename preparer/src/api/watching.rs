//! `Watch` of the Data API: the change feed from a revision, woken by [`super::Changes`].
//!
//! Each stream is bounded in memory: it sends deployments' rows without their packages, and
//! buffers at most [`WATCH_BUFFER`] changes; a watcher that leaves that buffer full for
//! [`SLOW_WATCHER`] is dropped with RESOURCE_EXHAUSTED saying where to resume.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Response, Status};

use super::{DataApi, Result, Stream_, convert};
use crate::errors::ApiError;
use crate::store::{EntityKind, StoreError};

pub(super) async fn watch(
    api: &DataApi,
    request: Request<pb::WatchRequest>,
) -> Result<Response<Stream_<pb::Change>>> {
    let r = request.into_inner();
    let from = i64::try_from(r.from_revision)
        .map_err(|_| Status::invalid_argument("from_revision is too large"))?;
    // 0 asks for every change still kept, so the log's compaction moves its start. (It used to
    // answer OUT_OF_RANGE once the log had been compacted, and a dashboard, which watches from
    // 0, then retried forever: it froze once a store's history passed the 100,000 kept
    // changes.)
    let from_oldest = from == 0;
    let from = oldest_kept(api.store.changes_since(from, 1).await, from, from_oldest)?;
    let kinds: Vec<i32> = r.kinds;
    let store = Arc::clone(&api.store);
    let mut wake = api.changes.subscribe();
    let shutdown = api.shutdown.clone().unwrap_or_default();
    let (mut feed, stream) = Feed::new(SLOW_WATCHER);
    tokio::spawn(async move {
        let mut revision = from;
        let mut sent = false;
        loop {
            let changes = match store.changes_since(revision, 500).await {
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
            let caught_up = changes.len() < 500;
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
    Ok(Response::new(stream))
}

/// Changes one `Watch` stream buffers for its client.
pub const WATCH_BUFFER: usize = 64;

/// How long a watcher may leave its buffer full before the stream is ended.
pub const SLOW_WATCHER: Duration = Duration::from_secs(60);

/// The sending half of one `Watch` stream: a bounded buffer, and the status that ends the
/// stream after the changes already buffered.
struct Feed {
    tx: mpsc::Sender<Result<pb::Change>>,
    end: Option<oneshot::Sender<Status>>,
    patience: Duration,
    /// The revision of the last change the buffer took.
    delivered: u64,
}

impl Feed {
    fn new(patience: Duration) -> (Feed, Stream_<pb::Change>) {
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let (end_tx, end_rx) = oneshot::channel();
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx).chain(
            futures::stream::once(end_rx).filter_map(|end| std::future::ready(end.ok().map(Err))),
        );
        let feed = Feed {
            tx,
            end: Some(end_tx),
            patience,
            delivered: 0,
        };
        (feed, Box::pin(stream))
    }

    /// Queues `change`; false when the stream is over (the client left, or it was dropped
    /// for not reading).
    async fn send(&mut self, change: pb::Change) -> bool {
        let revision = change.revision;
        match tokio::time::timeout(self.patience, self.tx.send(Ok(change))).await {
            Ok(Ok(())) => {
                self.delivered = revision;
                true
            }
            Ok(Err(_)) => false,
            Err(_) => {
                self.fail(Status::resource_exhausted(format!(
                    "the watcher left {WATCH_BUFFER} changes unread for {} s: the stream is \
                     dropped; watch again from revision {}",
                    self.patience.as_secs_f64(),
                    self.delivered
                )));
                false
            }
        }
    }

    /// Ends the stream with `status` after the changes buffered.
    fn fail(&mut self, status: Status) {
        if let Some(end) = self.end.take() {
            let _ = end.send(status);
        }
    }

    async fn closed(&self) {
        self.tx.closed().await;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn change(revision: u64) -> pb::Change {
        pb::Change {
            revision,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_watcher_that_does_not_read_is_dropped_after_its_buffer_with_where_to_resume() {
        let (mut feed, mut stream) = Feed::new(Duration::from_millis(20));
        // Nobody reads: the buffer fills, then the next change waits out the patience.
        let producer = tokio::spawn(async move {
            let mut sent = 0;
            for revision in 1..=(WATCH_BUFFER as u64 + 10) {
                if !feed.send(change(revision)).await {
                    break;
                }
                sent += 1;
            }
            sent
        });
        assert_eq!(producer.await.unwrap(), WATCH_BUFFER);
        // The client gets what was buffered, then the reason.
        for revision in 1..=WATCH_BUFFER as u64 {
            assert_eq!(stream.next().await.unwrap().unwrap().revision, revision);
        }
        let status = stream.next().await.unwrap().unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(
            status
                .message()
                .ends_with(&format!("watch again from revision {WATCH_BUFFER}")),
            "{}",
            status.message()
        );
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_stream_that_ends_normally_carries_no_status() {
        let (mut feed, stream) = Feed::new(SLOW_WATCHER);
        assert!(feed.send(change(7)).await);
        drop(feed);
        let items: Vec<_> = stream.collect().await;
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].as_ref().unwrap().revision, 7);
    }
}

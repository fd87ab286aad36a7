//! One `Watch` stream's buffer, bounded, and what the daemon's streams share ([`Watchers`]).
//!
//! The feed task queues changes into a buffer of [`WATCH_BUFFER`]; the gRPC response reads it
//! ([`FeedStream`]). A watcher that leaves the buffer full for its patience is dropped *now*:
//! the feed takes the buffer away from the stream (freeing the changes in it, whether or not
//! the transport ever polls the stream again) and the stream's next answer is
//! RESOURCE_EXHAUSTED naming the revision of the last change the transport took, where the
//! watcher resumes without a gap. Any other end (a store error) comes after the changes
//! already buffered.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use nephrite_preparer_client::Change;
use nephrite_runtime::prometheus_client::metrics::counter::Counter;
use nephrite_runtime::prometheus_client::metrics::gauge::Gauge;
use nephrite_runtime::{GrpcServer, InvalidHelp};
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

/// Changes one `Watch` stream buffers for its client.
pub const WATCH_BUFFER: usize = 64;

/// How long a watcher may leave its buffer full before the stream is dropped.
pub const SLOW_WATCHER: Duration = Duration::from_secs(60);

/// What every `Watch` stream of one daemon shares: the patience with a watcher that does not
/// read, and their metrics. (Their store reads wait for a connection as tasks, like every
/// store call: the store hands out a permit per connection.)
#[derive(Debug, Clone)]
pub struct Watchers {
    patience: Duration,
    open: Gauge,
    dropped: Counter,
}

impl Default for Watchers {
    fn default() -> Self {
        Watchers::new(SLOW_WATCHER)
    }
}

impl Watchers {
    /// Streams dropped after leaving their buffer full for `patience`.
    pub fn new(patience: Duration) -> Self {
        Watchers {
            patience,
            open: Gauge::default(),
            dropped: Counter::default(),
        }
    }

    /// Exposes `preparer_watch_streams` (streams open) and `preparer_watch_dropped_total`
    /// (streams dropped for not reading) on the server's `/metrics`.
    ///
    /// # Errors
    /// Never with these help texts (the runtime checks them).
    pub fn register(&self, server: &mut GrpcServer) -> Result<(), InvalidHelp> {
        server.register_metric(
            "preparer_watch_streams",
            "Watch streams open (each with its feed and buffer).",
            self.open.clone(),
        )?;
        server.register_metric(
            "preparer_watch_dropped",
            "Watch streams dropped because their watcher left the buffer full.",
            self.dropped.clone(),
        )
    }

    /// A stream's buffer: the feed's half and the response's. `from`: the revision the watch
    /// starts after (where a watcher dropped before it got anything resumes).
    pub(super) fn feed(&self, from: u64) -> (Feed, FeedStream) {
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let (end_tx, end_rx) = oneshot::channel();
        let buffer: Buffer = Arc::new(Mutex::new(Some(rx)));
        let taken = Arc::new(AtomicU64::new(from));
        self.open.inc();
        let feed = Feed {
            tx,
            buffer: Arc::clone(&buffer),
            end: Some(end_tx),
            taken: Arc::clone(&taken),
            watchers: self.clone(),
        };
        let stream = FeedStream {
            buffer,
            end: Some(end_rx),
            taken,
        };
        (feed, stream)
    }
}

/// The buffer's reading half, which the feed can take away from the stream.
type Buffer = Arc<Mutex<Option<mpsc::Receiver<Change>>>>;

fn lock(buffer: &Buffer) -> std::sync::MutexGuard<'_, Option<mpsc::Receiver<Change>>> {
    buffer.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The sending half of one `Watch` stream.
pub(super) struct Feed {
    tx: mpsc::Sender<Change>,
    buffer: Buffer,
    end: Option<oneshot::Sender<Status>>,
    /// The revision of the last change the response handed to the transport.
    taken: Arc<AtomicU64>,
    watchers: Watchers,
}

impl Feed {
    /// Queues `change`; false when the stream is over (the client left, or it was dropped
    /// for not reading).
    pub(super) async fn send(&mut self, change: Change) -> bool {
        match tokio::time::timeout(self.watchers.patience, self.tx.send(change)).await {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false,
            Err(_) => {
                self.drop_slow_watcher();
                false
            }
        }
    }

    /// Frees the buffer now and ends the stream with RESOURCE_EXHAUSTED.
    fn drop_slow_watcher(&mut self) {
        drop(lock(&self.buffer).take());
        self.watchers.dropped.inc();
        let resume = self.taken.load(Ordering::Acquire);
        let status = Status::resource_exhausted(format!(
            "the watcher left {WATCH_BUFFER} changes unread for {} s: the stream is dropped; \
             watch again from revision {resume}",
            self.watchers.patience.as_secs_f64()
        ));
        tracing::info!(
            resume,
            "a Watch stream was dropped: its watcher left the buffer full"
        );
        if let Some(end) = self.end.take() {
            let _ = end.send(status);
        }
    }

    /// Ends the stream with `status` after the changes buffered.
    pub(super) fn fail(&mut self, status: Status) {
        if let Some(end) = self.end.take() {
            let _ = end.send(status);
        }
    }

    /// Resolves when the client has gone (the response was dropped).
    pub(super) async fn closed(&self) {
        self.tx.closed().await;
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.watchers.open.dec();
    }
}

/// The response of one `Watch`: the buffered changes, then the status that ended the feed
/// (none for a normal end).
pub struct FeedStream {
    buffer: Buffer,
    end: Option<oneshot::Receiver<Status>>,
    taken: Arc<AtomicU64>,
}

impl Stream for FeedStream {
    type Item = Result<Change, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        {
            let mut buffer = lock(&this.buffer);
            if let Some(rx) = buffer.as_mut() {
                match rx.poll_recv(cx) {
                    Poll::Ready(Some(change)) => {
                        this.taken.store(change.revision, Ordering::Release);
                        return Poll::Ready(Some(Ok(change)));
                    }
                    // The feed ended: its status, if it gave one, follows.
                    Poll::Ready(None) => *buffer = None,
                    // Nothing buffered: the feed may have ended with a status meanwhile.
                    Poll::Pending => {}
                }
            }
        }
        let Some(end) = this.end.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(end).poll(cx) {
            Poll::Ready(Ok(status)) => {
                this.end = None;
                drop(lock(&this.buffer).take());
                Poll::Ready(Some(Err(status)))
            }
            Poll::Ready(Err(_)) => {
                this.end = None;
                // Ended without a status: what is still buffered, then the end.
                if lock(&this.buffer).is_some() {
                    Pin::new(this).poll_next(cx)
                } else {
                    Poll::Ready(None)
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for FeedStream {
    fn drop(&mut self) {
        // The client left: the feed sees its sender closed and stops.
        drop(lock(&self.buffer).take());
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    use super::*;

    fn change(revision: u64) -> Change {
        Change {
            revision,
            kind: nephrite_preparer_client::EntityKind::Deployment,
            id: format!("d{revision}"),
            deleted: false,
            deployment: None,
        }
    }

    #[tokio::test]
    async fn a_watcher_that_stops_reading_is_dropped_at_once_with_where_to_resume() {
        let watchers = Watchers::new(Duration::from_millis(20));
        let (mut feed, mut stream) = watchers.feed(0);
        assert_eq!(watchers.open.get(), 1);
        // The watcher reads three changes, then stops reading.
        for revision in 1..=3 {
            assert!(feed.send(change(revision)).await);
            assert_eq!(stream.next().await.unwrap().unwrap().revision, revision);
        }
        let producer = tokio::spawn(async move {
            let mut sent = 0;
            for revision in 4..=(WATCH_BUFFER as u64 + 10) {
                if !feed.send(change(revision)).await {
                    break;
                }
                sent += 1;
            }
            (sent, feed)
        });
        let (sent, feed) = producer.await.unwrap();
        assert_eq!(sent, WATCH_BUFFER);
        assert_eq!(watchers.dropped.get(), 1);
        // The buffered changes are gone already; the next answer is the reason.
        assert!(lock(&stream.buffer).is_none());
        let status = stream.next().await.unwrap().unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(
            status.message().ends_with("watch again from revision 3"),
            "{}",
            status.message()
        );
        assert!(stream.next().await.is_none());
        drop(feed);
        assert_eq!(watchers.open.get(), 0);
    }

    #[tokio::test]
    async fn a_watcher_dropped_before_reading_resumes_where_it_started() {
        let watchers = Watchers::new(Duration::from_millis(20));
        let (mut feed, mut stream) = watchers.feed(41);
        for revision in 42..=(42 + WATCH_BUFFER as u64) {
            if !feed.send(change(revision)).await {
                break;
            }
        }
        let status = stream.next().await.unwrap().unwrap_err();
        assert!(
            status.message().ends_with("watch again from revision 41"),
            "{}",
            status.message()
        );
    }

    #[tokio::test]
    async fn a_failure_comes_after_the_changes_buffered() {
        let (mut feed, stream) = Watchers::default().feed(0);
        assert!(feed.send(change(1)).await);
        assert!(feed.send(change(2)).await);
        feed.fail(Status::unavailable("the store is gone"));
        drop(feed);
        let items: Vec<_> = stream.collect().await;
        assert_eq!(items.len(), 3);
        assert_eq!(items[1].as_ref().unwrap().revision, 2);
        assert_eq!(
            items[2].as_ref().unwrap_err().code(),
            tonic::Code::Unavailable
        );
    }

    #[tokio::test]
    async fn a_stream_that_ends_normally_carries_no_status() {
        let (mut feed, stream) = Watchers::default().feed(0);
        assert!(feed.send(change(7)).await);
        drop(feed);
        let items: Vec<_> = stream.collect().await;
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].as_ref().unwrap().revision, 7);
    }

    #[tokio::test]
    async fn the_feed_learns_that_the_client_left() {
        let (mut feed, stream) = Watchers::default().feed(0);
        drop(stream);
        feed.closed().await;
        assert!(!feed.send(change(1)).await);
    }
}

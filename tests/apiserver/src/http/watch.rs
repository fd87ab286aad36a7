//! Watch streams: newline-delimited events, bookmarks on an interval, `timeoutSeconds`, and the
//! end of the stream on shutdown, on an ERROR event or when the resource stops being served.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use http::header;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::path::ResourcePath;
use super::request::{Params, flag};
use super::{Shared, served};
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::store::{Filter, Store, WatchItem, WatchStart};

/// One line of a watch stream.
fn watch_line(rt: &ResourceType, item: &WatchItem) -> Value {
    match item {
        WatchItem::Event(ty, obj) => json!({"type": ty, "object": Store::present(rt, obj)}),
        WatchItem::Bookmark { rv, initial_end } => {
            let mut metadata = json!({"resourceVersion": rv.to_string()});
            if *initial_end && let Some(m) = metadata.as_object_mut() {
                m.insert(
                    "annotations".into(),
                    json!({"k8s.io/initial-events-end": "true"}),
                );
            }
            json!({"type": "BOOKMARK", "object": {
                "kind": rt.kind,
                "apiVersion": rt.api_version(),
                "metadata": metadata,
            }})
        }
        WatchItem::Error(err) => json!({"type": "ERROR", "object": err.to_status()}),
        WatchItem::Close => Value::Null,
    }
}

struct WatchStream {
    shared: Arc<Shared>,
    rt: ResourceType,
    rx: mpsc::UnboundedReceiver<WatchItem>,
    tx: mpsc::UnboundedSender<WatchItem>,
    bookmarks: Option<tokio::time::Interval>,
    /// The resourceVersion the watch started from (no bookmark below it).
    floor: u64,
    deadline: Option<tokio::time::Instant>,
    shutdown: watch::Receiver<bool>,
    done: bool,
}

async fn tick(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl WatchStream {
    /// The next line to send, or `None` when the stream ends.
    async fn next_line(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        loop {
            tokio::select! {
                biased;
                item = self.rx.recv() => {
                    let item = item?;
                    if matches!(item, WatchItem::Close) {
                        return None;
                    }
                    if matches!(item, WatchItem::Error(_)) {
                        self.done = true;
                    }
                    let mut line = serde_json::to_vec(&watch_line(&self.rt, &item)).unwrap_or_default();
                    line.push(b'\n');
                    return Some(Bytes::from(line));
                }
                _ = tick(&mut self.bookmarks) => {
                    self.shared.store().bookmark(&self.tx, self.floor);
                }
                _ = until(self.deadline) => return None,
                _ = self.shutdown.wait_for(|stop| *stop) => return None,
            }
        }
    }
}

pub(super) fn start_watch(
    shared: &Arc<Shared>,
    rp: &ResourcePath,
    path: &str,
    filter: Filter,
    params: &Params,
    expire: bool,
) -> Result<Response, ApiError> {
    let bookmarks = flag(params, "allowWatchBookmarks");
    let rv = params
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    let send_initial = params.get("sendInitialEvents").map(String::as_str);
    let (tx, rx) = mpsc::unbounded_channel();
    let mut store = shared.store();
    let rt = served(&store, rp, path)?;
    let mut floor = 0;
    if expire {
        let _ = tx.send(WatchItem::Error(ApiError::expired(format!(
            "too old resource version: {rv} (injected fault)"
        ))));
    } else {
        let start = match (send_initial, rv) {
            (Some("true"), _) => WatchStart::Current,
            (Some("false"), "" | "0") => WatchStart::After(store.current_rv()),
            (_, "" | "0") => WatchStart::Current,
            (_, rv) => WatchStart::After(rv.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid resourceVersion {rv:?}: must be an unsigned 64-bit integer"
                ))
            })?),
        };
        if let WatchStart::After(after) = start {
            floor = after;
        }
        let initial_end = send_initial == Some("true") && bookmarks;
        store.watch(&rt, filter, start, initial_end, tx.clone());
    }
    drop(store);
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0);
    let interval = shared.bookmark_interval.max(Duration::from_millis(1));
    let stream = WatchStream {
        shared: shared.clone(),
        rt,
        rx,
        tx,
        floor,
        bookmarks: bookmarks.then(|| {
            let mut i = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        }),
        deadline: timeout.map(|t| tokio::time::Instant::now() + Duration::from_secs(t)),
        shutdown: shared.shutdown.clone(),
        done: false,
    };
    let body = futures::stream::unfold(stream, |mut s| async move {
        s.next_line()
            .await
            .map(|line| (Ok::<_, Infallible>(line), s))
    });
    let mut resp = Response::new(Body::from_stream(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

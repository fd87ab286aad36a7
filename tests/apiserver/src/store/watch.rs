//! Watches: registration with initial events (synthetic or replayed from the history),
//! bookmarks, expiry, and the fan-out of every committed event to the watchers it concerns.

use std::sync::Arc;

use nephrite_krm::Object;
use tokio::sync::mpsc::UnboundedSender;

use super::{StorageKey, Store};
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One committed change, kept for watches that resume from a resourceVersion.
#[derive(Debug)]
pub(super) struct HistoryEvent {
    rv: u64,
    storage: StorageKey,
    kind: EventType,
    old: Option<Arc<Object>>,
    new: Arc<Object>,
}

/// What a watch stream receives.
#[derive(Debug, Clone)]
pub(crate) enum WatchItem {
    /// ADDED / MODIFIED / DELETED with the object.
    Event(&'static str, Arc<Object>),
    /// A BOOKMARK at this resourceVersion; `initial_end` marks the end of initial events.
    Bookmark { rv: u64, initial_end: bool },
    /// An ERROR event; the stream ends after it.
    Error(ApiError),
    /// The resource stopped being served (its CRD was deleted): the stream ends.
    Close,
}

/// Which objects a watch (or list) selects.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub(super) fn matches(&self, obj: &Object) -> bool {
        if let Some(ns) = &self.namespace
            && obj.namespace().unwrap_or("") != ns
        {
            return false;
        }
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// Whether the filter selects by labels or fields (not only by namespace).
    pub(super) fn has_selectors(&self) -> bool {
        self.labels != LabelSelector::default() || self.fields != FieldSelector::default()
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum WatchStart {
    /// resourceVersion "" or "0": synthetic ADDED events for current objects, then live.
    Current,
    /// Events after this resourceVersion, from the history.
    After(u64),
}

/// An open watch.
#[derive(Debug)]
pub(super) struct Watcher {
    storage: StorageKey,
    filter: Filter,
    /// Only events above this resourceVersion are sent (a watch may start from a
    /// resourceVersion the store has not reached yet).
    after: u64,
    tx: UnboundedSender<WatchItem>,
}

impl Store {
    /// Registers a watch; initial events (synthetic or from history) are sent before any live
    /// event, all under the store lock, so the stream is ordered by resourceVersion.
    pub fn watch(
        &mut self,
        rt: &ResourceType,
        filter: Filter,
        start: WatchStart,
        initial_end_bookmark: bool,
        tx: UnboundedSender<WatchItem>,
    ) {
        let storage = rt.storage();
        let mut after = self.rv;
        match start {
            WatchStart::Current => {
                if let Some(objects) = self.objects.get(&storage) {
                    for obj in objects.values().filter(|o| filter.matches(o)) {
                        let _ = tx.send(WatchItem::Event("ADDED", Arc::new(obj.clone())));
                    }
                }
                if initial_end_bookmark {
                    let _ = tx.send(WatchItem::Bookmark {
                        rv: self.rv,
                        initial_end: true,
                    });
                }
            }
            WatchStart::After(rv) => {
                after = rv;
                if rv < self.compacted {
                    let _ = tx.send(WatchItem::Error(ApiError::expired(format!(
                        "too old resource version: {rv} ({})",
                        self.compacted
                    ))));
                    return;
                }
                for ev in self
                    .history
                    .iter()
                    .filter(|e| e.rv > rv && e.storage == storage)
                {
                    if let Some(item) = translate(&filter, ev) {
                        let _ = tx.send(item);
                    }
                }
            }
        }
        self.watchers.retain(|w| !w.tx.is_closed());
        self.watchers.push(Watcher {
            storage,
            filter,
            after,
            tx,
        });
    }

    /// Ends every open watch of `plural` (or `*`) with a 410 Expired ERROR event, as when the
    /// server's watch cache is reset; returns how many watches were ended.
    pub fn expire_watchers(&mut self, plural: &str) -> usize {
        let mut ended = 0;
        self.watchers.retain(|w| {
            if plural != "*" && w.storage.plural != plural {
                return !w.tx.is_closed();
            }
            let _ = w.tx.send(WatchItem::Error(ApiError::expired(
                "too old resource version: the watch was expired by the test",
            )));
            ended += 1;
            false
        });
        ended
    }

    /// Ends every watch of `storage` (its resource is no longer served).
    pub(super) fn close_watchers(&mut self, storage: &StorageKey) {
        self.watchers.retain(|w| {
            if w.storage == *storage {
                let _ = w.tx.send(WatchItem::Close);
                false
            } else {
                true
            }
        });
    }

    /// Sends a bookmark at the current resourceVersion through a watch's own channel (under
    /// the store lock, so it is ordered after every event already sent to it). Nothing is sent
    /// while the store is still below `floor`, the resourceVersion the watch started from.
    pub fn bookmark(&self, tx: &UnboundedSender<WatchItem>, floor: u64) {
        if self.rv < floor {
            return;
        }
        let _ = tx.send(WatchItem::Bookmark {
            rv: self.rv,
            initial_end: false,
        });
    }

    /// Keeps a committed change in the history and sends it to the watchers it concerns.
    pub(super) fn record(
        &mut self,
        storage: &StorageKey,
        kind: EventType,
        old: Option<Object>,
        new: Object,
    ) {
        let ev = HistoryEvent {
            rv: self.rv,
            storage: storage.clone(),
            kind,
            old: old.map(Arc::new),
            new: Arc::new(new),
        };
        self.watchers.retain(|w| {
            if w.storage != ev.storage || ev.rv <= w.after {
                return !w.tx.is_closed();
            }
            match translate(&w.filter, &ev) {
                Some(item) => w.tx.send(item).is_ok(),
                None => !w.tx.is_closed(),
            }
        });
        self.history.push_back(ev);
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted = dropped.rv;
            }
        }
    }
}

/// Turns a history event into what a watcher with `filter` sees: objects moving into the
/// selection appear as ADDED, out of it as DELETED.
fn translate(filter: &Filter, ev: &HistoryEvent) -> Option<WatchItem> {
    let new_matches = filter.matches(&ev.new);
    let old_matches = ev.old.as_ref().is_some_and(|o| filter.matches(o));
    let ty = match ev.kind {
        EventType::Added => new_matches.then_some("ADDED")?,
        EventType::Deleted => (old_matches || new_matches).then_some("DELETED")?,
        EventType::Modified => match (old_matches, new_matches) {
            (true, true) => "MODIFIED",
            (false, true) => "ADDED",
            (true, false) => "DELETED",
            (false, false) => return None,
        },
    };
    Some(WatchItem::Event(ty, ev.new.clone()))
}

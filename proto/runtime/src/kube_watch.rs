//! One kind of Kubernetes object kept in a kube-runtime reflector store, the watch restarted
//! after every failure with [`watch_backoff`]'s pauses, and what happened told as a stream of
//! [`WatchEvent`]s.
//!
//! Daemons that read the cluster outside a kube-runtime `Controller` (the rules a kuryr-l7
//! controller compiles from Ingresses, the Services and policies a nimbess-agent renders, the
//! attachments a VIF handler re-runs its pods on) need the same plumbing: a watcher, the
//! project's backoff so a failed watch is asked again rather than given up on, a reflector store
//! the rest of the daemon reads, a signal that a complete listing is in (so nothing is decided
//! from a half-read cluster) and a wake-up on every change. kube-runtime has the parts;
//! [`KubeWatch`] puts them together once, and folds the watcher's five event kinds into the
//! three a reader acts on: a complete listing with how many objects it holds (the first one is
//! the ready signal; [`Store::wait_until_ready`] is the same signal as a future), a change, a
//! failure. While a watch restarts, the store keeps what it had until the new listing is
//! complete, so a restart never empties it. [`Unavailable`] tells a kind the cluster does not
//! serve (404) or the daemon may not read (403) from a passing failure; what that means (no
//! objects, or wait) is each daemon's decision.
//!
//! ```no_run
//! # async fn run(client: kube::Client) {
//! use futures::StreamExt as _;
//! use k8s_openapi::api::core::v1::Service;
//! use kube::{Api, runtime::watcher};
//! use nephrite_runtime::{KubeWatch, WatchEvent};
//!
//! let watch = KubeWatch::new(Api::<Service>::all(client), watcher::Config::default());
//! let services = watch.store();
//! let mut events = std::pin::pin!(watch.events());
//! while let Some(event) = events.next().await {
//!     if let WatchEvent::Listed { objects, first: true } = event {
//!         tracing::info!(objects, "Services listed");
//!     }
//!     // … read `services.state()` …
//! }
//! # }
//! ```

use std::fmt::Debug;
use std::hash::Hash;

use futures::{Stream, StreamExt as _, TryStreamExt as _, future};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::watch_backoff;

/// What a [`KubeWatch`] saw.
#[derive(Debug)]
pub enum WatchEvent {
    /// A complete listing is in the store: the first one (`first`, the ready signal), or the
    /// one a restarted watch made. `objects` is how many the store holds now.
    Listed {
        /// How many objects the listing holds.
        objects: usize,
        /// Whether this is the watch's first complete listing.
        first: bool,
    },
    /// An object was created, changed or deleted; the store already holds the change.
    Changed,
    /// The watch failed; it is started again after [`watch_backoff`]'s pause, and the store
    /// keeps what it had meanwhile.
    Failed(watcher::Error),
}

/// Why a kind cannot be watched at all, as opposed to a failure that passes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// The API server does not serve the kind (404): its CRD is not installed, or the API
    /// group is missing.
    #[error("the cluster does not serve this API")]
    NotServed,
    /// The daemon may not list or watch the kind (403), with the API server's message.
    #[error("not allowed to read it: {0}")]
    Forbidden(String),
}

impl Unavailable {
    /// Whether `error` says the kind is not served or not readable; `None` for any other
    /// failure (a dropped connection, an expired watch, a server error).
    pub fn of(error: &watcher::Error) -> Option<Self> {
        let client_error = match error {
            watcher::Error::InitialListFailed(e)
            | watcher::Error::WatchStartFailed(e)
            | watcher::Error::WatchFailed(e) => e,
            watcher::Error::WatchError(status) => {
                return Self::of_status(status.code, &status.message);
            }
            watcher::Error::NoResourceVersion => return None,
        };
        match client_error {
            kube::Error::Api(status) => Self::of_status(status.code, &status.message),
            _ => None,
        }
    }

    fn of_status(code: u16, message: &str) -> Option<Self> {
        match code {
            404 => Some(Unavailable::NotServed),
            403 => Some(Unavailable::Forbidden(message.to_owned())),
            _ => None,
        }
    }
}

/// A watch of one kind (see the module documentation): built with [`KubeWatch::new`], its
/// store taken with [`KubeWatch::store`], run by polling [`KubeWatch::events`].
pub struct KubeWatch<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    api: Api<K>,
    config: watcher::Config,
    writer: Writer<K>,
    modify: Box<dyn FnMut(&mut K) + Send>,
}

impl<K> KubeWatch<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    /// A watch of the objects `api` reaches that `config`'s label and field selectors pick.
    pub fn new(api: Api<K>, config: watcher::Config) -> Self {
        Self::new_with(api, config, Default::default())
    }
}

impl<K> KubeWatch<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// [`KubeWatch::new`] for a kind known only at run time (`DynamicObject` and its
    /// `ApiResource`).
    pub fn new_with(api: Api<K>, config: watcher::Config, dyntype: K::DynamicType) -> Self {
        KubeWatch {
            api,
            config,
            writer: Writer::new(dyntype),
            modify: Box::new(|_| {}),
        }
    }

    /// Changes every object before the store keeps it (e.g. puts back the `apiVersion` and
    /// `kind` a list leaves out of its items, or drops fields nobody reads).
    pub fn modify(mut self, modify: impl FnMut(&mut K) + Send + 'static) -> Self {
        self.modify = Box::new(modify);
        self
    }

    /// The store: empty until the first listing is in, then the objects as last seen.
    pub fn store(&self) -> Store<K> {
        self.writer.as_reader()
    }

    /// Runs the watch for as long as the stream is polled (it never ends), telling what it
    /// saw. Nothing is read from the API server until it is first polled.
    pub fn events(self) -> impl Stream<Item = WatchEvent> + Send + 'static {
        let store = self.writer.as_reader();
        let mut modify = self.modify;
        let watch = watcher::watcher(self.api, self.config)
            .map_ok(move |event| event.modify(&mut modify))
            .backoff(watch_backoff());
        let mut listed = false;
        reflector::reflector(self.writer, watch).filter_map(move |item| {
            let event = match item {
                Ok(Event::InitDone) => Some(WatchEvent::Listed {
                    objects: store.len(),
                    first: !std::mem::replace(&mut listed, true),
                }),
                Ok(Event::Apply(_) | Event::Delete(_)) => Some(WatchEvent::Changed),
                Ok(Event::Init | Event::InitApply(_)) => None,
                Err(error) => Some(WatchEvent::Failed(error)),
            };
            future::ready(event)
        })
    }
}

#[cfg(test)]
#[path = "kube_watch_tests.rs"]
mod tests;

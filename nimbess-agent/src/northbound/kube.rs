//! `--kube`: the northbound's objects from the API server, through one
//! [`KubeWatch`] per kind (Services, EndpointSlices, NetworkPolicies,
//! Namespaces, Pods, AdminNetworkPolicies, BaselineAdminNetworkPolicies),
//! restarted after failures with the project's watch
//! backoff. A snapshot is sent once every kind has been listed (a kind the
//! cluster does not serve counts as listed, with none), then after every
//! change. What the translation skips (an invalid
//! CIDR, an unknown selector operator, a targetPort name no endpoint has, …)
//! is also a Warning Event on the object (`events.k8s.io/v1`, reporting
//! controller `nimbess-agent`, instance the host name), published once while
//! the warning lasts.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use nephrite_runtime::{KubeWatch, Unavailable, WatchEvent};
use tokio::sync::{Notify, watch};

use super::admin::{AdminNetworkPolicy, BaselineAdminNetworkPolicy};
use super::{Objects, Warning, derive};

/// The kinds' stores.
#[derive(Clone)]
struct Readers {
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    policies: Store<NetworkPolicy>,
    namespaces: Store<Namespace>,
    pods: Store<Pod>,
    admin: Store<AdminNetworkPolicy>,
    baseline: Store<BaselineAdminNetworkPolicy>,
}

impl Readers {
    fn snapshot(&self) -> Objects {
        fn all<K: Clone + kube::Resource<DynamicType = ()>>(s: &Store<K>) -> Vec<K> {
            s.state().iter().map(|o| (**o).clone()).collect()
        }
        Objects {
            services: all(&self.services),
            slices: all(&self.slices),
            policies: all(&self.policies),
            namespaces: all(&self.namespaces),
            pods: all(&self.pods),
            admin_policies: all(&self.admin),
            baseline_policies: all(&self.baseline),
        }
    }
}

/// How many kinds there are to list before the first snapshot.
const KINDS: usize = 7;

/// Starts a [`KubeWatch`] of every `K` in the cluster; `listed` counts it once its first
/// listing is in (or once the cluster is found not to serve the kind: a cluster without
/// this API has none of these objects), and `changed` is woken on every listing and change.
fn reflect<K>(client: kube::Client, changed: Arc<Notify>, listed: Arc<AtomicUsize>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let watch = KubeWatch::new(Api::<K>::all(client), watcher::Config::default());
    let reader = watch.store();
    let kind = K::kind(&()).to_string();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watch.events());
        let mut counted = false;
        while let Some(event) = events.next().await {
            match event {
                WatchEvent::Listed { objects, first } => {
                    if first {
                        tracing::info!(kind, objects, "listed");
                    }
                    if !std::mem::replace(&mut counted, true) {
                        listed.fetch_add(1, Ordering::SeqCst);
                    }
                    changed.notify_one();
                }
                WatchEvent::Changed => changed.notify_one(),
                WatchEvent::Failed(e)
                    if !counted && Unavailable::of(&e) == Some(Unavailable::NotServed) =>
                {
                    counted = true;
                    listed.fetch_add(1, Ordering::SeqCst);
                    changed.notify_one();
                    tracing::warn!(
                        kind,
                        "the cluster does not serve this kind; taken as none, watching again after a pause"
                    );
                }
                WatchEvent::Failed(e) => {
                    tracing::warn!(kind, error = %e, "watch failed; watching again after a pause");
                }
            }
        }
    });
    reader
}

/// The most an Event's `note` may hold: kube-apiserver counts bytes, not characters.
const NOTE_LIMIT_BYTES: usize = 1024;

/// A warning's Event note: its text and "; skipped", cut at a character
/// boundary to at most [`NOTE_LIMIT_BYTES`], so a long one is still published.
pub(crate) fn event_note(w: &Warning) -> String {
    let mut note = format!("{w}; skipped");
    let mut end = note.len().min(NOTE_LIMIT_BYTES);
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note.truncate(end);
    note
}

/// Publish a Warning Event on the object of each warning the snapshots
/// derive to, once per warning while it lasts (one that goes away and comes
/// back is published again); a failed publication is tried again with the
/// next snapshot.
async fn publish_warnings(client: kube::Client, mut snapshots: watch::Receiver<Option<Objects>>) {
    let reporter = Reporter {
        controller: "nimbess-agent".to_owned(),
        instance: nephrite_runtime::host::hostname(),
    };
    let recorder = Recorder::new(client, reporter);
    let mut published: BTreeSet<Warning> = BTreeSet::new();
    loop {
        let current = snapshots.borrow_and_update().clone();
        if let Some(objects) = current {
            let now: BTreeSet<Warning> = derive(&objects).warnings.into_iter().collect();
            published.retain(|w| now.contains(w));
            for w in now.difference(&published.clone()) {
                let event = KubeEvent {
                    type_: EventType::Warning,
                    reason: w.reason.to_owned(),
                    note: Some(event_note(w)),
                    action: "Translate".to_owned(),
                    secondary: None,
                };
                match recorder
                    .publish(&event, &w.regarding.object_reference())
                    .await
                {
                    Ok(()) => {
                        published.insert(w.clone());
                    }
                    Err(e) => tracing::warn!(
                        error = %e,
                        "publishing a Warning Event on {} {}/{}",
                        w.regarding.kind,
                        w.regarding.namespace.as_deref().unwrap_or(""),
                        w.regarding.name.as_deref().unwrap_or("")
                    ),
                }
            }
        }
        if snapshots.changed().await.is_err() {
            return;
        }
    }
}

/// Watch the cluster `client` reaches, sending snapshots to `tx` until the
/// receiver is gone; what they cannot translate becomes Warning Events.
pub async fn watch_cluster(client: kube::Client, tx: watch::Sender<Option<Objects>>) {
    tokio::spawn(publish_warnings(client.clone(), tx.subscribe()));
    let changed = Arc::new(Notify::new());
    let listed = Arc::new(AtomicUsize::new(0));
    let readers = Readers {
        services: reflect(client.clone(), Arc::clone(&changed), Arc::clone(&listed)),
        slices: reflect(client.clone(), Arc::clone(&changed), Arc::clone(&listed)),
        policies: reflect(client.clone(), Arc::clone(&changed), Arc::clone(&listed)),
        namespaces: reflect(client.clone(), Arc::clone(&changed), Arc::clone(&listed)),
        pods: reflect(client.clone(), Arc::clone(&changed), Arc::clone(&listed)),
        admin: reflect(client.clone(), Arc::clone(&changed), Arc::clone(&listed)),
        baseline: reflect(client, Arc::clone(&changed), Arc::clone(&listed)),
    };
    loop {
        changed.notified().await;
        if listed.load(Ordering::SeqCst) < KINDS {
            continue;
        }
        if tx.send(Some(readers.snapshot())).is_err() {
            return;
        }
    }
}

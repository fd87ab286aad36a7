//! One kube-runtime watch per kind the controller reads, each reflected into its own
//! kube-runtime store, and the stores read together.
//!
//! A kind the cluster does not serve (no Route CRD on plain Kubernetes) or that we may not read
//! (no EndpointSlice or IngressClass permission) is "off": said once, read as empty, and
//! watched again after [`nephrite_runtime::watch_backoff`]'s pause, so it is picked up as soon
//! as its CRD appears or the permission is granted ("on again" is said once too). While a watch
//! restarts, the reflector keeps what it had until the new list is complete, so a restart never
//! empties the rules.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::reflector::{ObjectRef, Store as Reader, store::Writer};
use kube::runtime::watcher::{self, Event};
use nephrite_krm::{Gvk, Object};
use tokio::sync::Notify;

/// A kind the controller reads.
#[derive(Debug, Clone)]
pub struct Kind {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// A field selector narrowing the watch (`type=kubernetes.io/tls` for Secrets).
    pub field_selector: Option<&'static str>,
}

fn kind(group: &str, version: &str, kind: &str, plural: &str) -> Kind {
    Kind {
        resource: Gvk::new(group, version, kind).api_resource(plural),
        field_selector: None,
    }
}

/// Ingress, IngressClass, Route, Service, EndpointSlice and (TLS) Secret.
pub fn kinds() -> Vec<Kind> {
    vec![
        kind("networking.k8s.io", "v1", "Ingress", "ingresses"),
        kind("networking.k8s.io", "v1", "IngressClass", "ingressclasses"),
        kind("route.openshift.io", "v1", "Route", "routes"),
        kind("", "v1", "Service", "services"),
        kind("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
        Kind {
            field_selector: Some("type=kubernetes.io/tls"),
            ..kind("", "v1", "Secret", "secrets")
        },
    ]
}

/// Every kind's reflector store, which kinds are off and which were listed, and a signal on
/// every change.
#[derive(Debug, Default)]
pub struct Store {
    readers: Mutex<BTreeMap<String, Reader<DynamicObject>>>,
    /// Woken on every change.
    pub changed: Notify,
    off: Mutex<BTreeMap<String, String>>,
    synced: Mutex<BTreeSet<String>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Store {
    /// The readers of the kinds that are on.
    fn readers_on(&self) -> Vec<(String, Reader<DynamicObject>)> {
        let off = locked(&self.off);
        locked(&self.readers)
            .iter()
            .filter(|(kind, _)| !off.contains_key(*kind))
            .map(|(kind, reader)| (kind.clone(), reader.clone()))
            .collect()
    }

    /// The objects as `nephrite-krm` objects, ordered by kind, namespace and name.
    pub fn objects(&self) -> Vec<Object> {
        let mut all: Vec<((String, String, String), Arc<DynamicObject>)> = Vec::new();
        for (kind, reader) in self.readers_on() {
            all.extend(reader.state().into_iter().map(|object| {
                let key = (
                    kind.clone(),
                    object.metadata.namespace.clone().unwrap_or_default(),
                    object.metadata.name.clone().unwrap_or_default(),
                );
                (key, object)
            }));
        }
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.into_iter()
            .filter_map(|(_, dynamic)| Object::try_from((*dynamic).clone()).ok())
            .collect()
    }

    /// One object, by kind, namespace and name.
    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<DynamicObject> {
        let (_, reader) = self.readers_on().into_iter().find(|(k, _)| k == kind)?;
        let resource = kinds()
            .into_iter()
            .find(|k| k.resource.kind == kind)?
            .resource;
        let mut reference = ObjectRef::new_with(name, resource);
        if !namespace.is_empty() {
            reference = reference.within(namespace);
        }
        reader.get(&reference).map(|object| (*object).clone())
    }

    /// The kinds that are off, with why.
    pub fn off(&self) -> BTreeMap<String, String> {
        locked(&self.off).clone()
    }

    /// Whether every kind in `kinds` was listed once (or found off).
    pub fn synced(&self, kinds: &[Kind]) -> bool {
        let synced = locked(&self.synced);
        kinds.iter().all(|k| synced.contains(&k.resource.kind))
    }

    fn listed(&self, kind: &str) {
        locked(&self.synced).insert(kind.to_owned());
        self.changed.notify_one();
    }
}

/// Whether the error says the kind is not served (404) or not ours to read (403).
fn absent_or_forbidden(error: &watcher::Error) -> Option<String> {
    let client_error = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(status) if matches!(status.code, 403 | 404) => {
            return Some(status.message.clone());
        }
        _ => return None,
    };
    match client_error {
        kube::Error::Api(status) if status.code == 404 => {
            Some("the cluster does not serve this API".to_owned())
        }
        kube::Error::Api(status) if status.code == 403 => {
            Some(format!("not allowed to read it: {}", status.message))
        }
        _ => None,
    }
}

/// Watches `kind` into its reflector store in `store` for ever.
pub async fn watch_kind(client: kube::Client, kind: Kind, store: Arc<Store>) {
    let resource = &kind.resource;
    let name = resource.kind.clone();
    let api: Api<DynamicObject> = Api::all_with(client, resource);
    let types = TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    };
    let writer = Writer::new(resource.clone());
    locked(&store.readers).insert(name.clone(), writer.as_reader());
    let mut config = watcher::Config::default();
    if let Some(selector) = kind.field_selector {
        config = config.fields(selector);
    }
    let stream = watcher::watcher(api, config)
        // Lists leave apiVersion and kind out of their items.
        .modify(move |object| object.types = Some(types.clone()))
        .backoff(nephrite_runtime::watch_backoff())
        .reflect(writer);
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(Event::InitDone) => {
                if locked(&store.off).remove(&name).is_some() {
                    tracing::info!(
                        "{} are on: {} is served and readable",
                        resource.plural,
                        resource.api_version
                    );
                }
                store.listed(&name);
            }
            Ok(Event::Apply(_) | Event::Delete(_)) => store.changed.notify_one(),
            Ok(Event::Init | Event::InitApply(_)) => {}
            Err(error) => {
                if let Some(why) = absent_or_forbidden(&error) {
                    let mut off = locked(&store.off);
                    if !off.contains_key(&name) {
                        tracing::warn!(
                            "{} are off ({}): {why}; watching again after a pause",
                            resource.plural,
                            resource.api_version,
                        );
                        off.insert(name.clone(), why);
                    }
                    drop(off);
                    store.listed(&name);
                } else {
                    tracing::warn!("watching {}: {error}; watching again", resource.plural);
                }
            }
        }
    }
}

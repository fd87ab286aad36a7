//! One kube-runtime watch per kind the controller reads, into one in-memory store.
//!
//! A kind the cluster does not serve (no Route CRD on plain Kubernetes) or that we may not read
//! (no EndpointSlice or IngressClass permission) is "off": said once, kept empty, and tried
//! again every [`RETRY`], so it is picked up as soon as its CRD appears or the permission is
//! granted ("on again" is said once too). While a watch restarts, the store keeps what it had
//! until the new list is complete, so a restart never empties the rules.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::watcher::{self, Event};
use nephrite_krm::Object;
use tokio::sync::Notify;

/// How long a failed or absent kind waits before it is watched again.
pub const RETRY: Duration = Duration::from_secs(1);

/// A kind the controller reads.
#[derive(Debug, Clone)]
pub struct Kind {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// A field selector narrowing the watch (`type=kubernetes.io/tls` for Secrets).
    pub field_selector: Option<&'static str>,
}

fn kind(group: &str, version: &str, kind: &str, plural: &str) -> Kind {
    let api_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Kind {
        resource: ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version,
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        },
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

type Key = (String, String, String);

/// Every object read, by (kind, namespace, name), and a signal on every change.
#[derive(Debug, Default)]
pub struct Store {
    objects: Mutex<BTreeMap<Key, DynamicObject>>,
    /// Woken on every change.
    pub changed: Notify,
    off: Mutex<BTreeMap<String, String>>,
    synced: Mutex<BTreeSet<String>>,
}

fn key(kind: &str, object: &DynamicObject) -> Key {
    (
        kind.to_owned(),
        object.metadata.namespace.clone().unwrap_or_default(),
        object.metadata.name.clone().unwrap_or_default(),
    )
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Store {
    /// The objects as `nephrite-krm` objects, ordered by kind, namespace and name.
    pub fn objects(&self) -> Vec<Object> {
        locked(&self.objects)
            .values()
            .filter_map(|dynamic| Object::try_from(dynamic.clone()).ok())
            .collect()
    }

    /// One object, by kind, namespace and name.
    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<DynamicObject> {
        locked(&self.objects)
            .get(&(kind.to_owned(), namespace.to_owned(), name.to_owned()))
            .cloned()
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

    fn replace(&self, kind: &str, objects: BTreeMap<Key, DynamicObject>) {
        locked(&self.synced).insert(kind.to_owned());
        let mut all = locked(&self.objects);
        all.retain(|(k, _, _), _| k != kind);
        all.extend(objects);
        drop(all);
        self.changed.notify_one();
    }

    fn apply(&self, kind: &str, object: DynamicObject) {
        locked(&self.objects).insert(key(kind, &object), object);
        self.changed.notify_one();
    }

    fn delete(&self, kind: &str, object: &DynamicObject) {
        locked(&self.objects).remove(&key(kind, object));
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

/// Watches `kind` into `store` for ever.
pub async fn watch_kind(client: kube::Client, kind: Kind, store: Arc<Store>) {
    let resource = &kind.resource;
    let name = resource.kind.clone();
    let api: Api<DynamicObject> = Api::all_with(client, resource);
    let types = TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    };
    // Lists leave apiVersion and kind out of their items.
    let typed = |mut object: DynamicObject| {
        object.types = Some(types.clone());
        object
    };
    loop {
        let mut config = watcher::Config::default();
        if let Some(selector) = kind.field_selector {
            config = config.fields(selector);
        }
        let mut stream = std::pin::pin!(watcher::watcher(api.clone(), config));
        let mut listing: Option<BTreeMap<Key, DynamicObject>> = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(Event::Init) => listing = Some(BTreeMap::new()),
                Ok(Event::InitApply(object)) => {
                    let object = typed(object);
                    listing
                        .get_or_insert_default()
                        .insert(key(&name, &object), object);
                }
                Ok(Event::InitDone) => {
                    store.replace(&name, listing.take().unwrap_or_default());
                    if locked(&store.off).remove(&name).is_some() {
                        tracing::info!(
                            "{} are on: {} is served and readable",
                            resource.plural,
                            resource.api_version
                        );
                    }
                }
                Ok(Event::Apply(object)) => store.apply(&name, typed(object)),
                Ok(Event::Delete(object)) => store.delete(&name, &object),
                Err(error) => {
                    if let Some(why) = absent_or_forbidden(&error) {
                        let mut off = locked(&store.off);
                        if !off.contains_key(&name) {
                            tracing::warn!(
                                "{} are off ({}): {why}; trying again every {:?}",
                                resource.plural,
                                resource.api_version,
                                RETRY
                            );
                            off.insert(name.clone(), why);
                        }
                        drop(off);
                        store.replace(&name, BTreeMap::new());
                    } else {
                        tracing::warn!("watching {}: {error}; watching again", resource.plural);
                    }
                    break;
                }
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

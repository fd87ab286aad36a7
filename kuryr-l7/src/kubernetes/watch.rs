//! One [`KubeWatch`] per kind the controller reads, each with its own reflector store, and the
//! stores read together.
//!
//! A kind the cluster does not serve (no Route CRD on plain Kubernetes) or that we may not read
//! (no EndpointSlice or IngressClass permission, [`Unavailable`]) is "off": said once, read as
//! empty, and watched again after [`nephrite_runtime::watch_backoff`]'s pause, so it is picked
//! up as soon as its CRD appears or the permission is granted ("on again" is said once too).
//! While a watch restarts, its store keeps what it had until the new list is complete, so a
//! restart never empties the rules.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::reflector::{ObjectRef, Store as Reader};
use kube::runtime::watcher;
use nephrite_krm::{Gvk, Object};
use nephrite_runtime::{KubeWatch, Unavailable, WatchEvent};
use tokio::sync::Notify;

/// The Gateway API's group.
const GATEWAY_GROUP: &str = nephrite_l7::gateway::api::GROUP;

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

/// Ingress, IngressClass, Route, Service, EndpointSlice, (TLS) Secret, and the Gateway API's
/// GatewayClass, Gateway, HTTPRoute (`v1`) and ReferenceGrant (`v1beta1`), with Namespaces (for
/// a listener's `allowedRoutes` namespace selector).
pub fn kinds() -> Vec<Kind> {
    vec![
        kind(GATEWAY_GROUP, "v1", "GatewayClass", "gatewayclasses"),
        kind(GATEWAY_GROUP, "v1", "Gateway", "gateways"),
        kind(GATEWAY_GROUP, "v1", "HTTPRoute", "httproutes"),
        kind(
            GATEWAY_GROUP,
            "v1beta1",
            "ReferenceGrant",
            "referencegrants",
        ),
        kind("", "v1", "Namespace", "namespaces"),
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

/// Watches `kind` into its reflector store in `store` for ever.
pub async fn watch_kind(client: kube::Client, kind: Kind, store: Arc<Store>) {
    let resource = &kind.resource;
    let name = resource.kind.clone();
    let types = TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    };
    let mut config = watcher::Config::default();
    if let Some(selector) = kind.field_selector {
        config = config.fields(selector);
    }
    let watch = KubeWatch::new_with(Api::all_with(client, resource), config, resource.clone())
        // Lists leave apiVersion and kind out of their items.
        .modify(move |object: &mut DynamicObject| object.types = Some(types.clone()));
    locked(&store.readers).insert(name.clone(), watch.store());
    let mut events = std::pin::pin!(watch.events());
    while let Some(event) = events.next().await {
        match event {
            WatchEvent::Listed { .. } => {
                if locked(&store.off).remove(&name).is_some() {
                    tracing::info!(
                        "{} are on: {} is served and readable",
                        resource.plural,
                        resource.api_version
                    );
                }
                store.listed(&name);
            }
            WatchEvent::Changed => store.changed.notify_one(),
            WatchEvent::Failed(error) => match Unavailable::of(&error) {
                Some(why) => {
                    let mut off = locked(&store.off);
                    if !off.contains_key(&name) {
                        tracing::warn!(
                            "{} are off ({}): {why}; watching again after a pause",
                            resource.plural,
                            resource.api_version,
                        );
                        off.insert(name.clone(), why.to_string());
                    }
                    drop(off);
                    store.listed(&name);
                }
                None => tracing::warn!("watching {}: {error}; watching again", resource.plural),
            },
        }
    }
}

//! The agent's northbound: Kubernetes Services, EndpointSlices,
//! NetworkPolicies, Namespaces and Pods, from the API server (`--kube`,
//! [`kube`]) or from YAML files (`--resources dir:PATH`, [`resources`]),
//! derived by `nephrite-pipeline` into load-balancer modules the agent
//! places in its port pipelines and the data plane renders.
//!
//! Both sources produce an [`Objects`] snapshot; [`derive()`] is the one
//! translation; [`follow`] applies each new snapshot to the agent. An object
//! that cannot be read is logged (a warning naming it and the field) and
//! skipped; everything else is applied.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use nephrite_pipeline::{LoadBalancer, LoadBalancerKey, ServiceWarning, cluster_load_balancers};
use tokio::sync::watch;

use crate::agent::{Agent, PortOwner};

pub mod admin;
pub mod kube;
pub mod objects;
pub mod policies;
pub mod resources;

#[cfg(test)]
mod tests;

/// Where the northbound's objects come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The cluster's API server (in-cluster config or `KUBECONFIG`).
    Kube,
    /// `*.yaml` files under a directory, reloaded on change.
    Dir(PathBuf),
}

impl std::str::FromStr for Source {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.strip_prefix("dir:") {
            Some(path) if !path.is_empty() => Ok(Source::Dir(PathBuf::from(path))),
            _ => Err(format!(
                "resources {s:?}: expected dir:PATH (a directory of Kubernetes YAML files)"
            )),
        }
    }
}

/// The objects the northbound reads, as one snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Objects {
    /// Services.
    pub services: Vec<Service>,
    /// EndpointSlices.
    pub slices: Vec<EndpointSlice>,
    /// NetworkPolicies.
    pub policies: Vec<NetworkPolicy>,
    /// Namespaces.
    pub namespaces: Vec<Namespace>,
    /// Pods.
    pub pods: Vec<Pod>,
    /// AdminNetworkPolicies (`policy.networking.k8s.io/v1alpha1`).
    pub admin_policies: Vec<admin::AdminNetworkPolicy>,
    /// BaselineAdminNetworkPolicies (the one honoured is `default`).
    pub baseline_policies: Vec<admin::BaselineAdminNetworkPolicy>,
}

/// What a snapshot derives to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Derived {
    /// The Services' load-balancer modules (IPv4).
    pub load_balancers: BTreeMap<LoadBalancerKey, LoadBalancer>,
    /// The Services' IPv6 load-balancer modules (their IPv6 ClusterIPs
    /// over the endpoints of their IPv6 EndpointSlices).
    pub load_balancers6: BTreeMap<LoadBalancerKey, LoadBalancer<std::net::Ipv6Addr>>,
    /// The NetworkPolicies' ACL modules, by pod address.
    pub acls: BTreeMap<std::net::Ipv4Addr, nephrite_pipeline::PodAcl>,
    /// Every tier of policy (AdminNetworkPolicies by priority, the
    /// NetworkPolicies' ACL, the BaselineAdminNetworkPolicy), by pod
    /// address ([`nephrite_pipeline::translate_tiers`]): a pod absent is
    /// open both ways.
    pub tiers: BTreeMap<std::net::Ipv4Addr, nephrite_pipeline::PodTiers>,
    /// The NetworkPolicies' IPv6 ACL modules, by the pod's IPv6 address
    /// ([`nephrite_pipeline::translate_policies6`]; only with
    /// [`derive_dual`]'s IPv6 addresses).
    pub acls6: BTreeMap<std::net::Ipv6Addr, nephrite_pipeline::PodAcl6>,
    /// What was skipped, each naming the object and the field.
    pub warnings: Vec<Warning>,
}

/// An object (or part of one) the translation skipped: the object, a
/// reason (a Kubernetes Event's `reason`), and what was wrong, naming the
/// field. Displayed as that text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Warning {
    /// Why, in one CamelCase word (`InvalidService`, `UnknownTargetPort`, …).
    pub reason: &'static str,
    /// The object: kind, API version, namespace, name, uid.
    pub regarding: Reference,
    /// What was wrong, naming the object and the field.
    pub text: String,
}

/// The parts of an object a Warning Event refers to.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    /// The object's kind.
    pub kind: &'static str,
    /// Its API version.
    pub api_version: &'static str,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its name.
    pub name: Option<String>,
    /// Its uid (set by an API server).
    pub uid: Option<String>,
}

impl Reference {
    fn of<K: ::kube::Resource<DynamicType = ()>>(object: &K) -> Reference {
        let meta = object.meta();
        Reference {
            kind: match K::kind(&()) {
                std::borrow::Cow::Borrowed(k) => k,
                std::borrow::Cow::Owned(_) => "Unknown",
            },
            api_version: match K::api_version(&()) {
                std::borrow::Cow::Borrowed(v) => v,
                std::borrow::Cow::Owned(_) => "v1",
            },
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            uid: meta.uid.clone(),
        }
    }

    /// As a Kubernetes `ObjectReference`.
    pub fn object_reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.to_string()),
            kind: Some(self.kind.to_string()),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            ..ObjectReference::default()
        }
    }
}

impl Warning {
    fn on<K: ::kube::Resource<DynamicType = ()>>(
        object: &K,
        reason: &'static str,
        text: String,
    ) -> Warning {
        Warning {
            reason,
            regarding: Reference::of(object),
            text,
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// The one translation of a snapshot (pure), with Pods at their
/// `status.podIP` ([`derive_at`] with no ports).
pub fn derive(objects: &Objects) -> Derived {
    derive_at(objects, &[])
}

/// The one translation of a snapshot (pure), Pods placed at the addresses
/// of the ports `owners` records for them ([`policies::place`]).
pub fn derive_at(objects: &Objects, owners: &[PortOwner]) -> Derived {
    derive_dual(objects, owners, &BTreeMap::new())
}

/// [`derive_at`], with the pods' IPv6 addresses by their IPv4 ones
/// (`addresses6`, the agent's dual-stack ports): the IPv6 ACLs too.
pub fn derive_dual(
    objects: &Objects,
    owners: &[PortOwner],
    addresses6: &BTreeMap<std::net::Ipv4Addr, std::net::Ipv6Addr>,
) -> Derived {
    let mut warnings = Vec::new();
    let mut endpoints: BTreeMap<(String, String), Vec<nephrite_pipeline::Endpoint>> =
        BTreeMap::new();
    let mut endpoints6: BTreeMap<
        (String, String),
        Vec<nephrite_pipeline::Endpoint<std::net::Ipv6Addr>>,
    > = BTreeMap::new();
    for slice in &objects.slices {
        let Some(owner) = objects::slice_service(slice) else {
            continue;
        };
        let read = objects::endpoints(slice).and_then(|v4| Ok((v4, objects::endpoints(slice)?)));
        match read {
            Ok((v4, v6)) => {
                endpoints.entry(owner.clone()).or_default().extend(v4);
                endpoints6.entry(owner).or_default().extend(v6);
            }
            Err(w) => warnings.push(Warning::on(slice, "InvalidEndpointSlice", w)),
        }
    }
    let mut services = Vec::new();
    let mut services6 = Vec::new();
    for s in &objects.services {
        match objects::service(s) {
            Ok(Some(svc)) => {
                let owner = (svc.namespace.clone(), svc.name.clone());
                let eps = endpoints.get(&owner).cloned().unwrap_or_default();
                let eps6 = endpoints6.get(&owner).cloned().unwrap_or_default();
                services6.push((svc.clone(), eps6));
                services.push((svc, eps));
            }
            Ok(None) => {}
            Err(w) => warnings.push(Warning::on(s, "InvalidService", w)),
        }
    }
    let (load_balancers, mut w) = cluster_load_balancers(&services);
    let (load_balancers6, w6) = cluster_load_balancers(&services6);
    w.extend(w6);
    for w in w {
        let (namespace, service, reason) = match &w {
            ServiceWarning::UnknownTargetPort {
                namespace, service, ..
            } => (namespace, service, "UnknownTargetPort"),
            ServiceWarning::VipTaken {
                namespace, service, ..
            } => (namespace, service, "ClusterIPTaken"),
        };
        let object = objects.services.iter().find(|s| {
            s.metadata.namespace.as_deref().unwrap_or("default") == namespace
                && s.metadata.name.as_deref() == Some(service.as_str())
        });
        if let Some(object) = object {
            warnings.push(Warning::on(object, reason, w.to_string()));
        }
    }
    let mut policies = Vec::new();
    for p in &objects.policies {
        match policies::policy(p) {
            Ok(p) => policies.push(p),
            Err(w) => warnings.push(Warning::on(p, "InvalidNetworkPolicy", w)),
        }
    }
    let read: Vec<_> = objects.pods.iter().map(policies::pod).collect();
    let pods = policies::place(&read, owners);
    let mut namespaces: Vec<_> = objects.namespaces.iter().map(policies::namespace).collect();
    // a pod's namespace without its object still has its name label
    for pod in &pods {
        if !namespaces.iter().any(|n| n.name == pod.namespace) {
            namespaces.push(policies::namespace(&Namespace {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(pod.namespace.clone()),
                    ..Default::default()
                },
                ..Default::default()
            }));
        }
    }
    let acls = nephrite_pipeline::translate_policies(&policies, &pods, &namespaces);
    let acls6 = nephrite_pipeline::translate_policies6(&policies, &pods, &namespaces, addresses6);
    let mut set = nephrite_pipeline::PolicySet {
        network: policies,
        ..Default::default()
    };
    for p in &objects.admin_policies {
        match admin::admin(p) {
            Ok(p) => set.admin.push(p),
            Err(w) => warnings.push(Warning::on(p, "InvalidAdminNetworkPolicy", w)),
        }
    }
    for p in &objects.baseline_policies {
        match admin::baseline(p) {
            Ok(p) => set.baseline = Some(p),
            Err(w) => warnings.push(Warning::on(p, "InvalidBaselineAdminNetworkPolicy", w)),
        }
    }
    let tiers = nephrite_pipeline::translate_tiers(&set, &pods, &namespaces);
    warnings.sort();
    Derived {
        load_balancers,
        load_balancers6,
        acls,
        tiers,
        acls6,
        warnings,
    }
}

/// Apply every snapshot `snapshots` yields to `agent`, and derive again
/// whenever the agent's ports move (a pod's port placing it), until the
/// snapshots close. Warnings are logged once per distinct line.
pub async fn follow(agent: Arc<Agent>, mut snapshots: watch::Receiver<Option<Objects>>) {
    let mut warned: BTreeSet<Warning> = BTreeSet::new();
    let mut owners = agent.port_owners().await;
    loop {
        let current = snapshots.borrow_and_update().clone();
        let placed = owners.borrow_and_update().clone();
        if let Some(objects) = current {
            let addresses6 = agent.addresses6().await;
            let derived = derive_dual(&objects, &placed, &addresses6);
            let now: BTreeSet<Warning> = derived.warnings.iter().cloned().collect();
            for w in now.difference(&warned) {
                tracing::warn!("{w}; skipped, everything else applied");
            }
            warned = now;
            let count = derived.load_balancers.len() + derived.load_balancers6.len();
            match agent
                .set_services(derived.load_balancers, derived.load_balancers6)
                .await
            {
                Ok(change) if !change.is_empty() => tracing::info!(
                    service_ports = count,
                    changed = change.put(),
                    removed = change.removed(),
                    "services rendered"
                ),
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "services not rendered; next change retries"),
            }
            let isolated = derived.tiers.len();
            match agent.set_policies(derived.tiers).await {
                Ok(true) => tracing::info!(pods = isolated, "policies rendered"),
                Ok(false) => {}
                Err(e) => tracing::error!(error = %e, "policies not rendered; next change retries"),
            }
            let isolated6 = derived.acls6.len();
            match agent.set_policies6(derived.acls6).await {
                Ok(true) => tracing::info!(pods = isolated6, "IPv6 policies rendered"),
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(error = %e, "IPv6 policies not rendered; next change retries")
                }
            }
        }
        tokio::select! {
            changed = snapshots.changed() => if changed.is_err() {
                return;
            },
            changed = owners.changed() => if changed.is_err() {
                return;
            },
        }
    }
}

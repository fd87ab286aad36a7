//! The cluster `explain` judges a connection on, put together from two
//! sources:
//!
//! - the running agent ([`AgentCluster`], its `GetCluster` answer): its
//!   networks, the pods at its ports (a port's address and the pod the
//!   runtime named for it), the Services' load balancers it renders, and
//!   every pod's policy tiers it rendered;
//! - the Kubernetes objects the agent reads (`--resources dir:PATH`): the
//!   Pods' labels and named ports, the Namespaces' labels and the policies
//!   themselves, which the agent keeps only in their translated form.
//!
//! The objects are translated the way the agent's northbound does (Pods
//! placed at the addresses of their ports) and the policy tiers that gives
//! are compared with the agent's: when they differ the agent has not
//! applied those objects (yet), and the explanation says so.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use nephrite_pipeline::{
    EgressPolicy, Ipv4Cidr, LoadBalancer, LoadBalancerKey, Masquerade, NetworkSpec, PodName,
    PodTiers, PolicyNamespace, PolicyPod, PolicySet,
};
use serde::{Deserialize, Serialize};

use crate::northbound::{Objects, admin, policies};

/// One port of the agent: where a pod is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortAt {
    /// The pod the runtime named for the port (`None`: it named none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodName>,
    /// The port's IPv4 address.
    pub address: Ipv4Addr,
    /// Its network.
    pub network: String,
    /// The pod's network namespace, for a port of this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
}

/// What the running agent holds that `explain` reads (`GetCluster`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentCluster {
    /// The networks it serves.
    pub networks: Vec<NetworkSpec>,
    /// Its ports (this host's and, in a fabric, the other hosts').
    pub ports: Vec<PortAt>,
    /// The Services' load balancers, by Service port.
    pub load_balancers: Vec<(LoadBalancerKey, LoadBalancer)>,
    /// Every pod's policy tiers as rendered, by the pod's address.
    pub tiers: BTreeMap<Ipv4Addr, PodTiers>,
}

/// The cluster as `explain` judges it: owned, ready for a
/// [`nephrite_pipeline::ClusterView`].
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The pod networks, the Service CIDR and masquerade.
    pub egress: EgressPolicy,
    /// Every pod at its address.
    pub pods: Vec<PolicyPod>,
    /// Each pod's network, by address.
    pub pod_networks: BTreeMap<Ipv4Addr, String>,
    /// The namespaces.
    pub namespaces: Vec<PolicyNamespace>,
    /// Every policy.
    pub policies: PolicySet,
    /// The Services' load balancers.
    pub load_balancers: BTreeMap<LoadBalancerKey, LoadBalancer>,
    /// The policy tiers the agent rendered, by pod address.
    pub tiers: BTreeMap<Ipv4Addr, PodTiers>,
    /// The agent's ports.
    pub ports: Vec<PortAt>,
    /// The pods whose tiers the objects give differently from the agent's
    /// (it has not applied these objects, or reads others).
    pub out_of_sync: Vec<Ipv4Addr>,
    /// What of the objects could not be read, naming it.
    pub warnings: Vec<String>,
}

/// Why the cluster cannot be put together.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The agent's networks and the Service CIDR do not fit together.
    #[error("the agent's networks with Service CIDR {service_cidr}: {source}")]
    Egress {
        /// The Service CIDR given.
        service_cidr: Ipv4Cidr,
        /// The model's reason.
        source: nephrite_pipeline::Error,
    },
}

impl Cluster {
    /// The cluster of `agent` with the policies, Pods and Namespaces of
    /// `objects` (its Services and endpoints are the agent's own load
    /// balancers), the Service CIDR being `service_cidr`.
    ///
    /// # Errors
    /// The Service CIDR overlaps one of the agent's networks.
    pub fn assemble(
        agent: AgentCluster,
        objects: &Objects,
        service_cidr: Ipv4Cidr,
    ) -> Result<Cluster, ClusterError> {
        let egress = EgressPolicy::new(&agent.networks, service_cidr, Masquerade::default())
            .map_err(|source| ClusterError::Egress {
                service_cidr,
                source,
            })?;
        let mut warnings = Vec::new();
        let owners: Vec<(Option<PodName>, Ipv4Addr)> = agent
            .ports
            .iter()
            .map(|p| (p.pod.clone(), p.address))
            .collect();
        let read: Vec<_> = objects.pods.iter().map(policies::pod).collect();
        let pods = policies::place(&read, &owners);
        let mut namespaces: Vec<PolicyNamespace> =
            objects.namespaces.iter().map(policies::namespace).collect();
        for pod in &pods {
            if !namespaces.iter().any(|n| n.name == pod.namespace) {
                namespaces.push(policies::namespace(&bare_namespace(&pod.namespace)));
            }
        }
        let mut set = PolicySet::default();
        for p in &objects.policies {
            match policies::policy(p) {
                Ok(p) => set.network.push(p),
                Err(w) => warnings.push(w),
            }
        }
        for p in &objects.admin_policies {
            match admin::admin(p) {
                Ok(p) => set.admin.push(p),
                Err(w) => warnings.push(w),
            }
        }
        for p in &objects.baseline_policies {
            match admin::baseline(p) {
                Ok(p) => set.baseline = Some(p),
                Err(w) => warnings.push(w),
            }
        }
        let derived = nephrite_pipeline::translate_tiers(&set, &pods, &namespaces);
        let out_of_sync = differing_pods(&derived, &agent.tiers);
        Ok(Cluster {
            egress,
            pod_networks: agent
                .ports
                .iter()
                .map(|p| (p.address, p.network.clone()))
                .collect(),
            pods,
            namespaces,
            policies: set,
            load_balancers: agent.load_balancers.into_iter().collect(),
            tiers: agent.tiers,
            ports: agent.ports,
            out_of_sync,
            warnings,
        })
    }

    /// The view [`nephrite_pipeline::explain`] reads.
    pub fn view(&self) -> nephrite_pipeline::ClusterView<'_> {
        nephrite_pipeline::ClusterView {
            egress: &self.egress,
            pods: &self.pods,
            pod_networks: &self.pod_networks,
            namespaces: &self.namespaces,
            policies: &self.policies,
            load_balancers: &self.load_balancers,
        }
    }

    /// The Service `name`'s ports (every protocol and port it serves).
    pub fn service_ports(&self, name: &PodName) -> Vec<(&LoadBalancerKey, &LoadBalancer)> {
        self.load_balancers
            .iter()
            .filter(|(k, _)| k.namespace == name.namespace && k.service == name.name)
            .collect()
    }
}

/// A Namespace object with nothing but its name (a pod's namespace whose
/// object is not among the inputs still has its name label).
fn bare_namespace(name: &str) -> k8s_openapi::api::core::v1::Namespace {
    k8s_openapi::api::core::v1::Namespace {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The pods whose tiers differ between `derived` and `rendered`.
fn differing_pods(
    derived: &BTreeMap<Ipv4Addr, PodTiers>,
    rendered: &BTreeMap<Ipv4Addr, PodTiers>,
) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = derived
        .keys()
        .chain(rendered.keys())
        .filter(|a| derived.get(a) != rendered.get(a))
        .copied()
        .collect();
    out.dedup();
    out.sort();
    out.dedup();
    out
}

//! Where the Services' load-balancer modules sit: a copy in the pipeline of
//! every port of this host (every pod reaches every ClusterIP; the copy is
//! named after the Service port and the pipeline's port, like the copies
//! of the meta modules), none in other hosts' ports (their host renders
//! them). And the load-balancer modules of a whole cluster: every Service
//! with its endpoints, conflicts named.

use std::collections::BTreeMap;

use crate::module::{Port, PortId, copy_id};

#[cfg(test)]
mod tests;
use crate::service::{
    Endpoint, LoadBalancer, LoadBalancerKey, Protocol, Service, ServiceFamily, ServiceWarning,
    load_balancers,
};

/// The name of a Service port's load-balancer meta module.
pub fn load_balancer_name(key: &LoadBalancerKey) -> String {
    let p = match key.protocol {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
        Protocol::Sctp => "sctp",
    };
    format!("lb.{}.{}.{p}.{}", key.namespace, key.service, key.port)
}

/// By local port: the ids of the load-balancer copies in its pipeline and
/// the Service ports they render, in key order.
pub fn place_load_balancers<A>(
    ports: &[&Port],
    lbs: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
) -> BTreeMap<PortId, Vec<(String, LoadBalancerKey)>> {
    ports
        .iter()
        .filter(|p| !p.is_remote())
        .map(|p| {
            let modules = lbs
                .keys()
                .map(|k| (copy_id(&load_balancer_name(k), &p.id), k.clone()))
                .collect();
            (p.id.clone(), modules)
        })
        .collect()
}

/// The load-balancer modules of every Service over its endpoints, in the
/// family `A`. Two Services claiming one VIP, protocol and port: the one
/// first by namespace/name keeps it, the other's port is skipped with a
/// warning.
pub fn cluster_load_balancers<A: ServiceFamily>(
    services: &[(Service, Vec<Endpoint<A>>)],
) -> (
    BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
    Vec<ServiceWarning>,
) {
    let mut sorted: Vec<&(Service, Vec<Endpoint<A>>)> = services.iter().collect();
    sorted.sort_by(|a, b| (&a.0.namespace, &a.0.name).cmp(&(&b.0.namespace, &b.0.name)));
    let mut out = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut claimed: BTreeMap<(A, Protocol, u16), LoadBalancerKey> = BTreeMap::new();
    for (service, endpoints) in sorted {
        let (lbs, w) = load_balancers(service, endpoints);
        warnings.extend(w);
        for (key, lb) in lbs {
            let claim = (lb.vip, key.protocol, key.port);
            match claimed.get(&claim) {
                Some(owner) if owner.namespace != key.namespace || owner.service != key.service => {
                    warnings.push(ServiceWarning::VipTaken {
                        namespace: key.namespace.clone(),
                        service: key.service.clone(),
                        port: key.port,
                        vip: lb.vip.into(),
                        owner: format!("{}/{}", owner.namespace, owner.service),
                    });
                }
                _ => {
                    claimed.insert(claim, key.clone());
                    out.insert(key, lb);
                }
            }
        }
    }
    (out, warnings)
}

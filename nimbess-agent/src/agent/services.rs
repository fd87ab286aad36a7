//! The Services' load-balancer modules: what the northbound derived, the
//! difference the data plane renders, their place in the port pipelines,
//! and drift (named, then repaired).

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use nephrite_pipeline::{
    LoadBalancer, LoadBalancerDiff, LoadBalancerKey, PortId, diff_load_balancers,
    place_load_balancers,
};

use super::{Agent, AgentState};
use crate::driver::{DriverError, Services6};

/// What changed in the Services' modules of both families.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServicesChange {
    /// The IPv4 modules' difference.
    pub v4: LoadBalancerDiff,
    /// The IPv6 modules' difference.
    pub v6: LoadBalancerDiff<Ipv6Addr>,
}

impl ServicesChange {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// Modules new or changed, both families.
    pub fn put(&self) -> usize {
        self.v4.put.len() + self.v6.put.len()
    }

    /// Modules gone, both families.
    pub fn removed(&self) -> usize {
        self.v4.removed.len() + self.v6.removed.len()
    }
}

impl Agent {
    /// Make `lbs` (IPv4) and `lbs6` (IPv6) the Services' load-balancer
    /// modules: the data plane renders what changed, each family on its
    /// own. Returns the difference applied.
    ///
    /// # Errors
    /// The data plane refused a family's modules (that family's previous
    /// modules stay recorded and rendered).
    pub async fn set_services(
        &self,
        lbs: BTreeMap<LoadBalancerKey, LoadBalancer>,
        lbs6: Services6,
    ) -> Result<ServicesChange, DriverError> {
        let mut st = self.state.lock().await;
        let change = ServicesChange {
            v4: diff_load_balancers(&st.services, &lbs),
            v6: diff_load_balancers(&st.services6, &lbs6),
        };
        if !change.v4.is_empty() {
            st.driver.firewall_mut().apply_services(&lbs)?;
            st.services = lbs;
        }
        if !change.v6.is_empty() {
            st.driver.firewall_mut().apply_services6(&lbs6)?;
            st.services6 = lbs6;
        }
        Ok(change)
    }

    /// Make `tiers` every pod's tiers of policy (AdminNetworkPolicies,
    /// NetworkPolicies, BaselineAdminNetworkPolicy; by pod address); the
    /// data plane renders them when they changed. Returns whether they did.
    ///
    /// # Errors
    /// The data plane refused them (the previous ones stay).
    pub async fn set_policies(
        &self,
        tiers: crate::driver::PodPolicies,
    ) -> Result<bool, DriverError> {
        let mut st = self.state.lock().await;
        if st.policies == tiers {
            return Ok(false);
        }
        st.driver.firewall_mut().apply_policies(&tiers)?;
        st.policies = tiers;
        Ok(true)
    }

    /// Make `acls` every pod's IPv6 NetworkPolicy ACLs (by the pod's IPv6
    /// address); the data plane renders them when they changed. Returns
    /// whether they did.
    ///
    /// # Errors
    /// The data plane refused them (the previous ones stay).
    pub async fn set_policies6(
        &self,
        acls: crate::driver::PodPolicies6,
    ) -> Result<bool, DriverError> {
        let mut st = self.state.lock().await;
        if st.policies6 == acls {
            return Ok(false);
        }
        st.driver.firewall_mut().apply_policies6(&acls)?;
        st.policies6 = acls;
        Ok(true)
    }

    /// Every port's IPv6 address by its IPv4 one (ports of dual-stack
    /// networks): where the northbound finds a pod's IPv6 address.
    pub async fn addresses6(&self) -> BTreeMap<std::net::Ipv4Addr, Ipv6Addr> {
        let st = self.state.lock().await;
        st.model
            .addresses6()
            .iter()
            .filter_map(|(port, v6)| {
                let p = st.model.port(port)?;
                Some((p.address.addr, v6.addr))
            })
            .collect()
    }

    /// The load-balancer modules of the port pipelines: by port, the
    /// modules its pipeline holds (every pod of this host reaches every
    /// ClusterIP).
    pub async fn service_modules(&self) -> BTreeMap<PortId, Vec<(String, LoadBalancerKey)>> {
        let st = self.state.lock().await;
        let ports: Vec<&nephrite_pipeline::Port> = st.model.ports().values().collect();
        place_load_balancers(&ports, &st.services)
    }

    /// The Services' modules (inspection).
    pub async fn services(&self) -> BTreeMap<LoadBalancerKey, LoadBalancer> {
        self.state.lock().await.services.clone()
    }

    /// The Services' IPv6 modules (inspection).
    pub async fn services6(&self) -> Services6 {
        self.state.lock().await.services6.clone()
    }
}

/// Every port's address with its pod, in address order.
pub(super) fn owners(model: &nephrite_pipeline::Model) -> Vec<super::PortOwner> {
    let mut out: Vec<super::PortOwner> = model
        .ports()
        .values()
        .map(|p| (p.pod.clone(), p.address.addr))
        .collect();
    out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    out
}

impl Agent {
    /// Every port's address (this host's and, in a fabric, the other
    /// hosts') with the pod the runtime named for it; changes with every
    /// port added or removed. The northbound matches Pods to addresses by it.
    pub async fn port_owners(&self) -> tokio::sync::watch::Receiver<Vec<super::PortOwner>> {
        self.state.lock().await.owners.subscribe()
    }
}

impl AgentState {
    /// Tell [`Agent::port_owners`]' receivers when the ports moved.
    pub(super) fn announce_owners(&self) {
        let now = owners(&self.model);
        self.owners.send_if_modified(|current| {
            if *current == now {
                false
            } else {
                *current = now;
                true
            }
        });
    }

    /// Drift between the Services' modules and the data plane, one line
    /// each; what drifted is rendered again.
    pub(crate) fn verify_services(&mut self) -> Vec<String> {
        let lbs = self.services.clone();
        let firewall = self.driver.firewall_mut();
        let mut drift = firewall.verify_services(&lbs);
        if !drift.is_empty()
            && let Err(e) = firewall.apply_services(&lbs)
        {
            tracing::warn!(error = %e, "the Services' drift could not be repaired");
        }
        let lbs6 = self.services6.clone();
        let drift6 = firewall.verify_services6(&lbs6);
        if !drift6.is_empty()
            && let Err(e) = firewall.apply_services6(&lbs6)
        {
            tracing::warn!(error = %e, "the IPv6 Services' drift could not be repaired");
        }
        drift.extend(drift6);
        let tiers = self.policies.clone();
        let policy_drift = firewall.verify_policies(&tiers);
        if !policy_drift.is_empty()
            && let Err(e) = firewall.apply_policies(&tiers)
        {
            tracing::warn!(error = %e, "the policies' drift could not be repaired");
        }
        drift.extend(policy_drift);
        let acls6 = self.policies6.clone();
        let drift6 = firewall.verify_policies6(&acls6);
        if !drift6.is_empty()
            && let Err(e) = firewall.apply_policies6(&acls6)
        {
            tracing::warn!(error = %e, "the IPv6 policies' drift could not be repaired");
        }
        drift.extend(drift6);
        drift
    }
}

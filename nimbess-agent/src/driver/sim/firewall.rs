//! The simulation's firewall: it holds what it is given, the Services'
//! and policies' modules for [`super::SimDriver::connect`], and reports as
//! drift any difference from what it is asked to verify. Nothing here can
//! refuse a render: the model's own checks are the simulation's only
//! limits.

use std::collections::BTreeMap;

use nephrite_pipeline::{AclRule, EgressPolicy, NetworkSpec, PortId};

use crate::driver::DriverError;
use crate::driver::firewall::{Firewall, PodPolicies, PodPolicies6, Services, Services6};

/// The simulated firewall.
#[derive(Debug, Default)]
pub struct SimFirewall {
    /// The Services' load-balancer modules it holds.
    pub(super) services: Services,
    /// The Services' IPv6 load-balancer modules it holds.
    pub(super) services6: Services6,
    /// Every pod's tiers of policy it holds, by pod address.
    pub(super) policies: PodPolicies,
    /// Every pod's IPv6 ACLs it holds, by the pod's IPv6 address.
    pub(super) policies6: PodPolicies6,
    /// The egress it was given: the policy and its networks.
    egress: Option<(EgressPolicy, Vec<NetworkSpec>)>,
    /// Each port's ACL (ports without one are absent).
    acls: BTreeMap<PortId, Vec<AclRule>>,
}

impl Firewall for SimFirewall {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn apply_services(&mut self, services: &Services) -> Result<(), DriverError> {
        self.services = services.clone();
        Ok(())
    }

    fn verify_services(&mut self, services: &Services) -> Vec<String> {
        if &self.services == services {
            return Vec::new();
        }
        vec![format!(
            "services: the simulation holds {} service ports, the model {}",
            self.services.len(),
            services.len()
        )]
    }

    fn apply_services6(&mut self, services: &Services6) -> Result<(), DriverError> {
        self.services6 = services.clone();
        Ok(())
    }

    fn verify_services6(&mut self, services: &Services6) -> Vec<String> {
        if &self.services6 == services {
            return Vec::new();
        }
        vec![format!(
            "services: the simulation holds {} IPv6 service ports, the model {}",
            self.services6.len(),
            services.len()
        )]
    }

    fn apply_policies6(&mut self, acls: &PodPolicies6) -> Result<(), DriverError> {
        self.policies6 = acls.clone();
        Ok(())
    }

    fn verify_policies6(&self, acls: &PodPolicies6) -> Vec<String> {
        if &self.policies6 == acls {
            return Vec::new();
        }
        vec![format!(
            "policy: the simulation holds the IPv6 ACLs of {} pods, the model {}",
            self.policies6.len(),
            acls.len()
        )]
    }

    fn apply_policies(&mut self, tiers: &PodPolicies) -> Result<(), DriverError> {
        self.policies = tiers.clone();
        Ok(())
    }

    fn verify_policies(&self, tiers: &PodPolicies) -> Vec<String> {
        if &self.policies == tiers {
            return Vec::new();
        }
        vec![format!(
            "policy: the simulation holds the tiers of {} pods, the model {}",
            self.policies.len(),
            tiers.len()
        )]
    }

    fn apply_egress(
        &mut self,
        policy: &EgressPolicy,
        networks: &[NetworkSpec],
    ) -> Result<(), DriverError> {
        self.egress = Some((policy.clone(), networks.to_vec()));
        Ok(())
    }

    fn verify_egress(&self, policy: &EgressPolicy, networks: &[NetworkSpec]) -> Vec<String> {
        match &self.egress {
            Some((p, n)) if p == policy && n == networks => Vec::new(),
            Some(_) => vec!["egress: the simulation holds another policy".to_string()],
            None => vec!["egress: the simulation holds none".to_string()],
        }
    }

    fn apply_acl(&mut self, port: &PortId, rules: &[AclRule]) -> Result<(), DriverError> {
        if rules.is_empty() {
            self.acls.remove(port);
        } else {
            self.acls.insert(port.clone(), rules.to_vec());
        }
        Ok(())
    }

    fn remove_acl(&mut self, port: &PortId) -> Result<(), DriverError> {
        self.acls.remove(port);
        Ok(())
    }

    fn verify_acl(&self, port: &PortId, rules: &[AclRule]) -> Result<Vec<String>, DriverError> {
        let have = self.acls.get(port).map_or(&[][..], Vec::as_slice);
        Ok(if have == rules {
            Vec::new()
        } else {
            vec![format!(
                "port {port}: the simulation holds {} ACL rules, the model {}",
                have.len(),
                rules.len()
            )]
        })
    }
}

#[cfg(test)]
mod tests {
    use nephrite_pipeline::{AclAction, AclProtocol};

    use super::*;

    #[test]
    fn an_acl_reads_back_as_given_and_a_removed_one_as_drift_against_its_rules() {
        let mut fw = SimFirewall::default();
        let port: PortId = "c1/eth0".into();
        let rules = vec![AclRule {
            src: None,
            dst: None,
            protocol: Some(AclProtocol::Tcp),
            port: Some(80),
            action: AclAction::Deny,
        }];
        fw.apply_acl(&port, &rules).expect("sim");
        assert!(fw.verify_acl(&port, &rules).expect("sim").is_empty());
        fw.remove_acl(&port).expect("sim");
        assert_eq!(
            fw.verify_acl(&port, &rules).expect("sim"),
            vec!["port c1/eth0: the simulation holds 0 ACL rules, the model 1"]
        );
        assert!(fw.verify_acl(&port, &[]).expect("sim").is_empty());
    }
}

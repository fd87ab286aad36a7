//! The IPv6 side of a dual-stack network's ports: which address a port
//! may take.

use std::collections::BTreeMap;

use super::{Model, Network, PortRequest};
use crate::Error;
use crate::family::Ipv6Cidr;
use crate::module::{PortId, port_id};

/// The IPv6 address a requested port gets: required on a dual-stack
/// network, refused on another; in the IPv6 subnet with its prefix, not
/// the subnet-router anycast, not the gateway, not another port's.
pub(super) fn check_address6(
    net: &Network,
    req: &PortRequest,
    held: &BTreeMap<PortId, Ipv6Cidr>,
) -> Result<Option<Ipv6Cidr>, Error> {
    let spec = &net.spec;
    let shown = req
        .address6
        .map_or_else(|| "no IPv6 address".to_string(), |a| a.to_string());
    let bad = |why: String| Error::InvalidAddress {
        address: shown.clone(),
        network: spec.name.clone(),
        why,
    };
    let (subnet6, address6) = match (spec.subnet6, req.address6) {
        (None, None) => return Ok(None),
        (None, Some(_)) => return Err(bad("the network has no IPv6 subnet".into())),
        (Some(s), None) => {
            return Err(bad(format!(
                "the network is dual-stack ({s}): a port needs an IPv6 address"
            )));
        }
        (Some(s), Some(a)) => (s, a),
    };
    if address6.prefix != subnet6.prefix || !subnet6.contains(address6.addr) {
        return Err(bad(format!("not in the IPv6 subnet {subnet6}")));
    }
    if address6.addr == subnet6.network() {
        return Err(bad("is the subnet-router anycast address".into()));
    }
    if Some(address6.addr) == spec.gateway6() {
        return Err(bad("is the IPv6 gateway".into()));
    }
    let id = port_id(&req.container_id, &req.ifname);
    if let Some((other, _)) = held
        .iter()
        .find(|(p, a)| **p != id && a.addr == address6.addr)
    {
        return Err(bad(format!("held by port {other}")));
    }
    Ok(Some(address6))
}

impl Model {
    /// Check a port being put back may hold `address6` on `network`.
    pub(super) fn check_free6(
        &self,
        network: &str,
        port: &str,
        address6: Ipv6Cidr,
    ) -> Result<(), Error> {
        let net = self
            .networks
            .get(network)
            .ok_or_else(|| Error::UnknownNetwork(network.to_string()))?;
        let bad = |why: String| Error::InvalidAddress {
            address: address6.to_string(),
            network: network.to_string(),
            why,
        };
        let Some(subnet6) = net.spec.subnet6 else {
            return Err(bad("the network has no IPv6 subnet".into()));
        };
        if address6.prefix != subnet6.prefix || !subnet6.contains(address6.addr) {
            return Err(bad(format!("not in the IPv6 subnet {subnet6}")));
        }
        if let Some((other, _)) = self
            .addresses6
            .iter()
            .find(|(p, a)| p.as_str() != port && a.addr == address6.addr)
        {
            return Err(bad(format!("held by port {other}")));
        }
        Ok(())
    }
}

//! The text form of a network declaration: `subnet` (one IPv4 prefix, as
//! before), `subnets` (one prefix per family, in either order) or
//! `subnet` + `subnet6`, read into a [`NetworkSpec`].

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Deserialize;

use super::{AclRule, Egress6, NetworkKind, NetworkSpec};
use crate::family::{IpCidr, Ipv6Cidr, dual_stack};

/// A network as written, before its subnets are sorted by family.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NetworkText {
    name: String,
    #[serde(default)]
    subnet: Option<IpCidr>,
    #[serde(default)]
    subnets: Option<Vec<IpCidr>>,
    #[serde(default)]
    subnet6: Option<Ipv6Cidr>,
    #[serde(default)]
    kind: NetworkKind,
    #[serde(default)]
    vlan: Option<u16>,
    #[serde(default)]
    gateway: Option<Ipv4Addr>,
    #[serde(default)]
    gateway6: Option<Ipv6Addr>,
    #[serde(default)]
    egress6: Egress6,
    #[serde(default)]
    mtu: Option<u32>,
    #[serde(default)]
    acl: Vec<AclRule>,
}

impl TryFrom<NetworkText> for NetworkSpec {
    type Error = String;

    fn try_from(t: NetworkText) -> Result<Self, String> {
        let name = &t.name;
        let listed: Vec<IpCidr> = match (t.subnet, t.subnets, t.subnet6) {
            (None, None, None) => {
                return Err(format!(
                    "network {name}: no subnet (give `subnet`, or `subnets: [v4, v6]`)"
                ));
            }
            (Some(_), Some(_), _) | (_, Some(_), Some(_)) => {
                return Err(format!(
                    "network {name}: `subnets` replaces `subnet` and `subnet6`: give one form"
                ));
            }
            (None, Some(list), None) => list,
            (subnet, None, subnet6) => subnet.into_iter().chain(subnet6.map(IpCidr::V6)).collect(),
        };
        let (v4, v6) = dual_stack(name, &listed).map_err(|e| e.to_string())?;
        let Some(subnet) = v4 else {
            return Err(format!(
                "network {name}: an IPv6-only network ({}) is not supported: add an IPv4 subnet \
                 (`subnets: [<v4>, {}]`)",
                listed[0], listed[0]
            ));
        };
        Ok(NetworkSpec {
            name: t.name,
            subnet,
            subnet6: v6,
            gateway6: t.gateway6,
            egress6: t.egress6,
            kind: t.kind,
            vlan: t.vlan,
            gateway: t.gateway,
            mtu: t.mtu,
            acl: t.acl,
        })
    }
}

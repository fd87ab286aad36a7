//! The IPv6 pool of a dual-stack network: the lowest free address above
//! the subnet-router anycast, never the gateway, idempotent per owner; an
//! owner holds an IPv6 address on a network only beside an IPv4 one
//! ([`Ipam::allocate_dual`] takes both or neither).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;

use serde::{Deserialize, Serialize};

use super::{Ipam, Owner, Pool, held_list};
use crate::Error;
use crate::addr::Ipv4Cidr;
use crate::family::{Ipv6Cidr, lowest_free_v6};
use crate::network::NetworkSpec;

/// One dual-stack network's IPv6 address pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool6 {
    /// The IPv6 subnet.
    pub subnet: Ipv6Cidr,
    /// The IPv6 gateway, never handed out.
    pub gateway: Ipv6Addr,
    /// Held addresses. Serialized as a list (JSON keys must be strings).
    #[serde(with = "held_list")]
    pub held: BTreeMap<Ipv6Addr, Owner>,
}

impl Pool6 {
    /// How many more addresses the pool can hand out (saturating at
    /// `u64::MAX`: a /64 has more than any count needs).
    pub fn free_addresses(&self) -> u64 {
        // Every address but the subnet-router anycast is a host.
        let span = u128::from(self.subnet.last()) - u128::from(self.subnet.network());
        let gateway =
            u128::from(self.subnet.contains(self.gateway) && self.gateway != self.subnet.network());
        let free = span.saturating_sub(gateway + self.held.len() as u128);
        u64::try_from(free).unwrap_or(u64::MAX)
    }
}

impl Ipam {
    /// The IPv6 pools follow the dual-stack networks, as the IPv4 ones
    /// follow every network.
    pub(super) fn sync_v6(&mut self, specs: &[NetworkSpec]) -> Result<(), Error> {
        let bad = |network: &str, why: String| Error::InvalidNetwork {
            network: network.to_string(),
            why,
        };
        for spec in specs {
            let held = self.pools6.get(&spec.name).filter(|p| !p.held.is_empty());
            let (Some(subnet), Some(gateway)) = (spec.subnet6, spec.gateway6()) else {
                if held.is_some() {
                    return Err(bad(
                        &spec.name,
                        "the IPv6 subnet cannot go while IPv6 addresses are held".into(),
                    ));
                }
                self.pools6.remove(&spec.name);
                continue;
            };
            match self.pools6.get_mut(&spec.name) {
                Some(pool) if pool.subnet != subnet && !pool.held.is_empty() => {
                    return Err(bad(
                        &spec.name,
                        "the IPv6 subnet cannot change while addresses are held".into(),
                    ));
                }
                Some(pool) if pool.held.contains_key(&gateway) => {
                    return Err(bad(
                        &spec.name,
                        format!("gateway6 {gateway} is held by a container"),
                    ));
                }
                Some(pool) => {
                    pool.subnet = subnet;
                    pool.gateway = gateway;
                }
                None => {
                    self.pools6.insert(
                        spec.name.clone(),
                        Pool6 {
                            subnet,
                            gateway,
                            held: BTreeMap::new(),
                        },
                    );
                }
            }
        }
        self.pools6
            .retain(|name, pool| !pool.held.is_empty() || specs.iter().any(|s| &s.name == name));
        Ok(())
    }

    /// The IPv6 pool of a dual-stack network.
    pub fn pool6(&self, network: &str) -> Option<&Pool6> {
        self.pools6.get(network)
    }

    /// True when `network` cannot give one more owner its addresses: its
    /// IPv4 pool, or its IPv6 pool when dual-stack, is full.
    pub fn is_full(&self, network: &str) -> bool {
        self.pools.get(network).is_some_and(Pool::is_full)
            || self
                .pools6
                .get(network)
                .is_some_and(|p| p.free_addresses() == 0)
    }

    /// The IPv6 address `owner` holds on `network`, if any.
    pub fn held_by6(&self, network: &str, owner: &Owner) -> Option<Ipv6Cidr> {
        let pool = self.pools6.get(network)?;
        pool.held
            .iter()
            .find(|(_, o)| *o == owner)
            .map(|(a, _)| Ipv6Cidr {
                addr: *a,
                prefix: pool.subnet.prefix,
            })
    }

    /// Give `owner` its addresses on `network`: the IPv4 one
    /// ([`Ipam::allocate`]) and, on a dual-stack network, the IPv6 one —
    /// those it holds already, or the lowest free. Both or neither: when
    /// the IPv6 pool is exhausted, an IPv4 address taken by this call is
    /// given back.
    ///
    /// # Errors
    /// Unknown network; a pool is exhausted.
    pub fn allocate_dual(
        &mut self,
        network: &str,
        owner: &Owner,
    ) -> Result<(Ipv4Cidr, Option<Ipv6Cidr>), Error> {
        let had_v4 = self.held_by(network, owner).is_some();
        let v4 = self.allocate(network, owner)?;
        if !self.pools6.contains_key(network) {
            return Ok((v4, None));
        }
        match self.allocate6(network, owner) {
            Ok(v6) => Ok((v4, Some(v6))),
            Err(e) => {
                if !had_v4 {
                    self.release(network, owner);
                }
                Err(e)
            }
        }
    }

    /// Give `owner` an IPv6 address on the dual-stack `network`: the one
    /// it holds already, or the lowest free (see [`Ipam::allocate_dual`]
    /// for both families at once).
    ///
    /// # Errors
    /// The network has no IPv6 pool; the pool is exhausted.
    pub fn allocate6(&mut self, network: &str, owner: &Owner) -> Result<Ipv6Cidr, Error> {
        if let Some(held) = self.held_by6(network, owner) {
            return Ok(held);
        }
        let pool = self
            .pools6
            .get_mut(network)
            .ok_or_else(|| Error::UnknownNetwork(network.to_string()))?;
        let used: BTreeSet<Ipv6Addr> = pool.held.keys().copied().collect();
        let addr = lowest_free_v6(pool.subnet, pool.gateway, &used)
            .ok_or_else(|| Error::PoolExhausted(network.to_string()))?;
        pool.held.insert(addr, owner.clone());
        Ok(Ipv6Cidr {
            addr,
            prefix: pool.subnet.prefix,
        })
    }

    /// Record that `owner` holds the IPv6 `address` on `network` (a
    /// journal's replay, another host's allocation), releasing the IPv6
    /// address it held there before.
    ///
    /// # Errors
    /// The network has no IPv6 pool; the address is outside it, is the
    /// subnet-router anycast or the gateway, or is held by someone else.
    pub fn hold6(&mut self, network: &str, address: Ipv6Addr, owner: &Owner) -> Result<(), Error> {
        let bad = |why: &str| Error::InvalidAddress {
            address: address.to_string(),
            network: network.to_string(),
            why: why.to_string(),
        };
        let pool = self
            .pools6
            .get_mut(network)
            .ok_or_else(|| bad("the network has no IPv6 subnet"))?;
        if !pool.subnet.contains(address) || address == pool.subnet.network() {
            return Err(bad("not a host address of the IPv6 pool"));
        }
        if address == pool.gateway {
            return Err(bad("is the gateway"));
        }
        match pool.held.get(&address) {
            Some(o) if o == owner => return Ok(()),
            Some(_) => return Err(bad("held by another container")),
            None => {}
        }
        pool.held.retain(|_, o| o != owner);
        pool.held.insert(address, owner.clone());
        Ok(())
    }

    /// Release the IPv6 address `owner` holds on `network`; returns it.
    pub fn release6(&mut self, network: &str, owner: &Owner) -> Option<Ipv6Addr> {
        let pool = self.pools6.get_mut(network)?;
        let addr = pool
            .held
            .iter()
            .find(|(_, o)| *o == owner)
            .map(|(a, _)| *a)?;
        pool.held.remove(&addr);
        Some(addr)
    }
}

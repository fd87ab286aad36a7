//! IP address management as a pure allocator: per network, the lowest free
//! host address, never the gateway, never one held by another owner.
//! Allocation is idempotent per owner (container, ifname). A dual-stack
//! network has a second pool, of its IPv6 subnet ([`Pool6`], `ipam/v6.rs`):
//! an owner holds one address of each family or none.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::addr::Ipv4Cidr;
use crate::network::NetworkSpec;

#[cfg(test)]
mod tests;
mod v6;

pub use v6::Pool6;

/// Who holds an address: a container's interface.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Owner {
    /// Container id.
    pub container_id: String,
    /// Interface name in the container.
    pub ifname: String,
}

/// One network's address pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    /// The subnet.
    pub subnet: Ipv4Cidr,
    /// The gateway, never handed out.
    pub gateway: Ipv4Addr,
    /// Held addresses. Serialized as a list (JSON keys must be strings).
    #[serde(with = "held_list")]
    pub held: BTreeMap<Ipv4Addr, Owner>,
}

mod held_list {
    use super::*;
    use serde::{Deserializer, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Entry<A> {
        address: A,
        #[serde(flatten)]
        owner: Owner,
    }

    pub(crate) fn serialize<A: Serialize + Copy, S: Serializer>(
        held: &BTreeMap<A, Owner>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let list: Vec<Entry<A>> = held
            .iter()
            .map(|(a, o)| Entry {
                address: *a,
                owner: o.clone(),
            })
            .collect();
        list.serialize(s)
    }

    pub(crate) fn deserialize<'de, A, D>(d: D) -> Result<BTreeMap<A, Owner>, D::Error>
    where
        A: Deserialize<'de> + Ord,
        D: Deserializer<'de>,
    {
        let list = Vec::<Entry<A>>::deserialize(d)?;
        Ok(list.into_iter().map(|e| (e.address, e.owner)).collect())
    }
}

impl Pool {
    /// How many more addresses the pool can hand out: its host addresses
    /// less the gateway and those held.
    pub fn free_addresses(&self) -> u64 {
        let Some((first, last)) = self.subnet.host_range() else {
            return 0;
        };
        let hosts = u64::from(last - first) + 1;
        let gateway = u64::from((first..=last).contains(&u32::from(self.gateway)));
        hosts.saturating_sub(gateway + self.held.len() as u64)
    }

    /// True when no address is left to hand out.
    pub fn is_full(&self) -> bool {
        self.free_addresses() == 0
    }
}

/// Address pools by network: the IPv4 pool of every network, the IPv6
/// pool of each dual-stack one (absent in older state: none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipam {
    pools: BTreeMap<String, Pool>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pools6: BTreeMap<String, Pool6>,
}

impl Ipam {
    /// No pools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Make the pools match the networks: new pools for new networks, the
    /// gateway updated, pools of vanished networks dropped when empty.
    ///
    /// # Errors
    /// A network's subnet changed while addresses are held, or its gateway
    /// moved onto a held address.
    pub fn sync_networks(&mut self, specs: &[NetworkSpec]) -> Result<(), Error> {
        for spec in specs {
            let gateway = spec.gateway().ok_or_else(|| Error::InvalidNetwork {
                network: spec.name.clone(),
                why: "no gateway possible".into(),
            })?;
            match self.pools.get_mut(&spec.name) {
                Some(pool) if pool.subnet != spec.subnet && !pool.held.is_empty() => {
                    return Err(Error::InvalidNetwork {
                        network: spec.name.clone(),
                        why: "subnet cannot change while addresses are held".into(),
                    });
                }
                Some(pool) if pool.held.contains_key(&gateway) => {
                    return Err(Error::InvalidNetwork {
                        network: spec.name.clone(),
                        why: format!("gateway {gateway} is held by a container"),
                    });
                }
                Some(pool) => {
                    pool.subnet = spec.subnet;
                    pool.gateway = gateway;
                }
                None => {
                    self.pools.insert(
                        spec.name.clone(),
                        Pool {
                            subnet: spec.subnet,
                            gateway,
                            held: BTreeMap::new(),
                        },
                    );
                }
            }
        }
        self.sync_v6(specs)?;
        self.pools
            .retain(|name, pool| !pool.held.is_empty() || specs.iter().any(|s| &s.name == name));
        Ok(())
    }

    /// The pool of a network.
    pub fn pool(&self, network: &str) -> Option<&Pool> {
        self.pools.get(network)
    }

    /// All pools.
    pub fn pools(&self) -> &BTreeMap<String, Pool> {
        &self.pools
    }

    /// The address `owner` holds on `network`, if any.
    pub fn held_by(&self, network: &str, owner: &Owner) -> Option<Ipv4Cidr> {
        let pool = self.pools.get(network)?;
        pool.held
            .iter()
            .find(|(_, o)| *o == owner)
            .map(|(a, _)| pool.subnet.with_addr(*a))
    }

    /// Give `owner` an address on `network`: the one it holds already, or
    /// the lowest free host address other than the gateway.
    ///
    /// # Errors
    /// Unknown network; the pool is exhausted.
    pub fn allocate(&mut self, network: &str, owner: &Owner) -> Result<Ipv4Cidr, Error> {
        if let Some(held) = self.held_by(network, owner) {
            return Ok(held);
        }
        let pool = self
            .pools
            .get_mut(network)
            .ok_or_else(|| Error::UnknownNetwork(network.to_string()))?;
        let (first, last) = pool
            .subnet
            .host_range()
            .ok_or_else(|| Error::PoolExhausted(network.to_string()))?;
        let gateway = u32::from(pool.gateway);
        let free = (first..=last)
            .find(|n| *n != gateway && !pool.held.contains_key(&Ipv4Addr::from(*n)))
            .ok_or_else(|| Error::PoolExhausted(network.to_string()))?;
        let addr = Ipv4Addr::from(free);
        pool.held.insert(addr, owner.clone());
        Ok(pool.subnet.with_addr(addr))
    }

    /// Record that `owner` holds `address` on `network` (replaying a journal,
    /// or an allocation another host of the fabric made), releasing what it
    /// held there before.
    ///
    /// # Errors
    /// Unknown network; the address is outside the pool, is the gateway, or
    /// is held by someone else.
    pub fn hold(&mut self, network: &str, address: Ipv4Addr, owner: &Owner) -> Result<(), Error> {
        let pool = self
            .pools
            .get(network)
            .ok_or_else(|| Error::UnknownNetwork(network.to_string()))?;
        let bad = |why: &str| Error::InvalidAddress {
            address: address.to_string(),
            network: network.to_string(),
            why: why.to_string(),
        };
        let (first, last) = pool.subnet.host_range().unwrap_or((1, 0));
        if !(first..=last).contains(&u32::from(address)) {
            return Err(bad("not a host address of the pool"));
        }
        if address == pool.gateway {
            return Err(bad("is the gateway"));
        }
        match pool.held.get(&address) {
            Some(o) if o == owner => return Ok(()),
            Some(_) => return Err(bad("held by another container")),
            None => {}
        }
        // its IPv4 address only: an IPv6 one it holds stays
        if let Some(pool) = self.pools.get_mut(network) {
            pool.held.retain(|_, o| o != owner);
            pool.held.insert(address, owner.clone());
        }
        Ok(())
    }

    /// Release whatever `owner` holds on `network` (both families);
    /// returns the IPv4 address released.
    pub fn release(&mut self, network: &str, owner: &Owner) -> Option<Ipv4Addr> {
        self.release6(network, owner);
        let pool = self.pools.get_mut(network)?;
        let addr = pool
            .held
            .iter()
            .find(|(_, o)| *o == owner)
            .map(|(a, _)| *a)?;
        pool.held.remove(&addr);
        Some(addr)
    }

    /// Release whatever `owner` holds on any network.
    pub fn release_everywhere(&mut self, owner: &Owner) -> Vec<(String, Ipv4Addr)> {
        let names: Vec<String> = self.pools.keys().cloned().collect();
        names
            .into_iter()
            .filter_map(|n| self.release(&n, owner).map(|a| (n, a)))
            .collect()
    }
}

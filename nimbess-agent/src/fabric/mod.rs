//! The multi-host fabric (`--store etcd://HOST:PORT[,HOST:PORT…]`): the
//! state every agent shares through etcd, and what one agent makes of it.
//!
//! Keys, all under [`ROOT`]:
//!
//! | key | value | written by |
//! |---|---|---|
//! | `/nimbess/hosts/<host>` | [`HostRecord`] (underlay address), on the host's lease | each agent, at start |
//! | `/nimbess/networks/<name>` | the `NetworkSpec` (JSON) | each agent, from its config (start, SIGHUP) |
//! | `/nimbess/addresses/<network>/<ip>` | [`AddressRecord`] (host, container, ifname) | the agent that allocated it, by compare-and-swap: created only when absent, so two hosts never hold one address |
//! | `/nimbess/ports/<host>/<port id>` | [`PortRecord`] (the port with its MAC, the host's underlay), on the host's lease | the port's host, after its ADD; deleted on DEL |
//!
//! Liveness: each agent holds an etcd lease ([`Fabric::renew`] every third
//! of its TTL); its host record and ports are attached to it, so when the
//! host dies without DEL, etcd deletes them at the lease's expiry and every
//! other host drops the remote ports (watch). Address claims are not on the
//! lease: a dead host may still use its addresses, so they stay claimed
//! until DEL or GC on that host, or until an operator releases a host that
//! is gone for good ([`forget_host`], `nimbess-agent fabric forget-host`).
//! An agent that comes back (or whose lease expired while it was cut off)
//! takes a new lease and publishes its ports again from its local state.
//!
//! Every agent watches the whole prefix ([`FabricView`] is what it has
//! seen) and programs only its own host: ports of other hosts enter its
//! model as remote ports (`Port::remote`), rendered as an egress over the
//! network's VXLAN device with static entries pointing at the port's host.
//! The local state directory stays the source of truth for the host's own
//! ports (the agent re-publishes them at start and withdraws what it no
//! longer has).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use nephrite_pipeline::{NetworkSpec, Owner, Port, PortId};
use serde::{Deserialize, Serialize};

pub mod etcd;

use etcd::{Change, Claim, Etcd, EtcdError, parse_store};

/// The prefix of every fabric key.
pub const ROOT: &str = "/nimbess/";

/// A host of the fabric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    /// Where overlay frames for the host's ports are sent.
    pub underlay: Ipv4Addr,
}

/// Who holds an address of a network, fabric-wide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressRecord {
    /// The host whose agent allocated it.
    pub host: String,
    /// Container id.
    pub container_id: String,
    /// Interface name in the container.
    pub ifname: String,
}

impl AddressRecord {
    /// The IPAM owner.
    pub fn owner(&self) -> Owner {
        Owner {
            container_id: self.container_id.clone(),
            ifname: self.ifname.clone(),
        }
    }
}

/// A port as its host publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRecord {
    /// The host's underlay address.
    pub underlay: Ipv4Addr,
    /// The port (its MAC in `facts`).
    pub port: Port,
}

/// What a fabric key names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum FabricKey {
    /// A host.
    Host(String),
    /// A network.
    Network(String),
    /// An address of a network.
    Address {
        /// The network.
        network: String,
        /// The address.
        address: Ipv4Addr,
    },
    /// A port of a host.
    Port {
        /// The host.
        host: String,
        /// The port id.
        id: PortId,
    },
}

impl FabricKey {
    /// The etcd key.
    pub fn key(&self) -> String {
        match self {
            FabricKey::Host(h) => format!("{ROOT}hosts/{h}"),
            FabricKey::Network(n) => format!("{ROOT}networks/{n}"),
            FabricKey::Address { network, address } => {
                format!("{ROOT}addresses/{network}/{address}")
            }
            FabricKey::Port { host, id } => format!("{ROOT}ports/{host}/{id}"),
        }
    }

    /// Parse an etcd key; `None` for keys that are not the fabric's.
    pub fn parse(key: &str) -> Option<FabricKey> {
        let rest = key.strip_prefix(ROOT)?;
        let (kind, rest) = rest.split_once('/')?;
        if rest.is_empty() {
            return None;
        }
        match kind {
            "hosts" => Some(FabricKey::Host(rest.to_string())),
            "networks" => Some(FabricKey::Network(rest.to_string())),
            "addresses" => {
                let (network, address) = rest.rsplit_once('/')?;
                Some(FabricKey::Address {
                    network: network.to_string(),
                    address: address.parse().ok()?,
                })
            }
            "ports" => {
                let (host, id) = rest.split_once('/')?;
                Some(FabricKey::Port {
                    host: host.to_string(),
                    id: id.to_string(),
                })
            }
            _ => None,
        }
    }
}

/// Everything the agent has seen of the fabric.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricView {
    /// Hosts by name.
    pub hosts: BTreeMap<String, HostRecord>,
    /// Networks by name.
    pub networks: BTreeMap<String, NetworkSpec>,
    /// Addresses held, by (network, address).
    pub addresses: BTreeMap<(String, Ipv4Addr), AddressRecord>,
    /// Ports by (host, port id).
    pub ports: BTreeMap<(String, PortId), PortRecord>,
}

impl FabricView {
    /// Apply one change. A value that does not parse is logged and skipped
    /// (another agent's bug must not stop this one).
    pub fn apply(&mut self, change: &Change) {
        let (key, value) = match change {
            Change::Put(e) => (e.key.as_str(), Some(e.value.as_slice())),
            Change::Delete(k) => (k.as_str(), None),
        };
        let Some(parsed) = FabricKey::parse(key) else {
            return;
        };
        fn decode<T: for<'de> Deserialize<'de>>(key: &str, value: &[u8]) -> Option<T> {
            serde_json::from_slice(value)
                .map_err(|e| tracing::warn!(key, error = %e, "fabric value ignored"))
                .ok()
        }
        match (parsed, value) {
            (FabricKey::Host(h), Some(v)) => {
                if let Some(r) = decode(key, v) {
                    self.hosts.insert(h, r);
                }
            }
            (FabricKey::Host(h), None) => {
                self.hosts.remove(&h);
            }
            (FabricKey::Network(n), Some(v)) => {
                if let Some(r) = decode(key, v) {
                    self.networks.insert(n, r);
                }
            }
            (FabricKey::Network(n), None) => {
                self.networks.remove(&n);
            }
            (FabricKey::Address { network, address }, Some(v)) => {
                if let Some(r) = decode(key, v) {
                    self.addresses.insert((network, address), r);
                }
            }
            (FabricKey::Address { network, address }, None) => {
                self.addresses.remove(&(network, address));
            }
            (FabricKey::Port { host, id }, Some(v)) => {
                if let Some(r) = decode::<PortRecord>(key, v)
                    && r.port.id == id
                {
                    self.ports.insert((host, id), r);
                }
            }
            (FabricKey::Port { host, id }, None) => {
                self.ports.remove(&(host, id));
            }
        }
    }
}

/// The outcome of claiming an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The address is ours (created now, or ours already).
    Ours,
    /// Another holder has it.
    Taken(AddressRecord),
}

/// This agent's membership of the fabric.
#[derive(Debug, Clone)]
pub struct Fabric {
    etcd: Etcd,
    host: String,
    underlay: Ipv4Addr,
    /// The current lease (shared by every clone: a renewal may replace it).
    lease: Arc<AtomicI64>,
    /// The lease's TTL in seconds, as granted.
    ttl: i64,
}

/// The outcome of a lease renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// The lease lives on.
    Alive,
    /// The lease had expired (etcd deleted this host's record and ports):
    /// a new one is held and the host record is back; the ports must be
    /// published again.
    Regranted,
}

/// Why a host could not be forgotten.
#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    /// The host's liveness record exists: its agent (or its lease) is alive.
    #[error(
        "host {0} is alive (its lease holds /nimbess/hosts/{0}): stop its agent and wait for the lease to expire"
    )]
    Alive(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] EtcdError),
}

/// What forgetting a host released.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Port records removed.
    pub ports: i64,
    /// Address claims released.
    pub addresses: usize,
}

/// Release a host that is gone for good: its address claims (handed out
/// again afterwards) and whatever port records remain. Refused while the
/// host's liveness record exists.
///
/// # Errors
/// The host is alive, or the store failed.
pub async fn forget_host(url: &str, host: &str) -> Result<Forgotten, ForgetError> {
    let etcd = Etcd::connect(url).await?;
    let (entries, _) = etcd.list(ROOT).await?;
    let mut view = FabricView::default();
    for e in &entries {
        if FabricKey::parse(&e.key) == Some(FabricKey::Host(host.to_string())) {
            return Err(ForgetError::Alive(host.to_string()));
        }
        view.apply(&Change::Put(e.clone()));
    }
    let ports = etcd.delete_prefix(&format!("{ROOT}ports/{host}/")).await?;
    let mut addresses = 0;
    for ((network, address), record) in &view.addresses {
        if record.host != host {
            continue;
        }
        let key = FabricKey::Address {
            network: network.clone(),
            address: *address,
        }
        .key();
        if etcd.delete_if(&key, json(record)).await? {
            addresses += 1;
        }
    }
    Ok(Forgotten { ports, addresses })
}

fn json<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structs cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

/// The local address this host uses to reach `endpoint` (the route's
/// source address): the default underlay address.
fn source_address_towards(url: &str) -> Result<Ipv4Addr, EtcdError> {
    let unreachable = |detail: String| EtcdError::Unreachable {
        endpoints: url.to_string(),
        detail,
    };
    let endpoints = parse_store(url)?;
    let Some(nephrite_runtime::Endpoint::Tcp { host, port, .. }) = endpoints.first() else {
        return Err(unreachable("no TCP endpoint".into()));
    };
    let target = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), *port))
        .map_err(|e| unreachable(format!("resolve {host}: {e}")))?
        .find(|a| a.is_ipv4())
        .ok_or_else(|| unreachable(format!("{host} has no IPv4 address")))?;
    let socket = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect(target).map(|()| s))
        .map_err(|e| unreachable(format!("no route to {target}: {e}")))?;
    match socket.local_addr().map(|a| a.ip()) {
        Ok(IpAddr::V4(ip)) => Ok(ip),
        other => Err(unreachable(format!(
            "no IPv4 source address towards {target}: {other:?}"
        ))),
    }
}

impl Fabric {
    /// Connect to the store and register this host. `underlay` defaults to
    /// the address this host reaches the store from.
    ///
    /// # Errors
    /// The store is unreachable or refuses the host's record.
    pub async fn join(
        url: &str,
        host: &str,
        underlay: Option<Ipv4Addr>,
        lease_ttl: i64,
    ) -> Result<Self, EtcdError> {
        let underlay = match underlay {
            Some(u) => u,
            None => source_address_towards(url)?,
        };
        let etcd = Etcd::connect(url).await?;
        let (lease, ttl) = etcd.grant(lease_ttl).await?;
        let fabric = Fabric {
            etcd,
            host: host.to_string(),
            underlay,
            lease: Arc::new(AtomicI64::new(lease)),
            ttl,
        };
        fabric.put_host().await?;
        Ok(fabric)
    }

    /// The host's liveness record, on the current lease.
    async fn put_host(&self) -> Result<(), EtcdError> {
        self.etcd
            .put_leased(
                &FabricKey::Host(self.host.clone()).key(),
                json(&HostRecord {
                    underlay: self.underlay,
                }),
                self.lease.load(Ordering::SeqCst),
            )
            .await
    }

    /// The lease's TTL in seconds, as the store granted it.
    pub fn lease_ttl(&self) -> i64 {
        self.ttl
    }

    /// Renew the lease (call every third of [`Fabric::lease_ttl`]). When it
    /// had expired, take a new one and put the host record back.
    ///
    /// # Errors
    /// The store failed (the lease may expire if this lasts).
    pub async fn renew(&self) -> Result<Renewal, EtcdError> {
        let lease = self.lease.load(Ordering::SeqCst);
        if self.etcd.keep_alive(lease).await? > 0 {
            return Ok(Renewal::Alive);
        }
        let (fresh, _) = self.etcd.grant(self.ttl).await?;
        self.lease.store(fresh, Ordering::SeqCst);
        self.put_host().await?;
        Ok(Renewal::Regranted)
    }

    /// This host's name in the fabric.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// This host's underlay address.
    pub fn underlay(&self) -> Ipv4Addr {
        self.underlay
    }

    fn address_record(&self, owner: &Owner) -> AddressRecord {
        AddressRecord {
            host: self.host.clone(),
            container_id: owner.container_id.clone(),
            ifname: owner.ifname.clone(),
        }
    }

    /// Claim `address` on `network` for `owner` (compare-and-swap: the key
    /// is created only when absent).
    ///
    /// # Errors
    /// The store failed.
    pub async fn claim(
        &self,
        network: &str,
        address: Ipv4Addr,
        owner: &Owner,
    ) -> Result<Claimed, EtcdError> {
        let key = FabricKey::Address {
            network: network.to_string(),
            address,
        }
        .key();
        let ours = self.address_record(owner);
        match self.etcd.create(&key, json(&ours)).await? {
            Claim::Created => Ok(Claimed::Ours),
            Claim::Held(value) => match serde_json::from_slice::<AddressRecord>(&value) {
                Ok(r) if r == ours => Ok(Claimed::Ours),
                Ok(r) => Ok(Claimed::Taken(r)),
                // unreadable: someone holds it all the same
                Err(_) => Ok(Claimed::Taken(AddressRecord {
                    host: "?".into(),
                    container_id: format!("unreadable record at {key}"),
                    ifname: String::new(),
                })),
            },
        }
    }

    /// Give back `address` (only while `owner` of this host holds it).
    ///
    /// # Errors
    /// The store failed.
    pub async fn release(
        &self,
        network: &str,
        address: Ipv4Addr,
        owner: &Owner,
    ) -> Result<(), EtcdError> {
        let key = FabricKey::Address {
            network: network.to_string(),
            address,
        }
        .key();
        self.etcd
            .delete_if(&key, json(&self.address_record(owner)))
            .await
            .map(drop)
    }

    /// Publish one of this host's ports.
    ///
    /// # Errors
    /// The store failed.
    pub async fn publish_port(&self, port: &Port) -> Result<(), EtcdError> {
        let key = FabricKey::Port {
            host: self.host.clone(),
            id: port.id.clone(),
        }
        .key();
        let record = PortRecord {
            underlay: self.underlay,
            port: port.clone(),
        };
        let lease = self.lease.load(Ordering::SeqCst);
        self.etcd.put_leased(&key, json(&record), lease).await
    }

    /// Withdraw one of this host's ports.
    ///
    /// # Errors
    /// The store failed.
    pub async fn withdraw_port(&self, id: &str) -> Result<(), EtcdError> {
        let key = FabricKey::Port {
            host: self.host.clone(),
            id: id.to_string(),
        }
        .key();
        self.etcd.delete(&key).await
    }

    /// Publish networks (this host's config).
    ///
    /// # Errors
    /// The store failed.
    pub async fn publish_networks(&self, specs: &[NetworkSpec]) -> Result<(), EtcdError> {
        for spec in specs {
            self.etcd
                .put(&FabricKey::Network(spec.name.clone()).key(), json(spec))
                .await?;
        }
        Ok(())
    }

    /// Read the whole fabric; returns it with the revision of the read.
    ///
    /// # Errors
    /// The store failed.
    pub async fn read(&self) -> Result<(FabricView, i64), EtcdError> {
        let (entries, revision) = self.etcd.list(ROOT).await?;
        let mut view = FabricView::default();
        for e in entries {
            view.apply(&Change::Put(e));
        }
        Ok((view, revision))
    }

    /// Changes after `revision`, in order, until the stream fails.
    ///
    /// # Errors
    /// The watch could not be created.
    pub async fn watch(
        &self,
        revision: i64,
    ) -> Result<tokio::sync::mpsc::Receiver<Result<(Vec<Change>, i64), EtcdError>>, EtcdError> {
        self.etcd.watch(ROOT, revision + 1).await
    }
}

#[cfg(test)]
mod tests;
